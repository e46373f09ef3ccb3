/* bench_gpu: the matrix products of one GPT-2 training step on the GPU, three
 * ways, in the same run (bench/gpu-check.sh prints the table; docs/gpu.md):
 *   controlled  the cuda backend's krn_matmul_forward/backward in RECORD:
 *               host <-> device copies, chunked cuBLAS DGEMM (one per 128 of
 *               K), bands, rounding, flags and compaction on the device;
 *   fp32        cublasSgemm on device-resident FP32 data (a plain FP32 step's
 *               products);
 *   fp64        cublasDgemm on device-resident FP64 data, one call per product.
 * Per layer: qkv (C -> 3C), attention projection (C -> C), MLP up (C -> 4C)
 * and down (4C -> C), plus the tied LM head (C -> V); each product forward
 * (out), backward input (dinp) and backward weight (dweight).
 * usage: bench_gpu [gpt2-tiny|gpt2-small] [B] [T] [reps] */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ops.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"
#include "trainer/config.h"

#include "bench_util.h"

typedef struct {
    size_t C, OC;
} shape;

static float *grid_normal(size_t n, uint64_t purpose)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(0.02 * krn_rng_normal(7, 0, purpose, i));
    return p;
}

#define CUDA_OK(call)                                                                             \
    do {                                                                                          \
        if ((call) != 0) {                                                                        \
            fprintf(stderr, "bench_gpu: %s failed\n", #call);                                     \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* The plain products with cuBLAS in one precision (elem 4: S, 8: D). */
static double plain_products(cublasHandle_t h, int elem, const shape *sh, size_t ns, size_t N, int reps)
{
    size_t maxa = 0, maxw = 0, maxo = 0;
    for (size_t s = 0; s < ns; s++) {
        maxa = N * sh[s].C > maxa ? N * sh[s].C : maxa;
        maxw = sh[s].OC * sh[s].C > maxw ? sh[s].OC * sh[s].C : maxw;
        maxo = N * sh[s].OC > maxo ? N * sh[s].OC : maxo;
    }
    void *a, *w, *o, *da, *dw;
    CUDA_OK(cudaMalloc(&a, maxa * elem));
    CUDA_OK(cudaMalloc(&w, maxw * elem));
    CUDA_OK(cudaMalloc(&o, maxo * elem));
    CUDA_OK(cudaMalloc(&da, maxa * elem));
    CUDA_OK(cudaMalloc(&dw, maxw * elem));
    CUDA_OK(cudaMemset(a, 0, maxa * elem));
    CUDA_OK(cudaMemset(w, 0, maxw * elem));
    CUDA_OK(cudaMemset(o, 0, maxo * elem));
    const float one_s = 1, zero_s = 0;
    const double one_d = 1, zero_d = 0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        CUDA_OK(cudaDeviceSynchronize());
        double t0 = now();
        for (size_t s = 0; s < ns; s++) {
            int n = (int)N, c = (int)sh[s].C, oc = (int)sh[s].OC;
            /* column-major views of the row-major tensors (as kernels/cuda/reduce.cu) */
            if (elem == 4) {
                CUDA_OK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, oc, n, c, &one_s, w, c, a, c, &zero_s, o, oc));
                CUDA_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, c, n, oc, &one_s, w, c, o, oc, &zero_s, da, c));
                CUDA_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, &one_s, a, c, o, oc, &zero_s, dw, c));
            } else {
                CUDA_OK(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, oc, n, c, &one_d, w, c, a, c, &zero_d, o, oc));
                CUDA_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, c, n, oc, &one_d, w, c, o, oc, &zero_d, da, c));
                CUDA_OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, &one_d, a, c, o, oc, &zero_d, dw, c));
            }
        }
        CUDA_OK(cudaDeviceSynchronize());
        double t = now() - t0;
        best = t < best ? t : best;
    }
    cudaFree(a);
    cudaFree(w);
    cudaFree(o);
    cudaFree(da);
    cudaFree(dw);
    return best;
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "gpt2-small";
    size_t B = argc > 2 ? strtoul(argv[2], NULL, 10) : 4, T = argc > 3 ? strtoul(argv[3], NULL, 10) : 64;
    int reps = argc > 4 ? atoi(argv[4]) : 3;
    trn_model_config m;
    if (trn_model_preset(&m, model) || B == 0 || T == 0 || reps < 1) {
        fprintf(stderr, "usage: bench_gpu [gpt2-tiny|gpt2-small] [B] [T] [reps]\n");
        return 2;
    }
    size_t C = m.width, N = B * T, L = m.n_layer;
    shape sh[4 * 64 + 1];
    size_t ns = 0;
    for (size_t l = 0; l < L && l < 64; l++) {
        sh[ns++] = (shape){C, 3 * C};
        sh[ns++] = (shape){C, C};
        sh[ns++] = (shape){C, 4 * C};
        sh[ns++] = (shape){4 * C, C};
    }
    sh[ns++] = (shape){C, m.vocab};

    krn_config cfg = {.backend = KRN_BACKEND_CUDA, .mode = KRN_RECORD, .grid_bits = 32};
    krn_ctx *ctx = NULL;
    if (krn_ctx_new(&ctx, &cfg) != 0) {
        fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
        return 77;
    }
    size_t maxc = 4 * C > m.vocab ? 4 * C : m.vocab;
    float *inp = grid_normal(N * 4 * C, KRN_RNG_TEST + 1), *w = grid_normal(maxc * 4 * C, KRN_RNG_TEST + 2), *dout = grid_normal(N * maxc, KRN_RNG_TEST + 3);
    float *out = calloc(N * maxc, sizeof *out), *dinp = calloc(N * 4 * C, sizeof *dinp);
    float *dw = calloc(maxc * 4 * C, sizeof *dw);
    krn_rlog *log = krn_rlog_new();
    if (!out || !dinp || !dw || !log) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    double best = 1e30;
    uint64_t entries = 0, outputs = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (krn_step_begin(ctx, 1, log)) {
            fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
            return 1;
        }
        int rc = 0;
        for (size_t s = 0; s < ns && !rc; s++) {
            rc = krn_matmul_forward(ctx, out, inp, w, NULL, N, sh[s].C, sh[s].OC);
            if (!rc)
                rc = krn_matmul_backward(ctx, dinp, dw, NULL, dout, inp, w, N, sh[s].C, sh[s].OC);
        }
        krn_stats st;
        if (krn_step_end(ctx, &st) || rc) {
            fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
            return 1;
        }
        double t = now() - t0;
        best = t < best ? t : best;
        entries = st.logged;
        outputs = st.outputs;
    }
    cublasHandle_t h;
    CUDA_OK(cublasCreate(&h));
    double t32 = plain_products(h, 4, sh, ns, N, reps), t64 = plain_products(h, 8, sh, ns, N, reps);
    cublasDestroy(h);
    double flops = 0;
    for (size_t s = 0; s < ns; s++)
        flops += 3.0 * 2.0 * (double)N * (double)sh[s].C * (double)sh[s].OC;
    printf("bench_gpu %s B=%zu T=%zu: %zu products x 3, %.1f GFLOP, best of %d\n", model, B, T, ns, flops / 1e9, reps);
    printf("gemm_controlled_ms %.3f\ngemm_fp32_ms %.3f\ngemm_fp64_ms %.3f\n", best * 1e3, t32 * 1e3, t64 * 1e3);
    printf("ratio_controlled_over_fp32 %.2f\nratio_controlled_over_fp64 %.2f\n", best / t32, best / t64);
    printf("log_entries %llu of %llu outputs\n", (unsigned long long)entries, (unsigned long long)outputs);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    free(inp);
    free(w);
    free(dout);
    free(out);
    free(dinp);
    free(dw);
    return 0;
}
