/* bench_gemm: the cost of controlled rounding on the GEMMs of GPT-2 small
 * (256 tokens), and the size of the rounding log they produce.
 *
 * For each shape, in the same run, median of several repetitions:
 *   plain    one FP64 DGEMM (OpenBLAS, beta = 0) on FP64 copies of the inputs;
 *   chunked  the contract's chunked product (kernels/reduce.h) on the same;
 *   op       krn_matmul_forward (or the dinp part of krn_matmul_backward) in
 *            RECORD: widening the FP32 inputs, chunked product, norms, band,
 *            rounding, logging;
 * and the log: entries and encoded bytes per million outputs.
 *
 *   bench_gemm [--threads N] [--reps N] [--quick]
 * Results are written down in docs/bench-kernels.md. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ops.h"
#include "kernels/reduce.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"

#include "bench_util.h"

/* out (N,M) = A (N,K) @ W^T, W (M,K): the forward products, the backward
 * dinp products (K = the layer's output width) and dweight products (K = the
 * 256 tokens) of GPT-2 small all have this form. */
typedef struct {
    const char *name;
    size_t N, K, M;
} shape;

static const shape shapes[] = {
    {"fwd attn.qkv   256 x 768 -> 2304", 256, 768, 2304},
    {"fwd attn.proj  256 x 768 -> 768", 256, 768, 768},
    {"fwd mlp.fc     256 x 768 -> 3072", 256, 768, 3072},
    {"fwd mlp.proj   256 x 3072 -> 768", 256, 3072, 768},
    {"fwd lm_head    256 x 768 -> 50257", 256, 768, 50257},
    {"bwd lm_head dinp  K = 50257", 256, 50257, 768},
    {"bwd mlp.fc dW  768 x 3072, K = 256", 768, 256, 3072},
};

static float *normal(size_t n, uint64_t stream, double scale)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(scale * krn_rng_normal(42, stream, KRN_RNG_TEST, i));
    return p;
}

static void fail(const char *what)
{
    fprintf(stderr, "bench_gemm: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--reps N] [--quick]\n"
                            "  --quick skips the two 50257-wide shapes\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (threads < 1 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_gemm: --threads and --reps must be positive (reps <= 100)\n");
        return 2;
    }
    openblas_set_num_threads(threads);
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = 32, .threads = threads};
    krn_ctx *ctx;
    if (krn_ctx_new(&ctx, &cfg) != 0)
        fail("ctx");
    krn_rlog *log = krn_rlog_new(), *empty = krn_rlog_new();
    uint8_t *buf = NULL;
    size_t empty_len = 0;
    krn_rlog_reset(empty, 0);
    if (krn_rlog_encode(empty, &buf, &empty_len) != 0)
        fail("encode");
    free(buf);

    printf("threads %d, reps %d (median), KRN_GEMM_CHUNK %d, grid b = 32\n", threads, reps,
           KRN_GEMM_CHUNK);
    printf("%-36s %8s %8s %8s %7s %7s %7s | %7s %7s %7s %9s %8s\n", "shape (wall s | cpu ratios)",
           "plain", "chunked", "op", "ch/pl", "op/pl", "op/ch", "ch/pl", "op/pl", "op/ch", "entries/M",
           "bytes/M");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        if (quick && (sh->K > 10000 || sh->M > 10000))
            continue;
        size_t N = sh->N, K = sh->K, M = sh->M;
        float *a = normal(N * K, 1, 1.0), *w = normal(M * K, 2, 0.02), *out = malloc(N * M * sizeof *out);
        double *ad = malloc(N * K * sizeof *ad), *wd = malloc(M * K * sizeof *wd);
        double *xd = malloc(N * M * sizeof *xd);
        if (!out || !ad || !wd || !xd) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        krn_widen(ad, a, N * K);
        krn_widen(wd, w, M * K);
        krn_cpu be = {KRN_BACKEND_CPU, 0, threads, KRN_CPU_GEMM_BEST};
        double tp[100], tc[100], to[100], cp[100], cc[100], co[100];
        uint64_t entries = 0;
        size_t bytes = 0;
        for (int r = 0; r < reps; r++) {
            /* the three variants in a rotating order, so none always runs
             * first (cold caches) or last */
            for (int v = 0; v < 3; v++) {
                int which = (v + r) % 3;
                double t0 = now(), c0 = cpu_now();
                if (which == 0) {
                    openblas_set_num_threads(threads); /* the ops set it to 1 */
                    t0 = now();
                    c0 = cpu_now();
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)N, (blasint)M,
                                (blasint)K, 1.0, ad, (blasint)K, wd, (blasint)K, 0.0, xd, (blasint)M);
                    tp[r] = now() - t0;
                    cp[r] = cpu_now() - c0;
                } else if (which == 1) {
                    openblas_set_num_threads(1);
                    t0 = now();
                    c0 = cpu_now();
                    if (krn_chunked_gemm(&be, xd, false, ad, K, true, wd, K, N, M, K) != 0)
                        fail("chunked gemm");
                    tc[r] = now() - t0;
                    cc[r] = cpu_now() - c0;
                } else {
                    if (krn_step_begin(ctx, 1, log) != 0)
                        fail("step");
                    t0 = now();
                    c0 = cpu_now();
                    if (krn_matmul_forward(ctx, out, a, w, NULL, N, K, M) != 0)
                        fail(sh->name);
                    to[r] = now() - t0;
                    co[r] = cpu_now() - c0;
                    if (krn_step_end(ctx, NULL) != 0)
                        fail("step end");
                }
            }
            if (r == 0) {
                entries = krn_rlog_nentries(log);
                if (krn_rlog_encode(log, &buf, &bytes) != 0)
                    fail("encode");
                free(buf);
                bytes -= empty_len;
            }
        }
        double p = median(tp, reps), c = median(tc, reps), o = median(to, reps);
        double pc = median(cp, reps), ccpu = median(cc, reps), oc = median(co, reps);
        double per_m = 1e6 / (double)(N * M);
        printf("%-36s %8.4f %8.4f %8.4f %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f %9.1f %8.1f\n", sh->name,
               p, c, o, c / p, o / p, o / c, ccpu / pc, oc / pc, oc / ccpu, (double)entries * per_m,
               (double)bytes * per_m);
        fflush(stdout);
        free(a), free(w), free(out), free(ad), free(wd), free(xd);
    }
    krn_rlog_free(log);
    krn_rlog_free(empty);
    krn_ctx_free(ctx);
    return 0;
}
