#ifndef OVT_KERNELS_GRID_BITS_H
#define OVT_KERNELS_GRID_BITS_H

/* Internal to kernels/: the bits of an FP64 value, for the rounding code. */
#include <stdint.h>
#include <string.h>

#define KRN_SIGN64 UINT64_C(0x8000000000000000)
#define KRN_MANT64 UINT64_C(0x000fffffffffffff)

static inline uint64_t krn_double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double krn_bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
