/* What the BPE tokenizers share (data/tokutil.h). */
#include "data/tokutil.h"

uint64_t data_hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

uint64_t data_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Decodes one UTF-8 character at p[0..n) (n >= 1); returns its length and
 * sets *cp, or returns 1 with *cp = -1 for a byte that starts no valid one. */
size_t data_utf8_next(const uint8_t *p, size_t n, int32_t *cp)
{
    uint8_t c = p[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        *cp = -1;
        return 1;
    }
    if (len > n) {
        *cp = -1;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *cp = -1;
            return 1;
        }
        v = v << 6 | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = -1;
        return 1;
    }
    *cp = (int32_t)v;
    return len;
}

data_merge_slot *data_merge_find(data_merge_slot *tab, size_t cap, uint32_t left, uint32_t right)
{
    uint64_t key = (uint64_t)left << 32 | right;
    for (uint64_t i = data_hash_u64(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        data_merge_slot *s = &tab[i];
        if (s->key == key || s->key == UINT64_MAX)
            return s;
    }
}
