#ifndef OVT_CHAIN_RLP_H
#define OVT_CHAIN_RLP_H

/* RLP (Ethereum's recursive length prefix) with canonical integers.
 *
 * Encoding appends to a chain_buf. A list is written by remembering where it
 * starts (chain_rlp_list_begin), appending its items, and closing it
 * (chain_rlp_list_end), which inserts the header in front.
 *
 * Decoding is strict: it rejects every non-canonical form (a single byte
 * below 0x80 encoded as a string, a long form for a payload under 56 bytes,
 * a length with leading zeros, a payload that overruns its parent), and the
 * integer readers reject leading zero bytes. Decoded items point into the
 * caller's input; nothing is allocated. */

#include "chain/types.h"

void chain_rlp_put_bytes(chain_buf *buf, const void *data, size_t len);
/* Minimal big-endian integer: 0 is the empty string 0x80. */
void chain_rlp_put_uint(chain_buf *buf, uint64_t v);
void chain_rlp_put_u256(chain_buf *buf, const chain_u256 *v);
/* Returns the offset to pass to chain_rlp_list_end. */
size_t chain_rlp_list_begin(const chain_buf *buf);
void chain_rlp_list_end(chain_buf *buf, size_t start);

typedef struct {
    const uint8_t *payload; /* points into the decoded input */
    size_t len;             /* payload length */
    int is_list;
} chain_rlp_item;

/* Decodes the item at the start of data (len bytes); *used is the item's full
 * length (header + payload). Checks the header only, not nested items. */
int chain_rlp_decode_item(chain_rlp_item *out, size_t *used, const uint8_t *data, size_t len) OVT_MUST_USE;

/* Decodes data as exactly one item with nothing after it, and checks every
 * nested item (to a nesting depth of 64). */
int chain_rlp_decode_whole(chain_rlp_item *out, const uint8_t *data, size_t len) OVT_MUST_USE;

/* Walks the items of a list: *pos starts at 0; each call decodes the next
 * item. Returns 1 when an item was read, 0 at the end, negative on error. */
int chain_rlp_list_next(const chain_rlp_item *list, size_t *pos, chain_rlp_item *item) OVT_MUST_USE;

/* Canonical integers: a string item of at most 8 (or 32) bytes with no
 * leading zero byte. */
int chain_rlp_get_uint(uint64_t *out, const chain_rlp_item *item) OVT_MUST_USE;
int chain_rlp_get_u256(chain_u256 *out, const chain_rlp_item *item) OVT_MUST_USE;

#endif
