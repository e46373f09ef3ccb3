#ifndef OVT_TESTS_KERNELS_FP_SAME_H
#define OVT_TESTS_KERNELS_FP_SAME_H

/* Bit-level comparison of doubles for the libm tests (test_tanh, test_libm):
 * the same bits, or both NaN. */

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline bool same(double a, double b)
{
    return bits(a) == bits(b) || (isnan(a) && isnan(b));
}

#endif
