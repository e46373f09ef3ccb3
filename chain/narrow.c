/* Bindings of the narrowing contract (chain/narrow.h). */
#include "chain/narrow.h"

#include "chain/rpc.h"
#include "chain/tx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(expr)         \
    do {                  \
        int rc_ = (expr); \
        if (rc_ != 0)     \
            return rc_;   \
    } while (0)

const char *const chain_narrow_errors[] = {
    "NotAwaitingVerdict(uint8)", "StepZero()",         "ReplayDispute()",   "WrongPhase(uint8,uint8)",
    "WrongRound(uint32,uint32)", "DeadlinePassed(uint64)", "NotExpired(uint64)", "NotParty(address)",
    "AlreadyMoved(address)",     "NotPosted(address)", "WrongStage(uint8,uint8)",
    NULL,
};

void chain_narrow_revert_name(char *out, size_t cap, const uint8_t *data, size_t len)
{
    chain_abi_revert_name(out, cap, data, len, chain_narrow_errors);
}

int chain_narrow_encode_start(chain_buf *out, const ovt_hash *game_id)
{
    return chain_abi_call_bytes32(out, "start(bytes32)", game_id);
}

int chain_narrow_encode_timeout(chain_buf *out, const ovt_hash *game_id)
{
    return chain_abi_call_bytes32(out, "timeout(bytes32)", game_id);
}

int chain_narrow_encode_get(chain_buf *out, const ovt_hash *game_id)
{
    return chain_abi_call_bytes32(out, "getNarrow(bytes32)", game_id);
}

/* Appends a uint64[] (each a word). */
static int put_u64_array(chain_abi_enc *enc, const uint64_t *v, size_t n)
{
    ovt_hash *words = calloc(n ? n : 1, sizeof *words);
    if (!words)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu tensor sizes", n);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            words[i].b[31 - k] = (uint8_t)(v[i] >> (8 * k));
    chain_abi_put_bytes32_array(enc, words, n);
    free(words);
    return 0;
}

int chain_narrow_encode_post(chain_buf *out, const ovt_hash *game_id, const chain_narrow_post *p)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_bytes32(&enc, &p->leaf.state_hash);
    chain_abi_put_bytes32(&enc, &p->leaf.batch_hash);
    chain_abi_put_bytes32(&enc, &p->leaf.log_hash);
    chain_abi_put_bytes32(&enc, &p->trace_root);
    chain_abi_put_uint(&enc, p->sites);
    chain_abi_put_bytes32_array(&enc, p->previous_roots, p->nprevious);
    chain_abi_put_bytes32_array(&enc, p->roots, p->nroots);
    if (put_u64_array(&enc, p->sizes, p->nsizes) != 0) {
        chain_abi_enc_free(&enc);
        return OVT_ENOMEM;
    }
    return chain_abi_enc_call(&enc, out, "postTrace(bytes32,(bytes32,bytes32,bytes32),bytes32,uint64,bytes32[],bytes32[],uint64[])");
}

int chain_narrow_encode_compare_states(chain_buf *out, const ovt_hash *game_id, unsigned round,
                                       const chain_narrow_post *trainer, const chain_narrow_post *auditor)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_uint(&enc, round);
    const chain_narrow_post *side[2] = {trainer, auditor};
    for (int k = 0; k < 2; k++) {
        chain_abi_put_bytes32_array(&enc, side[k]->roots, side[k]->nroots);
        if (put_u64_array(&enc, side[k]->sizes, side[k]->nsizes) != 0) {
            chain_abi_enc_free(&enc);
            return OVT_ENOMEM;
        }
    }
    return chain_abi_enc_call(&enc, out, "compareStates(bytes32,uint32,bytes32[],uint64[],bytes32[],uint64[])");
}

int chain_narrow_encode_descend(chain_buf *out, const ovt_hash *game_id, unsigned round, const ovt_hash *left,
                                const ovt_hash *right)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_uint(&enc, round);
    chain_abi_put_bytes32(&enc, left);
    chain_abi_put_bytes32(&enc, right);
    return chain_abi_enc_call(&enc, out, "descend(bytes32,uint32,bytes32,bytes32)");
}

int chain_narrow_encode_reveal(chain_buf *out, const ovt_hash *game_id, unsigned round, const uint8_t *item,
                               size_t len)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_uint(&enc, round);
    chain_abi_put_bytes(&enc, item, len);
    return chain_abi_enc_call(&enc, out, "reveal(bytes32,uint32,bytes)");
}

int chain_narrow_encode_post_chunks(chain_buf *out, const ovt_hash *game_id, unsigned round, const ovt_hash *root,
                                    uint64_t count, const ovt_hash *proof, size_t nproof)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_uint(&enc, round);
    chain_abi_put_bytes32(&enc, root);
    chain_abi_put_uint(&enc, count);
    chain_abi_put_bytes32_array(&enc, proof, nproof);
    return chain_abi_enc_call(&enc, out, "postChunks(bytes32,uint32,bytes32,uint64,bytes32[])");
}

int chain_narrow_encode_post_elements(chain_buf *out, const ovt_hash *game_id, unsigned round, const ovt_hash *root)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, game_id);
    chain_abi_put_uint(&enc, round);
    chain_abi_put_bytes32(&enc, root);
    return chain_abi_enc_call(&enc, out, "postElements(bytes32,uint32,bytes32)");
}

/* Word i as an unsigned of at most `bits` bits. */
static int get_bits(const chain_abi_dec *dec, size_t i, unsigned bits, uint64_t *out)
{
    TRY(chain_abi_get_uint(dec, i, out));
    if (bits < 64 && *out >> bits != 0)
        return ovt_fail(OVT_EFORMAT, "getNarrow: word %zu does not fit in uint%u", i, bits);
    return 0;
}

/* An enum word no larger than max. */
static int get_enum(const chain_abi_dec *dec, size_t i, uint64_t max, int *out)
{
    uint64_t v;
    TRY(get_bits(dec, i, 8, &v));
    if (v > max)
        return ovt_fail(OVT_EFORMAT, "getNarrow: word %zu holds %llu, beyond its enum", i, (unsigned long long)v);
    *out = (int)v;
    return 0;
}

/* Game.t or Game.a: CHAIN_NARROW_SIDE_WORDS words from word i. */
#define CHAIN_NARROW_SIDE_WORDS 11
static int decode_side(chain_narrow_side *s, const chain_abi_dec *dec, size_t i)
{
    ovt_hash *h[] = {&s->state_hash, &s->trace_root, &s->states_hash, &s->node, &s->header, &s->claim};
    for (size_t k = 0; k < 6; k++)
        TRY(chain_abi_get_bytes32(dec, i + k, h[k]));
    TRY(get_bits(dec, i + 6, 64, &s->sites));
    TRY(get_bits(dec, i + 7, 64, &s->elements));
    TRY(chain_abi_get_bytes32(dec, i + 8, &s->block_leaf));
    TRY(chain_abi_get_bytes32(dec, i + 9, &s->chain_root));
    return get_bits(dec, i + 10, 64, &s->chunks);
}

int chain_narrow_decode_game(chain_narrow_game *out, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    chain_abi_dec dec;
    chain_abi_dec_init(&dec, data, len);
    int phase, stage, outcome, item_stage;
    uint64_t v[6];
    TRY(chain_abi_get_address(&dec, 0, &out->trainer));
    TRY(get_bits(&dec, 1, 64, &out->deadline));
    TRY(get_enum(&dec, 2, CHAIN_NARROW_PHASE_ENDED, &phase));
    TRY(get_enum(&dec, 3, CHAIN_NARROW_STAGE_ELEMENTS, &stage));
    TRY(get_enum(&dec, 4, CHAIN_NARROW_ELEMENTS_AGREE, &outcome));
    TRY(get_bits(&dec, 5, 8, &v[0]));
    TRY(chain_abi_get_address(&dec, 6, &out->auditor));
    TRY(get_bits(&dec, 7, 32, &v[1]));
    TRY(get_bits(&dec, 8, 32, &v[2]));
    TRY(get_bits(&dec, 9, 32, &v[3]));
    TRY(chain_abi_get_address(&dec, 10, &out->last_mover));
    TRY(get_bits(&dec, 11, 64, &out->step));
    TRY(get_bits(&dec, 12, 8, &v[4]));
    TRY(get_bits(&dec, 13, 64, &out->count));
    TRY(get_bits(&dec, 14, 64, &out->index));
    TRY(get_enum(&dec, 15, CHAIN_NARROW_STAGE_ELEMENTS, &item_stage));
    TRY(get_bits(&dec, 16, 64, &out->item));
    TRY(get_bits(&dec, 17, 64, &out->block));
    TRY(get_bits(&dec, 18, 64, &out->chunk));
    ovt_hash *h[] = {&out->op,           &out->config_hash,  &out->previous_state, &out->batch_hash,
                     &out->log_hash,     &out->trainer_leaf, &out->auditor_leaf,   &out->tree_id,
                     &out->pending_left, &out->pending_right};
    for (size_t k = 0; k < sizeof h / sizeof h[0]; k++)
        TRY(chain_abi_get_bytes32(&dec, 19 + k, h[k]));
    TRY(decode_side(&out->trainer_side, &dec, 29));
    TRY(decode_side(&out->auditor_side, &dec, 29 + CHAIN_NARROW_SIDE_WORDS));
    out->phase = (chain_narrow_phase)phase;
    out->stage = (chain_narrow_stage)stage;
    out->item_stage = (chain_narrow_stage)item_stage;
    out->outcome = (chain_narrow_outcome)outcome;
    out->moved = (unsigned)v[0];
    out->move_timeout = (uint32_t)v[1];
    out->round = (unsigned)v[2];
    out->prev_count = (unsigned)v[3];
    out->level = (unsigned)v[4];
    return 0;
}

/* --- transactions */

static int send_encoded(const chain_narrow *n, chain_txm *m, chain_buf *calldata, int rc, chain_receipt *receipt,
                        const char *what)
{
    chain_receipt local;
    chain_receipt *r = receipt ? receipt : &local;
    memset(r, 0, sizeof *r);
    if (rc == 0)
        rc = chain_txm_send_extra(m, r, &n->address, NULL, calldata->data, calldata->len, CHAIN_ARB_RACE_GAS);
    if (!receipt)
        chain_receipt_free(&local);
    chain_buf_free(calldata);
    return rc == 0 ? 0 : ovt_fail_wrap(rc, "%s", what);
}

int chain_narrow_deploy(chain_narrow *n, chain_txm *m, const chain_address *arbitration, chain_receipt *receipt)
{
    uint8_t args[32] = {0}; /* constructor(address arbitration) */
    memcpy(args + 12, arbitration->b, 20);
    return chain_arb_deploy_code(n, m, chain_narrow_bytecode_hex, args, sizeof args, "the narrowing contract",
                                 receipt);
}

int chain_narrow_deploy_pair(chain_arb *arb, chain_narrow *n, chain_txm *m, chain_receipt *arb_receipt,
                             chain_receipt *narrow_receipt)
{
    memset(n, 0, sizeof *n);
    uint64_t pending = 0;
    int rc = chain_rpc_nonce(m->rpc, &pending, &m->from, "pending");
    if (rc)
        return ovt_fail_wrap(rc, "reading the deployer's nonce");
    uint64_t nonce = pending > m->next_nonce ? pending : m->next_nonce; /* what its next send takes */
    chain_address at_arb, at_narrow;
    if ((rc = chain_create_address(&at_arb, &m->from, nonce)) ||
        (rc = chain_create_address(&at_narrow, &m->from, nonce + 1)))
        return rc;
    if ((rc = chain_arb_deploy(arb, m, &at_narrow, arb_receipt)))
        return rc;
    if (!chain_address_eq(&arb->address, &at_arb))
        return ovt_fail(OVT_EINVAL,
                        "the arbitration contract was created with another nonce than %llu (another transaction of "
                        "the deployer's account came between): no narrowing can bind to it, deploy both anew",
                        (unsigned long long)nonce);
    if ((rc = chain_narrow_deploy(n, m, &arb->address, narrow_receipt)))
        return ovt_fail_wrap(rc, "deploying the narrowing contract at nonce %llu, the address the arbitration "
                             "contract was bound to",
                             (unsigned long long)(nonce + 1));
    if (!chain_address_eq(&n->address, &at_narrow))
        return ovt_fail(OVT_EINVAL, "the narrowing contract was created at another address than the one the "
                                       "arbitration contract is bound to; deploy both anew");
    return 0;
}

int chain_narrow_check_bound(const chain_arb *arb, const chain_address *address)
{
    static const uint8_t arbitration_sel[4] = {0x9b, 0x73, 0x23, 0x50}; /* arbitration() */
    char at[43], want[43];
    chain_address_to_string(at, address);
    chain_address_to_string(want, &arb->address);
    chain_buf ret;
    chain_buf_init(&ret);
    chain_call_msg msg = {.to = address, .data = arbitration_sel, .data_len = sizeof arbitration_sel};
    int rc = chain_rpc_eth_call(arb->rpc, &ret, &msg, NULL);
    int ok = rc == 0 && ret.len == 32 && !memcmp(ret.data + 12, arb->address.b, 20);
    char got[43] = "";
    if (rc == 0 && ret.len == 32) {
        chain_address a;
        memcpy(a.b, ret.data + 12, 20);
        chain_address_to_string(got, &a);
    }
    chain_buf_free(&ret);
    if (rc == OVT_ERPC || rc == OVT_ETIMEOUT || rc == OVT_EIO)
        return ovt_fail_wrap(rc, "reading arbitration() of the narrowing contract %s", at);
    ovt_err_clear();
    if (ok)
        return 0;
    if (got[0])
        return ovt_fail(OVT_EINVAL,
                        "--narrow %s is the narrowing contract of another arbitration contract (%s), not of %s: give "
                        "the narrow address ovt deploy printed with this contract (narrow.address)",
                        at, got, want);
    return ovt_fail(OVT_EINVAL,
                    "--narrow %s is not an OvtNarrow contract (it answers no arbitration()): give the narrow address "
                    "ovt deploy printed with the contract %s (narrow.address), or deploy the pair with ovt deploy",
                    at, want);
}

int chain_narrow_start(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_start(&data, game_id), receipt, "narrow start");
}

int chain_narrow_post_trace(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, const chain_narrow_post *p,
                            chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_post(&data, game_id, p), receipt, "postTrace");
}

int chain_narrow_descend(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                         const ovt_hash *left, const ovt_hash *right, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_descend(&data, game_id, round, left, right), receipt,
                        "descend");
}

int chain_narrow_reveal(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                        const uint8_t *item, size_t len, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_reveal(&data, game_id, round, item, len), receipt,
                        "reveal");
}

int chain_narrow_compare_states(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                                const chain_narrow_post *trainer, const chain_narrow_post *auditor,
                                chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_compare_states(&data, game_id, round, trainer, auditor),
                        receipt, "compareStates");
}

int chain_narrow_post_chunks(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                            const ovt_hash *root, uint64_t count, const ovt_hash *proof, size_t nproof,
                            chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data,
                        chain_narrow_encode_post_chunks(&data, game_id, round, root, count, proof, nproof), receipt,
                        "postChunks");
}

int chain_narrow_post_elements(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, unsigned round,
                               const ovt_hash *root, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_post_elements(&data, game_id, round, root), receipt,
                        "postElements");
}

int chain_narrow_timeout(const chain_narrow *n, chain_txm *m, const ovt_hash *game_id, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(n, m, &data, chain_narrow_encode_timeout(&data, game_id), receipt, "narrow timeout");
}

int chain_narrow_get(const chain_narrow *n, const ovt_hash *game_id, const char *block, chain_narrow_game *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = chain_narrow_encode_get(&data, game_id);
    if (rc == 0) {
        chain_call_msg msg = {.to = &n->address, .data = data.data, .data_len = data.len};
        rc = chain_rpc_eth_call(n->rpc, &ret, &msg, block);
    }
    if (rc == 0)
        rc = chain_narrow_decode_game(out, ret.data, ret.len);
    chain_buf_free(&data);
    chain_buf_free(&ret);
    return rc == 0 ? 0 : ovt_fail_wrap(rc, "getNarrow");
}

/* --- evidence from the events */

void chain_narrow_evidence_free(chain_narrow_evidence *e)
{
    free(e->previous_roots);
    free(e->record[0]);
    free(e->record[1]);
    memset(e, 0, sizeof *e);
}

/* A malloc'd copy of len bytes (at least one byte allocated). */
static void *copy_bytes(const uint8_t *data, size_t len)
{
    void *p = malloc(len ? len : 1);
    if (p)
        memcpy(p, data, len);
    else
        ovt_fail(OVT_ENOMEM, "out of memory for %zu bytes of an event", len);
    return p;
}

static int take_log(chain_narrow_evidence *out, const chain_narrow_game *g, const chain_log *log)
{
    ovt_hash previous, item, lost;
    chain_abi_event_topic(&previous, "PreviousRoots(bytes32,bytes32[])");
    chain_abi_event_topic(&item, "ItemRevealed(bytes32,address,uint8,uint64,bytes)");
    chain_abi_event_topic(&lost, "Lost(bytes32,address,uint8)");
    chain_abi_dec dec;
    const uint8_t *data;
    size_t len;
    if (log->ntopics > 0 && memcmp(log->topics[0].b, previous.b, 32) == 0) {
        TRY(chain_abi_decode_log(&dec, log, "PreviousRoots(bytes32,bytes32[])", 1));
        TRY(chain_abi_get_bytes32_array(&dec, 0, &data, &len));
        free(out->previous_roots);
        if (!(out->previous_roots = copy_bytes(data, 32 * len)))
            return OVT_ENOMEM;
        out->nprevious = len;
    } else if (log->ntopics > 0 && memcmp(log->topics[0].b, item.b, 32) == 0) {
        TRY(chain_abi_decode_log(&dec, log, "ItemRevealed(bytes32,address,uint8,uint64,bytes)", 2));
        int k = memcmp(log->topics[2].b + 12, g->trainer.b, 20) == 0 ? 0 : 1;
        TRY(chain_abi_get_bytes(&dec, 2, &data, &len));
        free(out->record[k]);
        if (!(out->record[k] = copy_bytes(data, len)))
            return OVT_ENOMEM;
        out->record_len[k] = len;
    } else if (log->ntopics > 0 && memcmp(log->topics[0].b, lost.b, 32) == 0) {
        uint64_t reason;
        TRY(chain_abi_decode_log(&dec, log, "Lost(bytes32,address,uint8)", 2));
        TRY(chain_abi_get_uint(&dec, 0, &reason));
        if (reason < CHAIN_NARROW_REASON_TIMEOUT || reason > CHAIN_NARROW_REASON_BAD_ITEM)
            return ovt_fail(OVT_EFORMAT, "a Lost event with reason %llu, which OvtNarrow does not have",
                            (unsigned long long)reason);
        out->lost = (chain_narrow_reason)reason;
    }
    return 0;
}

/* The index of the game's last NarrowStarted in logs[0..n), or n. */
static size_t last_start(const chain_log *logs, size_t n)
{
    ovt_hash started;
    chain_abi_event_topic(&started, "NarrowStarted(bytes32,uint64,bytes32,bytes32,bytes32,uint64)");
    size_t at = n;
    for (size_t i = 0; i < n; i++)
        if (logs[i].ntopics > 0 && memcmp(logs[i].topics[0].b, started.b, 32) == 0)
            at = i;
    return at;
}

/* The windows read, newest first. */
typedef struct {
    chain_log *logs;
    size_t n;
} log_window;

/* Reads the game's events back from to_block, window by window, until a
 * window holds its NarrowStarted (*first: its index there; the window is
 * the last of *w) or from_block is read. */
static int read_back(const chain_narrow *n, const ovt_hash *game_id, uint64_t from_block, uint64_t to_block,
                     chain_narrow_evidence *out, log_window **w, size_t *nw, size_t *first)
{
    *first = 0;
    for (uint64_t hi = to_block;;) {
        uint64_t lo = hi - from_block + 1 > out->window ? hi - out->window + 1 : from_block;
        log_window *more = realloc(*w, (*nw + 1) * sizeof **w);
        if (more == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for the narrowing's events");
        *w = more;
        log_window *at = &(*w)[*nw];
        chain_log_filter f;
        memset(&f, 0, sizeof f);
        f.address = &n->address;
        f.from_block = lo;
        f.to_block = hi;
        f.topics[1] = game_id;
        f.ntopics = 2;
        f.chunk = out->window;
        f.chunk_taken = &out->window;
        int rc = chain_rpc_get_logs(n->rpc, &at->logs, &at->n, &f);
        if (rc != 0)
            return ovt_fail_wrap(rc, "reading the narrowing's events");
        ++*nw;
        out->windows++;
        *first = last_start(at->logs, at->n);
        if (*first < at->n) {
            out->start_block = at->logs[*first].block_number;
            return 0;
        }
        *first = 0;
        if (lo == from_block)
            return 0;
        hi = lo - 1;
    }
}

int chain_narrow_get_evidence(const chain_narrow *n, const ovt_hash *game_id, const chain_narrow_game *g,
                              uint64_t from_block, uint64_t to_block, uint64_t window,
                              chain_narrow_evidence *out)
{
    memset(out, 0, sizeof *out);
    out->start_block = UINT64_MAX;
    out->window = window ? window : CHAIN_NARROW_LOG_WINDOW;
    if (from_block > to_block)
        return ovt_fail(OVT_EINVAL, "the narrowing's events: from block %llu is after block %llu",
                        (unsigned long long)from_block, (unsigned long long)to_block);
    log_window *w = NULL;
    size_t nw = 0, first = 0;
    int rc = read_back(n, game_id, from_block, to_block, out, &w, &nw, &first);
    /* in the chain's order: the oldest window from the start on, then the newer ones */
    for (size_t k = nw; k-- > 0 && rc == 0;)
        for (size_t i = k == nw - 1 ? first : 0; i < w[k].n && rc == 0; i++)
            rc = take_log(out, g, &w[k].logs[i]);
    for (size_t k = 0; k < nw; k++)
        chain_logs_free(w[k].logs, w[k].n);
    free(w);
    if (rc != 0)
        chain_narrow_evidence_free(out);
    return rc;
}
