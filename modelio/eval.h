#ifndef OVT_MODELIO_EVAL_H
#define OVT_MODELIO_EVAL_H

/* A GPT-2 checkpoint's loss on held-out tokens (`ovt eval`,
 * docs/trainer.md): forward only, every window in a fixed order, so the
 * figure is a function of the parameters and the file alone.
 *
 * The windows are the non-overlapping runs of T + 1 tokens of the file, T
 * the run's sequence length: window w is tokens [w (T+1), (w+1)(T+1)), its
 * first T tokens the inputs and its last T the targets; a last, shorter
 * run of tokens is not used. With max_windows > 0 only the first
 * max_windows windows are. They go through the model B at a time (B the
 * run's batch size; the last batch holds the rest), each batch a forward of
 * trn_eval_loss in NEAREST mode (no rounding log) in one shard, batch j
 * numbered as step j + 1. The batch means (grid values) are combined in
 * FP64 in batch order: loss = sum_j mean_j * windows_j / windows, and
 * perplexity = exp(loss). */

#include <stdint.h>

#include "data/dataset.h"
#include "kernels/site.h"
#include "trainer/state.h"

typedef struct {
    uint64_t windows; /* evaluated */
    uint64_t tokens;  /* predicted: windows * T */
    uint64_t batches;
    uint32_t T, B;
    double loss;       /* mean cross-entropy per predicted token, nats */
    double perplexity; /* exp(loss) */
} trn_eval_result;

/* Evaluates st (a GPT-2 state) on data with backend (threads: 0 for the
 * backend's default). OVT_EINVAL for an MLP, a file with fewer than T + 1
 * tokens or tokens outside the model's vocabulary; the step's own errors
 * (a non-finite value: OVT_ENUMERIC) otherwise. */
int trn_eval_run(const trn_state *st, const data_tokens *data, krn_backend_kind backend, int threads,
                 uint64_t max_windows, trn_eval_result *out) OVT_MUST_USE;

/* An MLP checkpoint's loss and accuracy on held-out samples (an image file
 * read as samples, data/images.h): samples in file order, B at a time (the
 * last batch the rest), each a forward of trn_eval_loss in NEAREST mode in
 * one shard, batch j numbered as step j + 1; loss combined as for GPT-2
 * (batch means in FP64, weighted by their sizes). A sample is correct when
 * its label is the first of the largest logits. Same bits on every
 * backend that computes the same logits. */
typedef struct {
    uint64_t samples; /* evaluated */
    uint64_t correct; /* argmax logit == label */
    uint64_t batches;
    uint32_t B;
    double loss;     /* mean cross-entropy per sample, nats */
    double accuracy; /* correct / samples */
} trn_eval_class_result;

/* OVT_EINVAL for a GPT-2 state or samples of another shape than the
 * model's. max_samples > 0: only the first max_samples. */
int trn_eval_samples(const trn_state *st, const data_samples *data, krn_backend_kind backend, int threads,
                     uint64_t max_samples, trn_eval_class_result *out) OVT_MUST_USE;

#endif
