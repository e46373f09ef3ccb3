/* The host side of the cuda backend, without a device:
 *  - the sparse site (kernels/site_sparse.h), fed exactly what the device
 *    hands back (the fast path of every element, the flagged elements
 *    compacted in index order, the logged elements gathered), gives the same
 *    outputs, the same rounding log and the same fraud verdicts as krn_site
 *    in RECORD, REPLAY and NEAREST;
 *  - the launch shapes: block counts and grid-stride coverage, the chunk
 *    split of the GEMM. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/cuda/shape.h"
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

int main(void)
{
    CHECK_RUN(test_shapes());
    CHECK_RUN(test_sparse_misuse());
    for (uint64_t seed = 1; seed <= 3; seed++)
        CHECK_RUN(test_sparse_matches_site(seed));
    return check_done();
}
