/* Calldata, view results, events and reverts of the arbitration contract
 * (see arbitration.h and docs/contract.md). */
#include "chain/arbitration.h"

#include <stdio.h>
#include <string.h>

#include "chain/eip712.h"
#include "chain/keccak.h"

#define PARAMS_TUPLE \
    "(address,address,address[5],bytes32,bytes32,uint64,uint32,uint32,uint32,uint96,uint96,uint8,uint96,uint64)"
#define LEAF_TUPLE "(bytes32,bytes32,bytes32)"

static const char commitment_type[] =
    "Commitment(bytes32 runId,bytes32 root,uint64 steps,bytes32 configHash,bytes32 datasetHash)";

const char *chain_arb_phase_name(chain_arb_phase phase)
{
    static const char *const names[] = {"none", "committing", "bisecting", "revealing", "awaiting-verdict",
                                        "settled"};
    return (unsigned)phase < sizeof names / sizeof names[0] ? names[phase] : "?";
}

const char *chain_arb_outcome_name(chain_arb_outcome outcome)
{
    static const char *const names[] = {
        "none",          "verified",           "trainer-right",      "auditor-right",
        "neither",       "fraudulent-log",     "inputs-unavailable", "trainer-timed-out",
        "auditor-timed-out", "both-timed-out", "arbiter-timed-out",  "unchallenged",
        "trainer-absent", "no-majority", "cancelled"};
    return (unsigned)outcome < sizeof names / sizeof names[0] ? names[outcome] : "?";
}

unsigned chain_arb_arbiter_count(const chain_arb_params *p)
{
    static const chain_address zero;
    unsigned n = 0;
    while (n < CHAIN_ARB_MAX_ARBITERS && !chain_address_eq(&p->arbiters[n], &zero))
        n++;
    return n;
}

unsigned chain_arb_majority(unsigned n)
{
    return n / 2 + 1;
}

unsigned chain_arb_threshold(const chain_arb_params *p)
{
    return p->threshold ? p->threshold : chain_arb_majority(chain_arb_arbiter_count(p));
}

int chain_arb_seat(const chain_arb_params *p, const chain_address *who)
{
    unsigned n = chain_arb_arbiter_count(p);
    for (unsigned k = 0; k < n; k++)
        if (chain_address_eq(&p->arbiters[k], who))
            return (int)k;
    return -1;
}

/* --- off-chain derivations */

static void put_params(chain_abi_enc *enc, const chain_arb_params *p)
{
    chain_abi_put_address(enc, &p->trainer);
    chain_abi_put_address(enc, &p->auditor);
    for (int k = 0; k < CHAIN_ARB_MAX_ARBITERS; k++)
        chain_abi_put_address(enc, &p->arbiters[k]);
    chain_abi_put_bytes32(enc, &p->config_hash);
    chain_abi_put_bytes32(enc, &p->dataset_hash);
    chain_abi_put_uint(enc, p->steps);
    chain_abi_put_uint(enc, p->commit_timeout);
    chain_abi_put_uint(enc, p->move_timeout);
    chain_abi_put_uint(enc, p->arbiter_timeout);
    chain_abi_put_u256(enc, &p->trainer_bond);
    chain_abi_put_u256(enc, &p->auditor_bond);
    chain_abi_put_uint(enc, chain_arb_threshold(p)); /* 0: a majority, as the contract needs m spelled out */
    chain_abi_put_u256(enc, &p->arbiter_bond);
    chain_abi_put_uint(enc, p->nonce);
}

/* keccak of the static words put into enc (all zero if an allocation
 * failed: such a hash matches nothing on chain). */
static void hash_words(ovt_hash *out, const chain_abi_enc *enc)
{
    if (enc->failed || enc->head.failed)
        memset(out, 0, sizeof *out);
    else
        chain_keccak256(out, enc->head.data, enc->head.len);
}

void chain_arb_run_id(ovt_hash *out, uint64_t chain_id, const chain_address *contract, const chain_arb_params *p)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_uint(&enc, chain_id);
    chain_abi_put_address(&enc, contract);
    put_params(&enc, p);
    hash_words(out, &enc);
    chain_abi_enc_free(&enc);
}

void chain_arb_commitment_digest(ovt_hash *out, uint64_t chain_id, const chain_address *contract,
                                 const ovt_hash *run_id, const ovt_hash *root, const chain_arb_params *p)
{
    ovt_hash domain, type_hash, struct_hash;
    chain_eip712_domain_separator(&domain, "ovt", "1", chain_id, contract);
    chain_eip712_type_hash(&type_hash, commitment_type);
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, &type_hash);
    chain_abi_put_bytes32(&enc, run_id);
    chain_abi_put_bytes32(&enc, root);
    chain_abi_put_uint(&enc, p->steps);
    chain_abi_put_bytes32(&enc, &p->config_hash);
    chain_abi_put_bytes32(&enc, &p->dataset_hash);
    hash_words(&struct_hash, &enc);
    chain_abi_enc_free(&enc);
    chain_eip712_digest(out, &domain, &struct_hash);
}

void chain_arb_ballot_hash(ovt_hash *out, const ovt_hash *run_id, const chain_address *arbiter, uint64_t step,
                           chain_arb_outcome outcome, const ovt_hash *evidence, const ovt_hash *salt)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, run_id);
    chain_abi_put_address(&enc, arbiter);
    chain_abi_put_uint(&enc, step);
    chain_abi_put_uint(&enc, (uint64_t)outcome);
    chain_abi_put_bytes32(&enc, evidence);
    chain_abi_put_bytes32(&enc, salt);
    hash_words(out, &enc);
    chain_abi_enc_free(&enc);
}

int chain_arb_sign_commitment(uint8_t sig[65], const chain_privkey *key, uint64_t chain_id,
                              const chain_address *contract, const ovt_hash *run_id, const ovt_hash *root,
                              const chain_arb_params *p)
{
    memset(sig, 0, 65);
    ovt_hash digest;
    chain_sig s;
    chain_arb_commitment_digest(&digest, chain_id, contract, run_id, root, p);
    int rc = chain_sign_hash(&s, key, &digest);
    if (rc != 0)
        return ovt_fail_wrap(rc, "signing the commitment");
    chain_sig_to_rsv(sig, &s);
    return 0;
}

/* --- calldata */

/* Finishes enc into out with the selector of signature, and frees enc. */
static int finish(chain_abi_enc *enc, chain_buf *out, const char *signature)
{
    return chain_abi_enc_call(enc, out, signature);
}

static void put_preimage(chain_abi_enc *enc, const chain_merkle_preimage *leaf)
{
    chain_abi_put_bytes32(enc, &leaf->state_hash);
    chain_abi_put_bytes32(enc, &leaf->batch_hash);
    chain_abi_put_bytes32(enc, &leaf->log_hash);
}

/* Starts the calldata of a game move: runId, then the round it answers. */
static int begin_move(chain_abi_enc *enc, const ovt_hash *run_id, unsigned round)
{
    chain_abi_enc_init(enc);
    if (round > 255)
        return ovt_fail(OVT_EINVAL, "round %u does not fit the contract's uint8", round);
    chain_abi_put_bytes32(enc, run_id);
    chain_abi_put_uint(enc, round);
    return 0;
}

int chain_arb_encode_open(chain_buf *out, const chain_arb_params *p)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    put_params(&enc, p);
    return finish(&enc, out, "open" "(" PARAMS_TUPLE ")");
}

int chain_arb_encode_compute_run_id(chain_buf *out, const chain_arb_params *p)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    put_params(&enc, p);
    return finish(&enc, out, "computeRunId" "(" PARAMS_TUPLE ")");
}

int chain_arb_encode_commit(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root, const uint8_t sig[65])
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, run_id);
    chain_abi_put_bytes32(&enc, root);
    chain_abi_put_bytes(&enc, sig, 65);
    return finish(&enc, out, "commit(bytes32,bytes32,bytes)");
}

int chain_arb_encode_commit_replay(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root,
                                   const ovt_hash *sites, const uint8_t sig[65])
{
    static const ovt_hash none;
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, run_id);
    chain_abi_put_bytes32(&enc, root);
    chain_abi_put_bytes32(&enc, sites ? sites : &none);
    chain_abi_put_bytes(&enc, sig, 65);
    return finish(&enc, out, "commitReplay(bytes32,bytes32,bytes32,bytes)");
}

int chain_arb_encode_bisect(chain_buf *out, const ovt_hash *run_id, unsigned round, const ovt_hash *left,
                            const ovt_hash *right)
{
    chain_abi_enc enc;
    int rc = begin_move(&enc, run_id, round);
    if (rc != 0)
        return rc;
    chain_abi_put_bytes32(&enc, left);
    chain_abi_put_bytes32(&enc, right);
    return finish(&enc, out, "bisect(bytes32,uint8,bytes32,bytes32)");
}

/* revealLeaf, or with site_hash revealSite: (runId, round, [siteHash,]
 * leaf, previous, proof). */
static int encode_reveal(chain_buf *out, const ovt_hash *run_id, unsigned round, const ovt_hash *site_hash,
                         const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                         const ovt_hash *proof, size_t nproof)
{
    static const chain_merkle_preimage none;
    chain_abi_enc enc;
    int rc = begin_move(&enc, run_id, round);
    if (rc != 0)
        return rc;
    if (site_hash)
        chain_abi_put_bytes32(&enc, site_hash);
    put_preimage(&enc, leaf ? leaf : &none);
    put_preimage(&enc, previous ? previous : &none);
    chain_abi_put_bytes32_array(&enc, proof, proof ? nproof : 0);
    return finish(&enc, out,
                  site_hash ? "revealSite(bytes32,uint8,bytes32," LEAF_TUPLE "," LEAF_TUPLE ",bytes32[])"
                            : "revealLeaf(bytes32,uint8," LEAF_TUPLE "," LEAF_TUPLE ",bytes32[])");
}

int chain_arb_encode_reveal_leaf(chain_buf *out, const ovt_hash *run_id, unsigned round,
                                 const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                                 const ovt_hash *proof, size_t nproof)
{
    return encode_reveal(out, run_id, round, NULL, leaf, previous, proof, nproof);
}

int chain_arb_encode_reveal_site(chain_buf *out, const ovt_hash *run_id, unsigned round, const ovt_hash *site_hash,
                                 const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                                 const ovt_hash *proof, size_t nproof)
{
    return encode_reveal(out, run_id, round, site_hash, leaf, previous, proof, nproof);
}

/* (runId, step, outcome, evidence): verdict's arguments, the head of revealVerdict's. */
static void put_verdict(chain_abi_enc *enc, const ovt_hash *run_id, uint64_t step, chain_arb_outcome outcome,
                        const ovt_hash *evidence)
{
    chain_abi_put_bytes32(enc, run_id);
    chain_abi_put_uint(enc, step);
    chain_abi_put_uint(enc, (uint64_t)outcome);
    chain_abi_put_bytes32(enc, evidence);
}

int chain_arb_encode_verdict(chain_buf *out, const ovt_hash *run_id, uint64_t step, chain_arb_outcome outcome,
                             const ovt_hash *evidence)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    put_verdict(&enc, run_id, step, outcome, evidence);
    return finish(&enc, out, "verdict(bytes32,uint64,uint8,bytes32)");
}

int chain_arb_encode_extend_verdict(chain_buf *out, const ovt_hash *game_id, uint64_t until)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_uint(&enc, until);
    return finish(&enc, out, "extendVerdict(bytes32,uint64)");
}

/* A call whose only argument is a runId. */
static int encode_run_call(chain_buf *out, const char *signature, const ovt_hash *run_id)
{
    return chain_abi_call_bytes32(out, signature, run_id);
}

int chain_arb_encode_accept(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "accept(bytes32)", run_id);
}

/* A call of two bytes32 arguments. */
static int encode_two_words(chain_buf *out, const char *signature, const ovt_hash *a, const ovt_hash *b)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, a);
    chain_abi_put_bytes32(&enc, b);
    return finish(&enc, out, signature);
}

int chain_arb_encode_commit_verdict(chain_buf *out, const ovt_hash *run_id, const ovt_hash *ballot)
{
    return encode_two_words(out, "commitVerdict(bytes32,bytes32)", run_id, ballot);
}

int chain_arb_encode_challenge(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root)
{
    return encode_two_words(out, "challenge(bytes32,bytes32)", run_id, root);
}

int chain_arb_encode_reveal_sites(chain_buf *out, const ovt_hash *run_id, const ovt_hash *sites)
{
    return encode_two_words(out, "revealSites(bytes32,bytes32)", run_id, sites);
}

int chain_arb_encode_replays(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "replays(bytes32)", run_id);
}

int chain_arb_is_replay_dispute(const chain_arb_game *g)
{
    return (g->flags & CHAIN_ARB_FLAG_REPLAY) && g->phase >= CHAIN_ARB_PHASE_BISECTING &&
           g->phase <= CHAIN_ARB_PHASE_AWAITING_VERDICT && memcmp(g->trainer_root.b, g->auditor_root.b, 32) == 0;
}

uint32_t chain_arb_site_index(const ovt_hash *beacon, uint32_t nsites)
{
    return ovt_hash_mod(beacon, nsites);
}

int chain_arb_encode_refuted_by(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "refutedBy(bytes32)", run_id);
}

void chain_arb_challenge_id(ovt_hash *out, const ovt_hash *run_id, const chain_address *challenger)
{
    uint8_t buf[64] = {0};
    memcpy(buf, run_id->b, 32);
    memcpy(buf + 44, challenger->b, 20);
    chain_keccak256(out, buf, sizeof buf);
}

int chain_arb_encode_reveal_verdict(chain_buf *out, const ovt_hash *run_id, uint64_t step, chain_arb_outcome outcome,
                                    const ovt_hash *evidence, const ovt_hash *salt)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    put_verdict(&enc, run_id, step, outcome, evidence);
    chain_abi_put_bytes32(&enc, salt);
    return finish(&enc, out, "revealVerdict(bytes32,uint64,uint8,bytes32,bytes32)");
}

int chain_arb_encode_get_committee(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "getCommittee(bytes32)", run_id);
}

int chain_arb_encode_timeout(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "timeout(bytes32)", run_id);
}

int chain_arb_encode_get_run(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "getRun(bytes32)", run_id);
}

int chain_arb_encode_get_game(chain_buf *out, const ovt_hash *run_id)
{
    return encode_run_call(out, "getGame(bytes32)", run_id);
}

int chain_arb_encode_withdraw(chain_buf *out)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    return finish(&enc, out, "withdraw()");
}

int chain_arb_encode_credit(chain_buf *out, const chain_address *account)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_address(&enc, account);
    return finish(&enc, out, "credit(address)");
}

int chain_arb_encode_commitment_digest(chain_buf *out, const ovt_hash *run_id, const ovt_hash *root)
{
    return encode_two_words(out, "commitmentDigest(bytes32,bytes32)", run_id, root);
}

int chain_arb_encode_leaf_hash(chain_buf *out, const ovt_hash *run_id, uint64_t index,
                               const chain_merkle_preimage *leaf)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, run_id);
    chain_abi_put_uint(&enc, index);
    put_preimage(&enc, leaf);
    return finish(&enc, out, "leafHash(bytes32,uint64," LEAF_TUPLE ")");
}

int chain_arb_encode_node_hash(chain_buf *out, const ovt_hash *left, const ovt_hash *right)
{
    return encode_two_words(out, "nodeHash(bytes32,bytes32)", left, right);
}

/* --- view results */

/* Reads word i as an unsigned integer of at most `bits` bits. */
static int get_uint_bits(const chain_abi_dec *dec, size_t i, unsigned bits, uint64_t *out)
{
    int rc = chain_abi_get_uint(dec, i, out);
    if (rc != 0)
        return rc;
    if (bits < 64 && *out >> bits != 0)
        return ovt_fail(OVT_EFORMAT, "ABI word %zu does not fit in uint%u", i, bits);
    return 0;
}

/* Reads word i as a uint96 into a u256. */
static int get_u96(const chain_abi_dec *dec, size_t i, chain_u256 *out)
{
    int rc = chain_abi_get_u256(dec, i, out);
    if (rc != 0)
        return rc;
    for (int k = 0; k < 20; k++)
        if (out->b[k] != 0)
            return ovt_fail(OVT_EFORMAT, "ABI word %zu does not fit in uint96", i);
    return 0;
}

#define TRY(expr)              \
    do {                       \
        int rc_ = (expr);      \
        if (rc_ != 0)          \
            return rc_;        \
    } while (0)

int chain_arb_decode_run(chain_arb_params *out, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    chain_abi_dec dec;
    chain_abi_dec_init(&dec, data, len);
    uint64_t v;
    TRY(chain_abi_get_address(&dec, 0, &out->trainer));
    TRY(chain_abi_get_address(&dec, 1, &out->auditor));
    for (size_t k = 0; k < CHAIN_ARB_MAX_ARBITERS; k++)
        TRY(chain_abi_get_address(&dec, 2 + k, &out->arbiters[k]));
    const size_t a = 2 + CHAIN_ARB_MAX_ARBITERS;
    TRY(chain_abi_get_bytes32(&dec, a, &out->config_hash));
    TRY(chain_abi_get_bytes32(&dec, a + 1, &out->dataset_hash));
    TRY(get_uint_bits(&dec, a + 2, 64, &out->steps));
    TRY(get_uint_bits(&dec, a + 3, 32, &v));
    out->commit_timeout = (uint32_t)v;
    TRY(get_uint_bits(&dec, a + 4, 32, &v));
    out->move_timeout = (uint32_t)v;
    TRY(get_uint_bits(&dec, a + 5, 32, &v));
    out->arbiter_timeout = (uint32_t)v;
    TRY(get_u96(&dec, a + 6, &out->trainer_bond));
    TRY(get_u96(&dec, a + 7, &out->auditor_bond));
    TRY(get_uint_bits(&dec, a + 8, 8, &v));
    out->threshold = (unsigned)v;
    return get_u96(&dec, a + 9, &out->arbiter_bond);
}

static int get_outcome(const chain_abi_dec *dec, size_t i, chain_arb_outcome *out);

int chain_arb_decode_committee(chain_arb_committee *out, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    chain_abi_dec dec;
    chain_abi_dec_init(&dec, data, len);
    uint64_t v;
    unsigned *small[] = {&out->count, &out->threshold, &out->seated, &out->committed, &out->revealed};
    for (size_t k = 0; k < 5; k++) {
        TRY(get_uint_bits(&dec, k, 8, &v));
        *small[k] = (unsigned)v;
    }
    if (out->count < 1 || out->count > CHAIN_ARB_MAX_ARBITERS)
        return ovt_fail(OVT_EFORMAT, "getCommittee: %u arbiters", out->count);
    TRY(get_uint_bits(&dec, 5, 64, &out->commit_deadline));
    for (size_t k = 0; k < CHAIN_ARB_MAX_ARBITERS; k++) {
        TRY(get_outcome(&dec, 6 + k, &out->outcomes[k]));
        TRY(chain_abi_get_bytes32(&dec, 6 + CHAIN_ARB_MAX_ARBITERS + k, &out->ballots[k]));
    }
    return 0;
}

int chain_arb_decode_game(chain_arb_game *out, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    chain_abi_dec dec;
    chain_abi_dec_init(&dec, data, len);
    uint64_t v;
    TRY(get_uint_bits(&dec, 0, 8, &v));
    if (v > CHAIN_ARB_PHASE_SETTLED)
        return ovt_fail(OVT_EFORMAT, "getGame: unknown phase %llu", (unsigned long long)v);
    out->phase = (chain_arb_phase)v;
    TRY(get_uint_bits(&dec, 1, 8, &v));
    if (v > CHAIN_ARB_CANCELLED)
        return ovt_fail(OVT_EFORMAT, "getGame: unknown outcome %llu", (unsigned long long)v);
    out->outcome = (chain_arb_outcome)v;
    TRY(get_uint_bits(&dec, 2, 8, &v));
    out->round = (unsigned)v;
    TRY(get_uint_bits(&dec, 3, 8, &v));
    out->depth = (unsigned)v;
    TRY(get_uint_bits(&dec, 4, 8, &v));
    out->flags = (unsigned)v;
    TRY(get_uint_bits(&dec, 5, 64, &out->deadline));
    TRY(get_uint_bits(&dec, 6, 64, &out->index));
    ovt_hash *hashes[] = {&out->trainer_root, &out->auditor_root,   &out->trainer_node, &out->auditor_node,
                          &out->previous_state, &out->trainer_batch, &out->trainer_log};
    for (size_t k = 0; k < sizeof hashes / sizeof hashes[0]; k++)
        TRY(chain_abi_get_bytes32(&dec, 7 + k, hashes[k]));
    return 0;
}

int chain_arb_decode_replay(chain_arb_replay *out, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    if (len != 96)
        return ovt_fail(OVT_EFORMAT, "replays: expected three 32-byte words, got %zu bytes", len);
    memcpy(out->beacon.b, data, 32);
    memcpy(out->trainer_sites.b, data + 32, 32);
    memcpy(out->auditor_sites.b, data + 64, 32);
    return 0;
}

int chain_arb_decode_word(uint8_t out[32], const uint8_t *data, size_t len)
{
    memset(out, 0, 32);
    if (len != 32)
        return ovt_fail(OVT_EFORMAT, "expected one 32-byte word, got %zu bytes", len);
    memcpy(out, data, 32);
    return 0;
}

/* --- events */

static const struct {
    const char *name;
    const char *signature;
    size_t nindexed; /* topics after topic0 */
} events[CHAIN_ARB_EV_COUNT] = {
    [CHAIN_ARB_EV_RUN_OPENED] = {"RunOpened",
                                 "RunOpened(bytes32,address,address,address[5],uint8,uint96,bytes32,bytes32,uint64,"
                                 "uint8,uint64)",
                                 3},
    [CHAIN_ARB_EV_COMMITTED] = {"Committed", "Committed(bytes32,address,bytes32,uint256,uint64)", 2},
    [CHAIN_ARB_EV_DISPUTE_OPENED] = {"DisputeOpened", "DisputeOpened(bytes32,bytes32,bytes32,uint8,uint64)", 1},
    [CHAIN_ARB_EV_CHILDREN_REVEALED] = {"ChildrenRevealed", "ChildrenRevealed(bytes32,address,uint8,bytes32,bytes32)",
                                        2},
    [CHAIN_ARB_EV_DESCENDED] = {"Descended", "Descended(bytes32,uint8,uint64,bytes32,bytes32,uint64)", 1},
    [CHAIN_ARB_EV_STEP_FIXED] = {"StepFixed", "StepFixed(bytes32,uint64,bytes32,bytes32,uint64)", 1},
    [CHAIN_ARB_EV_LEAF_REVEALED] = {"LeafRevealed", "LeafRevealed(bytes32,address,uint64,bytes32,bytes32,bytes32)",
                                    2},
    [CHAIN_ARB_EV_PREVIOUS_LEAF_REVEALED] = {"PreviousLeafRevealed",
                                             "PreviousLeafRevealed(bytes32,uint64,bytes32,bytes32,bytes32)", 1},
    [CHAIN_ARB_EV_VERDICT_DUE] = {"VerdictDue", "VerdictDue(bytes32,uint64,uint64)", 1},
    [CHAIN_ARB_EV_VERDICT_GIVEN] = {"VerdictGiven", "VerdictGiven(bytes32,uint64,uint8,bytes32)", 1},
    [CHAIN_ARB_EV_TIMED_OUT] = {"TimedOut", "TimedOut(bytes32,uint8,uint8,uint8)", 1},
    [CHAIN_ARB_EV_SETTLED] = {"Settled", "Settled(bytes32,uint8,uint256,uint256)", 1},
    [CHAIN_ARB_EV_WITHDRAWN] = {"Withdrawn", "Withdrawn(address,uint256)", 1},
    [CHAIN_ARB_EV_ARBITER_ACCEPTED] = {"ArbiterAccepted", "ArbiterAccepted(bytes32,address,uint8,uint256)", 2},
    [CHAIN_ARB_EV_VERDICT_COMMITTED] = {"VerdictCommitted", "VerdictCommitted(bytes32,address,bytes32)", 2},
    [CHAIN_ARB_EV_VERDICT_REVEALED] = {"VerdictRevealed", "VerdictRevealed(bytes32,address,uint64,uint8,bytes32)",
                                       2},
    [CHAIN_ARB_EV_ARBITER_SETTLED] = {"ArbiterSettled", "ArbiterSettled(bytes32,address,uint8,uint256,uint256)", 2},
    [CHAIN_ARB_EV_CHALLENGE_OPENED] = {"ChallengeOpened",
                                       "ChallengeOpened(bytes32,bytes32,address,bytes32,uint256,uint64)", 3},
    [CHAIN_ARB_EV_REFUTED] = {"Refuted", "Refuted(bytes32,bytes32,uint8)", 2},
};

const char *chain_arb_event_signature(chain_arb_event_kind kind)
{
    return (unsigned)kind < CHAIN_ARB_EV_COUNT ? events[kind].signature : "?";
}

const char *chain_arb_event_name(chain_arb_event_kind kind)
{
    return (unsigned)kind < CHAIN_ARB_EV_COUNT ? events[kind].name : "?";
}

void chain_arb_event_topic(ovt_hash *out, chain_arb_event_kind kind)
{
    chain_abi_event_topic(out, chain_arb_event_signature(kind));
}

/* An indexed address topic: the 12 high bytes must be zero. */
static int topic_address(chain_address *out, const ovt_hash *topic)
{
    for (int k = 0; k < 12; k++)
        if (topic->b[k] != 0)
            return ovt_fail(OVT_EFORMAT, "indexed address topic has non-zero high bytes");
    memcpy(out->b, topic->b + 12, 20);
    return 0;
}

static int get_small(const chain_abi_dec *dec, size_t i, unsigned *out)
{
    uint64_t v;
    TRY(get_uint_bits(dec, i, 8, &v));
    *out = (unsigned)v;
    return 0;
}

static int get_preimage(const chain_abi_dec *dec, size_t i, chain_merkle_preimage *out)
{
    TRY(chain_abi_get_bytes32(dec, i, &out->state_hash));
    TRY(chain_abi_get_bytes32(dec, i + 1, &out->batch_hash));
    return chain_abi_get_bytes32(dec, i + 2, &out->log_hash);
}

static int get_outcome(const chain_abi_dec *dec, size_t i, chain_arb_outcome *out)
{
    unsigned v;
    TRY(get_small(dec, i, &v));
    if (v > CHAIN_ARB_CANCELLED)
        return ovt_fail(OVT_EFORMAT, "unknown outcome %u", v);
    *out = (chain_arb_outcome)v;
    return 0;
}

static int decode_run_opened(chain_arb_event *ev, const chain_abi_dec *d)
{
    const size_t a = CHAIN_ARB_MAX_ARBITERS;
    for (size_t k = 0; k < a; k++)
        TRY(chain_abi_get_address(d, k, &ev->u.run_opened.arbiters[k]));
    TRY(get_small(d, a, &ev->u.run_opened.threshold));
    TRY(get_u96(d, a + 1, &ev->u.run_opened.arbiter_bond));
    TRY(chain_abi_get_bytes32(d, a + 2, &ev->u.run_opened.config_hash));
    TRY(chain_abi_get_bytes32(d, a + 3, &ev->u.run_opened.dataset_hash));
    TRY(get_uint_bits(d, a + 4, 64, &ev->u.run_opened.steps));
    TRY(get_small(d, a + 5, &ev->u.run_opened.depth));
    return get_uint_bits(d, a + 6, 64, &ev->u.run_opened.nonce);
}

/* The committee's events (an arbiter address in topic 2). */
static int decode_committee_event(chain_arb_event *ev, const chain_abi_dec *d, const chain_log *log)
{
    switch (ev->kind) {
    case CHAIN_ARB_EV_ARBITER_ACCEPTED:
        TRY(topic_address(&ev->u.arbiter_accepted.arbiter, &log->topics[2]));
        TRY(get_small(d, 0, &ev->u.arbiter_accepted.seat));
        return chain_abi_get_u256(d, 1, &ev->u.arbiter_accepted.bond);
    case CHAIN_ARB_EV_VERDICT_COMMITTED:
        TRY(topic_address(&ev->u.verdict_committed.arbiter, &log->topics[2]));
        return chain_abi_get_bytes32(d, 0, &ev->u.verdict_committed.ballot);
    case CHAIN_ARB_EV_VERDICT_REVEALED:
        TRY(topic_address(&ev->u.verdict_revealed.arbiter, &log->topics[2]));
        TRY(get_uint_bits(d, 0, 64, &ev->u.verdict_revealed.step));
        TRY(get_outcome(d, 1, &ev->u.verdict_revealed.outcome));
        return chain_abi_get_bytes32(d, 2, &ev->u.verdict_revealed.evidence);
    case CHAIN_ARB_EV_ARBITER_SETTLED:
        TRY(topic_address(&ev->u.arbiter_settled.arbiter, &log->topics[2]));
        TRY(get_outcome(d, 0, &ev->u.arbiter_settled.verdict));
        TRY(chain_abi_get_u256(d, 1, &ev->u.arbiter_settled.forfeited));
        return chain_abi_get_u256(d, 2, &ev->u.arbiter_settled.reward);
    default:
        return ovt_fail(OVT_EINVAL, "not a committee event: %d", (int)ev->kind);
    }
}

/* The data words of one event kind. */
static int decode_fields(chain_arb_event *ev, const chain_abi_dec *d, const chain_log *log)
{
    unsigned v;
    switch (ev->kind) {
    case CHAIN_ARB_EV_RUN_OPENED:
        TRY(topic_address(&ev->u.run_opened.trainer, &log->topics[2]));
        TRY(topic_address(&ev->u.run_opened.auditor, &log->topics[3]));
        return decode_run_opened(ev, d);
    case CHAIN_ARB_EV_COMMITTED:
        TRY(topic_address(&ev->u.committed.party, &log->topics[2]));
        TRY(chain_abi_get_bytes32(d, 0, &ev->u.committed.root));
        TRY(chain_abi_get_u256(d, 1, &ev->u.committed.bond));
        return get_uint_bits(d, 2, 64, &ev->u.committed.deadline);
    case CHAIN_ARB_EV_DISPUTE_OPENED:
        TRY(chain_abi_get_bytes32(d, 0, &ev->u.dispute_opened.trainer_root));
        TRY(chain_abi_get_bytes32(d, 1, &ev->u.dispute_opened.auditor_root));
        TRY(get_small(d, 2, &ev->u.dispute_opened.depth));
        return get_uint_bits(d, 3, 64, &ev->u.dispute_opened.deadline);
    case CHAIN_ARB_EV_CHILDREN_REVEALED:
        TRY(topic_address(&ev->u.children_revealed.party, &log->topics[2]));
        TRY(get_small(d, 0, &ev->u.children_revealed.round));
        TRY(chain_abi_get_bytes32(d, 1, &ev->u.children_revealed.left));
        return chain_abi_get_bytes32(d, 2, &ev->u.children_revealed.right);
    case CHAIN_ARB_EV_DESCENDED:
        TRY(get_small(d, 0, &ev->u.descended.round));
        TRY(get_uint_bits(d, 1, 64, &ev->u.descended.index));
        TRY(chain_abi_get_bytes32(d, 2, &ev->u.descended.trainer_node));
        TRY(chain_abi_get_bytes32(d, 3, &ev->u.descended.auditor_node));
        return get_uint_bits(d, 4, 64, &ev->u.descended.deadline);
    case CHAIN_ARB_EV_STEP_FIXED:
        TRY(get_uint_bits(d, 0, 64, &ev->u.step_fixed.step));
        TRY(chain_abi_get_bytes32(d, 1, &ev->u.step_fixed.trainer_leaf));
        TRY(chain_abi_get_bytes32(d, 2, &ev->u.step_fixed.auditor_leaf));
        return get_uint_bits(d, 3, 64, &ev->u.step_fixed.deadline);
    case CHAIN_ARB_EV_LEAF_REVEALED:
        TRY(topic_address(&ev->u.leaf_revealed.party, &log->topics[2]));
        TRY(get_uint_bits(d, 0, 64, &ev->u.leaf_revealed.step));
        return get_preimage(d, 1, &ev->u.leaf_revealed.leaf);
    case CHAIN_ARB_EV_PREVIOUS_LEAF_REVEALED:
        TRY(get_uint_bits(d, 0, 64, &ev->u.previous_leaf_revealed.step));
        return get_preimage(d, 1, &ev->u.previous_leaf_revealed.leaf);
    case CHAIN_ARB_EV_VERDICT_DUE:
        TRY(get_uint_bits(d, 0, 64, &ev->u.verdict_due.step));
        return get_uint_bits(d, 1, 64, &ev->u.verdict_due.deadline);
    case CHAIN_ARB_EV_VERDICT_GIVEN:
        TRY(get_uint_bits(d, 0, 64, &ev->u.verdict_given.step));
        TRY(get_outcome(d, 1, &ev->u.verdict_given.outcome));
        return chain_abi_get_bytes32(d, 2, &ev->u.verdict_given.evidence);
    case CHAIN_ARB_EV_TIMED_OUT:
        TRY(get_small(d, 0, &v));
        if (v > CHAIN_ARB_PHASE_SETTLED)
            return ovt_fail(OVT_EFORMAT, "TimedOut: unknown phase %u", v);
        ev->u.timed_out.phase = (chain_arb_phase)v;
        TRY(get_small(d, 1, &ev->u.timed_out.round));
        return get_small(d, 2, &ev->u.timed_out.moved);
    case CHAIN_ARB_EV_SETTLED:
        TRY(get_outcome(d, 0, &ev->u.settled.outcome));
        TRY(chain_abi_get_u256(d, 1, &ev->u.settled.trainer_credit));
        return chain_abi_get_u256(d, 2, &ev->u.settled.auditor_credit);
    case CHAIN_ARB_EV_WITHDRAWN:
        TRY(topic_address(&ev->u.withdrawn.account, &log->topics[1]));
        return chain_abi_get_u256(d, 0, &ev->u.withdrawn.amount);
    case CHAIN_ARB_EV_ARBITER_ACCEPTED:
    case CHAIN_ARB_EV_VERDICT_COMMITTED:
    case CHAIN_ARB_EV_VERDICT_REVEALED:
    case CHAIN_ARB_EV_ARBITER_SETTLED:
        return decode_committee_event(ev, d, log);
    case CHAIN_ARB_EV_CHALLENGE_OPENED:
        ev->u.challenge_opened.challenge_id = log->topics[2];
        TRY(topic_address(&ev->u.challenge_opened.challenger, &log->topics[3]));
        TRY(chain_abi_get_bytes32(d, 0, &ev->u.challenge_opened.root));
        TRY(chain_abi_get_u256(d, 1, &ev->u.challenge_opened.bond));
        return get_uint_bits(d, 2, 64, &ev->u.challenge_opened.deadline);
    case CHAIN_ARB_EV_REFUTED:
        ev->u.refuted.game_id = log->topics[2];
        return get_outcome(d, 0, &ev->u.refuted.outcome);
    case CHAIN_ARB_EV_COUNT:
        break;
    }
    return ovt_fail(OVT_EINVAL, "unknown event kind %d", (int)ev->kind);
}

int chain_arb_decode_event(chain_arb_event *out, const chain_log *log)
{
    memset(out, 0, sizeof *out);
    if (log->ntopics == 0)
        return ovt_fail(OVT_ENOTFOUND, "log has no topics: not an arbitration event");
    int kind = -1;
    for (int k = 0; k < CHAIN_ARB_EV_COUNT; k++) {
        ovt_hash topic;
        chain_arb_event_topic(&topic, (chain_arb_event_kind)k);
        if (memcmp(topic.b, log->topics[0].b, 32) == 0) {
            kind = k;
            break;
        }
    }
    if (kind < 0)
        return ovt_fail(OVT_ENOTFOUND, "log is not an arbitration event");
    chain_abi_dec dec;
    int rc = chain_abi_decode_log(&dec, log, events[kind].signature, events[kind].nindexed);
    if (rc != 0)
        return rc;
    out->kind = (chain_arb_event_kind)kind;
    out->block_number = log->block_number;
    out->tx_hash = log->tx_hash;
    out->log_index = log->log_index;
    if (out->kind != CHAIN_ARB_EV_WITHDRAWN)
        out->run_id = log->topics[1];
    rc = decode_fields(out, &dec, log);
    if (rc != 0) {
        int kind_saved = kind;
        memset(out, 0, sizeof *out);
        return ovt_fail_wrap(rc, "malformed %s event", events[kind_saved].name);
    }
    return 0;
}

/* --- reverts */

const char *const chain_arb_errors[] = {
    "UnknownRun(bytes32)",
    "RunExists(bytes32)",
    "BadParty()",
    "BadCommittee()",
    "BadThreshold(uint8,uint8)",
    "NotCommitted(address)",
    "RevealsNotOpen(uint64)",
    "BadBallot(bytes32,bytes32)",
    "CommitteeRun()",
    "SingleArbiterRun()",
    "BadSteps(uint64)",
    "BadTimeout()",
    "WrongPhase(uint8,uint8)",
    "NotParty(address)",
    "NotArbiter(address)",
    "AlreadyMoved(address)",
    "WrongRound(uint8,uint8)",
    "WrongBond(uint256,uint256)",
    "ZeroRoot()",
    "BadSignature(address)",
    "DeadlinePassed(uint64)",
    "NotExpired(uint64)",
    "BadChildren(bytes32,bytes32)",
    "BadLeaf(bytes32,bytes32)",
    "BadStepZero()",
    "BadProof(bytes32,bytes32)",
    "WrongStep(uint64,uint64)",
    "BadOutcome(uint8)",
    "VerdictContradictsLeaves(uint8,bytes32)",
    "NothingToWithdraw(address)",
    "TransferFailed(address,uint256)",
    "ChallengesClosed(uint64)",
    "NothingToDispute(bytes32)",
    "ReplayRequired()",
    "NoBeacon()",
    "SitesNotDue()",
    "WrongReveal()",
    "NotNarrow(address)",
    NULL,
};

void chain_arb_describe_revert(char *out, size_t cap, const uint8_t *data, size_t len)
{
    chain_abi_decode_revert(out, cap, data, len, chain_arb_errors);
}

void chain_arb_revert_name(char *out, size_t cap, const uint8_t *data, size_t len)
{
    chain_abi_revert_name(out, cap, data, len, chain_arb_errors);
}
