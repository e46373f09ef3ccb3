#ifndef OVT_ARBITER_EVALUATE_H
#define OVT_ARBITER_EVALUATE_H

/* Fetching the disputed step's inputs and re-executing it: the arbiter's
 * only expensive work, and the only part that reads the store. */

#include <stddef.h>
#include <stdint.h>

#include "arbiter/decide.h"
#include "trainer/runner.h"
#include "store/store.h"

/* Evaluates step j = g->index of run run_id (g in phase AwaitingVerdict):
 *   j = 0: the run config (named configHash) -> the initial state (drawn
 *          from the seed, or, when the config has an init_hash, the
 *          parameters blob named by it, with m = v = 0);
 *   j > 0: the checkpoint named stateHash_{j-1} (its state must hash to
 *          it and carry the run's configHash), the dataset named
 *          datasetHash (the batch of step j is rebuilt from it by the
 *          schedule), and the trainer's rounding log named logHash_j;
 *          then step j on the cpu backend in REPLAY with that log.
 * The recomputed leaf j uses the recomputed stateHash_j, the schedule's
 * batchHash_j and the trainer's logHash_j. An unavailable input is a result
 * (out->input), not an error; note (cap bytes, may be NULL) says what was
 * wrong. Returns a negative code only when the arbiter itself failed
 * (memory, a local error); the evaluation should then be retried.
 * prep (may be NULL): a runner prepared for the run's config (cpu, REPLAY,
 * its memory written in advance; made when the dispute opened), used when
 * the state's config is its own, which it holds only while the step runs;
 * otherwise a runner of its own; the same bits either way.
 * trace (NULL: none): a fresh recorder (kernels/trace.h) the step j > 0 is
 * traced into; out->traced, trace_rc and trace_root say what came of it.
 * The trace changes no bit of the evaluation. */
int arb_evaluate(arb_eval *out, store_ctx *store, const ovt_hash *run_id, const chain_arb_params *run,
                 const chain_arb_game *g, int threads, trn_runner *prep, krn_trace *trace, char *note,
                 size_t cap) OVT_MUST_USE;

/* The bytes of the trainer's rounding log of step `step` named log_hash
 * (*buf malloc'd): built when it is the step's empty log (its bytes are
 * fixed by the step number, so no store need hold it), else fetched from
 * store, which checks them against their name; at most KRN_RLOG_MAX_FILE
 * bytes. Errors as store_get's. */
int arb_log_bytes(uint8_t **buf, size_t *len, store_ctx *store, const ovt_hash *log_hash,
                  uint64_t step) OVT_MUST_USE;

/* Which process computed shard out->shard_differs (>= 0) of step j of
 * run run_id, by the trainer's ranks.json that the run manifest names:
 * sets out->has_owner, owner_rank and owner_host, or appends to note why
 * not. A hint, never an input of the verdict; nothing here fails. */
void arb_eval_find_owner(arb_eval *out, store_ctx *store, const ovt_hash *run_id, uint64_t j, char *note,
                         size_t cap);

/* A replay dispute (docs/contract.md, "Proof of replay"): turns an
 * evaluation of step j, traced into t (arb_evaluate's trace), into the site
 * leaf of the beacon's site (its index: the beacon modulo the step's
 * sites), so that out->leaf is compared with the parties' site leaves as a
 * leaf is. Step 0 runs no site: its site hash is zero. A step whose trace
 * failed is ARB_EXEC_FAILED (no site hash can be named). */
void arb_eval_site_leaf(arb_eval *e, const ovt_hash *beacon, const krn_trace *t, const ovt_hash *run_id,
                        uint64_t step, char *note, size_t cap);

#endif
