/* The chunked summation order, the bands, shared helpers (reduce.h). */
#include "kernels/reduce.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pool.h"

/* Output tile of the chunked GEMM: the partial products of one tile stay in
 * cache while the chunks are added (bench/bench_gemm.c measured the size). */
#ifndef KRN_TILE_M
#define KRN_TILE_M 256
#endif
#ifndef KRN_TILE_N
#define KRN_TILE_N 512
#endif

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

/* One output tile (rows i0.., columns j0..) of krn_chunked_gemm. */
static int gemm_tile(const krn_cpu *be, double *out, bool ta, const double *a, size_t lda, bool tb,
                     const double *b, size_t ldb, size_t n, size_t k, size_t i0, size_t mb,
                     size_t j0, size_t nb)
{
    double *tile = out + i0 * n + j0, *part = NULL;
    if (k > KRN_GEMM_CHUNK && !(part = krn_scratch(KRN_SCRATCH_TILE, (size_t)KRN_TILE_M * KRN_TILE_N)))
        return OVT_ENOMEM;
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
            double *restrict row = tile + i * n;
            const double *restrict prow = part + i * nb;
            for (size_t j = 0; j < nb; j++)
                row[j] += prow[j];
        }
    }
    return 0;
}

/* What the pool's workers need to compute tiles of one product. */
typedef struct {
    const krn_cpu *be;
    double *out;
    bool ta, tb;
    const double *a, *b;
    size_t lda, ldb, m, n, k, tiles_n;
    atomic_int rc;
} gemm_job;

static void gemm_tile_job(void *arg, size_t t)
{
    gemm_job *j = arg;
    size_t i0 = t / j->tiles_n * KRN_TILE_M, j0 = t % j->tiles_n * KRN_TILE_N;
    size_t mb = j->m - i0 < KRN_TILE_M ? j->m - i0 : KRN_TILE_M;
    size_t nb = j->n - j0 < KRN_TILE_N ? j->n - j0 : KRN_TILE_N;
    if (gemm_tile(j->be, j->out, j->ta, j->a, j->lda, j->tb, j->b, j->ldb, j->n, j->k, i0, mb, j0,
                  nb) != 0)
        atomic_store(&j->rc, OVT_ENOMEM);
}

/* The calling thread's pool for GEMM tiles (workers sleep between loops, so
 * nothing spins while the caller rounds). Kept for the thread's lifetime. */
static _Thread_local krn_pool *tile_pool;
static _Thread_local int tile_pool_threads;

int krn_chunked_gemm(const krn_cpu *be, double *out, bool ta, const double *a, size_t lda, bool tb,
                     const double *b, size_t ldb, size_t m, size_t n, size_t k)
{
    if (k == 0) {
        memset(out, 0, m * n * sizeof *out);
        return 0;
    }
    gemm_job job = {.be = be, .out = out, .ta = ta, .tb = tb, .a = a, .b = b, .lda = lda,
                    .ldb = ldb, .m = m, .n = n, .k = k,
                    .tiles_n = (n + KRN_TILE_N - 1) / KRN_TILE_N};
    atomic_init(&job.rc, 0);
    size_t ntiles = (m + KRN_TILE_M - 1) / KRN_TILE_M * job.tiles_n;
    int threads = be->kind == KRN_BACKEND_CPU ? be->threads : 1; /* ref: one thread */
    if (threads > 1 && ntiles > 1) {
        /* Tiles are independent: each adds its own chunks in order. */
        if (tile_pool && tile_pool_threads != threads) {
            krn_pool_free(tile_pool);
            tile_pool = NULL;
        }
        if (!tile_pool) {
            int rc = krn_pool_new(&tile_pool, threads);
            if (rc)
                return rc;
            tile_pool_threads = threads;
        }
        krn_pool_run(tile_pool, ntiles, gemm_tile_job, &job);
    } else {
        for (size_t t = 0; t < ntiles; t++)
            gemm_tile_job(&job, t);
    }
    if (atomic_load(&job.rc))
        return ovt_fail(OVT_ENOMEM, "chunked GEMM: out of memory for a tile buffer");
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

void krn_widen_rows(double *restrict dst, double *restrict norms, const float *restrict src,
                    size_t rows, size_t cols)
{
    for (size_t i = 0; i < rows; i++) {
        const float *r = src + i * cols;
        double *d = dst + i * cols;
        /* eight partial sums so the loop vectorises (the order of a band's
         * own sum is free: the margin covers its rounding) */
        double acc[8] = {0};
        size_t j = 0;
        for (; j + 8 <= cols; j += 8)
            for (int k = 0; k < 8; k++) {
                d[j + k] = r[j + k];
                acc[k] += d[j + k] * d[j + k];
            }
        double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; j < cols; j++) {
            d[j] = r[j];
            s += d[j] * d[j];
        }
        if (norms)
            norms[i] = sqrt(s);
    }
}

static _Thread_local struct {
    double *p;
    size_t n;
} scratch[KRN_SCRATCH_SLOTS];

double *krn_scratch(int slot, size_t n)
{
    if (n == 0)
        n = 1;
    if (scratch[slot].n >= n)
        return scratch[slot].p;
    if (n > SIZE_MAX / sizeof(double)) {
        ovt_fail(OVT_ENOMEM, "scratch buffer of %zu doubles overflows the address space", n);
        return NULL;
    }
    free(scratch[slot].p);
    scratch[slot].p = malloc(n * sizeof(double));
    scratch[slot].n = scratch[slot].p ? n : 0;
    if (!scratch[slot].p)
        ovt_fail(OVT_ENOMEM, "out of memory for a scratch buffer of %zu doubles", n);
    return scratch[slot].p;
}

void krn_ops_release(void)
{
    krn_scratch_release();
}

void krn_scratch_release(void)
{
    for (int i = 0; i < KRN_SCRATCH_SLOTS; i++) {
        free(scratch[i].p);
        scratch[i].p = NULL;
        scratch[i].n = 0;
    }
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
