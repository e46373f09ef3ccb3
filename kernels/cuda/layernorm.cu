/* layernorm forward and backward on the device (kernels/ops.h; bands in
 * docs/op-bounds.md). Row reductions run one thread per row in the
 * contract's chunked order (krn_cuda_row_mean_site, reduce.cu). */
#include "kernels/cuda/device.cuh"

#define LAYERNORM_EPS 1e-5

static __global__ void dev_kernel(double *dev, const double *xd, const float *mean, size_t N, size_t C)
{
    KRN_GRID_LOOP(k, N * C)
    dev[k] = __dsub_rn(xd[k], (double)mean[k / C]);
}

static __global__ void rstd_kernel(double *x, const float *var, size_t N)
{
    KRN_GRID_LOOP(i, N)
    x[i] = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)var[i], LAYERNORM_EPS)));
}

static __global__ void fwd_kernel(double *x, const double *dev, const float *rstd, const float *weight,
                                  const float *bias, size_t N, size_t C)
{
    KRN_GRID_LOOP(k, N * C) {
        size_t i = k / C, c = k % C;
        x[k] = __dadd_rn(__dmul_rn(__dmul_rn(dev[k], (double)rstd[i]), (double)weight[c]), (double)bias[c]);
    }
}

extern "C" int krn_cuda_layernorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd,
                                          const float *inp, const float *weight, const float *bias,
                                          size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * C;
    double *xd = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, n);
    float *dw = krn_dev_upload(d, DEV_C, weight, C), *db = krn_dev_upload(d, DEV_D, bias, C);
    double *dev = dev_array<double>(d, DEV_E, n), *x = dev_array<double>(d, DEV_X, n);
    float *dmean = dev_array<float>(d, DEV_F, N), *dvar = dev_array<float>(d, DEV_G, N);
    float *drstd = dev_array<float>(d, DEV_OUT2, N), *dout = dev_array<float>(d, DEV_OUT, n);
    if (!xd || !dw || !db || !dev || !x || !dmean || !dvar || !drstd || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc;
    if ((rc = krn_cuda_row_mean_site(ctx, "layernorm.mean", dmean, mean, xd, NULL, N, C)))
        return rc;
    dev_kernel KRN_LAUNCH(n)(dev, xd, dmean, N, C);
    if ((rc = krn_dev_launched("layernorm deviations")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_row_mean_site(ctx, "layernorm.var", dvar, NULL, dev, dev, N, C)))
        return rc;
    rstd_kernel KRN_LAUNCH(N)(x, dvar, N);
    if ((rc = krn_dev_launched("layernorm.rstd")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "layernorm.rstd", drstd, rstd, x, N, NULL)))
        return rc;
    fwd_kernel KRN_LAUNCH(n)(x, dev, drstd, dw, db, N, C);
    if ((rc = krn_dev_launched("layernorm.fwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "layernorm.fwd", dout, out, x, n, NULL);
}

static __global__ void norms_kernel(double *norm, double *dnorm, const float *inp, const float *mean,
                                    const float *rstd, const float *weight, const float *dout, size_t N,
                                    size_t C)
{
    KRN_GRID_LOOP(k, N * C) {
        size_t i = k / C, c = k % C;
        norm[k] = __dmul_rn(__dsub_rn((double)inp[k], (double)mean[i]), (double)rstd[i]);
        dnorm[k] = __dmul_rn((double)weight[c], (double)dout[k]);
    }
}

static __global__ void dinp_kernel(double *x, const double *norm, const double *dnorm, const float *dmean,
                                   const float *dnmean, const float *rstd, const float *dinp, size_t N,
                                   size_t C)
{
    KRN_GRID_LOOP(k, N * C) {
        size_t i = k / C;
        double t = __dsub_rn(__dsub_rn(dnorm[k], (double)dmean[i]), __dmul_rn(norm[k], (double)dnmean[i]));
        x[k] = __dadd_rn(__dmul_rn(t, (double)rstd[i]), (double)dinp[k]);
    }
}

extern "C" int krn_cuda_layernorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                                           const float *dout, const float *inp, const float *weight,
                                           const float *mean, const float *rstd, size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * C;
    float *din = krn_dev_upload(d, DEV_A, inp, n), *dw = krn_dev_upload(d, DEV_C, weight, C);
    double *g = krn_dev_upload_wide(d, DEV_D, DEV_B, dout, n);
    float *dmn = krn_dev_upload(d, DEV_F, mean, N), *drs = krn_dev_upload(d, DEV_G, rstd, N);
    double *norm = dev_array<double>(d, DEV_E, n), *dnorm = dev_array<double>(d, DEV_MAG, n);
    double *x = dev_array<double>(d, DEV_X, n);
    float *dmean = dev_array<float>(d, DEV_TOK, N), *dnmean = dev_array<float>(d, DEV_TOK2, N);
    float *res = dev_array<float>(d, DEV_OUT, n);
    if (!din || !dw || !g || !dmn || !drs || !norm || !dnorm || !x || !dmean || !dnmean || !res)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    const float *dg = (const float *)d->buf[DEV_D];
    norms_kernel KRN_LAUNCH(n)(norm, dnorm, din, dmn, drs, dw, dg, N, C);
    int rc = krn_dev_launched("layernorm norms");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_row_mean_site(ctx, "layernorm.bwd.dmean", dmean, NULL, dnorm, NULL, N, C)) ||
        (rc = krn_cuda_row_mean_site(ctx, "layernorm.bwd.dnmean", dnmean, NULL, dnorm, norm, N, C)) ||
        (rc = krn_cuda_colsum_site(ctx, "layernorm.bwd.dbias", dbias, g, N, C)))
        return rc;
    if ((rc = krn_cuda_mul("layernorm norm*dout", x, norm, g, n)))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_colsum_site(ctx, "layernorm.bwd.dweight", dweight, x, N, C)))
        return rc;
    float *dd = krn_dev_upload(d, DEV_H, dinp, n);
    if (!dd)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    dinp_kernel KRN_LAUNCH(n)(x, norm, dnorm, dmean, dnmean, drs, dd, N, C);
    if ((rc = krn_dev_launched("layernorm.bwd.dinp")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "layernorm.bwd.dinp", res, dinp, x, n, NULL);
}
