/* bench_site: the cost of a rounding site per element, against a plain
 * (float) conversion loop over the same data measured in the same run.
 *
 *   bench_site [threads] [reps]
 *
 * Data like a GEMM output of inner dimension K: x ~ N(0, K) and the band
 * tau = 1.05 * 2 * gamma_K * ||a_r|| * ||b_c|| (KRN_BAND_OUTER, row and column
 * norms ~ sqrt(K)). Prints, per shape and mode, the median and the minimum
 * over reps of the time per element, and the same for the conversion loop
 * (the minimum is the figure least disturbed by other work on a shared
 * machine), and the site's RECORD time over the time of the FP64 DGEMM that
 * would produce such an output (OpenBLAS, its default threads, best of 3).
 * Results are written down in docs/bench-kernels.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "kernels/rng.h"
#include "kernels/site.h"

#include "bench_util.h"

/* Keeps the conversion loop from being optimised away. */
static volatile float sink;

static void convert(float *out, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)x[i];
    sink = out[n / 2];
}

static int run_shape(size_t rows, size_t cols, size_t k, int threads, int reps)
{
    size_t n = rows * cols;
    double *x = malloc(n * sizeof *x), *rn = malloc(rows * sizeof *rn), *cn = malloc(cols * sizeof *cn);
    float *out = malloc(n * sizeof *out);
    if (!x || !rn || !cn || !out) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    double sk = 0;
    for (double s = 1; s * s <= (double)k; s += 1)
        sk = s;
    for (size_t i = 0; i < n; i++)
        x[i] = sk * krn_rng_normal(1, 0, KRN_RNG_TEST, i);
    for (size_t r = 0; r < rows; r++)
        rn[r] = sk * (1.0 + 0.1 * krn_rng_uniform(2, 0, KRN_RNG_TEST, r));
    for (size_t c = 0; c < cols; c++)
        cn[c] = sk * (1.0 + 0.1 * krn_rng_uniform(3, 0, KRN_RNG_TEST, c));
    double u = 0x1p-53, gamma = (double)k * u / (1.0 - (double)k * u);
    krn_band band = {.kind = KRN_BAND_OUTER, .scale = 1.05 * 2.0 * gamma, .a = rn, .b = cn,
                     .cols = cols};

    double *t_conv = malloc((size_t)reps * sizeof(double));
    double *t_mode[3];
    krn_rlog *log = krn_rlog_new(), *replay_log = krn_rlog_new();
    uint64_t entries = 0, wide = 0;
    for (int m = 0; m < 3; m++)
        t_mode[m] = malloc((size_t)reps * sizeof(double));
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        convert(out, x, n);
        t_conv[r] = now() - t0;
        for (int m = 0; m < 3; m++) {
            krn_mode mode = m == 0 ? KRN_RECORD : (m == 1 ? KRN_REPLAY : KRN_NEAREST);
            krn_config cfg = {.mode = mode, .grid_bits = 32, .threads = threads};
            krn_ctx *ctx;
            if (krn_ctx_new(&ctx, &cfg) != 0) {
                fprintf(stderr, "%s\n", ovt_errmsg());
                return 1;
            }
            krn_rlog *l = mode == KRN_RECORD ? log : (mode == KRN_REPLAY ? replay_log : NULL);
            if (mode == KRN_REPLAY) {
                /* replay the log just recorded (a copy: RECORD resets its own) */
                krn_rlog_reset(replay_log, 0);
                for (size_t s = 0; s < krn_rlog_nsites(log); s++) {
                    const krn_rlog_site *site = krn_rlog_site_at(log, s);
                    if (krn_rlog_add_site(replay_log, site->site, site->n, site->entries,
                                          site->count) != 0)
                        return 1;
                }
            }
            if (krn_step_begin(ctx, 0, l) != 0)
                return 1;
            double t1 = now();
            int rc = krn_site(ctx, "bench", out, x, n, &band);
            t_mode[m][r] = now() - t1;
            krn_stats st;
            if (rc != 0 || krn_step_end(ctx, &st) != 0) {
                fprintf(stderr, "%s\n", ovt_errmsg());
                return 1;
            }
            if (mode == KRN_RECORD)
{
                entries = st.logged;
                wide = st.wide;
            }
            krn_ctx_free(ctx);
        }
    }
    uint8_t *file;
    size_t file_len;
    if (krn_rlog_encode(log, &file, &file_len) != 0) {
        fprintf(stderr, "%s\n", ovt_errmsg());
        return 1;
    }
    free(file);
    printf("%4zux%-5zu K=%-5zu log: %llu entries (%llu values), %zu bytes encoded (%.2f bytes/entry, %.0f "
           "bytes per million outputs)\n",
           rows, cols, k, (unsigned long long)entries, (unsigned long long)wide, file_len,
           entries ? (double)file_len / (double)entries : 0.0, (double)file_len / (double)n * 1e6);
    /* the DGEMM that makes a rows x cols output from an inner dimension k */
    double *am = malloc(rows * k * sizeof *am), *bm = malloc(k * cols * sizeof *bm);
    double *cm = malloc(n * sizeof *cm);
    if (!am || !bm || !cm) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < rows * k; i++)
        am[i] = krn_rng_uniform(4, 0, KRN_RNG_TEST, i) - 0.5;
    for (size_t i = 0; i < k * cols; i++)
        bm[i] = krn_rng_uniform(5, 0, KRN_RNG_TEST, i) - 0.5;
    double t_gemm = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)cols, (int)k, 1.0,
                    am, (int)k, bm, (int)cols, 0.0, cm, (int)cols);
        double t = now() - t0;
        t_gemm = t < t_gemm ? t : t_gemm;
    }
    free(am);
    free(bm);
    free(cm);
    double rec_min = t_mode[0][0];
    for (int r = 1; r < reps; r++)
        rec_min = t_mode[0][r] < rec_min ? t_mode[0][r] : rec_min;
    printf("%4zux%-5zu K=%-5zu DGEMM %.2f ms (%.1f GFLOP/s); RECORD site %.3f ms = %.1f%% of it\n",
           rows, cols, k, t_gemm * 1e3, 2.0 * (double)rows * (double)cols * (double)k / t_gemm * 1e-9,
           rec_min * 1e3, 100.0 * rec_min / t_gemm);
    double conv = median(t_conv, reps) / (double)n * 1e9;
    double conv_min = t_conv[0] / (double)n * 1e9; /* sorted by median() */
    const char *names[3] = {"RECORD", "REPLAY", "NEAREST"};
    for (int m = 0; m < 3; m++) {
        double ns = median(t_mode[m], reps) / (double)n * 1e9;
        double ns_min = t_mode[m][0] / (double)n * 1e9;
        printf("%4zux%-5zu K=%-5zu threads=%d %-7s median %6.2f ns/elem (min %5.2f)  (float)x loop "
               "%5.2f (min %5.2f)  entries/1e6 %.0f\n",
               rows, cols, k, threads, names[m], ns, ns_min, conv, conv_min,
               (double)entries / (double)n * 1e6);
        free(t_mode[m]);
    }
    krn_rlog_free(log);
    krn_rlog_free(replay_log);
    free(t_conv);
    free(x);
    free(rn);
    free(cn);
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (threads < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_site [threads >= 1] [reps >= 1]\n");
        return 2;
    }
    int rc = 0;
    rc |= run_shape(256, 768, 768, threads, reps);
    rc |= run_shape(256, 3072, 768, threads, reps);
    rc |= run_shape(256, 768, 3072, threads, reps);
    rc |= run_shape(256, 50257, 768, threads, reps);
    return rc;
}
