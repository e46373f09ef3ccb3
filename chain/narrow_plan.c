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

/* The children of the game's current node in the party's tree. */
static int plan_descend(chain_narrow_move *out, const chain_narrow_game *g, const chain_narrow_party *p)
{
    ovt_hash *owned = NULL;
    const ovt_hash *leaves = p->record_hashes;
    size_t n = p->nsites;
    int rc;
    if (g->stage == CHAIN_NARROW_STAGE_OUTPUT) {
        if ((rc = p->output_leaves(p->ctx, g->item_stage, g->item, &owned, &n)) != 0)
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
    case CHAIN_NARROW_MOVE_COMPARE:
        return chain_narrow_compare_states(n, m, game_id, mv->round, p->is_trainer ? p->post : p->other,
                                           p->is_trainer ? p->other : p->post, receipt);
    }
    return ovt_fail(OVT_EINVAL, "unknown narrowing move kind %d", (int)mv->kind);
}
