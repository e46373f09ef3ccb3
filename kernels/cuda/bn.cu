/* Batch norm (training and evaluation mode) forward and backward on the
 * device (kernels/ops.h; the CPU ops are kernels/ops_bn.c, bands in
 * docs/op-bounds.md, "batch norm"): layernorm's sites per channel over a
 * channel-major (C, M = N*HW) copy, one thread per channel in the
 * contract's chunked order (reduce.cu), the same sites in the same order. */
#include "kernels/cuda/device.cuh"

typedef struct {
    size_t N, C, HW, M;
} bn_shape;

/* The NCHW index of channel-major element (c, m). */
__device__ static inline size_t nchw(bn_shape s, size_t c, size_t m)
{
    return (m / s.HW * s.C + c) * s.HW + m % s.HW;
}

static __global__ void widen_kernel(double *xc, const float *inp, bn_shape s)
{
    KRN_GRID_LOOP(k, s.C * s.M)
    xc[k] = (double)inp[nchw(s, k / s.M, k % s.M)];
}

static __global__ void dev_kernel(double *dev, const double *xc, const float *mean, bn_shape s)
{
    KRN_GRID_LOOP(k, s.C * s.M)
    dev[k] = __dsub_rn(xc[k], (double)mean[k / s.M]);
}

static __global__ void rstd_kernel(double *x, const float *var, double eps, size_t C)
{
    KRN_GRID_LOOP(c, C)
    x[c] = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)var[c], eps)));
}

static __global__ void out_kernel(double *x, const double *dev, const float *rstd, const float *weight,
                                  const float *bias, bn_shape s)
{
    KRN_GRID_LOOP(k, s.C * s.M) {
        size_t c = k / s.M;
        x[nchw(s, c, k % s.M)] =
            __dadd_rn(__dmul_rn(__dmul_rn(dev[k], (double)rstd[c]), (double)weight[c]), (double)bias[c]);
    }
}

/* var_term 0: the running mean's values, 1: the running variance's (the
 * unbiased variance var*M/(M-1)). */
static __global__ void running_kernel(double *x, const float *running, const float *stat, double momentum,
                                      size_t M, int var_term, size_t C)
{
    KRN_GRID_LOOP(c, C) {
        double v = (double)stat[c];
        if (var_term)
            v = __ddiv_rn(__dmul_rn(v, (double)M), (double)(M - 1));
        x[c] = __dadd_rn(__dmul_rn(__dsub_rn(1.0, momentum), (double)running[c]), __dmul_rn(momentum, v));
    }
}

/* The running statistics (exact sites, in place; mean and var on the
 * device). */
static int bn_running(krn_ctx *ctx, krn_dev *d, float *running_mean, float *running_var, const float *mean,
                      const float *var, size_t C, size_t M, double momentum, double *x)
{
    float *drm = krn_dev_upload(d, DEV_E, running_mean, C), *drv = krn_dev_upload(d, DEV_F, running_var, C);
    if (!drm || !drv)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    running_kernel KRN_LAUNCH(C)(x, drm, mean, momentum, M, 0, C);
    int rc = krn_dev_launched("bn.running_mean");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "bn.running_mean", drm, running_mean, x, C, NULL)))
        return rc;
    running_kernel KRN_LAUNCH(C)(x, drv, var, momentum, M, 1, C);
    if ((rc = krn_dev_launched("bn.running_var")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "bn.running_var", drv, running_var, x, C, NULL);
}

extern "C" int krn_cuda_batchnorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd,
                                          float *running_mean, float *running_var, const float *inp,
                                          const float *weight, const float *bias, size_t N, size_t C, size_t HW,
                                          double eps, double momentum)
{
    krn_dev *d = krn_dev_of(ctx);
    bn_shape s = {N, C, HW, N * HW};
    size_t n = C * s.M;
    float *din = krn_dev_upload(d, DEV_A, inp, n);
    float *dw = krn_dev_upload(d, DEV_C, weight, C), *db = krn_dev_upload(d, DEV_D, bias, C);
    double *xc = dev_array<double>(d, DEV_B, n), *dev = dev_array<double>(d, DEV_G, n);
    double *x = dev_array<double>(d, DEV_X, n);
    float *dmean = dev_array<float>(d, DEV_TOK, C), *dvar = dev_array<float>(d, DEV_TOK2, C);
    float *drstd = dev_array<float>(d, DEV_TOK3, C), *dout = dev_array<float>(d, DEV_OUT, n);
    if (!din || !dw || !db || !xc || !dev || !x || !dmean || !dvar || !drstd || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    widen_kernel KRN_LAUNCH(n)(xc, din, s);
    int rc = krn_dev_launched("batch norm channels");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_row_mean_site(ctx, "bn.mean", dmean, mean, xc, NULL, C, s.M)))
        return rc;
    dev_kernel KRN_LAUNCH(n)(dev, xc, dmean, s);
    if ((rc = krn_dev_launched("batch norm deviations")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_row_mean_site(ctx, "bn.var", dvar, NULL, dev, dev, C, s.M)))
        return rc;
    rstd_kernel KRN_LAUNCH(C)(x, dvar, eps, C);
    if ((rc = krn_dev_launched("bn.rstd")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "bn.rstd", drstd, rstd, x, C, NULL)))
        return rc;
    out_kernel KRN_LAUNCH(n)(x, dev, drstd, dw, db, s);
    if ((rc = krn_dev_launched("bn.fwd")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "bn.fwd", dout, out, x, n, NULL)))
        return rc;
    return bn_running(ctx, d, running_mean, running_var, dmean, dvar, C, s.M, momentum, x);
}

static __global__ void eval_kernel(double *x, const float *inp, const float *weight, const float *bias,
                                   const float *rm, const float *rv, double eps, size_t C, size_t HW, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        size_t c = i / HW % C;
        double r = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)rv[c], eps)));
        x[i] = __dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn((double)inp[i], (double)rm[c]), r), (double)weight[c]),
                         (double)bias[c]);
    }
}

extern "C" int krn_cuda_batchnorm_eval(krn_ctx *ctx, float *out, const float *inp, const float *weight,
                                       const float *bias, const float *running_mean, const float *running_var,
                                       size_t N, size_t C, size_t HW, double eps)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * C * HW;
    float *din = krn_dev_upload(d, DEV_A, inp, n);
    float *dw = krn_dev_upload(d, DEV_C, weight, C), *db = krn_dev_upload(d, DEV_D, bias, C);
    float *drm = krn_dev_upload(d, DEV_E, running_mean, C), *drv = krn_dev_upload(d, DEV_F, running_var, C);
    float *dout = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!din || !dw || !db || !drm || !drv || !dout || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    eval_kernel KRN_LAUNCH(n)(x, din, dw, db, drm, drv, eps, C, HW, n);
    int rc = krn_dev_launched("bn.eval");
    return rc ? krn_cuda_fail(ctx, rc) : krn_cuda_site(ctx, "bn.eval", dout, out, x, n, NULL);
}

/* norm, dout and dnorm channel-major (fixed expressions of grid values). */
static __global__ void grad_kernel(double *norm, double *gc, double *dnorm, const float *inp, const float *dout,
                                   const float *weight, const float *mean, const float *rstd, bn_shape s)
{
    KRN_GRID_LOOP(k, s.C * s.M) {
        size_t c = k / s.M, i = nchw(s, c, k % s.M);
        norm[k] = __dmul_rn(__dsub_rn((double)inp[i], (double)mean[c]), (double)rstd[c]);
        gc[k] = (double)dout[i];
        dnorm[k] = __dmul_rn((double)weight[c], gc[k]);
    }
}

static __global__ void dinp_kernel(double *x, const double *norm, const double *dnorm, const float *dmean,
                                   const float *dnmean, const float *rstd, const float *dinp, bn_shape s)
{
    KRN_GRID_LOOP(k, s.C * s.M) {
        size_t c = k / s.M, i = nchw(s, c, k % s.M);
        double t = __dsub_rn(__dsub_rn(dnorm[k], (double)dmean[c]), __dmul_rn(norm[k], (double)dnmean[c]));
        x[i] = __dadd_rn(__dmul_rn(t, (double)rstd[c]), (double)dinp[i]);
    }
}

extern "C" int krn_cuda_batchnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                                           const float *dout, const float *inp, const float *weight,
                                           const float *mean, const float *rstd, size_t N, size_t C, size_t HW)
{
    krn_dev *d = krn_dev_of(ctx);
    bn_shape s = {N, C, HW, N * HW};
    size_t n = C * s.M;
    float *din = krn_dev_upload(d, DEV_A, inp, n), *dg = krn_dev_upload(d, DEV_B, dout, n);
    float *dw = krn_dev_upload(d, DEV_C, weight, C), *dmn = krn_dev_upload(d, DEV_D, mean, C);
    float *drs = krn_dev_upload(d, DEV_E, rstd, C);
    double *norm = dev_array<double>(d, DEV_F, n), *gc = dev_array<double>(d, DEV_G, n);
    double *dnorm = dev_array<double>(d, DEV_MAG, n), *x = dev_array<double>(d, DEV_X, n);
    float *dmean = dev_array<float>(d, DEV_TOK, C), *dnmean = dev_array<float>(d, DEV_TOK2, C);
    float *res = dev_array<float>(d, DEV_OUT, n);
    if (!din || !dg || !dw || !dmn || !drs || !norm || !gc || !dnorm || !x || !dmean || !dnmean || !res)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    grad_kernel KRN_LAUNCH(n)(norm, gc, dnorm, din, dg, dw, dmn, drs, s);
    int rc = krn_dev_launched("batch norm gradients");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_row_mean_site(ctx, "bn.bwd.dmean", dmean, NULL, dnorm, NULL, C, s.M)) ||
        (rc = krn_cuda_row_mean_site(ctx, "bn.bwd.dnmean", dnmean, NULL, dnorm, norm, C, s.M)) ||
        (rc = krn_cuda_row_sum_site(ctx, "bn.bwd.dbias", dbias, gc, NULL, C, s.M)) ||
        (rc = krn_cuda_row_sum_site(ctx, "bn.bwd.dweight", dweight, norm, gc, C, s.M)))
        return rc;
    float *dd = krn_dev_upload(d, DEV_OUT2, dinp, n);
    if (!dd)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    dinp_kernel KRN_LAUNCH(n)(x, norm, dnorm, dmean, dnmean, drs, dd, s);
    if ((rc = krn_dev_launched("bn.bwd.dinp")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "bn.bwd.dinp", res, dinp, x, n, NULL);
}
