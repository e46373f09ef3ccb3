#ifndef OVT_CHAIN_NARROW_H
#define OVT_CHAIN_NARROW_H

/* C bindings of the narrowing contract (chain/contracts/OvtNarrow.sol,
 * docs/contract.md, "Narrowing a step"): once the step game has fixed step
 * K, the parties bisect the step's trace to one site (level 2), that
 * site's output tree to one 64 KiB block (level 3) and, when the site sums
 * over the batch (a chunk op), that block's chunk chain to one 128-row
 * chunk (level 4, docs/contract.md "Level 4"). The embedded bytecode,
 * the calldata of every call, the getNarrow view, the calls sent through
 * the transaction manager (chain/txm.h), and readable reverts. */

#include <stddef.h>
#include <stdint.h>

#include "chain/arbitration.h"

extern const char chain_narrow_bytecode_hex[];
extern const size_t chain_narrow_bytecode_hex_len;
extern const char chain_narrow_abi_json[];
extern const size_t chain_narrow_abi_json_len;

/* The contract's enums. */
typedef enum {
    CHAIN_NARROW_PHASE_NONE = 0,
    CHAIN_NARROW_PHASE_POSTING,
    CHAIN_NARROW_PHASE_DESCENDING,
    CHAIN_NARROW_PHASE_REVEALING,
    CHAIN_NARROW_PHASE_ENDED
} chain_narrow_phase;

typedef enum {
    CHAIN_NARROW_STAGE_NONE = 0,
    CHAIN_NARROW_STAGE_TRACE,  /* level 2 over the trace's record hashes */
    CHAIN_NARROW_STAGE_STATES, /* level 2 when the traces agree: the first state K root that differs */
    CHAIN_NARROW_STAGE_OUTPUT, /* level 3 over the found item's output tree */
    CHAIN_NARROW_STAGE_CHUNKS, /* level 4 over the found block's chunk chain (a chunk op's site) */
    CHAIN_NARROW_STAGE_ELEMENTS /* level 4 over the found block's elements (an element op's site: one value a row) */
} chain_narrow_stage;

/* The contract's Reason for a chunk chain that loses (Lost event): under 2
 * leaves, or a proof that does not end in the party's level-3 leaf. */
#define CHAIN_NARROW_REASON_BAD_CHAIN 8

typedef enum {
    CHAIN_NARROW_NONE = 0,
    CHAIN_NARROW_NARROWED,      /* one block found */
    CHAIN_NARROW_ITEMS_DIFFER,  /* the records (entries) differ apart from the output root */
    CHAIN_NARROW_COUNTS_DIFFER, /* the traces' site counts differ */
    CHAIN_NARROW_INPUTS_DIFFER, /* the leaves K disagree on batchHash or logHash */
    CHAIN_NARROW_TRAINER_LOST,
    CHAIN_NARROW_AUDITOR_LOST,
    CHAIN_NARROW_BOTH_SILENT,
    CHAIN_NARROW_ELEMENTS_AGREE /* level 4: both element roots equal: the arbiter rules from the block packages */
} chain_narrow_outcome;

/* A level-3 leaf's elements: 16384 float32 (the output's last leaf fewer). */
#define CHAIN_NARROW_LEAF_ELEMENTS 16384u

/* Whether an ended game leaves the arbiter a block to recompute: Narrowed,
 * or ElementsAgree (the element trees proved nothing, so the level-3 leaf's
 * block decides, from its packages named by the parties' level-3 nodes). */
static inline int chain_narrow_ends_on_block(chain_narrow_outcome o)
{
    return o == CHAIN_NARROW_NARROWED || o == CHAIN_NARROW_ELEMENTS_AGREE;
}

/* The contract's NO_BLOCK: the end state's block when no block was found. */
#define CHAIN_NARROW_NO_BLOCK UINT64_MAX

/* One party's side of the game (Game.t, Game.a). */
typedef struct {
    ovt_hash state_hash, trace_root;
    ovt_hash states_hash; /* keccak256 of its state K roots and sizes as posted (abi.encodePacked) */
    ovt_hash node;   /* the current node; the leaf once found */
    ovt_hash header; /* keccak256 of the revealed item with its root zeroed */
    ovt_hash claim;  /* the revealed item's output root */
    uint64_t sites, elements;
    ovt_hash block_leaf; /* level 4: the party's level-3 leaf (its node when level 3 ended) */
    ovt_hash chain_root; /* level 4: its posted chunk chain's root, or element tree's root (stage ELEMENTS) */
    uint64_t chunks;     /* level 4: its chain's leaf count, C + 1 (0: not posted) */
} chain_narrow_side;

/* getNarrow: the whole game, its end state once phase is ENDED. */
typedef struct {
    chain_address trainer, auditor, last_mover;
    uint64_t deadline;
    chain_narrow_phase phase;
    chain_narrow_stage stage, item_stage;
    chain_narrow_outcome outcome;
    unsigned moved, round, prev_count, level;
    uint32_t move_timeout;
    uint64_t step, count, index, item, block;
    uint64_t chunk; /* level 4: the chain leaf found (c < C a chunk, C the final step), or the element */
    ovt_hash op; /* the record's op name, zero padded (first 32 bytes) */
    ovt_hash config_hash, previous_state, batch_hash, log_hash;
    ovt_hash trainer_leaf, auditor_leaf, tree_id, pending_left, pending_right;
    chain_narrow_side trainer_side, auditor_side;
} chain_narrow_game;

/* A party's trace commitment (postTrace): its leaf K preimage, its trace
 * root and site count, the agreed state K-1's tensor roots (the first post;
 * may be empty after), its state K's 3*ntensors roots and the ntensors
 * tensor sizes in elements (the tensor trees' lengths). */
typedef struct {
    chain_merkle_preimage leaf;
    ovt_hash trace_root;
    uint64_t sites;
    const ovt_hash *previous_roots;
    size_t nprevious;
    const ovt_hash *roots;
    size_t nroots;
    const uint64_t *sizes;
    size_t nsizes;
} chain_narrow_post;

/* Calldata. */
int chain_narrow_encode_start(chain_buf *out, const ovt_hash *game_id) OVT_MUST_USE;
int chain_narrow_encode_post(chain_buf *out, const ovt_hash *game_id, const chain_narrow_post *p) OVT_MUST_USE;
int chain_narrow_encode_descend(chain_buf *out, const ovt_hash *game_id, unsigned round, const ovt_hash *left,
                                const ovt_hash *right) OVT_MUST_USE;
int chain_narrow_encode_reveal(chain_buf *out, const ovt_hash *game_id, unsigned round, const uint8_t *item,
                               size_t len) OVT_MUST_USE;
int chain_narrow_encode_compare_states(chain_buf *out, const ovt_hash *game_id, unsigned round,
                                       const chain_narrow_post *trainer, const chain_narrow_post *auditor) OVT_MUST_USE;
/* postChunks: the chain's root, its leaf count and the proof of its last
 * leaf (left siblings, bottom up: ovt_tree_proof of leaf count - 1). */
int chain_narrow_encode_post_chunks(chain_buf *out, const ovt_hash *game_id, unsigned round, const ovt_hash *root,
                                    uint64_t count, const ovt_hash *proof, size_t nproof) OVT_MUST_USE;
/* postElements: the root of the tree over the block's elements (leaf i =
 * SHA-256(0x00 || element i as 4 bytes little endian)). */
int chain_narrow_encode_post_elements(chain_buf *out, const ovt_hash *game_id, unsigned round,
                                      const ovt_hash *root) OVT_MUST_USE;
int chain_narrow_encode_timeout(chain_buf *out, const ovt_hash *game_id) OVT_MUST_USE;
int chain_narrow_encode_get(chain_buf *out, const ovt_hash *game_id) OVT_MUST_USE;
int chain_narrow_decode_game(chain_narrow_game *out, const uint8_t *data, size_t len) OVT_MUST_USE;

/* The custom errors' signatures (NULL-terminated), and the name of the one
 * revert data carries ("" if none of them). */
extern const char *const chain_narrow_errors[];
void chain_narrow_revert_name(char *out, size_t cap, const uint8_t *data, size_t len);

/* The contract on one node (the same shape as chain_arb). */
typedef chain_arb chain_narrow;

/* Deploys the embedded bytecode bound to the arbitration contract at
 * `arbitration` (its constructor argument), which must have been deployed
 * with this contract's address (the constructor checks it: OVT_EREVERT,
 * NotNarrow, and nothing sent, otherwise). */
int chain_narrow_deploy(chain_narrow *n, chain_txm *m, const chain_address *arbitration,
                        chain_receipt *receipt) OVT_MUST_USE;

/* Deploys the two contracts bound to each other from m's account: the
 * arbitration contract with its next nonce N, given the address OvtNarrow
 * will have at N + 1, then OvtNarrow at N + 1 (docs/contract.md, "Narrowing
 * a step"). Fails with a message saying to deploy anew when another
 * transaction of the account took either nonce. Receipts may be NULL; when
 * given the caller frees them. */
int chain_narrow_deploy_pair(chain_arb *arb, chain_narrow *n, chain_txm *m, chain_receipt *arb_receipt,
                             chain_receipt *narrow_receipt) OVT_MUST_USE;

/* Checks that `address` holds an OvtNarrow bound to the arbitration
 * contract arb (its arbitration() is arb->address; the other direction
 * its constructor checked): what `--narrow ADDRESS` of the agents and the
 * arbiter must name. OVT_EINVAL saying which address to give otherwise
 * (no code there, not OvtNarrow, or another deployment's). */
int chain_narrow_check_bound(const chain_arb *arb, const chain_address *address) OVT_MUST_USE;

/* One transaction each (receipt may be NULL). A move its own commitments
 * contradict is mined and loses the game: it does not revert. */
int chain_narrow_start(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, chain_receipt *receipt) OVT_MUST_USE;
int chain_narrow_post_trace(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, const chain_narrow_post *p,
                            chain_receipt *receipt) OVT_MUST_USE;
int chain_narrow_descend(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                         const ovt_hash *left, const ovt_hash *right, chain_receipt *receipt) OVT_MUST_USE;
int chain_narrow_reveal(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                        const uint8_t *item, size_t len, chain_receipt *receipt) OVT_MUST_USE;
/* compareStates: both parties' roots and sizes as posted (their posts'
 * roots and sizes; anyone may send it). */
int chain_narrow_compare_states(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                                const chain_narrow_post *trainer, const chain_narrow_post *auditor,
                                chain_receipt *receipt) OVT_MUST_USE;
int chain_narrow_post_chunks(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                            const ovt_hash *root, uint64_t count, const ovt_hash *proof, size_t nproof,
                            chain_receipt *receipt) OVT_MUST_USE;
int chain_narrow_post_elements(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                               const ovt_hash *root, chain_receipt *receipt) OVT_MUST_USE;
int chain_narrow_timeout(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, chain_receipt *receipt) OVT_MUST_USE;

/* getNarrow at block (NULL: latest). */
int chain_narrow_get(const chain_narrow *n, const ovt_hash *game_id, const char *block,
                     chain_narrow_game *out) OVT_MUST_USE;

/* Why a party lost (the Lost event's reason, the contract's enum Reason). */
typedef enum {
    CHAIN_NARROW_REASON_NONE = 0, /* no Lost event in the range read */
    CHAIN_NARROW_REASON_TIMEOUT,  /* it missed a deadline */
    CHAIN_NARROW_REASON_BAD_LEAF,
    CHAIN_NARROW_REASON_BAD_PREVIOUS,
    CHAIN_NARROW_REASON_BAD_ROOTS,
    CHAIN_NARROW_REASON_BAD_TRACE,
    CHAIN_NARROW_REASON_BAD_CHILDREN,
    CHAIN_NARROW_REASON_BAD_ITEM
} chain_narrow_reason;

/* The evidence's default window: the widest block range one eth_getLogs asks for. */
#define CHAIN_NARROW_LOG_WINDOW 10000u

/* What an arbiter needs beyond getNarrow, from the game's events: the
 * agreed state K-1's tensor roots (PreviousRoots), against which a block's
 * state reads are proved, and the two records revealed at level 2
 * (ItemRevealed), whose reads name the block's other inputs, and why a party
 * lost (Lost). Read back
 * from to_block in windows of `window` blocks (0: CHAIN_NARROW_LOG_WINDOW;
 * a public node refuses long ranges: a window it refuses is halved, and the
 * rest read at the size it took), down to the game's latest NarrowStarted event
 * (the narrowing's start: the events before it are none of this
 * narrowing's) or from_block when none is found. Everything malloc'd. */
typedef struct {
    ovt_hash *previous_roots;
    size_t nprevious;            /* 0: not posted in that range */
    chain_narrow_reason lost;    /* why a party lost (outcome TrainerLost/AuditorLost), from Lost */
    uint8_t *record[2];          /* [0] the trainer's, [1] the auditor's; NULL: none revealed */
    size_t record_len[2];
    uint64_t start_block;        /* the NarrowStarted event's block; UINT64_MAX: not found down to from_block */
    uint64_t window;             /* the range the node took: the window asked for, less after a refusal */
    unsigned windows;            /* the windows read */
} chain_narrow_evidence;

int chain_narrow_get_evidence(const chain_narrow *n, const ovt_hash *game_id, const chain_narrow_game *g,
                              uint64_t from_block, uint64_t to_block, uint64_t window,
                              chain_narrow_evidence *out) OVT_MUST_USE;
void chain_narrow_evidence_free(chain_narrow_evidence *e);

/* --- a party's moves (chain/narrow_plan.c) */

/* The leaf hashes of one output tree of the party's step K: of site `item`'s
 * output (stage TRACE) or of state root `item` (stage STATES, section *
 * ntensors + tensor); *leaves malloc'd, the caller frees it. */
typedef int (*chain_narrow_leaves_fn)(void *ctx, chain_narrow_stage item_stage, uint64_t item, ovt_hash **leaves,
                                      size_t *n);

/* Level 4: the party's C + 1 chunk-chain leaf hashes of output leaf `block`
 * of site `site` (docs/contract.md, "Level 4": leaf c < C the hash of the
 * prefix sums P_c, leaf C the block's output leaf hash); *leaves malloc'd,
 * the caller frees it. */
typedef int (*chain_narrow_chunks_fn)(void *ctx, uint64_t site, uint64_t block, ovt_hash **leaves, size_t *n);

/* Level 4 of an element op (one value per row): the party's float32 values
 * of output leaf `block` of site `site` (*n of them: 16384, fewer in the
 * output's last leaf); *values malloc'd, the caller frees it. The planner
 * checks they hash to the party's level-3 leaf and builds the element tree
 * (chain_narrow_element_leaves). */
typedef int (*chain_narrow_values_fn)(void *ctx, uint64_t site, uint64_t block, float **values, size_t *n);

/* The element tree's leaves of n float32 values: leaf i = SHA-256(0x00 ||
 * value i as 4 bytes little endian) (common/tree.h's leaf rule). */
void chain_narrow_element_leaves(ovt_hash *leaves, const float *values, size_t n);

/* What a party knows of its own step K, borrowed. */
typedef struct {
    int is_trainer;
    const chain_narrow_post *post;   /* its trace commitment */
    const chain_narrow_post *other;  /* the other party's post as it was sent (its calldata), for
                                        compareStates; NULL: the party leaves that call to the other */
    size_t nsites;
    const ovt_hash *record_hashes;   /* nsites: its trace's leaves */
    const uint8_t *const *records;   /* nsites encodings (docs/formats.md, "Step trace") */
    const size_t *record_lens;
    chain_narrow_leaves_fn output_leaves;
    chain_narrow_chunks_fn chunk_leaves; /* NULL: a party without level 4, which posts no chain and so
                                            loses a chunk op's dispute by silence */
    chain_narrow_values_fn element_values; /* NULL: a party without the element stage, which posts no
                                              element root and so loses an element op's dispute by silence */
    void *ctx;                           /* for every callback */
} chain_narrow_party;

typedef enum {
    CHAIN_NARROW_MOVE_NONE = 0, /* nothing due from the party now */
    CHAIN_NARROW_MOVE_POST,
    CHAIN_NARROW_MOVE_DESCEND,
    CHAIN_NARROW_MOVE_REVEAL,
    CHAIN_NARROW_MOVE_COMPARE,
    CHAIN_NARROW_MOVE_POST_CHUNKS,
    CHAIN_NARROW_MOVE_POST_ELEMENTS
} chain_narrow_move_kind;

/* The most hashes a chain's last-leaf proof holds: one per level. */
#define CHAIN_NARROW_MAX_CHAIN_PROOF 64

typedef struct {
    chain_narrow_move_kind kind;
    unsigned round;
    ovt_hash left, right;  /* DESCEND */
    const uint8_t *record; /* REVEAL: borrowed from the party */
    size_t record_len;
    ovt_hash chain_root;   /* POST_CHUNKS: the chain, its leaf count and its last leaf's proof;
                              POST_ELEMENTS: the element tree's root */
    uint64_t chain_count;
    ovt_hash proof[CHAIN_NARROW_MAX_CHAIN_PROOF];
    size_t nproof;
} chain_narrow_move;

/* The party's next move as a pure function of the game (as getNarrow read
 * it; a game not started yet has phase NONE and asks for the post) and its
 * own data: NONE once it has moved this round or the game has ended (or,
 * at level 4, when it has no chunk_leaves or element_values). Fails if its
 * data do not fit the game (a tree of another size, a chain whose last leaf
 * is not the party's level-3 leaf, element values that do not hash to it). */
int chain_narrow_plan_move(chain_narrow_move *out, const chain_narrow_game *g,
                           const chain_narrow_party *p) OVT_MUST_USE;

/* Sends a planned move (nothing for NONE). */
int chain_narrow_send_move(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, const chain_narrow_party *p,
                           const chain_narrow_move *mv, chain_receipt *receipt) OVT_MUST_USE;

#endif
