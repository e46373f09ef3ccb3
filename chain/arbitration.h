#ifndef OVT_CHAIN_ARBITRATION_H
#define OVT_CHAIN_ARBITRATION_H

/* C bindings of the arbitration contract (chain/contracts/OvtArbitration.sol,
 * documented in docs/contract.md): the embedded bytecode, calldata for every
 * call, decoders for the views and for every event, the off-chain runId and
 * EIP-712 commitment digest, readable revert reasons, and (at the end) the
 * calls sent through the chain client's transaction manager (chain/txm.h). */

#include <stddef.h>
#include <stdint.h>

#include "chain/abi.h"
#include "chain/keys.h"
#include "chain/merkle.h"
#include "chain/rpc.h"
#include "chain/txm.h"
#include "chain/types.h"
#include "common/bytes.h"

/* The contract's creation bytecode (hex, no 0x) and ABI JSON, compiled from
 * the Solidity source by solcjs at build time. */
extern const char chain_arb_bytecode_hex[];
extern const size_t chain_arb_bytecode_hex_len;
extern const char chain_arb_abi_json[];
extern const size_t chain_arb_abi_json_len;

/* The contract's enum Phase. */
typedef enum {
    CHAIN_ARB_PHASE_NONE = 0,
    CHAIN_ARB_PHASE_COMMITTING,
    CHAIN_ARB_PHASE_BISECTING,
    CHAIN_ARB_PHASE_REVEALING,
    CHAIN_ARB_PHASE_AWAITING_VERDICT,
    CHAIN_ARB_PHASE_SETTLED
} chain_arb_phase;

/* The contract's enum Outcome. A verdict may only be TRAINER_RIGHT ..
 * INPUTS_UNAVAILABLE. */
typedef enum {
    CHAIN_ARB_NONE = 0,
    CHAIN_ARB_VERIFIED,
    CHAIN_ARB_TRAINER_RIGHT,
    CHAIN_ARB_AUDITOR_RIGHT,
    CHAIN_ARB_NEITHER,
    CHAIN_ARB_FRAUDULENT_LOG,
    CHAIN_ARB_INPUTS_UNAVAILABLE,
    CHAIN_ARB_TRAINER_TIMED_OUT,
    CHAIN_ARB_AUDITOR_TIMED_OUT,
    CHAIN_ARB_BOTH_TIMED_OUT,
    CHAIN_ARB_ARBITER_TIMED_OUT,
    CHAIN_ARB_UNCHALLENGED,
    CHAIN_ARB_TRAINER_ABSENT,
    CHAIN_ARB_NO_MAJORITY, /* a committee revealed m or more verdicts, no m of them agree */
    CHAIN_ARB_CANCELLED    /* nobody committed within commit_timeout of open: every bond paid in returned */
} chain_arb_outcome;

const char *chain_arb_phase_name(chain_arb_phase phase);
/* "verified", "trainer-right", ... ("?" for an unknown code). */
const char *chain_arb_outcome_name(chain_arb_outcome outcome);

/* GameView.flags bits: who moved in this round (phase), leaf j-1 proven,
 * and the game's kind: a challenge (challenge()), or a run with proof of
 * replay (commitReplay; docs/contract.md, "Proof of replay"). */
enum {
    CHAIN_ARB_FLAG_TRAINER = 1,
    CHAIN_ARB_FLAG_AUDITOR = 2,
    CHAIN_ARB_FLAG_PREVIOUS = 4,
    CHAIN_ARB_FLAG_CHALLENGE = 8,
    CHAIN_ARB_FLAG_REPLAY = 16
};

/* The most arbiters a run may name (the contract's MAX_ARBITERS). */
#define CHAIN_ARB_MAX_ARBITERS 5

/* The contract's RunParams: what open() takes. Bonds are uint96 in wei. */
typedef struct {
    chain_address trainer;
    chain_address auditor;
    /* The committee: n = the leading non-zero entries, the rest zero. A
     * one-arbiter run sets arbiters[0] only. */
    chain_address arbiters[CHAIN_ARB_MAX_ARBITERS];
    ovt_hash config_hash;
    ovt_hash dataset_hash;
    uint64_t steps;
    uint32_t commit_timeout; /* seconds for the first commit after open, and the second after the first */
    uint32_t move_timeout;
    uint32_t arbiter_timeout;
    chain_u256 trainer_bond;
    chain_u256 auditor_bond;
    unsigned threshold;      /* m, n/2 < m <= n; 0 here = a majority of n, filled in wherever params are
                                encoded (open, runId), since the contract takes m spelled out */
    chain_u256 arbiter_bond; /* wei each arbiter pays with accept(); 0: every named arbiter is seated */
    uint64_t nonce;
} chain_arb_params;

/* n: the leading non-zero arbiters. */
unsigned chain_arb_arbiter_count(const chain_arb_params *p);
/* The least m the contract takes for n arbiters: a bare majority, n/2 + 1. */
unsigned chain_arb_majority(unsigned n);
/* m as the encoder spells it out: threshold, or a majority when 0. */
unsigned chain_arb_threshold(const chain_arb_params *p);
/* The seat of who on p's committee, or -1. */
int chain_arb_seat(const chain_arb_params *p, const chain_address *who);

/* The contract's CommitteeView (getCommittee). Seat k is bit k of the masks. */
typedef struct {
    unsigned count;      /* n */
    unsigned threshold;  /* m */
    unsigned seated;     /* may vote: every seat with no arbiter bond, else those that accepted */
    unsigned committed;  /* sealed a ballot */
    unsigned revealed;   /* opened it (revealVerdict); a one-arbiter verdict() is not recorded here:
                            its outcome is getGame's, its evidence in VerdictGiven */
    uint64_t commit_deadline; /* AwaitingVerdict: ballots until then, reveals until the game's deadline */
    chain_arb_outcome outcomes[CHAIN_ARB_MAX_ARBITERS]; /* revealed, per seat */
    ovt_hash ballots[CHAIN_ARB_MAX_ARBITERS];           /* the sealed ballot, then the revealed evidence */
} chain_arb_committee;

/* The contract's GameView (getGame). */
typedef struct {
    chain_arb_phase phase;
    chain_arb_outcome outcome;
    unsigned round;
    unsigned depth;
    unsigned flags;
    uint64_t deadline;
    uint64_t index;
    ovt_hash trainer_root;
    ovt_hash auditor_root;
    ovt_hash trainer_node;
    ovt_hash auditor_node;
    ovt_hash previous_state;
    ovt_hash trainer_batch;
    ovt_hash trainer_log;
} chain_arb_game;

/* A run's proof of replay (the contract's replays(runId)): the beacon fixed
 * at the trainer's commitReplay, which picks the site, and the two site
 * roots (zero until posted). */
typedef struct {
    ovt_hash beacon;
    ovt_hash trainer_sites;
    ovt_hash auditor_sites;
} chain_arb_replay;

/* Whether g is in a replay dispute: a run with proof of replay whose roots
 * agree, bisecting over the two site trees, revealing or awaiting the
 * verdict on a site hash. */
int chain_arb_is_replay_dispute(const chain_arb_game *g);

/* The site a beacon picks among a step's nsites rounding sites: the beacon
 * as a big-endian integer modulo nsites (nsites > 0; ovt_hash_mod, which
 * the layers below chain use for the same choice). */
uint32_t chain_arb_site_index(const ovt_hash *beacon, uint32_t nsites);

/* Gas the bindings add to eth_estimateGas (after the txm margin) for commit,
 * bisect and revealLeaf, the calls that race the other party's call of the
 * same round. The estimate prices the chain as it is; if the other party's
 * call is mined first, the same call becomes the second of its round and
 * does more: the second commit opens the dispute (119k gas against 68k), the
 * second bisect descends (up to 55k against 44k), the second reveal opens
 * the verdict (92k against 71k). The 25% margin alone does not cover that
 * (an agent once ran out of gas in CI when the order flipped); 60,000 covers
 * the largest difference with room. Unused gas is refunded.
 * tests/contract/test_contract_game.c plays every round as such a race. */
#define CHAIN_ARB_RACE_GAS 60000u

/* The same for revealVerdict: the committee's last reveal settles the run
 * (every seated arbiter credited, one ArbiterSettled event each), which the
 * estimate of a reveal that was not the last did not price. */
#define CHAIN_ARB_REVEAL_GAS 250000u

/* --- off-chain derivations (each equals the contract's view of the same name) */

/* runId = keccak256(abi.encode(chainId, contract, RunParams)). */
void chain_arb_run_id(ovt_hash *out, uint64_t chain_id, const chain_address *contract, const chain_arb_params *p);

/* The EIP-712 digest of Commitment(bytes32 runId,bytes32 root,uint64 steps,
 * bytes32 configHash,bytes32 datasetHash) under the domain {name "ovt",
 * version "1", chain_id, contract}. */
void chain_arb_commitment_digest(ovt_hash *out, uint64_t chain_id, const chain_address *contract,
                                 const ovt_hash *run_id, const ovt_hash *root, const chain_arb_params *p);

/* Signs that digest: 65 bytes r || s || v (v = 27/28) as commit() takes. */
int chain_arb_sign_commitment(uint8_t sig[65], const chain_privkey *key, uint64_t chain_id,
                              const chain_address *contract, const ovt_hash *run_id, const ovt_hash *root,
                              const chain_arb_params *p) OVT_MUST_USE;

/* A challenge's game id: keccak256(abi.encode(runId, challenger)). */
void chain_arb_challenge_id(ovt_hash *out, const ovt_hash *run_id, const chain_address *challenger);

/* ballotHash: keccak256(abi.encode(runId, arbiter, step, outcome, evidence, salt)). */
void chain_arb_ballot_hash(ovt_hash *out, const ovt_hash *run_id, const chain_address *arbiter, uint64_t step,
                           chain_arb_outcome outcome, const ovt_hash *evidence, const ovt_hash *salt);

/* --- calldata. Each appends selector + arguments to out. */

int chain_arb_encode_open(chain_buf *out, const chain_arb_params *p) OVT_MUST_USE;
int chain_arb_encode_commit(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root,
                            const uint8_t sig[65]) OVT_MUST_USE;
int chain_arb_encode_bisect(chain_buf *out, const ovt_hash *run_id, unsigned round, const ovt_hash *left,
                            const ovt_hash *right) OVT_MUST_USE;
/* previous and proof matter only for the first reveal when the step is > 0;
 * proof holds nproof siblings, bottom up (nproof = depth). */
int chain_arb_encode_reveal_leaf(chain_buf *out, const ovt_hash *run_id, unsigned round,
                                 const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                                 const ovt_hash *proof, size_t nproof) OVT_MUST_USE;
int chain_arb_encode_verdict(chain_buf *out, const ovt_hash *run_id, uint64_t step, chain_arb_outcome outcome,
                             const ovt_hash *evidence) OVT_MUST_USE;
int chain_arb_encode_accept(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;
int chain_arb_encode_commit_verdict(chain_buf *out, const ovt_hash *run_id, const ovt_hash *ballot) OVT_MUST_USE;
int chain_arb_encode_reveal_verdict(chain_buf *out, const ovt_hash *run_id, uint64_t step, chain_arb_outcome outcome,
                                    const ovt_hash *evidence, const ovt_hash *salt) OVT_MUST_USE;
int chain_arb_encode_timeout(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;
/* extendVerdict(gameId, until): only the bound OvtNarrow may call it (tests
 * call it from an account an arbitration contract was deployed with). */
int chain_arb_encode_extend_verdict(chain_buf *out, const ovt_hash *game_id, uint64_t until) OVT_MUST_USE;
/* challenge(runId, root): an open challenge of the trainer's root (docs/contract.md). */
int chain_arb_encode_challenge(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root) OVT_MUST_USE;
/* refutedBy(runId): the game that proved the trainer's root wrong, or zero. */
int chain_arb_encode_refuted_by(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;
int chain_arb_encode_withdraw(chain_buf *out) OVT_MUST_USE;
/* Proof of replay: commitReplay(runId, root, sites, sig) (the trainer's sites
 * are ignored: zero), revealSites(runId, sites), and the replay dispute's
 * bottom move revealSite(runId, round, siteHash, leaf j, leaf j-1, proof):
 * proof holds leaf j's depth siblings, then leaf j-1's when j > 0. */
int chain_arb_encode_commit_replay(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root,
                                   const ovt_hash *sites, const uint8_t sig[65]) OVT_MUST_USE;
int chain_arb_encode_reveal_sites(chain_buf *out, const ovt_hash *run_id, const ovt_hash *sites) OVT_MUST_USE;
int chain_arb_encode_reveal_site(chain_buf *out, const ovt_hash *run_id, unsigned round, const ovt_hash *site_hash,
                                 const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                                 const ovt_hash *proof, size_t nproof) OVT_MUST_USE;
int chain_arb_encode_replays(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;

/* Views. */
int chain_arb_encode_get_run(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;
int chain_arb_encode_get_game(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;
int chain_arb_encode_get_committee(chain_buf *out, const ovt_hash *run_id) OVT_MUST_USE;
int chain_arb_encode_credit(chain_buf *out, const chain_address *account) OVT_MUST_USE;
int chain_arb_encode_compute_run_id(chain_buf *out, const chain_arb_params *p) OVT_MUST_USE;
int chain_arb_encode_commitment_digest(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root) OVT_MUST_USE;
int chain_arb_encode_leaf_hash(chain_buf *out, const ovt_hash *run_id, uint64_t index,
                               const chain_merkle_preimage *leaf) OVT_MUST_USE;
int chain_arb_encode_node_hash(chain_buf *out, const ovt_hash *left, const ovt_hash *right) OVT_MUST_USE;

/* Decoders of view results (the eth_call return data). getRun's result has
 * no nonce: out->nonce is set to 0. */
int chain_arb_decode_run(chain_arb_params *out, const uint8_t *data, size_t len) OVT_MUST_USE;
int chain_arb_decode_game(chain_arb_game *out, const uint8_t *data, size_t len) OVT_MUST_USE;
int chain_arb_decode_committee(chain_arb_committee *out, const uint8_t *data, size_t len) OVT_MUST_USE;
int chain_arb_decode_replay(chain_arb_replay *out, const uint8_t *data, size_t len) OVT_MUST_USE;
/* A single bytes32 or uint256 result. */
int chain_arb_decode_word(uint8_t out[32], const uint8_t *data, size_t len) OVT_MUST_USE;

/* --- events */

typedef enum {
    CHAIN_ARB_EV_RUN_OPENED = 0,
    CHAIN_ARB_EV_COMMITTED,
    CHAIN_ARB_EV_DISPUTE_OPENED,
    CHAIN_ARB_EV_CHILDREN_REVEALED,
    CHAIN_ARB_EV_DESCENDED,
    CHAIN_ARB_EV_STEP_FIXED,
    CHAIN_ARB_EV_LEAF_REVEALED,
    CHAIN_ARB_EV_PREVIOUS_LEAF_REVEALED,
    CHAIN_ARB_EV_VERDICT_DUE,
    CHAIN_ARB_EV_VERDICT_GIVEN,
    CHAIN_ARB_EV_TIMED_OUT,
    CHAIN_ARB_EV_SETTLED,
    CHAIN_ARB_EV_WITHDRAWN,
    CHAIN_ARB_EV_ARBITER_ACCEPTED,
    CHAIN_ARB_EV_VERDICT_COMMITTED,
    CHAIN_ARB_EV_VERDICT_REVEALED,
    CHAIN_ARB_EV_ARBITER_SETTLED,
    CHAIN_ARB_EV_CHALLENGE_OPENED,
    CHAIN_ARB_EV_REFUTED,
    CHAIN_ARB_EV_COUNT
} chain_arb_event_kind;

/* One decoded event. run_id is set for every kind but WITHDRAWN. */
typedef struct {
    chain_arb_event_kind kind;
    ovt_hash run_id;
    uint64_t block_number;
    ovt_hash tx_hash;
    uint64_t log_index;
    union {
        struct {
            chain_address trainer, auditor;
            chain_address arbiters[CHAIN_ARB_MAX_ARBITERS];
            unsigned threshold; /* m, resolved */
            chain_u256 arbiter_bond;
            ovt_hash config_hash, dataset_hash;
            uint64_t steps;
            unsigned depth;
            uint64_t nonce;
        } run_opened;
        struct {
            chain_address party;
            ovt_hash root;
            chain_u256 bond;
            uint64_t deadline; /* 0 when this commit completed the pair */
        } committed;
        struct {
            ovt_hash trainer_root, auditor_root;
            unsigned depth;
            uint64_t deadline;
        } dispute_opened;
        struct {
            chain_address party;
            unsigned round;
            ovt_hash left, right;
        } children_revealed;
        struct {
            unsigned round; /* the new round */
            uint64_t index;
            ovt_hash trainer_node, auditor_node;
            uint64_t deadline;
        } descended;
        struct {
            uint64_t step;
            ovt_hash trainer_leaf, auditor_leaf;
            uint64_t deadline; /* 0 when a padding position settled the run at once */
        } step_fixed;
        struct {
            chain_address party;
            uint64_t step;
            chain_merkle_preimage leaf;
        } leaf_revealed;
        struct {
            uint64_t step;
            chain_merkle_preimage leaf;
        } previous_leaf_revealed;
        struct {
            uint64_t step;
            uint64_t deadline;
        } verdict_due;
        struct {
            uint64_t step;
            chain_arb_outcome outcome;
            ovt_hash evidence;
        } verdict_given;
        struct {
            chain_arb_phase phase;
            unsigned round;
            unsigned moved; /* flag bits of the parties that had moved */
        } timed_out;
        struct {
            chain_arb_outcome outcome;
            chain_u256 trainer_credit, auditor_credit;
        } settled;
        struct {
            chain_address account;
            chain_u256 amount;
        } withdrawn;
        struct {
            chain_address arbiter;
            unsigned seat;
            chain_u256 bond;
        } arbiter_accepted;
        struct {
            chain_address arbiter;
            ovt_hash ballot;
        } verdict_committed;
        struct {
            chain_address arbiter;
            uint64_t step;
            chain_arb_outcome outcome;
            ovt_hash evidence;
        } verdict_revealed;
        struct {
            chain_address arbiter;
            chain_arb_outcome verdict; /* what it revealed (NONE: nothing) */
            chain_u256 forfeited;      /* its bond, lost; or 0 */
            chain_u256 reward;         /* its share of the others' forfeits */
        } arbiter_settled;
        struct {
            ovt_hash challenge_id; /* the challenge's game: a run id for getGame, bisect, ... */
            chain_address challenger;
            ovt_hash root;
            chain_u256 bond;
            uint64_t deadline;     /* its first bisection round's */
        } challenge_opened;
        struct {
            ovt_hash game_id;      /* the run itself (its auditor won) or a challenge of it */
            chain_arb_outcome outcome;
        } refuted;
    } u;
} chain_arb_event;

/* The Solidity signature of an event kind, e.g. "Settled(bytes32,uint8,uint256,uint256)". */
const char *chain_arb_event_signature(chain_arb_event_kind kind);
const char *chain_arb_event_name(chain_arb_event_kind kind);
/* topic0 of an event kind, for eth_getLogs filters. */
void chain_arb_event_topic(ovt_hash *out, chain_arb_event_kind kind);

/* Decodes a log of the contract. OVT_ENOTFOUND if topic0 is none of its
 * events, OVT_EFORMAT if it is one but malformed. */
int chain_arb_decode_event(chain_arb_event *out, const chain_log *log) OVT_MUST_USE;

/* --- reverts */

/* The contract's custom errors as Solidity signatures, NULL-terminated. */
extern const char *const chain_arb_errors[];

/* A readable reason for revert data ("BadChildren(0x..., 0x...)"). */
void chain_arb_describe_revert(char *out, size_t cap, const uint8_t *data, size_t len);

/* The name of the custom error in revert data ("BadChildren"), or "" if it is
 * none of the contract's. Writes at most cap bytes. */
void chain_arb_revert_name(char *out, size_t cap, const uint8_t *data, size_t len);

/* --- talking to a deployed contract (chain/arbitration_tx.c) */

/* The contract on one node. */
typedef struct {
    chain_rpc *rpc; /* borrowed */
    chain_address address;
    uint64_t chain_id;
} chain_arb;

/* Binds to the contract at address: reads the chain id and checks that there
 * is code at the address. */
int chain_arb_attach(chain_arb *arb, chain_rpc *rpc, const chain_address *address) OVT_MUST_USE;

/* Deploys the embedded bytecode from m's account and binds arb to the new
 * contract. narrow: the narrowing contract (OvtNarrow) that may extend its
 * verdict deadlines, whose CREATE address the caller has computed; NULL for
 * none (no narrowing can be bound to it). chain_narrow_deploy_pair deploys
 * both. receipt may be NULL; when given the caller frees it. */
int chain_arb_deploy(chain_arb *arb, chain_txm *m, const chain_address *narrow, chain_receipt *receipt) OVT_MUST_USE;
/* Deploys any embedded contract: its creation bytecode (hex) followed by
 * its ABI-encoded constructor arguments (args_len bytes; may be 0); what
 * names it in messages ("the arbitration contract"). chain_arb_deploy and
 * chain_narrow_deploy are this. */
int chain_arb_deploy_code(chain_arb *arb, chain_txm *m, const char *bytecode_hex, const uint8_t *args,
                          size_t args_len, const char *what, chain_receipt *receipt) OVT_MUST_USE;

/* Each call below sends one transaction from m's account and waits for its
 * receipt (m checks it with eth_call first: a call the contract would reject
 * fails with OVT_EREVERT and the error's name in the message, and nothing is
 * sent). receipt may be NULL; when given it is filled once mined (also for a
 * transaction mined as reverted) and the caller frees it. */

/* open(params); *run_id (may be NULL) is the id computed off chain, checked
 * against the RunOpened event. */
int chain_arb_open(const chain_arb *arb, chain_txm *m, const chain_arb_params *p, ovt_hash *run_id,
                   chain_receipt *receipt) OVT_MUST_USE;

/* commit(runId, root, sig) with the caller's bond (read from getRun). sig
 * NULL: signs the commitment with m's key (sig_out, if not NULL, gets it). */
int chain_arb_commit(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root,
                     const uint8_t sig[65], uint8_t sig_out[65], chain_receipt *receipt) OVT_MUST_USE;

int chain_arb_bisect(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, unsigned round,
                     const ovt_hash *left, const ovt_hash *right, chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_reveal_leaf(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, unsigned round,
                          const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                          const ovt_hash *proof, size_t nproof, chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_verdict(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, uint64_t step,
                      chain_arb_outcome outcome, const ovt_hash *evidence, chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_timeout(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id,
                      chain_receipt *receipt) OVT_MUST_USE;
/* accept(runId) with the run's arbiter bond (read from getRun). */
int chain_arb_accept(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_commit_verdict(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *ballot,
                             chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_reveal_verdict(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, uint64_t step,
                             chain_arb_outcome outcome, const ovt_hash *evidence, const ovt_hash *salt,
                             chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_withdraw(const chain_arb *arb, chain_txm *m, chain_receipt *receipt) OVT_MUST_USE;
/* challenge(runId, root) with the run's auditor bond (read from getRun);
 * *challenge_id (may be NULL) gets the game's id. */
int chain_arb_challenge(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root,
                        ovt_hash *challenge_id, chain_receipt *receipt) OVT_MUST_USE;

/* Proof of replay (docs/contract.md): commitReplay with the caller's bond
 * (sites: the auditor's site root; NULL for the trainer, whose commit fixes
 * the beacon), signing as chain_arb_commit does; the trainer's revealSites;
 * a replay dispute's revealSite (arguments as chain_arb_encode_reveal_site). */
int chain_arb_commit_replay(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root,
                            const ovt_hash *sites, uint8_t sig_out[65], chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_reveal_sites(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *sites,
                           chain_receipt *receipt) OVT_MUST_USE;
int chain_arb_reveal_site(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, unsigned round,
                          const ovt_hash *site_hash, const chain_merkle_preimage *leaf,
                          const chain_merkle_preimage *previous, const ovt_hash *proof, size_t nproof,
                          chain_receipt *receipt) OVT_MUST_USE;

/* Any calldata with a value (NULL: 0), for calls the helpers above do not
 * cover. */
int chain_arb_send(const chain_arb *arb, chain_txm *m, const chain_u256 *value, const chain_buf *calldata,
                   chain_receipt *receipt) OVT_MUST_USE;

/* Views with eth_call at block ("latest" when NULL; a fixed block for a
 * consistent read). An unknown run is OVT_EREVERT (UnknownRun). */
int chain_arb_get_run(const chain_arb *arb, const ovt_hash *run_id, const char *block,
                      chain_arb_params *out) OVT_MUST_USE;
int chain_arb_get_game(const chain_arb *arb, const ovt_hash *run_id, const char *block,
                       chain_arb_game *out) OVT_MUST_USE;
int chain_arb_credit(const chain_arb *arb, const chain_address *account, const char *block,
                     chain_u256 *out) OVT_MUST_USE;
/* refutedBy(runId): zero while no game has proved the trainer's root wrong. */
int chain_arb_refuted_by(const chain_arb *arb, const ovt_hash *run_id, const char *block, ovt_hash *out) OVT_MUST_USE;
int chain_arb_get_committee(const chain_arb *arb, const ovt_hash *run_id, const char *block,
                            chain_arb_committee *out) OVT_MUST_USE;
/* replays(runId): all zero for a run without proof of replay. */
int chain_arb_get_replay(const chain_arb *arb, const ovt_hash *run_id, const char *block,
                         chain_arb_replay *out) OVT_MUST_USE;

/* A run's terms, its game and its committee (c may be NULL) as of one
 * block: the head, read first (*block). */
int chain_arb_read_at_head(const chain_arb *arb, const ovt_hash *run_id, uint64_t *block, chain_arb_params *p,
                           chain_arb_game *g, chain_arb_committee *c) OVT_MUST_USE;

/* Decodes this contract's events in a receipt (logs of other contracts are
 * skipped). *events is malloc'd (free()); *n may be 0. */
int chain_arb_receipt_events(const chain_arb *arb, const chain_receipt *receipt, chain_arb_event **events,
                             size_t *n) OVT_MUST_USE;

/* This contract's events in blocks [from_block, to_block], of one run when
 * run_id is not NULL (Withdrawn events have no run and are then left out). */
int chain_arb_get_events(const chain_arb *arb, const ovt_hash *run_id, uint64_t from_block, uint64_t to_block,
                         chain_arb_event **events, size_t *n) OVT_MUST_USE;

/* Sets p->nonce (getRun has none) from the run's RunOpened event, found by
 * scanning eth_getLogs windows back from the latest block (at most 2M
 * blocks), and checked: p's terms with that nonce must derive run_id. */
int chain_arb_find_nonce(const chain_arb *arb, const ovt_hash *run_id, chain_arb_params *p) OVT_MUST_USE;

/* --- one party's side of the game */

/* Gives the preimage of leaf `index` of the caller's own run history. */
typedef int (*chain_arb_preimage_fn)(void *ctx, uint64_t index, chain_merkle_preimage *out);

/* The move due from one party (is_trainer: trainer, else auditor) in game g
 * (as read with chain_arb_get_game), computed from its own tree: */
typedef enum {
    CHAIN_ARB_MOVE_NONE = 0,
    CHAIN_ARB_MOVE_BISECT,
    CHAIN_ARB_MOVE_REVEAL,
    CHAIN_ARB_MOVE_REVEAL_SITE /* a replay dispute's bottom move (revealSite) */
} chain_arb_move_kind;
typedef struct {
    chain_arb_move_kind kind;
    unsigned round;
    ovt_hash left, right;              /* BISECT */
    uint64_t step;                     /* REVEAL: j */
    chain_merkle_preimage leaf;        /* REVEAL: the preimage of leaf j (REVEAL_SITE: the run's leaf j) */
    chain_merkle_preimage previous;    /* REVEAL: the preimage of leaf j-1 (j > 0) */
    ovt_hash proof[128];               /* REVEAL: proof of leaf j-1, depth siblings (REVEAL_SITE: leaf j's,
                                          then leaf j-1's) */
    unsigned nproof;
    ovt_hash site_hash;                /* REVEAL_SITE: the party's site hash of step j */
} chain_arb_move;

/* A pure function of the game: NONE when the party has already moved this
 * round or nothing is due from it. Fails if the tree does not fit the game
 * (its root is not the party's committed root). run_id: the id the leaves
 * are hashed with, the run's (also in a challenge of it, whose game has
 * its own id). */
int chain_arb_plan_move(chain_arb_move *out, const ovt_hash *run_id, const chain_arb_game *g, int is_trainer,
                        const chain_merkle *tree, chain_arb_preimage_fn preimage, void *ctx) OVT_MUST_USE;

/* The same in a replay dispute (chain_arb_is_replay_dispute): the party's
 * site tree (its root the party's site root in r) and site hashes (one per
 * leaf, steps + 1), and the run's tree and preimages, whose leaves j and
 * j-1 the first reveal proves. */
int chain_arb_plan_site_move(chain_arb_move *out, const ovt_hash *run_id, const chain_arb_game *g,
                             const chain_arb_replay *r, int is_trainer, const chain_merkle *sites,
                             const ovt_hash *site_hashes, const chain_merkle *tree, chain_arb_preimage_fn preimage,
                             void *ctx) OVT_MUST_USE;

/* Sends a planned move (nothing for NONE). */
int chain_arb_send_move(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const chain_arb_move *move,
                        chain_receipt *receipt) OVT_MUST_USE;

#endif
