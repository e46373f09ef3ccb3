/* The exact mean of shard values (kernels/shard.h). */
#include "kernels/shard.h"

#include <math.h>
#include <string.h>

uint8_t krn_shard_key(float g)
{
    uint32_t u;
    memcpy(&u, &g, sizeof u);
    uint8_t key = (uint8_t)((u >> 23) & 0xff);
    return key ? key : 1;
}

static int ceil_log2(uint32_t S)
{
    int c = 0;
    while (c < 32 && (UINT64_C(1) << c) < S)
        c++;
    return c;
}

double krn_shard_quantum(uint8_t key, uint32_t S)
{
    /* 2^e with e in -178 .. 86: a normal double, built from its bits */
    int e = (int)key - 179 + ceil_log2(S);
    uint64_t bits = (uint64_t)(e + 1023) << 52;
    double q;
    memcpy(&q, &bits, sizeof q);
    return q;
}

double krn_shard_term(float g, double q)
{
    /* |g| >= 2^23 q: g's own ulp (at least 2^-23 of the binade it is in,
     * 2^-149 for subnormals) is a multiple of q, so g is one already and
     * rounds to itself (the common case: a term within 29 - c binades of
     * the element's largest). Otherwise g / q and the product are scalings
     * by a power of two (q >= 2^-178, so no subnormal FP64 result), exact,
     * and nearbyint rounds to even in the default rounding mode. Both
     * branches give the same value wherever the first applies. */
    double x = (double)g;
    if (fabs(x) >= q * 0x1p23)
        return x;
    return nearbyint(x / q) * q;
}

double krn_shard_mean(const float *const *g, uint32_t S, size_t i)
{
    double x;
    krn_shard_mean_block(&x, g, S, i, 1);
    return x;
}

void krn_shard_mean_block(double *x, const float *const *g, uint32_t S, size_t i0, size_t len)
{
    int c = ceil_log2(S);
    for (size_t j = 0; j < len; j++) {
        size_t i = i0 + j;
        uint32_t key = 1;
        for (uint32_t s = 0; s < S; s++) {
            uint32_t u;
            memcpy(&u, &g[s][i], sizeof u);
            uint32_t k = (u >> 23) & 0xff;
            key = k > key ? k : key;
        }
        uint64_t qbits = (uint64_t)((int)key - 179 + c + 1023) << 52;
        double q, sum = 0;
        memcpy(&q, &qbits, sizeof q);
        for (uint32_t s = 0; s < S; s++)
            sum += krn_shard_term(g[s][i], q);
        x[j] = sum / (double)S;
    }
}
