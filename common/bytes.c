#include "common/bytes.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

struct ovt_sha256_ctx {
    EVP_MD_CTX *md;
};

uint32_t ovt_hash_mod(const ovt_hash *h, uint32_t n)
{
    uint64_t r = 0;
    for (size_t i = 0; i < 32; i++)
        r = ((r << 8) | h->b[i]) % n;
    return (uint32_t)r;
}

void ovt_sha256(ovt_hash *out, const void *data, size_t len)
{
    unsigned int n = 0;
    if (!EVP_Digest(data, len, out->b, &n, EVP_sha256(), NULL) || n != 32)
        abort(); /* only fails on OpenSSL misconfiguration */
}

ovt_sha256_ctx *ovt_sha256_new(void)
{
    ovt_sha256_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->md = EVP_MD_CTX_new();
    if (!ctx->md || !EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx->md);
        free(ctx);
        return NULL;
    }
    return ctx;
}

void ovt_sha256_update(ovt_sha256_ctx *ctx, const void *data, size_t len)
{
    if (!EVP_DigestUpdate(ctx->md, data, len))
        abort();
}

void ovt_sha256_final(ovt_sha256_ctx *ctx, ovt_hash *out)
{
    unsigned int n = 0;
    if (!EVP_DigestFinal_ex(ctx->md, out->b, &n) || n != 32)
        abort();
    EVP_MD_CTX_free(ctx->md);
    free(ctx);
}

void ovt_sha256_update_le32(ovt_sha256_ctx *ctx, const void *words, size_t len)
{
#if OVT_HOST_BIG_ENDIAN
    /* through a small buffer: a state's tensors are gigabytes */
    uint8_t buf[4096];
    const uint8_t *p = words;
    for (size_t off = 0; off < len; off += sizeof buf) {
        size_t k = len - off < sizeof buf ? len - off : sizeof buf;
        ovt_copy_le32(buf, p + off, k / 4);
        ovt_sha256_update(ctx, buf, k);
    }
#else
    ovt_sha256_update(ctx, words, len);
#endif
}

void ovt_sha256_le32(ovt_hash *out, const void *words, size_t len)
{
#if OVT_HOST_BIG_ENDIAN
    ovt_sha256_ctx *ctx = ovt_sha256_new();
    if (!ctx)
        abort(); /* OpenSSL could not allocate a digest context */
    ovt_sha256_update_le32(ctx, words, len);
    ovt_sha256_final(ctx, out);
#else
    ovt_sha256(out, words, len);
#endif
}

void ovt_hex_encode(char *out, const void *data, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * len] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static const char *skip_0x(const char *hex)
{
    if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X'))
        return hex + 2;
    return hex;
}

static int decode_into(uint8_t *out, const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return ovt_fail(OVT_EFORMAT, "invalid hex digit near position %zu", 2 * i);
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int ovt_hex_decode(void *out, size_t len, const char *hex)
{
    memset(out, 0, len);
    const char *h = skip_0x(hex);
    size_t n = strlen(h);
    if (n != 2 * len)
        return ovt_fail(OVT_EFORMAT, "expected %zu hex digits, got %zu", 2 * len, n);
    int rc = decode_into(out, h, len);
    if (rc < 0)
        memset(out, 0, len);
    return rc;
}

int ovt_hex_decode_alloc(uint8_t **out, size_t *len, const char *hex)
{
    *out = NULL;
    *len = 0;
    const char *h = skip_0x(hex);
    size_t n = strlen(h);
    if (n % 2 != 0)
        return ovt_fail(OVT_EFORMAT, "odd number of hex digits (%zu)", n);
    uint8_t *buf = malloc(n / 2 + 1);
    if (!buf)
        return ovt_fail(OVT_ENOMEM, "out of memory decoding hex");
    int rc = decode_into(buf, h, n / 2);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n / 2;
    return 0;
}

void ovt_wipe(void *p, size_t len)
{
    OPENSSL_cleanse(p, len);
}
