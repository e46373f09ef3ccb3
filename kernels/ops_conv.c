/* 2-D convolution forward and backward (kernels/ops.h) by im2col into the
 * chunked GEMM. Bands: docs/op-bounds.md ("conv fwd", "conv bwd"). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/chunked_gemm.h"
#include "kernels/contract.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"
#include "kernels/sum_sites.h"
#include "kernels/widen.h"

/* The most FP64 values of one column matrix the backward's dweight product
 * reads at once (rows of taps over all N*P positions): 4M doubles, 32 MB. */
#define COL_PART ((size_t)1 << 22)

/* Taps (rows of a column matrix) per range of the loops on the pool. */
#define TAP_ROWS 8

typedef struct {
    size_t N, C, H, W, OC, KH, KW, stride, pad;
    size_t OH, OW, P, K, HW;
} conv_shape;

/* Checks the shape (dimensions not zero, products that fit, a kernel that
 * fits the padded input); fills s. */
static int conv_check(const char *op, conv_shape *s, size_t N, size_t C, size_t H, size_t W, size_t OC, size_t KH,
                      size_t KW, size_t stride, size_t pad)
{
    size_t nc, kk, noc, t;
    int rc;
    *s = (conv_shape){.N = N, .C = C, .H = H, .W = W, .OC = OC, .KH = KH, .KW = KW, .stride = stride, .pad = pad};
    if ((rc = krn_check_dims(op, N, C, &nc)) || (rc = krn_check_dims(op, H, W, &s->HW)) ||
        (rc = krn_check_dims(op, nc, s->HW, &t)) || (rc = krn_check_dims(op, KH, KW, &kk)) ||
        (rc = krn_check_dims(op, C, kk, &s->K)) || (rc = krn_check_dims(op, OC, s->K, &t)) ||
        (rc = krn_check_dims(op, N, OC, &noc)))
        return rc;
    if (stride == 0)
        return ovt_fail(OVT_EINVAL, "%s: stride 0 (the least is 1)", op);
    if (pad > SIZE_MAX / 8 || H + 2 * pad < KH || W + 2 * pad < KW)
        return ovt_fail(OVT_EINVAL, "%s: a %zu x %zu kernel with padding %zu does not fit a %zu x %zu input",
                        op, KH, KW, pad, H, W);
    s->OH = (H + 2 * pad - KH) / stride + 1;
    s->OW = (W + 2 * pad - KW) / stride + 1;
    if ((rc = krn_check_dims(op, s->OH, s->OW, &s->P)) || (rc = krn_check_dims(op, noc, s->P, &t)) ||
        (rc = krn_check_dims(op, N, s->P, &t)) || (rc = krn_check_dims(op, s->K, t, &t)))
        return rc;
    return 0;
}

/* The input row of tap kh under output row oh, or -1 in the padding. */
static ptrdiff_t tap_row(const conv_shape *s, size_t o, size_t kh, size_t H)
{
    ptrdiff_t h = (ptrdiff_t)(o * s->stride + kh) - (ptrdiff_t)s->pad;
    return h >= 0 && h < (ptrdiff_t)H ? h : -1;
}

typedef struct {
    const conv_shape *s;
    const float *img; /* one image (C,H,W) */
    double *dst;      /* row k - k0 at dst + (k - k0)*ld */
    size_t ld, k0;
} im2col_job;

/* Rows [k0 + r0, k0 + r1) of the image's column matrix: exact copies, 0 in
 * the padding. */
static void im2col_rows(void *arg, size_t r0, size_t r1)
{
    const im2col_job *j = arg;
    const conv_shape *s = j->s;
    for (size_t r = r0; r < r1; r++) {
        size_t k = j->k0 + r, c = k / (s->KH * s->KW), kh = k / s->KW % s->KH, kw = k % s->KW;
        const float *plane = j->img + c * s->HW;
        double *row = j->dst + r * j->ld;
        for (size_t oh = 0; oh < s->OH; oh++) {
            ptrdiff_t h = tap_row(s, oh, kh, s->H);
            for (size_t ow = 0; ow < s->OW; ow++) {
                ptrdiff_t w = tap_row(s, ow, kw, s->W);
                row[oh * s->OW + ow] = h >= 0 && w >= 0 ? (double)plane[(size_t)h * s->W + (size_t)w] : 0.0;
            }
        }
    }
}

/* Rows k0 .. k1 of image img's column matrix into dst (row stride ld). */
static int im2col(const krn_cpu *be, double *dst, size_t ld, const float *img, const conv_shape *s, size_t k0,
                  size_t k1)
{
    im2col_job j = {.s = s, .img = img, .dst = dst, .ld = ld, .k0 = k0};
    return krn_parallel_ranges(be, k1 - k0, TAP_ROWS, im2col_rows, &j);
}

/* norms[j] = the Euclidean norm of column j of m (rows x cols, FP64), each
 * column's squares added in row order. */
static void col_norms64(double *norms, const double *m, size_t rows, size_t cols)
{
    for (size_t j = 0; j < cols; j++)
        norms[j] = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            norms[j] += m[i * cols + j] * m[i * cols + j];
    for (size_t j = 0; j < cols; j++)
        norms[j] = sqrt(norms[j]);
}

/* out[i] + bias[channel of i] for NCHW-style out with `plane` elements per
 * channel and `channels` channels. */
typedef struct {
    const float *out, *bias;
    size_t plane, channels;
} bias_job;

static void plane_bias_fill(void *arg, size_t i0, size_t len, double *x)
{
    const bias_job *j = arg;
    for (size_t k = 0; k < len; k++)
        x[k] = (double)j->out[i0 + k] + (double)j->bias[(i0 + k) / j->plane % j->channels];
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("conv fwd"). */
int krn_conv2d_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight, const float *bias,
                       size_t N, size_t C, size_t H, size_t W, size_t OC, size_t KH, size_t KW, size_t stride,
                       size_t pad)
{
    static const char op[] = "conv2d_forward";
    conv_shape s;
    krn_cpu be;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "weight", weight)) ||
        (rc = conv_check(op, &s, N, C, H, W, OC, KH, KW, stride, pad)))
        return rc;
    size_t nin = N * C * H * W, nout = N * OC * s.P;
    KRN_TRACE_READS(ctx, 0, {inp, nin}, {weight, OC * s.K});
    KRN_TRACE_READS(ctx, 1, {bias ? out : NULL, nout}, {bias, OC});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_conv2d_forward(ctx, out, inp, weight, bias, N, C, H, W, OC, KH, KW, stride, pad));
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    size_t K = s.K, P = s.P;
    /* the large temporaries in the thread's scratch buffers (kept between
     * calls: no fresh pages to fault in every step) */
    double *wd = krn_scratch(KRN_SCRATCH_A, OC * K), *wn = krn_doubles(OC, op);
    double *col = krn_scratch(KRN_SCRATCH_B, K * P), *pn = krn_doubles(P, op);
    double *x = krn_scratch(KRN_SCRATCH_OUT, OC * P);
    krn_site_parts *sp = NULL;
    if (!wd || !wn || !col || !pn || !x || (rc = krn_widen_rows(&be, wd, wn, weight, OC, K)))
        goto done;
    /* one part per image: out_n (OC,P) = weight (OC,K) @ col_n (K,P); the
     * band's rows are the weight's rows, its columns the patches */
    krn_band band = krn_band_reduction(KRN_BAND_OUTER, K, 1.0, 0);
    band.cols = P;
    if ((rc = krn_site_parts_begin(ctx, &sp, "conv.fwd", out, N * OC * P, &band)))
        goto done;
    for (size_t n = 0; n < N && rc == 0; n++) {
        krn_gemm_in in = {.a = wd, .lda = K, .b = col, .ldb = P};
        if ((rc = im2col(&be, col, P, inp + n * C * s.HW, &s, 0, K)))
            break;
        col_norms64(pn, col, K, P);
        if ((rc = krn_chunked_gemm_in(&be, x, &in, OC, P, K)) == 0)
            rc = krn_site_part(sp, x, OC * P, wn, pn);
    }
    int end_rc = krn_site_parts_end(sp);
    if (rc == 0)
        rc = end_rc;
    if (rc == 0 && bias) {
        bias_job j = {.out = out, .bias = bias, .plane = P, .channels = OC};
        rc = krn_site_exact_fill(ctx, "conv.fwd.bias", out, N * OC * P, plane_bias_fill, &j);
    }
done:
    free(wn), free(pn);
    return rc;
}

typedef struct {
    const conv_shape *s;
    const double *colg;     /* one image's column gradient (K,P) */
    const double *dn, *wcn; /* ||dout[n,:,p]|| (P), ||weight[:,k]|| (K) */
    const float *old;       /* one image's dinp (C,H,W) */
    double *x, *mag;        /* one image's values and band magnitudes (C,H,W) */
} col2im_job;

/* Channels [c0, c1) of one image: each input element's column values in
 * row-major (kh, kw) order, s = 0, s = s + v, then + old; the band's
 * magnitude sums ||dout[n,:,p]|| * ||weight[:,k]|| over the same taps
 * (Cauchy-Schwarz per tap). */
static void col2im_channels(void *arg, size_t c0, size_t c1)
{
    const col2im_job *j = arg;
    const conv_shape *s = j->s;
    for (size_t c = c0; c < c1; c++)
        for (size_t h = 0; h < s->H; h++)
            for (size_t w = 0; w < s->W; w++) {
                double sum = 0, m = 0;
                for (size_t kh = 0; kh < s->KH; kh++) {
                    size_t hp = h + s->pad;
                    if (hp < kh || (hp - kh) % s->stride || (hp - kh) / s->stride >= s->OH)
                        continue;
                    size_t oh = (hp - kh) / s->stride;
                    for (size_t kw = 0; kw < s->KW; kw++) {
                        size_t wp = w + s->pad;
                        if (wp < kw || (wp - kw) % s->stride || (wp - kw) / s->stride >= s->OW)
                            continue;
                        size_t p = oh * s->OW + (wp - kw) / s->stride, k = (c * s->KH + kh) * s->KW + kw;
                        sum = sum + j->colg[k * s->P + p];
                        m += j->dn[p] * j->wcn[k];
                    }
                }
                size_t i = c * s->HW + h * s->W + w;
                j->x[i] = sum + (double)j->old[i];
                j->mag[i] = m;
            }
}

krn_band krn_conv_dinp_band(size_t OC, size_t taps)
{
    /* Each tap's value is a chunked sum over OC (gamma_{c+n-1}); adding at
     * most KH*KW of them in order adds KH*KW - 1 roundings to each term:
     * |computed - exact| <= gamma_{c+n-1 + KH*KW-1} * sum|terms|
     * (docs/op-bounds.md, "conv bwd"). */
    size_t cc = OC < KRN_GEMM_CHUNK ? OC : KRN_GEMM_CHUNK, nc = (OC + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK;
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, OC, 1.0, 1);
    band.scale = KRN_BAND_WIDTH * 2.0 * krn_gamma((double)(cc + nc - 1 + taps - 1));
    return band;
}

/* Site "conv.bwd.dinp": per image, colg (K,P) = weight^T @ dout_n, a
 * chunked reduction over OC, then col2im in the fixed tap order. */
static int conv_dinp(krn_ctx *ctx, const krn_cpu *be, float *dinp, const float *dout, const double *wd,
                     const float *weight, const conv_shape *s)
{
    static const char op[] = "conv2d_backward";
    size_t K = s->K, P = s->P, OC = s->OC, nimg = s->C * s->HW;
    int rc = OVT_ENOMEM;
    double *colg = krn_scratch(KRN_SCRATCH_B, K * P), *dn = krn_doubles(P, op), *wcn = krn_doubles(K, op);
    double *x = krn_scratch(KRN_SCRATCH_C, nimg), *mag = krn_scratch(KRN_SCRATCH_D, nimg);
    krn_site_parts *sp = NULL;
    if (!colg || !dn || !wcn || !x || !mag || (rc = krn_col_norms(be, wcn, weight, OC, K)))
        goto done;
    krn_band band = krn_conv_dinp_band(OC, s->KH * s->KW);
    if ((rc = krn_site_parts_begin(ctx, &sp, "conv.bwd.dinp", dinp, s->N * nimg, &band)))
        goto done;
    for (size_t n = 0; n < s->N && rc == 0; n++) {
        const float *dn_img = dout + n * OC * P;
        krn_gemm_in in = {.ta = true, .a = wd, .lda = K, .bf = dn_img, .ldb = P};
        if ((rc = krn_chunked_gemm_in(be, colg, &in, K, P, OC)))
            break;
        for (size_t p = 0; p < P; p++)
            dn[p] = 0;
        for (size_t oc = 0; oc < OC; oc++)
            for (size_t p = 0; p < P; p++)
                dn[p] += (double)dn_img[oc * P + p] * (double)dn_img[oc * P + p];
        for (size_t p = 0; p < P; p++)
            dn[p] = sqrt(dn[p]);
        col2im_job j = {.s = s, .colg = colg, .dn = dn, .wcn = wcn, .old = dinp + n * nimg, .x = x, .mag = mag};
        if ((rc = krn_parallel_ranges(be, s->C, 1, col2im_channels, &j)) == 0)
            rc = krn_site_part(sp, x, nimg, mag, NULL);
    }
    int end_rc = krn_site_parts_end(sp);
    if (rc == 0)
        rc = end_rc;
done:
    free(dn), free(wcn);
    return rc;
}

/* Site "conv.bwd.dweight": x (OC,K) = g (OC,NP) @ col^T + old, the column
 * matrix of all images (K, N*P) built in parts of rows of taps (at most
 * COL_PART values), each part's product a reduction over N*P. */
static int conv_dweight(krn_ctx *ctx, const krn_cpu *be, float *dweight, const double *g, const double *gn,
                        const float *inp, const conv_shape *s)
{
    static const char op[] = "conv2d_backward";
    size_t K = s->K, OC = s->OC, NP = s->N * s->P;
    size_t rows = COL_PART / NP;
    rows = rows == 0 ? 1 : rows > K ? K : rows;
    int rc = OVT_ENOMEM;
    double *col = krn_scratch(KRN_SCRATCH_B, rows * NP), *part = krn_scratch(KRN_SCRATCH_C, OC * rows);
    double *kn = krn_doubles(K, op), *x = krn_scratch(KRN_SCRATCH_OUT, OC * K);
    if (!col || !part || !kn || !x)
        goto done;
    for (size_t k0 = 0; k0 < K; k0 += rows) {
        size_t k1 = k0 + rows < K ? k0 + rows : K, kr = k1 - k0;
        for (size_t n = 0; n < s->N; n++)
            if ((rc = im2col(be, col + n * s->P, NP, inp + n * s->C * s->HW, s, k0, k1)))
                goto done;
        krn_gemm_in in = {.a = g, .lda = NP, .tb = true, .b = col, .ldb = NP};
        if ((rc = krn_chunked_gemm_in(be, part, &in, OC, kr, NP)))
            goto done;
        for (size_t r = 0; r < kr; r++) {
            double q = 0;
            for (size_t i = 0; i < NP; i++)
                q += col[r * NP + i] * col[r * NP + i];
            kn[k0 + r] = sqrt(q);
        }
        for (size_t oc = 0; oc < OC; oc++)
            for (size_t r = 0; r < kr; r++)
                x[oc * K + k0 + r] = part[oc * kr + r] + (double)dweight[oc * K + k0 + r];
    }
    krn_band band = krn_band_reduction(KRN_BAND_OUTER, NP, 1.0, 1);
    band.a = gn;
    band.b = kn;
    band.cols = K;
    rc = krn_site(ctx, "conv.bwd.dweight", dweight, x, OC * K, &band);
done:
    free(kn);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("conv bwd"). */
int krn_conv2d_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C, size_t H, size_t W,
                        size_t OC, size_t KH, size_t KW, size_t stride, size_t pad)
{
    static const char op[] = "conv2d_backward";
    conv_shape s;
    krn_cpu be;
    int rc;
    if ((rc = krn_check_ptr(op, "dweight", dweight)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "weight", weight)) ||
        (rc = conv_check(op, &s, N, C, H, W, OC, KH, KW, stride, pad)))
        return rc;
    size_t nin = N * C * H * W, nout = N * OC * s.P;
    unsigned k = 0;
    if (dinp)
        KRN_TRACE_READS(ctx, k++, {dout, nout}, {weight, OC * s.K}, {dinp, nin});
    KRN_TRACE_READS(ctx, k++, {dout, nout}, {inp, nin}, {dweight, OC * s.K});
    KRN_TRACE_READS(ctx, k, {dbias ? dout : NULL, nout}, {dbias, OC});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_conv2d_backward(ctx, dinp, dweight, dbias, dout, inp, weight, N, C, H, W, OC,
                                                    KH, KW, stride, pad));
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    size_t K = s.K, P = s.P, NP = N * P;
    double *wd = krn_scratch(KRN_SCRATCH_A, OC * K), *g = krn_scratch(KRN_SCRATCH_F, OC * NP);
    double *gn = krn_doubles(OC, op);
    if (!wd || !g || !gn)
        goto done;
    krn_widen(wd, weight, OC * K);
    if (dinp && (rc = conv_dinp(ctx, &be, dinp, dout, wd, weight, &s)))
        goto done;
    /* g (OC, N*P): g[oc][n*P + p] = dout[n,oc,p], the rows the dweight and
     * dbias reductions run over, in (n, p) order */
    for (size_t oc = 0; oc < OC; oc++) {
        double q = 0;
        for (size_t n = 0; n < N; n++)
            for (size_t p = 0; p < P; p++) {
                double v = dout[(n * OC + oc) * P + p];
                g[oc * NP + n * P + p] = v;
                q += v * v;
            }
        gn[oc] = sqrt(q);
    }
    if ((rc = conv_dweight(ctx, &be, dweight, g, gn, inp, &s)))
        goto done;
    if (dbias)
        rc = krn_row_sum_site(ctx, &be, "conv.bwd.dbias", dbias, g, NULL, OC, NP);
done:
    free(gn);
    return rc;
}
