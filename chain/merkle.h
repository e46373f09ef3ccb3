#ifndef OVT_CHAIN_MERKLE_H
#define OVT_CHAIN_MERKLE_H

/* The step Merkle tree, hashed exactly as the arbitration contract hashes it
 * (docs/contract.md):
 *   leaf i  = keccak256(0x00 || runId || uint64be(i) || stateHash_i || batchHash_i || logHash_i)
 *             (batchHash_0 = logHash_0 = 0: step 0 is the initial state)
 *   node    = keccak256(0x01 || left || right)
 * Leaves are in index order; a run of N steps has N+1 leaves (0..N), padded
 * up to the next power of two 2^depth with padding leaves whose value is the
 * zero word bytes32(0) itself. Internal nodes over padding are hashed as any
 * other node.
 *
 * Levels are numbered as the contract's bisection rounds: round 0 looks at
 * the root and reveals its two children, round r looks at a node at depth r
 * (index 0..2^r-1 from the left) and reveals its children at depth r+1.
 * After `depth` rounds the game stands on a leaf. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"

/* The part of a leaf's preimage that a party reveals. */
typedef struct {
    ovt_hash state_hash;
    ovt_hash batch_hash;
    ovt_hash log_hash;
} chain_merkle_preimage;

/* Largest supported number of steps (the contract's MAX_STEPS). */
#define CHAIN_MERKLE_MAX_STEPS ((UINT64_C(1) << 48) - 1)

/* Leaf i of run run_id. */
void chain_merkle_leaf_hash(ovt_hash *out, const ovt_hash *run_id, uint64_t index,
                            const chain_merkle_preimage *preimage);

/* Leaf i of a site tree (proof of replay, docs/contract.md):
 * keccak256(0x02 || runId || uint64be(i) || siteHash_i); siteHash_0 = 0. */
void chain_merkle_site_leaf_hash(ovt_hash *out, const ovt_hash *run_id, uint64_t index, const ovt_hash *site_hash);

/* keccak256(0x01 || left || right). */
void chain_merkle_node_hash(ovt_hash *out, const ovt_hash *left, const ovt_hash *right);

/* Tree depth for a run of `steps` steps: the least d with 2^d >= steps + 1. */
unsigned chain_merkle_depth(uint64_t steps);

/* A built tree. It keeps, at every height, only the nodes that cover at least
 * one real leaf; nodes wholly over padding are the precomputed zero-subtree
 * hashes. */
typedef struct chain_merkle chain_merkle;

/* Builds the tree over nleaves leaf values (leaves[i] is leaf i; nleaves =
 * steps + 1, at least 2). The leaves are copied. *out is NULL on failure. */
int chain_merkle_build(chain_merkle **out, const ovt_hash *leaves, size_t nleaves) OVT_MUST_USE;

void chain_merkle_free(chain_merkle *tree);

const ovt_hash *chain_merkle_root(const chain_merkle *tree);
unsigned chain_merkle_tree_depth(const chain_merkle *tree);
/* Number of real leaves (steps + 1). */
size_t chain_merkle_leaf_count(const chain_merkle *tree);

/* The node at depth `depth_from_root` (0 = root, tree depth = leaves) and
 * index `index` (0 = leftmost); padding positions are answered too. */
int chain_merkle_node(const chain_merkle *tree, ovt_hash *out, unsigned depth_from_root,
                      uint64_t index) OVT_MUST_USE;

/* The two children a party reveals in bisection round `round` when the game
 * stands on node `index` of that round (what the contract's getGame reports
 * as round and index). */
int chain_merkle_children(const chain_merkle *tree, ovt_hash *left, ovt_hash *right, unsigned round,
                          uint64_t index) OVT_MUST_USE;

/* The Merkle proof of leaf `index`: depth sibling hashes, bottom up, into
 * siblings[0..depth-1] (siblings has room for chain_merkle_tree_depth). */
int chain_merkle_proof(const chain_merkle *tree, ovt_hash *siblings, uint64_t index) OVT_MUST_USE;

/* Folds leaf (at index) with a bottom-up proof of `depth` siblings and
 * compares with root: 0 if it matches, OVT_ECRYPTO otherwise. */
int chain_merkle_verify(const ovt_hash *root, const ovt_hash *leaf, uint64_t index, const ovt_hash *siblings,
                        unsigned depth) OVT_MUST_USE;

#endif
