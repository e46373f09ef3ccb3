#ifndef OVT_CHAIN_TYPES_H
#define OVT_CHAIN_TYPES_H

/* Small value types the chain client passes around: a 20-byte address, a
 * 256-bit unsigned integer (big-endian, as the EVM stores it) and a growable
 * byte buffer the encoders write into. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

typedef struct {
    uint8_t b[20];
} chain_address;

/* 256-bit unsigned integer, big-endian bytes (b[31] is the lowest byte). */
typedef struct {
    uint8_t b[32];
} chain_u256;

chain_u256 chain_u256_from_u64(uint64_t v);

/* Stores v in *out; fails (OVT_EINVAL) if v does not fit in 64 bits. */
int chain_u256_to_u64(uint64_t *out, const chain_u256 *v) OVT_MUST_USE;

/* -1, 0 or 1 as a < b, a == b, a > b. */
int chain_u256_cmp(const chain_u256 *a, const chain_u256 *b);

int chain_u256_is_zero(const chain_u256 *v);

/* Parses a decimal string ("1000000000000000000") of at most 78 digits that
 * fits in 256 bits. */
int chain_u256_from_dec(chain_u256 *out, const char *s) OVT_MUST_USE;

/* Decimal digits of v into out (at least 79 bytes). */
void chain_u256_to_dec(char *out, const chain_u256 *v);

/* A growable byte buffer. Appends never fail loudly: an allocation failure
 * sets `failed`, later appends do nothing, and the encoder that finishes the
 * buffer reports OVT_ENOMEM. Free with chain_buf_free. */
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
    int failed;
} chain_buf;

void chain_buf_init(chain_buf *buf);
void chain_buf_free(chain_buf *buf);
void chain_buf_append(chain_buf *buf, const void *data, size_t len);
void chain_buf_push(chain_buf *buf, uint8_t byte);
/* Makes room for len more bytes; returns 0 or OVT_ENOMEM. */
int chain_buf_reserve(chain_buf *buf, size_t len);
/* Inserts len bytes at offset pos (pos <= buf->len), moving the rest up. */
void chain_buf_insert(chain_buf *buf, size_t pos, const void *data, size_t len);
/* 0, or OVT_ENOMEM (with a message) if an append failed. */
int chain_buf_check(const chain_buf *buf) OVT_MUST_USE;

#endif
