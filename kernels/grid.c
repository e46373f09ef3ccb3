/* The FP32 grid of width b (docs/numeric-contract.md section 1).
 *
 * All arithmetic here is exact: grid values and midpoints have at most 26
 * significant bits, so they, their neighbours and the distance |x - mid| are
 * representable in FP64, and scaling by a power of two is exact. */
#include "kernels/grid.h"

#include <math.h>
#include <string.h>

#include "kernels/grid_bits.h"

int krn_grid_check_bits(int b)
{
    if (b < KRN_GRID_BITS_MIN || b > KRN_GRID_BITS_MAX)
        return ovt_fail(OVT_EINVAL, "grid width b = %d is out of range (must be %d..%d)", b,
                        KRN_GRID_BITS_MIN, KRN_GRID_BITS_MAX);
    return 0;
}

/* 2^k as a double, for k in the normal range of FP64. */
static double pow2(int k)
{
    return krn_bits_double((uint64_t)(k + 1023) << 52);
}

/* The smallest x (in magnitude) that rounds past the largest finite grid
 * value: that value plus half its spacing, 2^128 - 2^(127-p). A tie there
 * goes to the even neighbour, 2^128, so the threshold itself overflows. */
static double overflow_threshold(int b)
{
    int p = b - 8;
    return pow2(128) - pow2(127 - p);
}

/* Round-to-nearest-even on the grid by integer arithmetic on the bits of
 * the double: add just under half of the dropped part (plus one when the
 * last kept bit is odd, which turns the tie into round-to-even) and clear
 * the dropped bits. A carry out of the mantissa moves into the exponent,
 * which is exactly what rounding up to the next binade is. */
float krn_grid_round(double x, int b)
{
    uint64_t u = krn_double_bits(x);
    uint64_t sign = u & KRN_SIGN64;
    uint64_t a = u & ~KRN_SIGN64;
    int e_biased = (int)(a >> 52);
    double r;

    if (e_biased == 2047) /* inf or NaN stays what it is */
        return (float)x;
    if (e_biased >= 1023 - 126) {
        int drop = 61 - b;
        uint64_t mask = (UINT64_C(1) << drop) - 1;
        uint64_t rounded = (a + (mask >> 1) + ((a >> drop) & 1)) & ~mask;
        if (rounded >= krn_double_bits(overflow_threshold(b)))
            r = INFINITY;
        else
            r = krn_bits_double(rounded);
    } else if (e_biased == 0) {
        r = 0.0; /* FP64 subnormals are far below half the smallest grid step */
    } else {
        /* Below 2^-126 the grid is evenly spaced by q = 2^(-117-b): count
         * whole steps of q in the 53-bit significand. */
        int e = e_biased - 1023;
        int drop = (-117 - b) - (e - 52);
        uint64_t sig = (UINT64_C(1) << 52) | (a & KRN_MANT64);
        uint64_t steps = 0;
        if (drop <= 63) {
            uint64_t mask = (UINT64_C(1) << drop) - 1;
            steps = (sig + (mask >> 1) + ((sig >> drop) & 1)) >> drop;
        }
        r = (double)steps * pow2(-117 - b);
    }
    return (float)(sign ? -r : r);
}

bool krn_grid_contains(float v, int b)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return false;
    uint32_t low = (b >= 32) ? 0 : ((UINT32_C(1) << (32 - b)) - 1);
    return (u & low) == 0;
}

int krn_grid_locate(double x, int b, krn_grid_pos *pos)
{
    memset(pos, 0, sizeof *pos);
    if (!isfinite(x))
        return ovt_fail(OVT_ENUMERIC, "non-finite value %g cannot be rounded to the grid", x);
    int rc = krn_grid_check_bits(b);
    if (rc < 0)
        return rc;

    int p = b - 8;
    bool neg = signbit(x);
    double ax = fabs(x);
    if (ax >= overflow_threshold(b))
        return ovt_fail(OVT_ENUMERIC, "value %.17g rounds past the largest finite grid value (b = %d)",
                        x, b);

    /* The binade of ax and the grid spacing q there (constant below 2^-126). */
    int e = -1074;
    if (ax > 0.0) {
        int e_biased = (int)(krn_double_bits(ax) >> 52);
        e = e_biased == 0 ? -1023 : e_biased - 1023;
    }
    int eq = e < -126 ? -126 : e;
    double q = pow2(eq - p + 1);

    /* ax = (n + frac) * q with n an integer below 2^(p+1) and frac in [0,1),
     * all exact. The interval [n q, (n+1) q] holds ax; its midpoint is the
     * nearest one except just above a binade edge, where the midpoint of the
     * finer interval below the edge, (n - 1/4) q, is nearer (frac < 1/8). */
    double t = ax / q;
    double n = (double)(int64_t)t;
    double frac = t - n;
    double mid, spacing, below, above, dist;
    bool binade_edge = e > -126 && n == pow2(p - 1);
    if (binade_edge && frac < 0.125) {
        mid = (n - 0.25) * q;
        spacing = 0.5 * q;
        below = (n - 0.5) * q;
        above = n * q;
        dist = (frac + 0.25) * q;
    } else {
        mid = (n + 0.5) * q;
        spacing = q;
        below = n * q;
        above = (n + 1.0) * q;
        dist = fabs(frac - 0.5) * q;
    }
    double nearest;
    if (frac < 0.5)
        nearest = n * q;
    else if (frac > 0.5)
        nearest = (n + 1.0) * q;
    else
        nearest = fmod(n, 2.0) == 0.0 ? n * q : (n + 1.0) * q;

    /* above may be 2^128 (the midpoint just past the largest grid value):
     * as a float that is +inf, which no honest rounding ever selects. */
    if (neg) {
        pos->mid = -mid;
        pos->below = (float)-above;
        pos->above = (float)-below;
        pos->nearest = (float)-nearest;
    } else {
        pos->mid = mid;
        pos->below = (float)below;
        pos->above = (float)above;
        pos->nearest = (float)nearest;
    }
    pos->dist = dist;
    pos->spacing = spacing;
    return 0;
}

int krn_grid_interval(float v, int b, double *lo, double *hi)
{
    *lo = 0.0;
    *hi = 0.0;
    if (!krn_grid_contains(v, b))
        return ovt_fail(OVT_EINVAL, "%a is not a finite value of the %d-bit grid", (double)v, b);
    int p = b - 8;
    double av = fabs((double)v);
    double qmin = pow2(-117 - b);
    double down, up;
    if (av == 0.0) {
        *lo = -0.5 * qmin;
        *hi = 0.5 * qmin;
        return 0;
    }
    int e = (int)(krn_double_bits(av) >> 52) - 1023;
    int eq = e < -126 ? -126 : e;
    double q = pow2(eq - p + 1);
    up = av + 0.5 * q;
    /* At the bottom of a binade (above the subnormal range) the grid below
     * is twice as fine. */
    down = (e > -126 && av == pow2(e)) ? av - 0.25 * q : av - 0.5 * q;
    if (v < 0) {
        *lo = -up;
        *hi = -down;
    } else {
        *lo = down;
        *hi = up;
    }
    return 0;
}
