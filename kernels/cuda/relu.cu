/* ReLU forward and backward on the device (kernels/ops.h): exact sites. */
#include "kernels/cuda/device.cuh"

static __global__ void relu_fwd_kernel(double *x, const float *inp, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = inp[i] > 0 ? (double)inp[i] : 0.0;
}

static __global__ void relu_bwd_kernel(double *x, const float *dinp, const float *inp, const float *dout,
                                       size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dadd_rn((double)dinp[i], inp[i] > 0 ? (double)dout[i] : 0.0);
}

extern "C" int krn_cuda_relu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *din = krn_dev_upload(d, DEV_A, inp, n), *dout = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!din || !dout || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    relu_fwd_kernel KRN_LAUNCH(n)(x, din, n);
    int rc = krn_dev_launched("relu.fwd");
    return rc ? krn_cuda_fail(ctx, rc) : krn_cuda_site(ctx, "relu.fwd", dout, out, x, n, NULL);
}

extern "C" int krn_cuda_relu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout,
                                      size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *dd = krn_dev_upload(d, DEV_A, dinp, n), *din = krn_dev_upload(d, DEV_B, inp, n);
    float *dg = krn_dev_upload(d, DEV_C, dout, n), *res = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!dd || !din || !dg || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    relu_bwd_kernel KRN_LAUNCH(n)(x, dd, din, dg, n);
    int rc = krn_dev_launched("relu.bwd");
    return rc ? krn_cuda_fail(ctx, rc) : krn_cuda_site(ctx, "relu.bwd", res, dinp, x, n, NULL);
}
