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
 * arbiter that names a rank from it says so.
 *
 * The file is read only in the exact form the writer gives it (jansson's
 * two-space indent, keys in the order above, no trailing newline; host
 * names of [A-Za-z0-9._-]): any other byte is OVT_EFORMAT, so a flipped bit
 * is either refused or yields another well-formed record, which the
 * binding catches. The binding: RUNDIR/ranks.json.sha256, written with
 * every ranks.json, holds its SHA-256 (`sha256sum` format); a reader of a
 * run directory refuses a ranks.json whose hash is not that one. A store's
 * copy is bound by the manifest's "ranks" (its store name). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "dp/dp.h"

/* The largest ranks.json a reader accepts (a run's own file, or one
 * fetched from a store: dp_ranks_owner's callers cap it at this). */
#define DP_RANKS_MAX_FILE ((size_t)1 << 22)

typedef struct {
    uint32_t rank;
    char host[DP_HOST_MAX];
    bool bound; /* dp_ranks_owner_in: the file's hash is ranks.json.sha256's (false: a run
                   directory from before that file; dp_ranks_owner: the caller checks the bytes) */
} dp_shard_owner;

typedef struct {
    uint64_t from_step;        /* >= 1, increasing over the segments */
    uint32_t processes;        /* R, dividing the shard count */
    char (*hosts)[DP_HOST_MAX]; /* R names (malloc'd) */
} dp_ranks_segment;

/* ranks.json parsed (dp_ranks_parse) */
typedef struct {
    uint32_t shards;
    size_t count;
    dp_ranks_segment *segs;
} dp_ranks;

/* Parses ranks.json's text (len bytes; untrusted): OVT_EFORMAT, naming
 * ranks.json, for anything but the writer's canonical form of a valid
 * record (at least one segment; consecutive segments differ). */
int dp_ranks_parse(dp_ranks *out, const char *text, size_t len) OVT_MUST_USE;

/* The canonical text of *r (malloc'd, *len bytes, NUL-terminated). */
int dp_ranks_text(const dp_ranks *r, char **text, size_t *len) OVT_MUST_USE;
void dp_ranks_free(dp_ranks *r);

/* Who computed shard `shard` of step `step` per *r: OVT_ENOTFOUND when no
 * segment covers the step or the shard is not one of the run's. */
int dp_ranks_lookup(dp_shard_owner *out, const dp_ranks *r, uint64_t step, uint32_t shard) OVT_MUST_USE;

/* Records in DIR/ranks.json that steps from_step on ran on R processes on
 * hosts[0..R) for a run of S shards: segments at or after from_step are
 * dropped (a resumed run does those steps again), then this one is added
 * unless the last one left already says the same. An existing file must
 * pass dp_ranks_load. Host bytes outside [A-Za-z0-9._-] are written as '_'
 * (an empty name as "_"). Written atomically, then ranks.json.sha256. */
int dp_ranks_record(const char *dir, uint32_t S, uint64_t from_step, int R,
                     const char (*hosts)[DP_HOST_MAX]) OVT_MUST_USE;

/* DIR/ranks.json's bytes (malloc'd) once they are checked: OVT_ENOTFOUND
 * when the file is absent; OVT_ECRYPTO when DIR/ranks.json.sha256 names
 * another hash; OVT_EFORMAT when that file or ranks.json is malformed.
 * *bound: whether ranks.json.sha256 exists (a run directory from before it
 * has none; its ranks.json is still parsed strictly). */
int dp_ranks_load(const char *dir, uint8_t **text, size_t *len, bool *bound) OVT_MUST_USE;

/* Who computed shard `shard` of step `step`, from ranks.json's text (len
 * bytes; untrusted: dp_ranks_parse). OVT_ENOTFOUND when no segment covers
 * the step. */
int dp_ranks_owner(dp_shard_owner *out, const char *json, size_t len, uint64_t step,
                    uint32_t shard) OVT_MUST_USE;

/* The same from DIR/ranks.json, checked by dp_ranks_load first. */
int dp_ranks_owner_in(dp_shard_owner *out, const char *dir, uint64_t step, uint32_t shard) OVT_MUST_USE;

#endif
