/* keccak-256 (Keccak-f[1600], rate 136 bytes, original 0x01 padding), written
 * from the Keccak reference description. Portable C: the state is 25 64-bit
 * lanes, absorbed little-endian. */
#include "chain/keccak.h"

#include <string.h>

#define KECCAK_RATE 136

static const uint64_t round_constants[24] = {
    0x0000000000000001ULL, 0x0000000000008082ULL, 0x800000000000808aULL, 0x8000000080008000ULL,
    0x000000000000808bULL, 0x0000000080000001ULL, 0x8000000080008081ULL, 0x8000000000008009ULL,
    0x000000000000008aULL, 0x0000000000000088ULL, 0x0000000080008009ULL, 0x000000008000000aULL,
    0x000000008000808bULL, 0x800000000000008bULL, 0x8000000000008089ULL, 0x8000000000008003ULL,
    0x8000000000008002ULL, 0x8000000000000080ULL, 0x000000000000800aULL, 0x800000008000000aULL,
    0x8000000080008081ULL, 0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL,
};

/* Rotation offsets and the pi permutation, in the order the rho-pi step
 * walks the lanes starting from lane 1. */
static const unsigned rho_offsets[24] = {1,  3,  6,  10, 15, 21, 28, 36, 45, 55, 2,  14,
                                         27, 41, 56, 8,  25, 43, 62, 18, 39, 61, 20, 44};
static const unsigned pi_lanes[24] = {10, 7,  11, 17, 18, 3, 5,  16, 8,  21, 24, 4,
                                      15, 23, 19, 13, 12, 2, 20, 14, 22, 9,  6,  1};

static inline uint64_t rotl64(uint64_t x, unsigned n)
{
    return (x << n) | (x >> (64 - n));
}

static void keccak_f1600(uint64_t st[25])
{
    uint64_t c[5], t;
    for (int round = 0; round < 24; round++) {
        /* theta */
        for (int x = 0; x < 5; x++)
            c[x] = st[x] ^ st[x + 5] ^ st[x + 10] ^ st[x + 15] ^ st[x + 20];
        for (int x = 0; x < 5; x++) {
            t = c[(x + 4) % 5] ^ rotl64(c[(x + 1) % 5], 1);
            for (int y = 0; y < 25; y += 5)
                st[y + x] ^= t;
        }
        /* rho and pi */
        t = st[1];
        for (int i = 0; i < 24; i++) {
            unsigned j = pi_lanes[i];
            uint64_t next = st[j];
            st[j] = rotl64(t, rho_offsets[i]);
            t = next;
        }
        /* chi */
        for (int y = 0; y < 25; y += 5) {
            for (int x = 0; x < 5; x++)
                c[x] = st[y + x];
            for (int x = 0; x < 5; x++)
                st[y + x] = c[x] ^ (~c[(x + 1) % 5] & c[(x + 2) % 5]);
        }
        /* iota */
        st[0] ^= round_constants[round];
    }
}

/* XORs one byte into the state at byte position pos (lanes little-endian). */
static inline void absorb_byte(uint64_t st[25], size_t pos, uint8_t byte)
{
    st[pos / 8] ^= (uint64_t)byte << (8 * (pos % 8));
}

void chain_keccak_init(chain_keccak_ctx *ctx)
{
    memset(ctx, 0, sizeof *ctx);
}

void chain_keccak_update(chain_keccak_ctx *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;
    /* Whole little-endian lanes when aligned to a lane boundary. */
    while (len > 0) {
        if (ctx->pos % 8 == 0 && len >= 8) {
            uint64_t lane = 0;
            for (int i = 7; i >= 0; i--)
                lane = lane << 8 | p[i];
            ctx->st[ctx->pos / 8] ^= lane;
            ctx->pos += 8;
            p += 8;
            len -= 8;
        } else {
            absorb_byte(ctx->st, ctx->pos++, *p++);
            len--;
        }
        if (ctx->pos == KECCAK_RATE) {
            keccak_f1600(ctx->st);
            ctx->pos = 0;
        }
    }
}

void chain_keccak_final(chain_keccak_ctx *ctx, ovt_hash *out)
{
    absorb_byte(ctx->st, ctx->pos, 0x01);
    absorb_byte(ctx->st, KECCAK_RATE - 1, 0x80);
    keccak_f1600(ctx->st);
    for (int i = 0; i < 32; i++)
        out->b[i] = (uint8_t)(ctx->st[i / 8] >> (8 * (i % 8)));
    ovt_wipe(ctx, sizeof *ctx);
}

void chain_keccak256(ovt_hash *out, const void *data, size_t len)
{
    chain_keccak_ctx ctx;
    chain_keccak_init(&ctx);
    chain_keccak_update(&ctx, data, len);
    chain_keccak_final(&ctx, out);
}
