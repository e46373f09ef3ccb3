#ifndef OVT_COMMON_BYTES_H
#define OVT_COMMON_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/err.h"

/* A 32-byte hash (SHA-256 or keccak-256) as a value. */
typedef struct {
    uint8_t b[32];
} ovt_hash;

/* SHA-256 of len bytes. */
void ovt_sha256(ovt_hash *out, const void *data, size_t len);

/* Incremental SHA-256 (OpenSSL EVP underneath). */
typedef struct ovt_sha256_ctx ovt_sha256_ctx;
ovt_sha256_ctx *ovt_sha256_new(void);
void ovt_sha256_update(ovt_sha256_ctx *ctx, const void *data, size_t len);
void ovt_sha256_final(ovt_sha256_ctx *ctx, ovt_hash *out); /* also frees ctx */

/* h as a big-endian 256-bit integer, modulo n (n > 0). */
uint32_t ovt_hash_mod(const ovt_hash *h, uint32_t n);

/* Lower-case hex of len bytes into out (2*len+1 bytes, NUL-terminated). */
void ovt_hex_encode(char *out, const void *data, size_t len);

/* Decodes hex (optional "0x" prefix) into exactly len bytes. */
int ovt_hex_decode(void *out, size_t len, const char *hex) OVT_MUST_USE;

/* Decodes hex of any even length into a malloc'd buffer. */
int ovt_hex_decode_alloc(uint8_t **out, size_t *len, const char *hex) OVT_MUST_USE;

/* Little-endian loads and stores, for file formats. */
static inline void ovt_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void ovt_put_le64(uint8_t *p, uint64_t v)
{
    ovt_put_le32(p, (uint32_t)v);
    ovt_put_le32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t ovt_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ovt_get_le64(const uint8_t *p)
{
    return (uint64_t)ovt_get_le32(p) | (uint64_t)ovt_get_le32(p + 4) << 32;
}
static inline void ovt_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* The formats store float tensors and integer arrays as little-endian
 * 32-bit words (docs/formats.md). On a little-endian host a word's memory
 * is its encoding, so the helpers below are a memcpy or nothing at all; on
 * a big-endian one (s390x) they swap each word's bytes. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define OVT_HOST_BIG_ENDIAN 1
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define OVT_HOST_BIG_ENDIAN 0
#else
#error "ovt needs the compiler to state the host's byte order (__BYTE_ORDER__)"
#endif

/* Copies n 32-bit words from src to dst (not overlapping), host order to
 * little-endian or back: the conversion is its own inverse. */
static inline void ovt_copy_le32(void *dst, const void *src, size_t n)
{
#if OVT_HOST_BIG_ENDIAN
    const uint8_t *s = src;
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++, s += 4, d += 4) {
        d[0] = s[3]; d[1] = s[2]; d[2] = s[1]; d[3] = s[0];
    }
#else
    memcpy(dst, src, 4 * n);
#endif
}

/* Converts n 32-bit words in place, host order to little-endian or back. */
static inline void ovt_swap_le32(void *p, size_t n)
{
#if OVT_HOST_BIG_ENDIAN
    uint8_t *d = p;
    for (size_t i = 0; i < n; i++, d += 4) {
        uint8_t t = d[0]; d[0] = d[3]; d[3] = t;
        t = d[1]; d[1] = d[2]; d[2] = t;
    }
#else
    (void)p;
    (void)n;
#endif
}

/* SHA-256 of len bytes of 32-bit words in host order (floats, integers),
 * hashed as their little-endian encoding; len a multiple of 4. */
void ovt_sha256_le32(ovt_hash *out, const void *words, size_t len);
void ovt_sha256_update_le32(ovt_sha256_ctx *ctx, const void *words, size_t len);

/* Overwrites len bytes with zeros in a way the compiler will not drop. */
void ovt_wipe(void *p, size_t len);

#endif
