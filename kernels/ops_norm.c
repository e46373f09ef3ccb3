/* layernorm forward and backward (kernels/ops.h). Bands: docs/op-bounds.md. */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/reduce.h"

/* The epsilon of the contract, an FP64 literal. */
#define LAYERNORM_EPS 1e-5

/* Rows per range of the loops below on the pool (krn_parallel_ranges): each
 * row's values depend on that row alone. */
#define LN_ROWS 16

/* The row loops' operands: the site values' inputs and outputs, by op. */
typedef struct {
    const krn_cpu *be;
    const double *a, *b;
    double *x, *xd, *dev, *norm, *dnorm;
    const float *inp, *mean, *rstd, *weight, *bias, *dout, *dinp, *dmean, *dnmean;
    size_t C;
} ln_job;

/* forward: the input's deviations (after the mean), then (after rstd) the
 * output's values */
static void dev_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++)
            j->dev[i * C + c] = j->xd[i * C + c] - (double)j->mean[i];
}

static void out_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++)
            j->x[i * C + c] = (j->dev[i * C + c] * (double)j->rstd[i]) * (double)j->weight[c] + (double)j->bias[c];
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
    ln_job j = {.be = &be, .x = x, .xd = xd, .dev = dev, .mean = mean, .rstd = rstd,
                .weight = weight, .bias = bias, .C = C};
    if ((rc = krn_widen_rows(&be, xd, NULL, inp, N, C)) ||
        (rc = krn_row_mean_site(ctx, &be, "layernorm.mean", mean, xd, NULL, N, C, x, mag)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, dev_rows, &j)) ||
        (rc = krn_row_mean_site(ctx, &be, "layernorm.var", var, dev, dev, N, C, x, mag)))
        goto done;
    for (size_t i = 0; i < N; i++)
        x[i] = 1.0 / sqrt((double)var[i] + LAYERNORM_EPS);
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, "layernorm.rstd", rstd, x, N, &band)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, out_rows, &j)))
        goto done;
    rc = krn_site(ctx, "layernorm.fwd", out, x, n, &band);
done:
    free(xd);
    free(dev);
    free(x);
    free(mag);
    free(var);
    return rc;
}

/* backward: norm and dnorm, then dweight's column-sum operand, then dinp's values */
static void norm_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            j->norm[k] = ((double)j->inp[k] - (double)j->mean[i]) * (double)j->rstd[i];
            j->dnorm[k] = (double)j->weight[c] * (double)j->dout[k];
        }
}

static void normdout_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    for (size_t k = i0 * j->C; k < i1 * j->C; k++)
        j->x[k] = j->norm[k] * (double)j->dout[k];
}

static void dinp_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            j->x[k] = ((j->dnorm[k] - (double)j->dmean[i]) - j->norm[k] * (double)j->dnmean[i]) *
                          (double)j->rstd[i] +
                      (double)j->dinp[k];
        }
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
    ln_job j = {.be = &be, .x = x, .norm = norm, .dnorm = dnorm, .inp = inp, .mean = mean,
                .rstd = rstd, .weight = weight, .dout = dout, .dinp = dinp, .dmean = dmean,
                .dnmean = dnmean, .C = C};
    if ((rc = krn_parallel_ranges(&be, N, LN_ROWS, norm_rows, &j)) ||
        (rc = krn_row_mean_site(ctx, &be, "layernorm.bwd.dmean", dmean, dnorm, NULL, N, C, x, mag)) ||
        (rc = krn_row_mean_site(ctx, &be, "layernorm.bwd.dnmean", dnmean, dnorm, norm, N, C, x, mag)) ||
        (rc = krn_widen_rows(&be, x, NULL, dout, N, C)) ||
        (rc = krn_colsum_site(ctx, &be, "layernorm.bwd.dbias", dbias, x, N, C)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, normdout_rows, &j)) ||
        (rc = krn_colsum_site(ctx, &be, "layernorm.bwd.dweight", dweight, x, N, C)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, dinp_rows, &j)))
        goto done;
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

/* RMSNorm (kernels/ops.h): the same row loops with the mean taken as 0. */
static void rms_out_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++)
            j->x[i * C + c] = (j->xd[i * C + c] * (double)j->rstd[i]) * (double)j->weight[c];
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("rmsnorm fwd"). */
int krn_rmsnorm_forward(krn_ctx *ctx, float *out, float *rstd, const float *inp, const float *weight,
                        double eps, size_t N, size_t C)
{
    static const char op[] = "rmsnorm_forward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "rstd", rstd)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "weight", weight)) ||
        (rc = krn_check_dims(op, N, C, &n)))
        return rc;
    if (!(eps > 0))
        return ovt_fail(OVT_EINVAL, "%s: eps %g is not positive", op, eps);
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rmsnorm_forward(ctx, out, rstd, inp, weight, eps, N, C));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *xd = krn_doubles(n, op), *x = krn_doubles(n, op), *mag = krn_doubles(N, op);
    float *ms = krn_floats(N, op);
    if (!xd || !x || !mag || !ms)
        goto done;
    ln_job j = {.be = &be, .x = x, .xd = xd, .rstd = rstd, .weight = weight, .C = C};
    if ((rc = krn_widen_rows(&be, xd, NULL, inp, N, C)) ||
        (rc = krn_row_mean_site(ctx, &be, "rmsnorm.ms", ms, xd, xd, N, C, x, mag)))
        goto done;
    for (size_t i = 0; i < N; i++)
        x[i] = 1.0 / sqrt((double)ms[i] + eps);
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, "rmsnorm.rstd", rstd, x, N, &band)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, rms_out_rows, &j)))
        goto done;
    rc = krn_site(ctx, "rmsnorm.fwd", out, x, n, &band);
done:
    free(xd);
    free(x);
    free(mag);
    free(ms);
    return rc;
}

static void rms_norm_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            j->norm[k] = (double)j->inp[k] * (double)j->rstd[i];
            j->dnorm[k] = (double)j->weight[c] * (double)j->dout[k];
        }
}

static void rms_dinp_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            j->x[k] = (j->dnorm[k] - j->norm[k] * (double)j->dnmean[i]) * (double)j->rstd[i] + (double)j->dinp[k];
        }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("rmsnorm bwd"). */
int krn_rmsnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, const float *rstd, size_t N, size_t C)
{
    static const char op[] = "rmsnorm_backward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dweight", dweight)) ||
        (rc = krn_check_ptr(op, "dout", dout)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "weight", weight)) || (rc = krn_check_ptr(op, "rstd", rstd)) ||
        (rc = krn_check_dims(op, N, C, &n)))
        return rc;
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rmsnorm_backward(ctx, dinp, dweight, dout, inp, weight, rstd, N, C));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *norm = krn_doubles(n, op), *dnorm = krn_doubles(n, op), *x = krn_doubles(n, op);
    double *mag = krn_doubles(N, op);
    float *dnmean = krn_floats(N, op);
    if (!norm || !dnorm || !x || !mag || !dnmean)
        goto done;
    ln_job j = {.be = &be, .x = x, .norm = norm, .dnorm = dnorm, .inp = inp, .rstd = rstd, .weight = weight,
                .dout = dout, .dinp = dinp, .dnmean = dnmean, .C = C};
    if ((rc = krn_parallel_ranges(&be, N, LN_ROWS, rms_norm_rows, &j)) ||
        (rc = krn_row_mean_site(ctx, &be, "rmsnorm.bwd.dnmean", dnmean, dnorm, norm, N, C, x, mag)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, normdout_rows, &j)) ||
        (rc = krn_colsum_site(ctx, &be, "rmsnorm.bwd.dweight", dweight, x, N, C)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, rms_dinp_rows, &j)))
        goto done;
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, "rmsnorm.bwd.dinp", dinp, x, n, &band);
done:
    free(norm);
    free(dnorm);
    free(x);
    free(mag);
    free(dnmean);
    return rc;
}
