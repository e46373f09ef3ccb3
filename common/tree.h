#ifndef OVT_COMMON_TREE_H
#define OVT_COMMON_TREE_H

/* Tensor trees: a binary Merkle tree of SHA-256 over a byte string cut into
 * fixed leaves, so that a part of a large tensor can be proved against its
 * root, and the root computed by many threads (docs/formats.md, "Tensor
 * trees").
 *
 *   leaves    the bytes cut into OVT_TREE_LEAF_BYTES pieces, the last one
 *             short; an empty string is one empty leaf
 *   leaf      SHA-256(0x00 || piece)
 *   node      SHA-256(0x01 || left || right)
 *   levels    each level pairs its nodes left to right; an odd last node
 *             moves up to the next level unchanged; the root is the one
 *             node left (a single leaf is its own root)
 *
 * The prefixes keep a leaf from ever reading as a node. The tree's shape is
 * a function of the length alone, which every verifier knows from the run
 * config's layout, so a proof needs no position encoding beyond the leaf
 * index. Tensors are hashed as the little-endian bytes of their 32-bit
 * words (the _le32 functions swap on a big-endian host). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

#define OVT_TREE_LEAF_BYTES 65536u

/* Leaves of a string of len bytes: max(1, ceil(len / OVT_TREE_LEAF_BYTES)). */
size_t ovt_tree_leaves(size_t len);

/* The leaf hash of piece (len <= OVT_TREE_LEAF_BYTES bytes), and the same
 * for 32-bit words in host order hashed as little-endian (len a multiple
 * of 4). */
void ovt_tree_leaf(ovt_hash *out, const void *piece, size_t len);
void ovt_tree_leaf_le32(ovt_hash *out, const void *words, size_t len);

/* An inner node from its two children. */
void ovt_tree_node(ovt_hash *out, const ovt_hash *left, const ovt_hash *right);

/* The root over n >= 1 leaf hashes; hashes (n entries) is overwritten. */
void ovt_tree_root_of_leaves(ovt_hash *out, ovt_hash *hashes, size_t n);

/* The root of len bytes of 32-bit words in host order (one thread; a
 * state's tensors are hashed in parallel by trainer/). OVT_ENOMEM. */
int ovt_tree_root_le32(ovt_hash *out, const void *words, size_t len) OVT_MUST_USE;

/* A proof of the leaf range [first, first + count) of an n-leaf tree: the
 * sibling hashes needed to climb from those leaves to the root, level by
 * level from the leaves up, and on each level the left sibling (if the
 * range starts at an odd index) before the right one (if the range ends
 * at an even index that has a right neighbour). At most 2 per level. */
#define OVT_TREE_MAX_PROOF 128

/* How many hashes the proof of [first, first + count) in an n-leaf tree
 * holds; 0 for a range that is empty or outside [0, n). */
size_t ovt_tree_proof_len(size_t n, size_t first, size_t count);

/* The proof of [first, first + count) from all n leaf hashes (the tree is
 * rebuilt); proof must hold ovt_tree_proof_len(...) entries. OVT_EINVAL for
 * a range outside the tree, OVT_ENOMEM. */
int ovt_tree_proof(ovt_hash *proof, size_t *proof_len, const ovt_hash *leaves, size_t n, size_t first,
                   size_t count) OVT_MUST_USE;

/* The root the count leaf hashes of [first, first + count) climb to with
 * proof in an n-leaf tree (what ovt_tree_verify compares with the root):
 * OVT_EINVAL for a proof of the wrong length or a range outside the tree,
 * OVT_ENOMEM. */
int ovt_tree_root_from_proof(ovt_hash *root, size_t n, size_t first, size_t count, const ovt_hash *leaves,
                             const ovt_hash *proof, size_t proof_len) OVT_MUST_USE;

/* Whether the count leaf hashes of [first, first + count) with proof
 * (proof_len hashes) climb to root in an n-leaf tree. False for a proof of
 * the wrong length, a range outside the tree, or any mismatch. */
bool ovt_tree_verify(const ovt_hash *root, size_t n, size_t first, size_t count, const ovt_hash *leaves,
                     const ovt_hash *proof, size_t proof_len);

#endif
