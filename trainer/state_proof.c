/* Leaf-range proofs of a tree stateHash (state_proof.h). */
#include "trainer/state_hash.h"
#include "trainer/state_proof.h"

#include <stdlib.h>
#include <string.h>

#include "trainer/state.h"

void trn_state_proof_free(trn_state_proof *p)
{
    free(p->leaves);
    p->leaves = NULL;
}

/* Every leaf hash of digest d: n of them into *out (malloc'd). */
static int tensor_leaves(ovt_hash **out, size_t *n, const trn_state *st, size_t d)
{
    size_t bytes;
    const uint8_t *p = (const uint8_t *)trn_state_digest_words(st, d, &bytes);
    *n = ovt_tree_leaves(bytes);
    *out = malloc(*n * sizeof(ovt_hash));
    if (!*out)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaf hashes", *n);
    for (size_t i = 0; i < *n; i++) {
        size_t off = i * OVT_TREE_LEAF_BYTES, len = bytes - off;
        ovt_tree_leaf_le32(&(*out)[i], p + off, len < OVT_TREE_LEAF_BYTES ? len : OVT_TREE_LEAF_BYTES);
    }
    return 0;
}

int trn_state_proof_make(trn_state_proof *out, const trn_state *st, size_t d, size_t first, size_t count)
{
    memset(out, 0, sizeof *out);
    if (trn_config_state_hash(&st->config) != TRN_STATE_HASH_TREE)
        return ovt_fail(OVT_EINVAL, "the run's stateHash is version %u, one SHA-256 per tensor: only the tree "
                                    "(version %u) proves a part of a tensor", trn_config_state_hash(&st->config),
                        TRN_STATE_HASH_TREE);
    if (d >= 3 * st->layout.count)
        return ovt_fail(OVT_EINVAL, "tensor %zu: the state has %zu", d, 3 * st->layout.count);
    ovt_hash *all;
    size_t n;
    int rv = tensor_leaves(&all, &n, st, d);
    if (rv)
        return rv;
    if (count == 0 || first >= n || count > n - first) {
        free(all);
        return ovt_fail(OVT_EINVAL, "leaves %zu to %zu: the tensor has %zu (0 to %zu)", first, first + count - 1, n,
                        n - 1);
    }
    out->leaves = malloc(count * sizeof(ovt_hash));
    if (!out->leaves)
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu leaf hashes", count);
    if (!rv)
        rv = ovt_tree_proof(out->proof, &out->proof_len, all, n, first, count);
    if (!rv) {
        memcpy(out->leaves, all + first, count * sizeof(ovt_hash));
        out->config_len = trn_config_encode(out->config, &st->config);
        out->step = st->step;
        out->digest = d;
        out->leaves_total = n;
        out->first = first;
        out->count = count;
        out->ndigests = 3 * st->layout.count;
        trn_state_digests(out->roots, st);
        trn_state_hash_combine(&out->state_hash, TRN_STATE_HASH_TREE, &st->config_hash, st->step, st->layout.count,
                               out->roots);
    }
    free(all);
    if (rv)
        trn_state_proof_free(out);
    return rv;
}

int trn_state_proof_check(const trn_state_proof *p)
{
    trn_run_config rc;
    trn_layout l;
    if (trn_config_decode(&rc, p->config, p->config_len) || trn_layout_build(&l, &rc.model))
        return ovt_fail_wrap(OVT_EFORMAT, "the proof's run config");
    if (trn_config_state_hash(&rc) != TRN_STATE_HASH_TREE)
        return ovt_fail(OVT_EFORMAT, "the proof's run config names stateHash version %u, not the tree",
                        trn_config_state_hash(&rc));
    if (p->ndigests != 3 * l.count || p->digest >= p->ndigests)
        return ovt_fail(OVT_EFORMAT, "the proof has %zu roots and names tensor %zu; the config's layout has %zu",
                        p->ndigests, p->digest, 3 * l.count);
    size_t n = ovt_tree_leaves(l.t[p->digest % l.count].size * sizeof(float));
    if (p->leaves_total != n)
        return ovt_fail(OVT_EFORMAT, "the proof says tensor %s has %zu leaves; the config's layout gives %zu",
                        l.t[p->digest % l.count].name, p->leaves_total, n);
    if (!ovt_tree_verify(&p->roots[p->digest], n, p->first, p->count, p->leaves, p->proof, p->proof_len))
        return ovt_fail(OVT_EFORMAT, "leaves %zu to %zu of tensor %s do not climb to its root with this proof",
                        p->first, p->first + p->count - 1, l.t[p->digest % l.count].name);
    ovt_hash ch, sh;
    trn_config_hash(&ch, &rc);
    trn_state_hash_combine(&sh, TRN_STATE_HASH_TREE, &ch, p->step, l.count, p->roots);
    if (memcmp(sh.b, p->state_hash.b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "the tensor roots do not combine to the proof's stateHash");
    return 0;
}
