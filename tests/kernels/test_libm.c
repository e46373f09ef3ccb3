/* ovt's exp, log and pow (kernels/cpu/libm.c), the cpu backend's:
 *   - pinned values: krn_exp/log/pow equal, bit for bit, the correctly
 *     rounded values of 66 arguments (softmax and cross-entropy exps, sums'
 *     logs, AdamW's pow(beta, t), subnormal results), computed with
 *     Python's decimal module at 90 digits, not with this code;
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
 *     case of C17 F.10.4.4 for pow) as the C library has them. */
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

enum { F_EXP, F_LOG, F_POW };
static const char *const names[] = {"exp", "log", "pow"};


static double own(int f, double x, double y)
{
    return f == F_EXP ? krn_exp(x) : f == F_LOG ? krn_log(x) : krn_pow(x, y);
}

static double libc(int f, double x, double y)
{
    return f == F_EXP ? exp(x) : f == F_LOG ? log(x) : pow(x, y);
}

/* Correctly rounded values, printed by scripts/libm_pins.py (Python's
 * decimal at 90 digits; pow as exp(ln(x) * y); each checked to lie at least
 * 0.01 ulp from a midpoint). */
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
    long double ref = f == F_EXP ? expl(x) : f == F_LOG ? logl(x) : powl(x, y);
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
} stats;

static void measure(int f, double x, double y, stats *s)
{
    double r = own(f, x, y), err;
    double cr = reference(f, x, y, r, &err);
    if (!isfinite(cr) || !isfinite(r)) {
        CHECK_MSG(same(r, cr), "%s(%a, %a) = %a, reference %a", names[f], x, y, r, cr);
        return;
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
    }
}

/* Edges: branch and range limits of each function and their neighbours. */
static const double exp_edges[] = {0x1.62e42fefa39efp9, 0x1.62e42fefa39fp9, -0x1.74910d52d3051p9,
                                   -0x1.74910d52d3052p9, -0x1.6232bdd7abcd2p9, -0x1.6232bdd7abcd3p9,
                                   -745.0, -744.5, 0x1p-54, -0x1p-54, 0x1p-53, 1e-300, -1e-300,
                                   0x1.62e42fefa39efp-13, -0.5, 1.0};
static const double log_edges[] = {DBL_MIN, DBL_TRUE_MIN, DBL_MAX, 1.0, 0x1.6a09e667f3bcdp0,
                                   0x1.6a09e667f3bcdp-1, 2.0, 0.5, 0x1.0000000000001p0,
                                   0x1.fffffffffffffp-1, 0x1p-1030};

static void test_accuracy(size_t per_fn)
{
    for (int f = F_EXP; f <= F_POW; f++) {
        stats s = {0};
        const double *edges = f == F_EXP ? exp_edges : log_edges;
        size_t ne = f == F_EXP ? sizeof exp_edges / sizeof *exp_edges
                               : f == F_LOG ? sizeof log_edges / sizeof *log_edges : 0;
        for (size_t i = 0; i < ne; i++)
            for (int d = -3; d <= 3; d++) {
                double x = edges[i];
                for (int j = 0; j < (d < 0 ? -d : d); j++)
                    x = nextafter(x, d < 0 ? -INFINITY : INFINITY);
                measure(f, x, 0.0, &s);
            }
        for (uint64_t k = 0; k < per_fn; k++) {
            double x, y;
            draw(f, k, &x, &y);
            measure(f, x, y, &s);
        }
        printf("test_libm: krn_%s: worst %.6f ulp (at %a, %a) against %s over %zu values; %zu not "
               "correctly rounded; %zu differ from the C library's %s, %zu of those where the C "
               "library is not correctly rounded\n",
               names[f], s.worst, s.at_x, s.at_y, REF_NAME, s.n, s.not_cr, s.vs_libc, names[f],
               s.libc_not_cr);
        CHECK_MSG(s.worst < 0.501, "krn_%s: worst error %.6f ulp at %a, %a", names[f], s.worst,
                  s.at_x, s.at_y);
        CHECK(s.worst <= (double)KRN_LIBM_ULP);
#ifdef OVT_TEST_MPFR
        /* the arguments are fixed: none of them is near enough a midpoint */
        CHECK_MSG(s.not_cr == 0, "krn_%s: %zu results not correctly rounded", names[f], s.not_cr);
#endif
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
    for (int f = F_EXP; f <= F_POW; f++) {
        uint64_t k = 0;
        double x = 0.0, y = 0.0;
        for (; k < 1000000; k++) {
            draw(f, k, &x, &y);
            if (!same(own(f, x, y), libc(f, x, y)))
                break;
        }
        CHECK_MSG(k < 1000000, "krn_%s: no argument where the C library differs", names[f]);
        krn_libm_fn fn = f == F_EXP ? KRN_FN_EXP : KRN_FN_LOG;
        double c = f == F_POW ? krn_cpu_pow(&cpu, x, y) : krn_cpu_libm(&cpu, fn, x);
        double r = f == F_POW ? krn_cpu_pow(&ref, x, y) : krn_cpu_libm(&ref, fn, x);
        CHECK_MSG(same(c, own(f, x, y)) && same(r, libc(f, x, y)), "%s(%a, %a): cpu %a, ref %a",
                  names[f], x, y, c, r);
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
    return check_done();
}
