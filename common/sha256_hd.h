#ifndef OVT_COMMON_SHA256_HD_H
#define OVT_COMMON_SHA256_HD_H

/* SHA-256 (FIPS 180-4) and the tensor tree's leaf, node and level steps
 * (common/tree.h) written once for the host and the device: plain C17 for
 * the host, `__host__ __device__` under nvcc. The cuda backend hashes a
 * device tensor with these functions (kernels/cuda/tree_hash.cu) and
 * tests/common/test_sha256_hd.c runs the very same code on the host against
 * OpenSSL's SHA-256 (common/bytes.h) and ovt_tree_root_le32, so the device's
 * hashing is checked on every machine, with or without a GPU.
 *
 * Everything here hashes bytes as they lie in memory; a tensor of 32-bit
 * words is hashed little-endian (common/tree.h), which is memory order on
 * the devices and hosts ovt hashes on (x86-64, arm64, NVIDIA GPUs).
 * Nothing allocates and nothing fails: a hash is 32 bytes the caller owns.
 * The message is read one byte at a time, which keeps the code free of
 * alignment and byte-order assumptions; the compression's 64 rounds, not
 * the loads, are the cost. */

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OVT_HD __host__ __device__
#else
#define OVT_HD
#endif

#define OVT_SHA256_TREE_LEAF_BYTES 65536u

static inline OVT_HD uint32_t ovt_sha_rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* One round of the compression, t its index (a constant after unrolling),
 * k its round constant. The schedule word w[t & 15] is extended in place
 * from round 16 on. The callers rotate the roles of a..h. */
#define OVT_SHA_ROUND(a, b, c, d, e, f, g, h, t, k)                                                    \
    do {                                                                                           \
        if ((t) >= 16) {                                                                           \
            uint32_t w2 = w[((t)-2) & 15], w15 = w[((t)-15) & 15];                                 \
            uint32_t s1 = ovt_sha_rotr(w2, 17) ^ ovt_sha_rotr(w2, 19) ^ (w2 >> 10);                \
            uint32_t s0 = ovt_sha_rotr(w15, 7) ^ ovt_sha_rotr(w15, 18) ^ (w15 >> 3);               \
            w[(t)&15] += s1 + w[((t)-7) & 15] + s0;                                                \
        }                                                                                          \
        uint32_t t1 = h + (ovt_sha_rotr(e, 6) ^ ovt_sha_rotr(e, 11) ^ ovt_sha_rotr(e, 25)) +       \
                      ((e & f) ^ (~e & g)) + (uint32_t)(k) + w[(t)&15];                            \
        uint32_t t2 = (ovt_sha_rotr(a, 2) ^ ovt_sha_rotr(a, 13) ^ ovt_sha_rotr(a, 22)) +           \
                      ((a & b) ^ (a & c) ^ (b & c));                                               \
        d += t1;                                                                                   \
        h = t1 + t2;                                                                               \
    } while (0)

/* Eight rounds from t0, the roles rotated back to where they started. */
#define OVT_SHA_ROUND8(t0, k0, k1, k2, k3, k4, k5, k6, k7)                                            \
    do {                                                                                           \
        OVT_SHA_ROUND(a, b, c, d, e, f, g, h, (t0) + 0, k0);                                       \
        OVT_SHA_ROUND(h, a, b, c, d, e, f, g, (t0) + 1, k1);                                       \
        OVT_SHA_ROUND(g, h, a, b, c, d, e, f, (t0) + 2, k2);                                       \
        OVT_SHA_ROUND(f, g, h, a, b, c, d, e, (t0) + 3, k3);                                       \
        OVT_SHA_ROUND(e, f, g, h, a, b, c, d, (t0) + 4, k4);                                       \
        OVT_SHA_ROUND(d, e, f, g, h, a, b, c, (t0) + 5, k5);                                       \
        OVT_SHA_ROUND(c, d, e, f, g, h, a, b, (t0) + 6, k6);                                       \
        OVT_SHA_ROUND(b, c, d, e, f, g, h, a, (t0) + 7, k7);                                       \
    } while (0)

/* state = the compression of state with one block, given as its 16
 * big-endian words w (overwritten by the schedule). */
static inline OVT_HD void ovt_sha256_compress(uint32_t state[8], uint32_t w[16])
{
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    OVT_SHA_ROUND8(0, 0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
                   0xab1c5ed5);
    OVT_SHA_ROUND8(8, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7,
                   0xc19bf174);
    OVT_SHA_ROUND8(16, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc,
                   0x76f988da);
    OVT_SHA_ROUND8(24, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351,
                   0x14292967);
    OVT_SHA_ROUND8(32, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e,
                   0x92722c85);
    OVT_SHA_ROUND8(40, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585,
                   0x106aa070);
    OVT_SHA_ROUND8(48, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
                   0x682e6ff3);
    OVT_SHA_ROUND8(56, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
                   0xc67178f2);
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

#undef OVT_SHA_ROUND8
#undef OVT_SHA_ROUND

/* Byte p of the padded message prefix || data (len bytes of data, blocks
 * blocks in all): the prefix, the data, 0x80, zeros, and the message's bit
 * length as 64 big-endian bits in the last 8 bytes. */
static inline OVT_HD uint8_t ovt_sha256_msg_byte(uint8_t prefix, const uint8_t *data, size_t len, size_t blocks,
                                                 size_t p)
{
    if (p == 0)
        return prefix;
    if (p <= len)
        return data[p - 1];
    if (p == len + 1)
        return 0x80;
    size_t end = blocks * 64;
    if (p < end - 8)
        return 0;
    uint64_t bits = (uint64_t)(len + 1) * 8;
    return (uint8_t)(bits >> (8 * (end - 1 - p)));
}

/* out = SHA-256(prefix || data[0 .. len)): the tree's leaf (prefix 0x00)
 * and node (0x01) hashes. A block made of data alone is read straight from
 * data; the first block and the padded tail byte by byte. */
static inline OVT_HD void ovt_sha256_prefixed(uint8_t out[32], uint8_t prefix, const uint8_t *data, size_t len)
{
    uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t msg = len + 1, blocks = (msg + 8) / 64 + 1;
    for (size_t blk = 0; blk < blocks; blk++) {
        size_t p0 = 64 * blk;
        uint32_t w[16];
        if (blk > 0 && p0 + 64 <= msg) {
            const uint8_t *q = data + p0 - 1;
            for (int t = 0; t < 16; t++)
                w[t] = (uint32_t)q[4 * t] << 24 | (uint32_t)q[4 * t + 1] << 16 | (uint32_t)q[4 * t + 2] << 8 |
                       (uint32_t)q[4 * t + 3];
        } else {
            for (int t = 0; t < 16; t++) {
                uint32_t v = 0;
                for (int j = 0; j < 4; j++)
                    v = v << 8 | ovt_sha256_msg_byte(prefix, data, len, blocks, p0 + 4 * (size_t)t + (size_t)j);
                w[t] = v;
            }
        }
        ovt_sha256_compress(state, w);
    }
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(state[i] >> (24 - 8 * j));
}

/* Leaves of a tree over len bytes: max(1, ceil(len / leaf)) (ovt_tree_leaves). */
static inline OVT_HD size_t ovt_tree_leaves_hd(size_t len)
{
    if (len == 0)
        return 1;
    return len / OVT_SHA256_TREE_LEAF_BYTES + (len % OVT_SHA256_TREE_LEAF_BYTES != 0);
}

/* out = leaf i of the tree over bytes[0 .. len): SHA-256(0x00 || piece i). */
static inline OVT_HD void ovt_tree_leaf_at_hd(uint8_t out[32], const uint8_t *bytes, size_t len, size_t i)
{
    size_t off = i * (size_t)OVT_SHA256_TREE_LEAF_BYTES;
    size_t k = len - off < OVT_SHA256_TREE_LEAF_BYTES ? len - off : OVT_SHA256_TREE_LEAF_BYTES;
    ovt_sha256_prefixed(out, 0x00, bytes + off, k);
}

/* Node i of the level above the n hashes in (32 bytes each): SHA-256(0x01
 * || in[2i] || in[2i+1]), or in[2i] unchanged when it is the odd last one.
 * The level above has (n + 1) / 2 nodes; out and in must not overlap. */
static inline OVT_HD void ovt_tree_up_hd(uint8_t *out, const uint8_t *in, size_t n, size_t i)
{
    const uint8_t *l = in + 64 * i;
    if (2 * i + 1 == n) {
        for (int j = 0; j < 32; j++)
            out[32 * i + (size_t)j] = l[j];
        return;
    }
    ovt_sha256_prefixed(out + 32 * i, 0x01, l, 64);
}

#endif
