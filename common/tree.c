#include "common/tree.h"

#include <stdlib.h>
#include <string.h>

size_t ovt_tree_leaves(size_t len)
{
    if (len == 0)
        return 1;
    return len / OVT_TREE_LEAF_BYTES + (len % OVT_TREE_LEAF_BYTES != 0);
}

void ovt_tree_leaf(ovt_hash *out, const void *piece, size_t len)
{
    static const uint8_t prefix = 0x00;
    ovt_sha256_ctx *c = ovt_sha256_new();
    ovt_sha256_update(c, &prefix, 1);
    ovt_sha256_update(c, piece, len);
    ovt_sha256_final(c, out);
}

void ovt_tree_leaf_le32(ovt_hash *out, const void *words, size_t len)
{
    static const uint8_t prefix = 0x00;
    ovt_sha256_ctx *c = ovt_sha256_new();
    ovt_sha256_update(c, &prefix, 1);
    ovt_sha256_update_le32(c, words, len);
    ovt_sha256_final(c, out);
}

void ovt_tree_node(ovt_hash *out, const ovt_hash *left, const ovt_hash *right)
{
    uint8_t buf[65];
    buf[0] = 0x01;
    memcpy(buf + 1, left->b, 32);
    memcpy(buf + 33, right->b, 32);
    ovt_sha256(out, buf, sizeof buf);
}

/* One level up, in place: n nodes become (n + 1) / 2. */
static size_t level_up(ovt_hash *h, size_t n)
{
    for (size_t i = 0; i < n / 2; i++)
        ovt_tree_node(&h[i], &h[2 * i], &h[2 * i + 1]);
    if (n % 2)
        h[n / 2] = h[n - 1];
    return (n + 1) / 2;
}

void ovt_tree_root_of_leaves(ovt_hash *out, ovt_hash *hashes, size_t n)
{
    while (n > 1)
        n = level_up(hashes, n);
    *out = hashes[0];
}

int ovt_tree_root_le32(ovt_hash *out, const void *words, size_t len)
{
    memset(out, 0, sizeof *out);
    size_t n = ovt_tree_leaves(len);
    ovt_hash *h = malloc(n * sizeof *h);
    if (!h)
        return ovt_fail(OVT_ENOMEM, "tree: out of memory for %zu leaf hashes", n);
    const uint8_t *p = words;
    for (size_t i = 0; i < n; i++) {
        size_t off = i * (size_t)OVT_TREE_LEAF_BYTES;
        size_t k = len - off < OVT_TREE_LEAF_BYTES ? len - off : OVT_TREE_LEAF_BYTES;
        ovt_tree_leaf_le32(&h[i], p + off, k);
    }
    ovt_tree_root_of_leaves(out, h, n);
    free(h);
    return 0;
}

/* The walk a proof takes: on each level the known nodes are [a, b) of n;
 * a left sibling is needed when a is odd, a right one when b is odd and
 * not the level's end. Calls want(level_index) for each needed sibling in
 * proof order, then moves up. Returns the number of siblings. */
typedef struct {
    size_t a, b, n;
} walk;

static bool range_ok(size_t n, size_t first, size_t count)
{
    return count > 0 && first < n && count <= n - first;
}

size_t ovt_tree_proof_len(size_t n, size_t first, size_t count)
{
    if (!range_ok(n, first, count))
        return 0;
    size_t len = 0;
    for (walk w = {first, first + count, n}; w.n > 1;) {
        len += w.a % 2;
        len += (w.b % 2 && w.b < w.n);
        w.a /= 2;
        w.b = (w.b + 1) / 2;
        w.n = (w.n + 1) / 2;
    }
    return len;
}

int ovt_tree_proof(ovt_hash *proof, size_t *proof_len, const ovt_hash *leaves, size_t n, size_t first,
                   size_t count)
{
    *proof_len = 0;
    if (!range_ok(n, first, count))
        return ovt_fail(OVT_EINVAL, "tree: leaves %zu..%zu are not within the tree's %zu", first,
                       first + count, n);
    ovt_hash *h = malloc(n * sizeof *h);
    if (!h)
        return ovt_fail(OVT_ENOMEM, "tree: out of memory for %zu leaf hashes", n);
    memcpy(h, leaves, n * sizeof *h);
    size_t len = 0;
    for (walk w = {first, first + count, n}; w.n > 1;) {
        if (w.a % 2)
            proof[len++] = h[w.a - 1];
        if (w.b % 2 && w.b < w.n)
            proof[len++] = h[w.b];
        w.a /= 2;
        w.b = (w.b + 1) / 2;
        w.n = level_up(h, w.n);
    }
    free(h);
    *proof_len = len;
    return 0;
}

int ovt_tree_root_from_proof(ovt_hash *root, size_t n, size_t first, size_t count, const ovt_hash *leaves,
                             const ovt_hash *proof, size_t proof_len)
{
    memset(root, 0, sizeof *root);
    if (!range_ok(n, first, count) || proof_len != ovt_tree_proof_len(n, first, count))
        return ovt_fail(OVT_EINVAL, "tree: leaves %zu..%zu of %zu with a proof of %zu hashes: not a range proof",
                        first, first + count, n, proof_len);
    /* cur holds the known nodes of the level, with room for a sibling on
     * each side. */
    ovt_hash *cur = malloc((count + 2) * sizeof *cur);
    if (!cur)
        return ovt_fail(OVT_ENOMEM, "tree: out of memory for %zu leaf hashes", count);
    memcpy(cur + 1, leaves, count * sizeof *cur);
    size_t lo = 1, hi = 1 + count, p = 0;
    for (walk w = {first, first + count, n}; w.n > 1;) {
        if (w.a % 2)
            cur[--lo] = proof[p++];
        if (w.b % 2 && w.b < w.n)
            cur[hi++] = proof[p++];
        /* cur[lo, hi) is the level's [a & ~1, b') : pair them, an odd last
         * one (the level's end) moves up. */
        size_t k = hi - lo, m = 0;
        for (size_t i = 0; i + 1 < k; i += 2)
            ovt_tree_node(&cur[1 + m++], &cur[lo + i], &cur[lo + i + 1]);
        if (k % 2)
            cur[1 + m++] = cur[hi - 1];
        lo = 1;
        hi = 1 + m;
        w.a /= 2;
        w.b = (w.b + 1) / 2;
        w.n = (w.n + 1) / 2;
    }
    *root = cur[lo];
    free(cur);
    return 0;
}

bool ovt_tree_verify(const ovt_hash *root, size_t n, size_t first, size_t count, const ovt_hash *leaves,
                     const ovt_hash *proof, size_t proof_len)
{
    ovt_hash got;
    if (!range_ok(n, first, count) || proof_len != ovt_tree_proof_len(n, first, count) ||
        ovt_tree_root_from_proof(&got, n, first, count, leaves, proof, proof_len) < 0)
        return false;
    return memcmp(got.b, root->b, 32) == 0;
}
