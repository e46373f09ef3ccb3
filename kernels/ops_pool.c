/* Max pooling and global average pooling forward and backward
 * (kernels/ops.h). Bands: docs/op-bounds.md ("pooling"). */
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/mem.h"
#include "kernels/trace.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"
#include "kernels/sum_sites.h"
#include "kernels/widen.h"

/* Checks a max pooling shape and gives OH, OW and the sizes. */
static int pool_check(const char *op, size_t N, size_t C, size_t H, size_t W, size_t k,
                      size_t stride, size_t pad, size_t *OH, size_t *OW, size_t *nin, size_t *nout)
{
    size_t nc, hw, ohw;
    int rc;
    if ((rc = krn_check_dims(op, N, C, &nc)) || (rc = krn_check_dims(op, H, W, &hw)) ||
        (rc = krn_check_dims(op, nc, hw, nin)))
        return rc;
    if (k == 0 || stride == 0)
        return ovt_fail(OVT_EINVAL, "%s: window %zu, stride %zu (the least is 1)", op, k, stride);
    if (2 * pad > k || H + 2 * pad < k || W + 2 * pad < k || hw > INT32_MAX)
        return ovt_fail(OVT_EINVAL,
                        "%s: a %zu x %zu window with padding %zu does not fit a %zu x %zu input (padding at most "
                        "half the window, planes below 2^31 elements)",
                        op, k, k, pad, H, W);
    *OH = (H + 2 * pad - k) / stride + 1;
    *OW = (W + 2 * pad - k) / stride + 1;
    if ((rc = krn_check_dims(op, *OH, *OW, &ohw)) || (rc = krn_check_dims(op, nc, ohw, nout)))
        return rc;
    return 0;
}

/* The first and one-past-last input row (or column) of window o. */
static void window(size_t o, size_t k, size_t stride, size_t pad, size_t len, size_t *lo, size_t *hi)
{
    size_t start = o * stride;
    *lo = start < pad ? 0 : start - pad;
    *hi = start + k - pad < len ? start + k - pad : len;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("pooling"). */
int krn_maxpool2d_forward(krn_ctx *ctx, float *out, int32_t *idx, const float *inp, size_t N, size_t C,
                          size_t H, size_t W, size_t k, size_t stride, size_t pad)
{
    static const char op[] = "maxpool2d_forward";
    size_t OH, OW, nin, nout;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "idx", idx)) ||
        (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = pool_check(op, N, C, H, W, k, stride, pad, &OH, &OW, &nin, &nout)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, nin});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_maxpool2d_forward(ctx, out, idx, inp, N, C, H, W, k, stride, pad));
    double *x = krn_scratch(KRN_SCRATCH_OUT, nout);
    if (!x)
        return OVT_ENOMEM;
    for (size_t pl = 0; pl < N * C; pl++) {
        const float *plane = inp + pl * H * W;
        for (size_t oh = 0; oh < OH; oh++) {
            size_t h0, h1, w0, w1;
            window(oh, k, stride, pad, H, &h0, &h1);
            for (size_t ow = 0; ow < OW; ow++) {
                window(ow, k, stride, pad, W, &w0, &w1);
                size_t best = h0 * W + w0;
                for (size_t h = h0; h < h1; h++)
                    for (size_t w = w0; w < w1; w++)
                        if (plane[h * W + w] > plane[best])
                            best = h * W + w;
                size_t o = (pl * OH + oh) * OW + ow;
                idx[o] = (int32_t)best;
                x[o] = (double)plane[best];
            }
        }
    }
    krn_band band = krn_band_exact();
    return krn_site(ctx, "maxpool.fwd", out, x, nout, &band);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("pooling"). */
int krn_maxpool2d_backward(krn_ctx *ctx, float *dinp, const float *dout, const int32_t *idx, size_t N,
                           size_t C, size_t H, size_t W, size_t k, size_t stride, size_t pad)
{
    static const char op[] = "maxpool2d_backward";
    size_t OH, OW, nin, nout;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "idx", idx)) ||
        (rc = pool_check(op, N, C, H, W, k, stride, pad, &OH, &OW, &nin, &nout)))
        return rc;
    size_t ohw = OH * OW, hw = H * W;
    /* idx in backend memory (a resident run) is checked in a host copy
     * TODO(issue 41): check it on the device, where only a bad index comes up */
    const int32_t *hidx = idx;
    int32_t *copy = NULL;
    if (!krn_mem_is_host(ctx, idx)) {
        if (!(copy = malloc(nout * sizeof *copy)))
            return ovt_fail(OVT_ENOMEM, "%s: out of memory for a copy of %zu indices", op, nout);
        if ((rc = krn_mem_download(ctx, copy, idx, nout * sizeof *copy))) {
            free(copy);
            return rc;
        }
        hidx = copy;
    }
    for (size_t o = 0; o < nout && !rc; o++)
        if (hidx[o] < 0 || (size_t)hidx[o] >= hw)
            rc = ovt_fail(OVT_EINVAL, "%s: index %d of output %zu is outside its %zu x %zu plane", op,
                          (int)hidx[o], o, H, W);
    free(copy);
    if (rc)
        return rc;
    /* idx is no site's output (the maxpool.fwd site rounds only out): no
     * model traces a max pool yet, and a trace of one fails here loudly */
    KRN_TRACE_READS(ctx, 0, {dout, nout}, {idx, nout}, {dinp, nin});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_maxpool2d_backward(ctx, dinp, dout, idx, N, C, H, W, k, stride, pad));
    double *x = krn_scratch(KRN_SCRATCH_OUT, nin);
    if (!x)
        return OVT_ENOMEM;
    /* every input element's sum s = 0, s = s + dout, over the outputs that
     * chose it in increasing output order, then + old */
    for (size_t i = 0; i < nin; i++)
        x[i] = 0;
    for (size_t o = 0; o < nout; o++) {
        size_t i = o / ohw * hw + (size_t)idx[o];
        x[i] = x[i] + (double)dout[o];
    }
    for (size_t i = 0; i < nin; i++)
        x[i] = x[i] + (double)dinp[i];
    krn_band band = krn_band_exact();
    return krn_site(ctx, "maxpool.bwd", dinp, x, nin, &band);
}

/* Checks a global average pooling shape: nc planes, n elements. */
static int avg_check(const char *op, size_t N, size_t C, size_t HW, size_t *nc, size_t *n)
{
    int rc;
    if ((rc = krn_check_dims(op, N, C, nc)))
        return rc;
    return krn_check_dims(op, *nc, HW, n);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("pooling"). */
int krn_avgpool_global_forward(krn_ctx *ctx, float *out, const float *inp, size_t N, size_t C, size_t HW)
{
    static const char op[] = "avgpool_global_forward";
    size_t nc, n;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = avg_check(op, N, C, HW, &nc, &n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_avgpool_global_forward(ctx, out, inp, N, C, HW));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    double *xd = krn_scratch(KRN_SCRATCH_A, n), *x = krn_doubles(nc, op), *mag = krn_doubles(nc, op);
    if (xd && x && mag && (rc = krn_widen_rows(&be, xd, NULL, inp, nc, HW)) == 0)
        rc = krn_row_mean_site(ctx, &be, "avgpool.fwd", out, xd, NULL, nc, HW, x, mag);
    free(x), free(mag);
    return rc;
}

typedef struct {
    const float *dinp, *dout;
    size_t HW;
} avg_bwd_job;

static void avg_bwd_fill(void *arg, size_t i0, size_t len, double *x)
{
    const avg_bwd_job *j = arg;
    for (size_t k = 0; k < len; k++)
        x[k] = (double)j->dout[(i0 + k) / j->HW] / (double)j->HW + (double)j->dinp[i0 + k];
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("pooling"). */
int krn_avgpool_global_backward(krn_ctx *ctx, float *dinp, const float *dout, size_t N, size_t C, size_t HW)
{
    static const char op[] = "avgpool_global_backward";
    size_t nc, n;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = avg_check(op, N, C, HW, &nc, &n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dout, nc}, {dinp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_avgpool_global_backward(ctx, dinp, dout, N, C, HW));
    avg_bwd_job j = {.dinp = dinp, .dout = dout, .HW = HW};
    return krn_site_exact_fill(ctx, "avgpool.bwd", dinp, n, avg_bwd_fill, &j);
}
