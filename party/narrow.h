#ifndef OVT_PARTY_NARROW_H
#define OVT_PARTY_NARROW_H

/* A party's side of the narrowing (docs/contract.md, "Narrowing a step";
 * docs/agent.md, "Narrowing"): once the step game has fixed step K, the
 * party re-executes step K of its run directory with the trace, and holds
 * what chain_narrow_plan_move needs (its trace commitment, the records,
 * the output trees of every site and of state K, a leaf's values for the
 * element stage) and what the arbiter asks
 * of it once the game ends at a block: that block's package
 * (arbiter/block_file.h), made in memory.
 *
 * The step is traced in check mode (every write kept): simple, and small for
 * the devnet's models; a party at scale re-runs the step for the package
 * instead (`ovt block pack`'s two passes). */

#include <stddef.h>
#include <stdint.h>

#include "arbiter/block_chunk.h"
#include "chain/narrow.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/fault.h"
#include "trainer/layout.h"
#include "trainer/state.h"

/* Testing only: how a lying party's chunk chain differs from its own. */
typedef enum {
    PARTY_CHAIN_HONEST = 0,
    PARTY_CHAIN_FORGED_MIDDLE, /* leaves c >= C/2 (c < C) altered; the count and leaf C kept */
    PARTY_CHAIN_EXTRA_LEAF     /* one leaf more at its head (C + 2 leaves); leaf C kept last */
} party_chain_forgery;

typedef struct {
    uint64_t step;
    trn_run_config config;
    krn_trace *trace;
    krn_rlog *log;           /* the trainer's rounding log of step K */
    trn_state *after;        /* state K as re-executed */
    size_t nsites;
    uint8_t **records;       /* nsites encodings (krn_trace_encode) */
    size_t *record_lens;
    ovt_hash *record_hashes; /* the trace's leaves */
    size_t ntensors;
    ovt_hash previous_roots[3 * TRN_MAX_TENSORS];
    ovt_hash roots[3 * TRN_MAX_TENSORS];
    uint64_t sizes[TRN_MAX_TENSORS];
    chain_narrow_post post;  /* points into this struct */
    /* level 4 (docs/contract.md "Level 4"): the chunk chain of one output
     * leaf of a batch-sum site, made once when the narrowing first asks */
    bool has_chain;
    uint64_t chain_site, chain_block;
    arb_chunk_chain chain;
    bool chain_differs;      /* the canonical chain's final leaf is not the party's own output leaf:
                                its output is wrong (for an honest party this cannot happen) */
    party_chain_forgery forge_chain; /* testing only: a chain posted other than made */
} party_narrow_step;

/* Re-executes step k >= 1 of the run in dir (its config.bin, steps.bin,
 * logs and checkpoints; data: the dataset) with the trace; leaf: the
 * party's own leaf K preimage, as it revealed it. A run directory with no
 * checkpoint at or before k-1 (an auditor's copy of the trainer's) gets
 * the initial state as checkpoint 0 first, when the config derives it
 * (no init_hash). fault (testing only, NULL: none): the step under that
 * fault, as a faulty trainer's hardware ran it. Fails if the re-executed
 * state K does not hash to leaf's stateHash (the party would lose its
 * post), naming both. */
int party_narrow_load(party_narrow_step *p, const char *dir, const char *data, uint64_t k,
                      const chain_merkle_preimage *leaf, const trn_fault *fault) OVT_MUST_USE;
void party_narrow_free(party_narrow_step *p);

/* The party for chain_narrow_plan_move: posts the previous roots only when
 * post_previous (the first to post; after that the contract ignores them).
 * Its chunk_leaves gives the chain arb_chunk_chain_from_trace makes from
 * the party's trace and log, its last leaf the party's own output leaf
 * (p->chain_differs says whether the canonical final step disagrees). */
chain_narrow_party party_narrow_party(party_narrow_step *p, int is_trainer, int post_previous);

/* The chunk package of chunk `chunk` of the chain of leaf `leaf` of site
 * `site`'s output (arbiter/block_file.h, version 2; *buf malloc'd): the
 * party's canonical chain, whatever chain it posted. */
int party_narrow_pack_chunk(const party_narrow_step *p, uint64_t site, uint64_t leaf, uint64_t chunk, uint8_t **buf,
                            size_t *len) OVT_MUST_USE;

/* The block package of leaf `leaf` of site `site`'s output (*buf malloc'd).
 * forge_entries (testing only: a lying packer): its log entries are not the
 * trainer's log's, one entry at the leaf's first element added (or, when
 * the log has one there, removed); the arbiter must round with the log's
 * (docs/arbiter.md, "Ruling on a narrowed step"). */
int party_narrow_pack(const party_narrow_step *p, uint64_t site, uint64_t leaf, bool forge_entries, uint8_t **buf,
                      size_t *len) OVT_MUST_USE;

/* The element package of element `element` (within the leaf) of leaf
 * `leaf` of site `site` (level 4 of a one-value-per-row site; *buf
 * malloc'd). */
int party_narrow_pack_element(const party_narrow_step *p, uint64_t site, uint64_t leaf, uint64_t element,
                              uint8_t **buf, size_t *len) OVT_MUST_USE;

#endif
