#ifndef OVT_TESTS_SUPPORT_SHARD_DATA_H
#define OVT_TESTS_SUPPORT_SHARD_DATA_H

/* Deterministic adversarial shard gradients for the exact mean of
 * kernels/shard.h (tests/kernels/test_shard.c, tests/dp/test_dp_mpi.c):
 * tsd_value(seed, S, s, i) is shard s's element i for a step of S shards, a
 * pure function of its arguments, so that every rank can regenerate every
 * shard. The element's kind is i % TSD_KINDS:
 *   WIDE    exponents spread over 100 binades within the element (the small
 *           terms lose bits to the common quantum)
 *   TIE     the shards sum to exactly S times an FP32 midpoint (a tie of the
 *           32-bit grid: rounds to even), pairs v, -v and signed zeros fill
 *           the other shards; which shard plays which part rotates with i
 *   ZERO    zeros of both signs, and pairs v, -v that cancel
 *   SUBN    subnormals (small multiples of 2^-149, so means tie there too)
 *   NORMAL  random normal values within 20 binades
 *   HUGE    values near FLT_MAX (the sum is past FP32's range)
 *   CANCEL  a large pair B, -B beside small values quantized against it
 *   EDGE    the largest value and values 29 - c and 30 - c binades below it,
 *           mantissas odd: the first kept exactly, the second not */

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

enum { TSD_WIDE, TSD_TIE, TSD_ZERO, TSD_SUBN, TSD_NORMAL, TSD_HUGE, TSD_CANCEL, TSD_EDGE, TSD_KINDS };

static inline uint64_t tsd_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t tsd_rand(uint64_t seed, uint64_t a, uint64_t b)
{
    return tsd_mix(tsd_mix(tsd_mix(seed) ^ a) ^ (b * 0x2545f4914f6cdd1dull));
}

static inline int tsd_ceil_log2(uint32_t S)
{
    int c = 0;
    while ((1ull << c) < S)
        c++;
    return c;
}

/* A random FP32 with exponent in [lo, hi] (binade [2^e, 2^(e+1))), random
 * 24-bit mantissa and sign. */
static inline float tsd_normal(uint64_t r, int lo, int hi)
{
    int e = lo + (int)((r >> 40) % (uint64_t)(hi - lo + 1));
    double mant = 1.0 + ldexp((double)(r & 0x7fffff), -23);
    float v = (float)ldexp(mant, e);
    return (r >> 63) ? -v : v;
}

static inline float tsd_value(uint64_t seed, uint32_t S, uint32_t s, size_t i)
{
    uint64_t re = tsd_rand(seed, 0xE1E, i);          /* per element */
    uint64_t rs = tsd_rand(seed, 1000 + (uint64_t)s, i); /* per shard */
    uint32_t role = (uint32_t)((s + i) % S);         /* rotates the parts */
    switch (i % TSD_KINDS) {
    case TSD_WIDE:
        return tsd_normal(rs, -60, 40);
    case TSD_TIE: {
        /* x a random FP32, m = x + ulp(x)/2 its midpoint to the next one up,
         * T = S*m (exact in FP64: at most 28 bits) split into two FP32s */
        float x = tsd_normal(re, -20, 20);
        double ulp = ldexp(1.0, ilogb(x) - 23);
        double T = (double)S * ((double)x + (x > 0 ? ulp : -ulp) / 2);
        float hi = (float)T;
        float lo = (float)(T - (double)hi);
        if (S == 1)
            return (float)T; /* not a tie: one shard is its own mean */
        if (role == 0)
            return hi;
        if (role == 1)
            return lo;
        /* roles 2.. : pairs v, -v (within 2^4 of x: no bits of lo lost),
         * a signed zero when one role is left over */
        uint32_t k = role - 2, pairs = (S - 2) / 2;
        if (k / 2 >= pairs)
            return (re >> 7) & 1 ? -0.0f : 0.0f;
        float v = tsd_normal(tsd_rand(seed, 0xAA + k / 2, i), ilogb(x) - 4, ilogb(x) + 4);
        return k % 2 ? -v : v;
    }
    case TSD_ZERO:
        if ((re >> 3) % 3 == 0 && S >= 2 && role < 2) {
            float v = tsd_normal(re, -30, 30);
            return role ? -v : v;
        }
        return (rs >> 5) & 1 ? -0.0f : 0.0f;
    case TSD_SUBN: {
        if ((re >> 9) % 4 == 0) /* anywhere in the subnormal range, or FLT_MIN's binade */
            return (float)ldexp((double)((rs >> 20) % (1u << 24)) * ((rs >> 63) ? -1.0 : 1.0), -149);
        int k = (int)((rs >> 11) % 17) - 8;
        return (float)ldexp((double)k, -149);
    }
    case TSD_NORMAL:
        return tsd_normal(rs, -10, 10);
    case TSD_HUGE: {
        if ((re >> 13) % 2 == 0)
            return FLT_MAX;
        float v = tsd_normal(rs, 120, 127);
        return role == 0 ? FLT_MAX : v;
    }
    case TSD_CANCEL: {
        float B = tsd_normal(re, 28, 32);
        if (S >= 2 && role == 0)
            return B;
        if (S >= 2 && role == 1)
            return -B;
        return tsd_normal(rs, -8, -2);
    }
    default: { /* TSD_EDGE */
        int c = tsd_ceil_log2(S), e = (int)((re >> 20) % 60) - 30;
        float big = (float)ldexp(1.0 + ldexp((double)(re & 0x7fffff), -23), e);
        if (role == 0)
            return big;
        /* odd mantissas: every bit counts */
        double odd = 1.0 + ldexp((double)((rs & 0x7fffff) | 1), -23);
        int below = role % 2 ? 29 - c : 30 - c;
        float v = (float)ldexp(odd, e - below);
        return (rs >> 62) & 1 ? -v : v;
    }
    }
}

#endif
