/* The host side of the cuda backend, without a device:
 *  - the sparse site (kernels/site_sparse.h), fed exactly what the device
 *    hands back (the fast path of every element, the flagged elements
 *    compacted in index order, the logged elements gathered), gives the same
 *    outputs, the same rounding log and the same fraud verdicts as krn_site
 *    in RECORD, REPLAY and NEAREST;
 *  - the launch shapes: block counts and grid-stride coverage, the chunk
 *    split of the GEMM;
 *  - the batched product's launch plan (kernels/cuda/gemm_plan.h): every
 *    launch it makes executed on the host (each DGEMM as a fixed-order dot
 *    per element, each sum as the kernel's loop) gives the per-chunk
 *    path's value bit for bit, reads and writes only inside a, b, the
 *    scratch and out, on shapes with K < 128, one chunk, a short last
 *    chunk, tiles and groups forced by small budgets; the plan of every
 *    gpt2-small product at B=16 T=1024 within its budget; the overflow
 *    and stride checks; the OVT_CUDA_GEMM switch;
 *  - the tree roots of many tensors at once (kernels/cuda/tree_plan.h):
 *    the device's walk, leaf kernel then one level kernel after another,
 *    run on the host with the same code gives every tensor's root by
 *    common/tree.c. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "common/tree.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/shape.h"
#include "kernels/cuda/tree_plan.h"
#include "kernels/grid_bits.h"
#include "kernels/ops.h"
#include "kernels/reduce.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"
#include "kernels/site_sparse.h"

static double uni(uint64_t seed, uint64_t k)
{
    return krn_rng_uniform(seed, 0, KRN_RNG_TEST, k);
}

/* Values of every kind the site must handle: random, on a midpoint +- a
 * fraction of the band, zero, subnormal, near zero with a wide band. The
 * band is ARRAY (tau_i = scale * a[i]) plus a rel term. */
static void make_values(double *x, double *a, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double u = uni(seed, 3 * i), v = uni(seed, 3 * i + 1), w = uni(seed, 3 * i + 2);
        double sign = w < 0.5 ? -1.0 : 1.0;
        switch (i % 6) {
        case 0:
        case 1: {
            float g = (float)(sign * ldexp(1.0 + u, (int)(v * 40.0) - 20));
            double q = ldexp(1.0, ilogb(g) - 23);
            double mid = (double)g + q / 2;
            a[i] = q / 64;
            /* every third one exactly on the midpoint (a tie) */
            x[i] = (i / 6) % 3 == 0 ? mid : mid + (2.0 * w - 1.0) * a[i] * 0.9;
            break;
        }
        case 2: /* zeros (either sign) with a band that reaches q_min/2 or not */
            x[i] = w < 0.5 ? -0.0 : 0.0;
            a[i] = (i / 6) % 3 == 0 ? 1e-30 : (i / 6) % 3 == 1 ? 0.0 : 0x1p-151;
            break;
        case 3:
            x[i] = sign * ldexp(u, -140);
            a[i] = ldexp(1.0, -160);
            break;
        case 4:
            x[i] = sign * ldexp(u, -30);
            a[i] = ldexp(1.0, -20); /* wide: value entries */
            break;
        default:
            x[i] = sign * ldexp(1.0 + u, (int)(v * 60.0) - 30);
            a[i] = fabs(x[i]) * 0x1p-30;
            break;
        }
    }
}

static krn_ctx *new_ctx(krn_mode mode)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = mode, .grid_bits = 32, .threads = 1};
    krn_ctx *ctx = NULL;
    if (krn_ctx_new(&ctx, &cfg) != 0) {
        fprintf(stderr, "krn_ctx_new: %s\n", ovt_errmsg());
        exit(1);
    }
    return ctx;
}

/* What the device does (kernels/cuda/site.cu), on the host: fast path,
 * flags, compaction, gather, then krn_sparse_finish and the scatter. */
static int device_site(krn_ctx *ctx, const char *name, float *out, const double *x, size_t n,
                       const krn_band *band, size_t *ncand_out)
{
    bool banded = band != NULL;
    krn_sparse_site s;
    int rc = krn_sparse_begin(ctx, name, n, banded, &s);
    if (rc)
        return rc;
    double *tau = calloc(n, sizeof *tau);
    uint8_t *flag = calloc(n, 1);
    for (size_t i = 0; i < n; i++) {
        if (banded)
            tau[i] = band->scale * band->a[i] + band->rel * fabs(x[i]);
        flag[i] = krn_round_fast_device(x[i], s.flag_band ? tau[i] : 0.0, &out[i], 32);
    }
    size_t nc = 0, nl = s.logged ? s.logged->count : 0;
    for (size_t i = 0; i < n; i++)
        nc += flag[i];
    uint64_t *idx = calloc(nc + 1, sizeof *idx);
    double *cx = calloc(nc + 1, sizeof *cx), *ct = calloc(nc + 1, sizeof *ct);
    double *lx = calloc(nl + 1, sizeof *lx), *lt = calloc(nl + 1, sizeof *lt);
    float *cv = calloc(nc + 1, sizeof *cv), *lv = calloc(nl + 1, sizeof *lv);
    for (size_t i = 0, o = 0; i < n; i++)
        if (flag[i]) {
            idx[o] = i;
            cx[o] = x[i];
            ct[o++] = s.flag_band ? tau[i] : 0.0;
        }
    for (size_t k = 0; k < nl; k++) {
        size_t i = s.logged->entries[k].index < n ? s.logged->entries[k].index : 0;
        lx[k] = x[i];
        lt[k] = banded ? tau[i] : 0.0;
    }
    krn_sparse_values cand = {nc, idx, cx, ct, cv}, logged = {nl, NULL, lx, lt, lv};
    rc = krn_sparse_finish(ctx, &s, &cand, &logged);
    if (rc == 0) {
        for (size_t k = 0; k < nc; k++)
            out[idx[k]] = cv[k];
        for (size_t k = 0; k < nl; k++)
            out[s.logged->entries[k].index] = lv[k];
    }
    *ncand_out = nc;
    free(tau);
    free(flag);
    free(idx);
    free(cx);
    free(ct);
    free(lx);
    free(lt);
    free(cv);
    free(lv);
    return rc;
}

static bool logs_equal(const krn_rlog *a, const krn_rlog *b)
{
    if (krn_rlog_nsites(a) != krn_rlog_nsites(b) || krn_rlog_nentries(a) != krn_rlog_nentries(b))
        return false;
    for (size_t s = 0; s < krn_rlog_nsites(a); s++) {
        const krn_rlog_site *x = krn_rlog_site_at(a, s), *y = krn_rlog_site_at(b, s);
        if (x->site != y->site || x->n != y->n || x->count != y->count)
            return false;
        for (size_t k = 0; k < x->count; k++)
            if (x->entries[k].index != y->entries[k].index || x->entries[k].dir != y->entries[k].dir ||
                memcmp(&x->entries[k].value, &y->entries[k].value, sizeof(float)) != 0)
                return false;
    }
    return true;
}

/* Two sites per step: an exact one and a banded one, as an op would run. */
static int run_step(krn_ctx *ctx, bool sparse, krn_rlog *log, float *out, const double *x,
                    const double *a, size_t n, size_t *ncand, krn_stats *st)
{
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, 1, 1.0, 1);
    band.scale = 1.0;
    band.a = a;
    int rc = krn_step_begin(ctx, 3, log);
    size_t nc = 0;
    if (rc == 0)
        rc = sparse ? device_site(ctx, "test.exact", out, x, n, NULL, &nc)
                    : krn_site(ctx, "test.exact", out, x, n, NULL);
    if (rc == 0)
        rc = sparse ? device_site(ctx, "test.banded", out + n, x, n, &band, ncand)
                    : krn_site(ctx, "test.banded", out + n, x, n, &band);
    int end = krn_step_end(ctx, st);
    return rc ? rc : end;
}

static void test_sparse_matches_site(uint64_t seed)
{
    enum { N = 6000 };
    double *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *x2 = malloc(N * sizeof *x2);
    float *o1 = malloc(2 * N * sizeof *o1), *o2 = malloc(2 * N * sizeof *o2);
    make_values(x, a, N, seed);
    for (size_t i = 0; i < N; i++) /* the verifier's values: within the band */
        x2[i] = x[i] + a[i] * (uni(seed + 99, i) - 0.5);
    krn_rlog *l1 = krn_rlog_new(), *l2 = krn_rlog_new();
    krn_stats s1, s2;
    size_t ncand = 0;

    /* RECORD: same outputs, same log, same counts; few candidates travel */
    krn_ctx *c1 = new_ctx(KRN_RECORD), *c2 = new_ctx(KRN_RECORD);
    CHECK(run_step(c1, false, l1, o1, x, a, N, &ncand, &s1) == 0);
    CHECK(run_step(c2, true, l2, o2, x, a, N, &ncand, &s2) == 0);
    CHECK_MEM(o1, o2, 2 * N * sizeof *o1);
    CHECK(krn_rlog_nentries(l1) > 0);
    CHECK(logs_equal(l1, l2));
    CHECK(s1.logged == s2.logged && s1.wide == s2.wide && s1.sites == s2.sites && s1.outputs == s2.outputs);
    CHECK(s1.wide > 0);
    CHECK_MSG(ncand < N, "%zu candidates of %d", ncand, N);
    krn_ctx_free(c1);
    krn_ctx_free(c2);

    /* REPLAY on x2 with that log: same outputs as krn_site, and the banded
     * site's equal to the trainer's (the exact site saw other values) */
    c1 = new_ctx(KRN_REPLAY);
    c2 = new_ctx(KRN_REPLAY);
    CHECK(run_step(c1, false, l1, o1, x2, a, N, &ncand, &s1) == 0);
    float *o3 = malloc(2 * N * sizeof *o3);
    CHECK(run_step(c2, true, l1, o3, x2, a, N, &ncand, &s2) == 0);
    CHECK_MEM(o1, o3, 2 * N * sizeof *o1);
    CHECK_MEM(o2 + N, o3 + N, N * sizeof *o1);
    CHECK(s1.logged == s2.logged && s1.max_dist_over_tau == s2.max_dist_over_tau);

    /* NEAREST on x2 differs from the trainer somewhere (the ablation) and
     * agrees with krn_site's NEAREST */
    krn_ctx_free(c1);
    krn_ctx_free(c2);
    c1 = new_ctx(KRN_NEAREST);
    c2 = new_ctx(KRN_NEAREST);
    CHECK(run_step(c1, false, NULL, o1, x2, a, N, &ncand, &s1) == 0);
    CHECK(run_step(c2, true, NULL, o3, x2, a, N, &ncand, &s2) == 0);
    CHECK_MEM(o1, o3, 2 * N * sizeof *o1);
    CHECK(memcmp(o2 + N, o3 + N, N * sizeof *o1) != 0);
    krn_ctx_free(c1);
    krn_ctx_free(c2);

    /* a forged entry far from any midpoint: fraud on both paths, same message */
    krn_rlog *forged = krn_rlog_new();
    krn_rlog_reset(forged, 3);
    size_t far = 5; /* kind 5: a random value, d far above its band */
    CHECK(krn_rlog_add(forged, 1, N, far, KRN_DIR_UP, 0.0f) == 0);
    c1 = new_ctx(KRN_REPLAY);
    c2 = new_ctx(KRN_REPLAY);
    CHECK(run_step(c1, false, forged, o1, x, a, N, &ncand, &s1) == OVT_EFRAUD);
    char msg1[512];
    snprintf(msg1, sizeof msg1, "%s", ovt_errmsg());
    CHECK(run_step(c2, true, forged, o3, x, a, N, &ncand, &s2) == OVT_EFRAUD);
    CHECK_MSG(strcmp(msg1, ovt_errmsg()) == 0, "'%s' vs '%s'", msg1, ovt_errmsg());
    /* and an entry for the exact site */
    krn_rlog_reset(forged, 3);
    CHECK(krn_rlog_add(forged, 0, N, 7, KRN_DIR_UP, 0.0f) == 0);
    CHECK(run_step(c2, true, forged, o3, x, a, N, &ncand, &s2) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "exact") != NULL);
    krn_ctx_free(c1);
    krn_ctx_free(c2);
    krn_rlog_free(forged);

    /* a non-finite value fails the step at the same element */
    x[17] = NAN;
    c1 = new_ctx(KRN_RECORD);
    c2 = new_ctx(KRN_RECORD);
    CHECK(run_step(c1, false, l1, o1, x, a, N, &ncand, &s1) == OVT_ENUMERIC);
    snprintf(msg1, sizeof msg1, "%s", ovt_errmsg());
    CHECK(run_step(c2, true, l2, o3, x, a, N, &ncand, &s2) == OVT_ENUMERIC);
    CHECK_MSG(strcmp(msg1, ovt_errmsg()) == 0, "'%s' vs '%s'", msg1, ovt_errmsg());
    krn_ctx_free(c1);
    krn_ctx_free(c2);

    krn_rlog_free(l1);
    krn_rlog_free(l2);
    free(x);
    free(x2);
    free(a);
    free(o1);
    free(o2);
    free(o3);
}

/* A sparse site outside a step, or after a failed one, refuses to run. */
static void test_sparse_misuse(void)
{
    krn_ctx *ctx = new_ctx(KRN_NEAREST);
    krn_sparse_site s;
    CHECK(krn_sparse_begin(ctx, "x", 4, false, &s) == OVT_EINVAL);
    CHECK(krn_step_begin(ctx, 0, NULL) == 0);
    krn_sparse_fail(ctx, ovt_fail(OVT_EIO, "cuda: a device error"));
    CHECK(krn_sparse_begin(ctx, "x", 4, false, &s) == OVT_EIO);
    CHECK(krn_step_end(ctx, NULL) == OVT_EIO);
    CHECK(strstr(ovt_errmsg(), "device error") != NULL);
    /* candidates out of order are a programming error, reported */
    CHECK(krn_step_begin(ctx, 1, NULL) == 0);
    CHECK(krn_sparse_begin(ctx, "x", 4, false, &s) == 0);
    uint64_t idx[2] = {2, 1};
    double xv[2] = {0, 0}, tv[2] = {0, 0};
    float ov[2];
    krn_sparse_values cand = {2, idx, xv, tv, ov}, none = {0, NULL, NULL, NULL, NULL};
    CHECK(krn_sparse_finish(ctx, &s, &cand, &none) == OVT_EINVAL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    krn_ctx_free(ctx);
}

/* Block counts and grid-stride coverage; the chunk split. */
static void test_shapes(void)
{
    CHECK(krn_cuda_blocks(0) == 1);
    CHECK(krn_cuda_blocks(1) == 1);
    CHECK(krn_cuda_blocks(KRN_CUDA_THREADS) == 1);
    CHECK(krn_cuda_blocks(KRN_CUDA_THREADS + 1) == 2);
    CHECK(krn_cuda_blocks((size_t)1 << 40) == KRN_CUDA_MAX_BLOCKS);
    /* a grid-stride loop over n with the computed grid visits each element
     * once (emulated for a small thread count per block) */
    const size_t ns[] = {1, 255, 256, 257, 100000, (size_t)KRN_CUDA_THREADS * KRN_CUDA_MAX_BLOCKS + 3};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        size_t n = ns[t], threads = (size_t)krn_cuda_blocks(n) * KRN_CUDA_THREADS, visits = 0;
        for (size_t tid = 0; tid < threads; tid += threads / 7 + 1)
            for (size_t i = tid; i < n; i += threads)
                visits++;
        size_t expect = 0;
        for (size_t tid = 0; tid < threads; tid += threads / 7 + 1)
            expect += tid < n ? (n - tid - 1) / threads + 1 : 0;
        CHECK(visits == expect);
        CHECK(threads >= n || krn_cuda_blocks(n) == KRN_CUDA_MAX_BLOCKS);
    }
    /* chunks of the GEMM: lengths sum to K, all full but the last, and
     * their count is the n of krn_chunked_gamma */
    const size_t ks[] = {1, 127, 128, 129, 768, 3072, 3073};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        size_t K = ks[t], nch = krn_cuda_nchunks(K, KRN_GEMM_CHUNK), sum = 0;
        CHECK(nch == (K + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK);
        for (size_t j = 0; j < nch; j++) {
            size_t len = krn_cuda_chunk_len(K, KRN_GEMM_CHUNK, j);
            CHECK(len >= 1 && len <= KRN_GEMM_CHUNK && (j + 1 == nch || len == KRN_GEMM_CHUNK));
            sum += len;
        }
        CHECK(sum == K);
        size_t c = K < KRN_GEMM_CHUNK ? K : KRN_GEMM_CHUNK;
        CHECK(krn_chunked_gamma(K) == krn_gamma((double)(c + nch - 1)));
    }
}

/* The host's stand-in for the device: the arrays a launch touches, their
 * lengths, and how many accesses fell outside them. */
typedef struct {
    const krn_cuda_gemm_plan *p;
    const double *a, *b;
    const float *old;
    double *out, *scratch;
    size_t alen, blen, scratch_len, bad;
} emu;

static double emu_load(emu *e, const double *x, size_t len, size_t i)
{
    if (i >= len) {
        e->bad++;
        return 0;
    }
    return x[i];
}

/* One product term's operands at global row i, column j, term q of a
 * matrix starting at a_off / b_off. */
static double emu_term(emu *e, size_t a_off, size_t b_off, size_t i, size_t j, size_t q)
{
    const krn_cuda_gemm_plan *p = e->p;
    double x = emu_load(e, e->a, e->alen, a_off + (p->ta ? q * p->lda + i : i * p->lda + q));
    double y = emu_load(e, e->b, e->blen, b_off + (p->tb ? j * p->ldb + q : q * p->ldb + j));
    return x * y;
}

/* A chunk's dot in one fixed order (what any one DGEMM does is its own
 * business; the plan must hand both paths the same chunks). */
static double emu_dot(emu *e, size_t a_off, size_t b_off, size_t i, size_t j, size_t kc)
{
    double s = 0;
    for (size_t q = 0; q < kc; q++)
        s += emu_term(e, a_off, b_off, i, j, q);
    return s;
}

static double *emu_at(emu *e, bool in_out, size_t off)
{
    size_t len = in_out ? e->p->m * e->p->n : e->scratch_len;
    if (off >= len) {
        e->bad++;
        return NULL;
    }
    return (in_out ? e->out : e->scratch) + off;
}

static int emu_launch(void *arg, const krn_cuda_gemm_launch *l)
{
    emu *e = arg;
    const krn_cuda_gemm_plan *p = e->p;
    size_t count = l->rows * p->n;
    if (l->kind == KRN_CUDA_GEMM_DGEMM) {
        for (size_t c = 0; c < l->count; c++)
            for (size_t r = 0; r < l->rows; r++)
                for (size_t j = 0; j < p->n; j++) {
                    double *dst = emu_at(e, l->into_out, l->c_off + c * p->slice + r * p->n + j);
                    double v = emu_dot(e, l->a_off + c * (size_t)p->stride_a, l->b_off + c * (size_t)p->stride_b,
                                       r, j, l->kc);
                    if (dst)
                        *dst = v;
                }
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        double *o = emu_at(e, true, l->c_off + i);
        if (!o)
            continue;
        double v = 0;
        size_t j = 0;
        if (l->kind == KRN_CUDA_GEMM_SUM) {
            double *s0 = l->from_out ? o : emu_at(e, false, i);
            v = s0 ? *s0 : 0;
            for (j = l->from_out ? 0 : 1; j < l->nslices; j++) {
                double *sj = emu_at(e, false, j * p->slice + i);
                v += sj ? *sj : 0;
            }
            if (l->with_old)
                v += (double)e->old[l->c_off + i];
        } else {
            v = l->with_old ? 0.0 + (double)e->old[l->c_off + i] : 0.0;
        }
        *o = v;
    }
    return 0;
}

/* The per-chunk path's value of element (i, j): chunk 0, then + each
 * further chunk, then + old. */
static double per_chunk_value(emu *e, size_t i, size_t j)
{
    const krn_cuda_gemm_plan *p = e->p;
    double v = 0;
    for (size_t k0 = 0; k0 < p->k; k0 += KRN_GEMM_CHUNK) {
        size_t kc = p->k - k0 < KRN_GEMM_CHUNK ? p->k - k0 : KRN_GEMM_CHUNK;
        double part = emu_dot(e, p->ta ? k0 * p->lda : k0, p->tb ? k0 : k0 * p->ldb, i, j, kc);
        v = k0 == 0 ? part : v + part;
    }
    if (e->old)
        v += (double)e->old[i * p->n + j];
    return v;
}

/* Operands whose chunks differ by up to 2^40 in scale, so that adding the
 * chunks in another order, or a chunk twice, changes the bits. */
static double *chunky_operand(size_t rows, size_t cols, bool k_is_row, uint64_t seed)
{
    double *x = malloc((rows * cols + 1) * sizeof *x);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t q = k_is_row ? r : c, chunk = q / KRN_GEMM_CHUNK;
            double scale = ldexp(1.0, (int)(uni(seed, 1000000 + chunk) * 80.0) - 40);
            x[r * cols + c] = (2.0 * uni(seed, r * cols + c) - 1.0) * scale;
        }
    return x;
}

/* One product by the plan on the host against the per-chunk value. */
static void check_plan_case(bool ta, bool tb, size_t m, size_t n, size_t k, size_t budget, bool with_old,
                            uint64_t seed)
{
    size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2; /* strides longer than the rows */
    krn_cuda_gemm_plan p;
    int rc = krn_cuda_gemm_plan_make(&p, ta, lda, tb, ldb, m, n, k, budget);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    if (rc)
        return;
    emu e = {.p = &p, .alen = (ta ? k : m) * lda, .blen = (tb ? n : k) * ldb, .scratch_len = p.scratch};
    double *a = chunky_operand(ta ? k : m, lda, ta, seed), *b = chunky_operand(tb ? n : k, ldb, !tb, seed + 1);
    float *old = NULL;
    if (with_old) {
        old = malloc((m * n + 1) * sizeof *old);
        for (size_t i = 0; i < m * n; i++)
            old[i] = i % 5 == 1 ? -0.0f : (float)(uni(seed + 2, i) - 0.5); /* -0 + 0 is +0 */
    }
    e.a = a;
    e.b = b;
    e.old = old;
    e.out = malloc((m * n + 1) * sizeof *e.out);
    e.scratch = malloc((p.scratch ? p.scratch : 1) * sizeof *e.scratch);
    for (size_t i = 0; i < m * n; i++)
        e.out[i] = NAN; /* a missed element stays NaN */
    CHECK(krn_cuda_gemm_plan_walk(&p, with_old, emu_launch, &e) == 0);
    size_t differ = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double want = per_chunk_value(&e, i, j);
            differ += memcmp(&want, &e.out[i * n + j], sizeof want) != 0;
        }
    CHECK_MSG(differ == 0 && e.bad == 0,
              "ta %d tb %d %zu x %zu over %zu, budget %zu (rows %zu, group %zu): %zu elements differ, %zu "
              "accesses outside", ta, tb, m, n, k, budget, p.rows, p.group, differ, e.bad);
    CHECK(p.scratch <= (budget ? budget : krn_cuda_gemm_budget(m, n)) || p.rows == 1);
    CHECK(p.tiles == 0 || ((p.tiles - 1) * p.rows < m && p.rows <= m));
    CHECK(p.scratch == p.group * p.slice && (p.chunks < 2 || p.slice == p.rows * n));
    free(a);
    free(b);
    free(old);
    free(e.out);
    free(e.scratch);
}

static void test_gemm_plan(void)
{
    const struct {
        size_t m, n, k, budget;
    } cases[] = {
        {5, 7, 1, 0},      {9, 4, 127, 0},   {9, 4, 128, 0},     {9, 4, 129, 0},    {13, 11, 700, 0},
        {13, 11, 768, 0},  {13, 11, 700, 13 * 11 * 5},          {13, 11, 700, 13 * 11 * 2},
        {13, 11, 700, 11 * 4}, {13, 11, 700, 11}, {13, 11, 700, 1}, {13, 11, 0, 0}, {0, 11, 300, 0},
        {13, 0, 300, 0},   {1, 1, 1000, 0},  {600, 3, 300, 3 * 3 * 400}, {600, 3, 300, 3 * 3 * 100},
        {600, 3, 257, 3 * 600},
    };
    uint64_t seed = 10;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 4; t++)
            check_plan_case(t & 1, t >> 1, cases[c].m, cases[c].n, cases[c].k, cases[c].budget, (c + (size_t)t) % 2 == 0,
                            seed++);
    /* the shapes forced what they were meant to */
    krn_cuda_gemm_plan p;
    CHECK(krn_cuda_gemm_plan_make(&p, false, 700, false, 11, 13, 11, 700, 13 * 11 * 2) == 0);
    CHECK(p.chunks == 6 && p.full == 5 && p.tail == 60 && p.group == 2 && p.groups == 3 && p.tiles == 1);
    CHECK(krn_cuda_gemm_plan_make(&p, false, 700, false, 11, 13, 11, 700, 11 * 4) == 0);
    CHECK(p.group == 1 && p.rows == 4 && p.tiles == 4 && p.scratch == 44);
    CHECK(krn_cuda_gemm_plan_make(&p, false, 300, false, 3, 600, 3, 300, 3 * 3 * 100) == 0);
    CHECK(p.rows == KRN_CUDA_GEMM_MIN_ROWS && p.group == 1 && p.groups == 3 && p.tiles == 3);
    CHECK(krn_cuda_gemm_plan_make(&p, true, 13, true, 127, 13, 11, 127, 0) == 0);
    CHECK(p.chunks == 1 && p.scratch == 0 && krn_cuda_gemm_launches(&p, false) == 1 &&
          krn_cuda_gemm_launches(&p, true) == 2);
    CHECK(krn_cuda_gemm_plan_make(&p, false, 0, false, 11, 13, 11, 0, 0) == 0);
    CHECK(krn_cuda_gemm_launches(&p, false) == 1 && krn_cuda_gemm_launches_per_chunk(0, false) == 1);
}

/* Every product of a gpt2-small step at B=16, T=1024 (the forward, input
 * gradient and weight gradient of the four layer products and the LM
 * head): within its budget, never more scratch than the per-chunk path's
 * m * n or 1 GiB, and far fewer launches. */
static void test_gemm_plan_gpt2_small(void)
{
    const size_t N = 16 * 1024, C = 768, V = 50257;
    const size_t shapes[][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, V}};
    size_t launches = 0, per_chunk = 0, most = 0;
    for (size_t s = 0; s < 5; s++) {
        size_t c = shapes[s][0], oc = shapes[s][1];
        /* forward (N,OC) over C; input gradient (N,C) over OC; weight gradient (OC,C) over N */
        const size_t prod[3][5] = {{N, oc, c, c, c}, {N, c, oc, oc, c}, {oc, c, N, oc, c}};
        const bool tas[3] = {false, false, true}, tbs[3] = {true, false, false};
        for (int q = 0; q < 3; q++) {
            krn_cuda_gemm_plan p;
            size_t m = prod[q][0], n = prod[q][1], k = prod[q][2];
            int rc = krn_cuda_gemm_plan_make(&p, tas[q], prod[q][3], tbs[q], prod[q][4], m, n, k, 0);
            CHECK_MSG(rc == 0, "%s", ovt_errmsg());
            CHECK(p.scratch <= krn_cuda_gemm_budget(m, n));
            CHECK(p.scratch <= (m * n > KRN_CUDA_GEMM_SCRATCH_MIN ? m * n : KRN_CUDA_GEMM_SCRATCH_MIN));
            launches += krn_cuda_gemm_launches(&p, q > 0);
            per_chunk += krn_cuda_gemm_launches_per_chunk(k, q > 0);
            most = p.scratch > most ? p.scratch : most;
        }
    }
    /* the LM head's forward holds 16384 x 50257 doubles either way */
    CHECK(most <= N * V);
    CHECK_MSG(launches * 4 < per_chunk, "%zu launches against %zu per chunk", launches, per_chunk);
    printf("gpt2-small B=16 T=1024, one layer and the head: %zu launches (per chunk: %zu), largest scratch %.2f GB\n",
           launches, per_chunk, (double)most * 8 / 1e9);
}

static void test_gemm_plan_errors(void)
{
    krn_cuda_gemm_plan p;
    size_t big = (size_t)INT32_MAX + 1;
    CHECK(krn_cuda_gemm_plan_make(&p, false, 10, false, 10, big, 10, 10, 0) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "cuBLAS's limit") != NULL && p.chunks == 0 && p.tiles == 0);
    CHECK(krn_cuda_gemm_plan_make(&p, false, 10, false, big, 10, 10, 10, 0) == OVT_EINVAL);
    CHECK(krn_cuda_gemm_plan_make(&p, false, big, false, 10, 10, 10, big, 0) == OVT_EINVAL);
    /* 2^31 - 1 squared doubles overflow a 64-bit size */
    CHECK(krn_cuda_gemm_plan_make(&p, true, INT32_MAX, false, INT32_MAX, INT32_MAX, INT32_MAX, 1, 0) ==
          OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "overflows") != NULL);
    /* a stride shorter than its row */
    CHECK(krn_cuda_gemm_plan_make(&p, false, 99, false, 10, 10, 10, 100, 0) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "shorter than its row") != NULL);
    CHECK(krn_cuda_gemm_plan_make(&p, true, 9, false, 10, 10, 10, 100, 0) == OVT_EINVAL);
    CHECK(krn_cuda_gemm_plan_make(&p, false, 100, true, 99, 10, 10, 100, 0) == OVT_EINVAL);
    CHECK(krn_cuda_gemm_plan_make(&p, true, 10, true, 100, 10, 10, 100, 0) == 0);

    krn_cuda_gemm_path path;
    CHECK(krn_cuda_gemm_path_parse(NULL, &path) == 0 && path == KRN_CUDA_GEMM_BATCHED);
    CHECK(krn_cuda_gemm_path_parse("", &path) == 0 && path == KRN_CUDA_GEMM_BATCHED);
    CHECK(krn_cuda_gemm_path_parse("batched", &path) == 0 && path == KRN_CUDA_GEMM_BATCHED);
    CHECK(krn_cuda_gemm_path_parse("per-chunk", &path) == 0 && path == KRN_CUDA_GEMM_PER_CHUNK);
    CHECK(krn_cuda_gemm_path_parse("perchunk", &path) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "OVT_CUDA_GEMM=perchunk") != NULL && strstr(ovt_errmsg(), "per-chunk") != NULL);
}

/* The tree hash's launch shape covers every leaf or node. */
static void test_tree_shape(void)
{
    const unsigned T = KRN_CUDA_TREE_THREADS;
    CHECK(krn_cuda_blocks_of(0, T) == 1 && krn_cuda_blocks_of(1, T) == 1);
    CHECK(krn_cuda_blocks_of(T, T) == 1 && krn_cuda_blocks_of(T + 1, T) == 2);
    /* a 500 MB tensor's 7,630 leaves spread over at least 132 multiprocessors */
    CHECK(krn_cuda_blocks_of(7630, T) >= 132);
    CHECK(krn_cuda_blocks_of((size_t)1 << 40, T) == KRN_CUDA_MAX_BLOCKS);
}

/* The walk of tree_hash.cu on the host: every leaf kernel thread, then
 * every level kernel thread, level by level, between two buffers. */
static void tree_walk_on_host(ovt_hash *roots, const uint8_t *const *bytes, const size_t *lens, size_t count)
{
    krn_cuda_tree_plan p;
    CHECK(krn_cuda_tree_plan_make(&p, lens, count) == 0);
    const size_t *row0 = krn_cuda_tree_level(&p, 0);
    uint8_t *cur = malloc(32 * row0[count]), *next = malloc(32 * row0[count]);
    for (size_t j = 0; j < row0[count]; j++)
        krn_cuda_tree_leaf(cur, bytes, lens, row0, count, j);
    for (size_t l = 1; l <= p.levels; l++) {
        const size_t *up = krn_cuda_tree_level(&p, l);
        for (size_t j = 0; j < up[count]; j++)
            krn_cuda_tree_node(next, cur, krn_cuda_tree_level(&p, l - 1), up, count, j);
        uint8_t *t = cur;
        cur = next;
        next = t;
    }
    CHECK(krn_cuda_tree_level(&p, p.levels)[count] == count); /* one node per tensor */
    for (size_t t = 0; t < count; t++)
        memcpy(roots[t].b, cur + 32 * t, 32);
    free(cur);
    free(next);
    krn_cuda_tree_plan_free(&p);
}

static void test_tree_roots(void)
{
    const size_t K = OVT_TREE_LEAF_BYTES;
    /* a state's mix: empty, tiny, exactly one leaf, odd and even leaf counts, deep */
    const size_t lens[] = {3072, 0, 4, K, K + 4, 3 * K + 8, 2 * K, 17 * K - 4, 5 * K, 12, 33 * K};
    const size_t count = sizeof lens / sizeof lens[0];
    const uint8_t *bytes[sizeof lens / sizeof lens[0]];
    float *all = malloc((33 * K + 16) * sizeof(float));
    for (size_t i = 0; i < 33 * K / 4 + 4; i++)
        all[i] = (float)(uni(5, i) - 0.5);
    for (size_t t = 0; t < count; t++) /* overlapping views of one buffer, at word offsets */
        bytes[t] = (const uint8_t *)(all + t);
    ovt_hash roots[sizeof lens / sizeof lens[0]];
    tree_walk_on_host(roots, bytes, lens, count);
    for (size_t t = 0; t < count; t++) {
        /* tree.c's root of the bytes as they lie (ovt_tree_root_le32 on a
         * little-endian host; a big-endian one runs this test too) */
        size_t n = ovt_tree_leaves(lens[t]);
        ovt_hash *leaves = malloc(n * sizeof *leaves), want;
        for (size_t i = 0; i < n; i++) {
            size_t off = i * (size_t)K;
            ovt_tree_leaf(&leaves[i], bytes[t] + off, lens[t] - off < K ? lens[t] - off : K);
        }
        ovt_tree_root_of_leaves(&want, leaves, n);
        free(leaves);
        CHECK_MSG(memcmp(want.b, roots[t].b, 32) == 0, "tensor %zu (%zu bytes): root differs", t, lens[t]);
    }
    /* one tensor alone: the same root as among the others */
    ovt_hash one;
    tree_walk_on_host(&one, &bytes[7], &lens[7], 1);
    CHECK(memcmp(one.b, roots[7].b, 32) == 0);
    /* the layout: 33 leaves take 6 levels; the owner of each node */
    krn_cuda_tree_plan p;
    CHECK(krn_cuda_tree_plan_make(&p, lens, count) == 0);
    CHECK(p.levels == 6 && krn_cuda_tree_level(&p, 0)[count] == 1 + 1 + 1 + 1 + 2 + 4 + 2 + 17 + 5 + 1 + 33);
    const size_t *row0 = krn_cuda_tree_level(&p, 0);
    size_t wrong = 0;
    for (size_t j = 0; j < row0[count]; j++) {
        size_t t = krn_cuda_tree_owner(row0, count, j);
        wrong += !(row0[t] <= j && j < row0[t + 1]);
    }
    CHECK(wrong == 0);
    krn_cuda_tree_plan_free(&p);
    CHECK(krn_cuda_tree_plan_make(&p, lens, 0) == OVT_EINVAL && p.offs == NULL);
    free(all);
}

int main(void)
{
    CHECK_RUN(test_shapes());
    CHECK_RUN(test_gemm_plan());
    CHECK_RUN(test_gemm_plan_gpt2_small());
    CHECK_RUN(test_gemm_plan_errors());
    CHECK_RUN(test_tree_shape());
    CHECK_RUN(test_tree_roots());
    CHECK_RUN(test_sparse_misuse());
    for (uint64_t seed = 1; seed <= 3; seed++)
        CHECK_RUN(test_sparse_matches_site(seed));
    return check_done();
}
