/* Gradient norm, clipping factor and AdamW on the device (kernels/ops.h;
 * bands in docs/op-bounds.md). "adamw.pow1/2" use CUDA's pow (2 ulps
 * documented, within KRN_LIBM_ULP = 4). */
#include "kernels/cuda/device.cuh"

/* The sum of squares of each chunk of KRN_GEMM_CHUNK gradients, and its
 * magnitude (the same terms: all non-negative). */
static __global__ void chunk_sumsq_kernel(double *part, const float *g, size_t n, size_t nch)
{
    KRN_GRID_LOOP(j, nch) {
        size_t k0 = j * KRN_GEMM_CHUNK, kc = n - k0 < KRN_GEMM_CHUNK ? n - k0 : KRN_GEMM_CHUNK;
        double s = 0;
        for (size_t k = k0; k < k0 + kc; k++)
            s = __dadd_rn(s, __dmul_rn((double)g[k], (double)g[k]));
        part[j] = s;
    }
}

/* One thread: the chunk sums added in increasing chunk order (x[0]); the
 * magnitude, in any order (x[1]). */
static __global__ void chunk_total_kernel(double *x, const double *part, size_t nch)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double s = part[0];
    for (size_t j = 1; j < nch; j++)
        s = __dadd_rn(s, part[j]);
    x[0] = s;
    x[1] = s;
}

static __global__ void scalar_kernel(double *x, const float *in, int what, double a, double b)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    switch (what) {
    case 0: /* gradnorm.sqrt */
        x[0] = __dsqrt_rn((double)in[0]);
        break;
    case 1: /* pow(beta1, t), pow(beta2, t) */
        x[0] = pow(a, b);
        break;
    case 2: /* 1 - p */
        x[0] = __dsub_rn(1.0, (double)in[0]);
        break;
    }
}

/* A one-element site on the device value x[0], its grid value to *host_out. */
static int scalar_site(krn_ctx *ctx, const char *name, float *dev_out, float *host_out, const double *x,
                       const krn_band *band)
{
    return krn_cuda_site(ctx, name, dev_out, host_out, x, 1, band);
}

extern "C" int krn_cuda_grad_norm(krn_ctx *ctx, float *norm, const float *grads, size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t nch = krn_cuda_nchunks(n, KRN_GEMM_CHUNK);
    float *dg = krn_dev_upload(d, DEV_A, grads, n), *dsq = dev_array<float>(d, DEV_OUT, 1);
    float *dnorm = dev_array<float>(d, DEV_OUT2, 1);
    double *part = dev_array<double>(d, DEV_B, nch), *x = dev_array<double>(d, DEV_X, 2);
    if (!dg || !dsq || !dnorm || !part || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    chunk_sumsq_kernel KRN_LAUNCH(nch)(part, dg, n, nch);
    chunk_total_kernel<<<1, 1>>>(x, part, nch);
    double hx[2];
    int rc = krn_dev_launched("gradnorm.sumsq");
    if (rc || (rc = krn_dev_get(hx, x, sizeof hx)))
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_reduction(KRN_BAND_CONST, n, 1.0, 0);
    band.scale *= hx[1];
    float sumsq;
    if ((rc = scalar_site(ctx, "gradnorm.sumsq", dsq, &sumsq, x, &band)))
        return rc;
    scalar_kernel<<<1, 1>>>(x, dsq, 0, 0, 0);
    if ((rc = krn_dev_launched("gradnorm.sqrt")))
        return krn_cuda_fail(ctx, rc);
    return scalar_site(ctx, "gradnorm.sqrt", dnorm, norm, x, NULL);
}

extern "C" int krn_cuda_clip_factor(krn_ctx *ctx, float *factor, float norm, float max_norm)
{
    krn_dev *d = krn_dev_of(ctx);
    double *x = dev_array<double>(d, DEV_X, 1);
    float *dout = dev_array<float>(d, DEV_OUT, 1);
    if (!x || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    /* one exact IEEE division: the same value on every machine */
    double v = norm > max_norm ? (double)max_norm / (double)norm : 1.0;
    int rc = krn_dev_put(x, &v, sizeof v);
    return rc ? krn_cuda_fail(ctx, rc) : scalar_site(ctx, "clip.factor", dout, factor, x, NULL);
}

extern "C" int krn_cuda_adamw_corrections(krn_ctx *ctx, float *bc1, float *bc2, float beta1, float beta2,
                                          uint64_t t)
{
    krn_dev *d = krn_dev_of(ctx);
    double *x = dev_array<double>(d, DEV_X, 1);
    float *p = dev_array<float>(d, DEV_OUT, 2), *bc = dev_array<float>(d, DEV_OUT2, 2);
    if (!x || !p || !bc)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    krn_band libm = krn_band_libm();
    const float beta[2] = {beta1, beta2};
    const char *pow_name[2] = {"adamw.pow1", "adamw.pow2"}, *bc_name[2] = {"adamw.bc1", "adamw.bc2"};
    float *bc_out[2] = {bc1, bc2};
    int rc;
    for (int k = 0; k < 2; k++) {
        scalar_kernel<<<1, 1>>>(x, NULL, 1, (double)beta[k], (double)t);
        if ((rc = krn_dev_launched(pow_name[k])))
            return krn_cuda_fail(ctx, rc);
        if ((rc = scalar_site(ctx, pow_name[k], p + k, NULL, x, &libm)))
            return rc;
    }
    for (int k = 0; k < 2; k++) {
        scalar_kernel<<<1, 1>>>(x, p + k, 2, 0, 0);
        if ((rc = krn_dev_launched(bc_name[k])))
            return krn_cuda_fail(ctx, rc);
        if ((rc = scalar_site(ctx, bc_name[k], bc + k, bc_out[k], x, NULL)))
            return rc;
    }
    return 0;
}

static __global__ void m_kernel(double *x, const float *m, const float *g, double b1, double s, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double gi = __dmul_rn((double)g[i], s);
        x[i] = __dadd_rn(__dmul_rn(b1, (double)m[i]), __dmul_rn(__dsub_rn(1.0, b1), gi));
    }
}

static __global__ void v_kernel(double *x, const float *v, const float *g, double b2, double s, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double gi = __dmul_rn((double)g[i], s);
        x[i] = __dadd_rn(__dmul_rn(b2, (double)v[i]), __dmul_rn(__dsub_rn(1.0, b2), __dmul_rn(gi, gi)));
    }
}

static __global__ void param_kernel(double *x, const float *params, const float *m, const float *v, double bc1,
                                    double bc2, double lr, double eps, double wd, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double p = params[i];
        double mhat = __ddiv_rn((double)m[i], bc1), vhat = __ddiv_rn((double)v[i], bc2);
        double step = __dadd_rn(__ddiv_rn(mhat, __dadd_rn(__dsqrt_rn(vhat), eps)), __dmul_rn(wd, p));
        x[i] = __dsub_rn(p, __dmul_rn(lr, step));
    }
}

extern "C" int krn_cuda_adamw_update(krn_ctx *ctx, float *params, float *m, float *v, const float *grads,
                                     float bc1, float bc2, float lr, float beta1, float beta2, float eps,
                                     float weight_decay, float grad_scale, size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *dp = krn_dev_upload(d, DEV_A, params, n), *dm = krn_dev_upload(d, DEV_B, m, n);
    float *dv = krn_dev_upload(d, DEV_C, v, n), *dg = krn_dev_upload(d, DEV_D, grads, n);
    float *res_m = dev_array<float>(d, DEV_OUT, n), *res_v = dev_array<float>(d, DEV_OUT2, n);
    float *res_p = dev_array<float>(d, DEV_OUT3, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!dp || !dm || !dv || !dg || !res_m || !res_v || !res_p || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    m_kernel KRN_LAUNCH(n)(x, dm, dg, (double)beta1, (double)grad_scale, n);
    int rc = krn_dev_launched("adamw.m");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "adamw.m", res_m, m, x, n, NULL)))
        return rc;
    v_kernel KRN_LAUNCH(n)(x, dv, dg, (double)beta2, (double)grad_scale, n);
    if ((rc = krn_dev_launched("adamw.v")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "adamw.v", res_v, v, x, n, NULL)))
        return rc;
    param_kernel KRN_LAUNCH(n)(x, dp, res_m, res_v, (double)bc1, (double)bc2, (double)lr, (double)eps,
                               (double)weight_decay, n);
    if ((rc = krn_dev_launched("adamw.param")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "adamw.param", res_p, params, x, n, NULL);
}
