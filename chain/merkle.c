/* The step Merkle tree, hashed exactly as chain/contracts/OvtArbitration.sol
 * hashes it. See merkle.h for the definition. */
#include "chain/merkle.h"

#include <stdlib.h>
#include <string.h>

#include "chain/keccak.h"
#include "common/err.h"

#define MAX_DEPTH 48

struct chain_merkle {
    unsigned depth;
    size_t nleaves;
    ovt_hash *storage;               /* all levels in one allocation */
    ovt_hash *level[MAX_DEPTH + 1];  /* level[h]: the real nodes at height h (0 = leaves) */
    size_t count[MAX_DEPTH + 1];     /* ceil(nleaves / 2^h) */
    ovt_hash zero[MAX_DEPTH + 1];    /* a subtree of height h over padding only */
};

void chain_merkle_leaf_hash(ovt_hash *out, const ovt_hash *run_id, uint64_t index,
                            const chain_merkle_preimage *preimage)
{
    uint8_t buf[1 + 32 + 8 + 3 * 32];
    buf[0] = 0x00;
    memcpy(buf + 1, run_id->b, 32);
    ovt_put_be64(buf + 33, index);
    memcpy(buf + 41, preimage->state_hash.b, 32);
    memcpy(buf + 73, preimage->batch_hash.b, 32);
    memcpy(buf + 105, preimage->log_hash.b, 32);
    chain_keccak256(out, buf, sizeof buf);
}

void chain_merkle_site_leaf_hash(ovt_hash *out, const ovt_hash *run_id, uint64_t index, const ovt_hash *site_hash)
{
    uint8_t buf[1 + 32 + 8 + 32];
    buf[0] = 0x02;
    memcpy(buf + 1, run_id->b, 32);
    ovt_put_be64(buf + 33, index);
    memcpy(buf + 41, site_hash->b, 32);
    chain_keccak256(out, buf, sizeof buf);
}

void chain_merkle_node_hash(ovt_hash *out, const ovt_hash *left, const ovt_hash *right)
{
    uint8_t buf[1 + 64];
    buf[0] = 0x01;
    memcpy(buf + 1, left->b, 32);
    memcpy(buf + 33, right->b, 32);
    chain_keccak256(out, buf, sizeof buf);
}

unsigned chain_merkle_depth(uint64_t steps)
{
    unsigned d = 0;
    /* 2^d >= steps + 1  <=>  2^d > steps */
    while (d < 64 && (UINT64_C(1) << d) <= steps)
        d++;
    return d;
}

/* The node at height h (0 = leaves) and index i, padding included. */
static const ovt_hash *node_at(const chain_merkle *t, unsigned h, uint64_t i)
{
    return i < t->count[h] ? &t->level[h][i] : &t->zero[h];
}

int chain_merkle_build(chain_merkle **out, const ovt_hash *leaves, size_t nleaves)
{
    *out = NULL;
    if (nleaves < 2)
        return ovt_fail(OVT_EINVAL, "merkle: a run has at least one step (2 leaves), got %zu leaves", nleaves);
    if ((uint64_t)(nleaves - 1) > CHAIN_MERKLE_MAX_STEPS || nleaves > SIZE_MAX / (2 * sizeof(ovt_hash)))
        return ovt_fail(OVT_EINVAL, "merkle: %zu leaves is more than the contract allows", nleaves);

    chain_merkle *t = calloc(1, sizeof *t);
    if (!t)
        return ovt_fail(OVT_ENOMEM, "merkle: out of memory");
    t->nleaves = nleaves;
    t->depth = chain_merkle_depth((uint64_t)nleaves - 1);

    size_t total = 0;
    for (unsigned h = 0; h <= t->depth; h++) {
        t->count[h] = h == 0 ? nleaves : (t->count[h - 1] + 1) / 2;
        total += t->count[h];
    }
    t->storage = malloc(total * sizeof(ovt_hash));
    if (!t->storage) {
        free(t);
        return ovt_fail(OVT_ENOMEM, "merkle: out of memory for %zu nodes", total);
    }
    ovt_hash *p = t->storage;
    for (unsigned h = 0; h <= t->depth; h++) {
        t->level[h] = p;
        p += t->count[h];
    }

    memset(&t->zero[0], 0, sizeof(ovt_hash));
    for (unsigned h = 1; h <= t->depth; h++)
        chain_merkle_node_hash(&t->zero[h], &t->zero[h - 1], &t->zero[h - 1]);

    memcpy(t->level[0], leaves, nleaves * sizeof(ovt_hash));
    for (unsigned h = 1; h <= t->depth; h++)
        for (size_t i = 0; i < t->count[h]; i++)
            chain_merkle_node_hash(&t->level[h][i], node_at(t, h - 1, 2 * (uint64_t)i),
                                   node_at(t, h - 1, 2 * (uint64_t)i + 1));
    *out = t;
    return 0;
}

void chain_merkle_free(chain_merkle *tree)
{
    if (!tree)
        return;
    free(tree->storage);
    free(tree);
}

const ovt_hash *chain_merkle_root(const chain_merkle *tree)
{
    return &tree->level[tree->depth][0];
}

unsigned chain_merkle_tree_depth(const chain_merkle *tree)
{
    return tree->depth;
}

size_t chain_merkle_leaf_count(const chain_merkle *tree)
{
    return tree->nleaves;
}

int chain_merkle_node(const chain_merkle *tree, ovt_hash *out, unsigned depth_from_root, uint64_t index)
{
    memset(out, 0, sizeof *out);
    if (depth_from_root > tree->depth)
        return ovt_fail(OVT_EINVAL, "merkle: depth %u is below the leaves (tree depth %u)", depth_from_root,
                        tree->depth);
    if (index >> depth_from_root != 0)
        return ovt_fail(OVT_EINVAL, "merkle: index %llu is outside depth %u", (unsigned long long)index,
                        depth_from_root);
    *out = *node_at(tree, tree->depth - depth_from_root, index);
    return 0;
}

int chain_merkle_children(const chain_merkle *tree, ovt_hash *left, ovt_hash *right, unsigned round,
                          uint64_t index)
{
    memset(left, 0, sizeof *left);
    memset(right, 0, sizeof *right);
    if (round >= tree->depth)
        return ovt_fail(OVT_EINVAL, "merkle: round %u has no children to reveal (tree depth %u)", round,
                        tree->depth);
    if (index >> round != 0)
        return ovt_fail(OVT_EINVAL, "merkle: index %llu is outside round %u", (unsigned long long)index, round);
    unsigned h = tree->depth - round - 1;
    *left = *node_at(tree, h, 2 * index);
    *right = *node_at(tree, h, 2 * index + 1);
    return 0;
}

int chain_merkle_proof(const chain_merkle *tree, ovt_hash *siblings, uint64_t index)
{
    memset(siblings, 0, tree->depth * sizeof(ovt_hash));
    if (index >= tree->nleaves)
        return ovt_fail(OVT_EINVAL, "merkle: no leaf %llu (the run has %zu leaves)", (unsigned long long)index,
                        tree->nleaves);
    for (unsigned h = 0; h < tree->depth; h++)
        siblings[h] = *node_at(tree, h, (index >> h) ^ 1);
    return 0;
}

int chain_merkle_verify(const ovt_hash *root, const ovt_hash *leaf, uint64_t index, const ovt_hash *siblings,
                        unsigned depth)
{
    if (depth > MAX_DEPTH || (depth < 64 && index >> depth != 0))
        return ovt_fail(OVT_EINVAL, "merkle: index %llu does not fit a tree of depth %u",
                        (unsigned long long)index, depth);
    ovt_hash h = *leaf;
    for (unsigned k = 0; k < depth; k++) {
        if ((index >> k) & 1)
            chain_merkle_node_hash(&h, &siblings[k], &h);
        else
            chain_merkle_node_hash(&h, &h, &siblings[k]);
    }
    if (memcmp(h.b, root->b, 32) != 0)
        return ovt_fail(OVT_ECRYPTO, "merkle: the proof of leaf %llu does not lead to the root",
                        (unsigned long long)index);
    return 0;
}
