/* Causal multi-head self-attention from a fused qkv (kernels/ops.h), llm.c's
 * layout. Bands: docs/op-bounds.md. Entries above the diagonal (t2 > t) are
 * 0 in every (T,T) tensor and are exact. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"

/* The shapes and derived strides of one call. */
typedef struct {
    size_t B, T, C, NH, hs;
    size_t n_tt;  /* B*NH*T*T */
    size_t n_row; /* B*NH*T */
    size_t n_out; /* B*T*C */
    size_t n_inp; /* B*T*3C */
    double scale; /* 1/sqrt(hs) */
} attn_dims;

static int attn_check(const char *op, size_t B, size_t T, size_t C, size_t NH, attn_dims *d)
{
    size_t bt, x;
    int rc;
    if ((rc = krn_check_dims(op, B, T, &bt)) || (rc = krn_check_dims(op, C, NH, &x)) ||
        (rc = krn_check_dims(op, bt, 3 * C, &d->n_inp)) ||
        (rc = krn_check_dims(op, bt * NH, T, &d->n_tt)))
        return rc;
    if (C % NH != 0)
        return ovt_fail(OVT_EINVAL, "%s: C = %zu is not a multiple of NH = %zu", op, C, NH);
    d->B = B;
    d->T = T;
    d->C = C;
    d->NH = NH;
    d->hs = C / NH;
    d->n_row = bt * NH;
    d->n_out = bt * C;
    d->scale = 1.0 / sqrt((double)d->hs);
    return 0;
}

/* Index of (b, h, t, t2) in a (B,NH,T,T) tensor, and of row (b, h, t). */
static size_t tt_index(const attn_dims *d, size_t b, size_t h, size_t t, size_t t2)
{
    return ((b * d->NH + h) * d->T + t) * d->T + t2;
}

/* Per (b, t, h): the Euclidean norm of the head's slice of part `which`
 * (0 q, 1 k, 2 v) of qkv, or of a (B,T,C) tensor when which < 0. */
static void head_norms(double *norms, const attn_dims *d, const double *m, int which)
{
    size_t stride = which < 0 ? d->C : 3 * d->C, off = which < 0 ? 0 : (size_t)which * d->C;
    for (size_t bt = 0; bt < d->B * d->T; bt++)
        for (size_t h = 0; h < d->NH; h++) {
            const double *p = m + bt * stride + off + h * d->hs;
            double s = 0;
            for (size_t i = 0; i < d->hs; i++)
                s += p[i] * p[i];
            norms[bt * d->NH + h] = sqrt(s);
        }
}

/* The heads of one call, on the pool: head bh = b * NH + h computes its own
 * products and writes only its own elements of x and mag, so the values are
 * those of a loop over the heads in order. The products inside run on one
 * thread (one (T,T) product per head; the pool is busy with the heads, and
 * a loop on it from inside one of its loops would run on one thread anyway,
 * pool.h). */
typedef struct {
    krn_cpu be1; /* be with one thread and no pool */
    const attn_dims *d;
    const double *a, *an, *b, *bn; /* mix_site: a the (T,T) weights, b the values */
    size_t sa, sb;
    double factor;
    const float *old;
    size_t old_stride;
    bool by_row;
    double *x, *mag, *norms; /* norms: T + hs per head (mix_site) */
    atomic_int rc;
} heads_job;

static void pair_dot_head(void *arg, size_t bh)
{
    heads_job *j = arg;
    const attn_dims *d = j->d;
    size_t T = d->T, bb = bh / d->NH, h = bh % d->NH;
    double *prod = krn_scratch(KRN_SCRATCH_OUT, T * T);
    const double *ah = j->a + bb * T * j->sa + h * d->hs, *bhp = j->b + bb * T * j->sb + h * d->hs;
    if (!prod || krn_chunked_gemm(&j->be1, prod, false, ah, j->sa, true, bhp, j->sb, T, T, d->hs)) {
        atomic_store(&j->rc, OVT_ENOMEM);
        return;
    }
    for (size_t t = 0; t < T; t++)
        for (size_t t2 = 0; t2 < T; t2++) {
            size_t i = tt_index(d, bb, h, t, t2);
            if (t2 > t) {
                j->x[i] = j->mag[i] = 0;
                continue;
            }
            double v = prod[t * T + t2];
            j->x[i] = j->factor == 1.0 ? v : v * j->factor;
            j->mag[i] = j->an[(bb * T + t) * d->NH + h] * j->bn[(bb * T + t2) * d->NH + h];
        }
}

/* Runs fn over the B*NH heads; OVT_ENOMEM if a head's product found no
 * memory. */
static int run_heads(const krn_cpu *be, heads_job *j, void (*fn)(void *arg, size_t bh))
{
    j->be1 = *be;
    j->be1.threads = 1;
    j->be1.pool = NULL;
    atomic_init(&j->rc, 0);
    int rc = krn_parallel(be, j->d->B * j->d->NH, fn, j);
    if (rc == 0 && atomic_load(&j->rc))
        rc = ovt_fail(OVT_ENOMEM, "attention: out of memory for a head's product");
    return rc;
}

/* Site `name` (B,NH,T,T): x = (a_t . b_t2) * factor over the head's
 * channels, for t2 <= t; one chunked product per (b, h) (K = hs). a is a
 * slice of a tensor with row stride sa, b of one with row stride sb; an and
 * bn their head norms. */
static int pair_dot_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                         const attn_dims *d, const double *a, size_t sa, const double *an,
                         const double *b, size_t sb, const double *bn, double factor, int ops,
                         double *x, double *mag)
{
    heads_job j = {.d = d, .a = a, .an = an, .b = b, .bn = bn, .sa = sa, .sb = sb,
                   .factor = factor, .x = x, .mag = mag};
    int rc = run_heads(be, &j, pair_dot_head);
    if (rc)
        return rc;
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->hs, factor, ops);
    band.a = mag;
    return krn_site(ctx, name, out, x, d->n_tt, &band);
}

/* Site `name` (B,NH,T): per row t, sum_{t2<=t} w[t][t2] * y[t][t2] (y NULL:
 * plain sum of w), a reduction over t2. */
static int row_sum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                        const attn_dims *d, const double *w, const double *y, double *x,
                        double *mag)
{
    for (size_t r = 0; r < d->n_row; r++) {
        size_t t = r % d->T, len = t + 1;
        const double *wr = w + r * d->T, *yr = y ? y + r * d->T : NULL;
        x[r] = krn_chunked_dot(be, wr, 1, yr, 1, len);
        double m = 0;
        for (size_t t2 = 0; t2 < len; t2++)
            m += fabs(yr ? wr[t2] * yr[t2] : wr[t2]);
        mag[r] = m;
    }
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->T, 1.0, 0);
    band.a = mag;
    return krn_site(ctx, name, out, x, d->n_row, &band);
}

/* Norms of the rows (by_rows) or columns of a rows x cols block with row
 * stride ld. */
static void block_norms(double *norms, const double *m, size_t rows, size_t cols, size_t ld,
                        bool by_rows)
{
    size_t n = by_rows ? rows : cols;
    for (size_t k = 0; k < n; k++)
        norms[k] = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double v = m[r * ld + c];
            norms[by_rows ? r : c] += v * v;
        }
    for (size_t k = 0; k < n; k++)
        norms[k] = sqrt(norms[k]);
}

/* Site `name` (B,T,C): for each (b, h) the product of the (T,T) block of w
 * (or its transpose, !by_row) with the head's (T,hs) slice of val (row
 * stride sv), times factor, plus old (if not NULL, row stride old_stride):
 *   by_row:   out_t  = sum_t2 w[t][t2] * val[t2]   (w zero above the diagonal)
 *   !by_row:  out_t2 = sum_t  w[t][t2] * val[t]
 * Each a chunked sum over all T positions (masked terms are exact zeros), so
 * the band uses K = T and the Cauchy-Schwarz bound: the norm of the weights'
 * row (column) times the norm of val's column over t. The result goes to out
 * (B*T*C floats, contiguous). */
static void mix_head(void *arg, size_t bh)
{
    heads_job *j = arg;
    const attn_dims *d = j->d;
    size_t T = d->T, hs = d->hs, b = bh / d->NH, h = bh % d->NH;
    double *prod = krn_scratch(KRN_SCRATCH_OUT, T * hs);
    double *wn = j->norms + bh * (T + hs), *vn = wn + T;
    const double *wh = j->a + tt_index(d, b, h, 0, 0), *vh = j->b + b * T * j->sb + h * hs;
    if (!prod || krn_chunked_gemm(&j->be1, prod, !j->by_row, wh, T, false, vh, j->sb, T, hs, T)) {
        atomic_store(&j->rc, OVT_ENOMEM);
        return;
    }
    block_norms(wn, wh, T, T, T, j->by_row);
    block_norms(vn, vh, T, hs, j->sb, false);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < hs; i++) {
            size_t o = (b * T + t) * d->C + h * hs + i;
            double v = prod[t * hs + i];
            if (j->factor != 1.0)
                v = v * j->factor;
            if (j->old)
                v = v + (double)j->old[(b * T + t) * j->old_stride + h * hs + i];
            j->x[o] = v;
            j->mag[o] = wn[t] * vn[i];
        }
}

static int mix_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                    const attn_dims *d, const double *w, bool by_row, const double *val, size_t sv,
                    double factor, const float *old, size_t old_stride, double *x, double *mag)
{
    double *norms = krn_doubles(d->B * d->NH * (d->T + d->hs), name);
    if (!norms)
        return OVT_ENOMEM;
    heads_job j = {.d = d, .a = w, .b = val, .sb = sv, .factor = factor, .old = old,
                   .old_stride = old_stride, .by_row = by_row, .x = x, .mag = mag, .norms = norms};
    int rc = run_heads(be, &j, mix_head);
    free(norms);
    if (rc)
        return rc;
    int ops = (factor != 1.0) + (old != NULL);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->T, factor, ops);
    band.a = mag;
    return krn_site(ctx, name, out, x, d->n_out, &band);
}

/* e = exp(preatt - rowmax) for t2 <= t, 0 above the diagonal (the max and
 * the difference are exact), rows [r0, r1). */
typedef struct {
    const krn_cpu *be;
    const attn_dims *d;
    const float *preatt;
    double *x;
} exp_job;

static void exp_rows(void *arg, size_t r0, size_t r1)
{
    const exp_job *j = arg;
    size_t T = j->d->T;
    for (size_t r = r0; r < r1; r++) {
        size_t t = r % T;
        const float *pr = j->preatt + r * T;
        float mx = pr[0];
        for (size_t t2 = 1; t2 <= t; t2++)
            mx = pr[t2] > mx ? pr[t2] : mx;
        for (size_t t2 = 0; t2 < T; t2++)
            j->x[r * T + t2] = t2 <= t ? krn_cpu_libm(j->be, KRN_FN_EXP, (double)pr[t2] - (double)mx) : 0.0;
    }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("attention fwd"). */
int krn_attention_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *inp,
                          size_t B, size_t T, size_t C, size_t NH)
{
    static const char op[] = "attention_forward";
    attn_dims d;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "preatt", preatt)) ||
        (rc = krn_check_ptr(op, "att", att)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = attn_check(op, B, T, C, NH, &d)))
        return rc;
    KRN_CUDA_DISPATCH(ctx, krn_cuda_attention_forward(ctx, out, preatt, att, inp, B, T, C, NH));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    size_t nx = d.n_tt > d.n_out ? d.n_tt : d.n_out;
    /* the (B,NH,T,T) temporaries are per-thread scratch, kept across calls */
    double *qkv = krn_scratch(KRN_SCRATCH_A, d.n_inp), *x = krn_scratch(KRN_SCRATCH_B, nx);
    double *mag = krn_scratch(KRN_SCRATCH_C, nx), *w = krn_scratch(KRN_SCRATCH_D, d.n_tt);
    double *qn = krn_doubles(d.n_row, op), *kn = krn_doubles(d.n_row, op);
    float *sums = krn_floats(d.n_row, op);
    if (!qkv || !x || !mag || !w || !qn || !kn || !sums)
        goto done;
    krn_widen(qkv, inp, d.n_inp);
    head_norms(qn, &d, qkv, 0);
    head_norms(kn, &d, qkv, 1);
    if ((rc = pair_dot_site(ctx, &be, "attn.qk", preatt, &d, qkv, 3 * C, qn, qkv + C, 3 * C, kn,
                            d.scale, 1, x, mag)))
        goto done;
    exp_job ej = {.be = &be, .d = &d, .preatt = preatt, .x = x};
    if ((rc = krn_parallel_ranges(&be, d.n_row, 64, exp_rows, &ej)))
        goto done;
    krn_band band = krn_band_libm();
    if ((rc = krn_site(ctx, "attn.exp", att, x, d.n_tt, &band)))
        goto done;
    krn_widen(w, att, d.n_tt);
    if ((rc = row_sum_site(ctx, &be, "attn.sum", sums, &d, w, NULL, x, mag)))
        goto done;
    for (size_t r = 0; r < d.n_row; r++)
        for (size_t t2 = 0; t2 < T; t2++)
            x[r * T + t2] = w[r * T + t2] / (double)sums[r]; /* 0 above the diagonal */
    band = krn_band_exact();
    if ((rc = krn_site(ctx, "attn.softmax", att, x, d.n_tt, &band)))
        goto done;
    krn_widen(w, att, d.n_tt);
    rc = mix_site(ctx, &be, "attn.out", out, &d, w, true, qkv + 2 * C, 3 * C, 1.0, NULL, 0, x, mag);
done:
    free(qn);
    free(kn);
    free(sums);
    return rc;
}

/* Adds the (B,T,C) tensor part into the third `which` of dinp (B,T,3C). */
static void scatter_third(float *dinp, const float *part, const attn_dims *d, int which)
{
    for (size_t bt = 0; bt < d->B * d->T; bt++)
        memcpy(dinp + bt * 3 * d->C + (size_t)which * d->C, part + bt * d->C, d->C * sizeof(float));
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("attention bwd"). */
int krn_attention_backward(krn_ctx *ctx, float *dinp, float *dpreatt, float *datt,
                           const float *dout, const float *inp, const float *att, size_t B,
                           size_t T, size_t C, size_t NH)
{
    static const char op[] = "attention_backward";
    attn_dims d;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dpreatt", dpreatt)) ||
        (rc = krn_check_ptr(op, "datt", datt)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "att", att)) ||
        (rc = attn_check(op, B, T, C, NH, &d)))
        return rc;
    KRN_CUDA_DISPATCH(ctx, krn_cuda_attention_backward(ctx, dinp, dpreatt, datt, dout, inp, att, B, T, C, NH));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    size_t nx = d.n_tt > d.n_out ? d.n_tt : d.n_out;
    double *qkv = krn_scratch(KRN_SCRATCH_A, d.n_inp), *g = krn_scratch(KRN_SCRATCH_F, d.n_out);
    double *x = krn_scratch(KRN_SCRATCH_B, nx), *mag = krn_scratch(KRN_SCRATCH_C, nx);
    double *w = krn_scratch(KRN_SCRATCH_D, d.n_tt), *y = krn_scratch(KRN_SCRATCH_E, d.n_tt);
    double *gn = krn_doubles(d.n_row, op), *vn = krn_doubles(d.n_row, op);
    float *r = krn_floats(d.n_row, op), *part = krn_floats(d.n_out, op);
    if (!qkv || !g || !x || !mag || !w || !y || !gn || !vn || !r || !part)
        goto done;
    krn_widen(qkv, inp, d.n_inp);
    krn_widen(g, dout, d.n_out);
    krn_widen(w, att, d.n_tt);
    head_norms(gn, &d, g, -1);
    head_norms(vn, &d, qkv, 2);
    if ((rc = pair_dot_site(ctx, &be, "attn.bwd.datt", datt, &d, g, C, gn, qkv + 2 * C, 3 * C, vn,
                            1.0, 0, x, mag)))
        goto done;
    if ((rc = mix_site(ctx, &be, "attn.bwd.dv", part, &d, w, false, g, C, 1.0, dinp + 2 * C, 3 * C,
                       x, mag)))
        goto done;
    scatter_third(dinp, part, &d, 2);
    krn_widen(y, datt, d.n_tt);
    if ((rc = row_sum_site(ctx, &be, "attn.bwd.r", r, &d, w, y, x, mag)))
        goto done;
    for (size_t row = 0; row < d.n_row; row++)
        for (size_t t2 = 0; t2 < T; t2++) {
            size_t i = row * T + t2;
            x[i] = w[i] * (y[i] - (double)r[row]); /* 0 above the diagonal: att is 0 there */
        }
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, "attn.bwd.dpreatt", dpreatt, x, d.n_tt, &band)))
        goto done;
    krn_widen(y, dpreatt, d.n_tt);
    if ((rc = mix_site(ctx, &be, "attn.bwd.dq", part, &d, y, true, qkv + C, 3 * C, d.scale, dinp,
                       3 * C, x, mag)))
        goto done;
    scatter_third(dinp, part, &d, 0);
    if ((rc = mix_site(ctx, &be, "attn.bwd.dk", part, &d, y, false, qkv, 3 * C, d.scale,
                       dinp + C, 3 * C, x, mag)))
        goto done;
    scatter_third(dinp, part, &d, 1);
done:
    free(gn);
    free(vn);
    free(r);
    free(part);
    return rc;
}
