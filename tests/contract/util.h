#ifndef OVT_TESTS_CONTRACT_UTIL_H
#define OVT_TESTS_CONTRACT_UTIL_H

/* Small helpers shared by the contract suites: a seeded generator and hex. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"

static uint64_t tc_rng_state = 1;

static inline void tc_seed(uint64_t seed)
{
    const char *env = getenv("OVT_TEST_SEED");
    tc_rng_state = env && *env ? strtoull(env, NULL, 0) : seed;
}

static inline uint64_t tc_rnd(void)
{
    uint64_t z = (tc_rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void tc_rnd_hash(ovt_hash *h)
{
    for (int i = 0; i < 32; i += 8) {
        uint64_t v = tc_rnd();
        memcpy(h->b + i, &v, 8);
    }
}

/* "0x" + hex of len bytes into out (2*len+3 bytes). */
static inline char *tc_hex0x(char *out, const void *data, size_t len)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, data, len);
    return out;
}

/* Compares hex text (with or without 0x, any case) with bytes. */
static inline int tc_hex_eq(const char *text, const void *data, size_t len)
{
    if (!text)
        return 0;
    uint8_t *buf = NULL;
    size_t n = 0;
    if (ovt_hex_decode_alloc(&buf, &n, text) != 0)
        return 0;
    int eq = n == len && memcmp(buf, data, len) == 0;
    free(buf);
    return eq;
}

#endif
