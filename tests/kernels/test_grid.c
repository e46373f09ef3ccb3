/* The grid against independent oracles:
 *  - b = 32: C's (float)x conversion (round-to-nearest-even, the default mode);
 *  - every b: an oracle on FP32 bit patterns. The patterns of non-negative
 *    floats are ordered like their values and grid values are the patterns
 *    with the low 32-b bits zero, so the grid neighbours of x are found by
 *    stepping patterns by 2^(32-b), and the nearest by comparing x with the
 *    exact FP64 mean of the two. It shares no code with kernels/grid.c.
 * Millions of random doubles over the whole FP32 range, exact ties of both
 * parities, near-ties, binade edges, subnormals, zero, the top, overflow. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/grid.h"
#include "kernels/rng.h"

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* The FP64 value of a non-negative float pattern; 0x7f800000 (one grid step
 * past the largest finite grid value) stands for 2^128. */
static double pattern_value(uint32_t p)
{
    return p >= 0x7f800000u ? 0x1p128 : (double)bitsf(p);
}

/* Oracle: the grid rounding of finite x, +-inf on overflow. Also returns
 * the two grid patterns around |x|. */
static float oracle_round(double x, int b, uint32_t *lo_out, uint32_t *hi_out)
{
    uint32_t step = UINT32_C(1) << (32 - b);
    double ax = fabs(x);
    float fx = (float)ax;
    uint32_t p = isinf(fx) ? 0x7f7fffffu : fbits(fx);
    p &= ~(step - 1);
    while (p > 0 && pattern_value(p) > ax)
        p -= step;
    while (p + step <= 0x7f800000u && pattern_value(p + step) <= ax)
        p += step;
    uint32_t lo = p, hi = p + step;
    double mid = (pattern_value(lo) + pattern_value(hi)) / 2.0; /* exact */
    uint32_t r;
    if (ax < mid)
        r = lo;
    else if (ax > mid)
        r = hi;
    else
        r = ((lo / step) % 2 == 0) ? lo : hi;
    if (lo_out)
        *lo_out = lo;
    if (hi_out)
        *hi_out = hi;
    float v = r >= 0x7f800000u ? INFINITY : bitsf(r);
    return signbit(x) ? -v : v;
}

static long mismatches;

static void check_one(double x, int b)
{
    uint32_t lo, hi;
    float want = oracle_round(x, b, &lo, &hi);
    float got = krn_grid_round(x, b);
    if (fbits(got) != fbits(want)) {
        if (mismatches++ < 10)
            fprintf(stderr, "b=%d x=%a: round %a, oracle %a\n", b, x, (double)got, (double)want);
        CHECK(fbits(got) == fbits(want));
        return;
    }
    if (b == 32) {
        float conv = (float)x;
        CHECK_MSG(fbits(conv) == fbits(got), "x=%a (float)x=%a grid=%a", x, (double)conv,
                  (double)got);
    }
    krn_grid_pos pos;
    int rc = krn_grid_locate(x, b, &pos);
    if (isinf(want)) {
        CHECK_MSG(rc == OVT_ENUMERIC, "x=%a b=%d overflow not reported", x, b);
        return;
    }
    if (rc != 0) {
        CHECK_MSG(rc == 0, "x=%a b=%d: %s", x, b, ovt_errmsg());
        return;
    }
    CHECK(fbits(pos.nearest) == fbits(want));
    /* mid is the mean of two adjacent grid values, spacing their distance,
     * dist the exact distance, and no other midpoint is nearer. */
    double below = pos.below, above = pos.above;
    if (isinf(pos.above))
        above = 0x1p128;
    if (isinf(pos.below))
        below = -0x1p128;
    uint32_t step = UINT32_C(1) << (32 - b);
    CHECK(krn_grid_contains(pos.below, b) || isinf(pos.below));
    CHECK(krn_grid_contains(pos.above, b) || isinf(pos.above));
    CHECK((below + above) / 2.0 == pos.mid);
    CHECK(above - below == pos.spacing);
    double ab = fabs(below), aa = fabs(above);
    uint32_t pb = ab >= 0x1p128 ? 0x7f800000u : fbits((float)ab);
    uint32_t pa = aa >= 0x1p128 ? 0x7f800000u : fbits((float)aa);
    CHECK_MSG((pb > pa ? pb - pa : pa - pb) == step, "x=%a: below %a above %a not adjacent", x,
              below, above);
    CHECK(pos.dist == fabs(x - pos.mid)); /* the subtraction is exact here */
    /* The midpoints of the intervals around |x| (lo-step..lo, lo..hi, hi..hi+step). */
    double ax = fabs(x);
    double mids[3] = {
        (pattern_value(lo) + pattern_value(hi)) / 2.0,
        lo >= step ? (pattern_value(lo - step) + pattern_value(lo)) / 2.0 : INFINITY,
        hi + step <= 0x7f800000u ? (pattern_value(hi) + pattern_value(hi + step)) / 2.0 : INFINITY,
    };
    for (int k = 0; k < 3; k++)
        CHECK_MSG(!(fabs(ax - mids[k]) < pos.dist), "x=%a b=%d: midpoint %a is nearer than %a", x,
                  b, mids[k], pos.mid);
}

/* A random double spread over the FP32 range (all exponents, subnormals),
 * or within a few FP64 ulps of a grid midpoint, or exactly on one. */
static double random_double(uint64_t k, int b)
{
    uint64_t r = krn_rng_u64(1, 0, KRN_RNG_TEST, k);
    uint64_t r2 = krn_rng_u64(2, 0, KRN_RNG_TEST, k);
    int kind = (int)(r % 4);
    uint32_t step = UINT32_C(1) << (32 - b);
    uint32_t pat = (uint32_t)(r >> 32) & 0x7fffffffu;
    if (pat >= 0x7f800000u)
        pat = (uint32_t)(r >> 33) & 0x3fffffffu;
    double sign = (r2 & 1) ? -1.0 : 1.0;
    if (kind == 0) {
        /* any double in the float range: pattern plus random low bits */
        uint64_t d = dbits((double)bitsf(pat)) ^ ((r2 >> 1) & ((UINT64_C(1) << 29) - 1));
        double x;
        memcpy(&x, &d, sizeof x);
        return sign * x;
    }
    pat &= ~(step - 1);
    if (pat + step > 0x7f800000u)
        pat -= step;
    double mid = (pattern_value(pat) + pattern_value(pat + step)) / 2.0;
    if (kind == 1)
        return sign * mid; /* exact tie */
    int ulps = (int)((r2 >> 8) % 9) - 4;
    double x = mid;
    for (int i = 0; i < abs(ulps); i++)
        x = nextafter(x, ulps > 0 ? INFINITY : 0.0);
    if (kind == 3) /* within a relative 2^-30 of the midpoint */
        x = mid + mid * ((double)(int64_t)(r2 >> 20) * 0x1p-73);
    return sign * x;
}

static void test_random(void)
{
    long per_b = 400000;
    for (int b = KRN_GRID_BITS_MIN; b <= KRN_GRID_BITS_MAX; b++)
        for (long k = 0; k < per_b; k++)
            check_one(random_double((uint64_t)b * 10000000u + (uint64_t)k, b), b);
    /* b = 32 gets more, against (float)x */
    for (long k = 0; k < 2000000; k++)
        check_one(random_double(900000000u + (uint64_t)k, 32), 32);
}

static void test_special(void)
{
    for (int b = KRN_GRID_BITS_MIN; b <= KRN_GRID_BITS_MAX; b++) {
        uint32_t step = UINT32_C(1) << (32 - b);
        double qmin = (double)bitsf(step); /* the smallest positive grid value */
        double top = (double)bitsf(0x7f800000u - step);
        double xs[] = {
            0.0, -0.0, qmin, -qmin, qmin / 2, -qmin / 2, nextafter(qmin / 2, 1), qmin * 1.5,
            qmin * 2.5, qmin / 4, 0x1p-1074, -0x1p-1074, 0x1p-1022, 0x1p-126, 0x1p-126 - qmin / 2,
            0x1p-126 - qmin / 4, 0x1p-126 + qmin / 2, 1.0, -1.0, 2.0, nextafter(2.0, 0),
            nextafter(2.0, 3), 0x1p127, top, -top, top + top / (1 << 26),
            top + (0x1p128 - top) / 2, /* the overflow threshold (a tie to 2^128) */
            nextafter(top + (0x1p128 - top) / 2, 0), 0x1p128, 1e300, -1e300,
        };
        for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
            check_one(xs[i], b);
        /* binade edges: 2^e exactly, and a quarter/eighth step below and above */
        for (int e = -149; e <= 127; e++) {
            double p2 = ldexp(1.0, e);
            double ulp = e - (b - 9) > -149 + (32 - b) ? ldexp(1.0, e - (b - 9)) : qmin;
            double probes[] = {p2, p2 - ulp / 4, p2 - ulp / 8, p2 + ulp / 8, p2 + ulp / 2,
                               p2 + ulp / 4, p2 - ulp / 2, nextafter(p2, 0), nextafter(p2, 4)};
            for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
                check_one(probes[i], b);
                check_one(-probes[i], b);
            }
        }
    }
    /* -0 stays -0, +0 stays +0, and a tiny negative value rounds to -0 (as
     * (float)x does; sites then write every zero as +0). */
    CHECK(fbits(krn_grid_round(-0.0, 32)) == 0x80000000u);
    CHECK(fbits(krn_grid_round(0.0, 24)) == 0);
    CHECK(fbits(krn_grid_round(-1e-60, 30)) == 0x80000000u);
    /* overflow: the largest finite value survives, half a step above is out */
    CHECK(krn_grid_round(0x1.fffffep127, 32) == 0x1.fffffep127f);
    CHECK(isinf(krn_grid_round(0x1.ffffffp127, 32)));
    CHECK(isinf(krn_grid_round(0x1.ffffp127, 24))); /* p = 16: the top is 0x1.fffep127 */
    CHECK(krn_grid_round(0x1.fffefffp127, 24) == 0x1.fffep127f);
}

static void test_errors(void)
{
    krn_grid_pos pos;
    CHECK(krn_grid_locate(NAN, 32, &pos) == OVT_ENUMERIC);
    CHECK(strstr(ovt_errmsg(), "non-finite") != NULL);
    CHECK(krn_grid_locate(INFINITY, 32, &pos) == OVT_ENUMERIC);
    CHECK(krn_grid_locate(-INFINITY, 24, &pos) == OVT_ENUMERIC);
    CHECK(krn_grid_locate(1.0, 23, &pos) == OVT_EINVAL);
    CHECK(krn_grid_locate(1.0, 33, &pos) == OVT_EINVAL);
    CHECK(krn_grid_check_bits(24) == 0 && krn_grid_check_bits(32) == 0);
    CHECK(krn_grid_check_bits(0) == OVT_EINVAL);
    CHECK(isnan(krn_grid_round(NAN, 32)));
    CHECK(isinf(krn_grid_round(INFINITY, 28)));
    CHECK(krn_grid_locate(0x1p128, 32, &pos) == OVT_ENUMERIC);
    CHECK(strstr(ovt_errmsg(), "largest finite grid value") != NULL);
    CHECK(!krn_grid_contains(INFINITY, 32));
    CHECK(!krn_grid_contains(NAN, 32));
    CHECK(krn_grid_contains(1.5f, 24));
    CHECK(!krn_grid_contains(bitsf(0x3f800080u), 24));
    CHECK(krn_grid_contains(bitsf(0x3f800080u), 25));
    CHECK(krn_grid_contains(bitsf(0x3f800100u), 24));
    double lo, hi;
    CHECK(krn_grid_interval(bitsf(0x3f800080u), 24, &lo, &hi) == OVT_EINVAL);
}

static void test_interval(void)
{
    /* The rounding interval of v: its ends are midpoints, values just inside
     * round to v, just outside do not. */
    for (int b = KRN_GRID_BITS_MIN; b <= KRN_GRID_BITS_MAX; b += 4) {
        for (uint64_t k = 0; k < 20000; k++) {
            uint32_t step = UINT32_C(1) << (32 - b);
            uint32_t pat = (uint32_t)krn_rng_below(3, (uint64_t)b, KRN_RNG_TEST, k, 0x7f800000u / step) * step;
            float v = bitsf(pat);
            if (k % 2)
                v = -v;
            double lo, hi;
            CHECK(krn_grid_interval(v, b, &lo, &hi) == 0);
            CHECK(lo < hi);
            CHECK(krn_grid_round(nextafter(lo, hi), b) == v);
            CHECK(krn_grid_round(nextafter(hi, lo), b) == v);
            if (isfinite(krn_grid_round(nextafter(lo, -INFINITY), b)))
                CHECK(krn_grid_round(nextafter(lo, -INFINITY), b) != v);
            if (isfinite(krn_grid_round(nextafter(hi, INFINITY), b)))
                CHECK(krn_grid_round(nextafter(hi, INFINITY), b) != v);
        }
    }
}

int main(void)
{
    CHECK_RUN(test_special());
    CHECK_RUN(test_errors());
    CHECK_RUN(test_interval());
    CHECK_RUN(test_random());
    fprintf(stderr, "%ld mismatches\n", mismatches);
    return check_done();
}
