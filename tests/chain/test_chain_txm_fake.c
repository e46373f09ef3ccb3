/* The transaction manager against a scripted node (the HTTP responder playing
 * an Ethereum node), for the answers a real node gives only under load or
 * races: "already known", "nonce too low" on a first send and on a
 * replacement, "replacement transaction underpriced" (raised again, bounded),
 * a mined revert replayed for its reason, HTTP 500 during a receipt wait (the
 * wait can be resumed), fee caps, the gas margin and a node without
 * eth_maxPriorityFeePerGas. Every transaction the node receives is decoded
 * with chain_tx_decode_signed and its fields checked. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/keccak.h"
#include "chain/session.h"
#include "chain/txm.h"
#include "check.h"
#include "support/httpd.h"

#define GWEI 1000000000ULL

typedef struct {
    uint64_t pending_nonce;
    uint64_t base_fee;
    uint64_t tip;
    int no_priority_method;
    const char *send_script[16]; /* per eth_sendRawTransaction: NULL accept, else the error message */
    int nsend;                   /* sends received */
    chain_tx sent[16];           /* their fields (data not kept) */
    ovt_hash sent_hash[16];
    chain_address sender[16];
    int mined;                   /* index of the mined send, -1 none */
    int mined_status;
    int call_reverts;
    int receipt_http500;
    int knows;                   /* eth_getTransactionByHash knows sends 0..knows-1 */
    int legacy;                  /* no baseFeePerGas, no eth_feeHistory, eth_gasPrice = base_fee */
    uint64_t head, head_max;     /* eth_blockNumber; each answer moves it one block until head_max */
    int mine_on_send;            /* mark the first send mined as it arrives (an answer that is lost later) */
} fake_node;

static fake_node node;

static void reply_result(tsup_http_reply *r, long long id, const char *fmt_result, ...) __attribute__((format(printf, 3, 4)));
static void reply_result(tsup_http_reply *r, long long id, const char *fmt_result, ...)
{
    char result[8192];
    va_list ap;
    va_start(ap, fmt_result);
    vsnprintf(result, sizeof result, fmt_result, ap);
    va_end(ap);
    snprintf(r->body, sizeof r->body, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":%s}", id, result);
}

static void reply_error(tsup_http_reply *r, long long id, int code, const char *msg, const char *data)
{
    snprintf(r->body, sizeof r->body,
             "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"error\":{\"code\":%d,\"message\":\"%s\"%s%s%s}}", id, code, msg,
             data ? ",\"data\":\"" : "", data ? data : "", data ? "\"" : "");
}

static void hex32(char out[67], const ovt_hash *h)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, h->b, 32);
}

static void handler(void *ctx, const char *req, tsup_http_reply *r)
{
    fake_node *n = ctx;
    json_error_t e;
    json_t *j = json_loads(req, 0, &e);
    long long id = json_integer_value(json_object_get(j, "id"));
    const char *m = json_string_value(json_object_get(j, "method"));
    json_t *params = json_object_get(j, "params");
    m = m ? m : "";
    if (strcmp(m, "eth_chainId") == 0) {
        reply_result(r, id, "\"0x7a69\"");
    } else if (strcmp(m, "eth_call") == 0) {
        if (n->call_reverts) /* Error("boom") */
            reply_error(r, id, 3, "execution reverted: boom",
                        "0x08c379a0000000000000000000000000000000000000000000000000000000000000002000000000000000000"
                        "00000000000000000000000000000000000000000000004626f6f6d0000000000000000000000000000000000000"
                        "0000000000000000000000000");
        else
            reply_result(r, id, "\"0x\"");
    } else if (strcmp(m, "eth_estimateGas") == 0) {
        reply_result(r, id, "\"0x5208\"");
    } else if (strcmp(m, "eth_getBlockByNumber") == 0) {
        reply_result(r, id,
                     "{\"number\":\"0x%llx\",\"hash\":\"0x%064x\",\"parentHash\":\"0x%064x\",\"timestamp\":"
                     "\"0x64\"%s}",
                     (unsigned long long)n->head, 1, 2, n->legacy ? "" : ",\"baseFeePerGas\":\"0x1\"");
    } else if (strcmp(m, "eth_gasPrice") == 0) {
        reply_result(r, id, "\"0x%llx\"", (unsigned long long)n->base_fee);
    } else if (strcmp(m, "eth_feeHistory") == 0 && n->legacy) {
        reply_error(r, id, -32601, "Method eth_feeHistory not supported", NULL);
    } else if (strcmp(m, "eth_feeHistory") == 0) {
        reply_result(r, id, "{\"oldestBlock\":\"0x1\",\"baseFeePerGas\":[\"0x1\",\"0x%llx\"],\"reward\":[[\"0x%llx\"]]}",
                     (unsigned long long)n->base_fee, (unsigned long long)n->tip);
    } else if (strcmp(m, "eth_maxPriorityFeePerGas") == 0) {
        if (n->no_priority_method)
            reply_error(r, id, -32601, "the method eth_maxPriorityFeePerGas does not exist", NULL);
        else
            reply_result(r, id, "\"0x%llx\"", (unsigned long long)n->tip);
    } else if (strcmp(m, "eth_getTransactionCount") == 0) {
        reply_result(r, id, "\"0x%llx\"", (unsigned long long)n->pending_nonce);
    } else if (strcmp(m, "eth_blockNumber") == 0) {
        reply_result(r, id, "\"0x%llx\"", (unsigned long long)n->head);
        if (n->head < n->head_max)
            n->head++;
    } else if (strcmp(m, "eth_sendRawTransaction") == 0 && n->nsend < 16) {
        uint8_t *raw;
        size_t len;
        int k = n->nsend++;
        chain_sig sig;
        if (ovt_hex_decode_alloc(&raw, &len, json_string_value(json_array_get(params, 0))) == 0) {
            if (chain_tx_decode_signed(&n->sent[k], &sig, &n->sender[k], raw, len) != 0)
                fprintf(stderr, "fake node: undecodable transaction: %s\n", ovt_errmsg());
            n->sent[k].data = NULL;
            chain_keccak256(&n->sent_hash[k], raw, len);
            free(raw);
        }
        char h[67];
        hex32(h, &n->sent_hash[k]);
        if (n->mine_on_send && n->mined < 0)
            n->mined = k;
        if (n->send_script[k] && strcmp(n->send_script[k], "HTTP502") == 0) {
            r->status = 502;
            snprintf(r->body, sizeof r->body, "bad gateway");
        } else if (n->send_script[k])
            reply_error(r, id, -32000, n->send_script[k], NULL);
        else
            reply_result(r, id, "\"%s\"", h);
    } else if (strcmp(m, "eth_getTransactionByHash") == 0) {
        const char *want = json_string_value(json_array_get(params, 0));
        int known = 0;
        for (int k = 0; k < n->knows && want; k++) {
            char h[67];
            hex32(h, &n->sent_hash[k]);
            known |= strcmp(h, want) == 0;
        }
        reply_result(r, id, known ? "{\"hash\":\"%s\"}" : "null", want ? want : "");
    } else if (strcmp(m, "eth_getTransactionReceipt") == 0) {
        const char *want = json_string_value(json_array_get(params, 0));
        char h[67] = "";
        if (n->mined >= 0)
            hex32(h, &n->sent_hash[n->mined]);
        if (n->receipt_http500) {
            r->status = 500;
            snprintf(r->body, sizeof r->body, "upstream exploded");
        } else if (n->mined >= 0 && want && strcmp(want, h) == 0) {
            char from[43] = "0x";
            ovt_hex_encode(from + 2, n->sender[n->mined].b, 20);
            reply_result(r, id,
                         "{\"transactionHash\":\"%s\",\"blockHash\":\"0x%064x\",\"blockNumber\":\"0x10\","
                         "\"status\":\"0x%x\",\"gasUsed\":\"0x5208\",\"from\":\"%s\",\"contractAddress\":null,"
                         "\"logs\":[]}",
                         h, 7, n->mined_status, from);
        } else {
            reply_result(r, id, "null");
        }
    } else {
        reply_error(r, id, -32601, "method not found", NULL);
    }
    json_decref(j);
}

static chain_txm *mgr;

/* A fresh node state, and a manager that has not used any nonce yet. */
static void reset_node(void)
{
    if (mgr)
        mgr->next_nonce = 0;
    memset(&node, 0, sizeof node);
    node.pending_nonce = 5;
    node.base_fee = 10 * GWEI;
    node.tip = 2 * GWEI;
    node.mined = -1;
    node.mined_status = 1;
    node.head = node.head_max = 0x10;
}

/* b >= a * 9/8 (a raise of at least 12.5%). */
static int raised_enough(uint64_t a, uint64_t b)
{
    return b / 9 >= a / 8 && b * 1.0 >= a * 1.125;
}

static chain_address to = {{0x11}};

static void test_prepare(chain_txm *m)
{
    chain_txm_pending p;
    reset_node();
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(p.tx.nonce == 5 && p.tx.gas_limit == 26250);                  /* 21000 + 25% */
    CHECK(p.tx.max_priority_fee_per_gas == 2 * GWEI);
    CHECK(p.tx.max_fee_per_gas == 22 * GWEI);                           /* 2 * base + tip */
    chain_txm_pending_free(&p);
    /* A node without eth_maxPriorityFeePerGas: the fee history suffices. */
    node.no_priority_method = 1;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0 && p.tx.max_priority_fee_per_gas == 2 * GWEI);
    chain_txm_pending_free(&p);
    /* A cap between base + tip and 2 * base + tip clamps; below base + tip refuses. */
    m->opts.max_fee_cap = 15 * GWEI;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0 && p.tx.max_fee_per_gas == 15 * GWEI);
    chain_txm_pending_free(&p);
    m->opts.max_fee_cap = 11 * GWEI;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == OVT_EINVAL && strstr(ovt_errmsg(), "cap"));
    m->opts.max_fee_cap = 0;
    /* A call that reverts is not sent. */
    node.call_reverts = 1;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == OVT_EREVERT && strstr(ovt_errmsg(), "reverted: boom"));
    CHECK(node.nsend == 0);
}

static void test_already_known_and_nonce(chain_txm *m)
{
    chain_txm_pending p;
    reset_node();
    node.send_script[0] = "already known";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0 && p.nversions == 1);
    CHECK(memcmp(p.hashes[0].b, node.sent_hash[0].b, 32) == 0 && chain_address_eq(&node.sender[0], &m->from));
    chain_txm_pending_free(&p);
    /* The node still counts 5 pending, but the manager used 5: the next gets 6. */
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0 && p.tx.nonce == 6);
    chain_txm_pending_free(&p);

    /* First send meets "nonce too low": the nonce is read again and used. */
    reset_node();
    node.send_script[0] = "nonce too low: next nonce 6, tx nonce 5";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0 && p.tx.nonce == 5);
    node.pending_nonce = 6;
    int rc = chain_txm_submit(m, &p);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(node.nsend == 2 && node.sent[0].nonce == 5 && node.sent[1].nonce == 6 && p.tx.nonce == 6);
    chain_txm_pending_free(&p);

    /* "nonce too low" for a transaction the node already has (an earlier
     * attempt whose answer was lost): sent, not sent again with a new nonce. */
    reset_node();
    node.send_script[0] = "nonce too low";
    node.knows = 1;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    node.pending_nonce = 6;
    CHECK(chain_txm_submit(m, &p) == 0);
    CHECK(node.nsend == 1 && p.nversions == 1 && p.tx.nonce == 5 && memcmp(p.hashes[0].b, node.sent_hash[0].b, 32) == 0);
    chain_txm_pending_free(&p);
}

static void test_bumps(chain_txm *m)
{
    chain_txm_pending p;
    chain_receipt r;
    /* Underpriced twice, then accepted: each send raised >= 12.5% over the last. */
    reset_node();
    node.send_script[1] = "replacement transaction underpriced";
    node.send_script[2] = "Replacement Transaction Underpriced";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    int rc = chain_txm_bump(m, &p);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(node.nsend == 4 && p.nversions == 2 && p.bumps == 3);
    for (int k = 1; k < node.nsend; k++) {
        CHECK(node.sent[k].nonce == node.sent[0].nonce);
        CHECK_MSG(raised_enough(node.sent[k - 1].max_priority_fee_per_gas, node.sent[k].max_priority_fee_per_gas) &&
                      raised_enough(node.sent[k - 1].max_fee_per_gas, node.sent[k].max_fee_per_gas),
                  "send %d: tip %llu -> %llu", k, (unsigned long long)node.sent[k - 1].max_priority_fee_per_gas,
                  (unsigned long long)node.sent[k].max_priority_fee_per_gas);
    }
    CHECK(memcmp(p.hashes[1].b, node.sent_hash[3].b, 32) == 0);
    CHECK(p.tx.max_fee_per_gas == node.sent[3].max_fee_per_gas);
    chain_txm_pending_free(&p);

    /* Underpriced forever: bounded by max_bumps, and p keeps the accepted version. */
    reset_node();
    for (int k = 1; k < 16; k++)
        node.send_script[k] = "replacement transaction underpriced";
    m->opts.max_bumps = 3;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    uint64_t fee0 = p.tx.max_fee_per_gas;
    CHECK(chain_txm_bump(m, &p) == OVT_ETIMEOUT && strstr(ovt_errmsg(), "3 fee bumps"));
    CHECK(node.nsend == 4 && p.tx.max_fee_per_gas == fee0 && p.nversions == 1);
    m->opts.max_bumps = 5;
    chain_txm_pending_free(&p);

    /* The replacement meets "nonce too low": the first version was mined. */
    reset_node();
    node.send_script[1] = "nonce too low";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    node.mined = 0;
    CHECK(chain_txm_bump(m, &p) == 0 && p.nversions == 1);
    CHECK(chain_txm_wait(m, &p, &r) == 0 && memcmp(r.tx_hash.b, node.sent_hash[0].b, 32) == 0);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
}

static void test_wait(chain_txm *m)
{
    chain_txm_pending p;
    chain_receipt r;
    /* Mined with status 0: the reason comes from replaying the call. */
    reset_node();
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    node.call_reverts = 1;
    node.mined = 0;
    node.mined_status = 0;
    int rc = chain_txm_wait(m, &p, &r);
    CHECK(rc == OVT_EREVERT && r.status == 0 && strstr(ovt_errmsg(), "boom") && strstr(ovt_errmsg(), "block 16"));
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);

    /* HTTP 500 while waiting: a clear error; the wait can be resumed. */
    reset_node();
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    node.receipt_http500 = 1;
    rc = chain_txm_wait(m, &p, &r);
    CHECK(rc == OVT_ERPC && strstr(ovt_errmsg(), "HTTP 500") && strstr(ovt_errmsg(), "waiting for transaction 0x"));
    node.receipt_http500 = 0;
    node.mined = 0;
    CHECK(chain_txm_wait(m, &p, &r) == 0 && r.status == 1 && node.nsend == 1);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
}

/* Mined but not yet confirmed: waited on, never replaced, however soon a
 * bump would be due (the bug of issue 12: replacements of a mined
 * transaction refused as "nonce too low" and counted until the wait failed). */
static void test_mined_unconfirmed(chain_txm *m)
{
    chain_txm_pending p;
    chain_receipt r;
    reset_node();
    m->opts.confirmations = 4;
    m->opts.bump_after_ms = 1;
    node.mine_on_send = 1;
    node.head_max = 0x10 + 3; /* the receipt's block 0x10 and three more, one per poll */
    for (int k = 1; k < 16; k++)
        node.send_script[k] = "nonce too low";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    int rc = chain_txm_wait(m, &p, &r);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(node.nsend == 1 && p.bumps == 0 && r.block_number == 0x10 && node.head == 0x13);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);

    /* No new block while one confirmation is missing: a stall, said as such,
     * still nothing sent again. */
    reset_node();
    node.mine_on_send = 1;
    m->opts.confirmations = 2;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    rc = chain_txm_wait(m, &p, &r);
    CHECK_MSG(rc == OVT_ETIMEOUT && strstr(ovt_errmsg(), "1 of 2 confirmations") && strstr(ovt_errmsg(), "no new block"),
              "%s", ovt_errmsg());
    CHECK(node.nsend == 1);
    chain_txm_pending_free(&p);
    m->opts.confirmations = 1;
    m->opts.bump_after_ms = 20000;
}

/* The answer to a send is lost (HTTP 502; the retry meets ganache's "the tx
 * doesn't have the correct nonce" because the first attempt landed and was
 * mined): the manager looks up the receipt and counts it as sent. */
static void test_lost_answer(chain_txm *m)
{
    chain_txm_pending p;
    chain_receipt r;
    reset_node();
    node.mine_on_send = 1;
    node.send_script[0] = "HTTP502";
    node.send_script[1] = "the tx doesn't have the correct nonce. account has nonce of: 6 tx has nonce of: 5";
    node.pending_nonce = 5;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    node.pending_nonce = 6; /* what the node says once the first attempt is mined */
    int rc = chain_txm_submit(m, &p);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(node.nsend == 2 && p.nversions == 1 && p.tx.nonce == 5 && memcmp(p.hashes[0].b, node.sent_hash[0].b, 32) == 0);
    CHECK(chain_txm_wait(m, &p, &r) == 0 && memcmp(r.tx_hash.b, node.sent_hash[0].b, 32) == 0);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);

    /* Hardhat's "Known transaction" from a node that does not show its pool
     * by hash: the wording is the only evidence, and it is taken. */
    reset_node();
    node.send_script[0] = "Known transaction: 0x1234";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0 && p.nversions == 1);
    chain_txm_pending_free(&p);

    /* "nonce too low" while nothing of ours is mined or held and the latest
     * nonce is not past ours: not counted as sent, and said why. */
    reset_node();
    node.send_script[0] = "nonce too low";
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    rc = chain_txm_submit(m, &p);
    CHECK_MSG(rc != 0 && p.nversions == 0 && strstr(ovt_errmsg(), "pool"), "%s", ovt_errmsg());
    chain_txm_pending_free(&p);
}

/* A fee cap the next raise would cross: no replacement is sent, the wait
 * keeps waiting for the version out there and, when it gives up, says that
 * the cap stopped it. The tip cap bounds the tip. */
static void test_fee_cap(chain_txm *m)
{
    chain_txm_pending p;
    chain_receipt r;
    reset_node();
    m->opts.max_fee_cap = 23 * GWEI; /* the first version's 22 gwei fits, a 12.5% raise does not */
    m->opts.bump_after_ms = 1;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0 && p.tx.max_fee_per_gas == 22 * GWEI);
    CHECK(chain_txm_submit(m, &p) == 0);
    int rc = chain_txm_wait(m, &p, &r);
    CHECK_MSG(rc == OVT_ETIMEOUT && p.capped && strstr(ovt_errmsg(), "above the cap") && strstr(ovt_errmsg(), "unmined"),
              "%s", ovt_errmsg());
    CHECK(node.nsend == 1);
    for (int k = 0; k < node.nsend; k++)
        CHECK(node.sent[k].max_fee_per_gas <= 23 * GWEI);
    chain_txm_pending_free(&p);
    m->opts.max_fee_cap = 0;
    m->opts.bump_after_ms = 20000;

    reset_node();
    m->opts.max_tip_cap = GWEI;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0 && p.tx.max_priority_fee_per_gas == GWEI &&
          p.tx.max_fee_per_gas == 21 * GWEI);
    chain_txm_pending_free(&p);
    m->opts.max_tip_cap = 0;

    /* The fee flags (chain_parse_wei below 2^64): wei, or gwei with up to 9 decimals. */
    chain_txm_opts fo;
    chain_txm_opts_default(&fo);
    CHECK(chain_session_fee_caps(&fo, "30gwei", NULL) == 0 && fo.max_fee_cap == 30 * GWEI);
    CHECK(chain_session_fee_caps(&fo, "1.5gwei", NULL) == 0 && fo.max_fee_cap == 1500000000ULL);
    CHECK(chain_session_fee_caps(&fo, NULL, "12345") == 0 && fo.max_tip_cap == 12345);
    CHECK(chain_session_fee_caps(&fo, NULL, "1.5") == OVT_EINVAL && strstr(ovt_errmsg(), "--priority-fee"));
    CHECK(chain_session_fee_caps(&fo, NULL, "gwei") == OVT_EINVAL);
    CHECK(chain_session_fee_caps(&fo, NULL, "99999999999999999999") == OVT_EINVAL);
}

/* A node without EIP-1559: a legacy EIP-155 transaction at eth_gasPrice,
 * bumped by raising the gas price. */
static void test_legacy(chain_txm *m)
{
    chain_txm_pending p;
    reset_node();
    node.legacy = 1;
    m->legacy = -1;
    CHECK(chain_txm_prepare(m, &p, &to, NULL, NULL, 0) == 0);
    CHECK(m->legacy == 1 && p.tx.type == CHAIN_TX_LEGACY && p.tx.gas_price == 10 * GWEI);
    CHECK(chain_txm_submit(m, &p) == 0 && chain_txm_bump(m, &p) == 0);
    CHECK(node.nsend == 2 && node.sent[0].type == CHAIN_TX_LEGACY && node.sent[0].chain_id == 31337 &&
          node.sent[1].type == CHAIN_TX_LEGACY && raised_enough(node.sent[0].gas_price, node.sent[1].gas_price) &&
          chain_address_eq(&node.sender[1], &m->from));
    chain_txm_pending_free(&p);
    m->legacy = -1;
}

int main(void)
{
    tsup_httpd srv;
    CHECK_RUN(reset_node());
    if (tsup_httpd_start(&srv, handler, &node) != 0)
        return 1;
    chain_rpc *rpc;
    chain_rpc_opts o;
    chain_rpc_opts_default(&o);
    o.backoff_ms = 10;
    chain_privkey k;
    chain_txm m;
    chain_txm_opts to_opts;
    chain_txm_opts_default(&to_opts);
    to_opts.poll_ms = 20;
    to_opts.receipt_timeout_ms = 5000;
    to_opts.min_stall_ms = 200; /* and the block interval below: a stalled node is noticed in tests' time */
    if (chain_rpc_open(&rpc, srv.url, &o) != 0 ||
        chain_key_from_hex(&k, "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d") != 0 ||
        chain_txm_init(&m, rpc, &k, &to_opts) != 0) {
        fprintf(stderr, "setup: %s\n", ovt_errmsg());
        return 1;
    }
    CHECK(m.chain_id == 31337);
    m.block_interval_ms = 20;
    mgr = &m;
    CHECK_RUN(test_prepare(&m));
    CHECK_RUN(test_already_known_and_nonce(&m));
    CHECK_RUN(test_bumps(&m));
    CHECK_RUN(test_wait(&m));
    CHECK_RUN(test_mined_unconfirmed(&m));
    CHECK_RUN(test_lost_answer(&m));
    CHECK_RUN(test_fee_cap(&m));
    CHECK_RUN(test_legacy(&m));
    chain_txm_free(&m);
    ovt_wipe(&k, sizeof k);
    chain_rpc_close(rpc);
    tsup_httpd_stop(&srv);
    return check_done();
}
