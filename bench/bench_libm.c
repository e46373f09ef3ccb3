/* bench_libm: ovt's exp, log, pow, sin and cos (kernels/cpu/libm.c, the
 * cpu backend's) against the C library's in the same run, on the arguments
 * the ops give them: softmax and cross-entropy exps (an FP32 value minus its
 * row's max, in [-40, 0]), logs of softmax sums (1 .. 60,000), AdamW's
 * pow(beta, t), rotary embedding angles pos * f_i (pos < 65536, f_i =
 * 10000^(-i/32) in FP32, i < 32) for sin and cos. Prints ns per call (median of 9 passes, process CPU time)
 * and the ratio (docs/bench-kernels.md).
 *   bench_libm [n]   (n arguments per pass, default 1,000,000) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "kernels/cpu/backend.h"
#include "kernels/rng.h"

enum { REPS = 9 };

static double unit(uint64_t k, uint64_t stream)
{
    return (double)(krn_rng_u64(5, stream, KRN_RNG_TEST, k) >> 11) * 0x1p-53;
}

static double ex_own(double x, double y) { (void)y; return krn_exp(x); }
static double ex_libc(double x, double y) { (void)y; return exp(x); }
static double lg_own(double x, double y) { (void)y; return krn_log(x); }
static double lg_libc(double x, double y) { (void)y; return log(x); }
static double pw_own(double x, double y) { return krn_pow(x, y); }
static double pw_libc(double x, double y) { return pow(x, y); }
static double sn_own(double x, double y) { (void)y; return krn_sin(x); }
static double sn_libc(double x, double y) { (void)y; return sin(x); }
static double cs_own(double x, double y) { (void)y; return krn_cos(x); }
static double cs_libc(double x, double y) { (void)y; return cos(x); }

/* ns per call of fn over (x[i], y[i]), the median of REPS passes. */
static double time_fn(double (*fn)(double, double), const double *x, const double *y, size_t n)
{
    double t[REPS], sink = 0.0;
    for (int r = 0; r < REPS; r++) {
        double t0 = cpu_now();
        for (size_t i = 0; i < n; i++)
            sink += fn(x[i], y[i]);
        t[r] = (cpu_now() - t0) * 1e9 / (double)n;
    }
    volatile double keep = sink;
    (void)keep;
    return median(t, REPS);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y || n == 0)
        return 1;
    static const double betas[] = {0.9, 0.95, 0.999};
    static const struct {
        const char *name;
        double (*own)(double, double), (*libc)(double, double);
    } fns[] = {{"exp", ex_own, ex_libc}, {"log", lg_own, lg_libc}, {"pow", pw_own, pw_libc},
               {"sin", sn_own, sn_libc}, {"cos", cs_own, cs_libc}};
    for (int f = 0; f < 5; f++) {
        for (size_t i = 0; i < n; i++) {
            double u = unit(i, 0), v = unit(i, 1);
            if (f == 0) {
                float m = (float)(v * 20.0 - 10.0), p = (float)((double)m - u * 40.0);
                x[i] = (double)p - (double)m;
                y[i] = 0.0;
            } else if (f == 1) {
                x[i] = (double)(float)(1.0 + u * 60000.0);
                y[i] = 0.0;
            } else if (f == 2) {
                x[i] = betas[i % 3];
                y[i] = (double)(1 + (uint64_t)(v * 100000.0));
            } else {
                float freq = (float)pow(10000.0, -(double)(uint64_t)(v * 32.0) / 32.0);
                x[i] = (double)(uint64_t)(u * 65536.0) * (double)freq;
                y[i] = 0.0;
            }
        }
        double own = time_fn(fns[f].own, x, y, n), libc = time_fn(fns[f].libc, x, y, n);
        printf("bench_libm: %s: krn %.2f ns/call, C library %.2f ns/call, ratio %.2f (%zu arguments, "
               "median of %d)\n",
               fns[f].name, own, libc, own / libc, n, REPS);
    }
    free(x);
    free(y);
    return 0;
}
