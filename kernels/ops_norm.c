/* layernorm forward and backward (kernels/ops.h). Bands: docs/op-bounds.md. */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/reduce.h"

/* The epsilon of the contract, an FP64 literal. */
#define LAYERNORM_EPS 1e-5

/* Site `name` (N): out[i] = (sum_c a[i,c]*b[i,c]) / C per row (b NULL: plain
 * sum), a reduction over C followed by one division. */
static int row_mean_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                         const double *a, const double *b, size_t N, size_t C, double *x,
                         double *mag)
{
    for (size_t i = 0; i < N; i++) {
        const double *ai = a + i * C, *bi = b ? b + i * C : NULL;
        x[i] = krn_chunked_dot(be, ai, 1, bi, 1, C) / (double)C;
        double m = 0;
        for (size_t c = 0; c < C; c++)
            m += fabs(bi ? ai[c] * bi[c] : ai[c]);
        mag[i] = m;
    }
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, C, 1.0 / (double)C, 1);
    band.a = mag;
    return krn_site(ctx, name, out, x, N, &band);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("layernorm fwd"). */
int krn_layernorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, size_t N, size_t C)
{
    static const char op[] = "layernorm_forward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "mean", mean)) ||
        (rc = krn_check_ptr(op, "rstd", rstd)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "weight", weight)) || (rc = krn_check_ptr(op, "bias", bias)) ||
        (rc = krn_check_dims(op, N, C, &n)))
        return rc;
    KRN_CUDA_DISPATCH(ctx, krn_cuda_layernorm_forward(ctx, out, mean, rstd, inp, weight, bias, N, C));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *xd = krn_doubles(n, op), *dev = krn_doubles(n, op), *x = krn_doubles(n, op);
    double *mag = krn_doubles(N, op);
    float *var = krn_floats(N, op);
    if (!xd || !dev || !x || !mag || !var)
        goto done;
    krn_widen(xd, inp, n);
    if ((rc = row_mean_site(ctx, &be, "layernorm.mean", mean, xd, NULL, N, C, x, mag)))
        goto done;
    for (size_t i = 0; i < N; i++)
        for (size_t c = 0; c < C; c++)
            dev[i * C + c] = xd[i * C + c] - (double)mean[i];
    if ((rc = row_mean_site(ctx, &be, "layernorm.var", var, dev, dev, N, C, x, mag)))
        goto done;
    for (size_t i = 0; i < N; i++)
        x[i] = 1.0 / sqrt((double)var[i] + LAYERNORM_EPS);
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, "layernorm.rstd", rstd, x, N, &band)))
        goto done;
    for (size_t i = 0; i < N; i++)
        for (size_t c = 0; c < C; c++)
            x[i * C + c] = (dev[i * C + c] * (double)rstd[i]) * (double)weight[c] + (double)bias[c];
    rc = krn_site(ctx, "layernorm.fwd", out, x, n, &band);
done:
    free(xd);
    free(dev);
    free(x);
    free(mag);
    free(var);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("layernorm bwd"). */
int krn_layernorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                           const float *dout, const float *inp, const float *weight,
                           const float *mean, const float *rstd, size_t N, size_t C)
{
    static const char op[] = "layernorm_backward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dweight", dweight)) ||
        (rc = krn_check_ptr(op, "dbias", dbias)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "weight", weight)) ||
        (rc = krn_check_ptr(op, "mean", mean)) || (rc = krn_check_ptr(op, "rstd", rstd)) ||
        (rc = krn_check_dims(op, N, C, &n)))
        return rc;
    KRN_CUDA_DISPATCH(ctx, krn_cuda_layernorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *norm = krn_doubles(n, op), *dnorm = krn_doubles(n, op), *x = krn_doubles(n, op);
    double *mag = krn_doubles(N, op);
    float *dmean = krn_floats(N, op), *dnmean = krn_floats(N, op);
    if (!norm || !dnorm || !x || !mag || !dmean || !dnmean)
        goto done;
    /* norm, dnorm: fixed expressions of grid values, identical everywhere. */
    for (size_t i = 0; i < N; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            norm[k] = ((double)inp[k] - (double)mean[i]) * (double)rstd[i];
            dnorm[k] = (double)weight[c] * (double)dout[k];
        }
    if ((rc = row_mean_site(ctx, &be, "layernorm.bwd.dmean", dmean, dnorm, NULL, N, C, x, mag)) ||
        (rc = row_mean_site(ctx, &be, "layernorm.bwd.dnmean", dnmean, dnorm, norm, N, C, x, mag)))
        goto done;
    krn_widen(x, dout, n);
    if ((rc = krn_colsum_site(ctx, &be, "layernorm.bwd.dbias", dbias, x, N, C)))
        goto done;
    for (size_t k = 0; k < n; k++)
        x[k] = norm[k] * (double)dout[k];
    if ((rc = krn_colsum_site(ctx, &be, "layernorm.bwd.dweight", dweight, x, N, C)))
        goto done;
    for (size_t i = 0; i < N; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            x[k] = ((dnorm[k] - (double)dmean[i]) - norm[k] * (double)dnmean[i]) * (double)rstd[i] +
                   (double)dinp[k];
        }
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, "layernorm.bwd.dinp", dinp, x, n, &band);
done:
    free(norm);
    free(dnorm);
    free(x);
    free(mag);
    free(dmean);
    free(dnmean);
    return rc;
}
