#ifndef OVT_KERNELS_REDUCE_H
#define OVT_KERNELS_REDUCE_H

/* Internal to kernels/: the chunked summation order every backend follows
 * (the part of the order the numeric contract fixes), the bands that go with
 * it, and small helpers the ops share. docs/op-bounds.md derives the bounds. */

#include <stdbool.h>
#include <stddef.h>

#include "kernels/contract.h"
#include "kernels/cpu/backend.h"
#include "kernels/site.h"

/* Rows per output tile of the chunked GEMM (reduce.c): a product split into
 * parts of rows at multiples of it computes every tile as the whole product
 * does, so its values are the same bit for bit. */
#ifndef KRN_TILE_M
#define KRN_TILE_M 256
#endif

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

/* out (m x n, dense) = op(a) @ op(b) with the inner dimension k in chunks as
 * above: per output tile, each chunk's product (beta = 0, the backend's
 * order) is added into the tile in increasing chunk order. Storage of a and
 * b as in krn_cpu_gemm. Fails only on allocation. */
int krn_chunked_gemm(const krn_cpu *be, double *out, bool ta, const double *a, size_t lda, bool tb,
                     const double *b, size_t ldb, size_t m, size_t n, size_t k) OVT_MUST_USE;

/* The operands of krn_chunked_gemm_in: a and b stored as for krn_cpu_gemm;
 * b in FP64 (b) or in FP32 (bf, the other NULL), an FP32 b being widened
 * chunk by chunk inside each tile, so no FP64 copy of it exists; old NULL or
 * an m x n FP32 matrix added to each element after its chunk sums (one FP64
 * addition: the accumulation into an existing gradient); bnorms NULL or,
 * with bf, n doubles that receive the Euclidean norms of op(b)'s columns,
 * taken as the tiles read b: without tb b's columns, each one's squares
 * added in row order (the values of krn_col_norms); with tb b's rows (a
 * forward product's weight rows), in krn_widen_rows' order, so a forward
 * product reads its weights once. */
typedef struct {
    bool ta;
    const double *a;
    size_t lda;
    bool tb;
    const double *b;
    const float *bf;
    size_t ldb;
    const float *old;
    double *bnorms;
} krn_gemm_in;

/* krn_chunked_gemm with the operands above: the same values as widening bf
 * first and adding old afterwards. */
int krn_chunked_gemm_in(const krn_cpu *be, double *out, const krn_gemm_in *in, size_t m, size_t n,
                        size_t k) OVT_MUST_USE;

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

/* fn(arg, c) for every c < nchunks on be->pool, the ctx's threads (the cpu
 * backend; ref and shuffle, and a krn_cpu without a pool, run every chunk
 * on the calling thread in order), chunks claimed in any order (pool.h).
 * Returns 0: the pool was made when the ctx lent it (krn_cpu_from_ctx). */
int krn_parallel(const krn_cpu *be, size_t nchunks, void (*fn)(void *arg, size_t chunk),
                 void *arg) OVT_MUST_USE;

/* fn(arg, i0, i1) for consecutive ranges [i0, i1) of `per` elements (the
 * last one shorter) covering [0, n), on krn_parallel: for loops whose
 * elements are independent (one thread, in order, on ref and shuffle, so
 * the shuffle backend's draws come in the same order as a plain loop's). */
int krn_parallel_ranges(const krn_cpu *be, size_t n, size_t per,
                        void (*fn)(void *arg, size_t i0, size_t i1), void *arg) OVT_MUST_USE;

/* Euclidean norms of the columns (cols values) of a row-major float matrix,
 * in FP64, each column's squares added in row order; split over columns
 * with krn_parallel. */
int krn_col_norms(const krn_cpu *be, double *norms, const float *m, size_t rows,
                  size_t cols) OVT_MUST_USE;

/* FP64 copy of a row-major float matrix (dst may be NULL: norms only) and,
 * in the same pass, the Euclidean norm of each row (norms may be NULL), with
 * eight partial sums per row; split over rows with krn_parallel. */
int krn_widen_rows(const krn_cpu *be, double *restrict dst, double *restrict norms,
                   const float *restrict src, size_t rows, size_t cols) OVT_MUST_USE;

/* FP64 copy of a float array (exact). */
void krn_widen(double *dst, const float *src, size_t n);

/* malloc of n doubles or floats with an overflow check; NULL after setting
 * an OVT_ENOMEM message naming `what`. */
double *krn_doubles(size_t n, const char *what);
float *krn_floats(size_t n, const char *what);

/* Argument checks shared by the ops: 0, or OVT_EINVAL naming the op. */
int krn_check_ptr(const char *op, const char *what, const void *p) OVT_MUST_USE;
int krn_check_dims(const char *op, size_t a, size_t b, size_t *product) OVT_MUST_USE;
/* The band of site "conv.bwd.dinp" (kernels/ops_conv.c), a in the caller's
 * hands: a reduction over OC followed by the in-order sum of at most taps
 * (KH*KW) tap values, and the accumulation into the old gradient. */
krn_band krn_conv_dinp_band(size_t OC, size_t taps);

#endif
