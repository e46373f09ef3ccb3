/* GELU (tanh form) forward and backward on the device (kernels/ops.h):
 * "gelu.tanh" uses CUDA's tanh (1 ulp documented, within the contract's
 * KRN_LIBM_ULP = 4; docs/op-bounds.md), the rest are exact sites. */
#include "kernels/cuda/device.cuh"

#define GELU_S 0.7978845608028654
#define GELU_C 0.044715
#define GELU_3C 0.134145

static __global__ void tanh_kernel(double *x, const float *inp, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double v = inp[i];
        x[i] = tanh(__dmul_rn(GELU_S, __dadd_rn(v, __dmul_rn(__dmul_rn(__dmul_rn(GELU_C, v), v), v))));
    }
}

static __global__ void fwd_kernel(double *x, const float *inp, const float *t, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dmul_rn(__dmul_rn(0.5, (double)inp[i]), __dadd_rn(1.0, (double)t[i]));
}

static __global__ void bwd_kernel(double *x, const float *inp, const float *t, const float *dout,
                                  const float *dinp, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double v = inp[i], th = t[i];
        double left = __dmul_rn(0.5, __dadd_rn(1.0, th));
        double right = __dmul_rn(__dmul_rn(__dmul_rn(__dmul_rn(0.5, v), __dsub_rn(1.0, __dmul_rn(th, th))), GELU_S),
                                 __dadd_rn(1.0, __dmul_rn(__dmul_rn(GELU_3C, v), v)));
        double grad = __dadd_rn(left, right);
        x[i] = __dadd_rn(__dmul_rn(grad, (double)dout[i]), (double)dinp[i]);
    }
}

/* Site "gelu.tanh" into t (device), from inp (device). */
static int tanh_site(krn_ctx *ctx, float *t, const float *inp, double *x, size_t n)
{
    tanh_kernel KRN_LAUNCH(n)(x, inp, n);
    int rc = krn_dev_launched("gelu.tanh");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_libm();
    return krn_cuda_site(ctx, "gelu.tanh", t, NULL, x, n, &band);
}

extern "C" int krn_cuda_gelu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *din = krn_dev_upload(d, DEV_A, inp, n), *t = dev_array<float>(d, DEV_OUT2, n);
    float *dout = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!din || !t || !dout || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = tanh_site(ctx, t, din, x, n);
    if (rc)
        return rc;
    fwd_kernel KRN_LAUNCH(n)(x, din, t, n);
    if ((rc = krn_dev_launched("gelu.fwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "gelu.fwd", dout, out, x, n, NULL);
}

extern "C" int krn_cuda_gelu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout,
                                      size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *din = krn_dev_upload(d, DEV_A, inp, n), *dg = krn_dev_upload(d, DEV_B, dout, n);
    float *dd = krn_dev_upload(d, DEV_C, dinp, n);
    float *t = dev_array<float>(d, DEV_OUT2, n), *res = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!din || !dg || !dd || !t || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = tanh_site(ctx, t, din, x, n);
    if (rc)
        return rc;
    bwd_kernel KRN_LAUNCH(n)(x, din, t, dg, dd, n);
    if ((rc = krn_dev_launched("gelu.bwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "gelu.bwd", res, dinp, x, n, NULL);
}
