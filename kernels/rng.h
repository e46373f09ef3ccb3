#ifndef OVT_KERNELS_RNG_H
#define OVT_KERNELS_RNG_H

/* Counter-based randomness (docs/numeric-contract.md section 8): every random number is a
 * pure function of (seed, step, purpose, index), never of hardware or call
 * order, so any party can recompute any one of them. Uses only integer
 * operations and IEEE basic operations (no libm), so it is identical on
 * every platform. */

#include <stdint.h>

enum krn_rng_purpose {
    KRN_RNG_INIT = 1,    /* parameter initialisation (step 0) */
    KRN_RNG_BATCH = 2,   /* batch schedule */
    KRN_RNG_SHUFFLE = 3, /* the shuffle backend's summation orders */
    KRN_RNG_AUGMENT = 4, /* data augmentation: crop offsets and flips (data/augment.h) */
    KRN_RNG_TEST = 100   /* tests and benchmarks */
};

/* 64 random bits for (seed, step, purpose, index). */
uint64_t krn_rng_u64(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index);

/* Uniform double in [0, 1) with 53 random bits. */
double krn_rng_uniform(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index);

/* Approximately standard normal, computed with basic operations only (no
 * libm), hence bit-identical everywhere. */
double krn_rng_normal(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index);

/* Uniform integer in [0, n), unbiased, n > 0. */
uint64_t krn_rng_below(uint64_t seed, uint64_t step, uint32_t purpose, uint64_t index, uint64_t n);

#endif
