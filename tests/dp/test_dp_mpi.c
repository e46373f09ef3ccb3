/* The data-parallel transport (dp/dp.h on Open MPI) under mpirun.
 *
 * Run by ctest, this program is the driver: it starts itself under mpirun
 * (tests/support/mpirun.c: root, oversubscribed, loopback) as workers
 * (`--worker SCENARIO TIMEOUT [MARKER]`) and checks how each run ended:
 *   basic     R = 1, 2, 4 (and 2, 4 with a small OVT_DP_CHUNK, so the gradient
 *             sum crosses chunk edges): every dp call on known inputs, checked
 *             on every rank (each rank's exit status is its own checks'); the
 *             gradient sum of S = 4 and 8 shards of adversarial data
 *             (tests/support/shard_data.h) bit for bit against krn_shard_mean
 *             over all S shards in one process, and its failures (a NaN, a
 *             rank with too few shards, means past the grid).
 *   hang      R = 4, rank 2 sleeps past a 4 s rank timeout: rank 0 names rank 2
 *             and the job ends (mpirun exits) before rank 2 wakes (it would
 *             write MARKER).
 *   hang0     R = 2, rank 0 sleeps: rank 1 gives up on rank 0 and ends the job.
 *   kill      R = 2, rank 1 kills itself (SIGKILL): the job ends with an error
 *             naming rank 1, rank 0 never gets past the collective.
 *   mismatch  R = 2, the ranks call different collectives: rank 0 says so.
 * The gradient sum with a NULL dp (one process) is checked first, in every
 * build; without MPI the rest is skipped (77). */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/bytes.h"
#include "kernels/grid.h"
#include "kernels/rlog.h"
#include "kernels/shard.h"
#include "support/mpirun.h"
#include "support/shard_data.h"
#include "dp/dp.h"

/* ---------------------------------------------------------------- worker */

/* The gradient sum's data (tests/support/shard_data.h): shard s of S,
 * element i. For a grid narrower than 32 bits the HUGE elements (FLT_MAX is
 * off such a grid, and their mean would round past the grid's largest
 * value) become NORMAL ones unless keep_huge. */
static float shard_value(uint32_t S, uint32_t s, size_t i, int grid_bits, bool keep_huge)
{
    if (grid_bits < 32 && !keep_huge && i % TSD_KINDS == TSD_HUGE)
        return tsd_value(3, S, s, i - TSD_HUGE + TSD_NORMAL);
    return tsd_value(3, S, s, i);
}

/* Shards first .. first + count - 1 of S, n elements each. */
static float **make_shards(uint32_t S, uint32_t first, uint32_t count, size_t n, int grid_bits, bool keep_huge)
{
    float **g = calloc(count ? count : 1, sizeof *g);
    for (uint32_t j = 0; j < count; j++) {
        g[j] = malloc(n * sizeof *g[j]);
        for (size_t i = 0; i < n; i++)
            g[j][i] = shard_value(S, first + j, i, grid_bits, keep_huge);
    }
    return g;
}

static void free_shards(float **g, uint32_t count)
{
    for (uint32_t j = 0; j < count; j++)
        free(g[j]);
    free(g);
}

/* The independent result: every shard in this process, krn_shard_mean
 * element by element, rounded to the grid. */
static float *reference_sum(uint32_t S, size_t n, int grid_bits, bool keep_huge)
{
    float **all = make_shards(S, 0, S, n, grid_bits, keep_huge);
    float *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++)
        want[i] = krn_grid_round(krn_shard_mean((const float *const *)all, S, i), grid_bits);
    free_shards(all, S);
    return want;
}

static size_t count_differing(const float *a, const float *b, size_t n)
{
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    return wrong;
}

static bool all_zero(const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] != 0 || signbit(g[i]))
            return false;
    return true;
}

#define SUM_N 100003

/* Every rank's gathered grads equal, bit for bit, the one-process
 * reference over all S shards; so does a NULL dp given all of them. */
static void check_grad_sum(dp_ctx *dp, int R, int rank, uint32_t S, int grid_bits, uint64_t step)
{
    size_t n = SUM_N;
    uint32_t own = S / (uint32_t)R;
    float **mine = make_shards(S, (uint32_t)rank * own, own, n, grid_bits, false);
    float *want = reference_sum(S, n, grid_bits, false);
    float *grads = malloc(n * sizeof *grads);
    for (size_t i = 0; i < n; i++)
        grads[i] = NAN;
    int rv = dp_grad_sum(dp, grads, (const float *const *)mine, own, S, n, grid_bits, step);
    CHECK_MSG(rv == 0, "S %u, b %d: %s", S, grid_bits, ovt_errmsg());
    CHECK_MSG(count_differing(grads, want, n) == 0, "S %u, b %d, R %d: %zu elements differ from the reference", S,
              grid_bits, R, count_differing(grads, want, n));
    free(grads);
    free(want);
    free_shards(mine, own);
}

/* A NULL dp: one process, every shard (also in a build without MPI). */
static void test_grad_sum_one_process(void)
{
    static const uint32_t Ss[] = {1, 3, 4, 6, 8};
    size_t n = 20011;
    float *grads = malloc(n * sizeof *grads);
    for (size_t j = 0; j < sizeof Ss / sizeof Ss[0]; j++)
        for (int b = 24; b <= 32; b += 8) {
            uint32_t S = Ss[j];
            float **all = make_shards(S, 0, S, n, b, false);
            float *want = reference_sum(S, n, b, false);
            CHECK(dp_grad_sum(NULL, grads, (const float *const *)all, S, S, n, b, 1) == 0);
            CHECK_MSG(count_differing(grads, want, n) == 0, "NULL dp, S %u, b %d", S, b);
            free(want);
            free_shards(all, S);
        }
    float **all = make_shards(4, 0, 4, n, 32, false);
    /* not every shard, a bad grid, no shards */
    CHECK(dp_grad_sum(NULL, grads, (const float *const *)all, 2, 4, n, 32, 1) == OVT_EINVAL);
    CHECK(dp_grad_sum(NULL, grads, (const float *const *)all, 4, 4, n, 40, 1) == OVT_EINVAL);
    CHECK(dp_grad_sum(NULL, grads, (const float *const *)all, 0, 0, n, 32, 1) == OVT_EINVAL);
    /* a non-finite value: named, grads zeroed */
    all[2][777] = INFINITY;
    CHECK(dp_grad_sum(NULL, grads, (const float *const *)all, 4, 4, n, 32, 1) == OVT_ENUMERIC);
    CHECK_MSG(strstr(ovt_errmsg(), "shard 2's gradient element 777 is not finite") != NULL, "%s", ovt_errmsg());
    CHECK(all_zero(grads, n));
    free_shards(all, 4);
    /* FLT_MAX's mean past the 24-bit grid */
    all = make_shards(4, 0, 4, n, 24, true);
    CHECK(dp_grad_sum(NULL, grads, (const float *const *)all, 4, 4, n, 24, 1) == OVT_ENUMERIC);
    CHECK_MSG(strstr(ovt_errmsg(), "rounds past the largest finite value of the 24-bit grid") != NULL, "%s",
              ovt_errmsg());
    free_shards(all, 4);
    free(grads);
}

static void test_grad_sum(dp_ctx *dp, int R, int rank)
{
    uint64_t step = 3;
    for (uint32_t S = 4; S <= 8; S *= 2) {
        check_grad_sum(dp, R, rank, S, 32, step++);
        check_grad_sum(dp, R, rank, S, 24, step++);
    }
    size_t n = SUM_N;
    uint32_t S = 8, own = S / (uint32_t)R;
    float **mine = make_shards(S, (uint32_t)rank * own, own, n, 32, false);
    float *grads = malloc(n * sizeof *grads);
    char want[160];

    /* a NaN in one shard of the last rank: every rank fails (the keys' max
     * shows it to all), the holder names the shard, all finish the sum */
    uint32_t bad_shard = S - 1;
    if (rank == R - 1)
        mine[own - 1][54321] = NAN;
    int rv = dp_grad_sum(dp, grads, (const float *const *)mine, own, S, n, 32, 20);
    CHECK(rv == OVT_ENUMERIC);
    CHECK(all_zero(grads, n));
    if (rank == R - 1)
        snprintf(want, sizeof want, "shard %u's gradient element 54321 is not finite", bad_shard);
    else
        snprintf(want, sizeof want, "gradient element 54321 is not finite in a shard of another process");
    CHECK_MSG(strstr(ovt_errmsg(), want) != NULL, "%s", ovt_errmsg());
    CHECK(dp_agree(dp, rv, 20) == OVT_ENUMERIC);
    CHECK_MSG(strstr(ovt_errmsg(), "rank 0 (host ") != NULL, "%s", ovt_errmsg());
    if (rank == R - 1)
        mine[own - 1][54321] = shard_value(S, bad_shard, 54321, 32, false);

    /* the last rank holds one shard too few: it fails, takes part all the
     * same, and agree names it on every rank */
    if (own >= 2) {
        rv = dp_grad_sum(dp, grads, (const float *const *)mine, rank == R - 1 ? own - 1 : own, S, n, 32, 21);
        CHECK(rank == R - 1 ? rv == OVT_EINVAL : rv == 0);
        CHECK(dp_agree(dp, rv, 21) == OVT_EINVAL);
        snprintf(want, sizeof want, "rank %d (host ", R - 1);
        CHECK_MSG(strstr(ovt_errmsg(), want) != NULL && strstr(ovt_errmsg(), "not S/R") != NULL, "%s",
                  ovt_errmsg());
    }

    /* config errors are refused alike by every rank, without a collective */
    if (R > 1) {
        CHECK(dp_grad_sum(dp, grads, (const float *const *)mine, own, (uint32_t)R + 1, n, 32, 22) == OVT_EINVAL);
        CHECK(strstr(ovt_errmsg(), "must divide --shards") != NULL);
    }
    CHECK(dp_grad_sum(dp, grads, (const float *const *)mine, own, S, n, 23, 22) == OVT_EINVAL);

    /* shard values off the 24-bit grid (FLT_MAX): the ranks whose slices
     * hold such means fail, the others finish, agree stops them all */
    free_shards(mine, own);
    mine = make_shards(S, (uint32_t)rank * own, own, n, 24, true);
    rv = dp_grad_sum(dp, grads, (const float *const *)mine, own, S, n, 24, 23);
    CHECK(rv == 0 || rv == OVT_ENUMERIC);
    if (rv != 0)
        CHECK_MSG(strstr(ovt_errmsg(), "rounds past the largest finite value") != NULL, "%s", ovt_errmsg());
    CHECK(dp_agree(dp, rv, 23) == OVT_ENUMERIC);
    CHECK_MSG(strstr(ovt_errmsg(), "rounds past the largest finite value") != NULL, "%s", ovt_errmsg());
    free_shards(mine, own);
    free(grads);
}

static void shard_hash(ovt_hash *h, uint32_t j, uint64_t step)
{
    char text[64];
    snprintf(text, sizeof text, "shard %u of step %llu", j, (unsigned long long)step);
    ovt_sha256(h, text, strlen(text));
}

static void test_share_shards(dp_ctx *dp, int R, int rank)
{
    for (uint32_t S = (uint32_t)R; S <= 8; S *= 2) {
        dp_shard_record *rec = malloc(S * sizeof *rec);
        memset(rec, 0xEE, S * sizeof *rec);
        for (uint32_t j = (uint32_t)rank * S / (uint32_t)R; j < (uint32_t)(rank + 1) * S / (uint32_t)R; j++) {
            shard_hash(&rec[j].grad_hash, j, 6);
            rec[j].loss = 0.25f * (float)j;
        }
        CHECK(dp_share_shards(dp, rec, S, 6) == 0);
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
        dp_shard_record rec[8];
        CHECK(dp_share_shards(dp, rec, (uint32_t)R + 1, 6) == OVT_EINVAL);
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

static void test_merge_log(dp_ctx *dp, int R, int rank)
{
    krn_rlog *log = krn_rlog_new(), *want = krn_rlog_new();
    fill_log(log, R, rank, false);
    if (rank == 0)
        fill_log(want, R, rank, true);
    else
        fill_log(want, R, rank, false); /* the other ranks keep theirs */
    CHECK(dp_merge_log(dp, log, 5) == 0);
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

static void test_check_state_and_agree(dp_ctx *dp, int R, int rank, char (*hosts)[DP_HOST_MAX])
{
    ovt_hash h;
    ovt_sha256(&h, "state", 5);
    CHECK(dp_check_state(dp, &h, 7) == 0);
    CHECK(dp_agree(dp, 0, 7) == 0);
    if (R == 1)
        return;
    /* the last rank holds another state: every rank hears which */
    if (rank == R - 1)
        ovt_sha256(&h, "other", 5);
    CHECK(dp_check_state(dp, &h, 8) == OVT_ENUMERIC);
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
    CHECK(dp_agree(dp, rv, 9) == OVT_EIO);
    snprintf(want, sizeof want, "step 9: rank 1 (host %s) failed: the disk is full (on purpose, rank 1)", hosts[1]);
    CHECK_MSG(strcmp(ovt_errmsg(), want) == 0, "%s", ovt_errmsg());
}

static int worker(const char *scenario, double timeout_s, const char *marker)
{
    dp_ctx *dp = NULL;
    if (dp_open(&dp, timeout_s) != 0) {
        fprintf(stderr, "dp_open: %s\n", ovt_errmsg());
        return 1;
    }
    int R = dp_size(dp), rank = dp_rank(dp);
    char(*hosts)[DP_HOST_MAX] = calloc((size_t)R, sizeof *hosts);
    CHECK(dp_hosts(dp, hosts) == 0);
    CHECK(strcmp(hosts[rank], dp_host(dp)) == 0 && hosts[rank][0] != '\0');
    for (int r = 0; r < R; r++)
        CHECK(hosts[r][0] != '\0' && memchr(hosts[r], '\0', DP_HOST_MAX) != NULL);

    ovt_hash h;
    ovt_sha256(&h, "state", 5);
    if (strcmp(scenario, "basic") == 0) {
        CHECK(dp_launched());
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
        CHECK(dp_check_state(dp, &h, 7) == 0);
    } else if (strcmp(scenario, "kill") == 0) {
        if (rank == 1)
            raise(SIGKILL);
        CHECK(dp_check_state(dp, &h, 7) == 0);
        FILE *f = fopen(marker, "w");
        if (f)
            fclose(f);
    } else if (strcmp(scenario, "mismatch") == 0) {
        if (rank == 1)
            CHECK(dp_agree(dp, 0, 7) == 0);
        else
            CHECK(dp_check_state(dp, &h, 7) == 0);
    }
    free(hosts);
    dp_close(dp);
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
    /* the one-process gradient sum needs no MPI: checked in every build */
    CHECK_RUN(test_grad_sum_one_process());
    if (!dp_available() || tsup_mpirun_path() == NULL) {
        printf("skipped: this build has no MPI (install libopenmpi-dev, scripts/setup.sh); ");
        return check_done() != 0 ? 1 : 77;
    }
    CHECK(!dp_launched());
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
