#ifndef OVT_KERNELS_OPS_H
#define OVT_KERNELS_OPS_H

/* The tensor ops of the MLP, GPT-2, Llama and ResNet models (docs/op-bounds.md,
 * docs/training-step.md), forward and backward, in llm.c's shape: ctx first, then outputs, then saved
 * statistics, then inputs, then weights, dimensions last; gradients carry a
 * `d` prefix. Every tensor is row-major FP32 holding grid values; every op
 * computes in FP64 and hands each result to krn_site(), so each op is a
 * fixed sequence of rounding sites, listed below in execution order (the
 * order is part of the numeric contract: trainer, auditor and arbiter number
 * sites identically because they call the same ops in the same order).
 *
 * Kinds of site (their bands are derived in docs/op-bounds.md):
 *   reduction  a sum or dot product, accumulated in chunks of KRN_GEMM_CHUNK
 *              terms: each chunk in any order, the chunk sums added in
 *              increasing chunk order; band from the terms' magnitudes;
 *   libm       one libm call (exp, log, tanh, pow) on a deterministic
 *              argument; band relative to the result;
 *   exact      a fixed expression of basic IEEE operations (+ - * / sqrt, in
 *              the order written here, no contraction) on grid values:
 *              every correct implementation computes the same FP64 value,
 *              the band is 0 and the site never logs.
 *
 * Backward ops ACCUMULATE into their gradient outputs (+=, as llm.c does):
 * the old gradient is added last, in FP64, inside the same site (the band's
 * rel term covers that one addition). Zero the gradients before the first
 * micro-batch.
 *
 * Every function returns 0 or a negative OVT_E* code with a message: a NULL
 * where none is allowed, a zero or overflowing dimension, an out-of-range
 * token or target (OVT_EINVAL), a non-finite result (OVT_ENUMERIC, from the
 * site), a fraudulent log entry in REPLAY (OVT_EFRAUD), allocation failure.
 * On failure the outputs are unspecified and the step must be abandoned.
 * Outputs may not alias inputs unless said so.
 *
 * Threads: one ctx is used by one thread at a time. The cpu backend splits
 * GEMMs over krn_config.threads threads (output tiles) and sets OpenBLAS to
 * one thread; results never depend on the thread count. The ops keep large
 * FP64 temporaries in per-thread scratch buffers between calls
 * (kernels/scratch.h). */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kernels/contract.h" /* KRN_GEMM_CHUNK, the reduction chunk */
#include "kernels/site.h"

/* ---- matmul (bounds: docs/op-bounds.md, section 2, as for every op) ---- */

/* out (N,OC) = inp (N,C) @ weight^T + bias, weight (OC,C), bias (OC) or NULL.
 * Sites: "matmul.fwd" (N*OC, reduction over C) into out, then, with a bias,
 * "matmul.fwd.bias" (N*OC, exact: out + bias) in place. Saves nothing. */
int krn_matmul_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight,
                       const float *bias, size_t N, size_t C, size_t OC) OVT_MUST_USE;

/* dinp (N,C) += dout (N,OC) @ weight (OC,C)       [dinp may be NULL: skipped]
 * dweight (OC,C) += dout^T @ inp (N,C)
 * dbias (OC) += column sums of dout               [NULL when there is no bias]
 * Sites: "matmul.bwd.dinp" (N*C, reduction over OC), "matmul.bwd.dweight"
 * (OC*C, reduction over N), "matmul.bwd.dbias" (OC, reduction over N), in
 * that order, each skipped when its output is NULL. */
int krn_matmul_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C,
                        size_t OC) OVT_MUST_USE;

/* ---- bias add ---------------------------------------------------------- */

/* out (N,C) = inp (N,C) + bias (C) broadcast over rows; out may equal inp.
 * Site: "bias.fwd" (N*C, exact). */
int krn_bias_forward(krn_ctx *ctx, float *out, const float *inp, const float *bias, size_t N,
                     size_t C) OVT_MUST_USE;

/* dbias (C) += column sums of dout (N,C). Site: "bias.bwd" (C, reduction over N). */
int krn_bias_backward(krn_ctx *ctx, float *dbias, const float *dout, size_t N, size_t C) OVT_MUST_USE;

/* The arbiter's fourth level (docs/arbiter.md, "The reduction's chunks"):
 * rounds n elements of a site that sums over K rows ("matmul.bwd.dweight",
 * "conv.bwd.dweight", "matmul.bwd.dbias", "bias.bwd"; "gradnorm.sumsq",
 * n = 1, K = every gradient element; the norms' column sums
 * "layernorm.bwd.dbias", "layernorm.bwd.dweight", "rmsnorm.bwd.dweight",
 * whose band is "bias.bwd"'s) as the next site, from FP64 values x that
 * are not the op's own chunked sums but another correct value of them (the
 * exact sum plus the old gradient, rounded once), with the op's band:
 * mag[i] is element i's magnitude as the op's band takes it (the column
 * sums: sum |terms|; the weight gradient: the product of its row's and
 * column's norms; the sum of squares: the sum itself). OVT_EINVAL for
 * another op. */
int krn_batch_sum_round(krn_ctx *ctx, const char *name, float *out, const double *x, const double *mag,
                        size_t n, size_t K) OVT_MUST_USE;

/* ---- activations ------------------------------------------------------- */

/* GPT-2's tanh GELU: out = 0.5*x*(1 + tanh(s*(x + 0.044715*x^3))),
 * s = sqrt(2/pi) as the double 0.7978845608028654. inp, out (n).
 * Sites: "gelu.tanh" (n, libm: tanh of the exact argument
 * s*(x + (0.044715*x)*x*x)), then "gelu.fwd" (n, exact: (0.5*x)*(1 + t)).
 * Saves nothing (backward recomputes the tanh). out may equal inp. */
int krn_gelu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n) OVT_MUST_USE;

/* dinp (n) += dout * gelu'(inp), with t the grid tanh recomputed as above:
 * gelu'(x) = 0.5*(1 + t) + (0.5*x)*(1 - t*t)*s*(1 + 3*0.044715*x*x).
 * Sites: "gelu.tanh" (n, libm), "gelu.bwd" (n, exact). */
int krn_gelu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout,
                      size_t n) OVT_MUST_USE;

/* out (n) = max(x, 0). Site: "relu.fwd" (n, exact). out may equal inp. */
int krn_relu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n) OVT_MUST_USE;

/* dinp (n) += inp > 0 ? dout : 0. Site: "relu.bwd" (n, exact). */
int krn_relu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout,
                      size_t n) OVT_MUST_USE;

/* ---- layernorm ---------------------------------------------------------- */

/* Per row of inp (N,C): mean = sum(x)/C, var = sum((x - mean)^2)/C,
 * rstd = 1/sqrt(var + 1e-5), out = ((x - mean)*rstd)*weight + bias;
 * weight, bias (C); mean, rstd (N) are saved for backward.
 * Sites: "layernorm.mean" (N, reduction over C), "layernorm.var" (N,
 * reduction over C; an internal buffer, not saved), "layernorm.rstd" (N,
 * exact), "layernorm.fwd" (N*C, exact). */
int krn_layernorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, size_t N, size_t C) OVT_MUST_USE;

/* With norm = (x - mean)*rstd and dnorm = weight*dout (exact per element):
 *   dnorm_mean = sum(dnorm)/C, dnorm_norm_mean = sum(dnorm*norm)/C per row,
 *   dbias (C) += sum over rows of dout, dweight (C) += sum over rows of norm*dout,
 *   dinp (N,C) += ((dnorm - dnorm_mean) - norm*dnorm_norm_mean)*rstd.
 * Sites: "layernorm.bwd.dmean" (N, reduction over C), "layernorm.bwd.dnmean"
 * (N, reduction over C), "layernorm.bwd.dbias" (C, reduction over N),
 * "layernorm.bwd.dweight" (C, reduction over N), "layernorm.bwd.dinp" (N*C,
 * exact). dnorm_mean and dnorm_norm_mean are internal buffers. */
int krn_layernorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                           const float *dout, const float *inp, const float *weight,
                           const float *mean, const float *rstd, size_t N, size_t C) OVT_MUST_USE;

/* ---- RMSNorm (Llama) ----------------------------------------------------- */

/* Per row of inp (N,C): ms = sum(x*x)/C, rstd = 1/sqrt(ms + eps),
 * out = (x*rstd)*weight; weight (C); rstd (N) is saved for backward; eps
 * an FP64 constant of the run config (the same double for every party).
 * Sites: "rmsnorm.ms" (N, reduction over C; internal), "rmsnorm.rstd" (N,
 * exact), "rmsnorm.fwd" (N*C, exact). */
int krn_rmsnorm_forward(krn_ctx *ctx, float *out, float *rstd, const float *inp, const float *weight,
                        double eps, size_t N, size_t C) OVT_MUST_USE;

/* With norm = x*rstd and dnorm = weight*dout (exact per element):
 *   dnn = sum(dnorm*norm)/C per row,
 *   dweight (C) += sum over rows of norm*dout,
 *   dinp (N,C) += (dnorm - norm*dnn)*rstd.
 * Sites: "rmsnorm.bwd.dnmean" (N, reduction over C; internal),
 * "rmsnorm.bwd.dweight" (C, reduction over N), "rmsnorm.bwd.dinp" (N*C,
 * exact). */
int krn_rmsnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, const float *rstd, size_t N, size_t C) OVT_MUST_USE;

/* ---- rotary position embedding (Llama) ---------------------------------- */

/* The rotary table for heads of size hs (even) at positions 0..T-1, a
 * function of the config alone: freq_i = theta^(-(2i)/hs) for i < hs/2
 * (the exponent one FP64 division), and with the angle t*freq_i (exact in
 * FP64: an integer below 2^16 times a grid value)
 *   cos (T, hs/2) = cos(t*freq_i),  sin (T, hs/2) = sin(t*freq_i).
 * Sites: "rope.freq" (hs/2, libm: pow; internal), "rope.cos", "rope.sin"
 * (T*hs/2 each, libm). */
int krn_rope_table(krn_ctx *ctx, float *cos, float *sin, size_t T, size_t hs, double theta) OVT_MUST_USE;

/* Rotates x (B,T,NH*hs) by position: in each head, the pair (x0, x1) at
 * channels (2i, 2i+1) of position t becomes
 *   (x0*c - x1*s, x0*s + x1*c),  c = cos[t][i], s = sin[t][i]
 * (llama2.c's interleaved pairs). Site "rope.fwd" (B*T*NH*hs, exact).
 * out may equal inp. */
int krn_rope_forward(krn_ctx *ctx, float *out, const float *inp, const float *cos, const float *sin, size_t B,
                     size_t T, size_t NH, size_t hs) OVT_MUST_USE;

/* dinp += the rotation back of dout: (d0*c + d1*s, d1*c - d0*s) per pair.
 * Site "rope.bwd" (B*T*NH*hs, exact: each value then + old). */
int krn_rope_backward(krn_ctx *ctx, float *dinp, const float *dout, const float *cos, const float *sin,
                      size_t B, size_t T, size_t NH, size_t hs) OVT_MUST_USE;

/* ---- SwiGLU (Llama) ------------------------------------------------------ */

/* out (n) = silu(a) * b, silu(a) = a * sig(a), with e = exp(-|a|) (in (0,1],
 * so nothing overflows) and sig = 1/(1 + e) for a >= 0, e/(1 + e) below.
 * Sites: "swiglu.exp" (n, libm: exp(-|a|)), "swiglu.fwd" (n, exact:
 * (a*sig)*b). Saves nothing (backward recomputes e). out may equal a or b. */
int krn_swiglu_forward(krn_ctx *ctx, float *out, const float *a, const float *b, size_t n) OVT_MUST_USE;

/* da (n) += (dout*b) * (sig*(1 + a*(1 - sig))), db (n) += dout*(a*sig),
 * e and sig as above from the recomputed grid e.
 * Sites: "swiglu.exp" (n, libm), "swiglu.bwd.da", "swiglu.bwd.db" (n each,
 * exact). */
int krn_swiglu_backward(krn_ctx *ctx, float *da, float *db, const float *dout, const float *a, const float *b,
                        size_t n) OVT_MUST_USE;

/* ---- attention ---------------------------------------------------------- */

/* Causal multi-head self-attention from a fused qkv, as llm.c:
 * inp (B,T,3C) holds q, k, v for each position (head h uses channels
 * h*hs..h*hs+hs-1 of each third, hs = C/NH); out (B,T,C); preatt and att
 * (B,NH,T,T) are saved (att is what backward needs). For t2 <= t:
 *   preatt[t][t2] = (q_t . k_t2) * (1/sqrt(hs)), the scale the double
 *                   1.0/sqrt((double)hs);
 *   e[t2] = exp(preatt[t][t2] - max_t2' preatt[t][t2']); s = sum e;
 *   att[t][t2] = e[t2] / s;  out_t = sum_t2 att[t][t2] * v_t2.
 * Entries with t2 > t are 0 in preatt and att.
 * Sites: "attn.qk" (B*NH*T*T, reduction over hs, scale inside),
 * "attn.exp" (B*NH*T*T, libm, into att), "attn.sum" (B*NH*T, reduction over
 * t2; internal), "attn.softmax" (B*NH*T*T, exact, into att), "attn.out"
 * (B*T*C, reduction over t2). C must be a multiple of NH. The sums over
 * positions run over all T with the masked terms as exact zeros (chunk
 * boundaries at multiples of KRN_GEMM_CHUNK from position 0). */
int krn_attention_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *inp,
                          size_t B, size_t T, size_t C, size_t NH) OVT_MUST_USE;

/* dinp (B,T,3C) += gradient of the forward above; datt and dpreatt
 * (B,NH,T,T) are scratch outputs (overwritten, llm.c style).
 *   datt[t][t2] = dout_t . v_t2                    (t2 <= t)
 *   dv_t2 += sum_{t >= t2} att[t][t2] * dout_t
 *   r_t = sum_t2 att[t][t2] * datt[t][t2]
 *   dpreatt[t][t2] = att[t][t2] * (datt[t][t2] - r_t)
 *   dq_t += (sum_t2 dpreatt[t][t2] * k_t2) * scale
 *   dk_t2 += (sum_{t >= t2} dpreatt[t][t2] * q_t) * scale
 * Sites: "attn.bwd.datt" (B*NH*T*T, reduction over hs), "attn.bwd.dv"
 * (B*T*C, reduction over t), "attn.bwd.r" (B*NH*T, reduction over t2;
 * internal), "attn.bwd.dpreatt" (B*NH*T*T, exact), "attn.bwd.dq" (B*T*C,
 * reduction over t2), "attn.bwd.dk" (B*T*C, reduction over t). The dv, dq,
 * dk sites accumulate into the matching third of dinp. */
int krn_attention_backward(krn_ctx *ctx, float *dinp, float *dpreatt, float *datt,
                           const float *dout, const float *inp, const float *att, size_t B,
                           size_t T, size_t C, size_t NH) OVT_MUST_USE;

/* Causal grouped-query attention (Llama) from separate q (B,T,NH*hs) and
 * k, v (B,T,NKV*hs), NKV dividing NH: query head h reads key/value head
 * h / (NH/NKV). out (B,T,NH*hs); preatt and att (B,NH,T,T) saved. The same
 * sums, sites and order as krn_attention_forward, with head h's q, k and v
 * read from their own tensors. NKV = NH is multi-head attention. */
int krn_gqa_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *q, const float *k,
                    const float *v, size_t B, size_t T, size_t NH, size_t NKV, size_t hs) OVT_MUST_USE;

/* dq (B,T,NH*hs), dk and dv (B,T,NKV*hs) += the gradient of the forward
 * above; dpreatt and datt (B,NH,T,T) are scratch outputs. As
 * krn_attention_backward, except that a key/value head's gradient is one
 * reduction over the G = NH/NKV query heads that share it: for key/value
 * head j,
 *   dv_t2 += sum_{g < G} sum_{t >= t2} att_h[t][t2] * dout_h,t
 *   dk_t2 += (sum_{g < G} sum_{t >= t2} dpreatt_h[t][t2] * q_h,t) * scale
 * with h = j*G + g, the G*T terms in (g, t) order and chunked from the first
 * (a reduction of K = G*T). Sites: "attn.bwd.datt", "attn.bwd.dv" (B*T*NKV*hs),
 * "attn.bwd.r", "attn.bwd.dpreatt", "attn.bwd.dq" (B*T*NH*hs),
 * "attn.bwd.dk" (B*T*NKV*hs), in that order. */
int krn_gqa_backward(krn_ctx *ctx, float *dq, float *dk, float *dv, float *dpreatt, float *datt,
                     const float *dout, const float *q, const float *k, const float *v, const float *att,
                     size_t B, size_t T, size_t NH, size_t NKV, size_t hs) OVT_MUST_USE;

/* ---- residual, accumulation -------------------------------------------- */

/* out (n) = inp1 + inp2. Site: "residual.fwd" (n, exact). out may equal an input. */
int krn_residual_forward(krn_ctx *ctx, float *out, const float *inp1, const float *inp2,
                         size_t n) OVT_MUST_USE;

/* dinp1 += dout, dinp2 += dout. Sites: "residual.bwd1", "residual.bwd2" (n, exact). */
int krn_residual_backward(krn_ctx *ctx, float *dinp1, float *dinp2, const float *dout,
                          size_t n) OVT_MUST_USE;

/* dst (n) += src (n): gradient accumulation across micro-batches or shared
 * weights. Site: "accumulate" (n, exact). */
int krn_accumulate(krn_ctx *ctx, float *dst, const float *src, size_t n) OVT_MUST_USE;

/* ---- embedding (llm.c's encoder) ---------------------------------------- */

/* out (B,T,C) = wte[tokens[b,t]] + wpe[t]; tokens (B,T) in [0,V); wte (V,C),
 * wpe (maxT,C) with T <= maxT (only the first T rows are read), or NULL for
 * a model without position embeddings (Llama): out = wte[tokens[b,t]].
 * Site: "encoder.fwd" (B*T*C, exact). */
int krn_encoder_forward(krn_ctx *ctx, float *out, const int32_t *tokens, const float *wte,
                        const float *wpe, size_t B, size_t T, size_t C, size_t V) OVT_MUST_USE;

/* dwte (V,C) += for each row v, the sum of dout[b,t] over positions with
 * tokens[b,t] == v, taken in increasing b*T+t order; dwpe (T,C) += the sum
 * over b of dout[b,t]. Sites: "encoder.bwd.dwte" (V*C, reduction over the
 * occurrences of each token), "encoder.bwd.dwpe" (T*C, reduction over B;
 * skipped when dwpe is NULL). */
int krn_encoder_backward(krn_ctx *ctx, float *dwte, float *dwpe, const float *dout,
                         const int32_t *tokens, size_t B, size_t T, size_t C, size_t V) OVT_MUST_USE;

/* ---- softmax cross-entropy ---------------------------------------------- */

/* For each of the N rows of logits (N,V) with targets (N) in [0,V):
 *   mx = max(row); e_j = exp(logit_j - mx); s = sum_j e_j;
 *   probs_j = e_j / s; losses = log(s) - (logit_target - mx);
 *   loss (scalar) = sum(losses) / N.
 * probs (N,V) and losses (N) are saved. Sites: "xent.exp" (N*V, libm, into
 * probs), "xent.sum" (N, reduction over V; internal), "xent.probs" (N*V,
 * exact), "xent.logsum" (N, libm: log(s); internal), "xent.losses" (N,
 * exact), "xent.loss" (1, reduction over N, divided by N inside). Serves
 * GPT-2 (N = B*T, V = vocabulary) and the MLP classifier (N = batch,
 * V = classes). */
int krn_crossentropy_forward(krn_ctx *ctx, float *loss, float *losses, float *probs,
                             const float *logits, const int32_t *targets, size_t N,
                             size_t V) OVT_MUST_USE;

/* dlogits (N,V) += (probs - onehot(target)) * (dloss / N), dloss the
 * gradient of the mean loss (1.0 normally; a grid value).
 * Site: "xent.bwd" (N*V, exact: (p - ind) * (dloss / N) + old). */
int krn_crossentropy_backward(krn_ctx *ctx, float *dlogits, const float *probs,
                              const int32_t *targets, float dloss, size_t N, size_t V) OVT_MUST_USE;

/* The same on `rows` of the N rows (probs, targets, dlogits hold those
 * rows), each as the whole op computes it (the scale dloss / N): the
 * arbiter's re-execution of one block (arbiter/block.h). rows <= N. */
int krn_crossentropy_backward_rows(krn_ctx *ctx, float *dlogits, const float *probs, const int32_t *targets,
                                   float dloss, size_t N, size_t rows, size_t V) OVT_MUST_USE;

/* ---- optimizer ----------------------------------------------------------- */

/* norm (scalar) = sqrt(sum of grads[i]^2) over grads (n), the global
 * gradient norm for clipping. Sites: "gradnorm.sumsq" (1, reduction over n),
 * "gradnorm.sqrt" (1, exact). */
int krn_grad_norm(krn_ctx *ctx, float *norm, const float *grads, size_t n) OVT_MUST_USE;

/* factor (scalar) = norm > max_norm ? max_norm / norm : 1, the gradient scale
 * of clipping (pass it to krn_adamw_update as grad_scale). max_norm > 0.
 * Site: "clip.factor" (1, exact). */
int krn_clip_factor(krn_ctx *ctx, float *factor, float norm, float max_norm) OVT_MUST_USE;

/* The AdamW bias corrections of step t >= 1: bc1 = 1 - beta1^t,
 * bc2 = 1 - beta2^t (scalars). Sites: "adamw.pow1", "adamw.pow2" (1 each,
 * libm: pow(beta, t)), "adamw.bc1", "adamw.bc2" (1 each, exact). */
int krn_adamw_corrections(krn_ctx *ctx, float *bc1, float *bc2, float beta1, float beta2,
                          uint64_t t) OVT_MUST_USE;

/* AdamW on n parameters, in place, llm.c's form, with g = grads*grad_scale:
 *   m = beta1*m + (1 - beta1)*g
 *   v = beta2*v + (1 - beta2)*(g*g)
 *   params -= lr * ((m/bc1) / (sqrt(v/bc2) + eps) + weight_decay*params)
 * (m and v in that formula are the new, grid-rounded moments). All scalars
 * are grid values (the trainer rounds its schedule through sites).
 * Sites: "adamw.m", "adamw.v", "adamw.param" (n each, exact). */
int krn_adamw_update(krn_ctx *ctx, float *params, float *m, float *v, const float *grads,
                     float bc1, float bc2, float lr, float beta1, float beta2, float eps,
                     float weight_decay, float grad_scale, size_t n) OVT_MUST_USE;

/* ---- convolution, batch norm, pooling (ResNet, issue 29) ---------------- */

/* Their cuda twins are kernels/cuda/conv.cu, bn.cu and pool.cu. Shapes are
 * NCHW; OH = (H + 2*pad - KH)/stride + 1 and OW = (W + 2*pad - KW)/stride + 1
 * (rounded down, at least 1); P = OH*OW; K = C*KH*KW, the taps
 * k = (c, kh, kw) in row-major order (the order of PyTorch's weight
 * (OC, C, KH, KW) in memory). */

/* out (N,OC,OH,OW) = the 2-D convolution (cross-correlation, as PyTorch's
 * Conv2d) of inp (N,C,H,W) with weight (OC,C,KH,KW), + bias (OC) or NULL;
 * stride >= 1 and pad the same in both dimensions (H + 2*pad >= KH,
 * W + 2*pad >= KW), zeros in the padding. Computed as im2col: per image the
 * column matrix col (K,P), col[k][p] the input under tap k of output
 * position p (exact copies, 0 in the padding), and out_n (OC,P) =
 * weight (OC,K) @ col, a chunked reduction over K exactly as matmul's.
 * Sites: "conv.fwd" (N*OC*P, reduction over K), then, with a bias,
 * "conv.fwd.bias" (N*OC*P, exact: out + bias). Saves nothing. */
int krn_conv2d_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight, const float *bias,
                       size_t N, size_t C, size_t H, size_t W, size_t OC, size_t KH, size_t KW, size_t stride,
                       size_t pad) OVT_MUST_USE;

/* The gradients of krn_conv2d_forward, given dout (N,OC,OH,OW):
 *   dinp (N,C,H,W) += for each input element, the sum over the taps
 *     (kh, kw) that reach it from an output position (oh, ow), in row-major
 *     (kh, kw) order, of the chunked sum over oc of
 *     dout[n,oc,oh,ow]*weight[oc,c,kh,kw] (a GEMM weight^T @ dout_n into
 *     an FP64 column matrix (K,P), then col2im adding each element's at
 *     most KH*KW column values in that fixed order, s = 0, s = s + v, in
 *     FP64), then + old                                [dinp NULL: skipped]
 *   dweight (OC,C,KH,KW) += the chunked sum over the N*P positions (n, p),
 *     in that order, of dout[n,oc,p]*col_n[k][p] + old
 *   dbias (OC) += the chunked sum over (n, p) of dout[n,oc,p] + old
 *                                                      [NULL: no bias]
 * Sites: "conv.bwd.dinp" (N*C*H*W, reduction over OC per tap, then over the
 * taps), "conv.bwd.dweight" (OC*K, reduction over N*P), "conv.bwd.dbias"
 * (OC, reduction over N*P), in that order, each skipped when its output is
 * NULL. */
int krn_conv2d_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C, size_t H, size_t W,
                        size_t OC, size_t KH, size_t KW, size_t stride, size_t pad) OVT_MUST_USE;

/* Batch norm in training mode (PyTorch's BatchNorm2d, training), inp and
 * out (N,C,HW), per channel c over its M = N*HW values (M >= 2), taken in
 * (n, hw) order:
 *   mean = sum(x)/M, var = sum((x - mean)^2)/M (biased), rstd = 1/sqrt(var + eps),
 *   out = ((x - mean)*rstd)*weight + bias,
 *   running_mean = (1 - momentum)*running_mean + momentum*mean,
 *   running_var = (1 - momentum)*running_var + momentum*((var*M)/(M - 1))
 * (the running variance unbiased, as PyTorch's, from the grid var); weight,
 * bias, mean, rstd (C); running_mean and running_var (C) updated in place;
 * eps and momentum FP64 constants of the run config (PyTorch: 1e-5, 0.1).
 * Sites: "bn.mean" (C, reduction over M), "bn.var" (C, reduction over M;
 * internal), "bn.rstd" (C, exact), "bn.fwd" (N*C*HW, exact),
 * "bn.running_mean", "bn.running_var" (C each, exact). */
int krn_batchnorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd, float *running_mean,
                          float *running_var, const float *inp, const float *weight, const float *bias, size_t N,
                          size_t C, size_t HW, double eps, double momentum) OVT_MUST_USE;

/* Batch norm in evaluation mode: out (N,C,HW) = ((x - running_mean)*r)*weight
 * + bias per channel, r = 1/sqrt(running_var + eps) in FP64 (not rounded).
 * Site: "bn.eval" (N*C*HW, exact). out may equal inp. */
int krn_batchnorm_eval(krn_ctx *ctx, float *out, const float *inp, const float *weight, const float *bias,
                       const float *running_mean, const float *running_var, size_t N, size_t C, size_t HW,
                       double eps) OVT_MUST_USE;

/* Layernorm's backward per channel over its M = N*HW values: with
 * norm = (x - mean)*rstd and dnorm = weight*dout (exact per element),
 *   dmean = sum(dnorm)/M, dnmean = sum(dnorm*norm)/M,
 *   dbias (C) += sum(dout), dweight (C) += sum(norm*dout),
 *   dinp (N,C,HW) += ((dnorm - dmean) - norm*dnmean)*rstd.
 * Sites: "bn.bwd.dmean", "bn.bwd.dnmean" (C, reduction over M; internal),
 * "bn.bwd.dbias", "bn.bwd.dweight" (C, reduction over M, + old),
 * "bn.bwd.dinp" (N*C*HW, exact). */
int krn_batchnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean, const float *rstd, size_t N,
                           size_t C, size_t HW) OVT_MUST_USE;

/* Max pooling (PyTorch's MaxPool2d) of inp (N,C,H,W) with a k x k window,
 * stride >= 1, 2*pad <= k (the padding never wins: every window holds an
 * input element): out (N,C,OH,OW) = the window's maximum, idx (N,C,OH,OW)
 * = h*W + w of the element it came from, the first maximum in row-major
 * window order on ties (a comparison of grid values: exact).
 * Site: "maxpool.fwd" (N*C*OH*OW, exact). */
int krn_maxpool2d_forward(krn_ctx *ctx, float *out, int32_t *idx, const float *inp, size_t N, size_t C,
                          size_t H, size_t W, size_t k, size_t stride, size_t pad) OVT_MUST_USE;

/* dinp (N,C,H,W) += dout routed to the elements idx names: each input
 * element's value is s + old, s the sum, s = 0, s = s + dout, of the dout
 * of the output positions whose idx names it in increasing (oh, ow) order
 * (windows overlap when stride < k). An idx outside [0, H*W) is OVT_EINVAL.
 * Site: "maxpool.bwd" (N*C*H*W, exact: a sum in a fixed order). */
int krn_maxpool2d_backward(krn_ctx *ctx, float *dinp, const float *dout, const int32_t *idx, size_t N,
                           size_t C, size_t H, size_t W, size_t k, size_t stride, size_t pad) OVT_MUST_USE;

/* out (N,C) = the mean of each (n, c) plane of inp (N,C,HW).
 * Site: "avgpool.fwd" (N*C, reduction over HW, / HW). */
int krn_avgpool_global_forward(krn_ctx *ctx, float *out, const float *inp, size_t N, size_t C,
                               size_t HW) OVT_MUST_USE;

/* dinp (N,C,HW) += dout[n,c] / HW. Site: "avgpool.bwd" (N*C*HW, exact:
 * (dout / HW) + old). */
int krn_avgpool_global_backward(krn_ctx *ctx, float *dinp, const float *dout, size_t N, size_t C,
                                size_t HW) OVT_MUST_USE;

/* ---- memory ------------------------------------------------------------- */

/* Frees the calling thread's scratch buffers (the ops' large FP64
 * temporaries, kept between calls so a training loop does not fault in
 * fresh pages every step; up to about 1 GB for GPT-2 small). For processes
 * that run a step now and then, such as the arbiter. */
void krn_ops_release(void);

#endif
