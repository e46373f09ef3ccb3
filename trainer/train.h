#ifndef OVT_TRAINER_TRAIN_H
#define OVT_TRAINER_TRAIN_H

/* One training step, the same code for trainer, auditor and arbiter: the
 * sequence of ops (hence the numbering of rounding sites) is fixed here.
 *
 * Step i (i = st->step + 1) runs inside krn_step_begin/krn_step_end of ctx:
 *   forward and backward of the model on the step's batch (gradients are
 *   zeroed first; backward ops accumulate),
 *   "gradnorm" of all gradients, "clip.factor" (when grad_clip > 0),
 *   "schedule.lr" (1, exact): trn_schedule_lr (trainer/schedule.h): linear
 *       warmup, then lr, or a linear or cosine fall to lr_min at decay_steps,
 *   "adamw.*": bias corrections for t = i and the update of every parameter.
 * The optimizer constants of the run config are rounded to the grid before
 * use (they are ops' scalar inputs, which must be grid values).
 * On success st->step = i. On failure the state is unspecified (AdamW works
 * in place): reload it from the previous checkpoint. */

#include <stdbool.h>
#include <stdint.h>

#include "kernels/rlog.h"
#include "kernels/site.h"
#include "trainer/state.h"

/* The inputs of one step. MLP: x (B, in_dim) grid values and labels (B).
 * GPT-2 and Llama: inputs and targets (B, T) tokens. */
typedef struct {
    uint32_t B, T;
    const float *x;
    const int32_t *labels;
    const int32_t *inputs;
    const int32_t *targets;
} trn_batch;

typedef struct {
    float loss;      /* mean loss of the batch (a grid value) */
    float grad_norm; /* before clipping */
    float lr;
    krn_stats stats; /* from krn_step_end */
    /* A sharded step (S > 1): */
    uint32_t shards;              /* S (1 for a step in one shard) */
    const ovt_hash *shard_hashes; /* the S shard gradients' SHA-256 as this step computed them (points
                                     into the workspace, valid until its next step); NULL when S = 1 */
    int64_t shard_differs;        /* REPLAY: the first shard whose gradient's hash differs from the
                                     log's shard table; -1 when none does (or S = 1) */
    double comm_seconds;          /* under processes: wall time in the exchanges with the other ranks
                                     (waiting for them included) */
} trn_step_info;

/* Activations, gradients and scratch of one model for batches of up to
 * B (and T) : allocate once per run. */
typedef struct trn_workspace trn_workspace;

int trn_workspace_new(trn_workspace **out, const trn_run_config *rc) OVT_MUST_USE;
/* The same with the tensors (activations, gradients, shard gradients) in
 * mem_ctx's backend memory (kernels/mem.h; NULL: the host's), for steps
 * run on mem_ctx in this process (a resident runner, trainer/runner.h);
 * host code touches them only through kernels/mem.h (a sharded step
 * brings each shard's gradient up for its hash and the mean, and takes
 * the mean down). */
int trn_workspace_new_on(trn_workspace **out, const trn_run_config *rc, krn_ctx *mem_ctx) OVT_MUST_USE;
void trn_workspace_free(trn_workspace *w);

/* Runs step st->step + 1. log: RECORD fills it (reset by the ctx), REPLAY
 * reads it, NEAREST may pass NULL. The batch must match the config's B, T.
 *
 * With S = config shards > 1 (docs/training-step.md, "Shards"): shard s of
 * the batch is its sequences (samples) s*B/S .. (s+1)*B/S - 1; each shard's
 * forward and backward run on their own into a gradient of their own (the
 * gradient of the shard's mean loss), numbered as sites s*P .. (s+1)*P - 1
 * for P sites per shard; then "grad.sum" (the exact mean of the S shard
 * gradients, kernels/shard.h) and "loss.mean" (the same over the shard
 * losses), then the optimizer as for one shard. RECORD writes the shard
 * gradients' SHA-256 into the log's shard table; REPLAY requires a table of
 * S and reports the first shard whose recomputed hash differs
 * (info->shard_differs), which is a finding, not a failure: the state
 * decides (trn_false_shard_table). */
int trn_train_step(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                   trn_step_info *info) OVT_MUST_USE;

/* P, the rounding sites one shard's forward and backward make under rc
 * (a sharded step numbers shard s's as s*P .. (s+1)*P - 1, then grad.sum
 * on): counted by running them once in NEAREST on the cpu backend on one
 * sample (of one token) of zeros with zero parameters, since the sites are
 * the model's ops, whatever the batch's size and the values. A step's site below S*P is shard site / P's;
 * the others (grad.sum, loss.mean, the optimizer) are no shard's. */
int trn_shard_sites(const trn_run_config *rc, uint32_t *P) OVT_MUST_USE;

/* The rule every checker of a replayed sharded step applies (ovt step, the
 * auditor, the arbiter; docs/data-parallel.md, "Blame"): a shard whose
 * recomputed gradient hash differs from the log's table (shard_differs >= 0)
 * while the step's recomputed state IS the one claimed means the table is
 * false, not the shard: the log states something the step did not do, which
 * is fraud, and no shard or rank is named. Returns OVT_EFRAUD with that
 * finding as the error message when state_right and shard_differs >= 0,
 * else 0. Only a state that differs lets the table name the shard, and then
 * the shard named is the table's claim, which the arbiter's block
 * re-execution (docs/arbiter.md) confirms or not. */
int trn_false_shard_table(uint64_t step, int64_t shard_differs, bool state_right);

/* trn_train_step with the step's shards spread over the processes of dp
 * (dp/dp.h; NULL: this process computes every shard). Collective:
 * every rank calls it for the same step; rank r computes shards
 * r*S/R .. (r+1)*S/R - 1 and every rank ends with the same state. RECORD:
 * rank 0's log holds its own shards' entries and every site from grad.sum
 * on, another rank's only its own shards' (dp_merge_log then makes
 * rank 0's log the step's whole log, byte for byte the one-process log).
 * A failure on any rank fails the step on every rank. */
typedef struct dp_ctx dp_ctx;
int trn_train_step_dp(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                      dp_ctx *dp, trn_step_info *info) OVT_MUST_USE;

/* Writes every page of w's buffers once (zeros), on ctx's threads: the
 * activations and gradients, and for a sharded config the S shard
 * gradients one process needs, so that a later step does not fault them in
 * (a trn_runner opened with prefault). The same bits either way: every step zeroes what it
 * accumulates into. */
int trn_workspace_prefault(trn_workspace *w, krn_ctx *ctx) OVT_MUST_USE;

/* Testing only (`ovt train --inject-fault bitflip-shard`): in step `step`,
 * flip one bit of shard `shard`'s gradient before it is hashed and summed
 * (trn_fault_bitflip_grad), on the process that computes that shard.
 * step 0 turns it off. */
void trn_workspace_fault_shard(trn_workspace *w, uint64_t step, uint32_t shard);

/* Forward only (no state change, inside its own step numbering `step`):
 * the mean loss of a batch, e.g. for evaluation. */
int trn_eval_loss(krn_ctx *ctx, trn_workspace *w, const trn_state *st, const trn_batch *batch, uint64_t step,
                  float *loss) OVT_MUST_USE;

/* Model internals, one file per model (trainer/mlp.c, gpt2.c, llama.c):
 * forward to the mean loss, and backward into w's gradients (zeroed by the
 * caller). */
float *trn_workspace_grads(trn_workspace *w);
int trn_mlp_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch,
                    float *loss) OVT_MUST_USE;
int trn_mlp_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch) OVT_MUST_USE;
int trn_gpt2_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch,
                     float *loss) OVT_MUST_USE;
int trn_gpt2_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch) OVT_MUST_USE;
int trn_llama_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch,
                      float *loss) OVT_MUST_USE;
int trn_llama_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch) OVT_MUST_USE;
int trn_resnet_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch,
                       float *loss) OVT_MUST_USE;
int trn_resnet_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch) OVT_MUST_USE;

#endif
