/* Rotary position embedding on the device (kernels/ops.h; the CPU op is
 * kernels/ops_rope.c): the table with CUDA's double pow, cos and sin (2, 2
 * and 2 ulps documented, within the contract's KRN_LIBM_ULP = 4;
 * docs/op-bounds.md), then the rotation and its transpose as exact sites. */
#include "kernels/cuda/device.cuh"

/* freq_i = theta^(-(2i)/hs), the exponent one FP64 division. */
static __global__ void freq_kernel(double *x, double theta, size_t half, size_t hs)
{
    KRN_GRID_LOOP(i, half)
    x[i] = pow(theta, __ddiv_rn(-(double)(2 * i), (double)hs));
}

/* cos or sin (use_sin) of t*freq_i, exact in FP64 (t < 2^16 times a grid
 * value). */
static __global__ void angle_kernel(double *x, const float *freq, size_t T, size_t half, int use_sin)
{
    KRN_GRID_LOOP(k, T * half) {
        double a = __dmul_rn((double)(k / half), (double)freq[k % half]);
        x[k] = use_sin ? sin(a) : cos(a);
    }
}

extern "C" int krn_cuda_rope_table(krn_ctx *ctx, float *cos, float *sin, size_t T, size_t hs, double theta)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t half = hs / 2, nt = T * half;
    double *x = dev_array<double>(d, DEV_X, nt);
    float *freq = dev_array<float>(d, DEV_OUT2, half), *dout = dev_array<float>(d, DEV_OUT, nt);
    if (!x || !freq || !dout)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    freq_kernel KRN_LAUNCH(half)(x, theta, half, hs);
    int rc = krn_dev_launched("rope.freq");
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_libm();
    if ((rc = krn_cuda_site(ctx, "rope.freq", freq, NULL, x, half, &band)))
        return rc;
    for (int use_sin = 0; use_sin < 2; use_sin++) {
        const char *name = use_sin ? "rope.sin" : "rope.cos";
        angle_kernel KRN_LAUNCH(nt)(x, freq, T, half, use_sin);
        if ((rc = krn_dev_launched(name)))
            return krn_cuda_fail(ctx, rc);
        if ((rc = krn_cuda_site(ctx, name, dout, use_sin ? sin : cos, x, nt, &band)))
            return rc;
    }
    return 0;
}

/* The rotation (dinp NULL) or its transpose plus dinp, element by element
 * as kernels/ops_rope.c rope_fill: the pair (x0, x1) at channels 2i, 2i+1
 * of each head of row (b, t) of inp (B*T rows of width NH*hs). */
static __global__ void rotate_kernel(double *x, const float *inp, const float *cos, const float *sin,
                                     const float *dinp, size_t n, size_t T, size_t width, size_t half)
{
    KRN_GRID_LOOP(e, n) {
        size_t row = e / width, ch = e % width, t = row % T, i = (ch % (2 * half)) / 2;
        double c = cos[t * half + i], s = sin[t * half + i];
        double x0 = inp[e - (ch & 1)], x1 = inp[e - (ch & 1) + 1];
        if (!dinp)
            x[e] = ch & 1 ? __dadd_rn(__dmul_rn(x0, s), __dmul_rn(x1, c))
                          : __dsub_rn(__dmul_rn(x0, c), __dmul_rn(x1, s));
        else
            x[e] = __dadd_rn(ch & 1 ? __dsub_rn(__dmul_rn(x1, c), __dmul_rn(x0, s))
                                    : __dadd_rn(__dmul_rn(x0, c), __dmul_rn(x1, s)),
                             (double)dinp[e]);
    }
}

/* Site `name` (exact): out = the rotation of inp, or dinp + its transpose
 * (dinp not NULL). out may equal inp: inp is on the device before out is
 * written. */
static int rotate_site(krn_ctx *ctx, const char *name, float *out, const float *inp, const float *cos,
                       const float *sin, const float *dinp, size_t B, size_t T, size_t NH, size_t hs)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t half = hs / 2, n = B * T * NH * hs;
    float *din = krn_dev_upload(d, DEV_A, inp, n);
    float *dc = krn_dev_upload(d, DEV_B, cos, T * half), *ds = krn_dev_upload(d, DEV_C, sin, T * half);
    float *dd = dinp ? krn_dev_upload(d, DEV_D, dinp, n) : NULL;
    float *res = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!din || !dc || !ds || (dinp && !dd) || !res || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    rotate_kernel KRN_LAUNCH(n)(x, din, dc, ds, dd, n, T, NH * hs, half);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, name, res, out, x, n, NULL);
}

extern "C" int krn_cuda_rope_forward(krn_ctx *ctx, float *out, const float *inp, const float *cos,
                                     const float *sin, size_t B, size_t T, size_t NH, size_t hs)
{
    return rotate_site(ctx, "rope.fwd", out, inp, cos, sin, NULL, B, T, NH, hs);
}

extern "C" int krn_cuda_rope_backward(krn_ctx *ctx, float *dinp, const float *dout, const float *cos,
                                      const float *sin, size_t B, size_t T, size_t NH, size_t hs)
{
    return rotate_site(ctx, "rope.bwd", dinp, dout, cos, sin, dinp, B, T, NH, hs);
}
