/* 2-D convolution forward and backward on the device (kernels/ops.h; the
 * CPU op is kernels/ops_conv.c, bands in docs/op-bounds.md, "conv fwd" and
 * "conv bwd"): im2col on the device into the chunked cuBLAS GEMM
 * (reduce.cu), the input gradient a GEMM then the taps in the CPU's fixed
 * order, the same sites, sizes and bands. */
#include "kernels/cuda/device.cuh"

/* The most FP64 values of one column matrix the dweight product reads at
 * once (rows of taps over all N*P positions): 64M doubles, 512 MB. Only the
 * memory depends on it: the product's reduction is over N*P in any case. */
#define COL_PART ((size_t)1 << 26)

typedef struct {
    size_t N, C, H, W, OC, KH, KW, stride, pad;
    size_t OH, OW, P, K, HW;
} conv_shape;

static conv_shape conv_shape_of(size_t N, size_t C, size_t H, size_t W, size_t OC, size_t KH, size_t KW,
                                size_t stride, size_t pad)
{
    conv_shape s = {N, C, H, W, OC, KH, KW, stride, pad, 0, 0, 0, 0, 0};
    s.OH = (H + 2 * pad - KH) / stride + 1;
    s.OW = (W + 2 * pad - KW) / stride + 1;
    s.P = s.OH * s.OW;
    s.K = C * KH * KW;
    s.HW = H * W;
    return s;
}

/* The input row of tap kh under output row o, or -1 in the padding. */
__device__ static inline ptrdiff_t tap_row(const conv_shape s, size_t o, size_t kh, size_t len)
{
    ptrdiff_t h = (ptrdiff_t)(o * s.stride + kh) - (ptrdiff_t)s.pad;
    return h >= 0 && h < (ptrdiff_t)len ? h : -1;
}

/* Rows [k0, k0 + kr) of the column matrices of images [n0, n0 + nn): row r
 * of image n - n0 at dst + r*ld + (n - n0)*P, exact copies, 0 in the
 * padding (ops_conv.c im2col_rows). */
static __global__ void im2col_kernel(double *dst, size_t ld, const float *inp, const conv_shape s, size_t k0,
                                     size_t kr, size_t n0, size_t nn)
{
    KRN_GRID_LOOP(e, kr * nn * s.P) {
        size_t r = e / (nn * s.P), n = e / s.P % nn, p = e % s.P, k = k0 + r;
        size_t c = k / (s.KH * s.KW), kh = k / s.KW % s.KH, kw = k % s.KW;
        const float *plane = inp + ((n0 + n) * s.C + c) * s.HW;
        ptrdiff_t h = tap_row(s, p / s.OW, kh, s.H), w = tap_row(s, p % s.OW, kw, s.W);
        dst[r * ld + n * s.P + p] = h >= 0 && w >= 0 ? (double)plane[(size_t)h * s.W + (size_t)w] : 0.0;
    }
}

static int im2col(double *dst, size_t ld, const float *inp, const conv_shape *s, size_t k0, size_t kr, size_t n0,
                  size_t nn)
{
    size_t n = kr * nn * s->P;
    im2col_kernel KRN_LAUNCH(n)(dst, ld, inp, *s, k0, kr, n0, nn);
    return krn_dev_launched("im2col");
}

/* A product's band: a reduction over K, `ops` FP64 operations after it, the
 * row norms rn and the column norms cn (cols of them per row). */
static krn_band outer_band(size_t K, int ops, const double *rn, const double *cn, size_t cols)
{
    krn_band band = krn_band_reduction(KRN_BAND_OUTER, K, 1.0, ops);
    band.a = rn;
    band.b = cn;
    band.cols = cols;
    return band;
}

static __global__ void bias_kernel(double *x, const float *out, const float *bias, size_t plane, size_t channels,
                                   size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dadd_rn((double)out[i], (double)bias[i / plane % channels]);
}

/* Sites "conv.fwd" (one block per image: out_n = weight @ col_n, the OUTER
 * band of the weight's row norms and the image's patch norms) and
 * "conv.fwd.bias". */
extern "C" int krn_cuda_conv2d_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight,
                                       const float *bias, size_t N, size_t C, size_t H, size_t W, size_t OC,
                                       size_t KH, size_t KW, size_t stride, size_t pad)
{
    krn_dev *d = krn_dev_of(ctx);
    conv_shape s = conv_shape_of(N, C, H, W, OC, KH, KW, stride, pad);
    size_t K = s.K, P = s.P, n = N * OC * P;
    float *din = krn_dev_upload(d, DEV_A, inp, N * C * s.HW);
    double *wd = krn_dev_upload_wide(d, DEV_C, DEV_D, weight, OC * K);
    double *col = dev_array<double>(d, DEV_E, K * P), *x = dev_array<double>(d, DEV_X, n);
    double *wn = dev_array<double>(d, DEV_N1, OC), *pn = dev_array<double>(d, DEV_N2, N * P);
    float *dout = dev_array<float>(d, DEV_OUT, n);
    if (!din || !wd || !col || !x || !wn || !pn || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = krn_cuda_row_norms(wn, wd, OC, K);
    for (size_t i = 0; i < N && rc == 0; i++) {
        if ((rc = im2col(col, P, din, &s, 0, K, i, 1)) || (rc = krn_cuda_col_norms(pn + i * P, col, K, P)))
            break;
        rc = krn_cuda_chunked_gemm(d, x + i * OC * P, false, wd, K, false, col, P, OC, P, K);
    }
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = outer_band(K, 0, wn, pn, P);
    if ((rc = krn_cuda_site_blocks(ctx, "conv.fwd", dout, bias ? NULL : out, x, n, &band, OC * P)) || !bias)
        return rc;
    float *dbias = krn_dev_upload(d, DEV_B, bias, OC), *dout2 = dev_array<float>(d, DEV_OUT2, n);
    if (!dbias || !dout2)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    bias_kernel KRN_LAUNCH(n)(x, dout, dbias, P, OC, n);
    if ((rc = krn_dev_launched("conv.fwd.bias")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "conv.fwd.bias", dout2, out, x, n, NULL);
}

/* One image's input gradient from its column gradient colg (K,P): each
 * input element's column values in row-major (kh, kw) order, s = 0,
 * s = s + v, then + old; the magnitude sums dn[p]*wcn[k] over the same taps
 * (ops_conv.c col2im_channels). */
static __global__ void col2im_kernel(double *x, double *mag, const double *colg, const double *dn,
                                     const double *wcn, const float *old, const conv_shape s)
{
    KRN_GRID_LOOP(i, s.C * s.HW) {
        size_t c = i / s.HW, h = i % s.HW / s.W, w = i % s.W;
        double sum = 0, m = 0;
        for (size_t kh = 0; kh < s.KH; kh++) {
            size_t hp = h + s.pad;
            if (hp < kh || (hp - kh) % s.stride || (hp - kh) / s.stride >= s.OH)
                continue;
            size_t oh = (hp - kh) / s.stride;
            for (size_t kw = 0; kw < s.KW; kw++) {
                size_t wp = w + s.pad;
                if (wp < kw || (wp - kw) % s.stride || (wp - kw) / s.stride >= s.OW)
                    continue;
                size_t p = oh * s.OW + (wp - kw) / s.stride, k = (c * s.KH + kh) * s.KW + kw;
                sum = __dadd_rn(sum, colg[k * s.P + p]);
                m += dn[p] * wcn[k];
            }
        }
        x[i] = __dadd_rn(sum, (double)old[i]);
        mag[i] = m;
    }
}

/* Site "conv.bwd.dinp": per image, colg (K,P) = weight^T @ dout_n, a
 * chunked reduction over OC, then the taps in order. gd: dout widened. */
static int conv_dinp(krn_ctx *ctx, krn_dev *d, float *dinp, const double *gd, const double *wd,
                     const conv_shape *s)
{
    size_t K = s->K, P = s->P, OC = s->OC, nimg = s->C * s->HW, n = s->N * nimg;
    float *dold = krn_dev_upload(d, DEV_F, dinp, n), *res = dev_array<float>(d, DEV_OUT, n);
    double *colg = dev_array<double>(d, DEV_E, K * P), *x = dev_array<double>(d, DEV_X, n);
    double *mag = dev_array<double>(d, DEV_MAG, n);
    double *dn = dev_array<double>(d, DEV_N1, P), *wcn = dev_array<double>(d, DEV_N2, K);
    if (!dold || !res || !colg || !x || !mag || !dn || !wcn)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = krn_cuda_col_norms(wcn, wd, OC, K);
    for (size_t i = 0; i < s->N && rc == 0; i++) {
        const double *g = gd + i * OC * P;
        if ((rc = krn_cuda_chunked_gemm(d, colg, true, wd, K, false, g, P, K, P, OC)) ||
            (rc = krn_cuda_col_norms(dn, g, OC, P)))
            break;
        col2im_kernel KRN_LAUNCH(nimg)(x + i * nimg, mag + i * nimg, colg, dn, wcn, dold + i * nimg, *s);
        rc = krn_dev_launched("conv.bwd.dinp taps");
    }
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_conv_dinp_band(OC, s->KH * s->KW);
    band.a = mag;
    return krn_cuda_site(ctx, "conv.bwd.dinp", res, dinp, x, n, &band);
}

/* g (OC, N*P): g[oc][n*P + p] = dout[n,oc,p] (widened). */
static __global__ void channel_major_kernel(double *g, const double *gd, size_t N, size_t OC, size_t P)
{
    KRN_GRID_LOOP(e, N * OC * P) {
        size_t oc = e / (N * P), n = e / P % N, p = e % P;
        g[e] = gd[(n * OC + oc) * P + p];
    }
}

/* x[oc*K + k0 + r] = part[oc*kr + r] + old[oc*K + k0 + r]. */
static __global__ void dweight_part_kernel(double *x, const double *part, const float *old, size_t OC,
                                           size_t K, size_t k0, size_t kr)
{
    KRN_GRID_LOOP(e, OC * kr) {
        size_t oc = e / kr, r = e % kr;
        x[oc * K + k0 + r] = __dadd_rn(part[e], (double)old[oc * K + k0 + r]);
    }
}

/* Site "conv.bwd.dweight": x (OC,K) = g (OC,NP) @ col^T + old, the column
 * matrix of all images built in parts of rows of taps, each part's product
 * a reduction over N*P; gn the row norms of g. */
static int conv_dweight(krn_ctx *ctx, krn_dev *d, float *dweight, const double *g, const double *gn,
                        const float *din, const conv_shape *s)
{
    size_t K = s->K, OC = s->OC, NP = s->N * s->P;
    size_t rows = COL_PART / NP;
    rows = rows == 0 ? 1 : rows > K ? K : rows;
    float *dold = krn_dev_upload(d, DEV_F, dweight, OC * K), *res = dev_array<float>(d, DEV_OUT, OC * K);
    double *col = dev_array<double>(d, DEV_E, rows * NP), *part = dev_array<double>(d, DEV_H, OC * rows);
    double *kn = dev_array<double>(d, DEV_N2, K), *x = dev_array<double>(d, DEV_X, OC * K);
    if (!dold || !res || !col || !part || !kn || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = 0;
    for (size_t k0 = 0; k0 < K && rc == 0; k0 += rows) {
        size_t kr = k0 + rows < K ? rows : K - k0;
        if ((rc = im2col(col, NP, din, s, k0, kr, 0, s->N)) || (rc = krn_cuda_row_norms(kn + k0, col, kr, NP)) ||
            (rc = krn_cuda_chunked_gemm(d, part, false, g, NP, true, col, NP, OC, kr, NP)))
            break;
        dweight_part_kernel KRN_LAUNCH(OC * kr)(x, part, dold, OC, K, k0, kr);
        rc = krn_dev_launched("conv.bwd.dweight accumulation");
    }
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = outer_band(NP, 1, gn, kn, K);
    return krn_cuda_site(ctx, "conv.bwd.dweight", res, dweight, x, OC * K, &band);
}

/* Sites "conv.bwd.dinp" (dinp not NULL), "conv.bwd.dweight", "conv.bwd.dbias"
 * (dbias not NULL), in that order. */
extern "C" int krn_cuda_conv2d_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                                        const float *dout, const float *inp, const float *weight, size_t N,
                                        size_t C, size_t H, size_t W, size_t OC, size_t KH, size_t KW,
                                        size_t stride, size_t pad)
{
    krn_dev *d = krn_dev_of(ctx);
    conv_shape s = conv_shape_of(N, C, H, W, OC, KH, KW, stride, pad);
    size_t NP = N * s.P;
    double *gd = krn_dev_upload_wide(d, DEV_A, DEV_B, dout, OC * NP);
    double *wd = krn_dev_upload_wide(d, DEV_C, DEV_D, weight, OC * s.K);
    float *din = krn_dev_upload(d, DEV_I, inp, N * C * s.HW);
    if (!gd || !wd || !din)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc;
    if (dinp && (rc = conv_dinp(ctx, d, dinp, gd, wd, &s)))
        return rc;
    double *g = dev_array<double>(d, DEV_G, OC * NP), *gn = dev_array<double>(d, DEV_N1, OC);
    if (!g || !gn)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    channel_major_kernel KRN_LAUNCH(OC * NP)(g, gd, N, OC, s.P);
    if ((rc = krn_dev_launched("conv gradient, channel-major")) || (rc = krn_cuda_row_norms(gn, g, OC, NP)))
        return krn_cuda_fail(ctx, rc);
    if ((rc = conv_dweight(ctx, d, dweight, g, gn, din, &s)) || !dbias)
        return rc;
    return krn_cuda_row_sum_site(ctx, "conv.bwd.dbias", dbias, g, NULL, OC, NP);
}
