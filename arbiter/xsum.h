#ifndef OVT_ARBITER_XSUM_H
#define OVT_ARBITER_XSUM_H

/* The exact accumulator of the chunk engine (arbiter/block_chunk.h): a sum
 * of products of two float32 values (and of float32 values themselves)
 * held exactly as a fixed-point integer, value = I * 2^-320, I a 640-bit
 * two's complement integer. A product of two float32 values is
 * m * 2^e with m < 2^48 and -298 <= e <= 208 (below 2^256), so every such
 * term is a multiple of 2^-320 and 2^63 of them still fit: the exact sum
 * of any batch, in any order, is the same integer on every machine.
 *
 * Held in 20 limbs of 32 bits in signed 64-bit words, value =
 * sum l[k] * 2^(32k - 320): a term touches three limbs without carrying,
 * so an add is a few integer operations; xsum_normalize carries (at most
 * 2^31 adds between two calls keep every limb within int64). The
 * canonical bytes (xsum_put): the 640-bit two's complement integer, 80
 * bytes little-endian; every 80-byte string is one value (xsum_get). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XSUM_LIMBS 20
#define XSUM_BYTES 80
#define XSUM_SHIFT 320 /* the integer's unit is 2^-XSUM_SHIFT */

typedef struct {
    int64_t l[XSUM_LIMBS];
} xsum;

/* A float32 split as (-1)^neg * m * 2^e, m < 2^24 (m = 0 for a zero);
 * false for an infinity or a NaN. */
typedef struct {
    uint32_t m;
    int32_t e;
    uint32_t neg; /* 0 or 1 */
} xsum_f32;

static inline bool xsum_split(float f, xsum_f32 *out)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    uint32_t E = v.u >> 23 & 0xffu, M = v.u & 0x7fffffu;
    out->neg = v.u >> 31;
    out->m = E ? M | 0x800000u : M;
    out->e = E ? (int32_t)E - 150 : -149;
    return E != 0xffu;
}

/* Adds (-1)^neg * m * 2^e, m < 2^48, e >= -XSUM_SHIFT, e + 48 < 576. */
static inline void xsum_add(xsum *s, uint64_t m, int32_t e, uint32_t neg)
{
    uint32_t p = (uint32_t)(e + XSUM_SHIFT), k = p >> 5, sh = p & 31u;
    uint64_t lo = m << sh, hi = sh ? m >> (64 - sh) : 0;
    int64_t sign = -(int64_t)neg; /* 0 or -1 */
    s->l[k] += ((int64_t)(lo & 0xffffffffu) ^ sign) - sign;
    s->l[k + 1] += ((int64_t)(lo >> 32) ^ sign) - sign;
    s->l[k + 2] += ((int64_t)hi ^ sign) - sign;
}

/* Adds the product a * b, or |a * b| (abs), or a itself (xsum_add_f32). */
static inline void xsum_add_product(xsum *s, xsum_f32 a, xsum_f32 b)
{
    xsum_add(s, (uint64_t)a.m * b.m, a.e + b.e, a.neg ^ b.neg);
}

static inline void xsum_add_abs_product(xsum *s, xsum_f32 a, xsum_f32 b)
{
    xsum_add(s, (uint64_t)a.m * b.m, a.e + b.e, 0);
}

static inline void xsum_add_f32(xsum *s, xsum_f32 a)
{
    xsum_add(s, a.m, a.e, a.neg);
}

/* A double split as (-1)^neg * m * 2^e, m < 2^53 (m = 0 for a zero);
 * false for an infinity, a NaN, or a value the fixed point cannot hold
 * exactly: a set bit below 2^-XSUM_SHIFT, or |value| >= 2^256 (so that, as
 * for the float32 products, 2^63 terms fit). The norms' column-sum terms
 * are such doubles (arbiter/block_chunk.h). */
typedef struct {
    uint64_t m;
    int32_t e;
    uint32_t neg;
} xsum_f64;

static inline bool xsum_split64(double d, xsum_f64 *out)
{
    union {
        double d;
        uint64_t u;
    } v = {.d = d};
    uint64_t E = v.u >> 52 & 0x7ffu, M = v.u & (((uint64_t)1 << 52) - 1);
    out->neg = (uint32_t)(v.u >> 63);
    out->m = E ? M | (uint64_t)1 << 52 : M;
    out->e = E ? (int32_t)E - 1075 : -1074;
    if (!(d < 0x1p256 && d > -0x1p256)) /* an infinity, a NaN, or too large */
        return false;
    if (out->m == 0)
        out->e = 0;
    while (out->e < -XSUM_SHIFT && (out->m & 1u) == 0) { /* small: its lowest set bit decides */
        out->m >>= 1;
        out->e++;
    }
    return out->e >= -XSUM_SHIFT;
}

/* Adds a split double, or its absolute value. */
static inline void xsum_add_f64(xsum *s, xsum_f64 a)
{
    xsum_add(s, a.m, a.e, a.neg);
}

static inline void xsum_add_abs_f64(xsum *s, xsum_f64 a)
{
    xsum_add(s, a.m, a.e, 0);
}

/* Carries: limbs 0..18 in [0, 2^32), limb 19 the signed top. The value
 * does not change. */
void xsum_normalize(xsum *s);

/* The canonical 80 bytes of s (normalized first); the value of 80 bytes. */
void xsum_put(xsum *s, uint8_t out[XSUM_BYTES]);
void xsum_get(xsum *s, const uint8_t in[XSUM_BYTES]);

/* The value rounded once to the nearest double (ties to even); s is
 * normalized. Never overflows or goes subnormal (|value| < 2^319, a
 * nonzero value >= 2^-320). */
double xsum_to_double(xsum *s);

#endif
