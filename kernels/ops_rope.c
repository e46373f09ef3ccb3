/* Rotary position embedding (kernels/ops.h): the table from the config,
 * then the rotation of q and k and its transpose. Bands: docs/op-bounds.md. */
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/trace.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/reduce.h"

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("rope table"). */
int krn_rope_table(krn_ctx *ctx, float *cos, float *sin, size_t T, size_t hs, double theta)
{
    static const char op[] = "rope_table";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "cos", cos)) || (rc = krn_check_ptr(op, "sin", sin)) ||
        (rc = krn_check_dims(op, T, hs, &n)))
        return rc;
    if (hs % 2 || T > 65536 || !(theta >= 1.0))
        return ovt_fail(OVT_EINVAL, "%s: head size %zu must be even, T = %zu at most 65536, theta %g at least 1", op,
                        hs, T, theta);
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rope_table(ctx, cos, sin, T, hs, theta));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    size_t half = hs / 2, nt = T * half;
    double *x = krn_doubles(nt, op);
    float *freq = krn_floats(half, op);
    if (!x || !freq) {
        rc = OVT_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < half; i++)
        x[i] = krn_cpu_pow(&be, theta, -(double)(2 * i) / (double)hs);
    krn_band band = krn_band_libm();
    if ((rc = krn_site(ctx, "rope.freq", freq, x, half, &band)))
        goto done;
    KRN_TRACE_READS(ctx, 0, {freq, half});
    KRN_TRACE_READS(ctx, 1, {freq, half});
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < half; i++)
            x[t * half + i] = krn_cpu_libm(&be, KRN_FN_COS, (double)t * (double)freq[i]);
    if ((rc = krn_site(ctx, "rope.cos", cos, x, nt, &band)))
        goto done;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < half; i++)
            x[t * half + i] = krn_cpu_libm(&be, KRN_FN_SIN, (double)t * (double)freq[i]);
    rc = krn_site(ctx, "rope.sin", sin, x, nt, &band);
done:
    free(x);
    free(freq);
    return rc;
}

/* The rotation's operands: forward (dinp NULL) or its transpose added to
 * dinp. Pair p of element index 2p, 2p+1; its position t and frequency i
 * from the layout (B,T,NH*hs). */
typedef struct {
    const float *inp, *cos, *sin, *dinp;
    size_t T, width, half;
} rope_job;

static void rope_fill(void *arg, size_t i0, size_t len, double *restrict x)
{
    const rope_job *j = arg;
    /* i0 and len are whole pairs except at the ends of the site's blocks:
     * work element by element, finding each one's partner. */
    for (size_t k = 0; k < len; k++) {
        size_t e = i0 + k, row = e / j->width, ch = e % j->width;
        size_t t = row % j->T, i = (ch % (2 * j->half)) / 2;
        double c = j->cos[t * j->half + i], s = j->sin[t * j->half + i];
        double x0 = j->inp[e - (ch & 1)], x1 = j->inp[e - (ch & 1) + 1];
        if (!j->dinp)
            x[k] = ch & 1 ? x0 * s + x1 * c : x0 * c - x1 * s;
        else
            x[k] = (ch & 1 ? x1 * c - x0 * s : x0 * c + x1 * s) + (double)j->dinp[e];
    }
}

static int rope_check(const char *op, const float *out, const float *inp, const float *cos, const float *sin,
                      size_t B, size_t T, size_t NH, size_t hs, size_t *n)
{
    size_t bt, w;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "cos", cos)) || (rc = krn_check_ptr(op, "sin", sin)) ||
        (rc = krn_check_dims(op, B, T, &bt)) || (rc = krn_check_dims(op, NH, hs, &w)) ||
        (rc = krn_check_dims(op, bt, w, n)))
        return rc;
    if (hs % 2)
        return ovt_fail(OVT_EINVAL, "%s: head size %zu is odd", op, hs);
    return 0;
}

/* Sites: kernels/ops.h ("rope.fwd", exact). */
int krn_rope_forward(krn_ctx *ctx, float *out, const float *inp, const float *cos, const float *sin, size_t B,
                     size_t T, size_t NH, size_t hs)
{
    size_t n;
    int rc = rope_check("rope_forward", out, inp, cos, sin, B, T, NH, hs, &n);
    if (rc)
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n}, {cos, T * hs / 2}, {sin, T * hs / 2});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rope_forward(ctx, out, inp, cos, sin, B, T, NH, hs));
    /* out may be inp: the site writes a block after filling it, and a
     * block's pairs read only their own two elements, so round through a
     * copy when they alias (a block may end between a pair's two). */
    float *copy = NULL;
    if (out == inp) {
        if (!(copy = krn_floats(n, "rope_forward")))
            return OVT_ENOMEM;
        for (size_t e = 0; e < n; e++)
            copy[e] = inp[e];
    }
    rope_job j = {.inp = copy ? copy : inp, .cos = cos, .sin = sin, .T = T, .width = NH * hs, .half = hs / 2};
    rc = krn_site_exact_fill(ctx, "rope.fwd", out, n, rope_fill, &j);
    free(copy);
    return rc;
}

/* Sites: kernels/ops.h ("rope.bwd", exact). */
int krn_rope_backward(krn_ctx *ctx, float *dinp, const float *dout, const float *cos, const float *sin,
                      size_t B, size_t T, size_t NH, size_t hs)
{
    size_t n;
    int rc = rope_check("rope_backward", dinp, dout, cos, sin, B, T, NH, hs, &n);
    if (rc)
        return rc;
    KRN_TRACE_READS(ctx, 0, {dout, n}, {cos, T * hs / 2}, {sin, T * hs / 2}, {dinp, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_rope_backward(ctx, dinp, dout, cos, sin, B, T, NH, hs));
    rope_job j = {.inp = dout, .cos = cos, .sin = sin, .dinp = dinp, .T = T, .width = NH * hs, .half = hs / 2};
    return krn_site_exact_fill(ctx, "rope.bwd", dinp, n, rope_fill, &j);
}
