/* RMSNorm forward and backward on the device (kernels/ops.h; the CPU op is
 * kernels/ops_norm.c, bands in docs/op-bounds.md): layernorm's row loops
 * with the mean taken as 0, the same sites in the same order. Row
 * reductions run one thread per row in the contract's chunked order
 * (krn_cuda_row_mean_site, reduce.cu). */
#include "kernels/cuda/device.cuh"

static __global__ void rstd_kernel(double *x, const float *ms, double eps, size_t N)
{
    KRN_GRID_LOOP(i, N)
    x[i] = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)ms[i], eps)));
}

static __global__ void fwd_kernel(double *x, const double *xd, const float *rstd, const float *weight, size_t N,
                                  size_t C)
{
    KRN_GRID_LOOP(k, N * C)
    x[k] = __dmul_rn(__dmul_rn(xd[k], (double)rstd[k / C]), (double)weight[k % C]);
}

extern "C" int krn_cuda_rmsnorm_forward(krn_ctx *ctx, float *out, float *rstd, const float *inp,
                                        const float *weight, double eps, size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * C;
    double *xd = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, n);
    float *dw = krn_dev_upload(d, DEV_C, weight, C);
    double *x = dev_array<double>(d, DEV_X, n);
    float *dms = dev_array<float>(d, DEV_F, N), *drstd = dev_array<float>(d, DEV_OUT2, N);
    float *dout = dev_array<float>(d, DEV_OUT, n);
    if (!xd || !dw || !x || !dms || !drstd || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc;
    if ((rc = krn_cuda_row_mean_site(ctx, "rmsnorm.ms", dms, NULL, xd, xd, N, C)))
        return rc;
    rstd_kernel KRN_LAUNCH(N)(x, dms, eps, N);
    if ((rc = krn_dev_launched("rmsnorm.rstd")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "rmsnorm.rstd", drstd, rstd, x, N, NULL)))
        return rc;
    fwd_kernel KRN_LAUNCH(n)(x, xd, drstd, dw, N, C);
    if ((rc = krn_dev_launched("rmsnorm.fwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "rmsnorm.fwd", dout, out, x, n, NULL);
}

/* norm = x*rstd, dnorm = weight*dout per element (exact). */
static __global__ void norms_kernel(double *norm, double *dnorm, const float *inp, const float *rstd,
                                    const float *weight, const float *dout, size_t N, size_t C)
{
    KRN_GRID_LOOP(k, N * C) {
        norm[k] = __dmul_rn((double)inp[k], (double)rstd[k / C]);
        dnorm[k] = __dmul_rn((double)weight[k % C], (double)dout[k]);
    }
}

static __global__ void dinp_kernel(double *x, const double *norm, const double *dnorm, const float *dnmean,
                                   const float *rstd, const float *dinp, size_t N, size_t C)
{
    KRN_GRID_LOOP(k, N * C) {
        size_t i = k / C;
        double t = __dsub_rn(dnorm[k], __dmul_rn(norm[k], (double)dnmean[i]));
        x[k] = __dadd_rn(__dmul_rn(t, (double)rstd[i]), (double)dinp[k]);
    }
}

extern "C" int krn_cuda_rmsnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, const float *dout,
                                         const float *inp, const float *weight, const float *rstd, size_t N,
                                         size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * C;
    float *din = krn_dev_upload(d, DEV_A, inp, n), *dw = krn_dev_upload(d, DEV_C, weight, C);
    double *g = krn_dev_upload_wide(d, DEV_D, DEV_B, dout, n);
    float *drs = krn_dev_upload(d, DEV_G, rstd, N);
    double *norm = dev_array<double>(d, DEV_E, n), *dnorm = dev_array<double>(d, DEV_MAG, n);
    double *x = dev_array<double>(d, DEV_X, n);
    float *dnmean = dev_array<float>(d, DEV_TOK2, N), *res = dev_array<float>(d, DEV_OUT, n);
    if (!din || !dw || !g || !drs || !norm || !dnorm || !x || !dnmean || !res)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    const float *dg = (const float *)d->buf[DEV_D];
    norms_kernel KRN_LAUNCH(n)(norm, dnorm, din, drs, dw, dg, N, C);
    int rc = krn_dev_launched("rmsnorm norms");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_row_mean_site(ctx, "rmsnorm.bwd.dnmean", dnmean, NULL, dnorm, norm, N, C)))
        return rc;
    if ((rc = krn_cuda_mul("rmsnorm norm*dout", x, norm, g, n)))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_colsum_site(ctx, "rmsnorm.bwd.dweight", dweight, x, N, C)))
        return rc;
    float *dd = krn_dev_upload(d, DEV_F, dinp, n);
    if (!dd)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    dinp_kernel KRN_LAUNCH(n)(x, norm, dnorm, dnmean, drs, dd, N, C);
    if ((rc = krn_dev_launched("rmsnorm.bwd.dinp")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "rmsnorm.bwd.dinp", res, dinp, x, n, NULL);
}
