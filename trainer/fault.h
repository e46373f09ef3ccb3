#ifndef OVT_TRAINER_FAULT_H
#define OVT_TRAINER_FAULT_H

/* Testing only: faults a dishonest or broken trainer could commit, injected
 * into one step of `ovt train` (--inject-fault KIND --fault-step K) so that
 * the dispute game (`ovt devnet`) has something to find. The run directory
 * then describes a run whose step K no honest replay reproduces:
 *   bitflip         after step K one bit of one parameter is flipped (a
 *                   hardware fault); training goes on from the flipped state;
 *   poisoned-batch  step K trains on the scheduled batch with every target
 *                   changed, while the step table keeps the schedule's
 *                   batchHash (the trainer claims it followed the schedule);
 *   skipped-step    step K's update is not kept: state K holds state K-1's
 *                   tensors (with step number K), log K is the log step K
 *                   writes (an empty log would be fraud under contract
 *                   version 2, a missing entry; this fault is about the
 *                   state);
 *   forged-log      log K carries one entry with the wrong direction for an
 *                   element 1.25..1.5 tau from its midpoint (an impossible
 *                   direction), and the state follows that wrong rounding
 *                   (krn_ctx_forge_next_site);
 *   omitted-log     from step K on, every log is written without its
 *                   entries (the states are the honest ones: a trainer that
 *                   saves itself the log; contract version 2 makes the
 *                   missing entries fraud);
 *   bitflip-shard   in step K of a sharded run (--shards S), one bit of shard
 *                   J's gradient (--fault-shard J) is flipped on the process
 *                   that computes it, before it is hashed into the log's
 *                   shard table and summed (trn_fault_bitflip_grad);
 *   kill-rank       under mpirun, rank --fault-rank r kills itself (SIGKILL)
 *                   as step K begins: a process that dies mid-run;
 *   hang-rank       under mpirun, rank r stops answering as step K begins
 *                   (it sleeps until the job is ended): a process that hangs;
 *   flip-entry      in step K the direction entry of element --fault-element
 *                   E of site --fault-site S is turned to the other side of
 *                   its midpoint and the state follows (krn_ctx_flip_entry):
 *                   honest where every honest value could round either way,
 *                   fraud beyond (docs/numeric-contract.md section 10);
 *   hidden-flip     log K turns one logged direction whose value lies
 *                   between tau/2 and tau/2 + delta from its midpoint to the
 *                   other side, and the state follows (krn_ctx_forge_hidden):
 *                   under band rules 1 no auditor can tell it from an honest
 *                   choice (issue 32's hole), under band rules 2 every
 *                   auditor disputes it and the arbiter rules it fraud;
 *   false-table     in step K of a sharded run, the log's shard table
 *                   carries shard J's gradient hash with one bit flipped
 *                   (--fault-shard J); the step and its state are honest:
 *                   a table that blames a shard that did nothing wrong,
 *                   which every checker rules fraud (trn_false_shard_table);
 *   steer-up, steer-down  from step K on, every element whose direction
 *                   rule 3 leaves free (d <= delta) is rounded up (down) and
 *                   logged so (krn_ctx_steer): a trainer that spends all of
 *                   the log's freedom one way, and goes unchallenged.
 * The last two leave the run directory at its last checkpoint, for
 * --resume. */

#include <stdint.h>

#include "common/err.h"
#include "data/dataset.h"
#include "dp/dp.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "trainer/state.h"

typedef enum {
    TRN_FAULT_NONE = 0,
    TRN_FAULT_BITFLIP,
    TRN_FAULT_POISONED_BATCH,
    TRN_FAULT_SKIPPED_STEP,
    TRN_FAULT_FORGED_LOG,
    TRN_FAULT_OMITTED_LOG,
    TRN_FAULT_BITFLIP_SHARD,
    TRN_FAULT_KILL_RANK,
    TRN_FAULT_HANG_RANK,
    TRN_FAULT_FLIP_ENTRY,
    TRN_FAULT_STEER_UP,
    TRN_FAULT_STEER_DOWN,
    TRN_FAULT_HIDDEN_FLIP,
    TRN_FAULT_FLIP_OUTPUT,
    TRN_FAULT_FALSE_TABLE
} trn_fault_kind;

typedef struct {
    trn_fault_kind kind;
    uint64_t step;  /* K >= 1 */
    uint32_t shard; /* bitflip-shard: J */
    uint32_t rank;  /* kill-rank, hang-rank: r */
    uint32_t site;  /* flip-entry: S */
    uint64_t element; /* flip-entry: E */
    double timeout_s; /* hang-rank: every rank's rank timeout from step K on
                         (0: the run's own), so that on a loaded machine
                         the earlier exchanges keep the long one */
} trn_fault;

/* The kind named name ("none", "bitflip", ...), or OVT_EINVAL listing them. */
int trn_fault_parse(trn_fault_kind *out, const char *name) OVT_MUST_USE;
const char *trn_fault_name(trn_fault_kind kind);

/* True if fault f of kind `kind` applies to step i (omitted-log, steer-up, steer-down: every step
 * from K on; the others: step K). */
int trn_fault_at(const trn_fault *f, trn_fault_kind kind, uint64_t i);

/* The hooks of the training loop (trainer/loop.c), which calls each once
 * for every step i. Each does nothing for a step the fault leaves alone, so
 * a run without a fault (TRN_FAULT_NONE) goes through all three unchanged. */

/* Before step i: kill-rank and hang-rank end (SIGKILL) or stop this process
 * when it is rank f->rank of the processes of dp (NULL: one process, no
 * rank), neither returning; at hang-rank's step every rank first takes
 * f->timeout_s as its rank timeout, when one is given; poisoned-batch changes the step's batch
 * (tb, sb, as trn_fault_poison, for st's model); forged-log arms the
 * forgery in ctx; skipped-step keeps a copy of the state in *kept
 * (malloc'd; NULL for every other step), OVT_ENOMEM when there is no memory
 * for it. */
int trn_fault_before_step(const trn_fault *f, uint64_t i, dp_ctx *dp, krn_ctx *ctx, const trn_state *st,
                          data_token_batch *tb, data_sample_batch *sb, float **kept) OVT_MUST_USE;

/* After step i, whose result was rv: skipped-step puts the state *kept
 * holds back (freeing it; step number i stays); then, when rv is 0,
 * forged-log fails with OVT_EINVAL if no element of the step could be
 * forged, and bitflip flips a parameter (trn_fault_bitflip). Returns rv, or
 * the hook's own failure. */
int trn_fault_after_step(const trn_fault *f, uint64_t i, int rv, const krn_ctx *ctx, trn_state *st,
                         float **kept) OVT_MUST_USE;

/* Step i's log before it is merged and written: omitted-log drops its
 * entries (a sharded step's shard table stays); false-table flips a bit of
 * shard J's hash in it (OVT_EINVAL when the log has no shard J). */
int trn_fault_on_log(const trn_fault *f, uint64_t i, krn_rlog *log) OVT_MUST_USE;

/* bitflip-shard: the step whose shard gradient trn_workspace_fault_shard
 * is to flip; 0 (off) for every other kind. */
uint64_t trn_fault_shard_step(const trn_fault *f);

/* poisoned-batch: every target token becomes (t + 1) mod vocab, or every
 * label (y + 1) mod n_class. Either batch may be empty (NULL arrays). */
void trn_fault_poison(data_token_batch *tb, data_sample_batch *sb, uint32_t vocab, uint32_t n_class);

/* bitflip: flips the highest mantissa bit (kept at every grid width) of the
 * first normal parameter at or after a step-derived offset; the result is
 * still a finite grid value. Returns the flipped element's index. */
size_t trn_fault_bitflip(trn_state *st);

/* bitflip-shard: flips the highest mantissa bit of one element of a shard's
 * gradient g (n): the largest in magnitude among the normal elements at most
 * 2^-16 of the gradient's norm, so that the element's sum changes by at
 * least a quarter of its value while the norm (and hence the clip factor and
 * every other element's update) keeps its rounded value. Returns the
 * element's index (n when every element is zero). */
size_t trn_fault_bitflip_grad(float *g, size_t n);

#endif
