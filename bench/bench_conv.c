/* bench_conv: wall time of one ResNet 3x3 convolution (C = OC = 64 at
 * 32 x 32, stride 1, padding 1: a CIFAR ResNet-18 stage-1 layer) and its
 * batch norm, forward and backward, in RECORD and in PLAIN (the same FP64
 * computation without bands or log), with the log entries RECORD writes
 * and the convolution's GFLOP/s. The first repetition faults in the pages,
 * so each figure is the median of the repetitions after it.
 *
 *   bench_conv [--N N] [--C C] [--HW S] [--threads N] [--reps N]
 * Results are written down in docs/bench-kernels.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"

#include "bench_util.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_conv: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

static float *normal(size_t n, uint64_t stream, double scale)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_conv: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(scale * krn_rng_normal(7, stream, KRN_RNG_TEST, i));
    return p;
}

typedef struct {
    size_t N, C, S;
    float *inp, *w, *out, *dout, *dinp, *dw, *bw, *bb, *bout, *mean, *rstd, *rm, *rv, *dbw, *dbb, *dbn;
} layer;

/* One repetition in mode: conv fwd, bn fwd, bn bwd, conv bwd; times in t[4]. */
static void run(const layer *l, krn_mode mode, int threads, double t[4], uint64_t *entries)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = mode, .grid_bits = 32, .threads = threads};
    krn_ctx *ctx;
    krn_rlog *log = krn_rlog_new();
    if (krn_ctx_new(&ctx, &cfg) != 0 || krn_step_begin(ctx, 1, mode == KRN_RECORD ? log : NULL) != 0)
        fail("ctx");
    size_t N = l->N, C = l->C, S = l->S, HW = S * S, n = N * C * HW, nw = C * C * 9;
    /* the gradients (accumulated into) and running statistics from the same
     * state every repetition, so every repetition computes the same step */
    memset(l->dinp, 0, n * sizeof(float)), memset(l->dbn, 0, n * sizeof(float));
    memset(l->dw, 0, nw * sizeof(float)), memset(l->dbw, 0, C * sizeof(float));
    memset(l->dbb, 0, C * sizeof(float)), memset(l->rm, 0, C * sizeof(float));
    for (size_t c = 0; c < C; c++)
        l->rv[c] = 1;
    double t0 = now();
    if (krn_conv2d_forward(ctx, l->out, l->inp, l->w, NULL, N, C, S, S, C, 3, 3, 1, 1) != 0)
        fail("conv forward");
    double t1 = now();
    if (krn_batchnorm_forward(ctx, l->bout, l->mean, l->rstd, l->rm, l->rv, l->out, l->bw, l->bb, N, C, HW, 1e-5,
                              0.1) != 0)
        fail("bn forward");
    double t2 = now();
    if (krn_batchnorm_backward(ctx, l->dbn, l->dbw, l->dbb, l->dout, l->out, l->bw, l->mean, l->rstd, N, C, HW) != 0)
        fail("bn backward");
    double t3 = now();
    if (krn_conv2d_backward(ctx, l->dinp, l->dw, NULL, l->dbn, l->inp, l->w, N, C, S, S, C, 3, 3, 1, 1) != 0)
        fail("conv backward");
    double t4 = now();
    if (krn_step_end(ctx, NULL) != 0)
        fail("step end");
    t[0] = t1 - t0, t[1] = t2 - t1, t[2] = t3 - t2, t[3] = t4 - t3;
    *entries = krn_rlog_nentries(log);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    layer l = {.N = 8, .C = 64, .S = 32};
    int threads = 2, reps = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--N") == 0 && i + 1 < argc)
            l.N = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--C") == 0 && i + 1 < argc)
            l.C = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--HW") == 0 && i + 1 < argc)
            l.S = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_conv [--N N] [--C C] [--HW S] [--threads N] [--reps N]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (l.N < 1 || l.N > 256 || l.C < 1 || l.C > 1024 || l.S < 3 || l.S > 256 || threads < 1 || reps < 2 ||
        reps > 100) {
        fprintf(stderr, "bench_conv: need 1 <= N <= 256, 1 <= C <= 1024, 3 <= HW <= 256, threads >= 1, "
                        "2 <= reps <= 100\n");
        return 2;
    }
    size_t n = l.N * l.C * l.S * l.S, nw = l.C * l.C * 9;
    l.inp = normal(n, 1, 1.0), l.w = normal(nw, 2, 0.05), l.out = normal(n, 3, 1), l.dout = normal(n, 4, 0.01);
    l.dinp = normal(n, 5, 0), l.dw = normal(nw, 6, 0), l.bw = normal(l.C, 7, 1), l.bb = normal(l.C, 8, 1);
    l.bout = normal(n, 9, 0), l.mean = normal(l.C, 10, 0), l.rstd = normal(l.C, 11, 0), l.rm = normal(l.C, 12, 0);
    l.rv = normal(l.C, 13, 0), l.dbw = normal(l.C, 14, 0), l.dbb = normal(l.C, 15, 0), l.dbn = normal(n, 16, 0);
    static const char *names[4] = {"conv fwd", "bn fwd", "bn bwd", "conv bwd"};
    static const krn_mode modes[2] = {KRN_RECORD, KRN_PLAIN};
    double med[2][4];
    uint64_t entries = 0, e;
    for (int m = 0; m < 2; m++) {
        double t[100][4], col[100];
        for (int r = 0; r < reps; r++)
            run(&l, modes[m], threads, t[r], m == 0 ? &entries : &e);
        for (int k = 0; k < 4; k++) {
            for (int r = 1; r < reps; r++)
                col[r - 1] = t[r][k];
            med[m][k] = median(col, reps - 1);
        }
    }
    double flops = 2.0 * (double)l.N * (double)(l.S * l.S) * (double)l.C * (double)(l.C * 9);
    printf("conv 3x3 %zu->%zu at %zux%zu, N = %zu, %d threads (median of %d)\n", l.C, l.C, l.S, l.S, l.N, threads,
           reps - 1);
    for (int k = 0; k < 4; k++)
        printf("  %-9s RECORD %8.2f ms  PLAIN %8.2f ms\n", names[k], 1e3 * med[0][k], 1e3 * med[1][k]);
    printf("  conv fwd %.2f GFLOP/s, conv bwd (dinp + dweight) %.2f GFLOP/s in RECORD\n",
           flops / med[0][0] * 1e-9, 2 * flops / med[0][3] * 1e-9);
    printf("  log entries of the step (RECORD): %llu\n", (unsigned long long)entries);
    return 0;
}
