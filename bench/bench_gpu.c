/* bench_gpu: the matrix products of one GPT-2 training step on the GPU, and
 * the state's tree hash, in the same run (bench/gpu-check.sh prints the
 * table; docs/gpu.md):
 *   controlled  the cuda backend's krn_matmul_forward/backward in RECORD:
 *               host <-> device copies, the chunked DGEMM, bands,
 *               rounding, flags and compaction on the device; once with
 *               the default batched products and once with
 *               OVT_CUDA_GEMM=per-chunk (one DGEMM per 128 of K);
 *   products    the chunked DGEMM alone on device-resident FP64 operands,
 *               batched against per-chunk (krn_cuda_gemm_probe), with the
 *               count of elements whose bits differ between the two;
 *   fp32        cublasSgemm on device-resident FP32 data (a plain FP32 step's
 *               products);
 *   fp64        cublasDgemm on device-resident FP64 data, one call per product;
 *   tree        the tensor tree root of the model's parameter count of
 *               floats: on the device (krn_cuda_tree_root, resident data)
 *               against the host (ovt_tree_root_le32, one thread).
 * Per layer: qkv (C -> 3C), attention projection (C -> C), MLP up (C -> 4C)
 * and down (4C -> C), plus the tied LM head (C -> V); each product forward
 * (out), backward input (dinp) and backward weight (dweight).
 * Without a usable device it says so and exits 77 (nothing measured).
 * usage: bench_gpu [gpt2-tiny|gpt2-small] [B] [T] [reps] */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tree.h"
#include "kernels/cuda/cuda.h"
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

/* The fastest of reps controlled steps of every product (the matmul ops in
 * RECORD); the last step's log entries and outputs when asked. */
static double controlled_products(krn_ctx *ctx, krn_rlog *log, const shape *sh, size_t ns, size_t N, int reps,
                                  const float *inp, const float *w, const float *dout, float *out, float *dinp,
                                  float *dw, uint64_t *entries, uint64_t *outputs)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (krn_step_begin(ctx, 1, log)) {
            fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
            exit(1);
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
            exit(1);
        }
        double t = now() - t0;
        best = t < best ? t : best;
        if (entries)
            *entries = st.logged;
        if (outputs)
            *outputs = st.outputs;
    }
    return best;
}

static double *wide(const float *src, size_t n)
{
    double *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (double)src[i];
    return p;
}

/* Every product of the step on resident FP64 operands by both paths: the
 * sums of the fastest runs, and how many output elements differ. */
static size_t resident_products(krn_ctx *ctx, const shape *sh, size_t ns, size_t N, int reps, double *t_batched,
                                double *t_per_chunk)
{
    size_t differ = 0;
    for (size_t s = 0; s < ns; s++) {
        size_t C = sh[s].C, OC = sh[s].OC;
        float *fa = grid_normal(N * C, KRN_RNG_TEST + 11), *fw = grid_normal(OC * C, KRN_RNG_TEST + 12);
        float *fg = grid_normal(N * OC, KRN_RNG_TEST + 13);
        double *a = wide(fa, N * C), *w = wide(fw, OC * C), *g = wide(fg, N * OC);
        size_t most = N * (C > OC ? C : OC) > OC * C ? N * (C > OC ? C : OC) : OC * C;
        double *o1 = malloc(most * sizeof *o1), *o2 = malloc(most * sizeof *o2);
        /* forward (N,OC) over C; input gradient (N,C) over OC; weight gradient (OC,C) over N */
        const krn_gemm_in cases[3] = {{.a = a, .lda = C, .tb = true, .b = w, .ldb = C},
                                      {.a = g, .lda = OC, .b = w, .ldb = C},
                                      {.ta = true, .a = g, .lda = OC, .b = a, .ldb = C}};
        const size_t dims[3][3] = {{N, OC, C}, {N, C, OC}, {OC, C, N}}; /* m, n, k */
        for (int q = 0; q < 3 && o1 && o2; q++) {
            double t1 = 0, t2 = 0;
            size_t m = dims[q][0], n = dims[q][1], k = dims[q][2];
            if (krn_cuda_gemm_probe(ctx, KRN_CUDA_GEMM_BATCHED, 0, &cases[q], m, n, k, o1, reps, &t1) ||
                krn_cuda_gemm_probe(ctx, KRN_CUDA_GEMM_PER_CHUNK, 0, &cases[q], m, n, k, o2, reps, &t2)) {
                fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
                exit(1);
            }
            *t_batched += t1;
            *t_per_chunk += t2;
            for (size_t i = 0; i < m * n; i++)
                differ += memcmp(&o1[i], &o2[i], sizeof o1[i]) != 0;
        }
        if (!o1 || !o2) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        free(fa), free(fw), free(fg), free(a), free(w), free(g), free(o1), free(o2);
    }
    return differ;
}

/* The parameter count of a GPT-2 preset (weights, biases, norms, tied
 * embeddings): the size of the state's largest set of tensors. */
static size_t model_params(const trn_model_config *m)
{
    size_t C = m->width, L = m->n_layer;
    return m->vocab * C + m->max_seq * C + L * (12 * C * C + 13 * C) + 2 * C;
}

/* The tree root of n floats on the device (resident) and on the host (one
 * thread): the fastest of reps runs each; whether the roots agree. */
static bool tree_hashes(krn_ctx *ctx, size_t n, int reps, double *t_dev, double *t_host)
{
    float *host = grid_normal(n, KRN_RNG_TEST + 21);
    void *dev = NULL;
    CUDA_OK(cudaMalloc(&dev, n * sizeof(float)));
    CUDA_OK(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
    ovt_hash rd, rh;
    *t_dev = *t_host = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (krn_cuda_tree_root(ctx, &rd, dev, n * sizeof(float))) {
            fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
            exit(1);
        }
        double t1 = now();
        if (ovt_tree_root_le32(&rh, host, n * sizeof(float))) {
            fprintf(stderr, "bench_gpu: %s\n", ovt_errmsg());
            exit(1);
        }
        double t2 = now();
        *t_dev = t1 - t0 < *t_dev ? t1 - t0 : *t_dev;
        *t_host = t2 - t1 < *t_host ? t2 - t1 : *t_host;
    }
    cudaFree(dev);
    free(host);
    return memcmp(rd.b, rh.b, 32) == 0;
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
        fprintf(stderr, "bench_gpu: no device: %s; nothing measured (run it on a machine with an NVIDIA GPU)\n",
                ovt_errmsg());
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
    uint64_t entries = 0, outputs = 0;
    double best = controlled_products(ctx, log, sh, ns, N, reps, inp, w, dout, out, dinp, dw, &entries, &outputs);
    if (setenv("OVT_CUDA_GEMM", "per-chunk", 1)) {
        fprintf(stderr, "bench_gpu: setenv failed\n");
        return 1;
    }
    double best_per_chunk = controlled_products(ctx, log, sh, ns, N, reps, inp, w, dout, out, dinp, dw, NULL, NULL);
    unsetenv("OVT_CUDA_GEMM");
    double t_batched = 0, t_per_chunk = 0;
    size_t differ = resident_products(ctx, sh, ns, N, reps, &t_batched, &t_per_chunk);
    double t_tree_dev = 0, t_tree_host = 0;
    bool roots_equal = tree_hashes(ctx, model_params(&m), reps, &t_tree_dev, &t_tree_host);
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
    printf("gemm_controlled_per_chunk_ms %.3f\nratio_controlled_per_chunk_over_batched %.2f\n", best_per_chunk * 1e3,
           best_per_chunk / best);
    printf("products_batched_ms %.3f\nproducts_per_chunk_ms %.3f\nratio_products_per_chunk_over_batched %.2f\n",
           t_batched * 1e3, t_per_chunk * 1e3, t_per_chunk / t_batched);
    printf("products_elements_differing %zu\n", differ);
    printf("tree_bytes %zu\ntree_device_ms %.3f\ntree_host_ms %.3f\nratio_tree_host_over_device %.2f\n"
           "tree_roots_equal %s\n", model_params(&m) * sizeof(float), t_tree_dev * 1e3, t_tree_host * 1e3,
           t_tree_host / t_tree_dev, roots_equal ? "yes" : "NO");
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    free(inp);
    free(w);
    free(dout);
    free(out);
    free(dinp);
    free(dw);
    return roots_equal ? 0 : 1;
}
