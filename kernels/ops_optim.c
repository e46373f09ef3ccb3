/* Global gradient norm, clipping factor and AdamW (kernels/ops.h). Bands:
 * docs/op-bounds.md. */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"
#include "kernels/reduce.h"
#include "kernels/vec.h"
#include "kernels/widen.h"

/* One-element site. */
static int scalar_site(krn_ctx *ctx, const char *name, float *out, double x, const krn_band *band)
{
    return krn_site(ctx, name, out, &x, 1, band);
}

/* The global norm's sums, block by block on the pool: the backend's dot of
 * every chunk of KRN_GEMM_CHUNK squares into parts[chunk] (added in chunk
 * order afterwards, on one thread: the contract's order whatever thread
 * computed a chunk) and, for the band, each block's sum of its chunks'
 * parts into mags[block]: the terms are squares, so the parts are their
 * magnitudes' sums too (a band's own sum may take any order: its margin
 * covers the rounding). No FP64 copy of the gradients, and no second chain
 * of 124M dependent additions for the magnitudes. */
enum { NORM_BLOCK = 64 * KRN_GEMM_CHUNK };

typedef struct {
    const krn_cpu *be;
    const float *grads;
    size_t n;
    double *parts, *mags;
} norm_job;

static void norm_block(void *arg, size_t b)
{
    const norm_job *j = arg;
    size_t i0 = b * NORM_BLOCK, len = j->n - i0 < NORM_BLOCK ? j->n - i0 : NORM_BLOCK;
    double g[KRN_GEMM_CHUNK], mag = 0;
    for (size_t k0 = 0; k0 < len; k0 += KRN_GEMM_CHUNK) {
        size_t kc = len - k0 < KRN_GEMM_CHUNK ? len - k0 : KRN_GEMM_CHUNK;
        krn_widen(g, j->grads + i0 + k0, kc);
        double part = krn_cpu_dot(j->be, g, 1, g, 1, kc);
        j->parts[(i0 + k0) / KRN_GEMM_CHUNK] = part;
        mag += part;
    }
    j->mags[b] = mag;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("grad norm"). */
int krn_grad_norm(krn_ctx *ctx, float *norm, const float *grads, size_t n)
{
    static const char op[] = "grad_norm";
    size_t nn;
    int rc;
    if ((rc = krn_check_ptr(op, "norm", norm)) || (rc = krn_check_ptr(op, "grads", grads)) ||
        (rc = krn_check_dims(op, n, 1, &nn)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {grads, n}); /* gradnorm.sqrt reads sumsq (below) */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_grad_norm(ctx, norm, grads, n));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    size_t nchunks = (n + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK, nblocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *parts = krn_doubles(nchunks + nblocks, op);
    if (!parts)
        return OVT_ENOMEM;
    norm_job j = {.be = &be, .grads = grads, .n = n, .parts = parts, .mags = parts + nchunks};
    if ((rc = krn_parallel(&be, nblocks, norm_block, &j))) {
        free(parts);
        return rc;
    }
    double s = parts[0], mag = j.mags[0];
    for (size_t c = 1; c < nchunks; c++)
        s += parts[c];
    for (size_t b = 1; b < nblocks; b++)
        mag += j.mags[b];
    free(parts);
    krn_band band = krn_band_reduction(KRN_BAND_CONST, n, 1.0, 0);
    band.scale *= mag;
    float sumsq;
    if ((rc = scalar_site(ctx, "gradnorm.sumsq", &sumsq, s, &band)))
        return rc;
    band = krn_band_exact();
    KRN_TRACE_READS(ctx, 0, {&sumsq, 1});
    return scalar_site(ctx, "gradnorm.sqrt", norm, sqrt((double)sumsq), &band);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("clipping"). */
int krn_clip_factor(krn_ctx *ctx, float *factor, float norm, float max_norm)
{
    static const char op[] = "clip_factor";
    int rc;
    if ((rc = krn_check_ptr(op, "factor", factor)))
        return rc;
    if (!(max_norm > 0) || !isfinite(max_norm))
        return ovt_fail(OVT_EINVAL, "%s: max_norm must be positive and finite", op);
    if (!(norm >= 0) || !isfinite(norm))
        return ovt_fail(OVT_ENUMERIC, "%s: the gradient norm is not a finite non-negative value", op);
    KRN_CUDA_DISPATCH(ctx, krn_cuda_clip_factor(ctx, factor, norm, max_norm));
    double x = norm > max_norm ? (double)max_norm / (double)norm : 1.0;
    krn_band band = krn_band_exact();
    return scalar_site(ctx, "clip.factor", factor, x, &band);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("AdamW"). */
int krn_adamw_corrections(krn_ctx *ctx, float *bc1, float *bc2, float beta1, float beta2,
                          uint64_t t)
{
    static const char op[] = "adamw_corrections";
    int rc;
    if ((rc = krn_check_ptr(op, "bc1", bc1)) || (rc = krn_check_ptr(op, "bc2", bc2)))
        return rc;
    if (t == 0 || t > (1ull << 53))
        return ovt_fail(OVT_EINVAL, "%s: step t = %llu must be in 1..2^53", op, (unsigned long long)t);
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
        return ovt_fail(OVT_EINVAL, "%s: betas must lie in [0, 1)", op);
    KRN_CUDA_DISPATCH(ctx, krn_cuda_adamw_corrections(ctx, bc1, bc2, beta1, beta2, t));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    float p1, p2;
    krn_band band = krn_band_libm();
    if ((rc = scalar_site(ctx, "adamw.pow1", &p1, krn_cpu_pow(&be, beta1, (double)t), &band)) ||
        (rc = scalar_site(ctx, "adamw.pow2", &p2, krn_cpu_pow(&be, beta2, (double)t), &band)))
        return rc;
    band = krn_band_exact();
    KRN_TRACE_READS(ctx, 0, {&p1, 1});
    KRN_TRACE_READS(ctx, 1, {&p2, 1});
    if ((rc = scalar_site(ctx, "adamw.bc1", bc1, 1.0 - (double)p1, &band)) ||
        (rc = scalar_site(ctx, "adamw.bc2", bc2, 1.0 - (double)p2, &band)))
        return rc;
    return 0;
}

/* The FP64 values of AdamW's three exact sites, computed block by block
 * (krn_site_exact_fills: m, v and then the parameters of each block in one
 * pass) so 124M parameters need no FP64 copy and are read once. */
typedef struct {
    float *params, *m, *v;
    const float *grads;
    double b1, b2, s;
    float bc1, bc2, lr, eps, wd;
} adamw_job;

/* The fills copy the job's fields into locals so the loops vectorise (the
 * output x could otherwise alias them). */
KRN_VEC_CLONES static void adamw_m(void *arg, size_t i0, size_t len, double *restrict x)
{
    const adamw_job *j = arg;
    const float *restrict grads = j->grads + i0, *restrict m = j->m + i0;
    const double b1 = j->b1, s = j->s;
    for (size_t k = 0; k < len; k++) {
        double g = (double)grads[k] * s;
        x[k] = b1 * (double)m[k] + (1.0 - b1) * g;
    }
}

KRN_VEC_CLONES static void adamw_v(void *arg, size_t i0, size_t len, double *restrict x)
{
    const adamw_job *j = arg;
    const float *restrict grads = j->grads + i0, *restrict v = j->v + i0;
    const double b2 = j->b2, s = j->s;
    for (size_t k = 0; k < len; k++) {
        double g = (double)grads[k] * s;
        x[k] = b2 * (double)v[k] + (1.0 - b2) * (g * g);
    }
}

KRN_VEC_CLONES static void adamw_param(void *arg, size_t i0, size_t len, double *restrict x)
{
    const adamw_job *j = arg;
    const float *restrict params = j->params + i0, *restrict m = j->m + i0, *restrict v = j->v + i0;
    const double bc1 = j->bc1, bc2 = j->bc2, lr = j->lr, eps = j->eps, wd = j->wd;
    for (size_t k = 0; k < len; k++) {
        double p = params[k];
        double mhat = (double)m[k] / bc1, vhat = (double)v[k] / bc2;
        x[k] = p - lr * (mhat / (sqrt(vhat) + eps) + wd * p);
    }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("AdamW"). */
int krn_adamw_update(krn_ctx *ctx, float *params, float *m, float *v, const float *grads,
                     float bc1, float bc2, float lr, float beta1, float beta2, float eps,
                     float weight_decay, float grad_scale, size_t n)
{
    static const char op[] = "adamw_update";
    size_t nn;
    int rc;
    if ((rc = krn_check_ptr(op, "params", params)) || (rc = krn_check_ptr(op, "m", m)) ||
        (rc = krn_check_ptr(op, "v", v)) || (rc = krn_check_ptr(op, "grads", grads)) ||
        (rc = krn_check_dims(op, n, 1, &nn)))
        return rc;
    if (!(bc1 > 0) || !(bc2 > 0))
        return ovt_fail(OVT_EINVAL, "%s: bias corrections must be positive (run krn_adamw_corrections)", op);
    /* the scalars come by value: the caller declares the sites they came from */
    KRN_TRACE_READS(ctx, 0, {grads, n}, {m, n});
    KRN_TRACE_READS(ctx, 1, {grads, n}, {v, n});
    KRN_TRACE_READS(ctx, 2, {params, n}, {m, n}, {v, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_adamw_update(ctx, params, m, v, grads, bc1, bc2, lr, beta1, beta2, eps, weight_decay, grad_scale, n));
    adamw_job j = {.params = params, .m = m, .v = v, .grads = grads, .b1 = beta1, .b2 = beta2,
                   .s = grad_scale, .bc1 = bc1, .bc2 = bc2, .lr = lr, .eps = eps,
                   .wd = weight_decay};
    const krn_exact_fill sites[3] = {{"adamw.m", m, adamw_m}, {"adamw.v", v, adamw_v},
                                     {"adamw.param", params, adamw_param}};
    return krn_site_exact_fills(ctx, sites, 3, n, &j);
}
