#ifndef OVT_KERNELS_REDUCE_H
#define OVT_KERNELS_REDUCE_H

/* Internal to kernels/: the chunked summation order every backend follows
 * (the part of the order the numeric contract fixes) and the bands that go
 * with it. docs/op-bounds.md derives the bounds. The chunked GEMM is
 * chunked_gemm.h, the reduction sites built on this order sum_sites.h. */

#include <stddef.h>

#include "kernels/contract.h"
#include "kernels/cpu/backend.h"
#include "kernels/site.h"

/* gamma_k = k*u / (1 - k*u). */
double krn_gamma(double k);

/* The coefficient of a chunked sum of K terms: gamma_{c + n - 1} with
 * c = min(K, KRN_GEMM_CHUNK) and n = ceil(K / KRN_GEMM_CHUNK): every correct
 * implementation is within this times sum|terms| of the exact sum. */
double krn_chunked_gamma(size_t K);

/* sum_k x[k*incx]*y[k*incy] (y NULL: all ones) in the contract's order:
 * consecutive chunks of KRN_GEMM_CHUNK terms, each in the backend's order,
 * chunk sums added into the result in increasing chunk order. */
double krn_chunked_dot(const krn_cpu *be, const double *x, ptrdiff_t incx, const double *y,
                       ptrdiff_t incy, size_t K);

/* Bands. The caller fills kind, a, b, cols where the band has them.
 * reduction: tau = 2*MARGIN*(2*chunked_gamma(K)*factor*mag_i + 2*u*ops*|x|),
 *   mag_i >= sum|terms| of element i (from a / a x b), factor a constant the
 *   exact sum is multiplied by (1/C for a mean, a scale), ops the number of
 *   FP64 operations applied after the sum (a division, the accumulation
 *   into an old gradient), each of which can add one rounding per side.
 * libm: tau = 2*MARGIN*2*KRN_LIBM_ULP*2^-52*|x|, for a libm call on an
 *   argument every implementation computes identically.
 * exact: tau = 0. */
krn_band krn_band_reduction(krn_band_kind kind, size_t K, double factor, int ops);
krn_band krn_band_libm(void);
krn_band krn_band_exact(void);

/* The band of site "conv.bwd.dinp" (kernels/ops_conv.c), a in the caller's
 * hands: a reduction over OC followed by the in-order sum of at most taps
 * (KH*KW) tap values, and the accumulation into the old gradient. */
krn_band krn_conv_dinp_band(size_t OC, size_t taps);

#endif
