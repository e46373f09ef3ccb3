/* Commands run again after any failure, on anvil with a 1 s block time and
 * confirmations above one (so being mined is not being confirmed):
 *   ovt deploy --out F killed right after its first transaction left
 *   (test-only OVT_TEST_EXIT_AFTER_SEND), between the arbitration contract
 *   and OvtNarrow, and run again: one pair, the same addresses, OvtNarrow
 *   sent at the nonce the arbitration contract was bound to, the deployer's
 *   nonce used twice; run a third time it reports the same deployment and
 *   sends nothing; killed right after OvtNarrow's transaction left: the same;
 *   killed after the first, with OvtNarrow's nonce then taken by another
 *   transaction of the account: run again it refuses, names the lost
 *   binding and says to deploy again, and sends nothing, each time;
 *   ovt commit killed at each point (after the open is sent, after it is
 *   confirmed, after the commit is sent, after it is confirmed) and run
 *   again: each time exactly one more run on chain, opened once, committed
 *   once by the trainer, with a receipt `ovt verify` accepts. (Once
 *   receipt.json is written the commit is finished: test_party_game commits
 *   one directory several times as separate runs.) */
#include <jansson.h>
#include <stdlib.h>

#include "support/ovt_fixture.h"
#include "chain/arbitration.h"
#include "chain/session.h"
#include "check.h"
#include "support/anvil.h"

static const char *const keys[4] = {
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", /* deployer */
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", /* trainer */
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a", /* auditor */
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6", /* arbiter */
};
enum { DEPLOYER, TRAINER, AUDITOR, ARBITER };

static tsup_anvil node;
static chain_rpc *rpc;
static chain_arb arb;
static char contract[43], addr[4][43], base_run[512];

static void json_str(const char *text, const char *key, char *out, size_t cap)
{
    json_t *j = json_loads(text ? text : "", 0, NULL);
    const char *v = json_string_value(json_object_get(j, key));
    snprintf(out, cap, "%s", v ? v : "");
    json_decref(j);
}

static uint64_t nonce_of(int who)
{
    chain_address a;
    uint64_t n = 0;
    if (chain_address_from_string(&a, addr[who]) || chain_rpc_nonce(rpc, &n, &a, "latest"))
        return UINT64_MAX;
    return n;
}

/* ovt deploy --out out_path, killed after its Nth send (exit_after) or not;
 * the printed addresses of the pair (may be NULL). */
static void deploy(const char *out_path, const char *exit_after, int want_rc, char address[43], char narrow[43])
{
    char *out = NULL;
    if (exit_after)
        setenv("OVT_TEST_EXIT_AFTER_SEND", exit_after, 1);
    int rc = af_ovt_run(&out, "deploy", "--rpc-url", node.url, "--private-key", keys[DEPLOYER], "--confirmations",
                        "3", "--out", out_path, "--json", NULL);
    unsetenv("OVT_TEST_EXIT_AFTER_SEND");
    CHECK_MSG(rc == want_rc, "ovt deploy exited %d, not %d", rc, want_rc);
    if (address)
        json_str(out, "address", address, 43);
    if (narrow) {
        json_t *j = json_loads(out ? out : "", 0, NULL);
        const char *v = json_string_value(json_object_get(json_object_get(j, "narrow"), "address"));
        snprintf(narrow, 43, "%s", v ? v : "");
        json_decref(j);
    }
    free(out);
}

/* OvtNarrow at `narrow` has code and is bound to the arbitration contract
 * at `address`, at the deployer's nonces n and n + 1. */
static void check_pair(const char *address, const char *narrow, uint64_t n)
{
    chain_address deployer, a, nw, want;
    CHECK(chain_address_from_string(&deployer, addr[DEPLOYER]) == 0);
    CHECK(chain_address_from_string(&a, address) == 0 && chain_address_from_string(&nw, narrow) == 0);
    CHECK(chain_create_address(&want, &deployer, n) == 0 && chain_address_eq(&want, &a));
    CHECK(chain_create_address(&want, &deployer, n + 1) == 0 && chain_address_eq(&want, &nw));
    chain_arb at;
    CHECK(chain_arb_attach(&at, rpc, &nw) == 0);
    json_t *res = NULL;
    const char *data = "0x9b732350"; /* arbitration() */
    int rc = chain_rpc_call(rpc, &res, "eth_call", json_pack("[{s:s, s:s}, s]", "to", narrow, "data", data, "latest"));
    const char *word = json_string_value(res);
    char bound[43] = "";
    if (rc == 0 && word && strlen(word) == 66)
        snprintf(bound, sizeof bound, "0x%s", word + 26);
    CHECK_MSG(strcasecmp(bound, address) == 0, "OvtNarrow.arbitration() = %s, not %s", bound, address);
    json_decref(res);
}

static void test_deploy(void)
{
    char path[600], a1[43] = "", a2[43] = "", n1[43] = "", n2[43] = "";
    snprintf(path, sizeof path, "%s/deployment.json", af_dir);
    deploy(path, "1", 86, NULL, NULL); /* killed with the arbitration contract's creation just sent */
    deploy(path, NULL, 0, a1, n1);
    CHECK_EQ_U64(nonce_of(DEPLOYER), 2);
    deploy(path, NULL, 0, a2, n2); /* and again: the same deployment, nothing sent */
    CHECK(strlen(a1) == 42 && strcmp(a1, a2) == 0 && strcmp(n1, n2) == 0);
    CHECK_EQ_U64(nonce_of(DEPLOYER), 2);
    check_pair(a1, n1, 0);
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(path, &buf, &len, 1 << 20) == 0);
    char rec[43];
    json_str((char *)buf, "address", rec, sizeof rec);
    json_t *j = json_loads((char *)buf, 0, NULL);
    CHECK(strcmp(rec, a1) == 0 && json_integer_value(json_object_get(j, "block_number")) > 0);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "narrow"), "nonce")) == 1);
    json_decref(j);
    free(buf);
    snprintf(contract, sizeof contract, "%s", a1);

    /* killed with OvtNarrow's creation just sent */
    snprintf(path, sizeof path, "%s/deployment2.json", af_dir);
    deploy(path, "2", 86, NULL, NULL);
    deploy(path, NULL, 0, a1, n1);
    CHECK_EQ_U64(nonce_of(DEPLOYER), 4);
    check_pair(a1, n1, 2);
}

/* Killed between the two; another transaction of the account takes
 * OvtNarrow's nonce: refused, twice, with nothing sent. */
static void test_deploy_nonce_taken(void)
{
    char path[600], cmd[2048];
    snprintf(path, sizeof path, "%s/deployment3.json", af_dir);
    uint64_t n = nonce_of(DEPLOYER);
    deploy(path, "1", 86, NULL, NULL);
    chain_privkey k;
    chain_txm m;
    chain_receipt r;
    chain_address to;
    CHECK(chain_key_from_hex(&k, keys[DEPLOYER]) == 0 && chain_txm_init(&m, rpc, &k, NULL) == 0);
    ovt_wipe(&k, sizeof k);
    CHECK(chain_address_from_string(&to, addr[ARBITER]) == 0);
    CHECK(chain_txm_send(&m, &r, &to, NULL, NULL, 0) == 0); /* takes n + 1: the creation holds n */
    chain_receipt_free(&r);
    chain_txm_free(&m);
    CHECK_EQ_U64(nonce_of(DEPLOYER), n + 2);
    snprintf(cmd, sizeof cmd, "%s deploy --rpc-url %s --private-key %s --out %s 2>&1", af_ovt, node.url,
             keys[DEPLOYER], path);
    for (int i = 0; i < 2; i++) {
        char *out = NULL;
        int rc = tsup_runl(&out, "/bin/sh", "-c", cmd, NULL);
        CHECK_MSG(rc == 1 && out && strstr(out, "was taken by another transaction") &&
                      strstr(out, "deploy the pair again") && !strstr(out, keys[DEPLOYER] + 2),
                  "rc %d: %s", rc, out ? out : "-");
        free(out);
        CHECK_EQ_U64(nonce_of(DEPLOYER), n + 2);
    }
}

static size_t count_events(chain_arb_event_kind kind, const ovt_hash *run_id)
{
    uint64_t head;
    chain_arb_event *ev;
    size_t n, c = 0;
    if (chain_rpc_block_number(rpc, &head) || chain_arb_get_events(&arb, run_id, 0, head, &ev, &n))
        return SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        c += ev[i].kind == kind;
    free(ev);
    return c;
}

static int commit(const char *dir, char rid[67])
{
    char *out = NULL;
    int rc = af_ovt_run(&out, "commit", dir, "--rpc-url", node.url, "--contract", contract, "--auditor",
                        addr[AUDITOR], "--arbiter", addr[ARBITER], "--bond", "1000", "--private-key", keys[TRAINER],
                        "--confirmations", "2", "--json", NULL);
    if (rid)
        json_str(out, "run_id", rid, 67);
    free(out);
    return rc;
}

/* Kills ovt commit at one point (an env var of the test-only fault
 * injection), runs it again, checks the outcome. */
static void interrupted_commit(const char *name, const char *var, const char *value)
{
    char dir[600], rid[67] = "", path[700];
    snprintf(dir, sizeof dir, "%s/%s", af_dir, name);
    CHECK(tsup_runl(NULL, "/bin/cp", "-r", base_run, dir, NULL) == 0);
    size_t runs0 = count_events(CHAIN_ARB_EV_RUN_OPENED, NULL);
    setenv(var, value, 1);
    int rc = commit(dir, NULL);
    unsetenv(var);
    CHECK_MSG(rc == 86, "%s: the interrupted ovt commit exited %d", name, rc);
    rc = commit(dir, rid);
    CHECK_MSG(rc == 0, "%s: ovt commit run again exited %d", name, rc);
    ovt_hash id;
    CHECK(chain_parse_hash(&id, "run id", rid) == 0);
    CHECK_MSG(count_events(CHAIN_ARB_EV_RUN_OPENED, NULL) == runs0 + 1, "%s: not exactly one new run", name);
    CHECK_EQ_U64(count_events(CHAIN_ARB_EV_RUN_OPENED, &id), 1);
    CHECK_EQ_U64(count_events(CHAIN_ARB_EV_COMMITTED, &id), 1);
    chain_arb_game g;
    CHECK(chain_arb_get_game(&arb, &id, NULL, &g) == 0 && g.phase == CHAIN_ARB_PHASE_COMMITTING);
    snprintf(path, sizeof path, "%s/receipt.json", dir);
    char *vout = NULL;
    CHECK(af_ovt_run(&vout, "verify", path, "--data", af_text, NULL) == 0);
    CHECK_MSG(vout && strstr(vout, "ok   run_id "), "%s: %s", name, vout ? vout : "(none)");
    free(vout);
}

int main(void)
{
    CHECK(af_init("aud-resume") == 0);
    const char *args[] = {"--block-time", "1", NULL};
    if (tsup_anvil_start(&node, args) != 0)
        return 1;
    for (int i = 0; i < 4; i++) {
        chain_privkey k;
        chain_address a;
        CHECK(chain_key_from_hex(&k, keys[i]) == 0 && chain_key_address(&a, &k) == 0);
        chain_address_to_string(addr[i], &a);
    }
    CHECK(chain_rpc_open(&rpc, node.url, NULL) == 0);
    CHECK_RUN(test_deploy());
    CHECK_RUN(test_deploy_nonce_taken());
    chain_address ca;
    if (chain_address_from_string(&ca, contract) || chain_arb_attach(&arb, rpc, &ca)) {
        fprintf(stderr, "no contract: %s\n", ovt_errmsg());
        tsup_anvil_stop(&node);
        return 1;
    }
    CHECK(af_train("run", 4, base_run, sizeof base_run) == 0);
    CHECK_RUN(interrupted_commit("open-sent", "OVT_TEST_EXIT_AFTER_SEND", "1"));
    CHECK_RUN(interrupted_commit("opened", "OVT_TEST_EXIT_AT", "opened"));
    CHECK_RUN(interrupted_commit("commit-sent", "OVT_TEST_EXIT_AFTER_SEND", "2"));
    CHECK_RUN(interrupted_commit("committed", "OVT_TEST_EXIT_AT", "committed"));
    chain_rpc_close(rpc);
    tsup_anvil_stop(&node);
    af_cleanup();
    return check_done();
}
