/* Causal multi-head self-attention forward and backward on the device
 * (kernels/ops.h, llm.c's layout; bands in docs/op-bounds.md). One thread
 * per output element, each reduction in the contract's chunked order;
 * "attn.exp" uses CUDA's exp (1 ulp documented). */
#include "kernels/cuda/device.cuh"

#include <string.h>

typedef struct {
    size_t B, T, C, NH, hs;
    size_t n_tt, n_row, n_out, n_inp;
    double scale;
} attn_dims;

static attn_dims dims(size_t B, size_t T, size_t C, size_t NH)
{
    attn_dims d;
    d.B = B;
    d.T = T;
    d.C = C;
    d.NH = NH;
    d.hs = C / NH;
    d.n_row = B * T * NH;
    d.n_tt = d.n_row * T;
    d.n_out = B * T * C;
    d.n_inp = 3 * d.n_out;
    d.scale = 1.0 / sqrt((double)d.hs);
    return d;
}

static __global__ void widen_kernel(double *dst, const float *src, size_t n)
{
    KRN_GRID_LOOP(i, n)
    dst[i] = (double)src[i];
}

/* Per (b, t, h): the norm of the head's slice of part `which` (0 q, 1 k,
 * 2 v) of qkv, or of a (B,T,C) tensor when which < 0. */
static __global__ void head_norms_kernel(double *norms, attn_dims d, const double *m, int which)
{
    size_t stride = which < 0 ? d.C : 3 * d.C, off = which < 0 ? 0 : (size_t)which * d.C;
    KRN_GRID_LOOP(r, d.B * d.T * d.NH) {
        size_t bt = r / d.NH, h = r % d.NH;
        const double *p = m + bt * stride + off + h * d.hs;
        double s = 0;
        for (size_t i = 0; i < d.hs; i++)
            s += p[i] * p[i];
        norms[r] = sqrt(s);
    }
}

/* x[b,h,t,t2] = (a_t . b_t2) * factor for t2 <= t, else 0. */
static __global__ void pair_dot_kernel(double *x, double *mag, attn_dims d, const double *a, size_t sa,
                                       const double *an, const double *b, size_t sb, const double *bn,
                                       double factor)
{
    KRN_GRID_LOOP(i, d.n_tt) {
        size_t t2 = i % d.T, t = i / d.T % d.T, h = i / (d.T * d.T) % d.NH, bb = i / (d.T * d.T * d.NH);
        if (t2 > t) {
            x[i] = mag[i] = 0;
            continue;
        }
        const double *ar = a + (bb * d.T + t) * sa + h * d.hs, *br = b + (bb * d.T + t2) * sb + h * d.hs;
        double s = krn_dchunked_dot(ar, 1, br, 1, d.hs);
        x[i] = factor == 1.0 ? s : __dmul_rn(s, factor);
        mag[i] = an[(bb * d.T + t) * d.NH + h] * bn[(bb * d.T + t2) * d.NH + h];
    }
}

static int pair_dot_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const attn_dims *d,
                         const double *a, size_t sa, const double *an, const double *b, size_t sb,
                         const double *bn, double factor, int ops, double *x, double *mag)
{
    pair_dot_kernel KRN_LAUNCH(d->n_tt)(x, mag, *d, a, sa, an, b, sb, bn, factor);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->hs, factor, ops);
    band.a = mag;
    return krn_cuda_site(ctx, name, out, host_out, x, d->n_tt, &band);
}

/* Per row: sum_{t2<=t} w[t][t2] * y[t][t2] (y NULL: plain sum). */
static __global__ void row_sum_kernel(double *x, double *mag, attn_dims d, const double *w, const double *y)
{
    KRN_GRID_LOOP(r, d.n_row) {
        size_t len = r % d.T + 1;
        const double *wr = w + r * d.T, *yr = y ? y + r * d.T : NULL;
        x[r] = krn_dchunked_dot(wr, 1, yr, 1, len);
        mag[r] = krn_dmagnitude(wr, 1, yr, 1, len);
    }
}

static int row_sum_site(krn_ctx *ctx, const char *name, float *out, const attn_dims *d, const double *w,
                        const double *y, double *x, double *mag)
{
    row_sum_kernel KRN_LAUNCH(d->n_row)(x, mag, *d, w, y);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->T, 1.0, 0);
    band.a = mag;
    return krn_cuda_site(ctx, name, out, NULL, x, d->n_row, &band);
}

/* The weighted sums of rows of val (row stride sv) with weights w, times
 * factor, plus old (row stride old_stride) when not NULL; see
 * kernels/ops_attn.c mix_site. */
static __global__ void mix_kernel(double *x, double *mag, attn_dims d, const double *w, int by_row,
                                  const double *val, size_t sv, double factor, const float *old,
                                  size_t old_stride)
{
    size_t T = d.T;
    KRN_GRID_LOOP(o, d.n_out) {
        size_t i = o % d.hs, h = o / d.hs % d.NH, t = o / d.C % T, b = o / (d.C * T);
        const double *wbase = w + ((b * d.NH + h) * T) * T;
        const double *wv, *vv;
        ptrdiff_t incw;
        size_t len;
        if (by_row) {
            wv = wbase + t * T;
            incw = 1;
            vv = val + (b * T) * sv + h * d.hs + i;
            len = t + 1;
        } else {
            wv = wbase + t * T + t;
            incw = (ptrdiff_t)T;
            vv = val + (b * T + t) * sv + h * d.hs + i;
            len = T - t;
        }
        double s = krn_dchunked_dot(wv, incw, vv, (ptrdiff_t)sv, len);
        mag[o] = krn_dmagnitude(wv, incw, vv, (ptrdiff_t)sv, len);
        if (factor != 1.0)
            s = __dmul_rn(s, factor);
        if (old)
            s = __dadd_rn(s, (double)old[(b * T + t) * old_stride + h * d.hs + i]);
        x[o] = s;
    }
}

static int mix_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const attn_dims *d,
                    const double *w, bool by_row, const double *val, size_t sv, double factor,
                    const float *old, size_t old_stride, double *x, double *mag)
{
    mix_kernel KRN_LAUNCH(d->n_out)(x, mag, *d, w, by_row, val, sv, factor, old, old_stride);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    int ops = (factor != 1.0) + (old != NULL);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->T, factor, ops);
    band.a = mag;
    return krn_cuda_site(ctx, name, out, host_out, x, d->n_out, &band);
}

/* The maximum of each row's causal part (exact). */
static __global__ void row_max_kernel(float *mx, const float *preatt, attn_dims d)
{
    KRN_GRID_LOOP(r, d.n_row) {
        size_t t = r % d.T;
        const float *pr = preatt + r * d.T;
        float m = pr[0];
        for (size_t k = 1; k <= t; k++)
            m = pr[k] > m ? pr[k] : m;
        mx[r] = m;
    }
}

static __global__ void exp_kernel(double *x, const float *preatt, const float *mx, attn_dims d)
{
    KRN_GRID_LOOP(i, d.n_tt) {
        size_t r = i / d.T, t2 = i % d.T, t = r % d.T;
        x[i] = t2 <= t ? exp(__dsub_rn((double)preatt[i], (double)mx[r])) : 0.0;
    }
}

static __global__ void softmax_kernel(double *x, const double *w, const float *sums, attn_dims d)
{
    KRN_GRID_LOOP(i, d.n_tt)
    x[i] = __ddiv_rn(w[i], (double)sums[i / d.T]);
}

extern "C" int krn_cuda_attention_forward(krn_ctx *ctx, float *out, float *preatt, float *att,
                                          const float *inp, size_t B, size_t T, size_t C, size_t NH)
{
    krn_dev *d = krn_dev_of(ctx);
    attn_dims ad = dims(B, T, C, NH);
    size_t nx = ad.n_tt > ad.n_out ? ad.n_tt : ad.n_out;
    double *qkv = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, ad.n_inp);
    double *x = dev_array<double>(d, DEV_X, nx), *mag = dev_array<double>(d, DEV_MAG, nx);
    double *w = dev_array<double>(d, DEV_C, ad.n_tt);
    double *qn = dev_array<double>(d, DEV_N1, ad.n_row), *kn = dev_array<double>(d, DEV_N2, ad.n_row);
    float *dpre = dev_array<float>(d, DEV_OUT, ad.n_tt), *datt = dev_array<float>(d, DEV_OUT2, ad.n_tt);
    float *sums = dev_array<float>(d, DEV_D, ad.n_row), *dout = dev_array<float>(d, DEV_OUT3, ad.n_out);
    if (!qkv || !x || !mag || !w || !qn || !kn || !dpre || !datt || !sums || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    head_norms_kernel KRN_LAUNCH(ad.n_row)(qn, ad, qkv, 0);
    head_norms_kernel KRN_LAUNCH(ad.n_row)(kn, ad, qkv, 1);
    int rc = krn_dev_launched("attention head norms");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = pair_dot_site(ctx, "attn.qk", dpre, preatt, &ad, qkv, 3 * C, qn, qkv + C, 3 * C, kn,
                            ad.scale, 1, x, mag)))
        return rc;
    row_max_kernel KRN_LAUNCH(ad.n_row)(sums, dpre, ad); /* sums holds the maxima until attn.sum */
    exp_kernel KRN_LAUNCH(ad.n_tt)(x, dpre, sums, ad);
    if ((rc = krn_dev_launched("attn.exp")))
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_libm();
    if ((rc = krn_cuda_site(ctx, "attn.exp", datt, NULL, x, ad.n_tt, &band)))
        return rc;
    widen_kernel KRN_LAUNCH(ad.n_tt)(w, datt, ad.n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = row_sum_site(ctx, "attn.sum", sums, &ad, w, NULL, x, mag)))
        return rc;
    softmax_kernel KRN_LAUNCH(ad.n_tt)(x, w, sums, ad);
    if ((rc = krn_dev_launched("attn.softmax")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "attn.softmax", datt, att, x, ad.n_tt, NULL)))
        return rc;
    widen_kernel KRN_LAUNCH(ad.n_tt)(w, datt, ad.n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    return mix_site(ctx, "attn.out", dout, out, &ad, w, true, qkv + 2 * C, 3 * C, 1.0, NULL, 0, x, mag);
}

/* Copies part (B,T,C) into the third `which` of dinp (B,T,3C). */
static __global__ void third_kernel(float *dinp, const float *part, attn_dims d, int which)
{
    KRN_GRID_LOOP(o, d.n_out)
    dinp[o / d.C * 3 * d.C + (size_t)which * d.C + o % d.C] = part[o];
}

static __global__ void dpreatt_kernel(double *x, const double *w, const double *y, const float *r,
                                      attn_dims d)
{
    KRN_GRID_LOOP(i, d.n_tt)
    x[i] = __dmul_rn(w[i], __dsub_rn(y[i], (double)r[i / d.T]));
}

extern "C" int krn_cuda_attention_backward(krn_ctx *ctx, float *dinp, float *dpreatt, float *datt,
                                           const float *dout, const float *inp, const float *att,
                                           size_t B, size_t T, size_t C, size_t NH)
{
    krn_dev *d = krn_dev_of(ctx);
    attn_dims ad = dims(B, T, C, NH);
    size_t nx = ad.n_tt > ad.n_out ? ad.n_tt : ad.n_out;
    double *qkv = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, ad.n_inp);
    double *g = krn_dev_upload_wide(d, DEV_C, DEV_D, dout, ad.n_out);
    double *w = krn_dev_upload_wide(d, DEV_E, DEV_F, att, ad.n_tt);
    float *ddinp = krn_dev_upload(d, DEV_G, dinp, ad.n_inp);
    double *x = dev_array<double>(d, DEV_X, nx), *mag = dev_array<double>(d, DEV_MAG, nx);
    double *y = dev_array<double>(d, DEV_H, ad.n_tt);
    double *gn = dev_array<double>(d, DEV_N1, ad.n_row), *vn = dev_array<double>(d, DEV_N2, ad.n_row);
    float *ddatt = dev_array<float>(d, DEV_OUT, ad.n_tt), *ddpre = dev_array<float>(d, DEV_OUT2, ad.n_tt);
    float *r = dev_array<float>(d, DEV_I, ad.n_row), *part = dev_array<float>(d, DEV_OUT3, ad.n_out);
    if (!qkv || !g || !w || !ddinp || !x || !mag || !y || !gn || !vn || !ddatt || !ddpre || !r || !part)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    head_norms_kernel KRN_LAUNCH(ad.n_row)(gn, ad, g, -1);
    head_norms_kernel KRN_LAUNCH(ad.n_row)(vn, ad, qkv, 2);
    int rc = krn_dev_launched("attention head norms");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = pair_dot_site(ctx, "attn.bwd.datt", ddatt, datt, &ad, g, C, gn, qkv + 2 * C, 3 * C, vn, 1.0,
                            0, x, mag)))
        return rc;
    if ((rc = mix_site(ctx, "attn.bwd.dv", part, NULL, &ad, w, false, g, C, 1.0, ddinp + 2 * C, 3 * C, x,
                       mag)))
        return rc;
    third_kernel KRN_LAUNCH(ad.n_out)(ddinp, part, ad, 2);
    widen_kernel KRN_LAUNCH(ad.n_tt)(y, ddatt, ad.n_tt);
    if ((rc = krn_dev_launched("attn.bwd.dv scatter")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = row_sum_site(ctx, "attn.bwd.r", r, &ad, w, y, x, mag)))
        return rc;
    dpreatt_kernel KRN_LAUNCH(ad.n_tt)(x, w, y, r, ad);
    if ((rc = krn_dev_launched("attn.bwd.dpreatt")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "attn.bwd.dpreatt", ddpre, dpreatt, x, ad.n_tt, NULL)))
        return rc;
    widen_kernel KRN_LAUNCH(ad.n_tt)(y, ddpre, ad.n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = mix_site(ctx, "attn.bwd.dq", part, NULL, &ad, y, true, qkv + C, 3 * C, ad.scale, ddinp, 3 * C,
                       x, mag)))
        return rc;
    third_kernel KRN_LAUNCH(ad.n_out)(ddinp, part, ad, 0);
    if ((rc = krn_dev_launched("attn.bwd.dq scatter")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = mix_site(ctx, "attn.bwd.dk", part, NULL, &ad, y, false, qkv, 3 * C, ad.scale, ddinp + C,
                       3 * C, x, mag)))
        return rc;
    third_kernel KRN_LAUNCH(ad.n_out)(ddinp, part, ad, 1);
    if ((rc = krn_dev_launched("attn.bwd.dk scatter")) ||
        (rc = krn_dev_get(dinp, ddinp, ad.n_inp * sizeof *dinp)))
        return krn_cuda_fail(ctx, rc);
    return 0;
}
