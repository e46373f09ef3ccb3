#ifndef OVT_KERNELS_CUDA_TREE_PLAN_H
#define OVT_KERNELS_CUDA_TREE_PLAN_H

/* Internal to kernels/: the layout of many tensor trees hashed together on
 * the device (kernels/cuda/tree_hash.cu), plain C so the host tests
 * (test_cuda_host) run the same walk with the same hashing code
 * (common/sha256_hd.h) without a device.
 *
 * The count tensors' leaves are laid end to end (level 0), tensor t's at
 * [offs[0][t], offs[0][t + 1]); each level above holds every tensor's nodes
 * of that level, end to end, a tensor already down to its root copying it
 * up unchanged (ovt_tree_up_hd of a single node), until every tensor has
 * one node: then tensor t's root is node t of the last level. One launch
 * per level hashes every tensor's nodes of that level, so a state of
 * hundreds of tensors takes 1 + levels launches, levels being the deepest
 * tree's (13 for a 500 MB tensor). */

#include <stddef.h>

#include "common/err.h"
#include "common/sha256_hd.h"

typedef struct {
    size_t count;  /* tensors */
    size_t levels; /* reductions until every tensor is one node */
    size_t *offs;  /* (levels + 1) rows of count + 1: row l, entry t = tensor
                      t's first node at level l; entry count = the level's nodes */
} krn_cuda_tree_plan;

/* The plan of count >= 1 tensors of lens[t] bytes. OVT_ENOMEM, or
 * OVT_EINVAL for count == 0; *p zeroed on failure. Free with
 * krn_cuda_tree_plan_free. */
int krn_cuda_tree_plan_make(krn_cuda_tree_plan *p, const size_t *lens, size_t count) OVT_MUST_USE;
void krn_cuda_tree_plan_free(krn_cuda_tree_plan *p);

/* The row of level l. */
static inline const size_t *krn_cuda_tree_level(const krn_cuda_tree_plan *p, size_t l)
{
    return p->offs + l * (p->count + 1);
}

/* The tensor whose nodes hold node j of a level row (offs, count + 1
 * increasing entries, j < offs[count]): the last t with offs[t] <= j. */
static inline OVT_HD size_t krn_cuda_tree_owner(const size_t *offs, size_t count, size_t j)
{
    size_t lo = 0, hi = count; /* offs[lo] <= j < offs[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (offs[mid] <= j)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Leaf j of the laid-out leaves (row 0): the tensor's bytes[t] and lens[t]. */
static inline OVT_HD void krn_cuda_tree_leaf(uint8_t *hashes, const uint8_t *const *bytes, const size_t *lens,
                                             const size_t *row0, size_t count, size_t j)
{
    size_t t = krn_cuda_tree_owner(row0, count, j);
    ovt_tree_leaf_at_hd(hashes + 32 * j, bytes[t], lens[t], j - row0[t]);
}

/* Node j of level row `up` from the level below (row `down`, hashes in). */
static inline OVT_HD void krn_cuda_tree_node(uint8_t *out, const uint8_t *in, const size_t *down, const size_t *up,
                                             size_t count, size_t j)
{
    size_t t = krn_cuda_tree_owner(up, count, j);
    ovt_tree_up_hd(out + 32 * up[t], in + 32 * down[t], down[t + 1] - down[t], j - up[t]);
}

#endif
