#ifndef OVT_KERNELS_CUDA_CUDA_H
#define OVT_KERNELS_CUDA_CUDA_H

/* Internal to kernels/: the cuda backend (kernels/cuda/, built when CMake
 * finds CUDA with cuBLAS: OVT_HAVE_CUDA). Each op of kernels/ops.h has a
 * krn_cuda_ twin with the same logical signature, in its own file; the op in
 * kernels/ops_*.c checks its arguments and hands over to the twin when the
 * ctx's backend is KRN_BACKEND_CUDA. A tensor is device memory (the
 * resident run, kernels/mem.h) or host memory (OVT_CUDA_HOST_TENSORS=1,
 * the path verified on 2026-12-04), each pointer on its own: the twin
 * copies the inputs into its device buffers (over PCIe from host memory,
 * on the device from device memory), runs every site of the op there
 * (rounding, band, flags and compaction; only the few candidate elements
 * come back to be settled, see kernels/site_sparse.h) and copies the
 * outputs to where the caller's tensors are. docs/gpu.md describes the
 * design. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "kernels/chunked_gemm.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/site.h"

int krn_cuda_matmul_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight,
                       const float *bias, size_t N, size_t C, size_t OC);
int krn_cuda_matmul_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C,
                        size_t OC);
int krn_cuda_bias_forward(krn_ctx *ctx, float *out, const float *inp, const float *bias, size_t N,
                     size_t C);
int krn_cuda_bias_backward(krn_ctx *ctx, float *dbias, const float *dout, size_t N, size_t C);
int krn_cuda_gelu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n);
int krn_cuda_gelu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout,
                      size_t n);
int krn_cuda_relu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n);
int krn_cuda_relu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout,
                      size_t n);
int krn_cuda_layernorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, size_t N, size_t C);
int krn_cuda_layernorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                           const float *dout, const float *inp, const float *weight,
                           const float *mean, const float *rstd, size_t N, size_t C);
int krn_cuda_rmsnorm_forward(krn_ctx *ctx, float *out, float *rstd, const float *inp, const float *weight,
                             double eps, size_t N, size_t C);
int krn_cuda_rmsnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, const float *dout, const float *inp,
                              const float *weight, const float *rstd, size_t N, size_t C);
int krn_cuda_rope_table(krn_ctx *ctx, float *cos, float *sin, size_t T, size_t hs, double theta);
int krn_cuda_rope_forward(krn_ctx *ctx, float *out, const float *inp, const float *cos, const float *sin,
                          size_t B, size_t T, size_t NH, size_t hs);
int krn_cuda_rope_backward(krn_ctx *ctx, float *dinp, const float *dout, const float *cos, const float *sin,
                           size_t B, size_t T, size_t NH, size_t hs);
int krn_cuda_swiglu_forward(krn_ctx *ctx, float *out, const float *a, const float *b, size_t n);
int krn_cuda_swiglu_backward(krn_ctx *ctx, float *da, float *db, const float *dout, const float *a,
                             const float *b, size_t n);
int krn_cuda_gqa_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *q, const float *k,
                         const float *v, size_t B, size_t T, size_t NH, size_t NKV, size_t hs);
int krn_cuda_gqa_backward(krn_ctx *ctx, float *dq, float *dk, float *dv, float *dpreatt, float *datt,
                          const float *dout, const float *q, const float *k, const float *v, const float *att,
                          size_t B, size_t T, size_t NH, size_t NKV, size_t hs);
int krn_cuda_attention_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *inp,
                          size_t B, size_t T, size_t C, size_t NH);
int krn_cuda_attention_backward(krn_ctx *ctx, float *dinp, float *dpreatt, float *datt,
                           const float *dout, const float *inp, const float *att, size_t B,
                           size_t T, size_t C, size_t NH);
int krn_cuda_conv2d_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight, const float *bias,
                            size_t N, size_t C, size_t H, size_t W, size_t OC, size_t KH, size_t KW, size_t stride,
                            size_t pad);
int krn_cuda_conv2d_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, size_t N, size_t C, size_t H, size_t W,
                             size_t OC, size_t KH, size_t KW, size_t stride, size_t pad);
int krn_cuda_batchnorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd, float *running_mean,
                               float *running_var, const float *inp, const float *weight, const float *bias,
                               size_t N, size_t C, size_t HW, double eps, double momentum);
int krn_cuda_batchnorm_eval(krn_ctx *ctx, float *out, const float *inp, const float *weight, const float *bias,
                            const float *running_mean, const float *running_var, size_t N, size_t C, size_t HW,
                            double eps);
int krn_cuda_batchnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *weight, const float *mean, const float *rstd,
                                size_t N, size_t C, size_t HW);
int krn_cuda_maxpool2d_forward(krn_ctx *ctx, float *out, int32_t *idx, const float *inp, size_t N, size_t C,
                               size_t H, size_t W, size_t k, size_t stride, size_t pad);
int krn_cuda_maxpool2d_backward(krn_ctx *ctx, float *dinp, const float *dout, const int32_t *idx, size_t N,
                                size_t C, size_t H, size_t W, size_t k, size_t stride, size_t pad);
int krn_cuda_avgpool_global_forward(krn_ctx *ctx, float *out, const float *inp, size_t N, size_t C, size_t HW);
int krn_cuda_avgpool_global_backward(krn_ctx *ctx, float *dinp, const float *dout, size_t N, size_t C,
                                     size_t HW);
int krn_cuda_residual_forward(krn_ctx *ctx, float *out, const float *inp1, const float *inp2,
                         size_t n);
int krn_cuda_residual_backward(krn_ctx *ctx, float *dinp1, float *dinp2, const float *dout,
                          size_t n);
int krn_cuda_accumulate(krn_ctx *ctx, float *dst, const float *src, size_t n);
int krn_cuda_encoder_forward(krn_ctx *ctx, float *out, const int32_t *tokens, const float *wte,
                        const float *wpe, size_t B, size_t T, size_t C, size_t V);
int krn_cuda_encoder_backward(krn_ctx *ctx, float *dwte, float *dwpe, const float *dout,
                         const int32_t *tokens, size_t B, size_t T, size_t C, size_t V);
int krn_cuda_crossentropy_forward(krn_ctx *ctx, float *loss, float *losses, float *probs,
                             const float *logits, const int32_t *targets, size_t N,
                             size_t V);
int krn_cuda_crossentropy_backward(krn_ctx *ctx, float *dlogits, const float *probs,
                              const int32_t *targets, float dloss, size_t N, size_t V);
int krn_cuda_grad_norm(krn_ctx *ctx, float *norm, const float *grads, size_t n);
int krn_cuda_clip_factor(krn_ctx *ctx, float *factor, float norm, float max_norm);
int krn_cuda_adamw_corrections(krn_ctx *ctx, float *bc1, float *bc2, float beta1, float beta2,
                          uint64_t t);
int krn_cuda_adamw_update(krn_ctx *ctx, float *params, float *m, float *v, const float *grads,
                     float bc1, float bc2, float lr, float beta1, float beta2, float eps,
                     float weight_decay, float grad_scale, size_t n);

/* The tensor tree root (common/tree.h) of len bytes of device memory
 * (bytes: a device pointer; NULL allowed when len is 0): every leaf hashed
 * on its own thread, the levels reduced on the device, only the 32-byte
 * root copied back (kernels/cuda/tree_hash.cu, common/sha256_hd.h). A
 * tensor of floats is hashed as its little-endian words, which is device
 * memory order. Uses the ctx's device buffers; OVT_ENOMEM, OVT_EIO. */
int krn_cuda_tree_root(krn_ctx *ctx, ovt_hash *root, const void *bytes, size_t len) OVT_MUST_USE;

/* The roots of count >= 1 tensors at once (a state's digests: params, m and
 * v of every tensor, trainer/state_hash.c): roots[t] the tree root of
 * lens[t] bytes at the device pointer bytes[t], in 1 + levels launches
 * whatever the count (kernels/cuda/tree_plan.h). */
int krn_cuda_tree_roots(krn_ctx *ctx, ovt_hash *roots, const void *const *bytes, const size_t *lens,
                        size_t count) OVT_MUST_USE;

/* For tests and benchmarks: one product on the device, out (m x n, host)
 * = op(a) op(b) (+ old), from host operands as krn_chunked_gemm_in takes
 * them (FP64 b only: bf and bnorms NULL), by path, with the batched path's
 * scratch budget in doubles (0: the default). The operands are uploaded
 * once, the product runs reps times (at least once), out receives its
 * value and *seconds (NULL: not wanted) the fastest run's device time. */
int krn_cuda_gemm_probe(krn_ctx *ctx, krn_cuda_gemm_path path, size_t budget, const krn_gemm_in *in, size_t m,
                        size_t n, size_t k, double *out, int reps, double *seconds) OVT_MUST_USE;

/* Device memory for kernels/mem.c: bytes zeroed (OVT_ENOMEM with CUDA's
 * reason), freed; a copy between any two of host and device memory
 * (cudaMemcpyDefault: unified addressing tells which is which) and a
 * zeroing, each finished before it returns (OVT_EIO with CUDA's reason). */
int krn_cuda_mem_alloc(void **out, size_t bytes);
void krn_cuda_mem_free(void *p);
int krn_cuda_mem_copy(void *dst, const void *src, size_t bytes);
int krn_cuda_mem_zero(void *p, size_t bytes);

#endif
