/* Softmax cross-entropy forward and backward on the device (kernels/ops.h;
 * bands in docs/op-bounds.md). "xent.exp" and "xent.logsum" use CUDA's exp
 * and log (1 ulp documented each). */
#include "kernels/cuda/device.cuh"

static __global__ void row_max_kernel(float *mx, const float *logits, size_t N, size_t V)
{
    KRN_GRID_LOOP(i, N) {
        const float *row = logits + i * V;
        float m = row[0];
        for (size_t j = 1; j < V; j++)
            m = row[j] > m ? row[j] : m;
        mx[i] = m;
    }
}

static __global__ void exp_kernel(double *x, const float *logits, const float *mx, size_t N, size_t V)
{
    KRN_GRID_LOOP(k, N * V)
    x[k] = exp(__dsub_rn((double)logits[k], (double)mx[k / V]));
}

static __global__ void widen_kernel(double *dst, const float *src, size_t n)
{
    KRN_GRID_LOOP(i, n)
    dst[i] = (double)src[i];
}

static __global__ void sum_kernel(double *x, double *mag, const double *e, size_t N, size_t V)
{
    KRN_GRID_LOOP(i, N) {
        x[i] = krn_dchunked_dot(e + i * V, 1, NULL, 0, V);
        mag[i] = krn_dmagnitude(e + i * V, 1, NULL, 0, V);
    }
}

static __global__ void probs_kernel(double *x, const double *e, const float *sums, size_t N, size_t V)
{
    KRN_GRID_LOOP(k, N * V)
    x[k] = __ddiv_rn(e[k], (double)sums[k / V]);
}

static __global__ void log_kernel(double *x, const float *sums, size_t N)
{
    KRN_GRID_LOOP(i, N)
    x[i] = log((double)sums[i]);
}

static __global__ void losses_kernel(double *x, const float *logsum, const float *logits, const int32_t *targets,
                                     const float *mx, size_t N, size_t V)
{
    KRN_GRID_LOOP(i, N)
    x[i] = __dsub_rn((double)logsum[i], __dsub_rn((double)logits[i * V + (size_t)targets[i]], (double)mx[i]));
}

/* One thread: the mean loss in the chunked order and its magnitude. */
static __global__ void mean_kernel(double *x, double *mag, const float *losses, size_t N)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double s = 0, m = 0;
    for (size_t k0 = 0; k0 < N; k0 += KRN_GEMM_CHUNK) {
        size_t kc = N - k0 < KRN_GEMM_CHUNK ? N - k0 : KRN_GEMM_CHUNK;
        double part = 0;
        for (size_t k = k0; k < k0 + kc; k++) {
            part = __dadd_rn(part, (double)losses[k]);
            m += fabs((double)losses[k]);
        }
        s = k0 == 0 ? part : __dadd_rn(s, part);
    }
    x[0] = __ddiv_rn(s, (double)N);
    mag[0] = m;
}

extern "C" int krn_cuda_crossentropy_forward(krn_ctx *ctx, float *loss, float *losses, float *probs,
                                             const float *logits, const int32_t *targets, size_t N, size_t V)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * V;
    float *dlog = krn_dev_upload(d, DEV_A, logits, n);
    int32_t *dtgt = dev_array<int32_t>(d, DEV_TOK, N);
    double *x = dev_array<double>(d, DEV_X, n), *e = dev_array<double>(d, DEV_B, n);
    double *mag = dev_array<double>(d, DEV_MAG, N);
    float *mx = dev_array<float>(d, DEV_C, N), *sums = dev_array<float>(d, DEV_D, N);
    float *logsum = dev_array<float>(d, DEV_E, N), *dloss = dev_array<float>(d, DEV_F, N);
    float *dprobs = dev_array<float>(d, DEV_OUT, n), *dl = dev_array<float>(d, DEV_OUT2, 1);
    if (!dlog || !dtgt || !x || !e || !mag || !mx || !sums || !logsum || !dloss || !dprobs || !dl)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = krn_dev_put(dtgt, targets, N * sizeof *targets);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    row_max_kernel KRN_LAUNCH(N)(mx, dlog, N, V);
    exp_kernel KRN_LAUNCH(n)(x, dlog, mx, N, V);
    if ((rc = krn_dev_launched("xent.exp")))
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_libm();
    if ((rc = krn_cuda_site(ctx, "xent.exp", dprobs, NULL, x, n, &band)))
        return rc;
    widen_kernel KRN_LAUNCH(n)(e, dprobs, n);
    sum_kernel KRN_LAUNCH(N)(x, mag, e, N, V);
    if ((rc = krn_dev_launched("xent.sum")))
        return krn_cuda_fail(ctx, rc);
    band = krn_band_reduction(KRN_BAND_ARRAY, V, 1.0, 0);
    band.a = mag;
    if ((rc = krn_cuda_site(ctx, "xent.sum", sums, NULL, x, N, &band)))
        return rc;
    probs_kernel KRN_LAUNCH(n)(x, e, sums, N, V);
    if ((rc = krn_dev_launched("xent.probs")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "xent.probs", dprobs, probs, x, n, NULL)))
        return rc;
    log_kernel KRN_LAUNCH(N)(x, sums, N);
    if ((rc = krn_dev_launched("xent.logsum")))
        return krn_cuda_fail(ctx, rc);
    band = krn_band_libm();
    if ((rc = krn_cuda_site(ctx, "xent.logsum", logsum, NULL, x, N, &band)))
        return rc;
    losses_kernel KRN_LAUNCH(N)(x, logsum, dlog, dtgt, mx, N, V);
    if ((rc = krn_dev_launched("xent.losses")))
        return krn_cuda_fail(ctx, rc);
    if ((rc = krn_cuda_site(ctx, "xent.losses", dloss, losses, x, N, NULL)))
        return rc;
    mean_kernel<<<1, 1>>>(x, mag, dloss, N);
    double m = 0;
    if ((rc = krn_dev_launched("xent.loss")) || (rc = krn_dev_get(&m, mag, sizeof m)))
        return krn_cuda_fail(ctx, rc);
    band = krn_band_reduction(KRN_BAND_CONST, N, 1.0 / (double)N, 1);
    band.scale *= m;
    return krn_cuda_site(ctx, "xent.loss", dl, loss, x, 1, &band);
}

static __global__ void bwd_kernel(double *x, const float *probs, const int32_t *targets, double g,
                                  const float *dlogits, size_t N, size_t V)
{
    KRN_GRID_LOOP(k, N * V) {
        size_t i = k / V, j = k % V;
        double ind = (size_t)targets[i] == j ? 1.0 : 0.0;
        x[k] = __dadd_rn(__dmul_rn(__dsub_rn((double)probs[k], ind), g), (double)dlogits[k]);
    }
}

extern "C" int krn_cuda_crossentropy_backward(krn_ctx *ctx, float *dlogits, const float *probs,
                                              const int32_t *targets, float dloss, size_t N, size_t V)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t n = N * V;
    float *dp = krn_dev_upload(d, DEV_A, probs, n), *dd = krn_dev_upload(d, DEV_B, dlogits, n);
    int32_t *dtgt = dev_array<int32_t>(d, DEV_TOK, N);
    double *x = dev_array<double>(d, DEV_X, n);
    float *res = dev_array<float>(d, DEV_OUT, n);
    if (!dp || !dd || !dtgt || !x || !res)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = krn_dev_put(dtgt, targets, N * sizeof *targets);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    bwd_kernel KRN_LAUNCH(n)(x, dp, dtgt, (double)dloss / (double)N, dd, N, V);
    if ((rc = krn_dev_launched("xent.bwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "xent.bwd", res, dlogits, x, n, NULL);
}
