/* layernorm and RMSNorm forward and backward (kernels/ops.h), one
 * implementation: RMSNorm is layernorm without the mean and the bias.
 * Bands: docs/op-bounds.md. */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"
#include "kernels/sum_sites.h"
#include "kernels/trace.h"
#include "kernels/widen.h"

/* The epsilon of the contract, an FP64 literal. */
#define LAYERNORM_EPS 1e-5

/* Rows per range of the loops below on the pool (krn_parallel_ranges): each
 * row's values depend on that row alone. */
#define LN_ROWS 16

/* The row loops' operands: the site values' inputs and outputs, by op. */
typedef struct {
    const krn_cpu *be;
    const double *a, *b;
    double *x, *mag, *xd, *dev, *norm, *dnorm;
    const float *inp, *mean, *rstd, *weight, *bias, *dout, *dinp, *dmean, *dnmean;
    size_t C;
} ln_job;

/* forward: the input's deviations (after the mean), then (after rstd) the
 * output's values; bias NULL for RMSNorm */
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
        for (size_t c = 0; c < C; c++) {
            double v = (j->dev[i * C + c] * (double)j->rstd[i]) * (double)j->weight[c];
            j->x[i * C + c] = j->bias ? v + (double)j->bias[c] : v;
        }
}

/* The sites of one norm, in order; mean and dmean NULL for RMSNorm (no
 * mean is taken: the deviations are the inputs), dbias NULL for it too. */
typedef struct {
    const char *mean, *var, *rstd, *fwd;
    const char *dmean, *dnmean, *dbias, *dweight, *dinp;
} norm_sites;

static const norm_sites layernorm_sites = {"layernorm.mean", "layernorm.var",
                                           "layernorm.rstd", "layernorm.fwd", "layernorm.bwd.dmean",
                                           "layernorm.bwd.dnmean", "layernorm.bwd.dbias",
                                           "layernorm.bwd.dweight", "layernorm.bwd.dinp"};
static const norm_sites rmsnorm_sites = {NULL, "rmsnorm.ms", "rmsnorm.rstd", "rmsnorm.fwd",
                                         NULL, "rmsnorm.bwd.dnmean", NULL, "rmsnorm.bwd.dweight",
                                         "rmsnorm.bwd.dinp"};

/* Layernorm (mean given) or RMSNorm (mean NULL): mean, var (the mean of
 * the squared deviations; RMSNorm: of the squares), rstd = 1/sqrt(var + eps),
 * out = (dev*rstd)*weight (+ bias). */
static int norm_forward(krn_ctx *ctx, const char *op, const norm_sites *ns, float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, double eps, size_t N, size_t C, size_t n)
{
    krn_cpu be;
    int rc;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *xd = krn_doubles(n, op), *dev = mean ? krn_doubles(n, op) : xd, *x = krn_doubles(n, op);
    double *mag = krn_doubles(N, op);
    float *var = krn_floats(N, op);
    if (!xd || !dev || !x || !mag || !var)
        goto done;
    ln_job j = {.be = &be, .x = x, .xd = xd, .dev = dev, .mean = mean, .rstd = rstd,
                .weight = weight, .bias = bias, .C = C};
    if ((rc = krn_widen_rows(&be, xd, NULL, inp, N, C)))
        goto done;
    if (mean && ((rc = krn_row_mean_site(ctx, &be, ns->mean, mean, xd, NULL, N, C, x, mag)) ||
                 (rc = krn_parallel_ranges(&be, N, LN_ROWS, dev_rows, &j))))
        goto done;
    if ((rc = krn_row_mean_site(ctx, &be, ns->var, var, dev, dev, N, C, x, mag)))
        goto done;
    KRN_TRACE_READS(ctx, 0, {var, N}); /* before it is read (block mode fills it here) */
    for (size_t i = 0; i < N; i++)
        x[i] = 1.0 / sqrt((double)var[i] + eps);
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, ns->rstd, rstd, x, N, &band)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, out_rows, &j)))
        goto done;
    rc = krn_site(ctx, ns->fwd, out, x, n, &band);
done:
    free(xd);
    if (dev != xd)
        free(dev);
    free(x);
    free(mag);
    free(var);
    return rc;
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
    KRN_TRACE_READS(ctx, 0, {inp, n});
    KRN_TRACE_READS(ctx, 1, {inp, n}, {mean, N}); /* rstd (2) reads var (norm_forward) */
    KRN_TRACE_READS(ctx, 3, {inp, n}, {mean, N}, {rstd, N}, {weight, C}, {bias, C});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_layernorm_forward(ctx, out, mean, rstd, inp, weight, bias, N, C));
    return norm_forward(ctx, op, &layernorm_sites, out, mean, rstd, inp, weight, bias, LAYERNORM_EPS, N, C, n);
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
    KRN_TRACE_READS(ctx, 0, {inp, n}); /* rstd (1) reads ms (norm_forward) */
    KRN_TRACE_READS(ctx, 2, {inp, n}, {rstd, N}, {weight, C});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rmsnorm_forward(ctx, out, rstd, inp, weight, eps, N, C));
    return norm_forward(ctx, op, &rmsnorm_sites, out, NULL, rstd, inp, weight, NULL, eps, N, C, n);
}

/* backward: norm and dnorm, then dweight's column-sum operand, then dinp's
 * values (the mean and dmean read as 0 for RMSNorm: x - 0 and d - 0 are x
 * and d exactly) */
static void norm_rows(void *arg, size_t i0, size_t i1)
{
    const ln_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++)
        for (size_t c = 0; c < C; c++) {
            size_t k = i * C + c;
            j->norm[k] = ((double)j->inp[k] - (j->mean ? (double)j->mean[i] : 0.0)) * (double)j->rstd[i];
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
            j->x[k] = ((j->dnorm[k] - (j->dmean ? (double)j->dmean[i] : 0.0)) - j->norm[k] * (double)j->dnmean[i]) *
                          (double)j->rstd[i] +
                      (double)j->dinp[k];
        }
}

/* Layernorm's backward (mean and dbias given) or RMSNorm's (both NULL). */
static int norm_backward(krn_ctx *ctx, const char *op, const norm_sites *ns, float *dinp, float *dweight, float *dbias,
                         const float *dout, const float *inp, const float *weight, const float *mean,
                         const float *rstd, size_t N, size_t C, size_t n)
{
    krn_cpu be;
    int rc;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *norm = krn_doubles(n, op), *dnorm = krn_doubles(n, op), *x = krn_doubles(n, op);
    double *mag = krn_doubles(N, op);
    float *dmean = mean ? krn_floats(N, op) : NULL, *dnmean = krn_floats(N, op);
    if (!norm || !dnorm || !x || !mag || (mean && !dmean) || !dnmean)
        goto done;
    /* norm, dnorm: fixed expressions of grid values, identical everywhere. */
    ln_job j = {.be = &be, .x = x, .norm = norm, .dnorm = dnorm, .inp = inp, .mean = mean,
                .rstd = rstd, .weight = weight, .dout = dout, .dinp = dinp, .dmean = dmean,
                .dnmean = dnmean, .C = C};
    if ((rc = krn_parallel_ranges(&be, N, LN_ROWS, norm_rows, &j)))
        goto done;
    if (mean && (rc = krn_row_mean_site(ctx, &be, ns->dmean, dmean, dnorm, NULL, N, C, x, mag)))
        goto done;
    if ((rc = krn_row_mean_site(ctx, &be, ns->dnmean, dnmean, dnorm, norm, N, C, x, mag)))
        goto done;
    /* dinp's reads of the internal buffers, before they are read (block mode
     * fills them here): dinp is the site after dbias (if any) and dweight */
    KRN_TRACE_READS(ctx, dbias ? 2 : 1, {dmean, N}, {dnmean, N});
    if (dbias && ((rc = krn_widen_rows(&be, x, NULL, dout, N, C)) ||
                  (rc = krn_colsum_site(ctx, &be, ns->dbias, dbias, x, N, C))))
        goto done;
    if ((rc = krn_parallel_ranges(&be, N, LN_ROWS, normdout_rows, &j)) ||
        (rc = krn_colsum_site(ctx, &be, ns->dweight, dweight, x, N, C)) ||
        (rc = krn_parallel_ranges(&be, N, LN_ROWS, dinp_rows, &j)))
        goto done;
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, ns->dinp, dinp, x, n, &band);
done:
    free(norm);
    free(dnorm);
    free(x);
    free(mag);
    free(dmean);
    free(dnmean);
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
    KRN_TRACE_READS(ctx, 0, {dout, n}, {weight, C});
    KRN_TRACE_READS(ctx, 1, {dout, n}, {weight, C}, {inp, n}, {mean, N}, {rstd, N});
    KRN_TRACE_READS(ctx, 2, {dout, n}, {dbias, C});
    KRN_TRACE_READS(ctx, 3, {inp, n}, {mean, N}, {rstd, N}, {dout, n}, {dweight, C});
    KRN_TRACE_READS(ctx, 4, {dout, n}, {weight, C}, {inp, n}, {mean, N}, {rstd, N}, {dinp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_layernorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C));
    return norm_backward(ctx, op, &layernorm_sites, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, n);
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
    KRN_TRACE_READS(ctx, 0, {dout, n}, {weight, C}, {inp, n}, {rstd, N});
    KRN_TRACE_READS(ctx, 1, {inp, n}, {rstd, N}, {dout, n}, {dweight, C});
    KRN_TRACE_READS(ctx, 2, {dout, n}, {weight, C}, {inp, n}, {rstd, N}, {dinp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rmsnorm_backward(ctx, dinp, dweight, dout, inp, weight, rstd, N, C));
    return norm_backward(ctx, op, &rmsnorm_sites, dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C, n);
}
