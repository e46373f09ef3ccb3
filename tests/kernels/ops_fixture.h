#ifndef OVT_TESTS_KERNELS_OPS_FIXTURE_H
#define OVT_TESTS_KERNELS_OPS_FIXTURE_H

/* Shared by the test_ops_* suites: deterministic grid-valued inputs and the
 * midpoint patterns that make summation order matter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grid.h"
#include "kernels/rng.h"

static inline float *fx_alloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* n grid values ~ scale * N(0,1) from (seed, stream). */
static inline float *fx_normal(size_t n, uint64_t seed, uint64_t stream, double scale)
{
    float *p = fx_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = krn_grid_round(scale * krn_rng_normal(seed, stream, KRN_RNG_TEST, i), 32);
    return p;
}

/* n grid values uniform in [lo, hi). */
static inline float *fx_uniform(size_t n, uint64_t seed, uint64_t stream, double lo, double hi)
{
    float *p = fx_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = krn_grid_round(lo + (hi - lo) * krn_rng_uniform(seed, stream, KRN_RNG_TEST, i), 32);
    return p;
}

static inline float *fx_const(size_t n, float v)
{
    float *p = fx_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = v;
    return p;
}

/* The cancellation pattern of 8 FP32 values (grid b = 32)
 *   [B, r, x, h, -B, -r, 0, 0],  B = 2^20, r in [2^-16, 2^-15), x in [1, 2), h = 2^-24
 * whose exact sum x + h is a grid midpoint (x is a multiple of 2^-23). In
 * FP64, B + r loses r's bits below ulp(B) = 2^-32 and the other order loses
 * them differently, so two summation orders land on opposite sides of the
 * midpoint by ~2^-33 (far inside the band, far from the grid step 2^-23). */
#define FX_PATTERN 8
static inline void fx_pattern(float p[FX_PATTERN], uint64_t seed, uint64_t which)
{
    double r = ldexp(1.0 + krn_rng_uniform(seed, which, KRN_RNG_TEST, 1), -16);
    double x = 1.0 + ldexp((double)krn_rng_below(seed, which, KRN_RNG_TEST, 2, 1u << 23), -23);
    p[0] = 0x1p20f;
    p[1] = (float)r;
    p[2] = (float)x;
    p[3] = 0x1p-24f;
    p[4] = -0x1p20f;
    p[5] = -(float)r;
    p[6] = 0;
    p[7] = 0;
}

/* An 8x8 Latin square of one pattern: m[i][j] = p[(i + j) % 8]; every row and
 * every column sums exactly to the same midpoint, in a different order. */
static inline void fx_latin(float *m, uint64_t seed, uint64_t which)
{
    float p[FX_PATTERN];
    fx_pattern(p, seed, which);
    for (size_t i = 0; i < FX_PATTERN; i++)
        for (size_t j = 0; j < FX_PATTERN; j++)
            m[i * FX_PATTERN + j] = p[(i + j) % FX_PATTERN];
}

/* Fills `rows` vectors of length 8 (row stride ld) with their own pattern,
 * cyclically shifted by the row number. */
static inline void fx_pattern_rows(float *m, size_t rows, size_t ld, uint64_t seed, uint64_t stream)
{
    for (size_t i = 0; i < rows; i++) {
        float p[FX_PATTERN];
        fx_pattern(p, seed, stream * 1000003u + i);
        for (size_t j = 0; j < FX_PATTERN; j++)
            m[i * ld + j] = p[(i + j) % FX_PATTERN];
    }
}

/* Arguments whose libm result lies about one FP64 ulp from an FP32 grid
 * midpoint, found by an exhaustive search over FP32 inputs (glibc 2.36,
 * x86_64): tanh of GELU's argument for this input, exp of this input, and
 * pow(beta, 5) for these betas (exact midpoints). A libm within its ulp
 * bound may round them to either side; the shuffle backend's perturbation
 * does. fx_ulps_from_midpoint lets a test check this on the libm it runs. */
#define FX_TANH_INPUT 0x1.1f1d12p-10f
#define FX_EXP_INPUT -0x1.d2259ap+3f
#define FX_POW_BETA1 0.90625f
#define FX_POW_BETA2 0.96875f
#define FX_POW_T 5

/* |y - m| in FP64 ulps of y, m the FP32 midpoint nearest to y (b = 32). */
static inline double fx_ulps_from_midpoint(double y)
{
    float f = (float)y;
    float o = (double)f < y ? nextafterf(f, INFINITY) : nextafterf(f, -INFINITY);
    double m = ((double)f + (double)o) / 2;
    return fabs(y - m) / (nextafter(fabs(y), INFINITY) - fabs(y));
}

/* GELU's tanh argument, as kernels/ops_act.c computes it. */
static inline double fx_gelu_arg(double v)
{
    return 0.7978845608028654 * (v + ((0.044715 * v) * v) * v);
}

#endif
