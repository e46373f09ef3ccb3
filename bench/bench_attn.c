/* bench_attn: wall time of one GPT-2 small attention layer (C = 768, 12
 * heads, B = 1), forward and backward in RECORD, and the log entries they
 * produce. The first calls fault in the ops' scratch buffers, so each
 * figure is the median of the calls after the first.
 *
 *   bench_attn [--T N] [--threads N] [--reps N]
 * Results are written down in docs/bench-kernels.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ops.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"

#include "bench_util.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_attn: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

int main(int argc, char **argv)
{
    size_t T = 512, B = 1, C = 768, NH = 12;
    int threads = 2, reps = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--T") == 0 && i + 1 < argc)
            T = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_attn [--T N] [--threads N] [--reps N]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (T < 1 || T > 4096 || threads < 1 || reps < 2 || reps > 100) {
        fprintf(stderr, "bench_attn: need 1 <= T <= 4096, threads >= 1, 2 <= reps <= 100\n");
        return 2;
    }
    size_t nin = B * T * 3 * C, nout = B * T * C, ntt = B * NH * T * T;
    float *inp = malloc(nin * sizeof *inp), *dout = malloc(nout * sizeof *dout);
    float *out = malloc(nout * sizeof *out), *pre = malloc(ntt * sizeof *pre);
    float *att = malloc(ntt * sizeof *att), *dinp = calloc(nin, sizeof *dinp);
    float *dpre = malloc(ntt * sizeof *dpre), *datt = malloc(ntt * sizeof *datt);
    if (!inp || !dout || !out || !pre || !att || !dinp || !dpre || !datt) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nin; i++)
        inp[i] = (float)krn_rng_normal(7, 1, KRN_RNG_TEST, i);
    for (size_t i = 0; i < nout; i++)
        dout[i] = (float)(0.01 * krn_rng_normal(7, 2, KRN_RNG_TEST, i));
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = 32, .threads = threads};
    krn_ctx *ctx;
    if (krn_ctx_new(&ctx, &cfg) != 0)
        fail("ctx");
    krn_rlog *log = krn_rlog_new();
    double tf[100], tb[100];
    uint64_t entries = 0;
    for (int r = 0; r < reps; r++) {
        if (krn_step_begin(ctx, 1, log) != 0)
            fail("step");
        double t0 = now();
        if (krn_attention_forward(ctx, out, pre, att, inp, B, T, C, NH) != 0)
            fail("forward");
        double t1 = now();
        if (krn_attention_backward(ctx, dinp, dpre, datt, dout, inp, att, B, T, C, NH) != 0)
            fail("backward");
        double t2 = now();
        if (krn_step_end(ctx, NULL) != 0)
            fail("step end");
        tf[r] = t1 - t0;
        tb[r] = t2 - t1;
        entries = krn_rlog_nentries(log);
    }
    /* the first call faults in the scratch buffers: leave it out */
    qsort(tf + 1, (size_t)reps - 1, sizeof(double), cmp_double);
    qsort(tb + 1, (size_t)reps - 1, sizeof(double), cmp_double);
    printf("attention T=%zu C=%zu NH=%zu B=%zu threads %d: forward %.4f s, backward %.4f s "
           "(median of %d after the first call; first %.4f / %.4f s), %llu log entries per step\n",
           T, C, NH, B, threads, tf[1 + (reps - 1) / 2], tb[1 + (reps - 1) / 2], reps - 1, tf[0],
           tb[0], (unsigned long long)entries);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    free(inp), free(dout), free(out), free(pre), free(att), free(dinp), free(dpre), free(datt);
    return 0;
}
