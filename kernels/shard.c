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
    return ldexp(1.0, (int)key - 179 + ceil_log2(S));
}

double krn_shard_term(float g, double q)
{
    /* g / q and the product are scalings by a power of two (q >= 2^-178, so
     * no subnormal FP64 result), exact; nearbyint rounds to even in the
     * default rounding mode. */
    return nearbyint((double)g / q) * q;
}

double krn_shard_mean(const float *const *g, uint32_t S, size_t i)
{
    uint8_t key = 1;
    for (uint32_t s = 0; s < S; s++) {
        uint8_t k = krn_shard_key(g[s][i]);
        key = k > key ? k : key;
    }
    double q = krn_shard_quantum(key, S), sum = 0;
    for (uint32_t s = 0; s < S; s++)
        sum += krn_shard_term(g[s][i], q);
    return sum / (double)S;
}
