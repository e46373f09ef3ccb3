#ifndef OVT_DP_DP_H
#define OVT_DP_DP_H

/* The processes of a data-parallel step (issue 13, docs/data-parallel.md).
 *
 * A run config with S shards (trn_run_config.shards) splits each step's batch
 * into S shards of B/S sequences (or samples). Each shard's forward and
 * backward is computed on its own and its parameter gradient rounded to the
 * grid; the S shard gradients are then averaged as one site, "grad.sum",
 * whose result is exact for any order and grouping of the S terms
 * (kernels/shard.h), so it has no band and no log entries.
 *
 * R processes (R divides S, `mpirun -np R ovt train --shards S`) share a
 * step: rank r computes shards r*S/R .. (r+1)*S/R - 1. A NULL dp_ctx is one
 * process computing every shard in order: replay, `ovt step`, `ovt audit`,
 * the arbiter, and one-process training. Everything below is collective:
 * every rank calls it, in the same order, with the same step. A rank that
 * does not arrive within the timeout given to dp_open ends the job with
 * an error that names it.
 *
 * Built with Open MPI when CMake finds it (OVT_HAVE_MPI); without it
 * dp_available() is false and dp_open fails saying so. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/rlog.h"

typedef struct dp_ctx dp_ctx;

/* What a step's log records for each shard in its shard table. */
#define DP_HOST_MAX 64
typedef struct {
    ovt_hash grad_hash;            /* SHA-256 of the shard's rounded FP32 gradient
                                      (little-endian, layout order) */
    uint32_t rank;                 /* the process that computed it */
    char host[DP_HOST_MAX]; /* that process's host name, NUL-terminated */
    float loss;                    /* the shard's mean loss (not in the table) */
} dp_shard_record;

/* Whether this build has MPI; whether this process was started by mpirun
 * (Open MPI's environment), so that `ovt train` should open a dp_ctx. */
bool dp_available(void);
bool dp_launched(void);

/* MPI_Init and this process's rank, size and host. timeout_s: how long a
 * collective waits for the other ranks before it ends the job. */
int dp_open(dp_ctx **out, double timeout_s) OVT_MUST_USE;

/* The rank timeout of every exchange from now on (testing: the hang-rank
 * fault's --fault-timeout, so that only the wait for the hung rank is
 * short). Nothing in one process. */
void dp_set_timeout(dp_ctx *dp, double timeout_s);
/* MPI_Finalize. */
void dp_close(dp_ctx *dp);
/* Ends every rank of the job now (MPI_Abort; mpirun exits non-zero), for a
 * failure that only this rank knows of (the others would wait for it at the
 * next collective until the timeout): print the error first. Does not
 * return. */
void dp_abort(dp_ctx *dp, int code);
int dp_rank(const dp_ctx *dp);
int dp_size(const dp_ctx *dp);
const char *dp_host(const dp_ctx *dp);
/* Every rank's host name, hosts[r] for r in 0 .. dp_size() - 1 (each
 * NUL-terminated, cut at DP_HOST_MAX - 1 bytes), for RUNDIR/ranks.json.
 * dp_open gathered them, so this talks to no other rank; any rank may
 * call it. With a NULL dp, hosts[0] is this machine's name. */
int dp_hosts(const dp_ctx *dp, char (*hosts)[DP_HOST_MAX]) OVT_MUST_USE;

/* Every rank fills the records of its own shards in rec[0..S); afterwards
 * every rank holds all S. */
int dp_share_shards(dp_ctx *dp, dp_shard_record *rec, uint32_t S, uint64_t step) OVT_MUST_USE;

/* The gradient sum of a sharded step (site "grad.sum", kernels/shard.h):
 * shard[0..nlocal) are this rank's shard gradients (n floats each), S the
 * step's shard count over all ranks. The ranks take the max of the
 * per-element keys (krn_shard_key) over every shard, each rank sums the
 * terms krn_shard_term(g, krn_shard_quantum(key, S)) of its own shards,
 * the ranks add those FP64 partial sums in whatever order the library picks
 * (exact by construction), each rank divides its slice by S and rounds it
 * with krn_grid_round(x, grid_bits), and the slices are gathered, so that
 * every rank ends with the same grads (n), equal bit for bit to
 * krn_grid_round(krn_shard_mean(all S shards, i), grid_bits) for every i.
 *
 * The site is exact: it has no band and adds nothing to the rounding log.
 * A zero mean is +0 whatever the signs of the shards' zeros. Rank r holds
 * shards r*S/R .. (r+1)*S/R - 1, so nlocal must be S/R; grads must not
 * overlap any shard. A NULL dp is one process holding every shard
 * (nlocal == S): the same result, computed in this process, in every build.
 *
 * Failures: S that R does not divide and an invalid grid_bits are refused
 * alike by every rank before any collective. A non-finite shard value fails
 * every rank (each sees it in the keys' max; its holder names the shard); a
 * mean that rounds past the largest finite grid value (possible only for
 * shard values off the grid) and nlocal != S/R fail the rank that sees it.
 * A failing rank still takes part in every collective and returns its error
 * (OVT_ENUMERIC or OVT_EINVAL) at the end, with grads zeroed: pass the
 * result to dp_agree, as every rank's grads are then of no use. */
int dp_grad_sum(dp_ctx *dp, float *grads, const float *const *shard, uint32_t nlocal, uint32_t S,
                    size_t n, int grid_bits, uint64_t step) OVT_MUST_USE;

/* After the step: rank 0's log becomes the merge of every rank's log
 * (sites in order; a site split over ranks in element order). Other ranks'
 * logs are left as they were. */
int dp_merge_log(dp_ctx *dp, krn_rlog *log, uint64_t step) OVT_MUST_USE;

/* Every rank holds the same stateHash after step `step`; otherwise an error
 * naming each rank that differs from rank 0. */
int dp_check_state(dp_ctx *dp, const ovt_hash *state_hash, uint64_t step) OVT_MUST_USE;

/* Every rank learns whether any rank failed (rv != 0 somewhere): returns 0
 * when all succeeded, else an error naming the first rank that failed and
 * its message. */
int dp_agree(dp_ctx *dp, int rv, uint64_t step) OVT_MUST_USE;

#endif
