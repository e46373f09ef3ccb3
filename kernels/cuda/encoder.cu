/* Token + position embedding forward and backward on the device
 * (kernels/ops.h); without position embeddings (wpe, dwpe NULL: Llama) the
 * position part and the "encoder.bwd.dwpe" site are skipped. The backward's per-token gather order (a stable counting
 * sort of the token positions) is built on the host, where the tokens are. */
#include "kernels/cuda/device.cuh"

#include <stdlib.h>

static __global__ void fwd_kernel(double *x, const int32_t *tokens, const float *wte, const float *wpe,
                                  size_t BT, size_t T, size_t C)
{
    KRN_GRID_LOOP(k, BT * C) {
        size_t bt = k / C, c = k % C;
        double te = wte[(size_t)tokens[bt] * C + c];
        x[k] = wpe ? __dadd_rn(te, (double)wpe[bt % T * C + c]) : te;
    }
}

extern "C" int krn_cuda_encoder_forward(krn_ctx *ctx, float *out, const int32_t *tokens, const float *wte,
                                        const float *wpe, size_t B, size_t T, size_t C, size_t V)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t bt = B * T, n = bt * C;
    int32_t *dtok = dev_array<int32_t>(d, DEV_TOK, bt);
    float *dwte = krn_dev_upload(d, DEV_A, wte, V * C), *dwpe = wpe ? krn_dev_upload(d, DEV_B, wpe, T * C) : NULL;
    float *dout = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!dtok || !dwte || (wpe && !dwpe) || !dout || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    int rc = krn_dev_put(dtok, tokens, bt * sizeof *tokens);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    fwd_kernel KRN_LAUNCH(n)(x, dtok, dwte, dwpe, bt, T, C);
    if ((rc = krn_dev_launched("encoder.fwd")))
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, "encoder.fwd", dout, out, x, n, NULL);
}

/* gamma of a chunked sum of K terms (reduce.c krn_chunked_gamma). */
__device__ static double dchunked_gamma(size_t K)
{
    size_t c = K < KRN_GEMM_CHUNK ? K : KRN_GEMM_CHUNK;
    size_t n = (K + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK;
    double k = (double)(c + (n ? n : 1) - 1);
    return k * KRN_U / (1.0 - k * KRN_U);
}

/* dwte[v, c]: the chunked sum of dout over the token's positions, in order. */
static __global__ void dwte_kernel(double *x, double *mag, const double *g, const float *old,
                                   const uint64_t *start, const uint64_t *pos, size_t V, size_t C)
{
    KRN_GRID_LOOP(k, V * C) {
        size_t v = k / C, c = k % C, s0 = start[v], cnt = start[v + 1] - s0;
        double s = 0, m = 0;
        for (size_t k0 = 0; k0 < cnt; k0 += KRN_GEMM_CHUNK) {
            size_t kc = cnt - k0 < KRN_GEMM_CHUNK ? cnt - k0 : KRN_GEMM_CHUNK;
            double part = 0;
            for (size_t j = k0; j < k0 + kc; j++) {
                double t = g[pos[s0 + j] * C + c];
                part = __dadd_rn(part, t);
                m += fabs(t);
            }
            s = k0 == 0 ? part : __dadd_rn(s, part);
        }
        x[k] = __dadd_rn(s, (double)old[k]);
        mag[k] = cnt ? dchunked_gamma(cnt) * m : 0.0;
    }
}

static __global__ void dwpe_kernel(double *x, double *mag, const double *g, const float *old, size_t B,
                                   size_t nt)
{
    KRN_GRID_LOOP(i, nt) {
        x[i] = __dadd_rn(krn_dchunked_dot(g + i, (ptrdiff_t)nt, NULL, 0, B), (double)old[i]);
        mag[i] = krn_dmagnitude(g + i, (ptrdiff_t)nt, NULL, 0, B);
    }
}

extern "C" int krn_cuda_encoder_backward(krn_ctx *ctx, float *dwte, float *dwpe, const float *dout,
                                         const int32_t *tokens, size_t B, size_t T, size_t C, size_t V)
{
    krn_dev *d = krn_dev_of(ctx);
    size_t bt = B * T, n = bt * C, nv = V * C, nt = T * C, nx = nv > nt ? nv : nt;
    uint64_t *start = (uint64_t *)calloc(V + 1, sizeof *start), *pos = (uint64_t *)calloc(bt, sizeof *pos);
    double *g = krn_dev_upload_wide(d, DEV_A, DEV_B, dout, n);
    float *old = krn_dev_upload(d, DEV_C, dwte, nv);
    uint64_t *dstart = dev_array<uint64_t>(d, DEV_TOK, V + 1), *dpos = dev_array<uint64_t>(d, DEV_TOK2, bt);
    double *x = dev_array<double>(d, DEV_X, nx), *mag = dev_array<double>(d, DEV_MAG, nx);
    float *res = dev_array<float>(d, DEV_OUT, nx);
    int rc = OVT_ENOMEM;
    if (!start || !pos) {
        ovt_fail(OVT_ENOMEM, "encoder_backward: out of memory");
        goto done;
    }
    if (!g || !old || !dstart || !dpos || !x || !mag || !res)
        goto done;
    /* positions of each token in increasing b*T+t order (a stable counting sort) */
    for (size_t i = 0; i < bt; i++)
        start[tokens[i] + 1]++;
    for (size_t v = 0; v < V; v++)
        start[v + 1] += start[v];
    for (size_t i = 0; i < bt; i++)
        pos[start[tokens[i]]++] = i;
    for (size_t v = V; v > 0; v--)
        start[v] = start[v - 1];
    start[0] = 0;
    if ((rc = krn_dev_put(dstart, start, (V + 1) * sizeof *start)) || (rc = krn_dev_put(dpos, pos, bt * sizeof *pos)))
        goto done;
    dwte_kernel KRN_LAUNCH(nv)(x, mag, g, old, dstart, dpos, V, C);
    if ((rc = krn_dev_launched("encoder.bwd.dwte")))
        goto done;
    {
        krn_band band = krn_band_reduction(KRN_BAND_ARRAY, 1, 1.0, 1);
        band.scale = KRN_BAND_WIDTH * 2.0;
        band.a = mag;
        if ((rc = krn_cuda_site(ctx, "encoder.bwd.dwte", res, dwte, x, nv, &band)))
            goto out;
    }
    if (!dwpe)
        goto out;
    if (!(old = krn_dev_upload(d, DEV_C, dwpe, nt))) {
        rc = OVT_ENOMEM;
        goto done;
    }
    dwpe_kernel KRN_LAUNCH(nt)(x, mag, g, old, B, nt);
    if ((rc = krn_dev_launched("encoder.bwd.dwpe")))
        goto done;
    {
        krn_band band = krn_band_reduction(KRN_BAND_ARRAY, B, 1.0, 1);
        band.a = mag;
        rc = krn_cuda_site(ctx, "encoder.bwd.dwpe", res, dwpe, x, nt, &band);
    }
    goto out;
done:
    if (rc)
        krn_cuda_fail(ctx, rc);
out:
    free(start);
    free(pos);
    return rc;
}
