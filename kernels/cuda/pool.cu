/* Max pooling and global average pooling forward and backward on the
 * device (kernels/ops.h; the CPU ops are kernels/ops_pool.c, bands in
 * docs/op-bounds.md, "pooling"): the same sites in the same order. */
#include "kernels/cuda/device.cuh"

/* The first and one-past-last input row (or column) of window o. */
__device__ static inline void window(size_t o, size_t k, size_t stride, size_t pad, size_t len, size_t *lo,
                                     size_t *hi)
{
    size_t start = o * stride;
    *lo = start < pad ? 0 : start - pad;
    *hi = start + k - pad < len ? start + k - pad : len;
}

typedef struct {
    size_t H, W, OH, OW, k, stride, pad;
} pool_shape;

/* Each output: the first largest element of its window in row-major order
 * (a later one replaces it only when strictly larger, as on the CPU). */
static __global__ void max_fwd_kernel(double *x, int32_t *idx, const float *inp, pool_shape s, size_t nout)
{
    KRN_GRID_LOOP(o, nout) {
        size_t ohw = s.OH * s.OW, pl = o / ohw, oh = o % ohw / s.OW, ow = o % s.OW;
        const float *plane = inp + pl * s.H * s.W;
        size_t h0, h1, w0, w1;
        window(oh, s.k, s.stride, s.pad, s.H, &h0, &h1);
        window(ow, s.k, s.stride, s.pad, s.W, &w0, &w1);
        size_t best = h0 * s.W + w0;
        for (size_t h = h0; h < h1; h++)
            for (size_t w = w0; w < w1; w++)
                if (plane[h * s.W + w] > plane[best])
                    best = h * s.W + w;
        idx[o] = (int32_t)best;
        x[o] = (double)plane[best];
    }
}

extern "C" int krn_cuda_maxpool2d_forward(krn_ctx *ctx, float *out, int32_t *idx, const float *inp, size_t N,
                                          size_t C, size_t H, size_t W, size_t k, size_t stride, size_t pad)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    size_t nin = N * C * H * W, nout = N * C * OH * OW;
    float *din = krn_dev_upload(d, DEV_A, inp, nin), *dout = dev_array<float>(d, DEV_OUT, nout);
    int32_t *didx = dev_array<int32_t>(d, DEV_TOK, nout);
    double *x = dev_array<double>(d, DEV_X, nout);
    if (!din || !dout || !didx || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    pool_shape s = {H, W, OH, OW, k, stride, pad};
    max_fwd_kernel KRN_LAUNCH(nout)(x, didx, din, s, nout);
    int rc = krn_dev_launched("maxpool.fwd");
    if (rc == 0)
        rc = krn_dev_get(idx, didx, nout * sizeof *idx);
    return rc ? krn_cuda_fail(ctx, rc) : krn_cuda_site(ctx, "maxpool.fwd", dout, out, x, nout, NULL);
}

static __global__ void zero_kernel(double *x, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = 0.0;
}

/* One thread per plane: x[i] = x[i] + dout[o] over the plane's outputs in
 * increasing order (the CPU's loop; idx checked on the host). */
static __global__ void max_route_kernel(double *x, const float *dout, const int32_t *idx, size_t planes,
                                        size_t hw, size_t ohw)
{
    KRN_GRID_LOOP(pl, planes) {
        for (size_t o = pl * ohw; o < pl * ohw + ohw; o++) {
            size_t i = pl * hw + (size_t)idx[o];
            x[i] = __dadd_rn(x[i], (double)dout[o]);
        }
    }
}

static __global__ void add_old_kernel(double *x, const float *old, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dadd_rn(x[i], (double)old[i]);
}

extern "C" int krn_cuda_maxpool2d_backward(krn_ctx *ctx, float *dinp, const float *dout, const int32_t *idx,
                                           size_t N, size_t C, size_t H, size_t W, size_t k, size_t stride,
                                           size_t pad)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    size_t planes = N * C, hw = H * W, ohw = OH * OW, nin = planes * hw, nout = planes * ohw;
    float *dd = krn_dev_upload(d, DEV_A, dinp, nin), *dg = krn_dev_upload(d, DEV_B, dout, nout);
    int32_t *didx = dev_array<int32_t>(d, DEV_TOK, nout);
    float *res = dev_array<float>(d, DEV_OUT, nin);
    double *x = dev_array<double>(d, DEV_X, nin);
    if (!dd || !dg || !didx || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = krn_dev_put(didx, idx, nout * sizeof *idx);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    zero_kernel KRN_LAUNCH(nin)(x, nin);
    max_route_kernel KRN_LAUNCH(planes)(x, dg, didx, planes, hw, ohw);
    add_old_kernel KRN_LAUNCH(nin)(x, dd, nin);
    if ((rc = krn_dev_launched("maxpool.bwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "maxpool.bwd", res, dinp, x, nin, NULL);
}

extern "C" int krn_cuda_avgpool_global_forward(krn_ctx *ctx, float *out, const float *inp, size_t N, size_t C,
                                               size_t HW)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t nc = N * C;
    double *xd = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, nc * HW);
    float *dout = dev_array<float>(d, DEV_OUT, nc);
    if (!xd || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    return krn_cuda_row_mean_site(ctx, "avgpool.fwd", dout, out, xd, NULL, nc, HW);
}

static __global__ void avg_bwd_kernel(double *x, const float *dout, const float *dinp, size_t HW, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dadd_rn(__ddiv_rn((double)dout[i / HW], (double)HW), (double)dinp[i]);
}

extern "C" int krn_cuda_avgpool_global_backward(krn_ctx *ctx, float *dinp, const float *dout, size_t N,
                                                size_t C, size_t HW)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t nc = N * C, n = nc * HW;
    float *dd = krn_dev_upload(d, DEV_A, dinp, n), *dg = krn_dev_upload(d, DEV_B, dout, nc);
    float *res = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!dd || !dg || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    avg_bwd_kernel KRN_LAUNCH(n)(x, dg, dd, HW, n);
    int rc = krn_dev_launched("avgpool.bwd");
    return rc ? krn_cuda_fail(ctx, rc) : krn_cuda_site(ctx, "avgpool.bwd", res, dinp, x, n, NULL);
}
