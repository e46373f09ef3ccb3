#ifndef OVT_BENCH_GPT2_FP32_H
#define OVT_BENCH_GPT2_FP32_H

/* A plain FP32 GPT-2 training step with OpenBLAS SGEMM (gpt2_fp32.c): the
 * peer benchmark's "careful C user" baseline, no part of the protocol. */
#include <stddef.h>
#include <stdint.h>

typedef struct fp32_gpt2 fp32_gpt2;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_clip;
} fp32_adamw;

/* A model of L layers, width C, NH heads, vocabulary V, positions maxT, for
 * batches of B sequences of T tokens, its parameters drawn from seed. 0, or
 * -1 when out of memory (*out NULL). */
int fp32_gpt2_new(fp32_gpt2 **out, size_t L, size_t C, size_t NH, size_t V, size_t maxT, size_t B, size_t T,
                  uint64_t seed);
void fp32_gpt2_free(fp32_gpt2 *g);
size_t fp32_gpt2_nparams(const fp32_gpt2 *g);

/* One training step (forward, backward, AdamW) on inputs and targets (B*T
 * token ids each); returns the batch's mean loss. */
float fp32_gpt2_step(fp32_gpt2 *g, const int32_t *inputs, const int32_t *targets, const fp32_adamw *opt);

#endif
