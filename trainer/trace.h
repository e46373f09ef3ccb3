#ifndef OVT_TRAINER_TRACE_H
#define OVT_TRAINER_TRACE_H

/* One training step with its trace (kernels/trace.h, docs/formats.md "Step
 * trace"): the state's tensors and the batch registered by name, the
 * recorder attached to the ctx for the step, detached after. The step's bits
 * are the untraced step's; the trace's failure is its own (the step may
 * succeed with no trace). */

#include "kernels/trace.h"
#include "trainer/train.h"

/* One array of a batch as the trace registers it: its region name, its
 * 32-bit words and their count. */
typedef struct {
    const char *name;
    const void *words;
    size_t n;
} trn_batch_array;

#define TRN_BATCH_ARRAYS 4

/* The batch's arrays in registration order ("batch.inputs",
 * "batch.targets", "batch.x", "batch.labels"; those it has), x of in_dim
 * words a sample: out[0 .. return). The trace (trn_trace_regions) and an
 * arbiter proving a block's batch slices (arbiter/narrow_eval.c) both take
 * them from here. */
size_t trn_batch_arrays(trn_batch_array out[TRN_BATCH_ARRAYS], const trn_batch *batch, size_t in_dim);

/* Registers st's params, m and v tensor by tensor ("params/wte",
 * "m/wte", "v/wte", ... in layout order) and the batch's arrays
 * ("batch.inputs", "batch.targets" or "batch.x", "batch.labels") with t. */
int trn_trace_regions(krn_trace *t, const trn_state *st, const trn_batch *batch) OVT_MUST_USE;

/* trn_train_step with t recording it (t fresh: no site recorded yet).
 * Returns the step's result; *trace_rc gets the trace's: 0, or the failure
 * krn_trace_finish reports (its message is then ovt_errmsg() until the next
 * failure), and *root the trace root. */
int trn_train_step_traced(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                          krn_trace *t, trn_step_info *info, int *trace_rc, ovt_hash *root) OVT_MUST_USE;

#endif
