/* Tests of common/sha256_hd.h, the SHA-256 and tree steps the cuda backend
 * runs on the device (kernels/cuda/tree_hash.cu), here on the host:
 *  - SHA-256(prefix || data) equal to OpenSSL's (common/bytes.h) at every
 *    length around the padding's edges (0 to 300 bytes) and at a few large
 *    ones, with both prefixes;
 *  - a tree root built the way the device builds it (every leaf by
 *    ovt_tree_leaf_at_hd, then level after level by ovt_tree_up_hd into a
 *    second buffer) equal to tree.c's root of the same bytes and (on a
 *    little-endian host, where memory order is the words' encoding) to
 *    ovt_tree_root_le32, at 0 and 1 byte, 63, 64 and 65 KiB, odd and even
 *    leaf counts and a few MB. */
#include <stdlib.h>

#include "check.h"
#include "common/bytes.h"
#include "common/sha256_hd.h"
#include "common/tree.h"

static uint8_t *random_bytes(size_t len, uint64_t seed)
{
    uint8_t *p = malloc(len ? len : 1);
    uint64_t s = seed * 0x9e3779b97f4a7c15u + 1;
    for (size_t i = 0; i < len; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (uint8_t)(s >> 24);
    }
    return p;
}

/* SHA-256(prefix || data) by OpenSSL. */
static ovt_hash prefixed_by_openssl(uint8_t prefix, const uint8_t *data, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    buf[0] = prefix;
    if (len)
        memcpy(buf + 1, data, len);
    ovt_hash h;
    ovt_sha256(&h, buf, len + 1);
    free(buf);
    return h;
}

static bool same_prefixed(uint8_t prefix, const uint8_t *data, size_t len)
{
    uint8_t out[32];
    ovt_sha256_prefixed(out, prefix, data, len);
    ovt_hash want = prefixed_by_openssl(prefix, data, len);
    return memcmp(out, want.b, 32) == 0;
}

static void test_sha256(void)
{
    uint8_t *p = random_bytes(1 << 20, 1);
    size_t bad = 0;
    for (size_t len = 0; len <= 300; len++)
        for (int prefix = 0; prefix < 2; prefix++)
            bad += !same_prefixed((uint8_t)prefix, p, len);
    CHECK_MSG(bad == 0, "%zu of 602 short messages differ from OpenSSL", bad);
    const size_t big[] = {1000, 4095, 65535, 65536, 65537, 100003, 1 << 20};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        CHECK_MSG(same_prefixed(0, p, big[i]), "%zu bytes differ from OpenSSL", big[i]);
    /* FIPS 180-4's "abc" (the prefix is its first byte) */
    static const uint8_t abc_hash[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                                         0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                                         0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    uint8_t out[32];
    ovt_sha256_prefixed(out, 'a', (const uint8_t *)"bc", 2);
    CHECK(memcmp(out, abc_hash, 32) == 0);
    free(p);
}

/* The root as the device computes it: all leaves, then level by level
 * between two buffers. */
static ovt_hash root_as_device(const uint8_t *bytes, size_t len)
{
    size_t n = ovt_tree_leaves_hd(len);
    uint8_t *cur = malloc(32 * n), *next = malloc(32 * n);
    for (size_t i = 0; i < n; i++)
        ovt_tree_leaf_at_hd(cur + 32 * i, bytes, len, i);
    while (n > 1) {
        size_t up = (n + 1) / 2;
        for (size_t i = 0; i < up; i++)
            ovt_tree_up_hd(next, cur, n, i);
        uint8_t *t = cur;
        cur = next;
        next = t;
        n = up;
    }
    ovt_hash h;
    memcpy(h.b, cur, 32);
    free(cur);
    free(next);
    return h;
}

/* The root by tree.c from the bytes as they are (leaves by OpenSSL). */
static ovt_hash root_of_bytes(const uint8_t *bytes, size_t len)
{
    size_t n = ovt_tree_leaves(len);
    ovt_hash *h = malloc(n * sizeof *h), root;
    for (size_t i = 0; i < n; i++) {
        size_t off = i * (size_t)OVT_TREE_LEAF_BYTES;
        ovt_tree_leaf(&h[i], bytes + off, len - off < OVT_TREE_LEAF_BYTES ? len - off : OVT_TREE_LEAF_BYTES);
    }
    ovt_tree_root_of_leaves(&root, h, n);
    free(h);
    return root;
}

static void test_tree_root(void)
{
    const size_t K = OVT_TREE_LEAF_BYTES;
    const size_t lens[] = {0, 1, 4, 63 * 1024, K - 4, K, K + 4, 65 * 1024, 2 * K, 3 * K, 3 * K + 8,
                           5 * K - 4, 7 * K, 8 * K, 9 * K + 100, (size_t)3 << 20, ((size_t)3 << 20) + 65540};
    CHECK(OVT_SHA256_TREE_LEAF_BYTES == OVT_TREE_LEAF_BYTES);
    uint8_t *p = random_bytes(lens[sizeof lens / sizeof lens[0] - 1], 2);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        CHECK(ovt_tree_leaves_hd(lens[i]) == ovt_tree_leaves(lens[i]));
        ovt_hash got = root_as_device(p, lens[i]), want = root_of_bytes(p, lens[i]);
        CHECK_MSG(memcmp(got.b, want.b, 32) == 0, "root of %zu bytes (%zu leaves) differs", lens[i],
                  ovt_tree_leaves(lens[i]));
#if !OVT_HOST_BIG_ENDIAN /* memory order is the words' little-endian encoding */
        if (ovt_tree_root_le32(&want, p, lens[i]))
            CHECK_MSG(0, "%s", ovt_errmsg());
        CHECK_MSG(memcmp(got.b, want.b, 32) == 0, "root of %zu bytes differs from ovt_tree_root_le32", lens[i]);
#endif
    }
    free(p);
}

int main(void)
{
    CHECK_RUN(test_sha256());
    CHECK_RUN(test_tree_root());
    return check_done();
}
