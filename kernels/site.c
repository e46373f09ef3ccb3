/* Rounding sites: the trainer's RECORD, the verifier's REPLAY and the
 * NEAREST ablation (DESIGN.md section 2, docs/numeric-contract.md).
 *
 * Every element goes through a fast path that works on the bits of the
 * double: it rounds to nearest-even with integer arithmetic and measures the
 * distance to the midpoint of the element's own grid interval. Only the
 * elements the fast path cannot settle (within the band of a midpoint, a
 * band wide compared with the grid step, zero, subnormal, near overflow,
 * non-finite, exact ties of a banded site) go through krn_grid_locate. Large sites are split
 * into fixed chunks run on the ctx's thread pool (pool.h); each chunk
 * collects its own entries, and the chunks are appended to the log in order,
 * so the log does not depend on the thread count or on scheduling. */
#include "kernels/site.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "common/cpus.h"
#include "kernels/contract.h"
#include "kernels/grid.h"
#include "kernels/grid_bits.h"
#include "kernels/pool.h"
#include "kernels/site_ctx.h"
#include "kernels/site_sparse.h"
#include "kernels/vec.h"

/* Elements per block: the band of a block is computed into a small buffer,
 * then the block is rounded. */
#define SITE_BLOCK 1024
/* Elements per chunk of a large site (a unit of work for the pool), and the
 * smallest site that is split. */
#define SITE_CHUNK 32768
#define SITE_PARALLEL_MIN 65536

/* Entries found in one chunk, in index order, and the chunk's counts. */
typedef struct {
    krn_rlog_entry *entries;
    size_t count;
    size_t cap;
    uint64_t wide;
    uint64_t ambiguous[2]; /* elements with d <= tau/(2M); of those, x == 0 or d == 0 */
    uint64_t within[2];    /* elements with tau > 0 and d <= tau/2, d <= tau */
} chunk_out;

struct krn_ctx {
    krn_config cfg;
    int nthreads;
    krn_pool *pool; /* made on first use (krn_ctx_pool) */
    bool in_step;
    int failed;            /* the code of the site that failed this step, or 0 */
    char failed_msg[480];  /* and its message */
    uint64_t step;
    krn_rlog *log;
    uint32_t next_site;
    size_t replay_next; /* REPLAY: the next log site not yet matched */
    krn_stats stats;
    chunk_out *chunks;
    size_t chunks_cap;
    void *device;                     /* the cuda backend's state, or NULL */
    void (*device_free)(void *device);
    bool forge_armed; /* testing: forge an entry at the next site that allows it */
    bool forged;
    krn_finding finding; /* REPLAY: the step's first strict finding */
    bool collect_next;       /* per-site counts from the next step on */
    bool collect;            /* per-site counts in this step */
    krn_site_stats *sites;   /* the step's rows, nsites of them */
    size_t nsites, sites_cap;
};

/* What one call of krn_site works on, shared by the threads. */
typedef struct {
    krn_ctx *ctx;
    const char *name;
    uint32_t site;
    float *out;
    const double *x;      /* NULL: the values come from fill */
    size_t base;          /* the element x[0] (and the band's arrays' first) is */
    krn_site_fill fill;
    void *fill_arg;
    size_t n;
    const krn_band *band; /* NULL: exact site */
    bool record;          /* log entries (RECORD with a band) */
    bool replay;          /* REPLAY with a band: look for missing entries */
    bool mu_live;         /* err_mu is initialised (threads may be running) */
    const krn_rlog_site *logged; /* REPLAY: the site's entries, or NULL */
    uint64_t wide;        /* entries that are values */
    uint64_t within[2];   /* elements with tau > 0 and d <= tau/2, d <= tau */
    /* REPLAY: the strict rule's finding at the lowest element index, and the
     * one that fails the site (any finding for the arbiter, a certain one
     * for the auditor), also at the lowest index; under err_mu */
    krn_finding first, fail;
    /* the failure at the lowest element index (messages are per thread) */
    pthread_mutex_t err_mu;
    int err_code;
    size_t err_index;
    char err_msg[400];
} site_job;

int krn_backend_parse(krn_backend_kind *out, const char *name)
{
    static const struct {
        const char *name;
        krn_backend_kind kind;
    } known[] = {{"cpu", KRN_BACKEND_CPU},
                 {"ref", KRN_BACKEND_REF},
                 {"shuffle", KRN_BACKEND_SHUFFLE},
                 {"cuda", KRN_BACKEND_CUDA}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i].name)) {
            *out = known[i].kind;
            return 0;
        }
    return ovt_fail(OVT_EINVAL, "unknown backend '%s' (known: cpu, ref, shuffle, cuda)", name);
}

int krn_ctx_new(krn_ctx **out, const krn_config *cfg)
{
    *out = NULL;
    int rc = krn_grid_check_bits(cfg->grid_bits);
    if (rc < 0)
        return rc;
    if (cfg->mode != KRN_RECORD && cfg->mode != KRN_REPLAY && cfg->mode != KRN_NEAREST &&
        cfg->mode != KRN_PLAIN)
        return ovt_fail(OVT_EINVAL, "unknown rounding mode %d", (int)cfg->mode);
    if (cfg->mode == KRN_PLAIN && cfg->grid_bits != 32)
        return ovt_fail(OVT_EINVAL, "KRN_PLAIN converts to FP32: grid_bits must be 32, not %d",
                        cfg->grid_bits);
    if (cfg->mode == KRN_PLAIN && cfg->backend == KRN_BACKEND_CUDA)
        return ovt_fail(OVT_EINVAL, "KRN_PLAIN (benchmark baseline) runs on the CPU backends only, "
                                    "not cuda");
    if (cfg->threads < 0)
        return ovt_fail(OVT_EINVAL, "thread count %d is negative", cfg->threads);
    krn_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for a kernels context");
    ctx->cfg = *cfg;
    int threads = cfg->threads ? cfg->threads : ovt_cpu_count();
    if (threads > KRN_MAX_THREADS)
        threads = KRN_MAX_THREADS;
    ctx->nthreads = threads;
    if (cfg->backend == KRN_BACKEND_CUDA) {
        rc = krn_cuda_attach(ctx);
        if (rc < 0) {
            free(ctx);
            return rc;
        }
    }
    *out = ctx;
    return 0;
}

void *krn_ctx_device(const krn_ctx *ctx)
{
    return ctx->device;
}

void krn_ctx_set_device(krn_ctx *ctx, void *device, void (*device_free)(void *device))
{
    ctx->device = device;
    ctx->device_free = device_free;
}

#ifndef OVT_HAVE_CUDA
int krn_cuda_attach(krn_ctx *ctx)
{
    (void)ctx;
    return ovt_fail(OVT_EINVAL, "backend cuda: this ovt was built without CUDA (not built: CMake found "
                                "no CUDA toolkit with cuBLAS, or -DOVT_CUDA=OFF); use cpu, ref or shuffle");
}
#endif

void krn_ctx_free(krn_ctx *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->device != NULL && ctx->device_free != NULL)
        ctx->device_free(ctx->device);
    krn_pool_free(ctx->pool);
    for (size_t c = 0; c < ctx->chunks_cap; c++)
        free(ctx->chunks[c].entries);
    free(ctx->chunks);
    free(ctx->sites);
    free(ctx);
}

const krn_config *krn_ctx_config(const krn_ctx *ctx)
{
    return &ctx->cfg;
}

int krn_step_begin(krn_ctx *ctx, uint64_t step, krn_rlog *log)
{
    if (ctx->in_step)
        return ovt_fail(OVT_EINVAL, "step %llu begun before step %llu ended",
                        (unsigned long long)step, (unsigned long long)ctx->step);
    bool logs = ctx->cfg.mode == KRN_RECORD || ctx->cfg.mode == KRN_REPLAY;
    if (logs && log == NULL)
        return ovt_fail(OVT_EINVAL, "step %llu: %s needs a rounding log", (unsigned long long)step,
                        ctx->cfg.mode == KRN_RECORD ? "RECORD" : "REPLAY");
    if (ctx->cfg.mode == KRN_REPLAY && krn_rlog_step(log) != step)
        return ovt_fail(OVT_EFRAUD, "the rounding log is for step %llu, not step %llu",
                        (unsigned long long)krn_rlog_step(log), (unsigned long long)step);
    if (ctx->cfg.mode == KRN_RECORD)
        krn_rlog_reset(log, step);
    ctx->log = logs ? log : NULL;
    ctx->step = step;
    ctx->next_site = 0;
    ctx->replay_next = 0;
    memset(&ctx->stats, 0, sizeof ctx->stats);
    ctx->failed = 0;
    ctx->forged = false;
    memset(&ctx->finding, 0, sizeof ctx->finding);
    ctx->collect = ctx->collect_next && logs;
    ctx->nsites = 0;
    ctx->in_step = true;
    return 0;
}

int krn_step_end(krn_ctx *ctx, krn_stats *stats)
{
    if (stats != NULL)
        memset(stats, 0, sizeof *stats);
    if (!ctx->in_step)
        return ovt_fail(OVT_EINVAL, "krn_step_end without krn_step_begin");
    ctx->in_step = false;
    ctx->forge_armed = false;
    if (stats != NULL)
        *stats = ctx->stats;
    if (ctx->failed < 0)
        return ovt_fail(ctx->failed, "%s", ctx->failed_msg);
    if (ctx->cfg.mode == KRN_REPLAY && ctx->replay_next < krn_rlog_nsites(ctx->log)) {
        const krn_rlog_site *s = krn_rlog_site_at(ctx->log, ctx->replay_next);
        return ovt_fail(OVT_EFRAUD,
                        "step %llu: the rounding log has %zu entries for site %u, which was never "
                        "executed (the step ran %u sites)",
                        (unsigned long long)ctx->step, s->count, s->site, ctx->next_site);
    }
    return 0;
}

uint32_t krn_ctx_next_site(const krn_ctx *ctx)
{
    return ctx->next_site;
}

int krn_ctx_set_next_site(krn_ctx *ctx, uint32_t site)
{
    if (!ctx->in_step || (ctx->cfg.mode != KRN_RECORD && ctx->cfg.mode != KRN_NEAREST))
        return ovt_fail(OVT_EINVAL, "krn_ctx_set_next_site: only inside a RECORD or NEAREST step");
    if (site < ctx->next_site)
        return ovt_fail(OVT_EINVAL, "krn_ctx_set_next_site: site %u is below the %u sites already numbered", site,
                        ctx->next_site);
    ctx->next_site = site;
    return 0;
}

int krn_ctx_threads(const krn_ctx *ctx)
{
    return ctx->nthreads;
}

int krn_ctx_pool(krn_ctx *ctx, krn_pool **pool)
{
    *pool = NULL;
    if (ctx->pool == NULL && ctx->nthreads > 1) {
        int rc = krn_pool_new(&ctx->pool, ctx->nthreads);
        if (rc < 0)
            return rc;
    }
    *pool = ctx->pool;
    return 0;
}

int krn_ctx_parallel(krn_ctx *ctx, size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
    krn_pool *pool = NULL;
    int rc = n > 1 ? krn_ctx_pool(ctx, &pool) : 0;
    if (rc < 0)
        return rc;
    if (pool != NULL)
        krn_pool_run(pool, n, fn, arg);
    else
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
    return 0;
}

/* ---- bands ---- */

static bool band_is_zero(const krn_band *band)
{
    return band == NULL || (band->kind == KRN_BAND_ZERO && band->rel == 0.0);
}

static int band_check(const krn_band *band, size_t n)
{
    if (band_is_zero(band))
        return 0;
    switch (band->kind) {
    case KRN_BAND_ZERO:
    case KRN_BAND_CONST:
        return 0;
    case KRN_BAND_ARRAY:
        if (band->a == NULL)
            return ovt_fail(OVT_EINVAL, "KRN_BAND_ARRAY without an array");
        return 0;
    case KRN_BAND_OUTER:
        if (band->a == NULL || band->b == NULL || band->cols == 0 || n % band->cols != 0)
            return ovt_fail(OVT_EINVAL, "KRN_BAND_OUTER needs row and column arrays and cols "
                                        "dividing n (n = %zu, cols = %zu)", n, band->cols);
        return 0;
    }
    return ovt_fail(OVT_EINVAL, "unknown band kind %d", (int)band->kind);
}

/* tau[j] for elements i0 .. i0+len-1, whose values are xb[0 .. len-1]:
 *   base = 0 | scale | scale * a[i] | (scale * a[i / cols]) * b[i % cols]
 *   tau  = base + rel * |x[i]|
 * evaluated in exactly this order (docs/numeric-contract.md). */
KRN_VEC_CLONES
static void band_fill(const krn_band *band, const double *restrict xb, size_t i0, size_t len,
                      double *restrict tau)
{
    const double scale = band->scale; /* locals: tau may not alias the band */
    switch (band->kind) {
    case KRN_BAND_ZERO:
        for (size_t j = 0; j < len; j++)
            tau[j] = 0.0;
        break;
    case KRN_BAND_CONST:
        for (size_t j = 0; j < len; j++)
            tau[j] = scale;
        break;
    case KRN_BAND_ARRAY: {
        const double *restrict a = band->a + i0;
        for (size_t j = 0; j < len; j++)
            tau[j] = scale * a[j];
        break;
    }
    case KRN_BAND_OUTER: {
        size_t r = i0 / band->cols, c = i0 % band->cols;
        size_t j = 0;
        while (j < len) {
            double row = scale * band->a[r];
            size_t run = band->cols - c < len - j ? band->cols - c : len - j;
            const double *col = band->b + c;
            for (size_t k = 0; k < run; k++)
                tau[j + k] = row * col[k];
            j += run;
            c = 0;
            r++;
        }
        break;
    }
    }
    if (band->rel != 0.0) {
        double rel = band->rel;
        for (size_t j = 0; j < len; j++)
            tau[j] = tau[j] + rel * fabs(xb[j]);
    }
}

static double band_at(const krn_band *band, const double *x, size_t i)
{
    double tau = 0.0;
    band_fill(band, x + i, i, 1, &tau);
    return tau;
}

/* ---- the fast path (krn_round_fast, grid_bits.h) ---- */

/* AVX-512F, AVX2 and baseline clones (KRN_VEC_CLONES): all do the same
 * exact integer and IEEE operations, so they give the same bits. */
KRN_VEC_CLONES
static void round_block(const double *restrict x, const double *restrict tau, float *restrict out,
                        uint8_t *restrict flag, size_t len, int b)
{
    if (tau != NULL) {
        for (size_t j = 0; j < len; j++)
            flag[j] = krn_round_fast(x[j], tau[j], &out[j], b);
    } else if (b == 32) {
        /* a zero band on the FP32 grid: in the normal range the conversion
         * rounds to nearest even, as krn_round_fast_device does with its
         * integers, and zeros become +0; subnormal, near-overflow and
         * non-finite values take the slow path (a third of the time of the
         * integer version: AdamW alone rounds 3 x 124M such values a step) */
        for (size_t j = 0; j < len; j++) {
            double ax = fabs(x[j]);
            out[j] = (float)x[j] + 0.0f; /* -0 + +0 is +0; no other value changes */
            int settled = ((ax >= 0x1p-126) & (ax < 0x1p127)) | (ax == 0.0); /* false for NaN */
            flag[j] = (uint8_t)(settled ^ 1);
        }
    } else {
        /* a zero band: exact ties go to even and zeros to +0 here, as the
         * slow path would (krn_round_fast_device); only odd ranges are left */
        for (size_t j = 0; j < len; j++)
            flag[j] = krn_round_fast_device(x[j], 0.0, &out[j], b);
    }
}

/* Offsets of the nonzero flags, eight at a time where all are zero. */
static size_t collect_flags(const uint8_t *flag, size_t len, uint32_t *cand)
{
    size_t nc = 0, j = 0;
    for (; j + 8 <= len; j += 8) {
        uint64_t w;
        memcpy(&w, flag + j, sizeof w);
        if (w == 0)
            continue;
        for (size_t k = j; k < j + 8; k++) {
            cand[nc] = (uint32_t)k;
            nc += flag[k];
        }
    }
    for (; j < len; j++) {
        cand[nc] = (uint32_t)j;
        nc += flag[j];
    }
    return nc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SITE_AVX512 1

/* round_block's banded loop (krn_round_fast, tau != NULL) and its zero-band
 * FP32 loop (tau == NULL, b == 32) eight elements per instruction, the flags
 * kept as mask bits and written out as offsets (collect_flags' cand). The
 * same integer and IEEE operations in the same order, so the same outputs
 * and the same flags; test_site checks both against the portable loops.
 * len is a multiple of 8. Returns the number of offsets written. */
__attribute__((target("avx512f"))) static size_t
round_cand_avx512(const double *restrict x, const double *restrict tau, float *restrict out,
                  uint32_t *restrict cand, size_t len, int b)
{
    const int drop = 61 - b;
    const uint64_t m = (UINT64_C(1) << drop) - 1;
    const __m512i sign = _mm512_set1_epi64((long long)KRN_SIGN64);
    const __m512i mant = _mm512_set1_epi64((long long)KRN_MANT64);
    const __m512i mask = _mm512_set1_epi64((long long)m);
    const __m512i below_half = _mm512_set1_epi64((long long)(m >> 1));
    const __m512i half = _mm512_set1_epi64((long long)(UINT64_C(1) << (drop - 1)));
    const __m512i one = _mm512_set1_epi64(1);
    const __m128i shift = _mm_cvtsi32_si128(drop);
    const __m512d step_scale = _mm512_set1_pd(0x1p-52 * (double)(UINT64_C(1) << drop));
    const __m512d lo = _mm512_set1_pd(0x1p-126), hi = _mm512_set1_pd(0x1p127);
    const __m512d four = _mm512_set1_pd(4.0), zero = _mm512_setzero_pd();
    size_t nc = 0;
    for (size_t j = 0; j < len; j += 8) {
        __m512d xv = _mm512_loadu_pd(x + j);
        __m512i u = _mm512_castpd_si512(xv);
        __m512i a = _mm512_andnot_si512(sign, u);
        __m512d ax = _mm512_castsi512_pd(a);
        __mmask8 normal = _mm512_cmp_pd_mask(ax, lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(ax, hi, _CMP_LT_OQ);
        unsigned flag;
        if (tau != NULL) {
            __m512d t = _mm512_loadu_pd(tau + j);
            if (b == 32) {
                /* in the normal range the conversion rounds to nearest even
                 * as the integer rounding does; other lanes are flagged */
                _mm256_storeu_ps(out + j, _mm512_cvtpd_ps(xv));
            } else {
                __m512i lsb = _mm512_and_si512(_mm512_srl_epi64(a, shift), one);
                __m512i r = _mm512_andnot_si512(mask, _mm512_add_epi64(_mm512_add_epi64(a, below_half), lsb));
                __m512i rs = _mm512_or_si512(r, _mm512_and_si512(u, sign));
                _mm256_storeu_ps(out + j, _mm512_cvtpd_ps(_mm512_castsi512_pd(rs)));
            }
            __m512d mid = _mm512_castsi512_pd(_mm512_or_si512(_mm512_andnot_si512(mask, a), half));
            __m512d d = _mm512_castsi512_pd(
                _mm512_andnot_si512(sign, _mm512_castpd_si512(_mm512_sub_pd(ax, mid))));
            __m512d q = _mm512_mul_pd(_mm512_castsi512_pd(_mm512_andnot_si512(mant, a)), step_scale);
            unsigned plain_zero = _mm512_cmpeq_epi64_mask(u, _mm512_setzero_si512()) &
                                  _mm512_cmp_pd_mask(t, zero, _CMP_EQ_OQ);
            unsigned near = _mm512_cmp_pd_mask(d, t, _CMP_LE_OQ);
            unsigned wide = _mm512_cmp_pd_mask(_mm512_mul_pd(four, t), q, _CMP_GE_OQ);
            unsigned bad = _mm512_cmp_pd_mask(t, zero, _CMP_NGE_UQ); /* !(t >= 0) */
            flag = ((~(unsigned)normal | near | wide | bad) & ~plain_zero) & 0xffu;
        } else {
            __m256 f = _mm256_add_ps(_mm512_cvtpd_ps(xv), _mm256_setzero_ps()); /* -0 becomes +0 */
            _mm256_storeu_ps(out + j, f);
            unsigned settled = normal | _mm512_cmp_pd_mask(ax, zero, _CMP_EQ_OQ);
            flag = ~settled & 0xffu;
        }
        while (flag != 0) {
            cand[nc++] = (uint32_t)(j + (size_t)__builtin_ctz(flag));
            flag &= flag - 1;
        }
    }
    return nc;
}
#endif

/* Testing only: the portable loops even where the AVX-512 one would run. */
static bool site_portable;

void krn_site_force_portable(bool on)
{
    site_portable = on;
}

/* Rounds x[0 .. len) into out as round_block does and writes the offsets of
 * the elements it flags to cand, in increasing order; returns how many. */
static size_t round_cands(const double *restrict x, const double *restrict tau, float *restrict out,
                          uint8_t *restrict flag, uint32_t *restrict cand, size_t len, int b)
{
    size_t nc = 0, j = 0;
#ifdef SITE_AVX512
    if ((tau != NULL || b == 32) && !site_portable && __builtin_cpu_supports("avx512f")) {
        j = len & ~(size_t)7;
        nc = round_cand_avx512(x, tau, out, cand, j, b);
    }
#endif
    if (j < len) {
        round_block(x + j, tau != NULL ? tau + j : NULL, out + j, flag, len - j, b);
        size_t more = collect_flags(flag, len - j, cand + nc);
        for (size_t k = nc; k < nc + more; k++)
            cand[k] += (uint32_t)j;
        nc += more;
    }
    return nc;
}

/* ---- REPLAY: the rule of contract version 2 (docs/numeric-contract.md 6) ---- */

const char *krn_rule_name(krn_rule rule)
{
    switch (rule) {
    case KRN_RULE_NONE: return "no finding";
    case KRN_RULE_MISSING_ENTRY: return "missing entry";
    case KRN_RULE_IMPOSSIBLE_DIRECTION: return "impossible direction";
    case KRN_RULE_DIRECTION_FAR: return "direction too far from the midpoint";
    case KRN_RULE_DIRECTION_WIDE: return "direction where the band is too wide";
    case KRN_RULE_VALUE_FAR: return "value too far";
    }
    return "unknown rule";
}

const krn_finding *krn_ctx_finding(const krn_ctx *ctx)
{
    return &ctx->finding;
}

/* How far the auditor widens a threshold on the verifier's own value so that
 * it covers every honest arbiter's: the op's pairwise bound as this party
 * evaluates it, delta' = tau'/(2*M), plus 2^-20 of it for the last bits in
 * which two parties' bands differ (about 1e-11 relative). */
static double widening(double tau)
{
    return tau * (0.5 / KRN_BAND_MARGIN) * (1.0 + 0x1p-20);
}

/* A violation of the strict rule at element i (dist: d' or the distance to a
 * value's interval): kept as the job's first finding if it has the lowest
 * index so far, and as the site's failure if the role fails on it (the
 * arbiter on any, the auditor on a certain one). what says the numbers. */
static void note_finding(site_job *job, size_t i, krn_rule rule, double dist, double tau, bool certain,
                         const char *what)
{
    krn_ctx *ctx = job->ctx;
    bool auditor = ctx->cfg.verifier == KRN_VERIFY_AUDITOR;
    krn_finding f = {.rule = rule, .step = ctx->step, .site = job->site, .element = i,
                     .dist_over_tau = dist / tau, .certain = certain};
    snprintf(f.op, sizeof f.op, "%s", job->name);
    snprintf(f.message, sizeof f.message, "step %llu site %u (%s) element %zu: %s: %s%s",
             (unsigned long long)ctx->step, job->site, job->name, i, krn_rule_name(rule), what,
             !auditor ? ""
             : certain ? " (certain: every honest arbiter within the op's bound sees it)"
                       : " (not certain: an honest arbiter within the op's bound could accept it)");
    if (job->mu_live)
        pthread_mutex_lock(&job->err_mu);
    if (job->first.rule == KRN_RULE_NONE || i < job->first.element)
        job->first = f;
    if ((!auditor || certain) && (job->fail.rule == KRN_RULE_NONE || i < job->fail.element))
        job->fail = f;
    if (job->mu_live)
        pthread_mutex_unlock(&job->err_mu);
}

/* True if the site's log has an entry for element i (entries are in index
 * order). */
static bool is_logged(const site_job *job, size_t i)
{
    const krn_rlog_site *s = job->logged;
    if (s == NULL)
        return false;
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->entries[mid].index < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->count && s->entries[lo].index == i;
}

/* ---- per-site counts (krn_ctx_collect_sites) ---- */

void krn_ctx_collect_sites(krn_ctx *ctx, bool on)
{
    ctx->collect_next = on;
}

const krn_site_stats *krn_ctx_site_stats(const krn_ctx *ctx, size_t *count)
{
    *count = ctx->collect ? ctx->nsites : 0;
    return ctx->collect ? ctx->sites : NULL;
}

/* Adds the job's row when the step counts per site: its counts, and its
 * entries (RECORD: those the log now has for it, REPLAY: the trainer's). */
static int site_row(const site_job *job)
{
    krn_ctx *ctx = job->ctx;
    if (!ctx->collect)
        return 0;
    if (ctx->nsites == ctx->sites_cap) {
        size_t cap = ctx->sites_cap ? 2 * ctx->sites_cap : 64;
        krn_site_stats *p = realloc(ctx->sites, cap * sizeof *p);
        if (p == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for %zu per-site counts", cap);
        ctx->sites = p;
        ctx->sites_cap = cap;
    }
    const krn_rlog_site *ls = ctx->cfg.mode == KRN_RECORD ? krn_rlog_find(ctx->log, job->site) : job->logged;
    krn_site_stats *r = &ctx->sites[ctx->nsites++];
    memset(r, 0, sizeof *r);
    r->site = job->site;
    snprintf(r->op, sizeof r->op, "%s", job->name);
    r->n = job->n;
    r->banded = job->record || job->replay;
    r->entries = ls != NULL ? ls->count : 0;
    r->within_half = job->within[0];
    r->within_tau = job->within[1];
    return 0;
}

/* An unlogged element the fast path flagged: a missing entry if d' <= tau'/2,
 * certain if d' <= tau'/2 - delta'. */
static void check_unlogged(site_job *job, size_t i, double dist, double tau)
{
    if (!(tau > 0.0) || !(dist <= 0.5 * tau) || is_logged(job, i))
        return;
    char what[160];
    snprintf(what, sizeof what, "own value is %.3g tau from the nearest midpoint, within 0.5 tau, "
                                "and the log has no entry for it (tau = %.17g)", dist / tau, tau);
    note_finding(job, i, KRN_RULE_MISSING_ENTRY, dist, tau, dist <= 0.5 * tau - widening(tau), what);
}

/* The failure the site's findings call for (OVT_EFRAUD with the message of
 * the failing finding at the lowest index), or 0; keeps the step's first
 * finding in the ctx. */
static int findings_close(site_job *job)
{
    krn_ctx *ctx = job->ctx;
    if (ctx->finding.rule == KRN_RULE_NONE && job->first.rule != KRN_RULE_NONE)
        ctx->finding = job->first;
    if (job->fail.rule != KRN_RULE_NONE)
        return ovt_fail(OVT_EFRAUD, "%s", job->fail.message);
    return 0;
}

/* ---- the slow path ---- */

static float canonical_zero(float v)
{
    return v == 0.0f ? 0.0f : v; /* a zero is always written as +0 */
}

/* what may be ovt_errmsg() itself (the reason krn_grid_locate gave): it is
 * copied first, since the new message is written over the old one. */
static int elem_fail(const site_job *job, size_t i, int code, const char *what)
{
    char reason[400];
    snprintf(reason, sizeof reason, "%s", what);
    return ovt_fail(code, "step %llu site %u (%s) element %zu: %s",
                    (unsigned long long)job->ctx->step, job->site, job->name, i, reason);
}

/* Rounds an element the fast path left over; RECORD also decides its entry.
 * Returns 1 if *entry was filled, 0 if not, or an error. */
static int settle(site_job *job, size_t i, double xi, double tau, float *outi,
                  krn_rlog_entry *entry, chunk_out *co)
{
    int b = job->ctx->cfg.grid_bits;
    if (!(tau >= 0.0)) {
        char what[96];
        snprintf(what, sizeof what, "the band is %g (NaN or negative)", tau);
        return elem_fail(job, i, OVT_EINVAL, what);
    }
    krn_grid_pos pos;
    if (krn_grid_locate(xi, b, &pos) < 0)
        return elem_fail(job, i, OVT_ENUMERIC, ovt_errmsg());
    float v = canonical_zero(pos.nearest);
    *outi = v;
    if (tau > 0.0 && pos.dist <= tau * (0.5 / KRN_BAND_MARGIN)) {
        co->ambiguous[0]++;
        co->ambiguous[1] += xi == 0.0 || pos.dist == 0.0;
    }
    if (tau > 0.0 && pos.dist <= tau) {
        co->within[0] += pos.dist <= 0.5 * tau;
        co->within[1]++;
    }
    if (job->replay) {
        check_unlogged(job, i, pos.dist, tau);
        return 0;
    }
    if (!job->record || !(tau > 0.0) || !(pos.dist <= tau))
        return 0;
    entry->index = i;
    if (16.0 * tau <= pos.spacing) {
        entry->dir = pos.nearest == pos.above ? KRN_DIR_UP : KRN_DIR_DOWN;
        entry->value = 0.0f;
    } else {
        entry->dir = KRN_DIR_VALUE;
        entry->value = v;
    }
    return 1;
}

static int chunk_push(chunk_out *co, const krn_rlog_entry *e)
{
    if (co->count == co->cap) {
        size_t cap = co->cap ? 2 * co->cap : 64;
        krn_rlog_entry *p = realloc(co->entries, cap * sizeof *p);
        if (p == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for %zu rounding-log entries", cap);
        co->entries = p;
        co->cap = cap;
    }
    co->entries[co->count++] = *e;
    co->wide += e->dir == KRN_DIR_VALUE;
    return 0;
}

/* Keeps the failure with the lowest element index, whatever thread saw it. */
static void job_fail(site_job *job, size_t i, int code)
{
    pthread_mutex_lock(&job->err_mu);
    if (job->err_code == 0 || i < job->err_index) {
        job->err_code = code;
        job->err_index = i;
        snprintf(job->err_msg, sizeof job->err_msg, "%s", ovt_errmsg());
    }
    pthread_mutex_unlock(&job->err_mu);
}

/* Rounds the block [b0, b0 + len) of one site, collecting entries into co.
 * Returns 0, or a failure, which it records in the job. */
static int site_block(site_job *job, size_t b0, size_t len, double *xbuf, chunk_out *co)
{
    double tau[SITE_BLOCK];
    uint8_t flag[SITE_BLOCK];
    uint32_t cand[SITE_BLOCK];
    int b = job->ctx->cfg.grid_bits;
    bool banded = job->record || job->replay;
    const double *xb = job->x ? job->x + (b0 - job->base) : xbuf;
    if (!job->x)
        job->fill(job->fill_arg, b0, len, xbuf);
    if (job->ctx->cfg.mode == KRN_PLAIN) {
        for (size_t j = 0; j < len; j++)
            job->out[b0 + j] = (float)xb[j];
        return 0;
    }
    if (banded)
        band_fill(job->band, xb, b0 - job->base, len, tau);
    size_t nc = round_cands(xb, banded ? tau : NULL, job->out + b0, flag, cand, len, b);
    for (size_t k = 0; k < nc; k++) {
        size_t i = b0 + cand[k];
        krn_rlog_entry e;
        int rc = settle(job, i, xb[cand[k]], banded ? tau[cand[k]] : 0.0, &job->out[i], &e, co);
        if (rc == 1)
            rc = chunk_push(co, &e);
        if (rc < 0) {
            job_fail(job, i, rc);
            return rc;
        }
    }
    return 0;
}

/* Sites rounded together (krn_site_exact_fills), or one site: all of the
 * same length n; only the first may have a band. */
typedef struct {
    site_job *jobs;
    size_t njobs;
    size_t lo, hi; /* the elements rounded now: all, or one part (krn_site_part) */
} site_group;

/* Rounds elements [i0, i1) of the group's sites, block by block, each block
 * of every site in site order, collecting the first site's entries into co.
 * A site that fails stops itself and the sites after it; the sites before
 * it go on, so each site's failure is the one at its lowest element index,
 * as if the sites ran one after the other. */
static void run_range(const site_group *g, size_t i0, size_t i1, chunk_out *co)
{
    double xbuf[SITE_BLOCK];
    co->count = 0;
    co->wide = 0;
    co->ambiguous[0] = co->ambiguous[1] = 0;
    co->within[0] = co->within[1] = 0;
    size_t active = g->njobs;
    for (size_t b0 = i0; b0 < i1 && active > 0; b0 += SITE_BLOCK) {
        size_t len = i1 - b0 < SITE_BLOCK ? i1 - b0 : SITE_BLOCK;
        for (size_t s = 0; s < active; s++)
            if (site_block(&g->jobs[s], b0, len, xbuf, co) < 0)
                active = s;
    }
}

static void run_chunk(void *arg, size_t c)
{
    const site_group *g = arg;
    size_t i0 = g->lo + c * SITE_CHUNK;
    size_t i1 = g->hi - i0 < SITE_CHUNK ? g->hi : i0 + SITE_CHUNK;
    run_range(g, i0, i1, &g->jobs[0].ctx->chunks[c]);
}

/* Makes room for the per-chunk results of a site of nchunks chunks. */
static int reserve_chunks(krn_ctx *ctx, size_t nchunks)
{
    if (nchunks <= ctx->chunks_cap)
        return 0;
    chunk_out *p = realloc(ctx->chunks, nchunks * sizeof *p);
    if (p == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu chunks", nchunks);
    memset(p + ctx->chunks_cap, 0, (nchunks - ctx->chunks_cap) * sizeof *p);
    ctx->chunks = p;
    ctx->chunks_cap = nchunks;
    return 0;
}

/* Runs the group's sites over elements [lo, hi), in chunks on the pool
 * when they are large, and appends the first site's entries to the log in
 * index order. Fails with the failure of the first site that failed. */
static int run_group(site_job *jobs, size_t njobs, size_t lo, size_t hi)
{
    krn_ctx *ctx = jobs[0].ctx;
    size_t n = hi - lo;
    bool split = n >= SITE_PARALLEL_MIN && ctx->nthreads > 1;
    size_t nchunks = split ? (n + SITE_CHUNK - 1) / SITE_CHUNK : 1;
    krn_pool *pool = NULL;
    int rc = reserve_chunks(ctx, nchunks);
    if (rc == 0 && split)
        rc = krn_ctx_pool(ctx, &pool);
    if (rc < 0)
        return rc;
    site_group g = {.jobs = jobs, .njobs = njobs, .lo = lo, .hi = hi};
    for (size_t s = 0; s < njobs; s++) {
        pthread_mutex_init(&jobs[s].err_mu, NULL);
        jobs[s].mu_live = true;
    }
    if (split)
        krn_pool_run(pool, nchunks, run_chunk, &g);
    else
        run_range(&g, lo, hi, &ctx->chunks[0]);
    for (size_t s = 0; s < njobs; s++) {
        jobs[s].mu_live = false;
        pthread_mutex_destroy(&jobs[s].err_mu);
    }
    for (size_t s = 0; s < njobs; s++)
        if (jobs[s].err_code < 0)
            return ovt_fail(jobs[s].err_code, "%s", jobs[s].err_msg);
    site_job *job = &jobs[0];
    for (size_t c = 0; c < nchunks; c++) {
        chunk_out *co = &ctx->chunks[c];
        job->wide += co->wide;
        job->within[0] += co->within[0];
        job->within[1] += co->within[1];
        ctx->stats.ambiguous += co->ambiguous[0];
        ctx->stats.ambiguous_exact += co->ambiguous[1];
        if (job->record && co->count > 0) {
            rc = krn_rlog_add_site(ctx->log, job->site, job->n, co->entries, co->count);
            if (rc < 0)
                return rc;
            ctx->stats.logged += co->count;
        }
    }
    return 0;
}

/* ---- REPLAY: applying the log ---- */

static int fraud(const site_job *job, size_t i, const char *fmt, ...) OVT_PRINTF(3, 4);

static int fraud(const site_job *job, size_t i, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return elem_fail(job, i, OVT_EFRAUD, what);
}

static int entry_beyond(const site_job *job, const krn_rlog_entry *e)
{
    return fraud(job, (size_t)e->index, "the log has an entry beyond the site's %zu elements",
                 job->n);
}

/* Applies one logged entry to element e->index, whose value on this side is
 * xi and band tau, writing the result to *outi. The rule (contract version
 * 2, with tau = 2*M*delta):
 *   direction: tau' > 0, 2*tau' <= s'/4, d' <= 2*tau', and where
 *              d' > tau'/2 the verifier's own side of m';
 *   value:     a finite grid value whose rounding interval is within
 *              tau'/2 of x'.
 * A violation is a finding (note_finding): certain where it lies outside the
 * thresholds widened by delta' (what no honest arbiter accepts). The output
 * follows the entry wherever the entry is well formed; a site with a finding
 * its role fails on fails as a whole (findings_close). A malformed entry
 * (exact element, not a grid value, unknown kind, past the largest grid
 * value) fails at once with OVT_EFRAUD. */
static int apply_entry(site_job *job, const krn_rlog_entry *e, double xi, double tau, float *outi)
{
    krn_ctx *ctx = job->ctx;
    int b = ctx->cfg.grid_bits;
    size_t i = (size_t)e->index;
    if (!(tau > 0.0))
        return fraud(job, i, "the element is logged but its band is %g (the site is exact there)",
                     tau);
    krn_grid_pos pos;
    if (krn_grid_locate(xi, b, &pos) < 0)
        return elem_fail(job, i, OVT_ENUMERIC, ovt_errmsg());
    double half = 0.5 * tau, w = widening(tau);
    char what[200];
    float v;
    double dist;
    if (e->dir == KRN_DIR_VALUE) {
        double lo, hi;
        if (krn_grid_interval(e->value, b, &lo, &hi) < 0)
            return fraud(job, i, "the logged value %a is not a finite grid value", (double)e->value);
        dist = xi < lo ? lo - xi : (xi > hi ? xi - hi : 0.0);
        if (!(dist <= half)) {
            snprintf(what, sizeof what, "own value is %.3g tau from the logged value's rounding "
                                        "interval (limit 0.5, tau = %.17g)", dist / tau, tau);
            note_finding(job, i, KRN_RULE_VALUE_FAR, dist, tau, !(dist <= half + w), what);
        }
        v = e->value;
    } else if (e->dir == KRN_DIR_DOWN || e->dir == KRN_DIR_UP) {
        dist = pos.dist;
        krn_dir own = xi > pos.mid ? KRN_DIR_UP : KRN_DIR_DOWN;
        if (!(2.0 * tau <= 0.25 * pos.spacing)) {
            snprintf(what, sizeof what, "2 tau = %.17g is more than a quarter of the grid step %.17g",
                     2.0 * tau, pos.spacing);
            note_finding(job, i, KRN_RULE_DIRECTION_WIDE, dist, tau,
                         !(2.0 * tau * (1.0 - 0x1p-20) <= 0.25 * pos.spacing), what);
        } else if (!(dist <= 2.0 * tau)) {
            snprintf(what, sizeof what, "own value is %.3g tau from the nearest midpoint (limit 2, "
                                        "tau = %.17g)", dist / tau, tau);
            note_finding(job, i, KRN_RULE_DIRECTION_FAR, dist, tau, !(dist <= 2.0 * tau + w), what);
        } else if (dist > half && e->dir != own) {
            snprintf(what, sizeof what, "the log says %s, but own value is %.3g tau %s the midpoint "
                                        "(beyond 0.5 tau every honest value is on that side; tau = %.17g)",
                     e->dir == KRN_DIR_UP ? "up" : "down", dist / tau,
                     own == KRN_DIR_UP ? "above" : "below", tau);
            note_finding(job, i, KRN_RULE_IMPOSSIBLE_DIRECTION, dist, tau, dist > half + w, what);
        }
        v = e->dir == KRN_DIR_UP ? pos.above : pos.below;
        if (isinf(v))
            return fraud(job, i, "the logged direction leads past the largest grid value");
    } else {
        return fraud(job, i, "unknown entry kind %d", (int)e->dir);
    }
    *outi = canonical_zero(v);
    double ratio = dist / tau;
    if (ratio > ctx->stats.max_dist_over_tau)
        ctx->stats.max_dist_over_tau = ratio;
    job->wide += e->dir == KRN_DIR_VALUE;
    return 0;
}

/* ---- testing: a forged entry ---- */

void krn_ctx_forge_next_site(krn_ctx *ctx)
{
    ctx->forge_armed = true;
    ctx->forged = false;
}

bool krn_ctx_forged(const krn_ctx *ctx)
{
    return ctx->forged;
}

/* Adds entry e (for an element the site has no entry for) to the job's
 * site, which is the last site of the log so far: the log is rebuilt with
 * e in index order. Testing only (forge_entry). */
static int insert_entry(krn_ctx *ctx, const site_job *job, const krn_rlog_entry *e)
{
    krn_rlog *copy = krn_rlog_new();
    krn_rlog_entry *merged = NULL;
    int rc = copy ? 0 : OVT_ENOMEM;
    if (rc == 0)
        krn_rlog_reset(copy, ctx->step);
    for (size_t k = 0; rc == 0 && k < krn_rlog_nsites(ctx->log); k++) {
        const krn_rlog_site *ls = krn_rlog_site_at(ctx->log, k);
        if (ls->site != job->site) {
            rc = krn_rlog_add_site(copy, ls->site, ls->n, ls->entries, ls->count);
            continue;
        }
        merged = malloc((ls->count + 1) * sizeof *merged);
        if (merged == NULL) {
            rc = OVT_ENOMEM;
            break;
        }
        size_t m = 0, j = 0;
        for (; j < ls->count && ls->entries[j].index < e->index; j++)
            merged[m++] = ls->entries[j];
        merged[m++] = *e;
        for (; j < ls->count; j++)
            merged[m++] = ls->entries[j];
        rc = krn_rlog_add_site(copy, ls->site, ls->n, merged, m);
    }
    if (rc == 0 && krn_rlog_find(ctx->log, job->site) == NULL)
        rc = krn_rlog_add_site(copy, job->site, job->n, e, 1);
    if (rc == 0) {
        krn_rlog_reset(ctx->log, ctx->step);
        for (size_t k = 0; rc == 0 && k < krn_rlog_nsites(copy); k++) {
            const krn_rlog_site *ls = krn_rlog_site_at(copy, k);
            rc = krn_rlog_add_site(ctx->log, ls->site, ls->n, ls->entries, ls->count);
        }
    }
    free(merged);
    krn_rlog_free(copy);
    return rc;
}

/* The forgery krn_ctx_forge_next_site arms: the last element of the job's
 * site without an entry that lies between 1.25 and 1.5 tau from its
 * midpoint is rounded to the wrong neighbour and that direction logged: an
 * impossible direction for every verifier (honest values are within
 * tau/(2M) of each other, so every verifier's d' lies between 0.78 and
 * 1.97 tau, beyond tau'/2 + delta' and within 2 tau'). The site is left
 * alone if no element qualifies; a later site of the step is tried. */
typedef struct {
    bool found;
    krn_rlog_entry entry;
    float wrong;
} forgery;

/* The forgery for the highest element of [lo, hi) that allows one, if any
 * (x and the band's arrays start at element job->base); the site's entries
 * up to hi are in the log. */
static bool forge_find(const site_job *job, size_t lo, size_t hi, forgery *f)
{
    krn_ctx *ctx = job->ctx;
    const krn_rlog_site *s = krn_rlog_find(ctx->log, job->site);
    size_t k = s != NULL ? s->count : 0; /* entries below the element looked at */
    for (size_t i = hi; i-- > lo;) {
        while (k > 0 && s->entries[k - 1].index > i)
            k--;
        if (k > 0 && s->entries[k - 1].index == i)
            continue; /* logged */
        double xi = job->x[i - job->base];
        double tau = band_at(job->band, job->x, i - job->base);
        krn_grid_pos pos;
        double ax = fabs(xi);
        if (!(tau > 0.0) || !(ax >= 0x1p-100 && ax < 0x1p100) ||
            krn_grid_locate(xi, ctx->cfg.grid_bits, &pos) < 0)
            continue;
        if (!(pos.dist > 1.25 * tau && pos.dist <= 1.5 * tau) || !(2.0 * tau <= 0.25 * pos.spacing))
            continue;
        bool up = pos.nearest != pos.above;
        f->found = true;
        f->wrong = up ? pos.above : pos.below;
        f->entry = (krn_rlog_entry){.index = i, .dir = up ? KRN_DIR_UP : KRN_DIR_DOWN};
        return true;
    }
    return false;
}

static void forge_apply(site_job *job, const forgery *f)
{
    krn_ctx *ctx = job->ctx;
    if (!f->found || isinf(f->wrong) || f->wrong == 0.0f || insert_entry(ctx, job, &f->entry) < 0)
        return;
    job->out[f->entry.index] = f->wrong;
    ctx->stats.logged++;
    ctx->forge_armed = false;
    ctx->forged = true;
}

static void forge_entry(site_job *job)
{
    forgery f = {0};
    if (forge_find(job, 0, job->n, &f))
        forge_apply(job, &f);
}

static int site_run(krn_ctx *ctx, const char *name, float *out, const double *x, size_t n,
                    const krn_band *band)
{
    int rc = band_check(band, n);
    if (rc < 0)
        return ovt_fail_wrap(rc, "step %llu site %u (%s)", (unsigned long long)ctx->step,
                             ctx->next_site, name);
    site_job job = {
        .ctx = ctx,
        .name = name,
        .site = ctx->next_site++,
        .out = out,
        .x = x,
        .n = n,
        .band = band_is_zero(band) ? NULL : band,
        .record = ctx->cfg.mode == KRN_RECORD && !band_is_zero(band),
        .replay = ctx->cfg.mode == KRN_REPLAY && !band_is_zero(band),
    };
    ctx->stats.sites++;
    ctx->stats.outputs += n;

    const krn_rlog_site *logged = NULL;
    if (ctx->cfg.mode == KRN_REPLAY && ctx->replay_next < krn_rlog_nsites(ctx->log)) {
        const krn_rlog_site *s = krn_rlog_site_at(ctx->log, ctx->replay_next);
        if (s->site == job.site) {
            logged = s;
            ctx->replay_next++;
        }
    }
    if (logged != NULL && logged->n != n)
        return ovt_fail(OVT_EFRAUD, "step %llu site %u (%s): the log says the site has %llu "
                                    "elements, it has %zu",
                        (unsigned long long)ctx->step, job.site, name,
                        (unsigned long long)logged->n, n);
    if (logged != NULL && job.band == NULL)
        return ovt_fail(OVT_EFRAUD, "step %llu site %u (%s) is exact (zero band) but the log has "
                                    "%zu entries for it",
                        (unsigned long long)ctx->step, job.site, name, logged->count);

    job.logged = logged;
    rc = run_group(&job, 1, 0, n);
    if (rc < 0)
        return rc;
    if (ctx->forge_armed && job.record)
        forge_entry(&job);
    if (logged != NULL) {
        for (size_t k = 0; k < logged->count; k++) {
            const krn_rlog_entry *e = &logged->entries[k];
            size_t i = (size_t)e->index;
            if (e->index >= n)
                return entry_beyond(&job, e);
            rc = apply_entry(&job, e, x[i], band_at(job.band, x, i), &out[i]);
            if (rc < 0)
                return rc;
        }
        ctx->stats.logged += logged->count;
    }
    ctx->stats.wide += job.wide;
    if ((rc = site_row(&job)) < 0)
        return rc;
    return findings_close(&job);
}

/* The part of krn_site and krn_site_fill after the checks both share. */
static int site_enter(krn_ctx *ctx, const char *name)
{
    if (!ctx->in_step)
        return ovt_fail(OVT_EINVAL, "site %s executed outside a step", name);
    if (ctx->failed < 0)
        return ovt_fail(ctx->failed, "site %s not run: %s", name, ctx->failed_msg);
    return 0;
}

/* Records a failure of the step: later sites of it refuse to run, and
 * krn_step_end reports this failure again. */
static int site_leave(krn_ctx *ctx, int rc)
{
    krn_sparse_fail(ctx, rc);
    return rc;
}

int krn_site_exact_fills(krn_ctx *ctx, const krn_exact_fill *sites, size_t nsites, size_t n,
                         void *arg)
{
    if (nsites == 0 || nsites > KRN_EXACT_FILLS_MAX)
        return ovt_fail(OVT_EINVAL, "krn_site_exact_fills: %zu sites (1..%d)", nsites,
                        KRN_EXACT_FILLS_MAX);
    int rc = site_enter(ctx, sites[0].name);
    if (rc < 0)
        return rc;
    site_job jobs[KRN_EXACT_FILLS_MAX];
    for (size_t s = 0; s < nsites; s++) {
        jobs[s] = (site_job){.ctx = ctx, .name = sites[s].name, .site = ctx->next_site++,
                             .out = sites[s].out, .fill = sites[s].fill, .fill_arg = arg, .n = n};
        ctx->stats.sites++;
        ctx->stats.outputs += n;
    }
    const krn_rlog_site *next = NULL;
    if (ctx->cfg.mode == KRN_REPLAY && ctx->replay_next < krn_rlog_nsites(ctx->log))
        next = krn_rlog_site_at(ctx->log, ctx->replay_next);
    for (size_t s = 0; s < nsites && rc == 0; s++)
        if (next != NULL && next->site == jobs[s].site)
            rc = ovt_fail(OVT_EFRAUD, "step %llu site %u (%s) is exact (zero band) but the log has "
                                      "%zu entries for it",
                          (unsigned long long)ctx->step, jobs[s].site, jobs[s].name, next->count);
    if (rc == 0)
        rc = run_group(jobs, nsites, 0, n);
    for (size_t s = 0; s < nsites && rc == 0; s++)
        rc = site_row(&jobs[s]);
    return site_leave(ctx, rc);
}

int krn_site_exact_fill(krn_ctx *ctx, const char *name, float *out, size_t n, krn_site_fill fill,
                        void *arg)
{
    krn_exact_fill site = {.name = name, .out = out, .fill = fill};
    return krn_site_exact_fills(ctx, &site, 1, n, arg);
}

int krn_site(krn_ctx *ctx, const char *name, float *out, const double *x, size_t n,
             const krn_band *band)
{
    int rc = site_enter(ctx, name);
    if (rc < 0)
        return rc;
    return site_leave(ctx, site_run(ctx, name, out, x, n, band));
}

/* ---- sites whose values live elsewhere (site_sparse.h) ---- */

static int sparse_failed(krn_ctx *ctx, int rc)
{
    krn_sparse_fail(ctx, rc);
    return rc;
}

void krn_sparse_fail(krn_ctx *ctx, int rc)
{
    if (rc < 0 && ctx->in_step && ctx->failed == 0) {
        ctx->failed = rc;
        snprintf(ctx->failed_msg, sizeof ctx->failed_msg, "%s", ovt_errmsg());
    }
}

int krn_sparse_begin(krn_ctx *ctx, const char *name, size_t n, bool banded, krn_sparse_site *s)
{
    memset(s, 0, sizeof *s);
    if (!ctx->in_step)
        return ovt_fail(OVT_EINVAL, "site %s executed outside a step", name);
    if (ctx->failed < 0)
        return ovt_fail(ctx->failed, "site %s not run: %s", name, ctx->failed_msg);
    s->name = name;
    s->site = ctx->next_site++;
    s->n = n;
    s->banded = banded;
    s->record = ctx->cfg.mode == KRN_RECORD && banded;
    s->flag_band = (ctx->cfg.mode == KRN_RECORD || ctx->cfg.mode == KRN_REPLAY) && banded;
    ctx->stats.sites++;
    ctx->stats.outputs += n;
    if (ctx->cfg.mode == KRN_REPLAY && ctx->replay_next < krn_rlog_nsites(ctx->log)) {
        const krn_rlog_site *ls = krn_rlog_site_at(ctx->log, ctx->replay_next);
        if (ls->site == s->site) {
            s->logged = ls;
            ctx->replay_next++;
        }
    }
    if (s->logged != NULL && s->logged->n != n)
        return sparse_failed(ctx, ovt_fail(OVT_EFRAUD, "step %llu site %u (%s): the log says the site "
                                                       "has %llu elements, it has %zu",
                                           (unsigned long long)ctx->step, s->site, name,
                                           (unsigned long long)s->logged->n, n));
    if (s->logged != NULL && !banded)
        return sparse_failed(ctx, ovt_fail(OVT_EFRAUD, "step %llu site %u (%s) is exact (zero band) "
                                                       "but the log has %zu entries for it",
                                           (unsigned long long)ctx->step, s->site, name,
                                           s->logged->count));
    return 0;
}

int krn_sparse_finish(krn_ctx *ctx, const krn_sparse_site *s, const krn_sparse_values *cand,
                      const krn_sparse_values *logged)
{
    site_job job = {.ctx = ctx, .name = s->name, .site = s->site, .n = s->n, .record = s->record,
                    .replay = ctx->cfg.mode == KRN_REPLAY && s->banded, .logged = s->logged};
    int rc = reserve_chunks(ctx, 1);
    if (rc < 0)
        return sparse_failed(ctx, rc);
    chunk_out *co = &ctx->chunks[0];
    co->count = 0;
    co->wide = 0;
    co->ambiguous[0] = co->ambiguous[1] = 0;
    co->within[0] = co->within[1] = 0;
    for (size_t k = 0; k < cand->count; k++) {
        size_t i = (size_t)cand->index[k];
        krn_rlog_entry e;
        double tau = s->flag_band ? cand->tau[k] : 0.0;
        if (i >= s->n || (k > 0 && cand->index[k] <= cand->index[k - 1]))
            return sparse_failed(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): candidate %zu "
                                                           "(element %zu) out of order or range",
                                               (unsigned long long)ctx->step, s->site, s->name, k, i));
        rc = settle(&job, i, cand->x[k], tau, &cand->out[k], &e, co);
        if (rc == 1)
            rc = chunk_push(co, &e);
        if (rc < 0)
            return sparse_failed(ctx, rc);
    }
    job.wide = co->wide;
    job.within[0] = co->within[0];
    job.within[1] = co->within[1];
    ctx->stats.ambiguous += co->ambiguous[0];
    ctx->stats.ambiguous_exact += co->ambiguous[1];
    if (s->record && co->count > 0) {
        rc = krn_rlog_add_site(ctx->log, s->site, s->n, co->entries, co->count);
        if (rc < 0)
            return sparse_failed(ctx, rc);
        ctx->stats.logged += co->count;
    }
    if (s->logged != NULL) {
        for (size_t k = 0; k < s->logged->count; k++) {
            const krn_rlog_entry *e = &s->logged->entries[k];
            if (e->index >= s->n)
                return sparse_failed(ctx, entry_beyond(&job, e));
            rc = apply_entry(&job, e, logged->x[k], logged->tau[k], &logged->out[k]);
            if (rc < 0)
                return sparse_failed(ctx, rc);
        }
        ctx->stats.logged += s->logged->count;
    }
    ctx->stats.wide += job.wide;
    if ((rc = site_row(&job)) < 0)
        return sparse_failed(ctx, rc);
    return sparse_failed(ctx, findings_close(&job));
}

/* ---- sites handed over in parts (krn_site_parts_begin) ---- */

struct krn_site_parts {
    site_job job;
    krn_band band; /* the caller's kind, scale, rel and cols; a and b per part */
    size_t next;   /* elements handed over so far */
    int rc;        /* the site's failure, once it failed */
    /* REPLAY: each logged element's value and band, saved as its part goes
     * by, so that the entries are applied after the whole site as krn_site
     * applies them; saved of them so far */
    double *saved_x, *saved_tau;
    size_t saved;
    forgery forge; /* testing: the highest element a forgery fits so far */
};

int krn_site_parts_begin(krn_ctx *ctx, krn_site_parts **out, const char *name, float *values, size_t n,
                         const krn_band *band)
{
    *out = NULL;
    int rc = site_enter(ctx, name);
    if (rc < 0)
        return rc;
    bool zero = band_is_zero(band);
    if (!zero && band->kind == KRN_BAND_OUTER && (band->cols == 0 || n % band->cols != 0))
        return site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): KRN_BAND_OUTER needs cols dividing "
                                                    "n (n = %zu, cols = %zu)",
                                        (unsigned long long)ctx->step, ctx->next_site, name, n, band->cols));
    krn_site_parts *p = calloc(1, sizeof *p);
    if (p == NULL)
        return site_leave(ctx, ovt_fail(OVT_ENOMEM, "out of memory for site %s", name));
    if (!zero)
        p->band = *band;
    p->job = (site_job){
        .ctx = ctx,
        .name = name,
        .site = ctx->next_site++,
        .out = values,
        .n = n,
        .band = zero ? NULL : &p->band,
        .record = ctx->cfg.mode == KRN_RECORD && !zero,
        .replay = ctx->cfg.mode == KRN_REPLAY && !zero,
    };
    site_job *job = &p->job;
    ctx->stats.sites++;
    ctx->stats.outputs += n;
    if (ctx->cfg.mode == KRN_REPLAY && ctx->replay_next < krn_rlog_nsites(ctx->log)) {
        const krn_rlog_site *s = krn_rlog_site_at(ctx->log, ctx->replay_next);
        if (s->site == job->site) {
            job->logged = s;
            ctx->replay_next++;
        }
    }
    const krn_rlog_site *logged = job->logged;
    if (logged != NULL && logged->n != n)
        rc = ovt_fail(OVT_EFRAUD, "step %llu site %u (%s): the log says the site has %llu elements, it has %zu",
                      (unsigned long long)ctx->step, job->site, name, (unsigned long long)logged->n, n);
    else if (logged != NULL && job->band == NULL)
        rc = ovt_fail(OVT_EFRAUD, "step %llu site %u (%s) is exact (zero band) but the log has %zu entries for it",
                      (unsigned long long)ctx->step, job->site, name, logged->count);
    else if (logged != NULL && ((p->saved_x = malloc(logged->count * sizeof(double))) == NULL ||
                                (p->saved_tau = malloc(logged->count * sizeof(double))) == NULL))
        rc = ovt_fail(OVT_ENOMEM, "out of memory for %zu rounding-log entries", logged->count);
    if (rc < 0) {
        free(p->saved_x);
        free(p->saved_tau);
        free(p);
        return site_leave(ctx, rc);
    }
    *out = p;
    return 0;
}

/* REPLAY: whether a logged element lies in [lo, lo + len), the part at hand. */
static bool logged_in(const krn_site_parts *p, size_t lo, size_t len)
{
    const krn_rlog_site *logged = p->job.logged;
    return logged != NULL && p->saved < logged->count && logged->entries[p->saved].index < lo + len;
}

/* REPLAY: each logged element of the part keeps its value x[i - lo] and
 * band (the part's band arrays) for the end of the site. */
static void save_logged(krn_site_parts *p, size_t lo, size_t len, const double *x)
{
    for (; logged_in(p, lo, len); p->saved++) {
        size_t i = (size_t)p->job.logged->entries[p->saved].index - lo;
        p->saved_x[p->saved] = x[i];
        p->saved_tau[p->saved] = band_at(p->job.band, x, i);
    }
}

int krn_site_part(krn_site_parts *p, const double *x, size_t len, const double *a, const double *b)
{
    if (p->rc < 0)
        return p->rc;
    site_job *job = &p->job;
    krn_ctx *ctx = job->ctx;
    size_t lo = p->next;
    if (len == 0 || len > job->n - lo ||
        (job->band != NULL && p->band.kind == KRN_BAND_OUTER && (lo % p->band.cols || len % p->band.cols)))
        return p->rc = site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): a part of %zu elements at "
                                                            "%zu does not fit the site's %zu%s",
                                                (unsigned long long)ctx->step, job->site, job->name, len, lo,
                                                job->n, job->band && p->band.kind == KRN_BAND_OUTER
                                                            ? " in whole rows" : ""));
    p->band.a = a;
    p->band.b = b;
    job->x = x;
    job->base = lo;
    int rc = run_group(job, 1, lo, lo + len);
    if (rc < 0)
        return p->rc = site_leave(ctx, rc);
    save_logged(p, lo, len, x);
    if (ctx->forge_armed && job->record)
        (void)forge_find(job, lo, lo + len, &p->forge);
    p->next = lo + len;
    return 0;
}

/* Whether out[0 .. len) all round to themselves with a band that cannot
 * reach their midpoints: +0, or a normal grid value below 2^127 (what the
 * fast path settles without a flag when tau = rel |x|). */
static bool settled_grid(const float *out, size_t len, int b)
{
    uint32_t low = b >= 32 ? 0 : (UINT32_C(1) << (32 - b)) - 1, bad = 0;
    for (size_t j = 0; j < len; j++) {
        uint32_t u;
        memcpy(&u, &out[j], sizeof u);
        uint32_t e = (u >> 23) & 0xffu;
        bad |= (uint32_t)(u != 0) & ((uint32_t)(e - 1 > 252u) | (uint32_t)((u & low) != 0));
    }
    return bad == 0;
}

int krn_site_part_keep(krn_site_parts *p, size_t len)
{
    static const double zeros[SITE_BLOCK];
    if (p->rc < 0)
        return p->rc;
    site_job *job = &p->job;
    krn_ctx *ctx = job->ctx;
    size_t lo = p->next;
    if (len == 0 || len > job->n - lo || (job->band != NULL && p->band.kind != KRN_BAND_ARRAY))
        return p->rc = site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): %zu kept elements at %zu "
                                                            "do not fit the site's %zu%s",
                                                (unsigned long long)ctx->step, job->site, job->name, len, lo,
                                                job->n, job->band ? " (or its band is not an array)" : ""));
    double xbuf[SITE_BLOCK];
    for (size_t b0 = lo; b0 < lo + len; b0 += SITE_BLOCK) {
        size_t blen = lo + len - b0 < SITE_BLOCK ? lo + len - b0 : SITE_BLOCK;
        const float *o = job->out + b0;
        if (settled_grid(o, blen, ctx->cfg.grid_bits) && !logged_in(p, b0, blen)) {
            p->next = b0 + blen;
            continue;
        }
        /* anything else, and a block holding a logged element (REPLAY),
         * takes krn_site_part's way with the same values */
        for (size_t j = 0; j < blen; j++)
            xbuf[j] = (double)o[j];
        p->next = b0;
        int rc = krn_site_part(p, xbuf, blen, zeros, NULL);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int krn_site_parts_end(krn_site_parts *p)
{
    if (p == NULL)
        return 0;
    site_job *job = &p->job;
    krn_ctx *ctx = job->ctx;
    int rc = p->rc;
    if (rc == 0 && p->next != job->n)
        rc = site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): %zu of its %zu elements were handed over",
                                      (unsigned long long)ctx->step, job->site, job->name, p->next, job->n));
    else if (rc == 0) {
        job->x = NULL;
        if (ctx->forge_armed && job->record)
            forge_apply(job, &p->forge);
        const krn_rlog_site *logged = job->logged;
        for (size_t k = 0; logged != NULL && k < logged->count && rc == 0; k++) {
            const krn_rlog_entry *e = &logged->entries[k];
            if (e->index >= job->n)
                rc = entry_beyond(job, e);
            else
                rc = apply_entry(job, e, p->saved_x[k], p->saved_tau[k], &job->out[e->index]);
        }
        if (rc == 0 && logged != NULL)
            ctx->stats.logged += logged->count;
        if (rc == 0) {
            ctx->stats.wide += job->wide;
            if ((rc = site_row(job)) == 0)
                rc = findings_close(job);
        }
        rc = site_leave(ctx, rc);
    }
    free(p->saved_x);
    free(p->saved_tau);
    free(p);
    return rc;
}
