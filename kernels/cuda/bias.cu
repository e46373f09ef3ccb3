/* bias add forward and backward on the device (kernels/ops.h). */
#include "kernels/cuda/device.cuh"

static __global__ void bias_kernel(double *x, const float *inp, const float *bias, size_t N, size_t C)
{
    KRN_GRID_LOOP(i, N * C)
    x[i] = __dadd_rn((double)inp[i], (double)bias[i % C]);
}

extern "C" int krn_cuda_bias_forward(krn_ctx *ctx, float *out, const float *inp, const float *bias,
                                     size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    float *din = krn_dev_upload(d, DEV_A, inp, N * C), *db = krn_dev_upload(d, DEV_B, bias, C);
    float *dout = dev_array<float>(d, DEV_OUT, N * C);
    double *x = dev_array<double>(d, DEV_X, N * C);
    if (!din || !db || !dout || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    bias_kernel KRN_LAUNCH(N * C)(x, din, db, N, C);
    int rc = krn_dev_launched("bias.fwd");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "bias.fwd", dout, out, x, N * C, NULL);
}

extern "C" int krn_cuda_bias_backward(krn_ctx *ctx, float *dbias, const float *dout, size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    double *g = krn_dev_upload_wide(d, DEV_A, DEV_B, dout, N * C);
    if (!g)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    return krn_cuda_colsum_site(ctx, "bias.bwd", dbias, g, N, C);
}
