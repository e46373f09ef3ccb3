/* GELU (GPT-2's tanh form), ReLU and SwiGLU (kernels/ops.h). Bands: docs/op-bounds.md. */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"
#include "kernels/trace.h"

/* The constants of the contract, as FP64 literals (every compiler reads a
 * decimal literal to the same nearest double). */
#define GELU_S 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_C 0.044715
#define GELU_3C 0.134145 /* 3 * GELU_C, written out so no constant folding is involved */

static int check_unary(const char *op, const float *out, const char *out_name, const float *inp,
                       const float *dout, size_t n)
{
    size_t nn;
    int rc;
    if ((rc = krn_check_ptr(op, out_name, out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "dout", dout)) || (rc = krn_check_dims(op, n, 1, &nn)))
        return rc;
    return 0;
}

/* Elements per range of the loops below on the pool. */
#define GELU_RANGE 16384

/* The FP64 values of the gelu sites, by ranges of elements on the pool. */
typedef struct {
    const krn_cpu *be;
    const float *inp, *t, *dout, *dinp;
    double *x; /* gelu.tanh's values */
} gelu_job;

/* tanh(s*(x + ((c*x)*x)*x)): the arguments, then their tanh in one pass
 * (krn_tanh_array) unless the backend moves each result (shuffle). */
static void gelu_tanh_range(void *arg, size_t i0, size_t i1)
{
    const gelu_job *j = arg;
    bool each = j->be->kind == KRN_BACKEND_SHUFFLE;
    for (size_t i = i0; i < i1; i++) {
        double v = j->inp[i], y = GELU_S * (v + ((GELU_C * v) * v) * v);
        j->x[i] = each ? krn_cpu_libm(j->be, KRN_FN_TANH, y) : y;
    }
    if (!each)
        krn_tanh_array(j->x + i0, i1 - i0);
}

/* The exact sites' values, filled block by block as the site rounds them
 * (krn_site_exact_fill): no FP64 array, no pass of their own over memory. */
static void gelu_fwd_fill(void *arg, size_t i0, size_t len, double *restrict x)
{
    const gelu_job *j = arg;
    const float *restrict inp = j->inp + i0, *restrict t = j->t + i0;
    for (size_t k = 0; k < len; k++)
        x[k] = (0.5 * (double)inp[k]) * (1.0 + (double)t[k]);
}

/* Reads dinp[i0 .. i0+len), which the site then overwrites with the result. */
static void gelu_bwd_fill(void *arg, size_t i0, size_t len, double *restrict x)
{
    const gelu_job *j = arg;
    const float *restrict inp = j->inp + i0, *restrict t = j->t + i0, *restrict dout = j->dout + i0,
                          *restrict dinp = j->dinp + i0;
    for (size_t k = 0; k < len; k++) {
        double v = inp[k], th = t[k];
        double grad = 0.5 * (1.0 + th) + (((0.5 * v) * (1.0 - th * th)) * GELU_S) * (1.0 + (GELU_3C * v) * v);
        x[k] = grad * (double)dout[k] + (double)dinp[k];
    }
}

/* Site "gelu.tanh" into t, then the exact site `name` with fill's values
 * into out. */
static int gelu_sites(krn_ctx *ctx, gelu_job *j, float *t, const char *name, float *out, krn_site_fill fill,
                      size_t n)
{
    int rc;
    if ((rc = krn_parallel_ranges(j->be, n, GELU_RANGE, gelu_tanh_range, j)))
        return rc;
    krn_band band = krn_band_libm();
    if ((rc = krn_site(ctx, "gelu.tanh", t, j->x, n, &band)))
        return rc;
    j->t = t;
    KRN_TRACE_READS(ctx, 0, {t, n});
    return krn_site_exact_fill(ctx, name, out, n, fill, j);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("gelu"). */
int krn_gelu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n)
{
    static const char op[] = "gelu_forward";
    int rc;
    if ((rc = check_unary(op, out, "out", inp, inp, n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n});
    KRN_TRACE_READS(ctx, 1, {inp, n}); /* and gelu.tanh's t (gelu_sites) */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_gelu_forward(ctx, out, inp, n));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *x = krn_doubles(n, op);
    float *t = krn_floats(n, op);
    if (x && t) {
        gelu_job j = {.be = &be, .inp = inp, .x = x};
        rc = gelu_sites(ctx, &j, t, "gelu.fwd", out, gelu_fwd_fill, n);
    }
    free(x);
    free(t);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("gelu"). */
int krn_gelu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t n)
{
    static const char op[] = "gelu_backward";
    int rc;
    if ((rc = check_unary(op, dinp, "dinp", inp, dout, n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n});
    KRN_TRACE_READS(ctx, 1, {inp, n}, {dout, n}, {dinp, n}); /* and gelu.tanh's t (gelu_sites) */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_gelu_backward(ctx, dinp, inp, dout, n));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *x = krn_doubles(n, op);
    float *t = krn_floats(n, op);
    if (x && t) {
        gelu_job j = {.be = &be, .inp = inp, .dout = dout, .dinp = dinp, .x = x};
        rc = gelu_sites(ctx, &j, t, "gelu.bwd", dinp, gelu_bwd_fill, n);
    }
    free(x);
    free(t);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("relu"). */
int krn_relu_forward(krn_ctx *ctx, float *out, const float *inp, size_t n)
{
    static const char op[] = "relu_forward";
    int rc;
    if ((rc = check_unary(op, out, "out", inp, inp, n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_relu_forward(ctx, out, inp, n));
    double *x = krn_doubles(n, op);
    if (!x)
        return OVT_ENOMEM;
    for (size_t i = 0; i < n; i++)
        x[i] = inp[i] > 0 ? (double)inp[i] : 0.0;
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, "relu.fwd", out, x, n, &band);
    free(x);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("relu"). */
int krn_relu_backward(krn_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t n)
{
    static const char op[] = "relu_backward";
    int rc;
    if ((rc = check_unary(op, dinp, "dinp", inp, dout, n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n}, {dout, n}, {dinp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_relu_backward(ctx, dinp, inp, dout, n));
    double *x = krn_doubles(n, op);
    if (!x)
        return OVT_ENOMEM;
    for (size_t i = 0; i < n; i++)
        x[i] = (double)dinp[i] + (inp[i] > 0 ? (double)dout[i] : 0.0);
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, "relu.bwd", dinp, x, n, &band);
    free(x);
    return rc;
}

/* SwiGLU (kernels/ops.h): e = exp(-|a|) as a libm site, then exact sites. */
typedef struct {
    const krn_cpu *be;
    const float *a, *b, *e, *dout, *da, *db;
    double *x;
} swiglu_job;

#define SWIGLU_RANGE 16384

static void swiglu_exp_range(void *arg, size_t i0, size_t i1)
{
    const swiglu_job *j = arg;
    for (size_t i = i0; i < i1; i++)
        j->x[i] = krn_cpu_libm(j->be, KRN_FN_EXP, -fabs((double)j->a[i]));
}

/* sig(a) from the grid e = exp(-|a|). */
static inline double swiglu_sig(double a, double e)
{
    return a >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

static void swiglu_fwd_fill(void *arg, size_t i0, size_t len, double *restrict x)
{
    const swiglu_job *j = arg;
    for (size_t k = 0; k < len; k++) {
        double a = j->a[i0 + k], sig = swiglu_sig(a, j->e[i0 + k]);
        x[k] = (a * sig) * (double)j->b[i0 + k];
    }
}

static void swiglu_da_fill(void *arg, size_t i0, size_t len, double *restrict x)
{
    const swiglu_job *j = arg;
    for (size_t k = 0; k < len; k++) {
        size_t i = i0 + k;
        double a = j->a[i], sig = swiglu_sig(a, j->e[i]);
        x[k] = ((double)j->dout[i] * (double)j->b[i]) * (sig * (1.0 + a * (1.0 - sig))) + (double)j->da[i];
    }
}

static void swiglu_db_fill(void *arg, size_t i0, size_t len, double *restrict x)
{
    const swiglu_job *j = arg;
    for (size_t k = 0; k < len; k++) {
        size_t i = i0 + k;
        double a = j->a[i], sig = swiglu_sig(a, j->e[i]);
        x[k] = (double)j->dout[i] * (a * sig) + (double)j->db[i];
    }
}

/* Site "swiglu.exp" into e (n floats). */
static int swiglu_exp_site(krn_ctx *ctx, swiglu_job *j, float *e, size_t n)
{
    int rc = krn_parallel_ranges(j->be, n, SWIGLU_RANGE, swiglu_exp_range, j);
    if (rc)
        return rc;
    krn_band band = krn_band_libm();
    if ((rc = krn_site(ctx, "swiglu.exp", e, j->x, n, &band)))
        return rc;
    j->e = e;
    return 0;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("swiglu"). */
int krn_swiglu_forward(krn_ctx *ctx, float *out, const float *a, const float *b, size_t n)
{
    static const char op[] = "swiglu_forward";
    int rc;
    if ((rc = check_unary(op, out, "out", a, b, n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {a, n});
    KRN_TRACE_READS(ctx, 1, {a, n}, {b, n}); /* and swiglu.exp's e */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_swiglu_forward(ctx, out, a, b, n));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *x = krn_doubles(n, op);
    float *e = krn_floats(n, op);
    if (x && e) {
        swiglu_job j = {.be = &be, .a = a, .b = b, .x = x};
        if (!(rc = swiglu_exp_site(ctx, &j, e, n))) {
            KRN_TRACE_READS(ctx, 0, {e, n});
            rc = krn_site_exact_fill(ctx, "swiglu.fwd", out, n, swiglu_fwd_fill, &j);
        }
    }
    free(x);
    free(e);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("swiglu"). */
int krn_swiglu_backward(krn_ctx *ctx, float *da, float *db, const float *dout, const float *a, const float *b,
                        size_t n)
{
    static const char op[] = "swiglu_backward";
    int rc;
    if ((rc = check_unary(op, da, "da", a, dout, n)) || (rc = krn_check_ptr(op, "db", db)) ||
        (rc = krn_check_ptr(op, "b", b)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {a, n});
    KRN_TRACE_READS(ctx, 1, {dout, n}, {a, n}, {b, n}, {da, n}); /* and swiglu.exp's e */
    KRN_TRACE_READS(ctx, 2, {dout, n}, {a, n}, {db, n});         /* and e */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_swiglu_backward(ctx, da, db, dout, a, b, n));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *x = krn_doubles(n, op);
    float *e = krn_floats(n, op);
    if (x && e) {
        swiglu_job j = {.be = &be, .a = a, .b = b, .dout = dout, .da = da, .db = db, .x = x};
        if (!(rc = swiglu_exp_site(ctx, &j, e, n))) {
            KRN_TRACE_READS(ctx, 0, {e, n});
            KRN_TRACE_READS(ctx, 1, {e, n});
            if (!(rc = krn_site_exact_fill(ctx, "swiglu.bwd.da", da, n, swiglu_da_fill, &j)))
                rc = krn_site_exact_fill(ctx, "swiglu.bwd.db", db, n, swiglu_db_fill, &j);
        }
    }
    free(x);
    free(e);
    return rc;
}
