/* SwiGLU forward and backward on the device (kernels/ops.h; the CPU op is
 * kernels/ops_act.c): "swiglu.exp" uses CUDA's double exp (1 ulp
 * documented, within the contract's KRN_LIBM_ULP = 4; docs/op-bounds.md),
 * the rest are exact sites on the grid e = exp(-|a|). */
#include "kernels/cuda/device.cuh"

static __global__ void exp_kernel(double *x, const float *a, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = exp(-fabs((double)a[i]));
}

/* sig(a) from the grid e: 1/(1 + e) for a >= 0, e/(1 + e) below. */
__device__ static inline double sig_of(double a, double e)
{
    return a >= 0 ? __ddiv_rn(1.0, __dadd_rn(1.0, e)) : __ddiv_rn(e, __dadd_rn(1.0, e));
}

static __global__ void fwd_kernel(double *x, const float *a, const float *b, const float *e, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double av = a[i];
        x[i] = __dmul_rn(__dmul_rn(av, sig_of(av, e[i])), (double)b[i]);
    }
}

/* da (which 0) or db (which 1) plus its old value. */
static __global__ void bwd_kernel(double *x, const float *dout, const float *a, const float *b, const float *e,
                                  const float *old, int which, size_t n)
{
    KRN_GRID_LOOP(i, n) {
        double av = a[i], sig = sig_of(av, e[i]), g = dout[i], v;
        if (which == 0)
            v = __dmul_rn(__dmul_rn(g, (double)b[i]),
                          __dmul_rn(sig, __dadd_rn(1.0, __dmul_rn(av, __dsub_rn(1.0, sig)))));
        else
            v = __dmul_rn(g, __dmul_rn(av, sig));
        x[i] = __dadd_rn(v, (double)old[i]);
    }
}

/* Site "swiglu.exp" into e (device), from a (device). */
static int exp_site(krn_ctx *ctx, float *e, const float *a, double *x, size_t n)
{
    exp_kernel KRN_LAUNCH(n)(x, a, n);
    int rc = krn_dev_launched("swiglu.exp");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_libm();
    return krn_cuda_site(ctx, "swiglu.exp", e, NULL, x, n, &band);
}

extern "C" int krn_cuda_swiglu_forward(krn_ctx *ctx, float *out, const float *a, const float *b, size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *da = krn_dev_upload(d, DEV_A, a, n), *db = krn_dev_upload(d, DEV_B, b, n);
    float *e = dev_array<float>(d, DEV_OUT2, n), *res = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!da || !db || !e || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = exp_site(ctx, e, da, x, n);
    if (rc)
        return rc;
    fwd_kernel KRN_LAUNCH(n)(x, da, db, e, n);
    if ((rc = krn_dev_launched("swiglu.fwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "swiglu.fwd", res, out, x, n, NULL);
}

extern "C" int krn_cuda_swiglu_backward(krn_ctx *ctx, float *da, float *db, const float *dout, const float *a,
                                        const float *b, size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *dav = krn_dev_upload(d, DEV_A, a, n), *dbv = krn_dev_upload(d, DEV_B, b, n);
    float *dg = krn_dev_upload(d, DEV_C, dout, n);
    float *oda = krn_dev_upload(d, DEV_D, da, n), *odb = krn_dev_upload(d, DEV_E, db, n);
    float *e = dev_array<float>(d, DEV_OUT2, n), *res = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!dav || !dbv || !dg || !oda || !odb || !e || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = exp_site(ctx, e, dav, x, n);
    if (rc)
        return rc;
    for (int which = 0; which < 2; which++) {
        const char *name = which ? "swiglu.bwd.db" : "swiglu.bwd.da";
        bwd_kernel KRN_LAUNCH(n)(x, dg, dav, dbv, e, which ? odb : oda, which, n);
        if ((rc = krn_dev_launched(name)))
            return krn_cuda_fail(ctx, rc);
        if ((rc = krn_cuda_site(ctx, name, res, which ? db : da, x, n, NULL)))
            return rc;
    }
    return 0;
}
