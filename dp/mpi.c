/* dp/dp.h on MPI (Open MPI; docs/data-parallel.md, "The transport").
 *
 * Every collective starts with an arrival exchange on its own communicator:
 * each rank sends rank 0 a note (which call, which step, how many elements)
 * and waits for rank 0's go; rank 0 waits for every note. So rank 0 knows,
 * when the rank timeout passes, exactly which ranks did not arrive, and
 * checks that every rank is at the same call of the same step. Then the data
 * moves in non-blocking collectives (MPI_I*), polled with MPI_Test up to the
 * timeout. Whoever times out prints an error naming what it waited for and
 * calls MPI_Abort, which ends every rank of the job: no rank waits past its
 * deadline. Non-root ranks give rank 0 twice the timeout, so that its
 * diagnosis (which rank) comes first unless rank 0 is the one missing.
 *
 * Only the calling thread uses MPI (MPI_THREAD_FUNNELED): the kernels' own
 * thread pool never does. */
#include "dp/dp.h"
#include "dp/sum.h"

#include <mpi.h>

#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The calls a note names (the order of dp.h). */
enum { OP_OPEN = 1, OP_SHARE_SHARDS, OP_GRAD_SUM, OP_MERGE_LOG, OP_CHECK_STATE, OP_AGREE };

static const char *op_name(uint64_t op)
{
    switch (op) {
    case OP_OPEN: return "the start (dp_open)";
    case OP_SHARE_SHARDS: return "the shard table exchange";
    case OP_GRAD_SUM: return "the gradient sum";
    case OP_MERGE_LOG: return "the rounding log merge";
    case OP_CHECK_STATE: return "the stateHash check";
    case OP_AGREE: return "the failure check";
    default: return "an unknown call";
    }
}

enum { TAG_ARRIVE = 1, TAG_GO = 2, TAG_LOG_LEN = 3, TAG_LOG = 4 };

/* grad_sum reduces at most this many elements per collective (8 MiB of
 * FP64 partial sums, 1 MiB of keys): Open MPI 4.1's non-blocking reduce-scatter over TCP ran about ten
 * times slower per element with chunks of 2M elements and more
 * (bench/bench_dp.c, docs/data-parallel.md). OVT_DP_CHUNK overrides it
 * (tests use small ones to cross chunk edges). */
#define DP_CHUNK_DEFAULT ((size_t)1 << 20)
/* The longest failure message dp_agree passes on. */
#define DP_AGREE_MSG 2048
/* A rank that sends no log in dp_merge_log sends this length. */
#define DP_NO_LOG UINT64_MAX

struct dp_ctx {
    MPI_Comm comm;  /* the data */
    MPI_Comm notes; /* the arrival notes */
    int rank, size;
    double timeout_s;
    uint64_t seq;   /* collectives called so far */
    size_t chunk;
    char (*hosts)[DP_HOST_MAX];
    bool we_init;   /* MPI_Init was ours, so MPI_Finalize is too */
};

bool dp_available(void) { return true; }

bool dp_launched(void)
{
    /* Open MPI 4 (ORTE) sets the first, Open MPI 5 (PRRTE) both. */
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints why this rank ends the job and ends it: MPI_Abort stops every rank
 * (mpirun kills them), so none waits on a collective that cannot finish. */
static void OVT_PRINTF(2, 3) die(const dp_ctx *dp, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ovt: error: rank %d (host %s): %s; ending the job\n", dp->rank, dp->hosts[dp->rank], msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return */
}

/* Polls reqs until all completed (true) or the deadline passed (false).
 * Non-blocking collectives progress only inside MPI's test calls, so while
 * data moves (patient false: every rank has arrived) the loop polls without
 * pause, yielding the core between polls. While waiting for other ranks to
 * arrive (patient true), after 50 ms it sleeps 0.2 ms between polls, so
 * that ranks waiting for a slow one leave the cores to it. */
static bool wait_until(MPI_Request *reqs, int n, double deadline, bool patient)
{
    double start = now_s();
    for (;;) {
        int done = 0;
        MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (done)
            return true;
        double t = now_s();
        if (t >= deadline)
            return false;
        if (!patient || t - start < 0.05)
            sched_yield();
        else
            nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
    }
}

/* Waits for the data of one collective, which every rank has joined. */
static void finish(const dp_ctx *dp, MPI_Request *reqs, int n, uint64_t op, uint64_t step)
{
    if (!wait_until(reqs, n, now_s() + dp->timeout_s, false))
        die(dp, "%s at step %llu did not complete within %g s after every rank arrived: a rank died or the "
                "network between the ranks failed",
            op_name(op), (unsigned long long)step, dp->timeout_s);
}

/* The arrival exchange before every collective (see the top of the file). */
static void arrive(dp_ctx *dp, uint64_t op, uint64_t step, uint64_t n)
{
    uint64_t note[4] = {++dp->seq, op, step, n};
    if (dp->size == 1)
        return;
    if (dp->rank != 0) {
        uint64_t go[4];
        MPI_Request rq[2];
        MPI_Isend(note, 4, MPI_UINT64_T, 0, TAG_ARRIVE, dp->notes, &rq[0]);
        MPI_Irecv(go, 4, MPI_UINT64_T, 0, TAG_GO, dp->notes, &rq[1]);
        if (!wait_until(rq, 2, now_s() + 2 * dp->timeout_s, true))
            die(dp, "waited %g s (twice the rank timeout) at %s of step %llu for rank 0 (host %s) to see every "
                    "rank arrive: rank 0 is hung or gone",
                2 * dp->timeout_s, op_name(op), (unsigned long long)step, dp->hosts[0]);
        return;
    }
    int others = dp->size - 1;
    uint64_t (*got)[4] = calloc((size_t)others, sizeof *got);
    MPI_Request *rq = calloc((size_t)others, sizeof *rq);
    if (got == NULL || rq == NULL)
        die(dp, "out of memory for %d arrival notes", others);
    for (int r = 1; r < dp->size; r++)
        MPI_Irecv(got[r - 1], 4, MPI_UINT64_T, r, TAG_ARRIVE, dp->notes, &rq[r - 1]);
    if (!wait_until(rq, others, now_s() + dp->timeout_s, true)) {
        char missing[768] = "";
        size_t len = 0;
        int nmissing = 0;
        for (int r = 1; r < dp->size; r++) {
            int flag = 0;
            MPI_Test(&rq[r - 1], &flag, MPI_STATUS_IGNORE);
            if (flag)
                continue;
            nmissing++;
            if (len < sizeof missing - 80)
                len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d (host %s)", nmissing > 1 ? ", " : "",
                                        r, dp->hosts[r][0] ? dp->hosts[r] : "not known yet");
        }
        die(dp, "step %llu: rank%s %s did not arrive at %s within the rank timeout of %g s (hung, or too slow "
                "for the timeout)",
            (unsigned long long)step, nmissing > 1 ? "s" : "", missing, op_name(op), dp->timeout_s);
    }
    for (int r = 1; r < dp->size; r++)
        if (memcmp(got[r - 1], note, sizeof note) != 0)
            die(dp, "rank %d is at call %llu (%s, step %llu, n %llu) while rank 0 is at call %llu (%s, step %llu, "
                    "n %llu): the ranks do not run the same program",
                r, (unsigned long long)got[r - 1][0], op_name(got[r - 1][1]), (unsigned long long)got[r - 1][2],
                (unsigned long long)got[r - 1][3], (unsigned long long)note[0], op_name(op),
                (unsigned long long)step, (unsigned long long)n);
    for (int r = 1; r < dp->size; r++)
        MPI_Isend(note, 4, MPI_UINT64_T, r, TAG_GO, dp->notes, &rq[r - 1]);
    finish(dp, rq, others, op, step);
    free(rq);
    free(got);
}

void dp_set_timeout(dp_ctx *dp, double timeout_s)
{
    if (dp && timeout_s > 0)
        dp->timeout_s = timeout_s;
}

int dp_open(dp_ctx **out, double timeout_s)
{
    *out = NULL;
    if (!(timeout_s > 0) || timeout_s > 1e6)
        return ovt_fail(OVT_EINVAL, "rank timeout %g s: give a number of seconds above 0 (and below 1e6)", timeout_s);
    size_t chunk = DP_CHUNK_DEFAULT;
    const char *env = getenv("OVT_DP_CHUNK");
    if (env != NULL) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (end == env || *end != '\0' || v == 0 || v > INT_MAX)
            return ovt_fail(OVT_EINVAL, "OVT_DP_CHUNK=%s: give the gradient sum's elements per collective, "
                                        "1 to %d (or unset it)", env, INT_MAX);
        chunk = (size_t)v;
    }
    dp_ctx *dp = calloc(1, sizeof *dp);
    if (dp == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(dp);
            return ovt_fail(OVT_EIO, "MPI_Init failed: start the ranks with mpirun (docs/data-parallel.md)");
        }
        dp->we_init = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &dp->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &dp->size);
    dp->timeout_s = timeout_s;
    dp->chunk = chunk;
    dp->hosts = calloc((size_t)dp->size, sizeof *dp->hosts);
    if (dp->hosts == NULL) {
        int size = dp->size;
        free(dp);
        return ovt_fail(OVT_ENOMEM, "out of memory for %d host names", size);
    }
    if (gethostname(dp->hosts[dp->rank], DP_HOST_MAX - 1) != 0)
        snprintf(dp->hosts[dp->rank], DP_HOST_MAX, "unknown");
    dp->hosts[dp->rank][DP_HOST_MAX - 1] = '\0';

    MPI_Request rq[2];
    MPI_Comm_idup(MPI_COMM_WORLD, &dp->comm, &rq[0]);
    MPI_Comm_idup(MPI_COMM_WORLD, &dp->notes, &rq[1]);
    if (!wait_until(rq, 2, now_s() + 2 * timeout_s, true))
        die(dp, "not every one of the %d ranks started the data-parallel run within %g s (twice the rank timeout)",
            dp->size, 2 * timeout_s);
    arrive(dp, OP_OPEN, 0, (uint64_t)dp->size);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dp->hosts, DP_HOST_MAX, MPI_CHAR, dp->comm, &rq[0]);
    finish(dp, rq, 1, OP_OPEN, 0);
    *out = dp;
    return 0;
}

void dp_close(dp_ctx *dp)
{
    if (dp == NULL)
        return;
    MPI_Comm_free(&dp->comm);
    MPI_Comm_free(&dp->notes);
    if (dp->we_init)
        MPI_Finalize();
    free(dp->hosts);
    free(dp);
}

void dp_abort(dp_ctx *dp, int code)
{
    (void)dp;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code > 0 && code < 256 ? code : 1);
    abort();
}

int dp_rank(const dp_ctx *dp) { return dp ? dp->rank : 0; }
int dp_size(const dp_ctx *dp) { return dp ? dp->size : 1; }
const char *dp_host(const dp_ctx *dp) { return dp ? dp->hosts[dp->rank] : ""; }

int dp_hosts(const dp_ctx *dp, char (*hosts)[DP_HOST_MAX])
{
    if (dp == NULL) {
        memset(hosts[0], 0, DP_HOST_MAX);
        if (gethostname(hosts[0], DP_HOST_MAX - 1) != 0)
            return ovt_fail_errno(OVT_EIO, "gethostname");
        return 0;
    }
    memcpy(hosts, dp->hosts, (size_t)dp->size * sizeof *hosts);
    return 0;
}

int dp_share_shards(dp_ctx *dp, dp_shard_record *rec, uint32_t S, uint64_t step)
{
    /* S is the run config's: the same on every rank, so every rank fails alike */
    if (S == 0 || S % (uint32_t)dp->size != 0)
        return ovt_fail(OVT_EINVAL, "%u shards cannot be split evenly over %d processes: the number of processes "
                                    "(mpirun -np) must divide --shards", S, dp->size);
    size_t bytes = (size_t)(S / (uint32_t)dp->size) * sizeof *rec;
    if (bytes > INT_MAX)
        return ovt_fail(OVT_EINVAL, "%u shards: too many for one exchange", S);
    arrive(dp, OP_SHARE_SHARDS, step, S);
    MPI_Request rq;
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rec, (int)bytes, MPI_BYTE, dp->comm, &rq);
    finish(dp, &rq, 1, OP_SHARE_SHARDS, step);
    return 0;
}

int dp_grad_sum(dp_ctx *dp, float *grads, const float *const *shard, uint32_t nlocal, uint32_t S, size_t n,
                    int grid_bits, uint64_t step)
{
    if (dp == NULL)
        return dp_sum_one_process(grads, shard, nlocal, S, n, grid_bits, step);
    int R = dp->size;
    /* S and grid_bits are the run config's, the same on every rank: every
     * rank refuses alike, before any collective */
    int rc = dp_sum_check(S, R, grid_bits);
    if (rc != 0) {
        memset(grads, 0, n * sizeof *grads);
        return rc;
    }
    uint32_t own = S / (uint32_t)R, first = (uint32_t)dp->rank * own;
    if (nlocal != own) {
        rc = ovt_fail(OVT_EINVAL, "step %llu: grad.sum: rank %d holds %u shards, not S/R = %u/%d = %u",
                      (unsigned long long)step, dp->rank, nlocal, S, R, own);
        nlocal = 0; /* it takes part all the same, with the neutral key 1 and terms 0 */
    }
    size_t cap = n < dp->chunk ? n : dp->chunk;
    int *counts = calloc((size_t)R, sizeof *counts);
    int *displs = calloc((size_t)R, sizeof *displs);
    uint8_t *key = malloc(cap > 0 ? cap : 1);
    double *partial = malloc((cap > 0 ? cap : 1) * sizeof *partial);
    if (counts == NULL || displs == NULL || key == NULL || partial == NULL) {
        free(counts);
        free(displs);
        free(key);
        free(partial);
        /* a rank that cannot take part ends the job rather than leave the others waiting */
        die(dp, "out of memory for the gradient sum's chunk of %zu elements", cap);
    }
    arrive(dp, OP_GRAD_SUM, step, n);
    for (size_t c0 = 0; c0 < n;) {
        size_t m = n - c0 < dp->chunk ? n - c0 : dp->chunk;
        for (int r = 0; r < R; r++) {
            size_t lo = m * (size_t)r / (size_t)R, hi = m * (size_t)(r + 1) / (size_t)R;
            displs[r] = (int)lo;
            counts[r] = (int)(hi - lo);
        }
        /* the keys' max over every shard of every rank sets each element's
         * quantum (kernels/shard.h) */
        MPI_Request rq;
        dp_sum_keys(key, shard, nlocal, c0, m);
        MPI_Iallreduce(MPI_IN_PLACE, key, (int)m, MPI_UINT8_T, MPI_MAX, dp->comm, &rq);
        finish(dp, &rq, 1, OP_GRAD_SUM, step);
        /* a non-finite value anywhere shows in the keys on every rank: all
         * of them fail (its holder names the shard) and carry on with 0 */
        size_t bad = dp_sum_first_nonfinite(key, m);
        if (bad < m && rc == 0)
            rc = dp_sum_fail_nonfinite(shard, nlocal, first, c0 + bad, step);
        /* the own shards' terms, then the ranks' FP64 partial sums added in
         * Open MPI's order, exact in any order: this rank's slice of the
         * totals lands at the start of partial (in place) */
        dp_sum_terms(partial, key, shard, nlocal, S, c0, m);
        MPI_Ireduce_scatter(MPI_IN_PLACE, partial, counts, MPI_DOUBLE, MPI_SUM, dp->comm, &rq);
        finish(dp, &rq, 1, OP_GRAD_SUM, step);
        size_t mine = (size_t)displs[dp->rank], len = (size_t)counts[dp->rank];
        int mean_rc = dp_sum_mean(grads + c0 + mine, partial, S, grid_bits, c0 + mine, len, step, rc == 0);
        rc = rc != 0 ? rc : mean_rc;
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, grads + c0, counts, displs, MPI_FLOAT, dp->comm, &rq);
        finish(dp, &rq, 1, OP_GRAD_SUM, step);
        c0 += m;
    }
    free(partial);
    free(key);
    free(counts);
    free(displs);
    if (rc != 0)
        memset(grads, 0, n * sizeof *grads);
    return rc;
}

int dp_merge_log(dp_ctx *dp, krn_rlog *log, uint64_t step)
{
    arrive(dp, OP_MERGE_LOG, step, 0);
    if (dp->size == 1)
        return 0;
    if (dp->rank != 0) {
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = 0;
        if (krn_rlog_step(log) != step)
            rc = ovt_fail(OVT_EINVAL, "rank %d's rounding log belongs to step %llu, not %llu", dp->rank,
                          (unsigned long long)krn_rlog_step(log), (unsigned long long)step);
        if (rc == 0)
            rc = krn_rlog_encode(log, &buf, &len);
        if (rc == 0 && len > KRN_RLOG_MAX_FILE)
            rc = ovt_fail(OVT_EINVAL, "rank %d's rounding log of step %llu is %zu bytes, over the format's limit",
                          dp->rank, (unsigned long long)step, len);
        uint64_t len64 = rc == 0 ? (uint64_t)len : DP_NO_LOG;
        MPI_Request rq[2];
        int nrq = 1;
        MPI_Isend(&len64, 1, MPI_UINT64_T, 0, TAG_LOG_LEN, dp->comm, &rq[0]);
        if (rc == 0)
            MPI_Isend(buf, (int)len, MPI_BYTE, 0, TAG_LOG, dp->comm, &rq[nrq++]);
        finish(dp, rq, nrq, OP_MERGE_LOG, step);
        free(buf);
        return rc;
    }
    int R = dp->size, rc = 0;
    uint64_t *lens = calloc((size_t)R, sizeof *lens);
    uint8_t **bufs = calloc((size_t)R, sizeof *bufs);
    krn_rlog **logs = calloc((size_t)R, sizeof *logs);
    MPI_Request *rq = calloc((size_t)R, sizeof *rq);
    if (lens == NULL || bufs == NULL || logs == NULL || rq == NULL)
        die(dp, "out of memory for %d rounding logs", R);
    for (int r = 1; r < R; r++)
        MPI_Irecv(&lens[r], 1, MPI_UINT64_T, r, TAG_LOG_LEN, dp->comm, &rq[r - 1]);
    finish(dp, rq, R - 1, OP_MERGE_LOG, step);
    int nrq = 0, failed = -1;
    for (int r = 1; r < R; r++) {
        if (lens[r] == DP_NO_LOG) {
            if (failed < 0)
                failed = r;
            continue;
        }
        if (lens[r] > KRN_RLOG_MAX_FILE)
            die(dp, "rank %d announced a rounding log of %llu bytes, over the format's limit", r,
                (unsigned long long)lens[r]);
        bufs[r] = malloc(lens[r] ? lens[r] : 1);
        if (bufs[r] == NULL)
            die(dp, "out of memory for rank %d's rounding log (%llu bytes)", r, (unsigned long long)lens[r]);
        MPI_Irecv(bufs[r], (int)lens[r], MPI_BYTE, r, TAG_LOG, dp->comm, &rq[nrq++]);
    }
    finish(dp, rq, nrq, OP_MERGE_LOG, step);
    if (failed >= 0)
        rc = ovt_fail(OVT_EINVAL, "step %llu: rank %d (host %s) sent no rounding log (it failed; see its error)",
                      (unsigned long long)step, failed, dp->hosts[failed]);
    logs[0] = log;
    for (int r = 1; r < R && rc == 0; r++) {
        logs[r] = krn_rlog_new();
        if (logs[r] == NULL) {
            rc = ovt_fail(OVT_ENOMEM, "out of memory");
            break;
        }
        rc = krn_rlog_decode(logs[r], bufs[r], (size_t)lens[r]);
        if (rc < 0)
            rc = ovt_fail_wrap(rc, "rank %d's rounding log of step %llu", r, (unsigned long long)step);
    }
    if (rc == 0)
        rc = krn_rlog_merge(log, (const krn_rlog *const *)logs, (size_t)R);
    if (rc < 0)
        rc = ovt_fail_wrap(rc, "merging the ranks' rounding logs of step %llu", (unsigned long long)step);
    for (int r = 1; r < R; r++) {
        krn_rlog_free(logs[r]);
        free(bufs[r]);
    }
    free(rq);
    free(logs);
    free(bufs);
    free(lens);
    return rc;
}

int dp_check_state(dp_ctx *dp, const ovt_hash *state_hash, uint64_t step)
{
    int R = dp->size;
    ovt_hash *all = calloc((size_t)R, sizeof *all);
    if (all == NULL)
        die(dp, "out of memory for %d stateHashes", R);
    arrive(dp, OP_CHECK_STATE, step, 0);
    all[dp->rank] = *state_hash;
    MPI_Request rq;
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)sizeof *all, MPI_BYTE, dp->comm, &rq);
    finish(dp, &rq, 1, OP_CHECK_STATE, step);
    char differ[1024] = "";
    size_t len = 0;
    int ndiffer = 0;
    for (int r = 1; r < R; r++) {
        if (memcmp(&all[r], &all[0], sizeof all[0]) == 0)
            continue;
        char hex[17];
        ovt_hex_encode(hex, all[r].b, 8);
        ndiffer++;
        if (len < sizeof differ - 120)
            len += (size_t)snprintf(differ + len, sizeof differ - len, "%srank %d (host %s) has %s...",
                                    ndiffer > 1 ? ", " : "", r, dp->hosts[r], hex);
    }
    int rc = 0;
    if (ndiffer > 0) {
        char hex0[17];
        ovt_hex_encode(hex0, all[0].b, 8);
        rc = ovt_fail(OVT_ENUMERIC, "after step %llu the ranks hold different states: rank 0 (host %s) has stateHash "
                                    "%s..., %s; the state of the differing rank%s is wrong (a fault on its "
                                    "machine, or a nondeterministic build)",
                      (unsigned long long)step, dp->hosts[0], hex0, differ, ndiffer > 1 ? "s" : "");
    }
    free(all);
    return rc;
}

int dp_agree(dp_ctx *dp, int rv, uint64_t step)
{
    arrive(dp, OP_AGREE, step, 0);
    int mine = rv != 0 ? dp->rank : dp->size, first = dp->size;
    MPI_Request rq;
    MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, dp->comm, &rq);
    finish(dp, &rq, 1, OP_AGREE, step);
    if (first == dp->size)
        return 0;
    struct {
        int32_t code;
        char msg[DP_AGREE_MSG];
    } what = {0};
    if (dp->rank == first) {
        what.code = rv < 0 ? rv : OVT_EINVAL;
        snprintf(what.msg, sizeof what.msg, "%s", ovt_errmsg()[0] ? ovt_errmsg() : "(no message)");
    }
    MPI_Ibcast(&what, (int)sizeof what, MPI_BYTE, first, dp->comm, &rq);
    finish(dp, &rq, 1, OP_AGREE, step);
    what.msg[sizeof what.msg - 1] = '\0';
    return ovt_fail(what.code < 0 ? what.code : OVT_EINVAL, "step %llu: rank %d (host %s) failed: %s",
                    (unsigned long long)step, first, dp->hosts[first], what.msg);
}
