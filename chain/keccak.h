#ifndef OVT_CHAIN_KECCAK_H
#define OVT_CHAIN_KECCAK_H

/* keccak-256 as Ethereum uses it (the original Keccak padding 0x01, not
 * SHA3-256's 0x06). */

#include <stddef.h>

#include "common/bytes.h"

void chain_keccak256(ovt_hash *out, const void *data, size_t len);

/* Incremental form. */
typedef struct {
    uint64_t st[25];
    size_t pos;
} chain_keccak_ctx;

void chain_keccak_init(chain_keccak_ctx *ctx);
void chain_keccak_update(chain_keccak_ctx *ctx, const void *data, size_t len);
void chain_keccak_final(chain_keccak_ctx *ctx, ovt_hash *out);

#endif
