/* bench_gemm: the cost of controlled rounding on the GEMMs of GPT-2 small
 * (256 tokens), and the size of the rounding log they produce.
 *
 * For each shape, in the same run, interleaved, median of several repetitions:
 *   plain    one FP64 DGEMM (OpenBLAS, beta = 0, --threads threads) on FP64
 *            copies of the inputs;
 *   blas-ch  the contract's chunked product (kernels/reduce.h) on the same,
 *            each chunk of each output tile an OpenBLAS DGEMM (OVT_GEMM=blas);
 *   own-ch   the same product with the cpu backend's own kernel
 *            (kernels/cpu/gemm.h, the default; same bits);
 *   op       krn_matmul_forward (or the dinp part of krn_matmul_backward) in
 *            RECORD: widening the FP32 inputs, chunked product (OVT_GEMM's
 *            choice), norms, band, rounding, logging;
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
#include "kernels/chunked_gemm.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"
#include "kernels/widen.h"

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

    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
    printf("threads %d, reps %d (median), KRN_GEMM_CHUNK %d, grid b = 32, own kernel: %s, "
           "op: %s, load average %.2f %.2f %.2f\n",
           threads, reps, KRN_GEMM_CHUNK, krn_gemm_isa_name(krn_gemm_isa_best()),
           getenv("OVT_GEMM") && *getenv("OVT_GEMM") ? getenv("OVT_GEMM") : "own", load[0], load[1],
           load[2]);
    printf("%-36s %8s %8s %8s %8s %7s %7s %7s %7s | %7s %7s %9s %8s\n",
           "shape (wall s | cpu ratios)", "plain", "blas-ch", "own-ch", "op", "bch/pl", "och/pl",
           "och/bch", "op/pl", "och/pl", "op/pl", "entries/M", "bytes/M");
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
        /* the chunked product through OpenBLAS (today's path before issue
         * 15) and through the own kernel (kernels/cpu/gemm.h), on the
         * ctx's threads */
        krn_cpu be_own, be_blas;
        if (krn_cpu_from_ctx(ctx, &be_own) != 0)
            fail("backend");
        be_own.gemm = KRN_CPU_GEMM_BEST;
        be_blas = be_own;
        be_blas.gemm = KRN_CPU_GEMM_BLAS;
        double t[4][100], c[4][100];
        uint64_t entries = 0;
        size_t bytes = 0;
        for (int r = 0; r < reps; r++) {
            /* the four variants in a rotating order, so none always runs
             * first (cold caches) or last */
            for (int v = 0; v < 4; v++) {
                int which = (v + r) % 4;
                openblas_set_num_threads(which == 0 ? threads : 1); /* the ops set it to 1 */
                if (which == 3 && krn_step_begin(ctx, 1, log) != 0)
                    fail("step");
                double t0 = now(), c0 = cpu_now();
                if (which == 0)
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)N, (blasint)M,
                                (blasint)K, 1.0, ad, (blasint)K, wd, (blasint)K, 0.0, xd, (blasint)M);
                else if (which == 3) {
                    if (krn_matmul_forward(ctx, out, a, w, NULL, N, K, M) != 0)
                        fail(sh->name);
                } else if (krn_chunked_gemm(which == 1 ? &be_blas : &be_own, xd, false, ad, K, true,
                                            wd, K, N, M, K) != 0)
                    fail("chunked gemm");
                t[which][r] = now() - t0;
                c[which][r] = cpu_now() - c0;
                if (which == 3 && krn_step_end(ctx, NULL) != 0)
                    fail("step end");
            }
            if (r == 0) {
                entries = krn_rlog_nentries(log);
                if (krn_rlog_encode(log, &buf, &bytes) != 0)
                    fail("encode");
                free(buf);
                bytes -= empty_len;
            }
        }
        double p = median(t[0], reps), bch = median(t[1], reps), och = median(t[2], reps);
        double o = median(t[3], reps), pc = median(c[0], reps), occ = median(c[2], reps);
        double oc = median(c[3], reps);
        double per_m = 1e6 / (double)(N * M);
        printf("%-36s %8.4f %8.4f %8.4f %8.4f %7.3f %7.3f %7.3f %7.3f | %7.3f %7.3f %9.1f %8.1f\n",
               sh->name, p, bch, och, o, bch / p, och / p, och / bch, o / p, occ / pc, oc / pc,
               (double)entries * per_m, (double)bytes * per_m);
        fflush(stdout);
        free(a), free(w), free(out), free(ad), free(wd), free(xd);
    }
    krn_rlog_free(log);
    krn_rlog_free(empty);
    krn_ctx_free(ctx);
    return 0;
}
