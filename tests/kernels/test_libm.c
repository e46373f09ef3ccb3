/* ovt's exp, log, pow, sin and cos (kernels/cpu/libm.c), the cpu backend's:
 *   - pinned values: krn_exp/log/pow equal, bit for bit, the correctly
 *     rounded values of 66 arguments (softmax and cross-entropy exps, sums'
 *     logs, AdamW's pow(beta, t), subnormal results), computed with
 *     Python's decimal module at 90 digits, not with this code; krn_sin/cos
 *     those of 34 (mpmath at 90 digits: near multiples of pi/2, 2^20);
 *   - a hash of the results on 3 x 200,000 fixed arguments (drawn from
 *     krn_rng, the same everywhere) equals the pinned hash of the correctly
 *     rounded values, which MPFR recomputes where it is installed: so a
 *     cross build under qemu (aarch64, s390x; no MPFR there) shows the same
 *     bits as x86-64;
 *   - the error against MPFR at 256 bits (or, without it, long double:
 *     80-bit on x86-64, 113-bit on aarch64 and s390x) on millions of
 *     arguments over the ranges the ops use and the whole domain, asserted
 *     below 0.501 ulp, and every result correctly rounded (with MPFR); the
 *     count of those that differ from the C library's, printed;
 *   - the cpu backend's krn_cpu_libm and krn_cpu_pow return these, the ref
 *     backend's the C library's;
 *   - special values (zeros, infinities, NaN, negative arguments, every
 *     case of C17 F.10.4.4 for pow) as the C library has them;
 *   - sin and cos: the same error and libc counts (asserted within 1 ulp
 *     of the C library's, with or without MPFR) on random arguments in
 *     [-2^16, 2^16], [-2^20, 2^20] and 1e-300 .. 1e-3, on every rotary
 *     embedding angle pos * f_i (pos < 4096, 32 frequencies), whose hash is
 *     pinned (from mpmath), and within 3 ulps of k pi/2 for k up to 2^17
 *     (and sparser up to 2^20), where the reduction is hardest; NaN beyond
 *     2^20, sin(-0) = -0. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef OVT_TEST_MPFR
#include <mpfr.h>
#endif

#include "check.h"
#include "fp_same.h"
#include "kernels/cpu/backend.h"
#include "kernels/rng.h"

enum { F_EXP, F_LOG, F_POW, F_SIN, F_COS };
static const char *const names[] = {"exp", "log", "pow", "sin", "cos"};

static double own(int f, double x, double y)
{
    switch (f) {
    case F_EXP: return krn_exp(x);
    case F_LOG: return krn_log(x);
    case F_SIN: return krn_sin(x);
    case F_COS: return krn_cos(x);
    default: return krn_pow(x, y);
    }
}

static double libc(int f, double x, double y)
{
    switch (f) {
    case F_EXP: return exp(x);
    case F_LOG: return log(x);
    case F_SIN: return sin(x);
    case F_COS: return cos(x);
    default: return pow(x, y);
    }
}

/* Correctly rounded values, printed by scripts/libm_pins.py (Python's
 * decimal at 90 digits; pow as exp(ln(x) * y)) and, for sin and cos, by
 * scripts/libm_trig_pins.py (mpmath at 90 digits); each checked to lie at
 * least 0.01 ulp from a midpoint. */
static const struct {
    int f;
    double x, y, want;
} pins[] = {
    {F_EXP, -0x1.0000000000000p-1, 0.0, 0x1.368b2fc6f960ap-1},
    {F_EXP, -0x1.0000000000000p+0, 0.0, 0x1.78b56362cef38p-2},
    {F_EXP, -0x1.4000000000000p+1, 0.0, 0x1.50385c094f425p-4},
    {F_EXP, -0x1.4000000000000p+3, 0.0, 0x1.7cd79b5647c9bp-15},
    {F_EXP, -0x1.4200000000000p+4, 0.0, 0x1.f3fe0cb68b20cp-30},
    {F_EXP, -0x1.0a66666666666p+5, 0.0, 0x1.f165bb9b59d94p-49},
    {F_EXP, -0x1.5d589374bc6a8p+6, 0.0, 0x1.0002eece7674bp-126},
    {F_EXP, -0x1.5e00000000000p+9, 0.0, 0x1.14f2b0fb9307fp-1010},
    {F_EXP, -0x1.6240000000000p+9, 0.0, 0x0.e6cf6d08897acp-1022},
    {F_EXP, -0x1.7200000000000p+9, 0.0, 0x0.0000000000055p-1022},
    {F_EXP, -0x1.7480000000000p+9, 0.0, 0x0.0000000000001p-1022},
    {F_EXP, 0x1.0000000000000p+0, 0.0, 0x1.5bf0a8b145769p+1},
    {F_EXP, 0x1.0000000000000p-1, 0.0, 0x1.a61298e1e069cp+0},
    {F_EXP, 0x1.4000000000000p+2, 0.0, 0x1.28d389970338fp+7},
    {F_EXP, 0x1.9000000000000p+6, 0.0, 0x1.3494a9b171bf5p+144},
    {F_EXP, 0x1.62d999999999ap+9, 0.0, 0x1.d75ae7a50ee14p+1023},
    {F_EXP, -0x1.89374bc6a7efap-9, 0.0, 0x1.fe775f8c4dce8p-1},
    {F_EXP, 0x1.b7cdfd9d7bdbbp-34, 0.0, 0x1.000000006df38p+0},
    {F_EXP, -0x1.b7cdfd9d7bdbbp-34, 0.0, 0x1.ffffffff24190p-1},
    {F_EXP, -0x1.62d0e56041893p-1, 0.0, 0x1.0009a57636807p-1},
    {F_EXP, -0x1.62e42fefa39efp+3, 0.0, 0x1.0000000000002p-16},
    {F_EXP, 0x1.0000000000000p-30, 0.0, 0x1.0000000400000p+0},
    {F_EXP, -0x1.0000000000000p-30, 0.0, 0x1.fffffff800000p-1},
    {F_EXP, 0x1.999999999999ap-4, 0.0, 0x1.1aec7b35a00d4p+0},
    {F_EXP, -0x1.999999999999ap-4, 0.0, 0x1.cf46d99d52b3ap-1},
    {F_LOG, 0x1.0000000000000p+1, 0.0, 0x1.62e42fefa39efp-1},
    {F_LOG, 0x1.0000000000000p-1, 0.0, -0x1.62e42fefa39efp-1},
    {F_LOG, 0x1.8000000000000p+1, 0.0, 0x1.193ea7aad030bp+0},
    {F_LOG, 0x1.4000000000000p+3, 0.0, 0x1.26bb1bbb55516p+1},
    {F_LOG, 0x1.56e1fc2f8f359p-997, 0.0, -0x1.5963447f87fb5p+9},
    {F_LOG, 0x0.0000000000001p-1022, 0.0, -0x1.74385446d71c3p+9},
    {F_LOG, 0x0.0287f992b93f8p-1022, 0.0, -0x1.6481a76920c97p+9},
    {F_LOG, 0x1.8000000000000p+0, 0.0, 0x1.9f323ecbf984cp-2},
    {F_LOG, 0x1.0000000400000p+0, 0.0, 0x1.fffffffc00000p-31},
    {F_LOG, 0x1.fffffff800000p-1, 0.0, -0x1.0000000200000p-30},
    {F_LOG, 0x1.ff7ced916872bp-1, 0.0, -0x1.064670d979b73p-10},
    {F_LOG, 0x1.7e43c8800759cp+996, 0.0, 0x1.5963447f87fb5p+9},
    {F_LOG, 0x1.88a2000000000p+15, 0.0, 0x1.5a659f6bed8c8p+3},
    {F_LOG, 0x1.81cd6c8b43958p+13, 0.0, 0x1.2d79559791e31p+3},
    {F_LOG, 0x1.fffffffffffffp+1023, 0.0, 0x1.62e42fefa39efp+9},
    {F_LOG, 0x1.6a0902de00d1bp-1, 0.0, -0x1.62e6b3842a25ep-2},
    {F_LOG, 0x1.6a0902de00d1bp+0, 0.0, 0x1.62e1ac5b1d181p-2},
    {F_LOG, 0x1.028f5c28f5c29p+0, 0.0, 0x1.460d6ccca367cp-7},
    {F_LOG, 0x1.fae147ae147aep-1, 0.0, -0x1.495453e6fd4bcp-7},
    {F_LOG, 0x1.c000000000000p+2, 0.0, 0x1.f2272ae325a57p+0},
    {F_LOG, 0x1.2d68700000000p+20, 0.0, 0x1.c0d6e21958116p+3},
    {F_POW, 0x1.ccccccccccccdp-1, 0x1.0000000000000p+0, 0x1.ccccccccccccdp-1},
    {F_POW, 0x1.ccccccccccccdp-1, 0x1.0000000000000p+1, 0x1.9eb851eb851ecp-1},
    {F_POW, 0x1.ccccccccccccdp-1, 0x1.4000000000000p+3, 0x1.650bf60432fd9p-2},
    {F_POW, 0x1.ccccccccccccdp-1, 0x1.f400000000000p+9, 0x1.fee7413dac341p-153},
    {F_POW, 0x1.ccccccccccccdp-1, 0x1.b580000000000p+12, 0x0.00000000003f1p-1022},
    {F_POW, 0x1.ff7ced916872bp-1, 0x1.0000000000000p+0, 0x1.ff7ced916872bp-1},
    {F_POW, 0x1.ff7ced916872bp-1, 0x1.8000000000000p+1, 0x1.fe772d5570166p-1},
    {F_POW, 0x1.ff7ced916872bp-1, 0x1.f400000000000p+9, 0x1.788526411ed72p-2},
    {F_POW, 0x1.ff7ced916872bp-1, 0x1.86a0000000000p+16, 0x1.940747bb85395p-145},
    {F_POW, 0x1.ff7ced916872bp-1, 0x1.55cc000000000p+19, 0x1.863b98bac5e73p-1011},
    {F_POW, 0x1.e666666666666p-1, 0x1.0000000000000p+0, 0x1.e666666666666p-1},
    {F_POW, 0x1.e666666666666p-1, 0x1.4000000000000p+4, 0x1.6f16ef0348c97p-2},
    {F_POW, 0x1.fae147ae147aep-1, 0x1.f400000000000p+8, 0x1.ae9a69c93d692p-8},
    {F_POW, 0x1.f5c28f5c28f5cp-1, 0x1.81c8000000000p+13, 0x1.23b44ce0a847fp-360},
    {F_POW, 0x1.fff2e48e8a71ep-1, 0x1.312cfe0000000p+23, 0x0.0p+0},
    {F_POW, 0x1.0000000000000p-1, 0x1.c000000000000p+1, 0x1.6a09e667f3bcdp-4},
    {F_POW, 0x1.0000000000000p+1, 0x1.0000000000000p-1, 0x1.6a09e667f3bcdp+0},
    {F_POW, 0x1.4000000000000p+3, -0x1.8000000000000p+1, 0x1.0624dd2f1a9fcp-10},
    {F_POW, 0x1.00068db8bac71p+0, 0x1.e848000000000p+19, 0x1.330ab10a37aa5p+144},
    {F_POW, 0x1.8000000000000p+1, 0x1.554c985f06f69p-2, 0x1.7133ce7b49eedp+0},
    /* sin, cos: scripts/libm_trig_pins.py (mpmath at 90 digits) */
    {F_SIN, 0x1.0000000000000p+0, 0.0, 0x1.aed548f090ceep-1},
    {F_COS, 0x1.0000000000000p+0, 0.0, 0x1.14a280fb5068cp-1},
    {F_SIN, 0x1.0000000000000p-1, 0.0, 0x1.eaee8744b05f0p-2},
    {F_COS, 0x1.0000000000000p-1, 0.0, 0x1.c1528065b7d50p-1},
    {F_SIN, -0x1.2000000000000p+1, 0.0, -0x1.8e5f9c2d0e3a9p-1},
    {F_COS, -0x1.2000000000000p+1, 0.0, -0x1.419ff91b9ba6dp-1},
    {F_SIN, 0x1.0000000000000p-20, 0.0, 0x1.ffffffffffaabp-21},
    {F_COS, 0x1.0000000000000p-20, 0.0, 0x1.ffffffffff000p-1},
    {F_SIN, 0x1.0624dd2f1a9fcp-10, 0.0, 0x1.0624da5218a62p-10},
    {F_COS, 0x1.0624dd2f1a9fcp-10, 0.0, 0x1.ffffef390876cp-1},
    {F_SIN, 0x1.921fb54442d18p+0, 0.0, 0x1.0000000000000p+0},
    {F_COS, 0x1.921fb54442d18p+0, 0.0, 0x1.1a62633145c07p-54},
    {F_SIN, 0x1.921fb54442d18p+1, 0.0, 0x1.1a62633145c07p-53},
    {F_COS, 0x1.921fb54442d18p+1, 0.0, -0x1.0000000000000p+0},
    {F_SIN, 0x1.6c6cbc45dc8dep+5, 0.0, 0x1.0000000000000p+0},
    {F_COS, 0x1.6c6cbc45dc8dep+5, 0.0, -0x1.6d61b58c99c43p-61},
    {F_SIN, 0x1.fffe000000000p+15, 0.0, 0x1.f67090db1f5c3p-1},
    {F_COS, 0x1.fffe000000000p+15, 0.0, 0x1.89eba92bf27c6p-3},
    {F_SIN, 0x1.eeee672a80000p+9, 0.0, -0x1.08144427a5e28p-2},
    {F_COS, 0x1.eeee672a80000p+9, 0.0, -0x1.eeae670876005p-1},
    {F_SIN, 0x1.0000000000000p+20, 0.0, 0x1.526ccb2fc8656p-2},
    {F_COS, 0x1.0000000000000p+20, 0.0, 0x1.e33ada92fe2aep-1},
    {F_SIN, -0x1.0000000000000p+20, 0.0, -0x1.526ccb2fc8656p-2},
    {F_COS, -0x1.0000000000000p+20, 0.0, 0x1.e33ada92fe2aep-1},
    {F_SIN, 0x1.9000000000000p+6, 0.0, -0x1.03425b78c4db8p-1},
    {F_COS, 0x1.9000000000000p+6, 0.0, 0x1.b981dbf665fdfp-1},
    {F_SIN, 0x1.86a0000000000p+16, 0.0, 0x1.24daa9c527e96p-5},
    {F_COS, 0x1.86a0000000000p+16, 0.0, -0x1.ffac3841b3da7p-1},
    {F_SIN, 0x1.921fb54442d18p-1, 0.0, 0x1.6a09e667f3bccp-1},
    {F_COS, 0x1.921fb54442d18p-1, 0.0, 0x1.6a09e667f3bcdp-1},
    {F_SIN, 0x1.2d97c7f3321d2p+1, 0.0, 0x1.6a09e667f3bcdp-1},
    {F_COS, 0x1.2d97c7f3321d2p+1, 0.0, -0x1.6a09e667f3bccp-1},
    {F_SIN, -0x1.56e1fc2f8f359p-997, 0.0, -0x1.56e1fc2f8f359p-997},
    {F_COS, -0x1.56e1fc2f8f359p-997, 0.0, 0x1.0000000000000p+0},
};

static void test_pins(void)
{
    size_t bad = 0;
    for (size_t i = 0; i < sizeof pins / sizeof *pins; i++) {
        double r = own(pins[i].f, pins[i].x, pins[i].y);
        if (!same(r, pins[i].want) && bad++ < 10)
            printf("test_libm: %s(%a, %a) = %a, correctly rounded %a\n", names[pins[i].f], pins[i].x,
                   pins[i].y, r, pins[i].want);
    }
    CHECK_MSG(bad == 0, "%zu of %zu pinned values differ", bad, sizeof pins / sizeof *pins);
}

/* ------------------------------------------------------------ arguments */

static double unit(uint64_t r)
{
    return (double)(r >> 11) * 0x1p-53;
}

/* An argument of f (and y for pow), the k-th of its kinds. */
static void draw(int f, uint64_t k, double *x, double *y)
{
    uint64_t r = krn_rng_u64(11, (uint64_t)f, KRN_RNG_TEST, k);
    uint64_t r2 = krn_rng_u64(11, 10 + (uint64_t)f, KRN_RNG_TEST, k);
    double u = unit(r), v = unit(r2);
    *y = 0.0;
    if (f == F_EXP) {
        switch (k % 4) {
        case 0: { /* softmax, cross-entropy: an FP32 value minus its row's FP32 max */
            float m = (float)(v * 20.0 - 10.0), p = (float)((double)m - u * u * 60.0);
            *x = (double)p - (double)m;
            break;
        }
        case 1: *x = -u * 50.0; break;
        case 2: *x = u * 1456.0 - 746.0; break; /* the whole range */
        default: *x = ldexp(1.0 + u, (int)(r2 % 64) - 60) * ((r2 >> 40) & 1 ? -1.0 : 1.0);
        }
    } else if (f == F_SIN || f == F_COS) {
        double sign = (r2 >> 40) & 1 ? -1.0 : 1.0;
        switch (k % 4) {
        case 0:
        case 1: *x = (2.0 * u - 1.0) * 0x1p16; break; /* rotary embedding angles and beyond */
        case 2: *x = (2.0 * u - 1.0) * 0x1p20; break; /* the whole range */
        default: *x = sign * pow(10.0, -300.0 + 297.0 * v); /* 1e-300 .. 1e-3 */
        }
    } else if (f == F_LOG) {
        switch (k % 4) {
        case 0: *x = (double)(float)(1.0 + u * 60000.0); break; /* a softmax sum */
        case 1: { /* any positive finite double */
            uint64_t b = r2 >> 1;
            if ((b >> 52) == 0x7ff)
                b ^= UINT64_C(1) << 62;
            memcpy(x, &b, sizeof b);
            break;
        }
        case 2: *x = 1.0 + (u - 0.5) * ldexp(1.0, -(int)(r2 % 50)); break; /* near 1 */
        default: *x = u * 4.0;
        }
    } else {
        static const double betas[] = {0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999};
        switch (k % 4) {
        case 0: *x = betas[r2 % 7]; break;
        case 1: *x = (double)(float)betas[r2 % 7]; break; /* a beta that went through FP32 */
        case 2: *x = u; break;
        default: /* any x, y with |y log x| < 700 */
            *x = ldexp(1.0 + u, (int)(r % 41) - 20);
            *y = (v - 0.5) * 1400.0 / (fabs((double)((int)(r % 41) - 20)) * 0.6931471805599453 + 1.0);
            return;
        }
        /* t: 1 .. 10^4 uniform, or log-uniform up to 10^7 */
        *y = (r2 >> 20) & 1 ? (double)(1 + (r2 >> 32) % 10000)
                            : floor(ldexp(1.0 + v, (int)((r2 >> 24) % 23)));
    }
}

/* ------------------------------------------------------------ references */

#ifdef OVT_TEST_MPFR
#define REF_NAME "MPFR (256 bits)"
/* The correctly rounded value of f, and r's error in ulps of it. */
static double reference(int f, double x, double y, double r, double *err)
{
    mpfr_t a, b, d;
    mpfr_inits2(256, a, b, d, (mpfr_ptr)0);
    mpfr_set_d(a, x, MPFR_RNDN);
    if (f == F_EXP)
        mpfr_exp(a, a, MPFR_RNDN);
    else if (f == F_LOG)
        mpfr_log(a, a, MPFR_RNDN);
    else if (f == F_SIN)
        mpfr_sin(a, a, MPFR_RNDN);
    else if (f == F_COS)
        mpfr_cos(a, a, MPFR_RNDN);
    else {
        mpfr_set_d(b, y, MPFR_RNDN);
        mpfr_pow(a, a, b, MPFR_RNDN);
    }
    double cr = mpfr_get_d(a, MPFR_RNDN);
    int e = cr == 0.0 ? -1074 : ilogb(cr) - 52;
    mpfr_set_d(d, r, MPFR_RNDN);
    mpfr_sub(d, d, a, MPFR_RNDN);
    mpfr_mul_2si(d, d, -(e < -1074 ? -1074 : e), MPFR_RNDN);
    *err = fabs(mpfr_get_d(d, MPFR_RNDN));
    mpfr_clears(a, b, d, (mpfr_ptr)0);
    return cr;
}
#else
#define REF_NAME "long double"
static double reference(int f, double x, double y, double r, double *err)
{
    long double ref = f == F_EXP   ? expl(x)
                      : f == F_LOG ? logl(x)
                      : f == F_SIN ? sinl(x)
                      : f == F_COS ? cosl(x)
                                   : powl(x, y);
    double cr = (double)ref;
    int e = cr == 0.0 ? -1074 : ilogb(cr) - 52;
    *err = (double)(fabsl((long double)r - ref) / ldexpl(1.0L, e < -1074 ? -1074 : e));
    return cr;
}
#endif

/* ------------------------------------------------------------ accuracy */

typedef struct {
    double worst, at_x, at_y;
    size_t n, not_cr, vs_libc, libc_not_cr;
    uint64_t libc_ulps; /* the most doubles between krn's result and the C library's */
} stats;

/* How many doubles lie from a to b, finite (0: the same; +0 and -0 are one). */
static uint64_t ulps_apart(double a, double b)
{
    uint64_t ua = bits(a), ub = bits(b);
    int64_t ia = ua >> 63 ? -(int64_t)(ua & ~(UINT64_C(1) << 63)) : (int64_t)ua;
    int64_t ib = ub >> 63 ? -(int64_t)(ub & ~(UINT64_C(1) << 63)) : (int64_t)ub;
    return ia > ib ? (uint64_t)(ia - ib) : (uint64_t)(ib - ia);
}

/* The double d doubles above x (below, for d < 0). */
static double ulps_from(double x, int d)
{
    for (int j = 0; j < (d < 0 ? -d : d); j++)
        x = nextafter(x, d < 0 ? -INFINITY : INFINITY);
    return x;
}

/* Adds f(x, y) to s; returns the reference's value (with MPFR the correctly
 * rounded one). */
static double measure(int f, double x, double y, stats *s)
{
    double r = own(f, x, y), err;
    double cr = reference(f, x, y, r, &err);
    if (!isfinite(cr) || !isfinite(r)) {
        CHECK_MSG(same(r, cr), "%s(%a, %a) = %a, reference %a", names[f], x, y, r, cr);
        return cr;
    }
    s->n++;
    if (err > s->worst) {
        s->worst = err;
        s->at_x = x;
        s->at_y = y;
    }
    if (!same(r, cr) && s->not_cr++ < 5)
        printf("test_libm: krn_%s(%a, %a) = %a, correctly rounded %a (error %.9f ulp)\n", names[f], x,
               y, r, cr, err);
    double l = libc(f, x, y);
    if (!same(l, r)) {
        s->vs_libc++;
        s->libc_not_cr += !same(l, cr);
        uint64_t d = ulps_apart(l, r);
        if (d > s->libc_ulps)
            s->libc_ulps = d;
    }
    return cr;
}

/* Prints s and asserts: below 0.501 ulp, correctly rounded (with MPFR),
 * sin and cos within 1 ulp of the C library's. */
static void report(int f, const char *what, const stats *s)
{
    printf("test_libm: krn_%s%s: worst %.6f ulp (at %a, %a) against %s over %zu values; %zu not "
           "correctly rounded; %zu differ from the C library's %s (at most %llu ulp), %zu of those "
           "where the C library is not correctly rounded\n",
           names[f], what, s->worst, s->at_x, s->at_y, REF_NAME, s->n, s->not_cr, s->vs_libc,
           names[f], (unsigned long long)s->libc_ulps, s->libc_not_cr);
    CHECK_MSG(s->worst < 0.501, "krn_%s%s: worst error %.6f ulp at %a, %a", names[f], what, s->worst,
              s->at_x, s->at_y);
    CHECK(s->worst <= (double)KRN_LIBM_ULP);
    if (f == F_SIN || f == F_COS)
        CHECK_MSG(s->libc_ulps <= 1, "krn_%s%s: %llu ulps from the C library's", names[f], what,
                  (unsigned long long)s->libc_ulps);
#ifdef OVT_TEST_MPFR
    /* the arguments are fixed: none of them is near enough a midpoint */
    CHECK_MSG(s->not_cr == 0, "krn_%s%s: %zu results not correctly rounded", names[f], what,
              s->not_cr);
#endif
}

/* Edges: branch and range limits of each function and their neighbours. */
static const double exp_edges[] = {0x1.62e42fefa39efp9, 0x1.62e42fefa39fp9, -0x1.74910d52d3051p9,
                                   -0x1.74910d52d3052p9, -0x1.6232bdd7abcd2p9, -0x1.6232bdd7abcd3p9,
                                   -745.0, -744.5, 0x1p-54, -0x1p-54, 0x1p-53, 1e-300, -1e-300,
                                   0x1.62e42fefa39efp-13, -0.5, 1.0};
static const double log_edges[] = {DBL_MIN, DBL_TRUE_MIN, DBL_MAX, 1.0, 0x1.6a09e667f3bcdp0,
                                   0x1.6a09e667f3bcdp-1, 2.0, 0.5, 0x1.0000000000001p0,
                                   0x1.fffffffffffffp-1, 0x1p-1030};
/* sin, cos: the range's ends, the shortcut for tiny x, pi/4 and 3pi/4 (the
 * quadrants' borders), the double closest to a multiple of pi/2 below 2^20
 * (|x - 29 pi/2| = 2^-60.5; MPFR over the 7 doubles nearest every k pi/2) */
static const double trig_edges[] = {0x1p20, -0x1p20, 0x1p-27, -0x1p-27, 0x1p-26, 0x1.921fb54442d18p-1,
                                    -0x1.921fb54442d18p-1, 0x1.2d97c7f3321d2p+1,
                                    0x1.6c6cbc45dc8dep+5, -0x1.6c6cbc45dc8dep+5, 0x1p16};

static void test_accuracy(size_t per_fn)
{
    for (int f = F_EXP; f <= F_COS; f++) {
        stats s = {0};
        const double *edges = f == F_EXP ? exp_edges : f == F_LOG ? log_edges : trig_edges;
        size_t ne = f == F_EXP   ? sizeof exp_edges / sizeof *exp_edges
                    : f == F_LOG ? sizeof log_edges / sizeof *log_edges
                    : f == F_POW ? 0
                                 : sizeof trig_edges / sizeof *trig_edges;
        for (size_t i = 0; i < ne; i++)
            for (int d = -3; d <= 3; d++) {
                double x = ulps_from(edges[i], d);
                if (f >= F_SIN && fabs(x) > 0x1p20) /* NaN there: test_trig_specials */
                    continue;
                measure(f, x, 0.0, &s);
            }
        for (uint64_t k = 0; k < per_fn; k++) {
            double x, y;
            draw(f, k, &x, &y);
            measure(f, x, y, &s);
        }
        report(f, "", &s);
    }
}

/* ------------------------------------------------------------ hash */

/* FNV-1a over the bits of each result of f on the first n arguments. */
static uint64_t fnv(uint64_t h, double r)
{
    uint64_t b = bits(r);
    for (int i = 0; i < 8; i++) {
        h ^= (b >> (8 * i)) & 0xff;
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* The hash of the correctly rounded values of the first 200,000 arguments
 * of each function, from MPFR (printed by this test where MPFR is). */
static const uint64_t cr_hash[3] = {UINT64_C(0x574828a608af6af8), UINT64_C(0x16bc8b498f858f11),
                                    UINT64_C(0x6ae4ec5548b8846a)};

static void test_hash(void)
{
    for (int f = F_EXP; f <= F_POW; f++) {
        uint64_t h = UINT64_C(0xcbf29ce484222325), hr = h;
        for (uint64_t k = 0; k < 200000; k++) {
            double x, y, err;
            draw(f, k, &x, &y);
            double r = own(f, x, y);
            h = fnv(h, r);
#ifdef OVT_TEST_MPFR
            hr = fnv(hr, reference(f, x, y, r, &err));
#else
            (void)err;
#endif
        }
#ifdef OVT_TEST_MPFR
        printf("test_libm: krn_%s hash 0x%016llx, correctly rounded 0x%016llx\n", names[f],
               (unsigned long long)h, (unsigned long long)hr);
        CHECK_MSG(hr == cr_hash[f], "krn_%s: MPFR's hash 0x%016llx is not the pinned one", names[f],
                  (unsigned long long)hr);
#else
        (void)hr;
#endif
        CHECK_MSG(h == cr_hash[f], "krn_%s: hash 0x%016llx, correctly rounded 0x%016llx", names[f],
                  (unsigned long long)h, (unsigned long long)cr_hash[f]);
    }
}

/* ------------------------------------------------------------ sin, cos */

/* The hash (fnv below) of the correctly rounded sin and cos of every rotary
 * embedding angle test_trig_rope takes, from scripts/libm_trig_pins.py
 * (mpmath). */
#define ROPE_CR_HASH UINT64_C(0xfee36a7c48715905)

/* Every angle pos * f_i of a rotary embedding table, pos < 4096 and f_i =
 * 10000^(-2i/64) rounded to FP32 (head size 64), i < 32: exact doubles. */
static void test_trig_rope(void)
{
    stats s[2] = {0};
    uint64_t h = UINT64_C(0xcbf29ce484222325), hr = h;
    float freq[32];
    for (int i = 0; i < 32; i++)
        freq[i] = (float)krn_pow(10000.0, -(double)(2 * i) / 64.0);
    for (int pos = 0; pos < 4096; pos++)
        for (int i = 0; i < 32; i++) {
            double x = (double)pos * (double)freq[i];
            for (int f = F_SIN; f <= F_COS; f++) {
                h = fnv(h, own(f, x, 0.0));
                hr = fnv(hr, measure(f, x, 0.0, &s[f - F_SIN]));
            }
        }
    report(F_SIN, " (rope angles)", &s[0]);
    report(F_COS, " (rope angles)", &s[1]);
    CHECK_MSG(h == ROPE_CR_HASH, "rope table hash 0x%016llx, correctly rounded 0x%016llx",
              (unsigned long long)h, (unsigned long long)ROPE_CR_HASH);
#ifdef OVT_TEST_MPFR
    CHECK_MSG(hr == ROPE_CR_HASH, "MPFR's rope table hash 0x%016llx is not the pinned one",
              (unsigned long long)hr);
#else
    (void)hr;
#endif
}

/* Within 3 ulps of k pi/2 (either sign) for every k <= 2^17 and every 37th
 * up to 2^20 2/pi (every one with env OVT_LIBM_TRIG_ALL=1, 4.7 million
 * arguments per function): where sin or cos is nearly 0, the reduced
 * argument r = x - k pi/2 is as small as 2^-60.5, and every bit of pi/2
 * that the reduction lacks shows in the result. */
static void test_trig_near_pio2(void)
{
    stats s[2] = {0};
    const char *all = getenv("OVT_LIBM_TRIG_ALL");
    int64_t sparse = all && *all == '1' ? 1 : 37;
    for (int64_t k = 1; k <= 667544; k += k < (1 << 17) ? 1 : sparse) {
        /* k pi/2 within an ulp (pi/2 = 0x1.921fb54442d18p0 + 0x1.1a62633145c07p-54 + 2^-109.6) */
        double x0 = (double)k * 0x1.921fb54442d18p0 + (double)k * 0x1.1a62633145c07p-54;
        if (k % 3 == 0)
            x0 = -x0;
        for (int d = -3; d <= 3; d++) {
            double x = ulps_from(x0, d);
            measure(F_SIN, x, 0.0, &s[0]);
            measure(F_COS, x, 0.0, &s[1]);
        }
    }
    report(F_SIN, " (near k pi/2)", &s[0]);
    report(F_COS, " (near k pi/2)", &s[1]);
}

/* Zeros, tiny, infinite and NaN arguments, and the range's end. */
static void test_trig_specials(void)
{
    CHECK(same(krn_sin(0.0), 0.0) && same(krn_sin(-0.0), -0.0));
    CHECK(same(krn_cos(0.0), 1.0) && same(krn_cos(-0.0), 1.0));
    CHECK(same(krn_sin(DBL_TRUE_MIN), DBL_TRUE_MIN) && same(krn_sin(-DBL_MIN), -DBL_MIN));
    CHECK(same(krn_cos(-DBL_TRUE_MIN), 1.0) && same(krn_cos(1e-300), 1.0));
    static const double invalid[] = {INFINITY, -INFINITY, NAN, -NAN, 0x1.0000000000001p20,
                                     -0x1.0000000000001p20, 0x1p21, 1e300, -DBL_MAX};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
        CHECK_MSG(isnan(krn_sin(invalid[i])) && isnan(krn_cos(invalid[i])),
                  "krn_sin(%a) = %a, krn_cos = %a: NaN expected", invalid[i], krn_sin(invalid[i]),
                  krn_cos(invalid[i]));
    CHECK(isfinite(krn_sin(0x1p20)) && isfinite(krn_cos(-0x1p20)));
}

/* ------------------------------------------------------------ specials */

static void test_specials(void)
{
    static const double v[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 0.5, -0.5, 2.0, -2.0,
                               3.0, -3.0, 0x1p53, -0x1p53, 0x1p60, -0x1p60, 1.5, -1.5,
                               DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MAX, -DBL_MAX, 1000.0, -1000.0,
                               0x1.fffffffffffffp52, -0x1.fffffffffffffp52};
    size_t n = sizeof v / sizeof *v, bad = 0;
    for (size_t i = 0; i < n; i++) {
        for (int f = F_EXP; f <= F_LOG; f++)
            if (!same(own(f, v[i], 0.0), libc(f, v[i], 0.0)) && bad++ < 10)
                printf("test_libm: krn_%s(%a) = %a, C library %a\n", names[f], v[i], own(f, v[i], 0.0),
                       libc(f, v[i], 0.0));
        for (size_t j = 0; j < n; j++) {
            /* finite, nonzero, x > 0: the general path, which test_accuracy
             * checks against MPFR (and C's pow(DBL_MAX, 0.5), 2^-108 below a
             * midpoint, is closer than krn_pow looks) */
            if (v[i] > 0.0 && isfinite(v[i]) && v[j] != 0.0 && isfinite(v[j]) && v[i] != 1.0)
                continue;
            if (!same(krn_pow(v[i], v[j]), pow(v[i], v[j])) && bad++ < 10)
                printf("test_libm: krn_pow(%a, %a) = %a, C library %a\n", v[i], v[j],
                       krn_pow(v[i], v[j]), pow(v[i], v[j]));
        }
    }
    CHECK_MSG(bad == 0, "%zu special values differ from the C library's", bad);
    CHECK(signbit(krn_pow(-0.0, 3.0)) && !signbit(krn_pow(-0.0, 2.0)) && krn_pow(-2.0, 3.0) == -8.0);
    /* exp(x) at the last subnormal: 0.50000000000005 and 0.49999999999999 of 2^-1074 */
    CHECK(krn_exp(-0x1.74910d52d3051p9) == DBL_TRUE_MIN && krn_exp(-0x1.74910d52d3052p9) == 0.0);
    CHECK(krn_exp(710.0) == INFINITY && krn_exp(0x1.62e42fefa39efp9) == 0x1.fffffffffff2ap1023);
}

/* The cpu backend's libm is krn_*, the ref backend's the C library's: on
 * the first drawn argument of each function where the two differ. */
static void test_backends(void)
{
    krn_cpu cpu = {.kind = KRN_BACKEND_CPU}, ref = {.kind = KRN_BACKEND_REF};
    krn_cpu shuffle = {.kind = KRN_BACKEND_SHUFFLE, .seed = 7};
    for (int f = F_EXP; f <= F_COS; f++) {
        uint64_t k = 0;
        double x = 0.0, y = 0.0;
        for (; k < 1000000; k++) {
            draw(f, k, &x, &y);
            if (!same(own(f, x, y), libc(f, x, y)))
                break;
        }
        CHECK_MSG(k < 1000000, "krn_%s: no argument where the C library differs", names[f]);
        krn_libm_fn fn = f == F_EXP   ? KRN_FN_EXP
                         : f == F_LOG ? KRN_FN_LOG
                         : f == F_SIN ? KRN_FN_SIN
                                      : KRN_FN_COS;
        double c = f == F_POW ? krn_cpu_pow(&cpu, x, y) : krn_cpu_libm(&cpu, fn, x);
        double r = f == F_POW ? krn_cpu_pow(&ref, x, y) : krn_cpu_libm(&ref, fn, x);
        double sh = f == F_POW ? krn_cpu_pow(&shuffle, x, y) : krn_cpu_libm(&shuffle, fn, x);
        CHECK_MSG(same(c, own(f, x, y)) && same(r, libc(f, x, y)), "%s(%a, %a): cpu %a, ref %a",
                  names[f], x, y, c, r);
        CHECK_MSG(ulps_apart(sh, libc(f, x, y)) <= KRN_SHUFFLE_LIBM_ULP,
                  "%s(%a, %a): shuffle %a, C library %a", names[f], x, y, sh, libc(f, x, y));
    }
}

int main(int argc, char **argv)
{
    /* arguments per function: argv[1] or OVT_LIBM_N, else 2,000,000 (MPFR) / 300,000 */
#ifdef OVT_TEST_MPFR
    size_t per_fn = 2000000;
#else
    size_t per_fn = 300000;
#endif
    const char *env = argc > 1 ? argv[1] : getenv("OVT_LIBM_N");
    if (env && *env)
        per_fn = (size_t)strtoull(env, NULL, 10);
    CHECK_RUN(test_pins());
    CHECK_RUN(test_specials());
    CHECK_RUN(test_hash());
    CHECK_RUN(test_backends());
    CHECK_RUN(test_accuracy(per_fn));
    CHECK_RUN(test_trig_specials());
    CHECK_RUN(test_trig_rope());
    CHECK_RUN(test_trig_near_pio2());
    return check_done();
}
