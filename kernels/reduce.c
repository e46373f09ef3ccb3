/* The chunked summation order, the bands, shared helpers (reduce.h). */
#include "kernels/reduce.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Output tile of the chunked GEMM: the partial products of one tile stay in
 * cache while the chunks are added (bench/bench_gemm.c measured the size). */
#define KRN_TILE_M 256
#define KRN_TILE_N 512

double krn_gamma(double k)
{
    return k * KRN_U / (1.0 - k * KRN_U);
}

double krn_chunked_gamma(size_t K)
{
    size_t c = K < KRN_GEMM_CHUNK ? K : KRN_GEMM_CHUNK;
    size_t n = (K + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK;
    if (n == 0)
        n = 1;
    return krn_gamma((double)(c + n - 1));
}

double krn_chunked_dot(const krn_cpu *be, const double *x, ptrdiff_t incx, const double *y,
                       ptrdiff_t incy, size_t K)
{
    double s = 0;
    for (size_t k0 = 0; k0 < K; k0 += KRN_GEMM_CHUNK) {
        size_t kc = K - k0 < KRN_GEMM_CHUNK ? K - k0 : KRN_GEMM_CHUNK;
        double part = krn_cpu_dot(be, x + (ptrdiff_t)k0 * incx, incx,
                                  y ? y + (ptrdiff_t)k0 * incy : NULL, incy, kc);
        s = k0 == 0 ? part : s + part;
    }
    return s;
}

int krn_chunked_gemm(const krn_cpu *be, double *out, bool ta, const double *a, size_t lda, bool tb,
                     const double *b, size_t ldb, size_t m, size_t n, size_t k)
{
    if (k == 0) {
        memset(out, 0, m * n * sizeof *out);
        return 0;
    }
    double *part = NULL;
    if (k > KRN_GEMM_CHUNK) {
        part = krn_doubles((size_t)KRN_TILE_M * KRN_TILE_N, "chunked GEMM tile");
        if (!part)
            return OVT_ENOMEM;
    }
    for (size_t i0 = 0; i0 < m; i0 += KRN_TILE_M) {
        size_t mb = m - i0 < KRN_TILE_M ? m - i0 : KRN_TILE_M;
        for (size_t j0 = 0; j0 < n; j0 += KRN_TILE_N) {
            size_t nb = n - j0 < KRN_TILE_N ? n - j0 : KRN_TILE_N;
            double *tile = out + i0 * n + j0;
            for (size_t k0 = 0; k0 < k; k0 += KRN_GEMM_CHUNK) {
                size_t kc = k - k0 < KRN_GEMM_CHUNK ? k - k0 : KRN_GEMM_CHUNK;
                const double *ab = ta ? a + k0 * lda + i0 : a + i0 * lda + k0;
                const double *bb = tb ? b + j0 * ldb + k0 : b + k0 * ldb + j0;
                if (k0 == 0) {
                    krn_cpu_gemm(be, tile, n, ta, ab, lda, tb, bb, ldb, mb, nb, kc);
                    continue;
                }
                krn_cpu_gemm(be, part, nb, ta, ab, lda, tb, bb, ldb, mb, nb, kc);
                for (size_t i = 0; i < mb; i++) {
                    double *row = tile + i * n;
                    const double *prow = part + i * nb;
                    for (size_t j = 0; j < nb; j++)
                        row[j] += prow[j];
                }
            }
        }
    }
    free(part);
    return 0;
}

krn_band krn_band_reduction(krn_band_kind kind, size_t K, double factor, int ops)
{
    krn_band band = {0};
    band.kind = kind;
    band.scale = KRN_BAND_MARGIN * 2.0 * krn_chunked_gamma(K) * factor;
    band.rel = KRN_BAND_MARGIN * 2.0 * KRN_U * ops;
    return band;
}

krn_band krn_band_libm(void)
{
    krn_band band = {0};
    band.kind = KRN_BAND_ZERO;
    band.rel = KRN_BAND_MARGIN * 2.0 * KRN_LIBM_ULP * 0x1p-52;
    return band;
}

krn_band krn_band_exact(void)
{
    krn_band band = {0};
    band.kind = KRN_BAND_ZERO;
    return band;
}

int krn_colsum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *acc,
                    const double *m, size_t N, size_t C)
{
    int rc = OVT_ENOMEM;
    double *x = krn_doubles(C, name), *mag = krn_doubles(C, name);
    if (!x || !mag)
        goto done;
    for (size_t j = 0; j < C; j++) {
        x[j] = krn_chunked_dot(be, m + j, (ptrdiff_t)C, NULL, 0, N) + (double)acc[j];
        mag[j] = 0;
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < C; j++)
            mag[j] += fabs(m[i * C + j]);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, N, 1.0, 1);
    band.a = mag;
    rc = krn_site(ctx, name, acc, x, C, &band);
done:
    free(x);
    free(mag);
    return rc;
}

void krn_row_norms(double *norms, const float *m, size_t rows, size_t cols)
{
    for (size_t i = 0; i < rows; i++) {
        const float *r = m + i * cols;
        double s = 0;
        for (size_t j = 0; j < cols; j++)
            s += (double)r[j] * (double)r[j];
        norms[i] = sqrt(s);
    }
}

void krn_col_norms(double *norms, const float *m, size_t rows, size_t cols)
{
    for (size_t j = 0; j < cols; j++)
        norms[j] = 0;
    for (size_t i = 0; i < rows; i++) {
        const float *r = m + i * cols;
        for (size_t j = 0; j < cols; j++)
            norms[j] += (double)r[j] * (double)r[j];
    }
    for (size_t j = 0; j < cols; j++)
        norms[j] = sqrt(norms[j]);
}

void krn_widen(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

double *krn_doubles(size_t n, const char *what)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX / sizeof(double)) {
        ovt_fail(OVT_ENOMEM, "%s: %zu doubles overflow the address space", what, n);
        return NULL;
    }
    double *p = malloc(n * sizeof(double));
    if (!p)
        ovt_fail(OVT_ENOMEM, "%s: out of memory allocating %zu doubles", what, n);
    return p;
}

float *krn_floats(size_t n, const char *what)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX / sizeof(float)) {
        ovt_fail(OVT_ENOMEM, "%s: %zu floats overflow the address space", what, n);
        return NULL;
    }
    float *p = malloc(n * sizeof(float));
    if (!p)
        ovt_fail(OVT_ENOMEM, "%s: out of memory allocating %zu floats", what, n);
    return p;
}

int krn_check_ptr(const char *op, const char *what, const void *p)
{
    if (!p)
        return ovt_fail(OVT_EINVAL, "%s: %s is NULL", op, what);
    return 0;
}

int krn_check_dims(const char *op, size_t a, size_t b, size_t *product)
{
    if (a == 0 || b == 0)
        return ovt_fail(OVT_EINVAL, "%s: zero dimension (%zu x %zu)", op, a, b);
    if (a > SIZE_MAX / 16 / b)
        return ovt_fail(OVT_EINVAL, "%s: dimensions %zu x %zu overflow", op, a, b);
    *product = a * b;
    return 0;
}
