/* Batch norm (training and evaluation mode) forward and backward
 * (kernels/ops.h): layernorm's sites per channel over its N*HW values.
 * Bands: docs/op-bounds.md ("batch norm"). */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"
#include "kernels/sum_sites.h"

/* Channels per range of the loops below on the pool. */
#define BN_CHANNELS 4

/* A channel-major view (C, M) of an NCHW tensor: element (c, n*HW + hw) is
 * element ((n*C + c)*HW + hw) of the tensor. */
typedef struct {
    const krn_cpu *be;
    size_t N, C, HW, M;
    const float *inp, *dout, *weight, *bias, *mean, *rstd, *dmean, *dnmean, *dinp;
    double *xc, *dev, *norm, *dnorm, *gc, *x;
} bn_job;

static size_t nchw(const bn_job *j, size_t c, size_t m)
{
    return (m / j->HW * j->C + c) * j->HW + m % j->HW;
}

static int bn_check(const char *op, size_t N, size_t C, size_t HW, size_t *M, size_t *n)
{
    int rc;
    if ((rc = krn_check_dims(op, N, HW, M)) || (rc = krn_check_dims(op, *M, C, n)))
        return rc;
    if (*M < 2)
        return ovt_fail(OVT_EINVAL, "%s: batch statistics need more than one value per channel (N*HW = %zu)", op,
                        *M);
    return 0;
}

/* forward: the channel-major input, then (after the mean) its deviations,
 * then (after rstd) the output's values in NCHW order */
static void widen_channels(void *arg, size_t c0, size_t c1)
{
    const bn_job *j = arg;
    for (size_t c = c0; c < c1; c++)
        for (size_t m = 0; m < j->M; m++)
            j->xc[c * j->M + m] = (double)j->inp[nchw(j, c, m)];
}

static void dev_channels(void *arg, size_t c0, size_t c1)
{
    const bn_job *j = arg;
    for (size_t k = c0 * j->M; k < c1 * j->M; k++)
        j->dev[k] = j->xc[k] - (double)j->mean[k / j->M];
}

static void out_channels(void *arg, size_t c0, size_t c1)
{
    const bn_job *j = arg;
    for (size_t c = c0; c < c1; c++)
        for (size_t m = 0; m < j->M; m++)
            j->x[nchw(j, c, m)] =
                (j->dev[c * j->M + m] * (double)j->rstd[c]) * (double)j->weight[c] + (double)j->bias[c];
}

/* The running statistics (exact sites, in place). */
static int bn_running(krn_ctx *ctx, float *running_mean, float *running_var, const float *mean, const float *var,
                      size_t C, size_t M, double momentum, double *x)
{
    krn_band band = krn_band_exact();
    for (size_t c = 0; c < C; c++)
        x[c] = (1.0 - momentum) * (double)running_mean[c] + momentum * (double)mean[c];
    int rc = krn_site(ctx, "bn.running_mean", running_mean, x, C, &band);
    if (rc)
        return rc;
    for (size_t c = 0; c < C; c++)
        x[c] = (1.0 - momentum) * (double)running_var[c] +
               momentum * (((double)var[c] * (double)M) / (double)(M - 1));
    return krn_site(ctx, "bn.running_var", running_var, x, C, &band);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("batch norm"). */
int krn_batchnorm_forward(krn_ctx *ctx, float *out, float *mean, float *rstd, float *running_mean,
                          float *running_var, const float *inp, const float *weight, const float *bias, size_t N,
                          size_t C, size_t HW, double eps, double momentum)
{
    static const char op[] = "batchnorm_forward";
    size_t M, n;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "mean", mean)) ||
        (rc = krn_check_ptr(op, "rstd", rstd)) || (rc = krn_check_ptr(op, "running_mean", running_mean)) ||
        (rc = krn_check_ptr(op, "running_var", running_var)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "weight", weight)) || (rc = krn_check_ptr(op, "bias", bias)) ||
        (rc = bn_check(op, N, C, HW, &M, &n)))
        return rc;
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
        return ovt_fail(OVT_EINVAL, "%s: eps %g must be positive and momentum %g in [0, 1]", op, eps, momentum);
    KRN_TRACE_READS(ctx, 0, {inp, n});
    KRN_TRACE_READS(ctx, 1, {inp, n}, {mean, C}); /* bn.rstd (2) reads var (below) */
    KRN_TRACE_READS(ctx, 3, {inp, n}, {mean, C}, {rstd, C}, {weight, C}, {bias, C});
    KRN_TRACE_READS(ctx, 4, {running_mean, C}, {mean, C});
    KRN_TRACE_READS(ctx, 5, {running_var, C}); /* and var */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_batchnorm_forward(ctx, out, mean, rstd, running_mean, running_var, inp, weight,
                                                      bias, N, C, HW, eps, momentum));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *xc = krn_scratch(KRN_SCRATCH_A, n), *dev = krn_scratch(KRN_SCRATCH_B, n);
    double *x = krn_scratch(KRN_SCRATCH_OUT, n);
    double *mag = krn_doubles(C, op);
    float *var = krn_floats(C, op);
    if (!xc || !dev || !x || !mag || !var)
        goto done;
    bn_job j = {.be = &be, .N = N, .C = C, .HW = HW, .M = M, .inp = inp, .weight = weight, .bias = bias,
                .mean = mean, .rstd = rstd, .xc = xc, .dev = dev, .x = x};
    if ((rc = krn_parallel_ranges(&be, C, BN_CHANNELS, widen_channels, &j)) ||
        (rc = krn_row_mean_site(ctx, &be, "bn.mean", mean, xc, NULL, C, M, x, mag)) ||
        (rc = krn_parallel_ranges(&be, C, BN_CHANNELS, dev_channels, &j)) ||
        (rc = krn_row_mean_site(ctx, &be, "bn.var", var, dev, dev, C, M, x, mag)))
        goto done;
    KRN_TRACE_READS(ctx, 0, {var, C}); /* before they are read (block mode fills them here) */
    KRN_TRACE_READS(ctx, 3, {var, C});
    for (size_t c = 0; c < C; c++)
        x[c] = 1.0 / sqrt((double)var[c] + eps);
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, "bn.rstd", rstd, x, C, &band)) ||
        (rc = krn_parallel_ranges(&be, C, BN_CHANNELS, out_channels, &j)) ||
        (rc = krn_site(ctx, "bn.fwd", out, x, n, &band)))
        goto done;
    rc = bn_running(ctx, running_mean, running_var, mean, var, C, M, momentum, x);
done:
    free(mag), free(var);
    return rc;
}

typedef struct {
    const float *inp, *weight, *bias, *rm;
    const double *r;
    size_t C, HW;
} bn_eval_job;

static void eval_fill(void *arg, size_t i0, size_t len, double *x)
{
    const bn_eval_job *j = arg;
    for (size_t k = 0; k < len; k++) {
        size_t c = (i0 + k) / j->HW % j->C;
        x[k] = (((double)j->inp[i0 + k] - (double)j->rm[c]) * j->r[c]) * (double)j->weight[c] + (double)j->bias[c];
    }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("batch norm"). */
int krn_batchnorm_eval(krn_ctx *ctx, float *out, const float *inp, const float *weight, const float *bias,
                       const float *running_mean, const float *running_var, size_t N, size_t C, size_t HW,
                       double eps)
{
    static const char op[] = "batchnorm_eval";
    size_t M, n;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "weight", weight)) || (rc = krn_check_ptr(op, "bias", bias)) ||
        (rc = krn_check_ptr(op, "running_mean", running_mean)) ||
        (rc = krn_check_ptr(op, "running_var", running_var)) || (rc = krn_check_dims(op, N, HW, &M)) ||
        (rc = krn_check_dims(op, M, C, &n)))
        return rc;
    if (!(eps > 0))
        return ovt_fail(OVT_EINVAL, "%s: eps %g is not positive", op, eps);
    KRN_TRACE_READS(ctx, 0, {inp, n}, {weight, C}, {bias, C}, {running_mean, C}, {running_var, C});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_batchnorm_eval(ctx, out, inp, weight, bias, running_mean, running_var, N, C, HW,
                                                   eps));
    double *r = krn_doubles(C, op);
    if (!r)
        return OVT_ENOMEM;
    for (size_t c = 0; c < C; c++)
        r[c] = 1.0 / sqrt((double)running_var[c] + eps);
    bn_eval_job j = {.inp = inp, .weight = weight, .bias = bias, .rm = running_mean, .r = r, .C = C, .HW = HW};
    rc = krn_site_exact_fill(ctx, "bn.eval", out, n, eval_fill, &j);
    free(r);
    return rc;
}

/* backward: norm, dout and dnorm channel-major (fixed expressions of grid
 * values, identical everywhere), then dinp's values in NCHW order */
static void grad_channels(void *arg, size_t c0, size_t c1)
{
    const bn_job *j = arg;
    for (size_t c = c0; c < c1; c++)
        for (size_t m = 0; m < j->M; m++) {
            size_t k = c * j->M + m, i = nchw(j, c, m);
            j->norm[k] = ((double)j->inp[i] - (double)j->mean[c]) * (double)j->rstd[c];
            j->gc[k] = (double)j->dout[i];
            j->dnorm[k] = (double)j->weight[c] * j->gc[k];
        }
}

static void dinp_channels(void *arg, size_t c0, size_t c1)
{
    const bn_job *j = arg;
    for (size_t c = c0; c < c1; c++)
        for (size_t m = 0; m < j->M; m++) {
            size_t k = c * j->M + m, i = nchw(j, c, m);
            j->x[i] = ((j->dnorm[k] - (double)j->dmean[c]) - j->norm[k] * (double)j->dnmean[c]) * (double)j->rstd[c] +
                      (double)j->dinp[i];
        }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("batch norm"). */
int krn_batchnorm_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean, const float *rstd, size_t N,
                           size_t C, size_t HW)
{
    static const char op[] = "batchnorm_backward";
    size_t M, n;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dweight", dweight)) ||
        (rc = krn_check_ptr(op, "dbias", dbias)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "weight", weight)) ||
        (rc = krn_check_ptr(op, "mean", mean)) || (rc = krn_check_ptr(op, "rstd", rstd)) ||
        (rc = bn_check(op, N, C, HW, &M, &n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dout, n}, {weight, C});
    KRN_TRACE_READS(ctx, 1, {dout, n}, {weight, C}, {inp, n}, {mean, C}, {rstd, C});
    KRN_TRACE_READS(ctx, 2, {dout, n}, {dbias, C});
    KRN_TRACE_READS(ctx, 3, {inp, n}, {mean, C}, {rstd, C}, {dout, n}, {dweight, C});
    KRN_TRACE_READS(ctx, 4, {dout, n}, {weight, C}, {inp, n}, {mean, C}, {rstd, C}, {dinp, n}); /* and dmean, dnmean */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_batchnorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N,
                                                       C, HW));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *norm = krn_scratch(KRN_SCRATCH_A, n), *dnorm = krn_scratch(KRN_SCRATCH_B, n);
    double *gc = krn_scratch(KRN_SCRATCH_C, n), *x = krn_scratch(KRN_SCRATCH_OUT, n), *mag = krn_doubles(C, op);
    float *dmean = krn_floats(C, op), *dnmean = krn_floats(C, op);
    if (!norm || !dnorm || !gc || !x || !mag || !dmean || !dnmean)
        goto done;
    bn_job j = {.be = &be, .N = N, .C = C, .HW = HW, .M = M, .inp = inp, .dout = dout, .weight = weight,
                .mean = mean, .rstd = rstd, .dmean = dmean, .dnmean = dnmean, .dinp = dinp, .norm = norm,
                .dnorm = dnorm, .gc = gc, .x = x};
    if ((rc = krn_parallel_ranges(&be, C, BN_CHANNELS, grad_channels, &j)) ||
        (rc = krn_row_mean_site(ctx, &be, "bn.bwd.dmean", dmean, dnorm, NULL, C, M, x, mag)) ||
        (rc = krn_row_mean_site(ctx, &be, "bn.bwd.dnmean", dnmean, dnorm, norm, C, M, x, mag)) ||
        (rc = krn_row_sum_site(ctx, &be, "bn.bwd.dbias", dbias, gc, NULL, C, M)) ||
        (rc = krn_row_sum_site(ctx, &be, "bn.bwd.dweight", dweight, norm, gc, C, M)))
        goto done;
    KRN_TRACE_READS(ctx, 0, {dmean, C}, {dnmean, C}); /* before they are read (block mode fills them here) */
    if ((rc = krn_parallel_ranges(&be, C, BN_CHANNELS, dinp_channels, &j)))
        goto done;
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, "bn.bwd.dinp", dinp, x, n, &band);
done:
    free(mag), free(dmean), free(dnmean);
    return rc;
}
