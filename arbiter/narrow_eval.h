#ifndef OVT_ARBITER_NARROW_EVAL_H
#define OVT_ARBITER_NARROW_EVAL_H

/* The arbiter's verdict from the narrowing (docs/arbiter.md, "Ruling on a
 * narrowed step"): once the step game awaits the verdict on step K, the
 * narrowing (OvtNarrow, docs/contract.md "Narrowing a step") either ends at
 * one block of one site's output, or with a party that lost a move, or
 * without a block. Only a run whose config has the tree stateHash (v3)
 * weighs it; everything else is the whole-step re-execution
 * (arbiter/evaluate.h), as are the ends without a block (InputsDiffer,
 * ItemsDiffer, CountsDiffer of the traces, BothSilent), a block of a state
 * tensor (stage States), and a block no valid package came for. Level 4
 * (stage Chunks): a chain leaf of a batch sum's block, recomputed from the
 * parties' chunk packages bound to the chains they posted; CountsDiffer
 * there is ruled from the count N gives (ceil(N / 128) + 1). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arbiter/decide.h"
#include "chain/narrow.h"
#include "store/store.h"

/* Seconds before the verdict's due time (less the watcher's deadline
 * margin) by which an unfinished narrowing is given up for the whole step:
 * the whole-step re-execution of the devnet's models takes seconds. The
 * chain moves the due time with every round of the narrowing
 * (OvtArbitration.extendVerdict), so this only ends a narrowing that has
 * stalled past its round's deadline. */
#define ARB_NARROW_RESERVE_S 60

typedef enum {
    ARB_NARROW_WHOLE_STEP = 0, /* rule on the whole step (arb_evaluate) */
    ARB_NARROW_WAIT,           /* the narrowing is still being played: look again later */
    ARB_NARROW_DECIDED         /* *out holds the evaluation: exec OK, its leaf the right party's leaf K */
} arb_narrow_result;

/* What the narrowing found, for the log. */
typedef struct {
    chain_narrow_outcome outcome;
    uint64_t site, block;
    bool chunked;           /* level 4: the narrowing ended Narrowed in stage Chunks, at chain leaf `chunk` */
    uint64_t chunk;
    char op[33];
    ovt_hash recomputed;    /* the recomputed leaf of the block (outcome Narrowed) */
    int packages;           /* valid packages the block was computed from (0..2) */
    int entries_replaced;   /* of those read, packages whose log entries were not the trainer's log's (0..2) */
    uint64_t log_window;    /* the block range eth_getLogs took for the narrowing's events (0: not read) */
    double seconds;         /* the block's re-execution */
} arb_narrow_finding;

/* The evaluation of game g (phase AwaitingVerdict, on step g->index) of run
 * from the narrowing n of game game_id: reads getNarrow, and once it has
 * ended at a block of a site's output, fetches both parties' block
 * packages from store (block/<claimed leaf>), keeps those that are bound to
 * the chain (the party's trace root, the run's config, step, site and
 * block; state slices proved against state K-1's tensor roots from the
 * PreviousRoots event over blocks [from_block, to_block], read back in
 * windows of log_window blocks (chain_narrow_get_evidence), batch slices
 * against the batch of step K rebuilt from the run's dataset) and
 * re-executes the block from each, rounding with the trainer's committed
 * log of step K (blob/<the narrowing's logHash>), never the package's own
 * entries (arb_block_entries_from_log); the leaf all of them give decides.
 * A log that cannot be had is ruled on the whole step.
 * wait_until: while the chain's clock is before it, an unfinished
 * narrowing is waited for (ARB_NARROW_WAIT); after it, the whole step.
 * *ended_seen (0 at first): when the caller first saw the narrowing ended;
 * until package_wait seconds after it (and before wait_until) a missing
 * package is waited for, after it the block is computed from the valid
 * ones there are (one suffices: both compute the same block).
 * note (cap bytes) says why when it is not DECIDED. Negative only for a
 * local failure (memory); node errors are returned for a retry. */
int arb_narrow_evaluate(arb_narrow_result *res, arb_eval *out, arb_narrow_finding *found, store_ctx *store,
                        const chain_narrow *n, const ovt_hash *game_id, const chain_arb_params *run,
                        const chain_arb_game *g, uint64_t now, uint64_t wait_until, uint64_t *ended_seen,
                        uint32_t package_wait, uint64_t from_block, uint64_t to_block, uint64_t log_window,
                        int threads, char *note, size_t cap) OVT_MUST_USE;

#endif
