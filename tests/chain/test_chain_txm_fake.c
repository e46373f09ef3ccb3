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
        reply_result(r, id, "\"0x10\"");
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
        if (n->send_script[k])
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

int main(void)
{
    tsup_httpd srv;
    reset_node();
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
    if (chain_rpc_open(&rpc, srv.url, &o) != 0 ||
        chain_key_from_hex(&k, "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d") != 0 ||
        chain_txm_init(&m, rpc, &k, &to_opts) != 0) {
        fprintf(stderr, "setup: %s\n", ovt_errmsg());
        return 1;
    }
    CHECK(m.chain_id == 31337);
    mgr = &m;
    test_prepare(&m);
    test_already_known_and_nonce(&m);
    test_bumps(&m);
    test_wait(&m);
    chain_txm_free(&m);
    ovt_wipe(&k, sizeof k);
    chain_rpc_close(rpc);
    tsup_httpd_stop(&srv);
    return check_done();
}
