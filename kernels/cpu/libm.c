/* ovt's exp, log, pow, sin and cos (kernels/cpu/backend.h): the cpu backend's libm,
 * the same bits on every machine and compiler, since they use only IEEE
 * + - * / and fma (correctly rounded everywhere; the build has
 * -ffp-contract=off, so nothing else is fused) and constants written as
 * exact hex doubles (kernels/cpu/libm_tables.h, from scripts/libm_tables.py).
 *
 * Each computes its result as a double-double hi + lo, an unevaluated sum
 * with a relative error near 2^-90 (exp, log) or 2^-70 (pow of large
 * |y log x|), and rounds hi + lo once: the result is the correctly rounded
 * value except where the exact one lies closer than that error to a
 * midpoint between two doubles (test_libm finds none in millions of inputs
 * checked against MPFR).
 *
 * exp(x) = 2^K * 2^(a/64) * 2^(b/4096) * exp(r), n = 4096 K + 64 a + b the
 *   nearest integer to x * 4096 / ln2 and r = x - n ln2/4096 (|r| <= 2^-12.5,
 *   ln2/4096 in three parts, the first times n exact), exp(r) by its Taylor
 *   series to r^6 (truncation < 2^-99), r^2 exact, r^3 on in double.
 * log(x) = e ln2 + log(1/c_j) + log1p(r), x = 2^e m with m in [sqrt(1/2),
 *   sqrt 2), c_j ~ 1 / (1 + j/256) the nearest entry, r = m c_j - 1 exact
 *   as a double-double (|r| <= 2^-8.5), log1p(r) by its series to r^12
 *   (truncation < 2^-100 |r|), r - r^2/2 + r^3/3 in double-double.
 * pow(x, y) = exp(y log x), the product and the exp in double-double.
 * sin(x), cos(x) for |x| <= 2^20: x = k pi/2 + r, k the nearest integer to
 *   x 2/pi, r in double-double from pi/2 = P1 + P2 + P3 (each the nearest
 *   double to what the ones before leave; 2^-163 left over, so k times it
 *   is below 2^-143), the products k P1 and k P2 exact with fma, x - k P1
 *   exact (Sterbenz), the rest summed exactly down to 2^-137: r has an
 *   absolute error near 2^-137, relative 2^-76 even where x lies closest
 *   to a multiple of pi/2 (|r| >= 2^-60.5 for every double |x| <= 2^20,
 *   the least at x = 0x1.6c6cbc45dc8dep+5); then sin r or cos r by the
 *   quadrant k mod 4, each a Taylor series in z = r^2 on |r| <= pi/4 +
 *   2^-31 (k from x 2/pi rounded twice): sin r = r + r z S(z), S(z) =
 *   sum_{j=1..11} (-1)^j z^(j-1) / (2j+1)!, cos r = 1 + z C(z), C(z) =
 *   sum_{j=1..11} (-1)^j z^(j-1) / (2j)! (the first terms left out,
 *   r^25/25! and r^24/24!, are below 2^-86 of the result at pi/4). The terms
 *   from z^4 on are summed in double (they are below 2^-17 of the result, so
 *   their rounding errors near 2^-70), the four before them, z and the
 *   products in double-double. */
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/backend.h"
#include "kernels/cpu/libm_tables.h"
#include "kernels/grid_bits.h"

/* On x86-64, each function is built twice and picked at run time: for CPUs
 * with FMA, where fma() is one instruction, and for the rest, where it is
 * the C library's (correctly rounded there too: the same values, which
 * test_libm checks on whichever this CPU runs, test_libm_plain on a build
 * without the FMA copy). The helpers are inlined into both (LIBM_INLINE);
 * -ffp-contract=off still keeps every a * b + c unfused. (GCC's
 * target_clones would do the dispatch, but Clang 14 emits no symbol for
 * such a function that its own file does not call.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(OVT_LIBM_NO_CLONES)
#define LIBM_FMA 1
#endif
#define LIBM_INLINE static inline __attribute__((always_inline))

typedef struct {
    double hi, lo;
} dd;

/* a + b exactly, |a| >= |b| (or a == 0). */
LIBM_INLINE dd fast_two_sum(double a, double b)
{
    double s = a + b;
    return (dd){s, (a - s) + b};
}

/* a + b exactly, any magnitudes. */
LIBM_INLINE dd two_sum(double a, double b)
{
    double s = a + b, bb = s - a;
    return (dd){s, (a - (s - bb)) + (b - bb)};
}

/* a + b rounded to odd: where the sum is inexact, the neighbour whose last
 * bit is 1. a + RO(b + c) then rounds to nearest exactly as a + b + c would
 * (when b + c is far below ulp(a)): the odd bit keeps the sign of what lies
 * below, which plain rounding loses where b is half an ulp of a. */
LIBM_INLINE double sum_odd(double a, double b)
{
    dd s = two_sum(a, b);
    uint64_t u = krn_double_bits(s.hi);
    if (s.lo != 0.0 && !(u & 1))
        u += (s.lo > 0.0) == (s.hi > 0.0) ? 1 : (uint64_t)-1;
    return krn_bits_double(u);
}

/* ---------------------------------------------------------------- exp */

/* 2^k * (hi + lo) rounded once, |lo| about ulp(hi)/2 at most, hi in
 * [0.99, 2.01): where the result may be subnormal (k <= -1022), hi +
 * lo is rounded to a multiple of 2^-1074 directly, so it is not rounded
 * twice. */
LIBM_INLINE double exp_scale(double hi, double lo, int k)
{
    if (k > -1022) {
        double r = hi + lo;
        if (k > 1000) /* 2^k may not be a double: two steps, exact until the last overflows */
            return r * krn_bits_double((uint64_t)(k - 1000 + 1023) << 52) * 0x1p1000;
        return r * krn_bits_double((uint64_t)(k + 1023) << 52);
    }
    if (k < -1080)
        return 0.0;
    /* u = (hi + lo) 2^(k + 1074) in units of 2^-1074: below 2^53, exact scaling */
    double s = krn_bits_double((uint64_t)(k + 1074 + 1023) << 52);
    double uh = hi * s, ul = lo * s;
    double n = (double)(int64_t)uh; /* uh truncated */
    double d = (uh - n) + ul;       /* uh - n exact, in [0, 1) */
    if (d > 0.5 || (d == 0.5 && ((int64_t)n & 1)))
        n += 1.0;
    else if (d < -0.5)
        n -= 1.0;
    return n * 0x1p-1074;
}

/* exp(xh + xl), |xl| <= ulp(xh), for -746 < xh < 710. */
LIBM_INLINE double exp_dd(double xh, double xl)
{
    double nd = (xh * EXP_INV_STEP + 0x1.8p52) - 0x1.8p52; /* nearest integer */
    int64_t n = (int64_t)nd;
    /* r = x - n ln2/4096: xh - n C1 is exact (n C1 exact, Sterbenz) */
    double t = xh - nd * EXP_C1;
    double p2 = nd * EXP_C2, p2e = fma(nd, EXP_C2, -p2);
    dd r = two_sum(t, -p2);
    r.lo += xl - p2e - nd * EXP_C3;
    r = two_sum(r.hi, r.lo); /* xl may exceed r.hi */

    /* exp(r) - 1 = r + r^2/2 + r^3 (1/6 + r/24 + r^2/120 + r^3/720) */
    double r2 = r.hi * r.hi, r2e = fma(r.hi, r.hi, -r2) + 2.0 * r.hi * r.lo;
    double poly = 1.0 / 6.0 + r.hi * (1.0 / 24.0 + r.hi * (1.0 / 120.0 + r.hi * (1.0 / 720.0)));
    dd s = fast_two_sum(r.hi, 0.5 * r2);
    s.lo += r.lo + 0.5 * r2e + r2 * r.hi * poly;

    /* T = 2^(a/64) 2^(b/4096) */
    int64_t ab = n & 4095;
    int k = (int)((n - ab) / 4096);
    const double *ta = exp_t64[ab >> 6], *tb = exp_t4096[ab & 63];
    double th = ta[0] * tb[0];
    double tl = fma(ta[0], tb[0], -th) + ta[0] * tb[1] + ta[1] * tb[0];

    /* T (1 + s) = T + T s */
    double p = th * s.hi, pe = fma(th, s.hi, -p);
    dd y = fast_two_sum(th, p);
    /* y.hi + y.lo + rest, renormalised (the subnormal rounding needs it):
     * rest holds r^3's term, far above ulp(y.hi) */
    dd l = two_sum(y.lo, pe + tl + th * s.lo + tl * s.hi);
    y = fast_two_sum(y.hi, l.hi);
    return exp_scale(y.hi, sum_odd(y.lo, l.lo), k);
}

LIBM_INLINE double exp_body(double x)
{
    if (!(x < 709.8)) /* NaN, +inf, overflow; 709.78 overflows in exp_scale */
        return x != x ? x + x : (x == INFINITY ? x : INFINITY);
    if (!(x > -746.0)) /* -inf and below 2^-1075 */
        return 0.0;
    if (fabs(x) < 0x1p-54) /* 1 + x rounds like exp(x) */
        return 1.0 + x;
    return exp_dd(x, 0.0);
}

/* ---------------------------------------------------------------- log */

/* log(x) as hi + lo (lo rounded to odd: hi + lo rounds as the exact sum
 * would) for positive, finite, normal or subnormal x. */
LIBM_INLINE dd log_dd(double x)
{
    uint64_t b = krn_double_bits(x);
    int e = 0;
    if (b < (UINT64_C(1) << 52)) { /* subnormal */
        b = krn_double_bits(x * 0x1p52);
        e = -52;
    }
    e += (int)(b >> 52) - 1023;
    double m = krn_bits_double((b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1023) << 52)); /* [1, 2) */
    if (m > 0x1.6a09e667f3bcdp0) { /* > sqrt 2 */
        m *= 0.5;
        e += 1;
    }
    int j = (int)((m - 1.0) * 256.0 + 128.5) - 128; /* nearest j, m - 1 exact */
    const double *t = log_t[j - LOG_JMIN];

    /* r = m c - 1 exactly: m c = p + pe, p - 1 exact (p in [1/2, 2]) */
    double p = m * t[0], pe = fma(m, t[0], -p);
    dd r = two_sum(p - 1.0, pe);

    /* log1p(r) = r - r^2/2 + r^3/3 + r^4 (-1/4 + r/5 - ... + r^8/12) */
    double r2 = r.hi * r.hi, r2e = fma(r.hi, r.hi, -r2) + 2.0 * r.hi * r.lo;
    double r3 = r2 * r.hi, r3e = fma(r2, r.hi, -r3) + r2e * r.hi + r2 * r.lo;
    double q = r3 * LOG_THIRD_HI, qe = fma(r3, LOG_THIRD_HI, -q) + r3 * LOG_THIRD_LO + r3e * LOG_THIRD_HI;
    double h = r.hi;
    double poly = -1.0 / 4 + h * (1.0 / 5 + h * (-1.0 / 6 + h * (1.0 / 7 + h * (-1.0 / 8 + h * (1.0 / 9 +
                  h * (-1.0 / 10 + h * (1.0 / 11 + h * (-1.0 / 12))))))));
    dd s = fast_two_sum(r.hi, -0.5 * r2);
    dd s3 = fast_two_sum(s.hi, q);
    s3.lo += s.lo + r.lo - 0.5 * r2e + qe + r2 * r2 * poly;

    /* e ln2 + log(1/c) + log1p(r) */
    double eh = e * LOG_LN2_HI, ee = fma((double)e, LOG_LN2_HI, -eh) + e * LOG_LN2_LO;
    dd a = two_sum(eh, t[1]);
    dd y = two_sum(a.hi, s3.hi);
    y.lo = sum_odd(y.lo, a.lo + ee + t[2] + s3.lo);
    return y;
}

LIBM_INLINE double log_body(double x)
{
    if (x != x)
        return x + x;
    if (x == 0.0)
        return -INFINITY;
    if (x < 0.0)
        return NAN; /* one NaN on every machine (0/0's sign differs) */
    if (x == INFINITY)
        return x;
    if (x == 1.0)
        return 0.0;
    dd y = log_dd(x);
    return y.hi + y.lo;
}

/* ---------------------------------------------------------------- pow */

/* 0: y not an integer, 1: odd integer, 2: even integer (0, and every
 * |y| >= 2^53). */
LIBM_INLINE int int_kind(double y)
{
    uint64_t b = krn_double_bits(y) & ~(UINT64_C(1) << 63);
    int frac = 1075 - (int)(b >> 52); /* bits of the significand below 1 */
    if (frac < 0 || b == 0)
        return 2;
    if (frac > 52)
        return 0; /* 0 < |y| < 1 */
    uint64_t m = (b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    if (m & ((UINT64_C(1) << frac) - 1))
        return 0;
    return (m >> frac) & 1 ? 1 : 2;
}

/* pow where x or y is 0, infinite or NaN, or x is negative (C17 F.10.4.4);
 * sets *done. */
LIBM_INLINE double pow_special(double x, double y, int *done)
{
    *done = 1;
    if (y == 0.0 || x == 1.0)
        return 1.0;
    if (x != x || y != y)
        return x + y;
    int yk = int_kind(y);
    if (x == 0.0) {
        double z = y < 0.0 ? INFINITY : 0.0;
        return yk == 1 ? copysign(z, x) : z;
    }
    if (isinf(y)) {
        double ax = fabs(x);
        if (ax == 1.0)
            return 1.0;
        return (ax < 1.0) == (y < 0.0) ? INFINITY : 0.0;
    }
    if (isinf(x)) {
        double z = y < 0.0 ? 0.0 : INFINITY;
        return x < 0.0 && yk == 1 ? -z : z;
    }
    if (x < 0.0 && yk == 0)
        return NAN;
    *done = 0;
    return 0.0;
}

LIBM_INLINE double pow_body(double x, double y)
{
    int done;
    double special = pow_special(x, y, &done);
    if (done)
        return special;
    double sign = x < 0.0 && int_kind(y) == 1 ? -1.0 : 1.0;
    dd l = log_dd(fabs(x));
    double zh = y * l.hi; /* may be infinite */
    if (zh > 709.8)
        return sign * INFINITY;
    if (zh < -746.0)
        return sign * 0.0;
    dd z = fast_two_sum(zh, fma(y, l.hi, -zh) + y * l.lo);
    if (fabs(z.hi) < 0x1p-54)
        return sign * (1.0 + z.hi);
    return sign * exp_dd(z.hi, z.lo);
}

/* ---------------------------------------------------------------- sin, cos */

/* c + z acc as a double-double, |z acc| well below |c|. */
LIBM_INLINE dd horner_dd(dd z, dd acc, const double c[2])
{
    double p = z.hi * acc.hi;
    double pe = fma(z.hi, acc.hi, -p) + (z.hi * acc.lo + z.lo * acc.hi);
    dd s = fast_two_sum(c[0], p);
    s.lo += c[1] + pe;
    return s;
}

/* The Taylor polynomial S(z) or C(z) above (coefficients c[j - 1]): z^4 on
 * in double, then four double-double steps. */
LIBM_INLINE dd trig_poly(dd z, const double c[11][2])
{
    double t = c[10][0];
    for (int j = 9; j >= 4; j--)
        t = c[j][0] + z.hi * t;
    dd acc = {t, 0.0};
    for (int j = 3; j >= 0; j--)
        acc = horner_dd(z, acc, c[j]);
    return acc;
}

/* sin r (odd == 0) or cos r (odd == 1) for r = rh + rl, |r| <= pi/4 + 2^-31,
 * times sign, rounded once. */
LIBM_INLINE double trig_kernel(double rh, double rl, int odd, double sign)
{
    double zh = rh * rh, zl = fma(rh, rh, -zh) + 2.0 * rh * rl;
    dd z = {zh, zl};
    dd p = trig_poly(z, odd ? trig_cos : trig_sin);
    /* w = z P(z): -r^2/6 or -r^2/2 and on */
    double wh = zh * p.hi, wl = fma(zh, p.hi, -wh) + (zh * p.lo + zl * p.hi);
    dd y;
    if (odd) { /* 1 + w */
        y = fast_two_sum(1.0, wh);
        y.lo = sum_odd(y.lo, wl);
    } else { /* r + r w */
        double q = rh * wh, qe = fma(rh, wh, -q) + (rh * wl + rl * wh);
        y = fast_two_sum(rh, q);
        y.lo = sum_odd(y.lo, rl + qe);
    }
    return sign * y.hi + sign * y.lo;
}

/* sin x (shift 0) or cos x = sin(x + pi/2) (shift 1). */
LIBM_INLINE double trig_body(double x, int shift)
{
    if (x != x)
        return x + x;
    double ax = fabs(x);
    if (!(ax <= 0x1p20)) /* infinite, or beyond the reduction's range (backend.h) */
        return NAN;
    if (ax < 0x1p-27) /* sin x rounds to x (x^3/6 < 2^-56 x), cos x to 1 (x^2/2 < 2^-55) */
        return shift ? 1.0 : x;
    double kd = (x * TRIG_2_OVER_PI + 0x1.8p52) - 0x1.8p52; /* nearest integer, |k| < 2^20 */
    /* r = x - k (P1 + P2 + P3): k P1 = ph + pe and k P2 = qh + qe exactly */
    double ph = kd * TRIG_PIO2_1, pe = fma(kd, TRIG_PIO2_1, -ph);
    double qh = kd * TRIG_PIO2_2, qe = fma(kd, TRIG_PIO2_2, -qh);
    double t = x - ph; /* exact: ph within a factor 2 of x, or 0 */
    dd u = two_sum(pe, qh);
    dd a = two_sum(t, -u.hi);
    dd r = two_sum(a.hi, ((a.lo - u.lo) - qe) - kd * TRIG_PIO2_3);
    int q = (int)((int64_t)kd & 3) + shift; /* sin(r + q pi/2) */
    return trig_kernel(r.hi, r.lo, q & 1, (q & 2) ? -1.0 : 1.0);
}

LIBM_INLINE double sin_body(double x)
{
    return trig_body(x, 0);
}

LIBM_INLINE double cos_body(double x)
{
    return trig_body(x, 1);
}

/* ---------------------------------------------------------------- entry points */

#ifdef LIBM_FMA
#define LIBM_DISPATCH(name, params, args)                                              \
    __attribute__((target("fma"))) static double name##_fma params                       \
    {                                                                                    \
        return name##_body args;                                                         \
    }                                                                                    \
    static double name##_plain params                                                    \
    {                                                                                    \
        return name##_body args;                                                         \
    }                                                                                    \
    double krn_##name params                                                             \
    {                                                                                    \
        return __builtin_cpu_supports("fma") ? name##_fma args : name##_plain args;     \
    }
#else
#define LIBM_DISPATCH(name, params, args) \
    double krn_##name params              \
    {                                     \
        return name##_body args;          \
    }
#endif

LIBM_DISPATCH(exp, (double x), (x))
LIBM_DISPATCH(log, (double x), (x))
LIBM_DISPATCH(pow, (double x, double y), (x, y))
LIBM_DISPATCH(sin, (double x), (x))
LIBM_DISPATCH(cos, (double x), (x))
