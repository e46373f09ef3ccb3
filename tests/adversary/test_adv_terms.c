/* Hostile run terms on a real anvil: an honest party keeps its bond.
 *   The reviewed theft: a trainer opens a run over a step table with a wrong
 *   state at step 4, naming its own second address as arbiter, an 18 ETH
 *   auditor bond and a 30 s move timeout. `ovt audit --agent` refuses it
 *   before fetching or sending anything, naming the arbiter, the bond and
 *   the timeout; the auditor's balance and nonce are unchanged; `ovt agent`
 *   refuses the same run before any move. Without
 *   --accept-arbiter it refuses and says how to name one.
 *   Within its policy (a --policy file, a flag overriding it) the auditor
 *   that finds that run divergent still commits its root and its bond.
 *   Other hostile terms (tiny commit, move and verdict timeouts, a uint96
 *   maximum bond) are each refused by name; the trainer as its own arbiter
 *   is refused by the contract itself (BadParty).
 *   The same theft against the trainer's join path (`ovt commit --run-id`):
 *   refused, the trainer's balance unchanged. An honest run opened by
 *   someone else is joined, and the receipt carries the run's real nonce
 *   (from RunOpened) so `ovt verify` derives its runId. */
#include <dirent.h>
#include <jansson.h>
#include <strings.h>
#include <sys/stat.h>

#include "adv_fixture.h"
#include "chain/arbitration.h"
#include "chain/session.h"
#include "check.h"
#include "support/anvil.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "store/store.h"

static tsup_anvil node;
static chain_rpc *rpc;
static chain_arb arb;
static char contract[43], addr[6][43], store_url[700], honest_dir[512], faulty_dir[512];

static const char *const ETH18 = "18000000000000000000";

static void json_str(const char *text, const char *key, char *out, size_t cap)
{
    json_t *j = json_loads(text ? text : "", 0, NULL);
    const char *v = json_string_value(json_object_get(j, key));
    snprintf(out, cap, "%s", v ? v : "");
    json_decref(j);
}

static int has(const char *text, const char *what)
{
    return text && strcasestr(text, what) != NULL;
}

static chain_u256 balance(int who)
{
    chain_address a;
    chain_u256 b;
    memset(&b, 0, sizeof b);
    CHECK(chain_address_from_string(&a, addr[who]) == 0 && chain_rpc_balance(rpc, &b, &a, "latest") == 0);
    return b;
}

static uint64_t nonce_of(int who)
{
    chain_address a;
    uint64_t n = 0;
    CHECK(chain_address_from_string(&a, addr[who]) == 0 && chain_rpc_nonce(rpc, &n, &a, "latest") == 0);
    return n;
}

static unsigned game_flags(const char *rid)
{
    ovt_hash id;
    chain_arb_game g;
    CHECK(chain_parse_hash(&id, "id", rid) == 0 && chain_arb_get_game(&arb, &id, NULL, &g) == 0);
    return g.flags;
}

/* The trainer opens a run over dir with the given terms and commits. */
static int open_run(char rid[67], const char *dir, const char *arbiter, const char *bond, const char *auditor_bond,
                    const char *cto, const char *mto, const char *vto)
{
    char *out = NULL;
    int rv = adv_ovt(&out, NULL, "commit", dir, "--rpc-url", node.url, "--contract", contract, "--private-key",
                     adv_keys[ADV_TRAINER], "--auditor", addr[ADV_AUDITOR], "--arbiter", arbiter, "--bond", bond,
                     "--auditor-bond", auditor_bond, "--commit-timeout", cto, "--move-timeout", mto,
                     "--verdict-timeout", vto, "--store", store_url, "--data", af_text, "--json", NULL);
    json_str(out, "run_id", rid, 67);
    free(out);
    return rv;
}

/* `ovt audit STORE --run-id rid --agent` with the auditor's key and extra
 * policy arguments (up to 6, NULL-terminated); stderr into *err. */
static int audit(const char *rid, const char *out_dir, char **err, const char *p1, const char *p2, const char *p3,
                 const char *p4, const char *p5, const char *p6)
{
    return adv_ovt(NULL, err, "audit", store_url, "--run-id", rid, "--out", out_dir, "--backend", "ref", "--rpc-url",
                   node.url, "--contract", contract, "--private-key", adv_keys[ADV_AUDITOR], "--agent",
                   "--poll-interval", "0.1", p1, p2, p3, p4, p5, p6, NULL);
}

static void test_theft_refused_by_auditor(void)
{
    char rid[67], out_dir[600], fetched[700];
    CHECK(open_run(rid, faulty_dir, addr[ADV_ACCOMPLICE], "0", ETH18, "3600", "30", "3600") == 0);
    CHECK(strlen(rid) == 66);
    chain_u256 b0 = balance(ADV_AUDITOR);
    uint64_t n0 = nonce_of(ADV_AUDITOR);
    snprintf(out_dir, sizeof out_dir, "%s/aud-theft", af_dir);
    char *err = NULL;
    int rv = audit(rid, out_dir, &err, "--accept-arbiter", addr[ADV_ARBITER], NULL, NULL, NULL, NULL);
    CHECK_MSG(rv == 1, "exit %d: %s", rv, err);
    CHECK_MSG(has(err, addr[ADV_ACCOMPLICE]) && has(err, "not an accepted arbiter"), "%s", err);
    CHECK_MSG(has(err, "auditor bond (this party's) 18000000000000000000 wei exceeds --max-bond"), "%s", err);
    CHECK_MSG(has(err, "move timeout 30 s is below --min-move-timeout 60"), "%s", err);
    CHECK_MSG(has(err, "nothing was sent"), "%s", err);
    free(err);
    /* Refused before the store was even read, and before any transaction. */
    snprintf(fetched, sizeof fetched, "%s/trainer", out_dir);
    CHECK(access(fetched, F_OK) != 0);
    chain_u256 b1 = balance(ADV_AUDITOR);
    CHECK(chain_u256_cmp(&b0, &b1) == 0);
    CHECK_EQ_U64(nonce_of(ADV_AUDITOR), n0);
    CHECK((game_flags(rid) & CHAIN_ARB_FLAG_AUDITOR) == 0);

    /* `ovt agent` for the same run checks the same terms before any move. */
    err = NULL;
    rv = adv_ovt(NULL, &err, "agent", "--role", "auditor", "--run-id", rid, "--rpc-url", node.url, "--contract",
                 contract, "--private-key", adv_keys[ADV_AUDITOR], "--run", out_dir, "--accept-arbiter",
                 addr[ADV_ARBITER], NULL);
    CHECK_MSG(rv == 1 && has(err, addr[ADV_ACCOMPLICE]) && has(err, "nothing was sent"), "%d %s", rv, err);
    free(err);
    CHECK_EQ_U64(nonce_of(ADV_AUDITOR), n0);
    /* No arbiter named at all: refused, saying how to name one. */
    err = NULL;
    rv = audit(rid, out_dir, &err, NULL, NULL, NULL, NULL, NULL, NULL);
    CHECK_MSG(rv == 1 && has(err, "--accept-arbiter ADDR") && has(err, "no arbiter is accepted"), "%d %s", rv, err);
    free(err);
    b1 = balance(ADV_AUDITOR);
    CHECK(chain_u256_cmp(&b0, &b1) == 0);
    CHECK_EQ_U64(nonce_of(ADV_AUDITOR), n0);
}

static void test_divergent_within_policy(void)
{
    char rid[67], out_dir[600], policy[600], text[400];
    CHECK(open_run(rid, faulty_dir, addr[ADV_ARBITER], "1000", "1000", "3600", "600", "3600") == 0);
    snprintf(policy, sizeof policy, "%s/policy.json", af_dir);
    snprintf(text, sizeof text, "{\"accept_arbiters\": [\"%s\"], \"max_bond\": \"999\", \"min_move_timeout\": 600}",
             addr[ADV_ARBITER]);
    CHECK(ovt_write_atomic(policy, text, strlen(text), 0644) == 0);
    chain_u256 b0 = balance(ADV_AUDITOR);
    snprintf(out_dir, sizeof out_dir, "%s/aud-divergent", af_dir);
    char *err = NULL;
    /* The file's ceiling is below the bond: refused, naming file values. */
    int rv = audit(rid, out_dir, &err, "--policy", policy, NULL, NULL, NULL, NULL);
    CHECK_MSG(rv == 1 && has(err, "1000 wei exceeds --max-bond 999"), "%d %s", rv, err);
    free(err);
    CHECK((game_flags(rid) & CHAIN_ARB_FLAG_AUDITOR) == 0);
    /* A file with an unknown term is refused (a typo must not widen it). */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad-policy.json", af_dir);
    CHECK(ovt_write_atomic(bad, "{\"max_bnod\": \"1\"}", 17, 0644) == 0);
    err = NULL;
    rv = audit(rid, out_dir, &err, "--policy", bad, "--accept-arbiter", addr[ADV_ARBITER], NULL, NULL);
    CHECK_MSG(rv == 1 && has(err, "max_bnod") && has(err, "not a policy term"), "%d %s", rv, err);
    free(err);
    /* The flag overrides the file: the run is inside the policy, divergent at
     * step 4, and the auditor commits its root and bond (exit 3), then its
     * agent plays on; stop it once it has committed. */
    char *argv[] = {af_ovt, "audit", store_url, "--run-id", rid, "--out", out_dir, "--backend", "ref", "--rpc-url",
                    node.url, "--contract", contract, "--private-key", (char *)adv_keys[ADV_AUDITOR], "--policy",
                    policy, "--max-bond", "1000", "--agent", "--poll-interval", "0.1", NULL};
    char op[600], ep[600];
    snprintf(op, sizeof op, "%s/aud-divergent.out", af_dir);
    snprintf(ep, sizeof ep, "%s/aud-divergent.err", af_dir);
    pid_t pid = adv_spawn(argv, op, ep);
    int committed = 0;
    for (double end = adv_now() + 120; !committed && adv_now() < end; adv_sleep_ms(100))
        committed = (game_flags(rid) & CHAIN_ARB_FLAG_AUDITOR) != 0;
    CHECK(committed);
    kill(pid, SIGTERM);
    CHECK(adv_wait(pid, 30) >= 0);
    char *out = adv_slurp(op);
    CHECK_MSG(has(out, "divergent at step 4"), "%s", out);
    free(out);
    chain_u256 b1 = balance(ADV_AUDITOR);
    CHECK(chain_u256_cmp(&b1, &b0) < 0); /* the bond (and gas) paid */
}

static void test_other_hostile_terms(void)
{
    static const struct {
        const char *bond, *abond, *cto, *mto, *vto, *named;
    } cases[] = {
        {"0", "0", "1", "600", "3600", "commit timeout 1 s is below --min-commit-timeout 60"},
        {"0", "0", "3600", "1", "3600", "move timeout 1 s is below --min-move-timeout 60"},
        {"0", "0", "3600", "600", "5", "verdict timeout 5 s is below --min-verdict-timeout 600"},
        {"0", "79228162514264337593543950335", "3600", "600", "3600",
         "79228162514264337593543950335 wei exceeds --max-bond 1000000000000000000"},
    };
    chain_u256 b0 = balance(ADV_AUDITOR);
    uint64_t n0 = nonce_of(ADV_AUDITOR);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rid[67], out_dir[600];
        CHECK(open_run(rid, honest_dir, addr[ADV_ARBITER], cases[i].bond, cases[i].abond, cases[i].cto, cases[i].mto,
                       cases[i].vto) == 0);
        snprintf(out_dir, sizeof out_dir, "%s/aud-hostile-%zu", af_dir, i);
        char *err = NULL;
        int rv = audit(rid, out_dir, &err, "--accept-arbiter", addr[ADV_ARBITER], NULL, NULL, NULL, NULL);
        CHECK_MSG(rv == 1 && has(err, cases[i].named), "case %zu: exit %d: %s", i, rv, err);
        free(err);
        CHECK((game_flags(rid) & CHAIN_ARB_FLAG_AUDITOR) == 0);
    }
    chain_u256 b1 = balance(ADV_AUDITOR);
    CHECK(chain_u256_cmp(&b0, &b1) == 0);
    CHECK_EQ_U64(nonce_of(ADV_AUDITOR), n0);
    /* A party as its own run's arbiter: the contract refuses to open it
     * (BadParty), so it never reaches a policy check. */
    char rid[67];
    CHECK(open_run(rid, honest_dir, addr[ADV_TRAINER], "0", "0", "3600", "600", "3600") == 1);
    /* Bond flags: uint96 is the contract's type, 2^96 is refused. */
    char *err = NULL;
    CHECK(adv_ovt(NULL, &err, "commit", honest_dir, "--bond", "79228162514264337593543950336", NULL) == 2);
    CHECK_MSG(has(err, "below 2^96"), "%s", err);
    free(err);
}

/* Someone (here the cheat's second address) opens a run for the trainer. */
static void open_for_trainer(char rid[67], const char *arbiter, const char *trainer_bond, uint64_t nonce)
{
    chain_arb_params p;
    memset(&p, 0, sizeof p);
    trn_run_config rc;
    trn_step_table t;
    char path[700];
    snprintf(path, sizeof path, "%s/steps.bin", honest_dir);
    CHECK(trn_run_load_config(honest_dir, &rc, &p.config_hash) == 0 && trn_step_table_read(&t, path) == 0);
    p.dataset_hash = rc.dataset_hash;
    p.steps = t.count - 1;
    trn_step_table_free(&t);
    CHECK(chain_address_from_string(&p.trainer, addr[ADV_TRAINER]) == 0);
    CHECK(chain_address_from_string(&p.auditor, addr[ADV_ACCOMPLICE]) == 0);
    CHECK(chain_address_from_string(&p.arbiters[0], arbiter) == 0);
    p.commit_timeout = 3600;
    p.move_timeout = 600;
    p.arbiter_timeout = 3600;
    CHECK(chain_u256_from_dec(&p.trainer_bond, trainer_bond) == 0);
    p.auditor_bond = chain_u256_from_u64(1000);
    p.nonce = nonce;
    chain_privkey k;
    chain_txm m;
    ovt_hash id;
    CHECK(chain_key_from_hex(&k, adv_keys[ADV_ACCOMPLICE]) == 0 && chain_txm_init(&m, rpc, &k, NULL) == 0);
    CHECK(chain_arb_open(&arb, &m, &p, &id, NULL) == 0);
    chain_txm_free(&m);
    chain_hash_hex(rid, &id);
}

static void test_theft_refused_on_join(void)
{
    char rid[67];
    open_for_trainer(rid, addr[ADV_STRANGER], ETH18, 31337001);
    chain_u256 b0 = balance(ADV_TRAINER);
    uint64_t n0 = nonce_of(ADV_TRAINER);
    char *err = NULL;
    int rv = adv_ovt(NULL, &err, "commit", honest_dir, "--run-id", rid, "--rpc-url", node.url, "--contract", contract,
                     "--private-key", adv_keys[ADV_TRAINER], "--accept-arbiter", addr[ADV_ARBITER], "--store",
                     store_url, "--data", af_text, NULL);
    CHECK_MSG(rv == 1, "exit %d: %s", rv, err);
    CHECK_MSG(has(err, addr[ADV_STRANGER]) && has(err, "not an accepted arbiter"), "%s", err);
    CHECK_MSG(has(err, "trainer bond (this party's) 18000000000000000000 wei exceeds --max-bond"), "%s", err);
    free(err);
    chain_u256 b1 = balance(ADV_TRAINER);
    CHECK(chain_u256_cmp(&b0, &b1) == 0);
    CHECK_EQ_U64(nonce_of(ADV_TRAINER), n0);
    CHECK((game_flags(rid) & CHAIN_ARB_FLAG_TRAINER) == 0);
    /* Without an arbiter named, the join path refuses too. */
    err = NULL;
    rv = adv_ovt(NULL, &err, "commit", honest_dir, "--run-id", rid, "--rpc-url", node.url, "--contract", contract,
                 "--private-key", adv_keys[ADV_TRAINER], NULL);
    CHECK_MSG(rv == 1 && has(err, "--accept-arbiter"), "%d %s", rv, err);
    free(err);
}

static void test_join_receipt_verifies(void)
{
    char rid[67], *out = NULL, *err = NULL, path[700];
    open_for_trainer(rid, addr[ADV_ARBITER], "1000", 4242424242ULL);
    int rv = adv_ovt(&out, &err, "commit", honest_dir, "--run-id", rid, "--rpc-url", node.url, "--contract",
                     contract, "--private-key", adv_keys[ADV_TRAINER], "--accept-arbiter", addr[ADV_ARBITER],
                     "--store", store_url, "--data", af_text, "--json", NULL);
    CHECK_MSG(rv == 0, "exit %d: %s", rv, err);
    char nonce[40], got[67];
    json_str(out, "nonce", nonce, sizeof nonce);
    json_str(out, "run_id", got, sizeof got);
    CHECK_MSG(!strcmp(nonce, "4242424242"), "nonce '%s'", nonce);
    CHECK(!strcasecmp(got, rid));
    free(out);
    free(err);
    CHECK(game_flags(rid) & CHAIN_ARB_FLAG_TRAINER);
    snprintf(path, sizeof path, "%s/receipt.json", honest_dir);
    out = NULL;
    rv = adv_ovt(&out, NULL, "verify", path, NULL);
    CHECK_MSG(rv == 0 && has(out, "ok   run_id ") && has(out, "receipt consistent") && has(out, "NOT checked"),
              "exit %d: %s", rv, out);
    free(out);
}

/* Raw keys from a file (0600 only) and from an environment variable; a key
 * given on the command line is overwritten in the daemon's argv, and no key
 * text reaches an error message. */
static void test_key_sources(void)
{
    char kf[600], state[600], sd[600], *err = NULL;
    snprintf(kf, sizeof kf, "%s/arbiter.key", af_dir);
    snprintf(state, sizeof state, "%s/arb-state", af_dir);
    const char *key = adv_keys[ADV_ARBITER];
    CHECK(ovt_write_atomic(kf, key, strlen(key), 0644) == 0);
    int rv = adv_ovt(NULL, &err, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store",
                     store_url, "--state-dir", state, "--private-key-file", kf, "--once", NULL);
    CHECK_MSG(rv == 1 && has(err, "chmod 600") && !has(err, key + 2), "%d %s", rv, err);
    free(err);
    CHECK(chmod(kf, 0600) == 0);
    err = NULL;
    rv = adv_ovt(NULL, &err, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store", store_url,
                 "--state-dir", state, "--private-key-file", kf, "--once", NULL);
    CHECK_MSG(rv == 0, "%d %s", rv, err);
    free(err);
    setenv("ADV_ARBITER_KEY", key, 1);
    err = NULL;
    rv = adv_ovt(NULL, &err, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store", store_url,
                 "--state-dir", state, "--private-key-env", "ADV_ARBITER_KEY", "--once", NULL);
    CHECK_MSG(rv == 0, "%d %s", rv, err);
    free(err);
    unsetenv("ADV_ARBITER_KEY");
    err = NULL;
    rv = adv_ovt(NULL, &err, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store", store_url,
                 "--state-dir", state, "--private-key-env", "ADV_ARBITER_KEY", "--once", NULL);
    CHECK_MSG(rv == 1 && has(err, "ADV_ARBITER_KEY is not set"), "%d %s", rv, err);
    free(err);
    /* Two sources at once: refused, naming the flags only. */
    err = NULL;
    rv = adv_ovt(NULL, &err, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store", store_url,
                 "--state-dir", state, "--private-key-file", kf, "--private-key", key, "--once", NULL);
    CHECK_MSG(rv == 2 && !has(err, key + 2), "%d %s", rv, err);
    free(err);
    /* A malformed key in the file is not echoed. */
    CHECK(ovt_write_atomic(kf, "0xzz5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e", 66, 0600) == 0);
    err = NULL;
    rv = adv_ovt(NULL, &err, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store", store_url,
                 "--state-dir", state, "--private-key-file", kf, "--once", NULL);
    CHECK_MSG(rv == 1 && !has(err, "5e5e5e5e"), "%d %s", rv, err);
    free(err);
    /* The daemon with --private-key: once it has opened its session (its
     * state folder holds a cursor), its cmdline no longer holds the key. */
    snprintf(sd, sizeof sd, "%s/arb-state-argv", af_dir);
    char *argv[] = {af_ovt, "arbiter", "watch", "--rpc-url", node.url, "--contract", contract, "--store", store_url,
                    "--state-dir", sd, "--poll-interval", "0.1", "--private-key", (char *)key, NULL};
    pid_t pid = adv_spawn(argv, NULL, NULL);
    char cmdline_path[64], *cmdline = NULL;
    snprintf(cmdline_path, sizeof cmdline_path, "/proc/%d/cmdline", (int)pid);
    int up = 0;
    for (double end = adv_now() + 60; !up && adv_now() < end; adv_sleep_ms(50)) {
        DIR *d = opendir(sd);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL)
            up |= e->d_name[0] != '.';
        if (d)
            closedir(d);
    }
    CHECK(up);
    /* /proc files report size 0: read until EOF. */
    static char text[1 << 16];
    size_t len = 0;
    int fd = open(cmdline_path, O_RDONLY);
    for (ssize_t r; fd >= 0 && len < sizeof text - 1 && (r = read(fd, text + len, sizeof text - 1 - len)) > 0;)
        len += (size_t)r;
    if (fd >= 0)
        close(fd);
    CHECK(len > 0);
    for (size_t i = 0; i < len; i++)
        if (!text[i])
            text[i] = ' ';
    text[len] = 0;
    cmdline = strdup(text);
    CHECK_MSG(!has(cmdline, key + 2) && has(cmdline, "--private-key xxxxxxxx"), "%s", cmdline);
    free(cmdline);
    double t0 = adv_now();
    kill(pid, SIGTERM);
    CHECK(adv_wait(pid, 10) >= 0);
    printf("arbiter daemon ended %.2f s after SIGTERM\n", adv_now() - t0);
}

int main(void)
{
    CHECK(af_init("adv-terms") == 0);
    char store_dir[600];
    snprintf(store_dir, sizeof store_dir, "%s/store", af_dir);
    snprintf(store_url, sizeof store_url, "file://%s", store_dir);
    if (tsup_anvil_start(&node, NULL) != 0)
        return 1;
    CHECK(af_train("honest", 8, honest_dir, sizeof honest_dir) == 0);
    snprintf(faulty_dir, sizeof faulty_dir, "%s/faulty", af_dir);
    char *out = NULL;
    CHECK(af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", faulty_dir, "--steps", "8",
                     "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--inject-fault",
                     "bitflip", "--fault-step", "4", "--json", NULL) == 0);
    free(out);
    out = NULL;
    CHECK(af_ovt_run(&out, "deploy", "--rpc-url", node.url, "--private-key", adv_keys[ADV_DEPLOYER], "--json",
                     NULL) == 0);
    CHECK_RUN(json_str(out, "address", contract, sizeof contract));
    free(out);
    for (int i = 0; i < 6; i++) {
        chain_privkey k;
        chain_address a;
        CHECK(chain_key_from_hex(&k, adv_keys[i]) == 0 && chain_key_address(&a, &k) == 0);
        chain_address_to_string(addr[i], &a);
    }
    chain_address ca;
    CHECK(chain_rpc_open(&rpc, node.url, NULL) == 0);
    CHECK(chain_address_from_string(&ca, contract) == 0 && chain_arb_attach(&arb, rpc, &ca) == 0);

    CHECK_RUN(test_theft_refused_by_auditor());
    CHECK_RUN(test_divergent_within_policy());
    CHECK_RUN(test_other_hostile_terms());
    CHECK_RUN(test_theft_refused_on_join());
    CHECK_RUN(test_join_receipt_verifies());
    CHECK_RUN(test_key_sources());

    chain_rpc_close(rpc);
    tsup_anvil_stop(&node);
    af_cleanup();
    return check_done();
}
