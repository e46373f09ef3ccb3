/* The transaction manager and the log reader against a real anvil behind a
 * proxy (tests/support/rpcproxy.c) that does what providers and networks do:
 *   the answer to eth_sendRawTransaction is lost after the node took the
 *   transaction: HTTP 502, no answer before the client's timeout, the
 *   connection closed; once, and on every retry of the send. Each time the
 *   manager finds out by looking (the receipt of the transaction it signed,
 *   anvil mining at once) and reports it sent: the account's nonce moved by
 *   exactly one, the receipt is that of the one transaction signed;
 *   eth_getLogs capped at 10 blocks: the reader halves its ranges until the
 *   node takes them and finds every event (RunOpened of runs opened 15
 *   blocks apart), and `ovt arbiter watch --once` through the same proxy
 *   reads the whole contract history;
 * and, on a second anvil at --hardfork berlin (no EIP-1559: no base fee, no
 * eth_feeHistory rewards), the manager sends a legacy (type 0) transaction
 * that is mined. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "chain/session.h"
#include "check.h"
#include "support/anvil.h"
#include "support/proc.h"
#include "support/rpcproxy.h"

#define KEY0 "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
#define KEY3 "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"

static tsup_anvil node;
static tsup_rpcproxy proxy;
static chain_rpc *direct;

static uint64_t nonce_of(const chain_address *a)
{
    uint64_t n = UINT64_MAX;
    CHECK(chain_rpc_nonce(direct, &n, a, "latest") == 0);
    return n;
}

static void lost_answer(chain_txm *m, tsup_lose_mode mode, int lose, const char *name)
{
    chain_address to = {{0x42}};
    chain_u256 one = chain_u256_from_u64(1);
    uint64_t before = nonce_of(&m->from);
    int fwd = proxy.sends_forwarded;
    proxy.lose_mode = mode;
    proxy.lose_sends = lose;
    chain_receipt r;
    int rc = chain_txm_send(m, &r, &to, &one, NULL, 0);
    CHECK_MSG(rc == 0, "%s: %s", name, ovt_errmsg());
    CHECK_MSG(proxy.answers_lost > 0 && proxy.sends_forwarded > fwd, "%s: nothing was lost", name);
    CHECK_MSG(nonce_of(&m->from) == before + 1, "%s: the nonce moved from %llu to %llu", name,
              (unsigned long long)before, (unsigned long long)nonce_of(&m->from));
    if (rc == 0) {
        chain_receipt again;
        int found;
        CHECK(chain_rpc_receipt(direct, &again, &found, &r.tx_hash) == 0 && found && again.status == 1);
        chain_receipt_free(&again);
        chain_receipt_free(&r);
    }
    proxy.lose_sends = 0;
    proxy.answers_lost = 0;
}

int main(void)
{
    if (tsup_anvil_start(&node, NULL) != 0)
        return 1;
    if (tsup_rpcproxy_start(&proxy, node.url) != 0) {
        tsup_anvil_stop(&node);
        return 1;
    }
    CHECK(chain_rpc_open(&direct, node.url, NULL) == 0);
    chain_rpc_opts ro;
    chain_rpc_opts_default(&ro);
    ro.timeout_ms = 700; /* the hang below is longer */
    ro.backoff_ms = 20;
    ro.custom_errors = chain_arb_errors;
    chain_rpc *rpc;
    chain_privkey k;
    chain_txm m;
    CHECK(chain_rpc_open(&rpc, proxy.httpd.url, &ro) == 0);
    CHECK(chain_key_from_hex(&k, KEY0) == 0 && chain_txm_init(&m, rpc, &k, NULL) == 0);

    CHECK_RUN(lost_answer(&m, TSUP_LOSE_502, 1, "502 once"));
    CHECK_RUN(lost_answer(&m, TSUP_LOSE_502, 4, "502 on every retry"));
    CHECK_RUN(lost_answer(&m, TSUP_LOSE_RESET, 1, "connection closed once"));
    CHECK_RUN(lost_answer(&m, TSUP_LOSE_RESET, 4, "connection closed on every retry"));
    proxy.hang_ms = 1200;
    CHECK_RUN(lost_answer(&m, TSUP_LOSE_HANG, 1, "no answer before the timeout"));

    /* eth_getLogs capped at 10 blocks. */
    chain_arb arb;
    chain_receipt r;
    CHECK(chain_arb_deploy(&arb, &m, NULL, &r) == 0);
    uint64_t deployed = r.block_number;
    chain_receipt_free(&r);
    chain_arb_params p;
    memset(&p, 0, sizeof p);
    p.trainer = m.from;
    p.auditor = (chain_address){{0x0a}};
    CHECK(chain_key_from_hex(&k, KEY3) == 0 && chain_key_address(&p.arbiters[0], &k) == 0);
    p.steps = 8;
    p.commit_timeout = p.move_timeout = p.arbiter_timeout = 600;
    for (int i = 0; i < 3; i++) {
        json_t *res;
        CHECK(chain_rpc_call(direct, &res, "anvil_mine", json_pack("[s]", "0xf")) == 0);
        json_decref(res);
        p.nonce = (uint64_t)i + 1;
        CHECK(chain_arb_open(&arb, &m, &p, NULL, NULL) == 0);
    }
    proxy.logs_cap = 10;
    uint64_t head;
    CHECK(chain_rpc_block_number(rpc, &head) == 0 && head > deployed + 40);
    chain_arb_event *ev;
    size_t n;
    int rc = chain_arb_get_events(&arb, NULL, 0, head, &ev, &n);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    size_t opened = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        opened += ev[i].kind == CHAIN_ARB_EV_RUN_OPENED;
    if (rc == 0)
        free(ev);
    CHECK_EQ_U64(opened, 3);
    CHECK(proxy.logs_refused > 0 && proxy.widest_logs_range <= 10 && proxy.widest_logs_range > 0);

    /* The watcher through the capped proxy, from the deployment block (found
     * by itself), at its default --log-range of 2000. */
    const char *bin = getenv("OVT_BINARY_DIR");
    char ovt[4096], contract[43], state[256], store[300];
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    chain_address_to_string(contract, &arb.address);
    snprintf(state, sizeof state, "/tmp/ovt-proxy-watch-%d", (int)getpid());
    snprintf(store, sizeof store, "file://%s/store", state);
    int refused = proxy.logs_refused;
    char *out = NULL;
    rc = tsup_runl(&out, ovt, "arbiter", "watch", "--rpc-url", proxy.httpd.url, "--contract", contract,
                   "--private-key", KEY3, "--store", store, "--state-dir", state, "--once", "--json", NULL);
    CHECK_MSG(rc == 0 && out && strstr(out, "\"event\":\"from_block\"") && proxy.logs_refused > refused,
              "watch exited %d: %s", rc, out ? out : "-");
    free(out);
    (void)!tsup_runl(NULL, "/bin/rm", "-rf", state, NULL);

    /* A node without EIP-1559. */
    tsup_anvil old;
    const char *berlin[] = {"--hardfork", "berlin", NULL};
    if (tsup_anvil_start(&old, berlin) == 0) {
        chain_rpc *orpc;
        chain_txm om;
        chain_address to = {{0x43}};
        chain_u256 one = chain_u256_from_u64(1);
        CHECK(chain_rpc_open(&orpc, old.url, NULL) == 0);
        CHECK(chain_key_from_hex(&k, KEY0) == 0 && chain_txm_init(&om, orpc, &k, NULL) == 0);
        rc = chain_txm_send(&om, &r, &to, &one, NULL, 0);
        CHECK_MSG(rc == 0 && om.legacy == 1 && r.status == 1, "berlin: %s", ovt_errmsg());
        if (rc == 0) {
            char h[67];
            json_t *tx;
            chain_hash_hex(h, &r.tx_hash);
            CHECK(chain_rpc_call(orpc, &tx, "eth_getTransactionByHash", json_pack("[s]", h)) == 0);
            const char *type = json_string_value(json_object_get(tx, "type"));
            CHECK_MSG(type && !strcmp(type, "0x0"), "type %s", type ? type : "-");
            json_decref(tx);
            chain_receipt_free(&r);
        }
        chain_txm_free(&om);
        chain_rpc_close(orpc);
        tsup_anvil_stop(&old);
    } else {
        CHECK_MSG(0, "anvil --hardfork berlin did not start");
    }

    chain_txm_free(&m);
    ovt_wipe(&k, sizeof k);
    chain_rpc_close(rpc);
    chain_rpc_close(direct);
    tsup_rpcproxy_stop(&proxy);
    tsup_anvil_stop(&node);
    return check_done();
}
