/* The learning-rate schedule (see schedule.h). */
#include "trainer/schedule.h"

#include <string.h>

/* Why not libm's cos: "schedule.lr" is an exact site (band zero), which is
 * sound only if every machine computes the same FP64 value before rounding.
 * cos is not an IEEE basic operation; glibc, musl and CUDA's libm may differ
 * in the last bit. So the cosine is a fixed polynomial evaluated by Horner's
 * rule with + and * only; this file is compiled with -ffp-contract=off (no
 * FMA contraction), so the bits are fixed by the source.
 *
 * Reduction, each step exact (Sterbenz: a - b is exact for b/2 <= a <= 2b):
 *   p in (1/2, 1]:  cos(pi p) = -cos(pi q), q = 1 - p in [0, 1/2)
 *   q in [0, 1/4]:  cos(pi q)  = C(q)
 *   q in (1/4, 1/2]: cos(pi q) = sin(pi r) = S(r), r = 1/2 - q in [0, 1/4)
 * C and S are the Taylor polynomials of cos(pi x) and sin(pi x) at 0 with
 * the coefficients below (-1)^k pi^2k / (2k)! and (-1)^k pi^(2k+1) / (2k+1)!
 * rounded to double (mpmath, 40 digits). On [0, 1/4] (|pi x| <= pi/4) the
 * first dropped term is below 2e-18 (cos) and 8e-20 (sin), far under half an
 * ulp; the rest of the error is the rounding of the coefficients and of the
 * Horner steps: at most 1.63 ulp against a long double reference over
 * 2 * 10^7 random points (the worst just above 0.5, where the ulp halves);
 * tests/trainer/test_trn_schedule.c asserts <= 2 ulps over 2.3 * 10^5. */
static const double cos_coef[9] = {
    1.0,
    -4.934802200544679309417245,
    4.058712126416768218185014,
    -1.335262768854589495875305,
    0.2353306303588932045418794,
    -0.02580689139001406001259829,
    0.001929574309403923047903346,
    -0.0001046381049248457071180167,
    0.000004303069587032947007297824,
};

static const double sin_coef[9] = {
    3.141592653589793238462643,
    -5.167712780049970029246053,
    2.550164039877345443856178,
    -0.5992645293207920768877394,
    0.08214588661112822879880237,
    -0.00737043094571435077725909,
    0.0004663028057676125644206289,
    -0.00002191535344783021582738465,
    0.0000007952054001475512784783207,
};

/* sum_k coef[k] * z^k by Horner, highest degree first. */
static double horner(const double coef[9], double z)
{
    double s = coef[8];
    for (int k = 7; k >= 0; k--)
        s = s * z + coef[k];
    return s;
}

double trn_cospi(double p)
{
    if (!(p > 0))
        p = 0; /* also NaN */
    if (p > 1)
        p = 1;
    double sign = 1.0, q = p;
    if (p > 0.5) {
        sign = -1.0;
        q = 1.0 - p;
    }
    double v;
    if (q <= 0.25) {
        v = horner(cos_coef, q * q);
    } else {
        double r = 0.5 - q;
        v = r * horner(sin_coef, r * r);
    }
    return sign * v;
}

double trn_schedule_lr(const trn_run_config *rc, uint64_t i)
{
    if (rc->warmup_steps && i <= rc->warmup_steps)
        return rc->lr * (double)i / (double)rc->warmup_steps;
    if (rc->decay_steps > rc->warmup_steps) {
        if (i >= rc->decay_steps)
            return rc->lr_min;
        double p = (double)(i - rc->warmup_steps) / (double)(rc->decay_steps - rc->warmup_steps);
        if (rc->schedule == TRN_SCHEDULE_COSINE)
            return rc->lr_min + (rc->lr - rc->lr_min) * (0.5 * (1.0 + trn_cospi(p)));
        return rc->lr - (rc->lr - rc->lr_min) * p;
    }
    return rc->lr;
}
