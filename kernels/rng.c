/* Counter-based randomness (docs/numeric-contract.md, "Randomness").
 *
 * A 64-bit state is derived from (seed, step, purpose, index) by a chain of
 * SplitMix64 finalizers, each fed one field:
 *   h = mix(seed + G); h = mix((h ^ step) + G); h = mix((h ^ purpose) + G);
 *   h = mix((h ^ index) + G)
 * and outputs are mix(h + G), mix(h + 2G), ... Every link is a bijection of
 * the 64-bit state, so for fixed (seed, step, purpose) distinct indices give
 * distinct states, and the final extra round gives full avalanche even for
 * neighbouring indices. Not cryptographic; statistically sound for
 * initialisation, batch schedules and summation orders.
 *
 * Normal variates use the Box-Muller transform with a logarithm, a sine and
 * a cosine written here as fixed polynomials in IEEE basic operations, so
 * every platform computes the same bits (tests/kernels/test_rng.c checks
 * them against an independent Python implementation). */
#include "kernels/rng.h"

#include <math.h>

#include "kernels/grid_bits.h"

#define RNG_GAMMA UINT64_C(0x9e3779b97f4a7c15)

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t rng_state(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index)
{
    uint64_t h = mix64(seed + RNG_GAMMA);
    h = mix64((h ^ step) + RNG_GAMMA);
    h = mix64((h ^ purpose) + RNG_GAMMA);
    return mix64((h ^ index) + RNG_GAMMA);
}

uint64_t krn_rng_u64(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index)
{
    return mix64(rng_state(seed, step, purpose, index) + RNG_GAMMA);
}

static double to_unit(uint64_t u)
{
    return (double)(u >> 11) * 0x1.0p-53;
}

double krn_rng_uniform(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index)
{
    return to_unit(krn_rng_u64(seed, step, purpose, index));
}

uint64_t krn_rng_below(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Lemire's multiply-and-reject: the high half of x * n is uniform on
     * [0, n) once the low half is at least 2^64 mod n. Rejected draws are
     * replaced by further outputs of the same state, in order. */
    uint64_t h = rng_state(seed, step, purpose, index);
    uint64_t x = mix64(h + RNG_GAMMA);
    __extension__ unsigned __int128 m = (unsigned __int128)x * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = (0 - n) % n;
        for (uint64_t k = 2; low < threshold; k++) {
            x = mix64(h + k * RNG_GAMMA);
            m = (unsigned __int128)x * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* ln(x) for x in (0, 1]: x = m 2^k with m in [sqrt(1/2), sqrt(2)), then
 * ln m = 2 s (1 + s^2/3 + s^4/5 + ... + s^24/25), s = (m-1)/(m+1), |s| <=
 * 0.172; the first omitted term is below 2^-60 of the result. */
static double rng_log(double x)
{
    static const double inv_odd[12] = {
        0x1.5555555555555p-2, 0x1.999999999999ap-3, 0x1.2492492492492p-3, 0x1.c71c71c71c71cp-4,
        0x1.745d1745d1746p-4, 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4, 0x1.e1e1e1e1e1e1ep-5,
        0x1.af286bca1af28p-5, 0x1.8618618618618p-5, 0x1.642c8590b2164p-5, 0x1.47ae147ae147bp-5,
    };
    uint64_t u = krn_double_bits(x);
    int k = (int)(u >> 52) - 1023; /* x is a normal number: x >= 2^-53 here */
    double m = krn_bits_double((u & KRN_MANT64) | (UINT64_C(1023) << 52));
    if (m > 0x1.6a09e667f3bcdp+0) {
        m = m * 0.5;
        k = k + 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double p = inv_odd[11];
    for (int j = 10; j >= 0; j--)
        p = inv_odd[j] + s2 * p;
    double lnm = 2.0 * s + 2.0 * s * (s2 * p);
    return (double)k * 0x1.62e42fefa39efp-1 + lnm;
}

/* cos(2 pi t) for t in [0, 1): by quadrant, cos or sin of theta = r pi/2,
 * r in [0, 1), by their Taylor polynomials to degree 22 and 23 (the first
 * omitted term is below 2^-55). */
static double rng_cos_turns(double t)
{
    static const double cos_c[12] = {
        0x1.0000000000000p+0,  -0x1.0000000000000p-1, 0x1.5555555555555p-5,  -0x1.6c16c16c16c17p-10,
        0x1.a01a01a01a01ap-16, -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37,
        0x1.ae7f3e733b81fp-45, -0x1.6827863b97d97p-53, 0x1.e542ba4020225p-62, -0x1.0ce396db7f853p-70,
    };
    static const double sin_c[12] = {
        0x1.0000000000000p+0,  -0x1.5555555555555p-3,  0x1.1111111111111p-7,  -0x1.a01a01a01a01ap-13,
        0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33, -0x1.ae7f3e733b81fp-41,
        0x1.952c77030ad4ap-49, -0x1.2f49b46814157p-57, 0x1.71b8ef6dcf572p-66, -0x1.761b41316381ap-75,
    };
    double t4 = t * 4.0;
    int quadrant = (int)t4;
    double theta = (t4 - (double)quadrant) * 0x1.921fb54442d18p+0;
    double y = theta * theta;
    double c = cos_c[11], s = sin_c[11];
    for (int j = 10; j >= 0; j--) {
        c = cos_c[j] + y * c;
        s = sin_c[j] + y * s;
    }
    s = theta * s;
    switch (quadrant) {
    case 0: return c;
    case 1: return -s;
    case 2: return -c;
    default: return s;
    }
}

double krn_rng_normal(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index)
{
    uint64_t h = rng_state(seed, step, purpose, index);
    double u1 = (double)((mix64(h + RNG_GAMMA) >> 11) + 1) * 0x1.0p-53; /* (0, 1] */
    double u2 = to_unit(mix64(h + 2 * RNG_GAMMA));                     /* [0, 1) */
    double radius = sqrt(-2.0 * rng_log(u1));
    return radius * rng_cos_turns(u2);
}
