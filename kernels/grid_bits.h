#ifndef OVT_KERNELS_GRID_BITS_H
#define OVT_KERNELS_GRID_BITS_H

/* Internal to kernels/: the bits of an FP64 value and the rounding fast path,
 * shared by the CPU sites (site_fast.c) and the CUDA sites (cuda/site.cu), so both
 * run the very same integer and IEEE operations. */
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KRN_HD __host__ __device__
#else
#define KRN_HD __attribute__((always_inline))
#endif

#define KRN_SIGN64 UINT64_C(0x8000000000000000)
#define KRN_MANT64 UINT64_C(0x000fffffffffffff)

static inline KRN_HD uint64_t krn_double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline KRN_HD double krn_bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline KRN_HD double krn_abs64(double x)
{
    return krn_bits_double(krn_double_bits(x) & ~KRN_SIGN64);
}

/* Rounds xj to nearest-even on the grid of width b into *outj and returns 1
 * for an element the fast path cannot settle: |x| outside [2^-126, 2^127)
 * (zero, subnormal, near overflow, non-finite), within t of its interval's
 * midpoint (exact ties included), a band of at least a quarter of the grid
 * step (the nearest midpoint may lie in the finer binade below), or a NaN or
 * negative band; except +0 with a zero band (the masked half of attention,
 * padding), which it settles as the slow path would: written as +0, never
 * logged. t == 0 for a zero band.
 *
 * Rounding: add just under half of the dropped low bits of the double (plus
 * one when the last kept bit is odd, which makes a tie go to even) and clear
 * them; a carry moves into the exponent, as rounding up into the next binade
 * should. The midpoint of the element's interval is its kept bits with the
 * highest dropped bit set, so d = |x - mid| is one exact subtraction. No
 * branch, so the CPU loop vectorises. */
static inline KRN_HD uint8_t krn_round_fast(double xj, double t, float *outj, int b)
{
    const int drop = 61 - b;
    const uint64_t mask = (UINT64_C(1) << drop) - 1;
    const uint64_t half = UINT64_C(1) << (drop - 1);
    const double step_scale = 0x1p-52 * (double)(UINT64_C(1) << drop); /* 2^(1-p) */
    uint64_t u = krn_double_bits(xj);
    uint64_t a = u & ~KRN_SIGN64;
    uint64_t r = (a + (mask >> 1) + ((a >> drop) & 1)) & ~mask;
    *outj = (float)krn_bits_double(r | (u & KRN_SIGN64));
    double ax = krn_bits_double(a);
    double d = krn_abs64(ax - krn_bits_double((a & ~mask) | half));
    double q = krn_bits_double(a & ~KRN_MANT64) * step_scale; /* the grid step at x */
    int normal = (ax >= 0x1p-126) & (ax < 0x1p127);
    int plain_zero = (u == 0) & (t == 0.0);
    return (uint8_t)(((normal ^ 1) | (d <= t) | (4.0 * t >= q) | !(t >= 0.0)) & !plain_zero);
}

/* krn_round_fast, settling two more kinds of element the way the slow path
 * would, so that they need not leave a device:
 *  - an exact tie with a zero band in the normal range: the fast path
 *    already rounds it to even, and a zero band logs nothing (with t == 0
 *    the tie is the only reason krn_round_fast flags a normal element);
 *  - an exact zero whose band is below half the smallest grid step
 *    q_min = 2^(-117-b): the nearest midpoint, q_min/2 away, lies outside
 *    the band, so the slow path writes +0 and logs nothing. These are the
 *    zeros of sparse gradients and untouched moments (embedding rows of
 *    tokens not in the batch).
 * The cuda sites use it, and the CPU sites for zero-band blocks (exact
 * sites, and every site in REPLAY and NEAREST before the log is applied);
 * test_cuda_host checks it against krn_site's slow path. */
static inline KRN_HD uint8_t krn_round_fast_device(double xj, double t, float *outj, int b)
{
    uint8_t flag = krn_round_fast(xj, t, outj, b);
    double ax = krn_abs64(xj);
    double half_qmin = krn_bits_double((uint64_t)(1023 - 118 - b) << 52);
    if (t == 0.0 && ax >= 0x1p-126 && ax < 0x1p127)
        flag = 0;
    if (xj == 0.0 && t >= 0.0 && t < half_qmin) {
        *outj = 0.0f;
        flag = 0;
    }
    return flag;
}

#endif
