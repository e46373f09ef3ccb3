/* Internal to kernels/cuda/: the device state a cuda ctx carries, buffers,
 * copies, error reporting and the device helpers every op shares. */
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#define restrict __restrict__
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/shape.h"
#include "kernels/cuda/tree_plan.h"
#include "kernels/ops.h"
#include "kernels/reduce.h"
#include "kernels/site_ctx.h"
#include "kernels/site_sparse.h"
#include "kernels/sum_sites.h"
#undef restrict
}

/* Device buffers, one per slot, grown as needed and kept across calls. An op
 * uses each slot for one tensor; the site (site.cu) has its own. */
enum {
    DEV_A, DEV_B, DEV_C, DEV_D, DEV_E, DEV_F, DEV_G, DEV_H, DEV_I,
    DEV_X, DEV_MAG, DEV_N1, DEV_N2, DEV_OUT, DEV_OUT2, DEV_OUT3, DEV_TILE,
    DEV_TOK, DEV_TOK2, DEV_TOK3,
    DEV_SITE_FLAG, DEV_SITE_OFFS, DEV_SITE_IDX, DEV_SITE_X, DEV_SITE_TAU, DEV_SITE_VAL,
    DEV_SITE_LIDX, DEV_SITE_LX, DEV_SITE_LTAU, DEV_SITE_LVAL, DEV_SITE_SCAN, DEV_SITE_COUNT,
    DEV_TREE_A, DEV_TREE_B, DEV_TREE_META,
    DEV_NSLOTS
};

/* Host staging buffers of the site (only the candidates travel). */
enum { HOST_IDX, HOST_X, HOST_TAU, HOST_VAL, HOST_LIDX, HOST_LX, HOST_LTAU, HOST_LVAL, HOST_NSLOTS };

struct krn_dev {
    cublasHandle_t blas;
    void *buf[DEV_NSLOTS];
    size_t cap[DEV_NSLOTS];
    void *host[HOST_NSLOTS];
    size_t host_cap[HOST_NSLOTS];
};

krn_dev *krn_dev_of(krn_ctx *ctx);

/* A device buffer of at least bytes in slot, or NULL with an OVT_ENOMEM
 * message. */
void *krn_dev_slot(krn_dev *d, int slot, size_t bytes);
void *krn_dev_host(krn_dev *d, int slot, size_t bytes);

template <class T> static inline T *dev_array(krn_dev *d, int slot, size_t n)
{
    return (T *)krn_dev_slot(d, slot, (n ? n : 1) * sizeof(T));
}

template <class T> static inline T *host_array(krn_dev *d, int slot, size_t n)
{
    return (T *)krn_dev_host(d, slot, (n ? n : 1) * sizeof(T));
}

/* 0, or OVT_EIO with a message naming what failed and CUDA's reason. */
int krn_dev_check(cudaError_t e, const char *what);
int krn_dev_blas_check(cublasStatus_t s, const char *what);
/* The last launch's error, then a synchronisation's. */
int krn_dev_launched(const char *what);

/* Whether p is device memory (a resident run's tensor, kernels/mem.h);
 * host memory, and NULL, are not. */
bool krn_dev_is_device(const void *p);

/* bytes from src into the device buffer dst, and from the device buffer
 * src into dst: the caller's side (src of put, dst of get) host or device
 * memory, each pointer on its own (a host copy over PCIe, a device one on
 * the device), finished when they return. */
int krn_dev_put(void *dst, const void *src, size_t bytes);
int krn_dev_get(void *dst, const void *src, size_t bytes);

/* src (n floats, host) into slot as floats; and widened to doubles in
 * slot64 (exact). NULL after a message. */
float *krn_dev_upload(krn_dev *d, int slot, const float *src, size_t n);
double *krn_dev_upload_wide(krn_dev *d, int slot, int slot64, const float *src, size_t n);

/* A site on device values: x (n doubles on the device), band with device
 * arrays a and b (NULL: exact). out (n floats, device) receives the grid
 * values; with host_out not NULL they are also copied there. */
int krn_cuda_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *x,
                  size_t n, const krn_band *band);

/* krn_cuda_site with a KRN_BAND_OUTER band that repeats every block
 * elements (block a multiple of band->cols, n a multiple of block): element
 * i's row value a[i % block / cols], its column value b[i / block * cols +
 * i % cols], b holding cols values per block. The site krn_site_parts
 * makes on the CPU with one part per block, a the same rows for every part
 * and b the part's own columns (the convolution's per-image patches). */
int krn_cuda_site_blocks(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *x,
                         size_t n, const krn_band *band, size_t block);

/* out (m x n, dense, device) = op(a) @ op(b) with k in chunks of
 * KRN_GEMM_CHUNK, the chunk products (each with beta = 0, cuBLAS's order
 * inside) added in increasing chunk order. a, b on the device, stored as
 * krn_cpu_gemm says. The path is OVT_CUDA_GEMM's (gemm_plan.h): by default
 * krn_cuda_gemm_batched, with "per-chunk" krn_cuda_gemm_per_chunk. The
 * scratch is slot DEV_TILE. */
int krn_cuda_chunked_gemm(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb,
                          const double *b, size_t ldb, size_t m, size_t n, size_t k);

/* The same, then out += old (m x n FP32 on the device, NULL: nothing), one
 * FP64 addition per element after the last chunk (the accumulation into an
 * existing gradient); the batched path does it in its last reduction. */
int krn_cuda_chunked_gemm_old(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb,
                              const double *b, size_t ldb, const float *old, size_t m, size_t n, size_t k);

/* The product by one path; budget: the batched path's scratch in doubles
 * (0: krn_cuda_gemm_budget). */
int krn_cuda_gemm_path_run(krn_dev *d, krn_cuda_gemm_path path, size_t budget, double *out, bool ta, const double *a,
                           size_t lda, bool tb, const double *b, size_t ldb, const float *old, size_t m, size_t n,
                           size_t k);

/* The batched path (gemm.cu, gemm_plan.h). */
int krn_cuda_gemm_batched(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb, const double *b,
                          size_t ldb, const float *old, size_t m, size_t n, size_t k, size_t budget);

/* The per-chunk path (reduce.cu), verified on an H200 on 2026-12-04: one
 * DGEMM per chunk with beta = 0, chunk 0 into out and every later chunk
 * into a scratch added into out by a kernel, in increasing chunk order. */
int krn_cuda_gemm_per_chunk(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb,
                            const double *b, size_t ldb, size_t m, size_t n, size_t k);

/* Euclidean norms of the rows / columns of a dense device matrix (doubles). */
int krn_cuda_row_norms(double *norms, const double *m, size_t rows, size_t cols);
int krn_cuda_col_norms(double *norms, const double *m, size_t rows, size_t cols);

/* Site `name` (C): acc += the column sums of m (N,C, device doubles), each a
 * chunked reduction over N, old value added last. acc is host memory. */
int krn_cuda_colsum_site(krn_ctx *ctx, const char *name, float *acc, const double *m, size_t N,
                         size_t C);

/* Site `name` (N): out[i] = (sum_c a[i,c]*b[i,c]) / C per row of the (N,C)
 * device doubles a, b (b NULL: plain sum), a reduction over C and one
 * division, band scale 1/C (kernels/ops_norm.c row_mean_site). Uses the
 * slots DEV_H and DEV_I; out is device memory, host_out NULL or a copy. */
int krn_cuda_row_mean_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *a,
                           const double *b, size_t N, size_t C);

/* Site `name` (N): acc[i] += sum_c a[i,c]*b[i,c] per row of the (N,C)
 * device doubles (b NULL: plain sum), the old value added last
 * (kernels/reduce.c krn_row_sum_site). acc is host memory; uses the slots
 * DEV_H, DEV_I and DEV_OUT3. */
int krn_cuda_row_sum_site(krn_ctx *ctx, const char *name, float *acc, const double *a, const double *b,
                          size_t N, size_t C);

/* x = a * b element-wise (device doubles, one rounding each); the launch's
 * failure named by what. */
int krn_cuda_mul(const char *what, double *x, const double *a, const double *b, size_t n);

/* x (device) = a + b element-wise as an exact site, from host floats. */
int krn_cuda_exact_add(krn_ctx *ctx, const char *name, float *out, const float *a, const float *b,
                       size_t n);

#define KRN_GRID_LOOP(i, n)                                                                        \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

#define KRN_LAUNCH(n) <<<krn_cuda_blocks(n), KRN_CUDA_THREADS>>>

/* The contract's chunked order on the device (docs/op-bounds.md): chunks of
 * KRN_GEMM_CHUNK terms, each summed first term first, the chunk sums added in
 * increasing chunk order. y == NULL: a plain sum. */
__device__ static inline double krn_dchunked_dot(const double *x, ptrdiff_t incx, const double *y,
                                                 ptrdiff_t incy, size_t K)
{
    double s = 0;
    for (size_t k0 = 0; k0 < K; k0 += KRN_GEMM_CHUNK) {
        size_t kc = K - k0 < KRN_GEMM_CHUNK ? K - k0 : KRN_GEMM_CHUNK;
        double part = 0;
        for (size_t k = k0; k < k0 + kc; k++)
            part = __dadd_rn(part, y ? __dmul_rn(x[(ptrdiff_t)k * incx], y[(ptrdiff_t)k * incy])
                                     : x[(ptrdiff_t)k * incx]);
        s = k0 == 0 ? part : __dadd_rn(s, part);
    }
    return s;
}

/* sum_k |x_k * y_k| (y NULL: sum |x_k|), the magnitude a reduction band
 * uses; any order (the margin covers its rounding). */
__device__ static inline double krn_dmagnitude(const double *x, ptrdiff_t incx, const double *y,
                                               ptrdiff_t incy, size_t K)
{
    double m = 0;
    for (size_t k = 0; k < K; k++)
        m += fabs(y ? x[(ptrdiff_t)k * incx] * y[(ptrdiff_t)k * incy] : x[(ptrdiff_t)k * incx]);
    return m;
}

/* Failure plumbing of the ops: record the step's failure and return it. */
int krn_cuda_fail(krn_ctx *ctx, int rc);
