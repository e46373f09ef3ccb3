/* matmul forward and backward on the device (kernels/ops.h; bands in
 * docs/op-bounds.md): chunked cuBLAS DGEMM, row and column norms for the
 * OUTER band, the sites on the device. */
#include "kernels/cuda/device.cuh"

static __global__ void add_old_kernel(double *x, const float *old, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dadd_rn(x[i], (double)old[i]);
}

static __global__ void bias_kernel(double *x, const float *inp, const float *bias, size_t N, size_t C)
{
    KRN_GRID_LOOP(i, N * C)
    x[i] = __dadd_rn((double)inp[i], (double)bias[i % C]);
}

/* x += old (old uploaded from the host into slot). */
static int add_old(krn_dev *d, int slot, double *x, const float *old, size_t n)
{
    float *dold = krn_dev_upload(d, slot, old, n);
    if (!dold)
        return OVT_ENOMEM;
    add_old_kernel KRN_LAUNCH(n)(x, dold, n);
    return krn_dev_launched("accumulate into the old gradient");
}

/* A matrix-product site: reduction over K, OUTER band from the row norms rn
 * and the column norms cn, `ops` FP64 operations after the sum. */
static int product_site(krn_ctx *ctx, const char *name, float *res, float *host_out, const double *x,
                        size_t n, size_t K, int ops, const double *rn, const double *cn, size_t cols)
{
    krn_band band = krn_band_reduction(KRN_BAND_OUTER, K, 1.0, ops);
    band.a = rn;
    band.b = cn;
    band.cols = cols;
    return krn_cuda_site(ctx, name, res, host_out, x, n, &band);
}

extern "C" int krn_cuda_matmul_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight,
                                       const float *bias, size_t N, size_t C, size_t OC)
{
    krn_dev *d = krn_dev_of(ctx);
    double *a = krn_dev_upload_wide(d, DEV_A, DEV_B, inp, N * C);
    double *w = krn_dev_upload_wide(d, DEV_C, DEV_D, weight, OC * C);
    double *x = dev_array<double>(d, DEV_X, N * OC);
    double *rn = dev_array<double>(d, DEV_N1, N), *cn = dev_array<double>(d, DEV_N2, OC);
    float *dout = dev_array<float>(d, DEV_OUT, N * OC), *dout2 = dev_array<float>(d, DEV_OUT2, N * OC);
    if (!a || !w || !x || !rn || !cn || !dout || !dout2)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc;
    if ((rc = krn_cuda_row_norms(rn, a, N, C)) || (rc = krn_cuda_row_norms(cn, w, OC, C)) ||
        (rc = krn_cuda_chunked_gemm(d, x, false, a, C, true, w, C, N, OC, C)))
        return krn_cuda_fail(ctx, rc);
    if ((rc = product_site(ctx, "matmul.fwd", dout, bias ? NULL : out, x, N * OC, C, 0, rn, cn, OC)) ||
        !bias)
        return rc;
    float *dbias = krn_dev_upload(d, DEV_E, bias, OC);
    if (!dbias)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    bias_kernel KRN_LAUNCH(N * OC)(x, dout, dbias, N, OC);
    if ((rc = krn_dev_launched("matmul bias")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "matmul.fwd.bias", dout2, out, x, N * OC, NULL);
}

extern "C" int krn_cuda_matmul_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias,
                                        const float *dout, const float *inp, const float *weight,
                                        size_t N, size_t C, size_t OC)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t nin = N * C, nw = OC * C, nout = N * OC;
    double *g = krn_dev_upload_wide(d, DEV_A, DEV_B, dout, nout);
    double *a = krn_dev_upload_wide(d, DEV_C, DEV_D, inp, nin);
    double *w = krn_dev_upload_wide(d, DEV_E, DEV_F, weight, nw);
    double *x = dev_array<double>(d, DEV_X, nin > nw ? nin : nw);
    double *gn = dev_array<double>(d, DEV_N1, N > OC ? N : OC), *cn = dev_array<double>(d, DEV_N2, C);
    float *res = dev_array<float>(d, DEV_OUT, nin > nw ? nin : nw);
    if (!g || !a || !w || !x || !gn || !cn || !res)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc;
    if (dinp) {
        /* dinp (N,C) += dout (N,OC) @ weight (OC,C): K = OC. */
        if ((rc = krn_cuda_chunked_gemm(d, x, false, g, OC, false, w, C, N, C, OC)) ||
            (rc = add_old(d, DEV_G, x, dinp, nin)) || (rc = krn_cuda_row_norms(gn, g, N, OC)) ||
            (rc = krn_cuda_col_norms(cn, w, OC, C)))
            return krn_cuda_fail(ctx, rc);
        if ((rc = product_site(ctx, "matmul.bwd.dinp", res, dinp, x, nin, OC, 1, gn, cn, C)))
            return rc;
    }
    /* dweight (OC,C) += dout^T (OC,N) @ inp (N,C): K = N. */
    if ((rc = krn_cuda_chunked_gemm(d, x, true, g, OC, false, a, C, OC, C, N)) ||
        (rc = add_old(d, DEV_G, x, dweight, nw)) || (rc = krn_cuda_col_norms(gn, g, N, OC)) ||
        (rc = krn_cuda_col_norms(cn, a, N, C)))
        return krn_cuda_fail(ctx, rc);
    if ((rc = product_site(ctx, "matmul.bwd.dweight", res, dweight, x, nw, N, 1, gn, cn, C)) || !dbias)
        return rc;
    return krn_cuda_colsum_site(ctx, "matmul.bwd.dbias", dbias, g, N, OC);
}
