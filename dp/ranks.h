#ifndef OVT_DP_RANKS_H
#define OVT_DP_RANKS_H

/* Which process computed which shard (docs/data-parallel.md, "ranks.json").
 *
 * A sharded run's log commits to each shard's gradient hash, identical for
 * any process count; which process (rank, host) computed a shard is not
 * part of any hash. The run directory records it in ranks.json, one segment
 * per stretch of steps run with the same processes:
 *   {"version": 1, "shards": S,
 *    "segments": [{"from_step": 1, "processes": R, "hosts": ["h0", ...]}, ...]}
 * Step k belongs to the last segment with from_step <= k; in it rank r of R
 * computed shards r*S/R .. (r+1)*S/R - 1. A hint, like the shard table: an
 * arbiter that names a rank from it says so. */

#include <stdint.h>

#include "common/err.h"
#include "dp/dp.h"

/* The largest ranks.json a reader accepts (a run's own file, or one
 * fetched from a store: dp_ranks_owner's callers cap it at this). */
#define DP_RANKS_MAX_FILE ((size_t)1 << 22)

typedef struct {
    uint32_t rank;
    char host[DP_HOST_MAX];
} dp_shard_owner;

/* Records in DIR/ranks.json that steps from_step on ran on R processes on
 * hosts[0..R) for a run of S shards: segments at or after from_step are
 * dropped (a resumed run does those steps again), then this one is added
 * unless the last one left already says the same. Written atomically. */
int dp_ranks_record(const char *dir, uint32_t S, uint64_t from_step, int R,
                     const char (*hosts)[DP_HOST_MAX]) OVT_MUST_USE;

/* Who computed shard `shard` of step `step`, from ranks.json's text (len
 * bytes; untrusted: every malformation is OVT_EFORMAT). OVT_ENOTFOUND when
 * no segment covers the step. */
int dp_ranks_owner(dp_shard_owner *out, const char *json, size_t len, uint64_t step,
                    uint32_t shard) OVT_MUST_USE;

/* The same from DIR/ranks.json (OVT_ENOTFOUND when the file is absent). */
int dp_ranks_owner_in(dp_shard_owner *out, const char *dir, uint64_t step, uint32_t shard) OVT_MUST_USE;

#endif
