/* The data-parallel transport (trainer/dp.h on Open MPI) under mpirun.
 *
 * Run by ctest, this program is the driver: it starts itself under mpirun
 * (tests/support/mpirun.c: root, oversubscribed, loopback) as workers
 * (`--worker SCENARIO TIMEOUT [MARKER]`) and checks how each run ended:
 *   basic     R = 1, 2, 4 (and 2, 4 with a small OVT_DP_CHUNK, so the gradient
 *             sum crosses chunk edges): every dp call on known inputs, checked
 *             on every rank (each rank's exit status is its own checks').
 *   hang      R = 4, rank 2 sleeps past a 4 s rank timeout: rank 0 names rank 2
 *             and the job ends (mpirun exits) before rank 2 wakes (it would
 *             write MARKER).
 *   hang0     R = 2, rank 0 sleeps: rank 1 gives up on rank 0 and ends the job.
 *   kill      R = 2, rank 1 kills itself (SIGKILL): the job ends with an error
 *             naming rank 1, rank 0 never gets past the collective.
 *   mismatch  R = 2, the ranks call different collectives: rank 0 says so.
 * Without MPI in this build the test is skipped (77). */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/bytes.h"
#include "kernels/rlog.h"
#include "support/mpirun.h"
#include "trainer/dp.h"

/* ---------------------------------------------------------------- worker */

/* Rank r's partial FP64 sum for element i: multiples of 2^-40 below 2^2 in
 * magnitude, so that any sum of up to 4 of them is exact in FP64 whatever the
 * order, and its nearest FP32 is known independently of the library. */
static double part(size_t i, int r)
{
    long long k = (long long)((i * 2654435761u + (size_t)r * 40503u) % 2001u) - 1000;
    return (double)k / 1024.0 + (r == 0 ? ldexp((double)(i % 3), -40) : 0.0) + ldexp((double)(r & 1), -38);
}

typedef struct {
    int R;
    size_t n;
    int fail_rank;   /* this rank's round fails (-1: none) */
    int rank;
    size_t bad_abs;  /* abs_sum values that were not the exact total */
    size_t bad_span; /* calls outside 0..n */
    size_t rounded;  /* elements this rank rounded */
} round_ctx;

static int round_nearest(void *arg, float *out, const double *sum, const double *abs_sum, size_t offset, size_t len)
{
    round_ctx *c = arg;
    if (offset + len > c->n || len == 0)
        c->bad_span++;
    if (c->rank == c->fail_rank)
        return ovt_fail(OVT_ENUMERIC, "grad.sum element %zu is not finite (on purpose)", offset);
    for (size_t j = 0; j < len && offset + j < c->n; j++) {
        double a = 0;
        for (int r = 0; r < c->R; r++)
            a += fabs(part(offset + j, r));
        if (abs_sum[j] != a)
            c->bad_abs++;
        out[j] = (float)sum[j];
    }
    c->rounded += len;
    return 0;
}

static void test_grad_sum(trn_dp *dp, int R, int rank)
{
    size_t n = 100003;
    float *grads = malloc(n * sizeof *grads);
    double *sum = malloc(n * sizeof *sum), *abs_sum = malloc(n * sizeof *abs_sum);
    for (size_t i = 0; i < n; i++) {
        grads[i] = NAN;
        sum[i] = part(i, rank);
        abs_sum[i] = fabs(part(i, rank));
    }
    round_ctx c = {.R = R, .n = n, .fail_rank = -1, .rank = rank};
    CHECK(trn_dp_grad_sum(dp, grads, sum, abs_sum, n, round_nearest, &c, 3) == 0);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double t = 0;
        for (int r = 0; r < R; r++)
            t += part(i, r);
        float want = (float)t;
        if (memcmp(&grads[i], &want, sizeof want) != 0)
            wrong++;
    }
    CHECK_EQ_U64(wrong, 0);
    CHECK_EQ_U64(c.bad_abs, 0);
    CHECK_EQ_U64(c.bad_span, 0);
    /* rank r rounds its own share (all of it when R = 1); that the shares
     * cover every element shows in grads above */
    CHECK(c.rounded > 0 && (R > 1 ? c.rounded < n : c.rounded == n));

    /* one rank's rounding fails: it says so, the others finish, and agree
     * gives every rank that rank's error */
    for (size_t i = 0; i < n; i++) {
        sum[i] = part(i, rank);
        abs_sum[i] = fabs(part(i, rank));
    }
    round_ctx f = {.R = R, .n = n, .fail_rank = R - 1, .rank = rank};
    int rv = trn_dp_grad_sum(dp, grads, sum, abs_sum, n, round_nearest, &f, 4);
    CHECK(rank == R - 1 ? rv == OVT_ENUMERIC : rv == 0);
    int rc = trn_dp_agree(dp, rv, 4);
    CHECK(rc == OVT_ENUMERIC);
    char want[64];
    snprintf(want, sizeof want, "rank %d (host ", R - 1);
    CHECK_MSG(strstr(ovt_errmsg(), want) != NULL && strstr(ovt_errmsg(), "(on purpose)") != NULL, "%s",
              ovt_errmsg());
    free(grads);
    free(sum);
    free(abs_sum);
}

static void shard_hash(ovt_hash *h, uint32_t j, uint64_t step)
{
    char text[64];
    snprintf(text, sizeof text, "shard %u of step %llu", j, (unsigned long long)step);
    ovt_sha256(h, text, strlen(text));
}

static void test_share_shards(trn_dp *dp, int R, int rank)
{
    for (uint32_t S = (uint32_t)R; S <= 8; S *= 2) {
        trn_shard_record *rec = malloc(S * sizeof *rec);
        memset(rec, 0xEE, S * sizeof *rec);
        for (uint32_t j = (uint32_t)rank * S / (uint32_t)R; j < (uint32_t)(rank + 1) * S / (uint32_t)R; j++) {
            shard_hash(&rec[j].grad_hash, j, 6);
            rec[j].loss = 0.25f * (float)j;
        }
        CHECK(trn_dp_share_shards(dp, rec, S, 6) == 0);
        for (uint32_t j = 0; j < S; j++) {
            ovt_hash h;
            shard_hash(&h, j, 6);
            CHECK_MSG(memcmp(&h, &rec[j].grad_hash, sizeof h) == 0, "S %u shard %u", S, j);
            CHECK(rec[j].loss == 0.25f * (float)j);
        }
        free(rec);
    }
    if (R > 1) {
        /* R does not divide R + 1: every rank refuses alike, no collective */
        trn_shard_record rec[8];
        CHECK(trn_dp_share_shards(dp, rec, (uint32_t)R + 1, 6) == OVT_EINVAL);
        CHECK(strstr(ovt_errmsg(), "must divide --shards") != NULL);
    }
}

/* Rank r's part of a step's log: site 1 on rank 0 only, site 3 split over
 * the ranks in element order, site 9 on the last rank only. want_all: the
 * whole merged log instead (written element by element, not merged). */
static void fill_log(krn_rlog *log, int R, int rank, bool want_all)
{
    krn_rlog_reset(log, 5);
    if (rank == 0 || want_all) {
        CHECK(krn_rlog_add(log, 1, 10, 0, KRN_DIR_UP, 0) == 0);
        CHECK(krn_rlog_add(log, 1, 10, 5, KRN_DIR_DOWN, 0) == 0);
    }
    size_t lo = want_all ? 0 : 1000 * (size_t)rank / (size_t)R;
    size_t hi = want_all ? 1000 : 1000 * (size_t)(rank + 1) / (size_t)R;
    for (size_t i = lo; i < hi; i++) {
        if (i % 7 != 3)
            continue;
        if (i % 49 == 3)
            CHECK(krn_rlog_add(log, 3, 1000, i, KRN_DIR_VALUE, 0.5f * (float)i) == 0);
        else
            CHECK(krn_rlog_add(log, 3, 1000, i, i % 2 ? KRN_DIR_UP : KRN_DIR_DOWN, 0) == 0);
    }
    if (rank == R - 1 || want_all)
        CHECK(krn_rlog_add(log, 9, 4, 2, KRN_DIR_UP, 0) == 0);
}

static void test_merge_log(trn_dp *dp, int R, int rank)
{
    krn_rlog *log = krn_rlog_new(), *want = krn_rlog_new();
    fill_log(log, R, rank, false);
    if (rank == 0)
        fill_log(want, R, rank, true);
    else
        fill_log(want, R, rank, false); /* the other ranks keep theirs */
    CHECK(trn_dp_merge_log(dp, log, 5) == 0);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    CHECK(krn_rlog_encode(log, &a, &alen) == 0);
    CHECK(krn_rlog_encode(want, &b, &blen) == 0);
    CHECK(alen == blen && a != NULL && b != NULL && memcmp(a, b, alen) == 0);
    free(a);
    free(b);
    krn_rlog_free(log);
    krn_rlog_free(want);
}

static void test_check_state_and_agree(trn_dp *dp, int R, int rank, char (*hosts)[TRN_SHARD_HOST_MAX])
{
    ovt_hash h;
    ovt_sha256(&h, "state", 5);
    CHECK(trn_dp_check_state(dp, &h, 7) == 0);
    CHECK(trn_dp_agree(dp, 0, 7) == 0);
    if (R == 1)
        return;
    /* the last rank holds another state: every rank hears which */
    if (rank == R - 1)
        ovt_sha256(&h, "other", 5);
    CHECK(trn_dp_check_state(dp, &h, 8) == OVT_ENUMERIC);
    char want[128];
    snprintf(want, sizeof want, "rank %d (host %s) has", R - 1, hosts[R - 1]);
    CHECK_MSG(strstr(ovt_errmsg(), want) != NULL, "%s", ovt_errmsg());
    snprintf(want, sizeof want, "rank %d (host", R - 2 > 0 ? R - 2 : 1);
    if (R > 2)
        CHECK(strstr(ovt_errmsg(), want) == NULL);
    /* ranks 1 and R-1 fail: every rank gets rank 1's code and message */
    int rv = 0;
    if (rank == 1)
        rv = ovt_fail(OVT_EIO, "the disk is full (on purpose, rank 1)");
    else if (rank == R - 1)
        rv = ovt_fail(OVT_EINVAL, "something else (rank %d)", rank);
    CHECK(trn_dp_agree(dp, rv, 9) == OVT_EIO);
    snprintf(want, sizeof want, "step 9: rank 1 (host %s) failed: the disk is full (on purpose, rank 1)", hosts[1]);
    CHECK_MSG(strcmp(ovt_errmsg(), want) == 0, "%s", ovt_errmsg());
}

static int worker(const char *scenario, double timeout_s, const char *marker)
{
    trn_dp *dp = NULL;
    if (trn_dp_open(&dp, timeout_s) != 0) {
        fprintf(stderr, "trn_dp_open: %s\n", ovt_errmsg());
        return 1;
    }
    int R = trn_dp_size(dp), rank = trn_dp_rank(dp);
    char(*hosts)[TRN_SHARD_HOST_MAX] = calloc((size_t)R, sizeof *hosts);
    CHECK(trn_dp_hosts(dp, hosts) == 0);
    CHECK(strcmp(hosts[rank], trn_dp_host(dp)) == 0 && hosts[rank][0] != '\0');
    for (int r = 0; r < R; r++)
        CHECK(hosts[r][0] != '\0' && memchr(hosts[r], '\0', TRN_SHARD_HOST_MAX) != NULL);

    ovt_hash h;
    ovt_sha256(&h, "state", 5);
    if (strcmp(scenario, "basic") == 0) {
        CHECK(trn_dp_launched());
        test_share_shards(dp, R, rank);
        test_grad_sum(dp, R, rank);
        test_merge_log(dp, R, rank);
        test_check_state_and_agree(dp, R, rank, hosts);
    } else if (strcmp(scenario, "hang") == 0 || strcmp(scenario, "hang0") == 0) {
        int sleeper = strcmp(scenario, "hang") == 0 ? 2 : 0;
        if (rank == sleeper) {
            sleep(3600);
            FILE *f = fopen(marker, "w");
            if (f)
                fclose(f);
        }
        CHECK(trn_dp_check_state(dp, &h, 7) == 0);
    } else if (strcmp(scenario, "kill") == 0) {
        if (rank == 1)
            raise(SIGKILL);
        CHECK(trn_dp_check_state(dp, &h, 7) == 0);
        FILE *f = fopen(marker, "w");
        if (f)
            fclose(f);
    } else if (strcmp(scenario, "mismatch") == 0) {
        if (rank == 1)
            CHECK(trn_dp_agree(dp, 0, 7) == 0);
        else
            CHECK(trn_dp_check_state(dp, &h, 7) == 0);
    }
    free(hosts);
    trn_dp_close(dp);
    printf("rank %d of %d (%s): ", rank, R, scenario);
    return check_done();
}

/* ---------------------------------------------------------------- driver */

static char self[4096];

static int run(int np, const char *chunk, const char *scenario, const char *timeout, const char *marker, char **out)
{
    char chunk_env[64];
    char *extra[3] = {NULL};
    if (chunk != NULL) {
        snprintf(chunk_env, sizeof chunk_env, "OVT_DP_CHUNK=%s", chunk);
        extra[0] = "-x";
        extra[1] = chunk_env;
    }
    char *argv[] = {self, "--worker", (char *)scenario, (char *)timeout, (char *)(marker ? marker : "-"), NULL};
    return tsup_mpirun(np, extra, argv, out);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--worker") == 0)
        return worker(argv[2], atof(argv[3]), argc >= 5 ? argv[4] : "-");
    if (!trn_dp_available() || tsup_mpirun_path() == NULL) {
        printf("skipped: this build has no MPI (install libopenmpi-dev, scripts/setup.sh)\n");
        return 77;
    }
    CHECK(!trn_dp_launched());
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    char dir[] = "/tmp/ovt-dp-mpi-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char marker[256];
    char *out = NULL;

    int nps[] = {1, 2, 4};
    for (size_t i = 0; i < 3; i++) {
        CHECK_MSG(run(nps[i], NULL, "basic", "120", NULL, &out) == 0, "basic, R = %d", nps[i]);
        free(out);
    }
    CHECK_MSG(run(2, "4099", "basic", "120", NULL, &out) == 0, "basic, R = 2, chunk 4099");
    free(out);
    CHECK_MSG(run(4, "777", "basic", "120", NULL, &out) == 0, "basic, R = 4, chunk 777");
    free(out);

    /* a rank that hangs is named, and the job ends before it would wake */
    snprintf(marker, sizeof marker, "%s/hang-woke", dir);
    CHECK(run(4, NULL, "hang", "4", marker, &out) != 0);
    /* "rank 2 (host" alone, or within "ranks 1 (host ...), 2 (host" should a
     * loaded machine also hold back another rank for the whole timeout */
    CHECK(out != NULL && (strstr(out, "rank 2 (host") != NULL || strstr(out, ", 2 (host") != NULL) &&
          strstr(out, "did not arrive at the stateHash check") != NULL);
    CHECK(!exists(marker));
    free(out);
    snprintf(marker, sizeof marker, "%s/hang0-woke", dir);
    CHECK(run(2, NULL, "hang0", "1", marker, &out) != 0);
    CHECK(out != NULL && strstr(out, "for rank 0 (host") != NULL && strstr(out, "hung or gone") != NULL);
    CHECK(!exists(marker));
    free(out);

    /* a rank killed with SIGKILL ends the job; the other never passes the
     * collective (it would write the marker), within the rank timeout or
     * earlier when mpirun notices the death itself */
    snprintf(marker, sizeof marker, "%s/kill-passed", dir);
    CHECK(run(2, NULL, "kill", "100", marker, &out) != 0);
    CHECK(out != NULL && strstr(out, "rank 1") != NULL);
    CHECK(!exists(marker));
    free(out);

    CHECK(run(2, NULL, "mismatch", "60", NULL, &out) != 0);
    CHECK(out != NULL && strstr(out, "rank 1 is at call 2 (the failure check, step 7") != NULL &&
          strstr(out, "do not run the same program") != NULL);
    free(out);

    rmdir(dir);
    return check_done();
}
