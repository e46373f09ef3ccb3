/* `ovt deploy` and `ovt game` (the built binary, OVT_BINARY_DIR/ovt) against a real anvil:
 * with --private-key and with a keystore + password file; the address is
 * the one cast computes for the deployer's nonce, the code there answers a
 * pure call through cast, OvtNarrow is at the next nonce and bound to it
 * (its arbitration() is the arbitration contract), --no-narrow deploys the
 * arbitration contract alone, and bad invocations fail with clear messages
 * that never repeat the key; a node before Shanghai is named as such;
 * chain_narrow_check_bound (--narrow of the agents and the arbiter) takes
 * the bound OvtNarrow only. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "chain/keystore.h"
#include "chain/narrow.h"
#include "check.h"
#include "common/fileio.h"
#include "support/anvil.h"
#include "support/proc.h"

static const char *KEY0 = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
static const char *cast;
static char ovt[4096];
static tsup_anvil node;

/* Runs a shell command line, stdout and stderr together into *out. */
static int sh(char **out, const char *fmt, ...) OVT_PRINTF(2, 3);
static int sh(char **out, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[8300];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    return tsup_runl(out, "/bin/sh", "-c", full, NULL);
}

/* The address cast computes for the deployer at nonce. */
static int address_at(char out[43], const char *deployer, unsigned nonce)
{
    char *want = NULL, nonce_s[16];
    snprintf(nonce_s, sizeof nonce_s, "%u", nonce);
    int rc = tsup_runl(&want, cast, "compute-address", deployer, "--nonce", nonce_s, NULL);
    const char *at = want ? strstr(want, "0x") : NULL;
    snprintf(out, 43, "%s", rc == 0 && at ? at : "-");
    free(want);
    return rc == 0 && at ? 0 : -1;
}

/* Checks one --json result: address = cast compute-address of the deployer
 * at `nonce`, and the code there computes depthOf(7) = 3; with `pair`,
 * narrow.address is at nonce + 1 and its arbitration() is address. */
static void check_deployed(const char *out, const char *deployer, unsigned nonce, int pair)
{
    json_error_t jerr;
    json_t *o = out ? json_loads(out, 0, &jerr) : NULL;
    CHECK_MSG(o != NULL, "ovt deploy --json printed: %s", out ? out : "(nothing)");
    if (!o)
        return;
    const char *addr = json_string_value(json_object_get(o, "address"));
    const char *from = json_string_value(json_object_get(o, "deployer"));
    CHECK(addr && from && strcasecmp(from, deployer) == 0);
    CHECK(json_integer_value(json_object_get(o, "chain_id")) == 31337);
    CHECK(json_integer_value(json_object_get(o, "gas_used")) > 1000000);
    char want[43];
    CHECK(address_at(want, deployer, nonce) == 0);
    CHECK_MSG(addr && strcasecmp(want, addr) == 0, "cast: %s, ovt: %s", want, addr ? addr : "-");
    char *depth = NULL;
    CHECK(addr && tsup_runl(&depth, cast, "call", "--rpc-url", node.url, addr, "depthOf(uint64)(uint8)", "7", NULL) == 0);
    CHECK_MSG(depth && strcmp(depth, "3") == 0, "depthOf(7) = %s", depth ? depth : "-");
    free(depth);
    json_t *narrow = json_object_get(o, "narrow");
    CHECK_MSG(pair == (narrow != NULL), "narrow %s: %s", pair ? "missing" : "printed with --no-narrow", out);
    const char *naddr = json_string_value(json_object_get(narrow, "address"));
    if (pair && addr && naddr) {
        CHECK(address_at(want, deployer, nonce + 1) == 0);
        CHECK_MSG(strcasecmp(want, naddr) == 0, "OvtNarrow: cast %s, ovt %s", want, naddr);
        CHECK(json_integer_value(json_object_get(narrow, "gas_used")) > 1000000);
        char *bound = NULL;
        CHECK(tsup_runl(&bound, cast, "call", "--rpc-url", node.url, naddr, "arbitration()(address)", NULL) == 0);
        CHECK_MSG(bound && strcasecmp(bound, addr) == 0, "OvtNarrow.arbitration() = %s, not %s", bound ? bound : "-",
                  addr);
        free(bound);
    }
    json_decref(o);
}

static void test_private_key(void)
{
    char *out = NULL;
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --json", ovt, node.url, KEY0) == 0);
    check_deployed(out, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", 0, 1);
    free(out);
    /* the text form names both contracts too */
    CHECK(sh(&out, "ETH_RPC_URL=%s %s deploy --private-key %s", node.url, ovt, KEY0) == 0);
    CHECK(out && strstr(out, "contract  0x") != NULL && strstr(out, "narrow    0x") != NULL);
    free(out);
    /* alone: one transaction, at nonce 4 after the two pairs */
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --no-narrow --json", ovt, node.url, KEY0) == 0);
    check_deployed(out, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", 4, 0);
    free(out);
    /* a record of the contract alone is not taken for a pair, and reported again with --no-narrow */
    char dir[] = "/tmp/ovt_deploy_XXXXXX", rec[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(rec, sizeof rec, "%s/deployment.json", dir);
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --no-narrow --out %s --json", ovt, node.url, KEY0, rec) ==
          0);
    check_deployed(out, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", 5, 0);
    free(out);
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --out %s", ovt, node.url, KEY0, rec) == 1);
    CHECK_MSG(out && strstr(out, "records the arbitration contract alone") && strstr(out, "--no-narrow"), "%s",
              out ? out : "-");
    free(out);
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --no-narrow --out %s --json", ovt, node.url, KEY0, rec) ==
          0);
    check_deployed(out, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", 5, 0);
    free(out);
    /* a pair's record whose arbitration contract is not at the nonce before
     * OvtNarrow's: refused (the two cannot be bound), and nothing sent */
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --out %s.pair", ovt, node.url, KEY0, rec) == 0);
    free(out);
    char pair[320];
    snprintf(pair, sizeof pair, "%s.pair", rec);
    json_t *r = json_load_file(pair, 0, NULL);
    json_t *n = json_object_get(r, "narrow");
    CHECK(json_integer_value(json_object_get(n, "nonce")) == 7);
    json_object_set_new(n, "nonce", json_integer(9));
    json_object_del(n, "tx_hash");
    json_object_set_new(n, "tx_hashes", json_array());
    CHECK(r && json_dump_file(r, pair, 0) == 0);
    json_decref(r);
    char *before = NULL, *after = NULL;
    CHECK(tsup_runl(&before, cast, "nonce", "--rpc-url", node.url, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
                    NULL) == 0);
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --out %s", ovt, node.url, KEY0, pair) == 1);
    CHECK_MSG(out && strstr(out, "the arbitration contract was created at") && strstr(out, "nonce 8") &&
                  strstr(out, "deploy the pair again"),
              "%s", out ? out : "-");
    free(out);
    CHECK(tsup_runl(&after, cast, "nonce", "--rpc-url", node.url, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
                    NULL) == 0);
    CHECK_MSG(before && after && strcmp(before, after) == 0, "nonce %s then %s", before ? before : "-",
              after ? after : "-");
    free(before);
    free(after);
    unlink(pair);
    unlink(rec);
    rmdir(dir);
}

static void test_keystore(void)
{
    char dir[] = "/tmp/ovt_deploy_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char ks[256], pw[256];
    snprintf(ks, sizeof ks, "%s/key.json", dir);
    snprintf(pw, sizeof pw, "%s/password", dir);
    chain_privkey key;
    chain_address addr;
    CHECK(chain_key_generate(&key) == 0 && chain_key_address(&addr, &key) == 0);
    CHECK(chain_keystore_write(ks, &key, "correct horse", 13, &chain_scrypt_light) == 0);
    ovt_wipe(&key, sizeof key);
    CHECK(ovt_write_atomic(pw, "correct horse\n", 14, 0600) == 0);
    char a[43], *out = NULL;
    chain_address_to_string(a, &addr);
    CHECK(tsup_runl(&out, cast, "rpc", "--rpc-url", node.url, "anvil_setBalance", a, "0x56bc75e2d63100000",
                    NULL) == 0);
    free(out);
    CHECK(sh(&out, "%s deploy --rpc-url %s --keystore %s --password-file %s --json", ovt, node.url, ks, pw) == 0);
    check_deployed(out, a, 0, 1);
    free(out);

    CHECK(ovt_write_atomic(pw, "wrong horse\n", 12, 0600) == 0);
    CHECK(sh(&out, "%s deploy --rpc-url %s --keystore %s --password-file %s", ovt, node.url, ks, pw) == 1);
    CHECK_MSG(out && strstr(out, "ovt deploy:") && (strstr(out, "password") || strstr(out, "MAC")),
              "wrong password: %s", out ? out : "-");
    free(out);
    unlink(ks);
    unlink(pw);
    rmdir(dir);
}

static void test_bad_invocations(void)
{
    char *out = NULL;
    CHECK(sh(&out, "%s deploy --help", ovt) == 0);
    CHECK(out && strstr(out, "--rpc-url") && strstr(out, "--keystore"));
    free(out);
    CHECK(sh(&out, "env -u ETH_RPC_URL %s deploy --private-key %s", ovt, KEY0) == 2);
    CHECK(out && strstr(out, "--rpc-url is required"));
    free(out);
    CHECK(sh(&out, "%s deploy --rpc-url %s", ovt, node.url) == 2);
    CHECK(out && strstr(out, "exactly one of --keystore and --private-key"));
    free(out);
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --keystore /nonexistent", ovt, node.url, KEY0) == 2);
    free(out);
    /* a malformed key: refused, and its text is not echoed */
    const char *bad = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ffzz";
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s", ovt, node.url, bad) == 1);
    CHECK_MSG(out && strstr(out, "--private-key") && !strstr(out, "ac0974bec39a"), "%s", out ? out : "-");
    free(out);
    /* a node that is not there */
    int port = tsup_free_port();
    CHECK(sh(&out, "%s deploy --rpc-url http://127.0.0.1:%d --private-key %s", ovt, port, KEY0) == 1);
    CHECK_MSG(out && strstr(out, "ovt deploy:") && !strstr(out, "ac0974bec39a"), "%s", out ? out : "-");
    free(out);
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --confirmations 0", ovt, node.url, KEY0) == 2);
    free(out);
}

/* --narrow of the agents and the arbiter: the OvtNarrow bound to the
 * contract is accepted; another pair's, the arbitration contract itself and
 * an account are refused at startup with the address to give instead. */
static void test_narrow_bound(void)
{
    char *out = NULL, addr[2][2][43];
    for (int k = 0; k < 2; k++) {
        CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --json", ovt, node.url, KEY0) == 0);
        json_t *o = out ? json_loads(out, 0, NULL) : NULL;
        const char *a = json_string_value(json_object_get(o, "address"));
        const char *n = json_string_value(json_object_get(json_object_get(o, "narrow"), "address"));
        snprintf(addr[k][0], 43, "%s", a ? a : "");
        snprintf(addr[k][1], 43, "%s", n ? n : "");
        json_decref(o);
        free(out);
    }
    chain_rpc *rpc = NULL;
    chain_arb arb;
    chain_address a, n;
    CHECK(chain_rpc_open(&rpc, node.url, NULL) == 0);
    CHECK(chain_address_from_string(&a, addr[0][0]) == 0 && chain_arb_attach(&arb, rpc, &a) == 0);
    CHECK(chain_address_from_string(&n, addr[0][1]) == 0 && chain_narrow_check_bound(&arb, &n) == 0);
    CHECK(chain_address_from_string(&n, addr[1][1]) == 0 && chain_narrow_check_bound(&arb, &n) == OVT_EINVAL);
    CHECK_MSG(strstr(ovt_errmsg(), "of another arbitration contract") && strstr(ovt_errmsg(), "narrow.address"), "%s",
              ovt_errmsg());
    CHECK(chain_narrow_check_bound(&arb, &a) == OVT_EINVAL);
    CHECK_MSG(strstr(ovt_errmsg(), "is not an OvtNarrow contract"), "%s", ovt_errmsg());
    CHECK(chain_address_from_string(&n, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8") == 0 &&
          chain_narrow_check_bound(&arb, &n) == OVT_EINVAL);
    ovt_err_clear();
    chain_rpc_close(rpc);
    /* ovt arbiter watch says it at startup, before watching anything */
    char dir[] = "/tmp/ovt_deploy_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(sh(&out,
             "%s arbiter watch --rpc-url %s --contract %s --narrow %s --private-key %s --store file://%s/store "
             "--state-dir %s/state",
             ovt, node.url, addr[0][0], addr[1][1], KEY0, dir, dir) == 1);
    CHECK_MSG(out && strstr(out, "of another arbitration contract") && strstr(out, addr[0][0]), "%s",
              out ? out : "-");
    free(out);
    CHECK(tsup_runl(NULL, "/bin/rm", "-rf", dir, NULL) == 0);
}

/* `ovt game` on a run opened with cast: the fields read back, an unknown run
 * is a clear error. */
static void test_game_command(void)
{
    char *out = NULL;
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s --json", ovt, node.url, KEY0) == 0);
    json_t *o = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    const char *addr = json_string_value(json_object_get(o, "address"));
    CHECK(addr != NULL);
    if (!addr) {
        json_decref(o);
        return;
    }
    char contract[43];
    snprintf(contract, sizeof contract, "%s", addr);
    json_decref(o);
    static const char params[] =
        "(0x70997970C51812dc3A010C7d01b50e0d17dc79C8,0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC,"
        "[0x90F79bf6EB2c4f870365E785982E1f101E93b906,0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65,"
        "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc,0x0000000000000000000000000000000000000000,"
        "0x0000000000000000000000000000000000000000],"
        "0x1111111111111111111111111111111111111111111111111111111111111111,"
        "0x2222222222222222222222222222222222222222222222222222222222222222,1000,3600,600,7200,5,6,2,7,42)";
    static const char sig[] =
        "(address,address,address[5],bytes32,bytes32,uint64,uint32,uint32,uint32,uint96,uint96,uint8,uint96,uint64)";
    char fn[256], *run_id = NULL;
    snprintf(fn, sizeof fn, "computeRunId(%s)(bytes32)", sig);
    CHECK(tsup_runl(&run_id, cast, "call", "--rpc-url", node.url, contract, fn, params, NULL) == 0);
    snprintf(fn, sizeof fn, "open(%s)", sig);
    CHECK(tsup_runl(&out, cast, "send", "--rpc-url", node.url, "--private-key", KEY0, contract, fn, params, NULL) ==
          0);
    free(out);
    CHECK(run_id != NULL);
    if (!run_id)
        return;
    CHECK(sh(&out, "%s game --rpc-url %s --contract %s --run-id %s --json", ovt, node.url, contract, run_id) == 0);
    o = out ? json_loads(out, 0, NULL) : NULL;
    CHECK_MSG(o != NULL, "ovt game --json: %s", out ? out : "-");
    json_t *run = json_object_get(o, "run"), *game = json_object_get(o, "game");
    CHECK(json_integer_value(json_object_get(run, "steps")) == 1000);
    CHECK(json_integer_value(json_object_get(run, "move_timeout")) == 600);
    const char *trainer = json_string_value(json_object_get(run, "trainer"));
    CHECK(trainer && strcmp(trainer, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8") == 0);
    const char *bond = json_string_value(json_object_get(run, "auditor_bond"));
    CHECK(bond && strcmp(bond, "6") == 0);
    const char *phase = json_string_value(json_object_get(game, "phase"));
    CHECK(phase && strcmp(phase, "committing") == 0);
    CHECK(json_integer_value(json_object_get(game, "depth")) == 10);
    const char *refuted = json_string_value(json_object_get(game, "refuted_by"));
    CHECK(refuted && strcmp(refuted, "0x0000000000000000000000000000000000000000000000000000000000000000") == 0);
    /* the committee as cast opened it: three seats, two to agree, 7 wei each, nobody seated yet */
    json_t *committee = json_object_get(o, "committee"), *seats = json_object_get(committee, "seats");
    CHECK(json_integer_value(json_object_get(committee, "count")) == 3);
    CHECK(json_integer_value(json_object_get(committee, "threshold")) == 2);
    const char *abond = json_string_value(json_object_get(committee, "arbiter_bond"));
    CHECK(abond && strcmp(abond, "7") == 0);
    CHECK(json_array_size(seats) == 3);
    const char *second = json_string_value(json_object_get(json_array_get(seats, 1), "arbiter"));
    CHECK(second && strcmp(second, "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65") == 0);
    CHECK(json_is_false(json_object_get(json_array_get(seats, 2), "seated")));
    json_decref(o);
    free(out);
    CHECK(sh(&out, "%s game --rpc-url %s --contract %s --run-id %s", ovt, node.url, contract, run_id) == 0);
    CHECK(out && strstr(out, "phase            committing"));
    CHECK_MSG(out && strstr(out, "committee 2 of 3 settle, arbiter bond 7 wei") &&
                  strstr(out, "seat 2 0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc not seated"),
              "%s", out ? out : "-");
    free(out);

    run_id[5] ^= 1; /* another run */
    CHECK(sh(&out, "%s game --rpc-url %s --contract %s --run-id %s", ovt, node.url, contract, run_id) == 1);
    CHECK_MSG(out && strstr(out, "UnknownRun"), "%s", out ? out : "-");
    free(out);
    CHECK(sh(&out, "%s game --rpc-url %s --contract %s --run-id 0x1234", ovt, node.url, contract) == 2);
    free(out);
    free(run_id);
}

/* A node whose EVM predates Shanghai (anvil --hardfork berlin): the contract's
 * bytecode uses PUSH0, so the deployment cannot run there, and ovt deploy
 * says what the node lacks and what to use instead, not only the node's
 * "EVM error NotActivated". */
static void test_node_before_shanghai(void)
{
    tsup_anvil old;
    const char *berlin[] = {"--hardfork", "berlin", NULL};
    if (tsup_anvil_start(&old, berlin) != 0) {
        CHECK_MSG(0, "anvil --hardfork berlin did not start");
        return;
    }
    char *out = NULL;
    CHECK(sh(&out, "%s deploy --rpc-url %s --private-key %s", ovt, old.url, KEY0) == 1);
    CHECK_MSG(out && strstr(out, "predates the Shanghai upgrade") && strstr(out, "PUSH0") &&
                  strstr(out, "Shanghai or later") && !strstr(out, KEY0),
              "%s", out ? out : "");
    free(out);
    tsup_anvil_stop(&old);
}

int main(void)
{
    cast = getenv("OVT_CAST");
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!cast || !*cast || !bin) {
        fprintf(stderr, "OVT_CAST and OVT_BINARY_DIR must be set (run through ctest)\n");
        return 1;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    if (access(ovt, X_OK) != 0) {
        fprintf(stderr, "%s is not built\n", ovt);
        return 1;
    }
    if (tsup_anvil_start(&node, NULL) != 0)
        return 1;
    CHECK_RUN(test_private_key());
    CHECK_RUN(test_keystore());
    CHECK_RUN(test_bad_invocations());
    CHECK_RUN(test_game_command());
    CHECK_RUN(test_narrow_bound());
    CHECK_RUN(test_node_before_shanghai());
    tsup_anvil_stop(&node);
    return check_done();
}
