#ifndef OVT_TRAINER_STATE_PROOF_H
#define OVT_TRAINER_STATE_PROOF_H

/* A proof that a range of leaves of one tensor of a state is part of its
 * tree stateHash (docs/formats.md, "State and stateHash"): the leaf hashes,
 * the sibling hashes that climb the tensor's tree to its root
 * (common/tree.h), and every tensor root the stateHash combines. A
 * verifier holding the run config (which fixes every tensor's length) and
 * the stateHash (the run's steps.bin, its Merkle root on chain) checks it
 * offline; `ovt state-proof` writes and checks them. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "common/tree.h"
#include "trainer/config.h"
#include "trainer/layout.h"

typedef struct trn_state trn_state;

typedef struct {
    uint8_t config[TRN_CONFIG_ENC_MAX]; /* the run config's encoding */
    size_t config_len;
    uint64_t step;
    size_t digest;       /* section * ntensors + tensor (section 0 params, 1 m, 2 v) */
    size_t leaves_total; /* the tensor's leaves */
    size_t first, count; /* the leaf range [first, first + count) */
    ovt_hash *leaves;    /* count leaf hashes; owned */
    ovt_hash proof[OVT_TREE_MAX_PROOF];
    size_t proof_len;
    size_t ndigests; /* 3 * ntensors */
    ovt_hash roots[3 * TRN_MAX_TENSORS];
    ovt_hash state_hash;
} trn_state_proof;

/* The proof of leaves [first, first + count) of digest d of st, whose run
 * config must name the tree stateHash. OVT_EINVAL for a v1 state or a
 * range outside the tensor's leaves, OVT_ENOMEM. */
int trn_state_proof_make(trn_state_proof *out, const trn_state *st, size_t d, size_t first,
                         size_t count) OVT_MUST_USE;
void trn_state_proof_free(trn_state_proof *p);

/* Checks p by its config alone: the config decodes and names the tree,
 * the digest index and leaf count are its layout's, the leaves climb with
 * the proof to roots[digest], and the roots, configHash and step combine to
 * p->state_hash. 0, or OVT_EFORMAT saying which part failed. */
int trn_state_proof_check(const trn_state_proof *p) OVT_MUST_USE;

#endif
