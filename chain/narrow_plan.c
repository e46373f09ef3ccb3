/* A party's moves in the narrowing game (chain/narrow.h): the next move as
 * a pure function of the game and the party's own step data. */
#include <stdlib.h>
#include <string.h>

#include "chain/narrow.h"
#include "common/tree.h"

/* Node (level, index) of the tensor tree over n leaves (common/tree.h):
 * the root of its leaves [index << level, (index + 1) << level) cut at n,
 * since an odd last node moves up unchanged at every level below it. */
static int node_at(ovt_hash *out, const ovt_hash *leaves, size_t n, unsigned level, uint64_t index)
{
    if (level >= 64 || (index << level) >> level != index)
        return ovt_fail(OVT_EINVAL, "narrowing: node (%u, %llu) is outside a tree", level,
                        (unsigned long long)index);
    uint64_t first = index << level, width = (uint64_t)1 << level;
    if (first >= n)
        return ovt_fail(OVT_EINVAL, "narrowing: node (%u, %llu) is outside a tree of %zu leaves", level,
                        (unsigned long long)index, n);
    size_t count = (size_t)(n - first < width ? n - first : width);
    ovt_hash *copy = malloc(count * sizeof *copy);
    if (!copy)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaf hashes", count);
    memcpy(copy, leaves + first, count * sizeof *copy);
    ovt_tree_root_of_leaves(out, copy, count);
    free(copy);
    return 0;
}

/* The party's chunk chain of the game's block (*leaves malloc'd): at
 * least 2 leaves, the last one the party's level-3 leaf as the contract
 * kept it, else the chain is not of this dispute and posting it would lose. */
static int chunk_chain(ovt_hash **leaves, size_t *n, const chain_narrow_game *g, const chain_narrow_party *p)
{
    *leaves = NULL;
    if (!p->chunk_leaves)
        return ovt_fail(OVT_EINVAL, "narrowing: level 4 (site %llu is a batch reduction) needs the party's "
                                    "chunk_leaves, which it lacks", (unsigned long long)g->item);
    int rc = p->chunk_leaves(p->ctx, g->item, g->block, leaves, n);
    if (rc != 0)
        return ovt_fail_wrap(rc, "narrowing: the chunk chain of site %llu, block %llu", (unsigned long long)g->item,
                             (unsigned long long)g->block);
    const chain_narrow_side *own = p->is_trainer ? &g->trainer_side : &g->auditor_side;
    if (*n < 2)
        rc = ovt_fail(OVT_EINVAL, "narrowing: the chunk chain of site %llu, block %llu has %zu leaves, under 2 "
                                  "(C chunks and the final step)", (unsigned long long)g->item,
                      (unsigned long long)g->block, *n);
    else if (memcmp((*leaves)[*n - 1].b, own->block_leaf.b, 32) != 0)
        rc = ovt_fail(OVT_EINVAL, "narrowing: the last leaf of the chunk chain of site %llu, block %llu is not the "
                                  "party's level-3 leaf on chain: the chain and the output tree disagree",
                      (unsigned long long)g->item, (unsigned long long)g->block);
    if (rc != 0) {
        free(*leaves);
        *leaves = NULL;
    }
    return rc;
}

/* Level 4's post: the chain's root, count and the proof of its last leaf. */
static int plan_post_chunks(chain_narrow_move *out, const chain_narrow_game *g, const chain_narrow_party *p)
{
    if (!p->chunk_leaves)
        return 0; /* an old party: it posts nothing and loses by silence (docs/contract.md) */
    ovt_hash *leaves;
    size_t n;
    int rc = chunk_chain(&leaves, &n, g, p);
    if (rc != 0)
        return rc;
    if (ovt_tree_proof_len(n, n - 1, 1) > CHAIN_NARROW_MAX_CHAIN_PROOF)
        rc = ovt_fail(OVT_EINVAL, "narrowing: a chunk chain of %zu leaves is too long", n);
    if (rc == 0)
        rc = ovt_tree_proof(out->proof, &out->nproof, leaves, n, n - 1, 1);
    if (rc == 0)
        rc = node_at(&out->chain_root, leaves, n, 63, 0); /* level 63, node 0: the whole tree */
    free(leaves);
    if (rc == 0) {
        out->chain_count = n;
        out->kind = CHAIN_NARROW_MOVE_POST_CHUNKS;
    }
    return rc;
}

void chain_narrow_element_leaves(ovt_hash *leaves, const float *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ovt_tree_leaf_le32(&leaves[i], &values[i], 4);
}

/* The party's element leaves of the game's block (*leaves malloc'd): as
 * many as the contract counts (g->count), from values that hash to the
 * party's level-3 leaf as the contract kept it, else the tree is not of
 * this dispute's leaf and would lose at the arbiter. */
static int element_tree(ovt_hash **leaves, size_t *n, const chain_narrow_game *g, const chain_narrow_party *p)
{
    *leaves = NULL;
    if (!p->element_values)
        return ovt_fail(OVT_EINVAL, "narrowing: level 4 (site %llu has one value per row) needs the party's "
                                    "element_values, which it lacks", (unsigned long long)g->item);
    float *values = NULL;
    int rc = p->element_values(p->ctx, g->item, g->block, &values, n);
    if (rc != 0)
        return ovt_fail_wrap(rc, "narrowing: the elements of site %llu, block %llu", (unsigned long long)g->item,
                             (unsigned long long)g->block);
    const chain_narrow_side *own = p->is_trainer ? &g->trainer_side : &g->auditor_side;
    ovt_hash leaf;
    if (*n == 0 || *n > CHAIN_NARROW_LEAF_ELEMENTS)
        rc = ovt_fail(OVT_EINVAL, "narrowing: site %llu, block %llu has %zu elements: a leaf holds 1 to %u",
                      (unsigned long long)g->item, (unsigned long long)g->block, *n, CHAIN_NARROW_LEAF_ELEMENTS);
    if (rc == 0) {
        ovt_tree_leaf_le32(&leaf, values, *n * 4);
        if (memcmp(leaf.b, own->block_leaf.b, 32) != 0)
            rc = ovt_fail(OVT_EINVAL, "narrowing: the elements of site %llu, block %llu do not hash to the party's "
                                      "level-3 leaf on chain: the values and the output tree disagree",
                          (unsigned long long)g->item, (unsigned long long)g->block);
    }
    if (rc == 0 && !(*leaves = malloc(*n * sizeof **leaves)))
        rc = ovt_fail(OVT_ENOMEM, "out of memory for %zu element leaves", *n);
    if (rc == 0)
        chain_narrow_element_leaves(*leaves, values, *n);
    free(values);
    return rc;
}

/* Level 4's post of an element op: the root of the tree over the block's
 * elements. */
static int plan_post_elements(chain_narrow_move *out, const chain_narrow_game *g, const chain_narrow_party *p)
{
    if (!p->element_values)
        return 0; /* an old party: it posts nothing and loses by silence (docs/contract.md) */
    ovt_hash *leaves;
    size_t n;
    int rc = element_tree(&leaves, &n, g, p);
    if (rc == 0 && n != g->count)
        rc = ovt_fail(OVT_EINVAL, "narrowing: site %llu, block %llu has %zu elements, the contract counts %llu",
                      (unsigned long long)g->item, (unsigned long long)g->block, n, (unsigned long long)g->count);
    if (rc == 0)
        rc = node_at(&out->chain_root, leaves, n, 63, 0);
    free(leaves);
    if (rc == 0)
        out->kind = CHAIN_NARROW_MOVE_POST_ELEMENTS;
    return rc;
}

/* The children of the game's current node in the party's tree. */
static int plan_descend(chain_narrow_move *out, const chain_narrow_game *g, const chain_narrow_party *p)
{
    ovt_hash *owned = NULL;
    const ovt_hash *leaves = p->record_hashes;
    size_t n = p->nsites;
    int rc;
    if (g->stage == CHAIN_NARROW_STAGE_OUTPUT || g->stage == CHAIN_NARROW_STAGE_CHUNKS ||
        g->stage == CHAIN_NARROW_STAGE_ELEMENTS) {
        rc = g->stage == CHAIN_NARROW_STAGE_OUTPUT   ? p->output_leaves(p->ctx, g->item_stage, g->item, &owned, &n)
             : g->stage == CHAIN_NARROW_STAGE_CHUNKS ? chunk_chain(&owned, &n, g, p)
                                                     : element_tree(&owned, &n, g, p);
        if (rc != 0)
            return rc;
        leaves = owned;
    }
    if (n != g->count)
        rc = ovt_fail(OVT_EINVAL, "narrowing: the game bisects %llu leaves, the party's tree has %zu",
                      (unsigned long long)g->count, n);
    else if ((rc = node_at(&out->left, leaves, n, g->level - 1, 2 * g->index)) == 0)
        rc = node_at(&out->right, leaves, n, g->level - 1, 2 * g->index + 1);
    free(owned);
    if (rc == 0)
        out->kind = CHAIN_NARROW_MOVE_DESCEND;
    return rc;
}

int chain_narrow_plan_move(chain_narrow_move *out, const chain_narrow_game *g, const chain_narrow_party *p)
{
    memset(out, 0, sizeof *out);
    out->round = g->round;
    unsigned bit = p->is_trainer ? 1u : 2u;
    if (g->phase == CHAIN_NARROW_PHASE_POSTING && g->stage == CHAIN_NARROW_STAGE_CHUNKS)
        return (g->moved & bit) ? 0 : plan_post_chunks(out, g, p);
    if (g->phase == CHAIN_NARROW_PHASE_POSTING && g->stage == CHAIN_NARROW_STAGE_ELEMENTS)
        return (g->moved & bit) ? 0 : plan_post_elements(out, g, p);
    if (g->phase == CHAIN_NARROW_PHASE_NONE || g->phase == CHAIN_NARROW_PHASE_POSTING) {
        if (!(g->moved & bit))
            out->kind = CHAIN_NARROW_MOVE_POST;
        return 0;
    }
    if (g->phase == CHAIN_NARROW_PHASE_ENDED || (g->moved & bit))
        return 0;
    if (g->phase == CHAIN_NARROW_PHASE_DESCENDING)
        return plan_descend(out, g, p);
    if (g->stage == CHAIN_NARROW_STAGE_STATES) {
        if (p->other)
            out->kind = CHAIN_NARROW_MOVE_COMPARE;
        return 0;
    }
    if (g->index >= p->nsites)
        return ovt_fail(OVT_EINVAL, "narrowing: the game stands on site %llu, the party's trace has %zu",
                        (unsigned long long)g->index, p->nsites);
    out->kind = CHAIN_NARROW_MOVE_REVEAL;
    out->record = p->records[g->index];
    out->record_len = p->record_lens[g->index];
    return 0;
}

int chain_narrow_send_move(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, const chain_narrow_party *p,
                           const chain_narrow_move *mv, chain_receipt *receipt)
{
    if (receipt)
        memset(receipt, 0, sizeof *receipt);
    switch (mv->kind) {
    case CHAIN_NARROW_MOVE_NONE:
        return 0;
    case CHAIN_NARROW_MOVE_POST:
        return chain_narrow_post_trace(n, m, game_id, p->post, receipt);
    case CHAIN_NARROW_MOVE_DESCEND:
        return chain_narrow_descend(n, m, game_id, mv->round, &mv->left, &mv->right, receipt);
    case CHAIN_NARROW_MOVE_REVEAL:
        return chain_narrow_reveal(n, m, game_id, mv->round, mv->record, mv->record_len, receipt);
    case CHAIN_NARROW_MOVE_POST_CHUNKS:
        return chain_narrow_post_chunks(n, m, game_id, mv->round, &mv->chain_root, mv->chain_count, mv->proof,
                                        mv->nproof, receipt);
    case CHAIN_NARROW_MOVE_POST_ELEMENTS:
        return chain_narrow_post_elements(n, m, game_id, mv->round, &mv->chain_root, receipt);
    case CHAIN_NARROW_MOVE_COMPARE:
        return chain_narrow_compare_states(n, m, game_id, mv->round, p->is_trainer ? p->post : p->other,
                                           p->is_trainer ? p->other : p->post, receipt);
    }
    return ovt_fail(OVT_EINVAL, "unknown narrowing move kind %d", (int)mv->kind);
}
