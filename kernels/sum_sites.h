#ifndef OVT_KERNELS_SUM_SITES_H
#define OVT_KERNELS_SUM_SITES_H

/* Internal to kernels/: the reduction sites the ops share, each a sum in
 * the contract's chunked order (reduce.h) rounded at a site with its band:
 * column sums (the bias and weight gradients), row means and row sums. */

#include <stddef.h>

#include "common/err.h"
#include "kernels/cpu/backend.h"
#include "kernels/site.h"

/* Site `name`: acc (C) += the column sums of m (N,C), each a reduction over
 * N rows added to the old value last. The bias and weight gradients of
 * matmul, bias add and layernorm. */
int krn_colsum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *acc,
                    const double *m, size_t N, size_t C) OVT_MUST_USE;

/* Site `name` (N): out[i] = (sum_c a[i,c]*b[i,c]) / C per row of a, b (N,C)
 * (b NULL: the plain sum), a reduction over C followed by one division;
 * x and mag are N doubles of the caller's (values and band magnitudes).
 * The means of layernorm, RMSNorm, batch norm and global average pooling. */
int krn_row_mean_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out, const double *a,
                      const double *b, size_t N, size_t C, double *x, double *mag) OVT_MUST_USE;

/* Site `name` (N): acc[i] += sum_c a[i,c]*b[i,c] per row (b NULL: the plain
 * sum), a reduction over C with the old value added last. The per-channel
 * gradients of batch norm and the convolution's bias. */
int krn_row_sum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *acc, const double *a,
                     const double *b, size_t N, size_t C) OVT_MUST_USE;

/* krn_colsum_site's values for columns [j0, j1): x[j] = krn_chunked_dot of
 * column j of m (N,C) + acc[j]; the cpu backend takes eight columns at a
 * time, each in krn_cpu_dot's order (the same bits). */
void krn_colsum_values(const krn_cpu *be, const double *m, size_t N, size_t C, const float *acc,
                       size_t j0, size_t j1, double *x);

#endif
