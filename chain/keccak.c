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

static inline uint64_t rotl64(uint64_t x, unsigned n)
{
    return (x << n) | (x >> (64 - n));
}

static void keccak_f1600(uint64_t st[25])
{
    for (int round = 0; round < 24; round++) {
        /* theta: column parities, each lane XORed with two neighbours' */
        uint64_t c0 = st[0] ^ st[5] ^ st[10] ^ st[15] ^ st[20];
        uint64_t c1 = st[1] ^ st[6] ^ st[11] ^ st[16] ^ st[21];
        uint64_t c2 = st[2] ^ st[7] ^ st[12] ^ st[17] ^ st[22];
        uint64_t c3 = st[3] ^ st[8] ^ st[13] ^ st[18] ^ st[23];
        uint64_t c4 = st[4] ^ st[9] ^ st[14] ^ st[19] ^ st[24];
        uint64_t d0 = c4 ^ rotl64(c1, 1), d1 = c0 ^ rotl64(c2, 1), d2 = c1 ^ rotl64(c3, 1);
        uint64_t d3 = c2 ^ rotl64(c4, 1), d4 = c3 ^ rotl64(c0, 1);
#define THETA_ROW(y) (st[y] ^= d0, st[y + 1] ^= d1, st[y + 2] ^= d2, st[y + 3] ^= d3, st[y + 4] ^= d4)
        THETA_ROW(0);
        THETA_ROW(5);
        THETA_ROW(10);
        THETA_ROW(15);
        THETA_ROW(20);
#undef THETA_ROW
        /* rho and pi: rotate each lane and move it to its new position */
        /* Walking from lane 1, each lane is rotated by its rho offset
         * (1, 3, 6, 10, ...) and moved to its pi position (10, 7, 11, ...). */
        uint64_t t = st[1], next;
        next = st[10]; st[10] = rotl64(t, 1); t = next;
        next = st[7]; st[7] = rotl64(t, 3); t = next;
        next = st[11]; st[11] = rotl64(t, 6); t = next;
        next = st[17]; st[17] = rotl64(t, 10); t = next;
        next = st[18]; st[18] = rotl64(t, 15); t = next;
        next = st[3]; st[3] = rotl64(t, 21); t = next;
        next = st[5]; st[5] = rotl64(t, 28); t = next;
        next = st[16]; st[16] = rotl64(t, 36); t = next;
        next = st[8]; st[8] = rotl64(t, 45); t = next;
        next = st[21]; st[21] = rotl64(t, 55); t = next;
        next = st[24]; st[24] = rotl64(t, 2); t = next;
        next = st[4]; st[4] = rotl64(t, 14); t = next;
        next = st[15]; st[15] = rotl64(t, 27); t = next;
        next = st[23]; st[23] = rotl64(t, 41); t = next;
        next = st[19]; st[19] = rotl64(t, 56); t = next;
        next = st[13]; st[13] = rotl64(t, 8); t = next;
        next = st[12]; st[12] = rotl64(t, 25); t = next;
        next = st[2]; st[2] = rotl64(t, 43); t = next;
        next = st[20]; st[20] = rotl64(t, 62); t = next;
        next = st[14]; st[14] = rotl64(t, 18); t = next;
        next = st[22]; st[22] = rotl64(t, 39); t = next;
        next = st[9]; st[9] = rotl64(t, 61); t = next;
        next = st[6]; st[6] = rotl64(t, 20); t = next;
        next = st[1]; st[1] = rotl64(t, 44); t = next;
        (void)t;
        /* chi: the only non-linear step, row by row */
#define CHI_ROW(y)                                                                                   \
    do {                                                                                             \
        uint64_t a0 = st[y], a1 = st[y + 1], a2 = st[y + 2], a3 = st[y + 3], a4 = st[y + 4];         \
        st[y] = a0 ^ (~a1 & a2);                                                                     \
        st[y + 1] = a1 ^ (~a2 & a3);                                                                 \
        st[y + 2] = a2 ^ (~a3 & a4);                                                                 \
        st[y + 3] = a3 ^ (~a4 & a0);                                                                 \
        st[y + 4] = a4 ^ (~a0 & a1);                                                                 \
    } while (0)
        CHI_ROW(0);
        CHI_ROW(5);
        CHI_ROW(10);
        CHI_ROW(15);
        CHI_ROW(20);
#undef CHI_ROW
        /* iota */
        st[0] ^= round_constants[round];
    }
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
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
    /* Whole blocks straight into the state when nothing is buffered. */
    while (ctx->pos == 0 && len >= KECCAK_RATE) {
        for (int i = 0; i < KECCAK_RATE / 8; i++)
            ctx->st[i] ^= load_le64(p + 8 * i);
        keccak_f1600(ctx->st);
        p += KECCAK_RATE;
        len -= KECCAK_RATE;
    }
    /* Whole little-endian lanes when aligned to a lane boundary. */
    while (len > 0) {
        if (ctx->pos % 8 == 0 && len >= 8) {
            ctx->st[ctx->pos / 8] ^= load_le64(p);
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
