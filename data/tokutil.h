#ifndef OVT_DATA_TOKUTIL_H
#define OVT_DATA_TOKUTIL_H

/* What the two BPE tokenizers (data/bpe.c, data/sptok.c) share: UTF-8
 * decoding, hashes, and the table of merges keyed by the pair of ids. */

#include <stddef.h>
#include <stdint.h>

/* Decodes one UTF-8 character at p[0..n) (n >= 1); returns its length and
 * sets *cp, or returns 1 with *cp = -1 for a byte that starts no valid one
 * (overlong forms, surrogates and values above U+10FFFF included). */
size_t data_utf8_next(const uint8_t *p, size_t n, int32_t *cp);

uint64_t data_hash_bytes(const uint8_t *p, size_t n);
uint64_t data_hash_u64(uint64_t x);

/* One merge: (left id << 32 | right id), or UINT64_MAX in an empty slot. */
typedef struct {
    uint64_t key;
    uint32_t rank, result;
} data_merge_slot;

/* The slot of (left, right) in the open-addressed table of cap slots (a
 * power of two, never full): its own, or the empty one it would take. */
data_merge_slot *data_merge_find(data_merge_slot *tab, size_t cap, uint32_t left, uint32_t right);

#endif
