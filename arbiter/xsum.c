/* The exact accumulator (arbiter/xsum.h). */
#include "arbiter/xsum.h"

#include <math.h>
#include <string.h>

void xsum_normalize(xsum *s)
{
    for (int k = 0; k < XSUM_LIMBS - 1; k++) {
        int64_t low = s->l[k] & 0xffffffff;
        s->l[k + 1] += (s->l[k] - low) / 4294967296; /* exact: the difference is a multiple of 2^32 */
        s->l[k] = low;
    }
}

void xsum_put(xsum *s, uint8_t out[XSUM_BYTES])
{
    xsum_normalize(s);
    for (int k = 0; k < XSUM_LIMBS; k++) {
        uint32_t w = (uint32_t)s->l[k]; /* limb 19: its low 32 bits, the two's complement top */
        for (int b = 0; b < 4; b++)
            out[4 * k + b] = (uint8_t)(w >> (8 * b));
    }
}

void xsum_get(xsum *s, const uint8_t in[XSUM_BYTES])
{
    for (int k = 0; k < XSUM_LIMBS; k++) {
        uint32_t w = (uint32_t)in[4 * k] | (uint32_t)in[4 * k + 1] << 8 | (uint32_t)in[4 * k + 2] << 16 |
                     (uint32_t)in[4 * k + 3] << 24;
        s->l[k] = k < XSUM_LIMBS - 1 ? (int64_t)w : (int64_t)(int32_t)w;
    }
}

/* Bits [lo, lo + 64) of the magnitude u (20 words of 32 bits; bits below 0
 * read as zeros). */
static uint64_t bits_at(const uint32_t *u, int lo)
{
    uint64_t r = 0;
    for (int b = 0; b < 64; b += 32) {
        int at = lo + b; /* a 32-bit piece starting at bit `at` */
        uint64_t piece = 0;
        int k = at >= 0 ? at >> 5 : -((31 - at) >> 5), sh = at - 32 * k; /* floor division */
        uint64_t w0 = k >= 0 && k < XSUM_LIMBS ? u[k] : 0, w1 = k + 1 >= 0 && k + 1 < XSUM_LIMBS ? u[k + 1] : 0;
        piece = ((w0 | w1 << 32) >> sh) & 0xffffffffu;
        r |= piece << b;
    }
    return r;
}

/* Whether any bit of u below bit `lo` is set. */
static bool any_below(const uint32_t *u, int lo)
{
    for (int k = 0; k < XSUM_LIMBS && 32 * k < lo; k++) {
        int n = lo - 32 * k;
        uint32_t mask = n >= 32 ? 0xffffffffu : (1u << n) - 1;
        if (u[k] & mask)
            return true;
    }
    return false;
}

double xsum_to_double(xsum *s)
{
    xsum_normalize(s);
    bool neg = s->l[XSUM_LIMBS - 1] < 0;
    uint32_t u[XSUM_LIMBS];
    uint64_t carry = 1;
    for (int k = 0; k < XSUM_LIMBS; k++) { /* |value|: two's complement negation when negative */
        uint32_t w = (uint32_t)s->l[k];
        if (neg) {
            uint64_t v = (uint64_t)(uint32_t)~w + carry;
            w = (uint32_t)v;
            carry = v >> 32;
        }
        u[k] = w;
    }
    int top = -1; /* the highest set bit */
    for (int k = XSUM_LIMBS - 1; k >= 0 && top < 0; k--)
        for (int b = 31; b >= 0 && top < 0; b--)
            if (u[k] >> b & 1u)
                top = 32 * k + b;
    if (top < 0)
        return 0.0;
    uint64_t t = bits_at(u, top - 63); /* bit 63: the leading one */
    uint64_t mant = t >> 11, rest = t & 0x7ff;
    bool sticky = rest & 0x3ff || any_below(u, top - 63);
    if ((rest & 0x400) && (sticky || (mant & 1)))
        mant++; /* 2^53 after a carry: still exact in ldexp */
    double v = ldexp((double)mant, top - 52 - XSUM_SHIFT);
    return neg ? -v : v;
}
