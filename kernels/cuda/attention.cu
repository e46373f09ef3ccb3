/* Causal self-attention forward and backward on the device (kernels/ops.h;
 * the CPU op is kernels/ops_attn.c, bands in docs/op-bounds.md): GPT-2's
 * multi-head attention from a fused qkv (llm.c's layout) and Llama's
 * grouped-query attention from separate q, k, v, one implementation with
 * NKV key/value heads each shared by G = NH/NKV query heads (GPT-2: NKV = NH).
 * One thread per output element, each reduction in the contract's chunked
 * order over the same terms as the CPU op (sums over positions run over all
 * T, or G*T, terms from the first, the masked ones exact zeros); "attn.exp"
 * uses CUDA's exp (1 ulp documented). */
#include "kernels/cuda/device.cuh"

#include <string.h>

typedef struct {
    size_t B, T, C, NH, NKV, G, hs;
    size_t KVW;   /* NKV*hs: the width of k and v */
    size_t n_tt;  /* B*NH*T*T */
    size_t n_row; /* B*NH*T */
    size_t n_out; /* B*T*C */
    size_t n_kv;  /* B*T*KVW */
    size_t n_inp; /* B*T*3C (the fused qkv) */
    double scale; /* 1/sqrt(hs) */
} attn_dims;

/* The shapes, checked by the CPU op before the hand-over. */
static attn_dims dims(size_t B, size_t T, size_t NH, size_t NKV, size_t hs)
{
    attn_dims d;
    d.B = B;
    d.T = T;
    d.NH = NH;
    d.NKV = NKV;
    d.G = NH / NKV;
    d.hs = hs;
    d.C = NH * hs;
    d.KVW = NKV * hs;
    d.n_row = B * T * NH;
    d.n_tt = d.n_row * T;
    d.n_out = B * T * d.C;
    d.n_kv = B * T * d.KVW;
    d.n_inp = 3 * d.n_out;
    d.scale = 1.0 / sqrt((double)hs);
    return d;
}

static __global__ void widen_kernel(double *dst, const float *src, size_t n)
{
    KRN_GRID_LOOP(i, n)
    dst[i] = (double)src[i];
}

/* Per (b, t, h): the norm of head h's slice of a tensor of (B,T) rows with
 * row stride `stride` and nheads heads. */
static __global__ void head_norms_kernel(double *norms, attn_dims d, const double *m, size_t stride,
                                         size_t nheads)
{
    KRN_GRID_LOOP(r, d.B * d.T * nheads) {
        size_t bt = r / nheads, h = r % nheads;
        const double *p = m + bt * stride + h * d.hs;
        double s = 0;
        for (size_t i = 0; i < d.hs; i++)
            s += p[i] * p[i];
        norms[r] = sqrt(s);
    }
}

static int head_norms(double *norms, const attn_dims *d, const double *m, size_t stride, size_t nheads)
{
    head_norms_kernel KRN_LAUNCH(d->B * d->T * nheads)(norms, *d, m, stride, nheads);
    return krn_dev_launched("attention head norms");
}

/* x[b,h,t,t2] = (a_t . b_t2) * factor for t2 <= t, else 0: a with NH heads
 * (row stride sa), b with NKV heads (row stride sb), query head h reading
 * b's head h / G; an, bn their head norms. */
static __global__ void pair_dot_kernel(double *x, double *mag, attn_dims d, const double *a, size_t sa,
                                       const double *an, const double *b, size_t sb, const double *bn,
                                       double factor)
{
    KRN_GRID_LOOP(i, d.n_tt) {
        size_t t2 = i % d.T, t = i / d.T % d.T, h = i / (d.T * d.T) % d.NH, bb = i / (d.T * d.T * d.NH);
        size_t hb = h / d.G;
        if (t2 > t) {
            x[i] = mag[i] = 0;
            continue;
        }
        const double *ar = a + (bb * d.T + t) * sa + h * d.hs, *br = b + (bb * d.T + t2) * sb + hb * d.hs;
        double s = krn_dchunked_dot(ar, 1, br, 1, d.hs);
        x[i] = factor == 1.0 ? s : __dmul_rn(s, factor);
        mag[i] = an[(bb * d.T + t) * d.NH + h] * bn[(bb * d.T + t2) * d.NKV + hb];
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

/* The weighted sums of kernels/ops_attn.c mix_site, times factor, plus old
 * (row stride old_stride) when not NULL:
 *   by_row:   out_t  = sum_t2 w[t][t2] * val[t2]  for each query head h,
 *             val's head h / G (B,T,NH*hs out);
 *   !by_row:  out_t2 = sum_g sum_t w_h[t][t2] * val_h[t], h = o*G + g, for
 *             each key/value head o, val with NH heads (B,T,NKV*hs out);
 * each a chunked sum of K = T (G*T) terms, the G heads' terms stacked in
 * (g, t) order, all of them (the masked ones are zeros). The band's
 * magnitude is the CPU's Cauchy-Schwarz bound: the norm of the weights'
 * row (stacked column) times the norm of val's (stacked) column. */
static __global__ void mix_kernel(double *x, double *mag, attn_dims d, const double *w, int by_row,
                                  const double *val, size_t sv, double factor, const float *old,
                                  size_t old_stride)
{
    size_t T = d.T, hs = d.hs, nout = by_row ? d.NH : d.NKV, G = by_row ? 1 : d.G, K = G * T;
    size_t outw = nout * hs;
    KRN_GRID_LOOP(o, d.B * T * outw) {
        size_t i = o % hs, oh = o / hs % nout, t = o / outw % T, b = o / (outw * T);
        const double *wk, *vb; /* term k = g*T + tt: wk[k*incw] and vb[tt*sv + g*hs] */
        size_t incw;
        if (by_row) {
            wk = w + ((b * d.NH + oh) * T + t) * T;
            incw = 1;
            vb = val + b * T * sv + (oh / d.G) * hs + i;
        } else {
            wk = w + (b * d.NH + oh * G) * T * T + t;
            incw = T;
            vb = val + b * T * sv + oh * G * hs + i;
        }
        double s = 0, wsq = 0, vsq = 0;
        for (size_t k0 = 0; k0 < K; k0 += KRN_GEMM_CHUNK) {
            size_t kc = K - k0 < KRN_GEMM_CHUNK ? K - k0 : KRN_GEMM_CHUNK;
            double part = 0;
            for (size_t k = k0; k < k0 + kc; k++) {
                double wv = wk[k * incw], vv = vb[k % T * sv + k / T * hs];
                part = __dadd_rn(part, __dmul_rn(wv, vv));
                wsq += wv * wv;
                vsq += vv * vv;
            }
            s = k0 == 0 ? part : __dadd_rn(s, part);
        }
        mag[o] = sqrt(wsq) * sqrt(vsq);
        if (factor != 1.0)
            s = __dmul_rn(s, factor);
        if (old)
            s = __dadd_rn(s, (double)old[(b * T + t) * old_stride + oh * hs + i]);
        x[o] = s;
    }
}

static int mix_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const attn_dims *d,
                    const double *w, bool by_row, const double *val, size_t sv, double factor,
                    const float *old, size_t old_stride, double *x, double *mag)
{
    size_t n = by_row ? d->n_out : d->n_kv, K = by_row ? d->T : d->G * d->T;
    mix_kernel KRN_LAUNCH(n)(x, mag, *d, w, by_row, val, sv, factor, old, old_stride);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    int ops = (factor != 1.0) + (old != NULL);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, K, factor, ops);
    band.a = mag;
    return krn_cuda_site(ctx, name, out, host_out, x, n, &band);
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

/* "attn.exp", "attn.sum", "attn.softmax" from dpre (device preatt) into
 * datt and the host's att, and att widened into w. */
static int softmax_sites(krn_ctx *ctx, const attn_dims *ad, float *att, const float *dpre, float *datt,
                         float *sums, double *w, double *x, double *mag)
{
    row_max_kernel KRN_LAUNCH(ad->n_row)(sums, dpre, *ad); /* sums holds the maxima until attn.sum */
    exp_kernel KRN_LAUNCH(ad->n_tt)(x, dpre, sums, *ad);
    int rc = krn_dev_launched("attn.exp");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_libm();
    if ((rc = krn_cuda_site(ctx, "attn.exp", datt, NULL, x, ad->n_tt, &band)))
        return rc;
    widen_kernel KRN_LAUNCH(ad->n_tt)(w, datt, ad->n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = row_sum_site(ctx, "attn.sum", sums, ad, w, NULL, x, mag)))
        return rc;
    softmax_kernel KRN_LAUNCH(ad->n_tt)(x, w, sums, *ad);
    if ((rc = krn_dev_launched("attn.softmax")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "attn.softmax", datt, att, x, ad->n_tt, NULL)))
        return rc;
    widen_kernel KRN_LAUNCH(ad->n_tt)(w, datt, ad->n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    return 0;
}

/* The device scratch of one call: x and mag (n_tt or n_out elements,
 * whichever is more), a widened (B,NH,T,T) tensor, the head norms an, bn of
 * the first pair product's operands, two (B,NH,T,T) float sites and one
 * float per row (b, h, t). */
typedef struct {
    double *x, *mag, *wide, *an, *bn;
    float *tt1, *tt2, *rows;
} attn_scratch;

/* s's buffers, and the head norms of a (NH heads, row stride sa) and b (NKV
 * heads, row stride sb) in s->an and s->bn. */
static int scratch_get(krn_ctx *ctx, const attn_dims *ad, const double *a, size_t sa, const double *b, size_t sb,
                       attn_scratch *s)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t nx = ad->n_tt > ad->n_out ? ad->n_tt : ad->n_out;
    s->x = dev_array<double>(d, DEV_X, nx);
    s->mag = dev_array<double>(d, DEV_MAG, nx);
    s->wide = dev_array<double>(d, DEV_H, ad->n_tt);
    s->an = dev_array<double>(d, DEV_N1, ad->n_row);
    s->bn = dev_array<double>(d, DEV_N2, ad->B * ad->T * ad->NKV);
    s->tt1 = dev_array<float>(d, DEV_OUT, ad->n_tt);
    s->tt2 = dev_array<float>(d, DEV_OUT2, ad->n_tt);
    s->rows = dev_array<float>(d, DEV_I, ad->n_row);
    if (!s->x || !s->mag || !s->wide || !s->an || !s->bn || !s->tt1 || !s->tt2 || !s->rows)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc;
    if ((rc = head_norms(s->an, ad, a, sa, ad->NH)) || (rc = head_norms(s->bn, ad, b, sb, ad->NKV)))
        return krn_cuda_fail(ctx, rc);
    return 0;
}

/* The whole forward from widened q, k, v on the device (row strides sq,
 * sk, sv; k and v with NKV heads), as kernels/ops_attn.c forward_sites. */
static int forward_sites(krn_ctx *ctx, const attn_dims *ad, float *out, float *preatt, float *att,
                         const double *q, size_t sq, const double *k, size_t sk, const double *v, size_t sv)
{
    attn_scratch s;
    float *dout = dev_array<float>(krn_dev_of(ctx), DEV_OUT3, ad->n_out);
    int rc = scratch_get(ctx, ad, q, sq, k, sk, &s);
    if (rc)
        return rc;
    if (!dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    if ((rc = pair_dot_site(ctx, "attn.qk", s.tt1, preatt, ad, q, sq, s.an, k, sk, s.bn, ad->scale, 1, s.x,
                            s.mag)) ||
        (rc = softmax_sites(ctx, ad, att, s.tt1, s.tt2, s.rows, s.wide, s.x, s.mag)))
        return rc;
    return mix_site(ctx, "attn.out", dout, out, ad, s.wide, true, v, sv, 1.0, NULL, 0, s.x, s.mag);
}

extern "C" int krn_cuda_attention_forward(krn_ctx *ctx, float *out, float *preatt, float *att,
                                          const float *inp, size_t B, size_t T, size_t C, size_t NH)
{
    attn_dims ad = dims(B, T, NH, NH, C / NH);
    double *qkv = krn_dev_upload_wide(krn_dev_of(ctx), DEV_A, DEV_B, inp, ad.n_inp);
    if (!qkv)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    return forward_sites(ctx, &ad, out, preatt, att, qkv, 3 * C, qkv + C, 3 * C, qkv + 2 * C, 3 * C);
}

extern "C" int krn_cuda_gqa_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *q,
                                    const float *k, const float *v, size_t B, size_t T, size_t NH, size_t NKV,
                                    size_t hs)
{
    krn_dev *d = krn_dev_of(ctx);
    attn_dims ad = dims(B, T, NH, NKV, hs);
    /* DEV_A stages each upload; each is widened before the next */
    double *qd = krn_dev_upload_wide(d, DEV_A, DEV_B, q, ad.n_out);
    double *kd = qd ? krn_dev_upload_wide(d, DEV_A, DEV_C, k, ad.n_kv) : NULL;
    double *vd = kd ? krn_dev_upload_wide(d, DEV_A, DEV_D, v, ad.n_kv) : NULL;
    if (!vd)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    return forward_sites(ctx, &ad, out, preatt, att, qd, ad.C, kd, ad.KVW, vd, ad.KVW);
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

/* The backward's device operands: widened q, k, v (row strides sq, sk,
 * sv), dout (g, row stride C) and att (w). */
typedef struct {
    const double *q, *k, *v, *g, *w;
    size_t sq, sk, sv;
} bwd_in;

/* Where each gradient site writes (device: dq n_out, dk and dv n_kv floats
 * contiguous) and its copy on the host (NULL: none), the old gradients
 * (device) with their row strides, and GPT-2's fused dinp (device, B,T,3C;
 * NULL for GQA), into which each part is scattered after its site. */
typedef struct {
    float *dq, *dk, *dv;
    float *host_dq, *host_dk, *host_dv;
    const float *oldq, *oldk, *oldv;
    size_t sold_q, sold_kv;
    float *fused;
} bwd_out;

static int scatter_third(const attn_dims *ad, const bwd_out *o, const float *part, int which)
{
    if (!o->fused)
        return 0;
    third_kernel KRN_LAUNCH(ad->n_out)(o->fused, part, *ad, which);
    return krn_dev_launched("attention gradient scatter");
}

/* The sites of kernels/ops_attn.c backward_sites, in its order. */
static int backward_sites(krn_ctx *ctx, const attn_dims *ad, const bwd_in *in, const bwd_out *o, float *dpreatt,
                          float *datt)
{
    attn_scratch s;
    int rc = scratch_get(ctx, ad, in->g, ad->C, in->v, in->sv, &s);
    if (rc)
        return rc;
    double *x = s.x, *mag = s.mag, *y = s.wide, *gn = s.an, *vn = s.bn;
    float *ddatt = s.tt1, *ddpre = s.tt2, *r = s.rows;
    if ((rc = pair_dot_site(ctx, "attn.bwd.datt", ddatt, datt, ad, in->g, ad->C, gn, in->v, in->sv, vn, 1.0, 0, x,
                            mag)) ||
        (rc = mix_site(ctx, "attn.bwd.dv", o->dv, o->host_dv, ad, in->w, false, in->g, ad->C, 1.0, o->oldv,
                       o->sold_kv, x, mag)))
        return rc;
    if ((rc = scatter_third(ad, o, o->dv, 2)))
        return krn_cuda_fail(ctx, rc);
    widen_kernel KRN_LAUNCH(ad->n_tt)(y, ddatt, ad->n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = row_sum_site(ctx, "attn.bwd.r", r, ad, in->w, y, x, mag)))
        return rc;
    dpreatt_kernel KRN_LAUNCH(ad->n_tt)(x, in->w, y, r, *ad);
    if ((rc = krn_dev_launched("attn.bwd.dpreatt")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "attn.bwd.dpreatt", ddpre, dpreatt, x, ad->n_tt, NULL)))
        return rc;
    widen_kernel KRN_LAUNCH(ad->n_tt)(y, ddpre, ad->n_tt);
    if ((rc = krn_dev_launched("widen")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = mix_site(ctx, "attn.bwd.dq", o->dq, o->host_dq, ad, y, true, in->k, in->sk, ad->scale, o->oldq,
                       o->sold_q, x, mag)))
        return rc;
    if ((rc = scatter_third(ad, o, o->dq, 0)))
        return krn_cuda_fail(ctx, rc);
    if ((rc = mix_site(ctx, "attn.bwd.dk", o->dk, o->host_dk, ad, y, false, in->q, in->sq, ad->scale, o->oldk,
                       o->sold_kv, x, mag)))
        return rc;
    if ((rc = scatter_third(ad, o, o->dk, 1)))
        return krn_cuda_fail(ctx, rc);
    return 0;
}

extern "C" int krn_cuda_attention_backward(krn_ctx *ctx, float *dinp, float *dpreatt, float *datt,
                                           const float *dout, const float *inp, const float *att,
                                           size_t B, size_t T, size_t C, size_t NH)
{
    krn_dev *d = krn_dev_of(ctx);
    attn_dims ad = dims(B, T, NH, NH, C / NH);
    double *qkv = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, ad.n_inp);
    double *g = krn_dev_upload_wide(d, DEV_C, DEV_D, dout, ad.n_out);
    double *w = krn_dev_upload_wide(d, DEV_E, DEV_F, att, ad.n_tt);
    float *ddinp = krn_dev_upload(d, DEV_G, dinp, ad.n_inp);
    float *part = dev_array<float>(d, DEV_OUT3, ad.n_out);
    if (!qkv || !g || !w || !ddinp || !part)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    bwd_in in = {qkv, qkv + C, qkv + 2 * C, g, w, 3 * C, 3 * C, 3 * C};
    bwd_out o = {part, part, part, NULL, NULL, NULL, ddinp, ddinp + C, ddinp + 2 * C, 3 * C, 3 * C, ddinp};
    int rc = backward_sites(ctx, &ad, &in, &o, dpreatt, datt);
    if (rc)
        return rc;
    if ((rc = krn_dev_get(dinp, ddinp, ad.n_inp * sizeof *dinp)))
        return krn_cuda_fail(ctx, rc);
    return 0;
}

extern "C" int krn_cuda_gqa_backward(krn_ctx *ctx, float *dq, float *dk, float *dv, float *dpreatt, float *datt,
                                     const float *dout, const float *q, const float *k, const float *v,
                                     const float *att, size_t B, size_t T, size_t NH, size_t NKV, size_t hs)
{
    krn_dev *d = krn_dev_of(ctx);
    attn_dims ad = dims(B, T, NH, NKV, hs);
    /* DEV_A stages each widened upload; each is widened before the next.
     * Each gradient site reads its old values before it writes, so it
     * rounds into the buffer that holds them. */
    double *qd = krn_dev_upload_wide(d, DEV_A, DEV_B, q, ad.n_out);
    double *kd = qd ? krn_dev_upload_wide(d, DEV_A, DEV_C, k, ad.n_kv) : NULL;
    double *vd = kd ? krn_dev_upload_wide(d, DEV_A, DEV_D, v, ad.n_kv) : NULL;
    double *g = vd ? krn_dev_upload_wide(d, DEV_A, DEV_E, dout, ad.n_out) : NULL;
    double *w = g ? krn_dev_upload_wide(d, DEV_A, DEV_F, att, ad.n_tt) : NULL;
    float *ddq = krn_dev_upload(d, DEV_G, dq, ad.n_out);
    float *ddk = krn_dev_upload(d, DEV_TOK, dk, ad.n_kv), *ddv = krn_dev_upload(d, DEV_TOK2, dv, ad.n_kv);
    if (!w || !ddq || !ddk || !ddv)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    bwd_in in = {qd, kd, vd, g, w, ad.C, ad.KVW, ad.KVW};
    bwd_out o = {ddq, ddk, ddv, dq, dk, dv, ddq, ddk, ddv, ad.C, ad.KVW, NULL};
    return backward_sites(ctx, &ad, &in, &o, dpreatt, datt);
}
