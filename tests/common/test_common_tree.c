/* Tests of common/tree.h: the tree's shape rebuilt by hand from SHA-256 of
 * prefixed buffers (not through tree.c's level loop), and every leaf range's
 * proof of trees of 1 to 13 leaves verified, then refused after any one-bit
 * change to a leaf, a proof hash, the range or the root. */
#include <stdlib.h>

#include "check.h"
#include "common/bytes.h"
#include "common/tree.h"

static ovt_hash leaf_by_hand(const uint8_t *p, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    buf[0] = 0;
    memcpy(buf + 1, p, len);
    ovt_hash h;
    ovt_sha256(&h, buf, len + 1);
    free(buf);
    return h;
}

static ovt_hash node_by_hand(ovt_hash l, ovt_hash r)
{
    uint8_t buf[65] = {1};
    memcpy(buf + 1, l.b, 32);
    memcpy(buf + 33, r.b, 32);
    ovt_hash h;
    ovt_sha256(&h, buf, 65);
    return h;
}

static void test_shape(void)
{
    const size_t L = OVT_TREE_LEAF_BYTES;
    CHECK(ovt_tree_leaves(0) == 1 && ovt_tree_leaves(1) == 1 && ovt_tree_leaves(L) == 1);
    CHECK(ovt_tree_leaves(L + 1) == 2 && ovt_tree_leaves(5 * L) == 5 && ovt_tree_leaves(5 * L + 4) == 6);

    /* 5 leaves, the last short: ((l0 l1) (l2 l3)) l4, the odd l4 moved up twice. */
    size_t len = 4 * L + 12;
    uint8_t *p = malloc(len);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i * 2654435761u >> 13);
    ovt_hash l[5];
    for (int i = 0; i < 5; i++)
        l[i] = leaf_by_hand(p + i * L, i < 4 ? L : 12);
    ovt_hash want = node_by_hand(node_by_hand(node_by_hand(l[0], l[1]), node_by_hand(l[2], l[3])), l[4]);
    ovt_hash got;
    CHECK(ovt_tree_root_le32(&got, p, len) == 0);
    CHECK_MEM(got.b, want.b, 32);

    /* 3 leaves: (l0 l1) l2. One leaf: the leaf itself. Empty: SHA-256(0x00). */
    want = node_by_hand(node_by_hand(l[0], l[1]), l[2]);
    CHECK(ovt_tree_root_le32(&got, p, 2 * L + 8) == 0);
    ovt_hash l2 = leaf_by_hand(p + 2 * L, 8);
    want = node_by_hand(node_by_hand(l[0], l[1]), l2);
    CHECK_MEM(got.b, want.b, 32);
    CHECK(ovt_tree_root_le32(&got, p, 40) == 0);
    want = leaf_by_hand(p, 40);
    CHECK_MEM(got.b, want.b, 32);
    CHECK(ovt_tree_root_le32(&got, p, 0) == 0);
    uint8_t zero = 0;
    ovt_sha256(&want, &zero, 1);
    CHECK_MEM(got.b, want.b, 32);
    free(p);
}

static void flip(ovt_hash *h, unsigned bit)
{
    h->b[bit / 8 % 32] ^= (uint8_t)(1u << bit % 8);
}

static void test_proofs(void)
{
    int bad_accepted = 0, good_refused = 0, ranges = 0;
    for (size_t n = 1; n <= 13; n++) {
        ovt_hash leaves[13], tmp[13], root;
        for (size_t i = 0; i < n; i++) {
            uint32_t w[3] = {(uint32_t)n, (uint32_t)i, 0x5eedu};
            ovt_tree_leaf_le32(&leaves[i], w, sizeof w);
        }
        memcpy(tmp, leaves, sizeof tmp);
        ovt_tree_root_of_leaves(&root, tmp, n);
        for (size_t first = 0; first < n; first++)
            for (size_t count = 1; first + count <= n; count++) {
                ranges++;
                ovt_hash proof[OVT_TREE_MAX_PROOF];
                size_t plen = 99;
                CHECK(ovt_tree_proof(proof, &plen, leaves, n, first, count) == 0);
                CHECK(plen == ovt_tree_proof_len(n, first, count));
                good_refused += !ovt_tree_verify(&root, n, first, count, leaves + first, proof, plen);
                /* the root a proof climbs to is the tree's (what the block
                 * benchmark builds generated trees from) */
                ovt_hash climbed;
                good_refused += ovt_tree_root_from_proof(&climbed, n, first, count, leaves + first, proof, plen) != 0 ||
                                memcmp(climbed.b, root.b, 32) != 0;
                /* a one-bit change anywhere is refused */
                for (size_t j = 0; j < count; j++) {
                    ovt_hash mine[13];
                    memcpy(mine, leaves + first, count * sizeof *mine);
                    flip(&mine[j], (unsigned)(j * 37 + n));
                    bad_accepted += ovt_tree_verify(&root, n, first, count, mine, proof, plen);
                }
                for (size_t j = 0; j < plen; j++) {
                    flip(&proof[j], (unsigned)(j + 3));
                    bad_accepted += ovt_tree_verify(&root, n, first, count, leaves + first, proof, plen);
                    flip(&proof[j], (unsigned)(j + 3));
                }
                ovt_hash r2 = root;
                flip(&r2, 255);
                bad_accepted += ovt_tree_verify(&r2, n, first, count, leaves + first, proof, plen);
                /* the same leaves claimed at another place, or with a proof cut short */
                if (first + count < n)
                    bad_accepted += ovt_tree_verify(&root, n, first + 1, count, leaves + first, proof, plen);
                if (plen > 0)
                    bad_accepted += ovt_tree_verify(&root, n, first, count, leaves + first, proof, plen - 1);
            }
        size_t plen;
        ovt_hash proof[OVT_TREE_MAX_PROOF];
        CHECK(ovt_tree_proof(proof, &plen, leaves, n, n, 1) == OVT_EINVAL);
        CHECK(ovt_tree_proof(proof, &plen, leaves, n, 0, 0) == OVT_EINVAL);
        CHECK(!ovt_tree_verify(&root, n, 0, n + 1, leaves, proof, 0));
        ovt_hash none;
        CHECK(ovt_tree_root_from_proof(&none, n, 0, n + 1, leaves, proof, 0) == OVT_EINVAL);
    }
    CHECK(ranges == 455);
    CHECK(good_refused == 0);
    CHECK(bad_accepted == 0);
    /* a single leaf's proof in a tree of 2^20 + 1 leaves: 21 levels (ceil(log2 n)), 1 hash each
     * for leaf 0, none for the last (it is moved up alone every time). */
    CHECK(ovt_tree_proof_len((1u << 20) + 1, 0, 1) == 21);
    CHECK(ovt_tree_proof_len((1u << 20) + 1, 1u << 20, 1) == 1);
}

int main(void)
{
    CHECK_RUN(test_shape());
    CHECK_RUN(test_proofs());
    return check_done();
}
