/* The cpu, ref and shuffle backends (see backend.h for what differs). */
#include "kernels/cpu/backend.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/contract.h"
#include "kernels/rng.h"
#include "kernels/site_ctx.h"

/* Per-thread draw counter of the shuffle backend: each reduction or libm
 * call takes the next value as the `step` argument of krn_rng. */
static _Thread_local uint64_t shuffle_draws;

/* OVT_GEMM (backend.h) into *kind. */
static int gemm_from_env(krn_cpu_gemm_kind *kind)
{
    static const struct {
        const char *name;
        krn_cpu_gemm_kind kind;
        krn_gemm_isa needs;
    } names[] = {{"own", KRN_CPU_GEMM_BEST, KRN_GEMM_ISA_C},
                 {"blas", KRN_CPU_GEMM_BLAS, KRN_GEMM_ISA_C},
                 {"avx512", KRN_CPU_GEMM_AVX512, KRN_GEMM_ISA_AVX512},
                 {"avx2", KRN_CPU_GEMM_AVX2, KRN_GEMM_ISA_AVX2},
                 {"c", KRN_CPU_GEMM_C, KRN_GEMM_ISA_C}};
    const char *v = getenv("OVT_GEMM");
    *kind = KRN_CPU_GEMM_BEST;
    if (!v || !*v)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(v, names[i].name) != 0)
            continue;
        /* the paths are ordered C < AVX2 < AVX-512: the best one runs the others */
        if (names[i].needs > krn_gemm_isa_best())
            return ovt_fail(OVT_EINVAL, "OVT_GEMM=%s: this CPU cannot run that path (best: %s); "
                            "unset OVT_GEMM to use the best one", v,
                            krn_gemm_isa_name(krn_gemm_isa_best()));
        *kind = names[i].kind;
        return 0;
    }
    return ovt_fail(OVT_EINVAL, "OVT_GEMM=%s: unknown (use own, blas, avx512, avx2 or c; unset: own)",
                    v);
}

krn_gemm_isa krn_cpu_gemm_isa(const krn_cpu *be)
{
    switch (be->gemm) {
    case KRN_CPU_GEMM_AVX512:
        return KRN_GEMM_ISA_AVX512;
    case KRN_CPU_GEMM_AVX2:
        return KRN_GEMM_ISA_AVX2;
    case KRN_CPU_GEMM_C:
        return KRN_GEMM_ISA_C;
    default:
        return krn_gemm_isa_best();
    }
}

int krn_cpu_from_ctx(krn_ctx *ctx, krn_cpu *be)
{
    const krn_config *cfg = krn_ctx_config(ctx);
    be->kind = cfg->backend;
    be->seed = cfg->shuffle_seed;
    be->threads = 1;
    be->gemm = KRN_CPU_GEMM_BEST;
    be->pool = NULL;
    switch (cfg->backend) {
    case KRN_BACKEND_CPU: {
        int rc = krn_ctx_pool(ctx, &be->pool);
        if (rc < 0)
            return rc;
        be->threads = krn_ctx_threads(ctx);
        if (openblas_get_num_threads() != 1)
            openblas_set_num_threads(1);
        return gemm_from_env(&be->gemm);
    }
    case KRN_BACKEND_REF:
    case KRN_BACKEND_SHUFFLE:
        return 0;
    case KRN_BACKEND_CUDA:
        return ovt_fail(OVT_EINVAL, "backend cuda: not built in this version of ovt (use cpu, ref or shuffle)");
    }
    return ovt_fail(OVT_EINVAL, "unknown backend %d", (int)cfg->backend);
}

static double dot_interleaved(const double *x, ptrdiff_t incx, const double *y, ptrdiff_t incy,
                              size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t k = 0;
    for (; k + 4 <= n; k += 4) {
        const double *xa = x + (ptrdiff_t)k * incx;
        double y0 = y ? y[(ptrdiff_t)k * incy] : 1.0;
        double y1 = y ? y[(ptrdiff_t)(k + 1) * incy] : 1.0;
        double y2 = y ? y[(ptrdiff_t)(k + 2) * incy] : 1.0;
        double y3 = y ? y[(ptrdiff_t)(k + 3) * incy] : 1.0;
        s0 += xa[0] * y0;
        s1 += xa[incx] * y1;
        s2 += xa[2 * incx] * y2;
        s3 += xa[3 * incx] * y3;
    }
    for (; k < n; k++)
        s0 += x[(ptrdiff_t)k * incx] * (y ? y[(ptrdiff_t)k * incy] : 1.0);
    return (s0 + s1) + (s2 + s3);
}

static double dot_reversed(const double *x, ptrdiff_t incx, const double *y, ptrdiff_t incy,
                           size_t n)
{
    double s = 0;
    for (size_t k = n; k-- > 0;)
        s += x[(ptrdiff_t)k * incx] * (y ? y[(ptrdiff_t)k * incy] : 1.0);
    return s;
}

/* A random order (Fisher-Yates from krn_rng) and a random choice of fused
 * or separate multiply-add for each term. */
static double dot_shuffled(uint64_t seed, const double *x, ptrdiff_t incx, const double *y,
                           ptrdiff_t incy, size_t n)
{
    uint32_t order[KRN_GEMM_CHUNK];
    double s = 0;
    size_t done = 0;
    uint64_t draw = shuffle_draws++;
    while (done < n) { /* n <= KRN_GEMM_CHUNK from the chunked layer; pieces otherwise */
        size_t m = n - done < KRN_GEMM_CHUNK ? n - done : KRN_GEMM_CHUNK;
        for (size_t k = 0; k < m; k++)
            order[k] = (uint32_t)k;
        for (size_t k = m; k > 1; k--) {
            uint64_t j = krn_rng_below(seed, draw, KRN_RNG_SHUFFLE, 2 * (done + k), k);
            uint32_t t = order[k - 1];
            order[k - 1] = order[j];
            order[j] = t;
        }
        for (size_t k = 0; k < m; k++) {
            ptrdiff_t i = (ptrdiff_t)(done + order[k]);
            double xi = x[i * incx], yi = y ? y[i * incy] : 1.0;
            if (krn_rng_u64(seed, draw, KRN_RNG_SHUFFLE, 2 * (done + k) + 1) & 1)
                s = fma(xi, yi, s);
            else
                s += xi * yi;
        }
        done += m;
    }
    return s;
}

double krn_cpu_dot(const krn_cpu *be, const double *x, ptrdiff_t incx, const double *y,
                   ptrdiff_t incy, size_t n)
{
    switch (be->kind) {
    case KRN_BACKEND_REF:
        return dot_reversed(x, incx, y, incy, n);
    case KRN_BACKEND_SHUFFLE:
        return dot_shuffled(be->seed, x, incx, y, incy, n);
    default:
        return dot_interleaved(x, incx, y, incy, n);
    }
}

void krn_cpu_gemm(const krn_cpu *be, double *c, size_t ldc, bool ta, const double *a, size_t lda,
                  bool tb, const double *b, size_t ldb, size_t m, size_t n, size_t k)
{
    if (be->kind == KRN_BACKEND_CPU) {
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (blasint)m, (blasint)n, (blasint)k, 1.0, a, (blasint)lda, b, (blasint)ldb, 0.0,
                    c, (blasint)ldc);
        return;
    }
    if (be->kind == KRN_BACKEND_REF && !(tb && !ta)) {
        /* Rank-1 updates, last k first: each c[i][j] is 0 + a_{K-1} b_{K-1} +
         * ... + a_0 b_0 in that order, exactly dot_reversed's sequence, with
         * the inner loop running along rows of c. (With a row-major and b
         * transposed, the dots below read both operands contiguously.) */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                c[i * ldc + j] = 0;
        for (size_t kk = k; kk-- > 0;)
            for (size_t i = 0; i < m; i++) {
                double aik = ta ? a[kk * lda + i] : a[i * lda + kk];
                double *ci = c + i * ldc;
                if (tb) {
                    for (size_t j = 0; j < n; j++)
                        ci[j] += aik * b[j * ldb + kk];
                } else {
                    const double *bk = b + kk * ldb;
                    for (size_t j = 0; j < n; j++)
                        ci[j] += aik * bk[j];
                }
            }
        return;
    }
    /* Row i of op(a) and column j of op(b) as strided vectors. */
    ptrdiff_t inca = ta ? (ptrdiff_t)lda : 1, incb = tb ? 1 : (ptrdiff_t)ldb;
    for (size_t i = 0; i < m; i++) {
        const double *ai = ta ? a + i : a + i * lda;
        for (size_t j = 0; j < n; j++) {
            const double *bj = tb ? b + j * ldb : b + j;
            c[i * ldc + j] = krn_cpu_dot(be, ai, inca, bj, incb, k);
        }
    }
}

void krn_cpu_gemm_add(const krn_cpu *be, double *c, size_t ldc, bool ta, const double *a,
                      size_t lda, bool tb, const double *b, size_t ldb, size_t m, size_t n,
                      size_t k)
{
    (void)be;
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, 1.0, a, (blasint)lda, b, (blasint)ldb, 1.0, c,
                (blasint)ldc);
}

/* Moves r by a random number of ulps in [-KRN_SHUFFLE_LIBM_ULP, +KRN_SHUFFLE_LIBM_ULP]. */
static double perturb(uint64_t seed, double r)
{
    if (!isfinite(r) || r == 0)
        return r;
    uint64_t draw = shuffle_draws++;
    int steps = (int)krn_rng_below(seed, draw, KRN_RNG_SHUFFLE, 0, 2 * KRN_SHUFFLE_LIBM_ULP + 1) -
                KRN_SHUFFLE_LIBM_ULP;
    double toward = steps < 0 ? -INFINITY : INFINITY;
    for (int s = steps < 0 ? -steps : steps; s > 0; s--)
        r = nextafter(r, toward);
    return r;
}

/* cpu: ovt's own exp, log, pow, sin and cos, the canonical values; ref and
 * shuffle: the C library's, other implementations within KRN_LIBM_ULP
 * (shuffle then moves them further). */
double krn_cpu_libm(const krn_cpu *be, krn_libm_fn fn, double x)
{
    bool own = be->kind == KRN_BACKEND_CPU;
    double r;
    switch (fn) {
    case KRN_FN_EXP:
        r = own ? krn_exp(x) : exp(x);
        break;
    case KRN_FN_LOG:
        r = own ? krn_log(x) : log(x);
        break;
    case KRN_FN_SIN:
        r = own ? krn_sin(x) : sin(x);
        break;
    case KRN_FN_COS:
        r = own ? krn_cos(x) : cos(x);
        break;
    default:
        r = krn_tanh(x);
        break;
    }
    return be->kind == KRN_BACKEND_SHUFFLE ? perturb(be->seed, r) : r;
}

double krn_cpu_pow(const krn_cpu *be, double x, double y)
{
    double r = be->kind == KRN_BACKEND_CPU ? krn_pow(x, y) : pow(x, y);
    return be->kind == KRN_BACKEND_SHUFFLE ? perturb(be->seed, r) : r;
}
