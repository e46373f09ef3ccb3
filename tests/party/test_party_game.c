/* The party commands on a real anvil, all run as the built `ovt`:
 *   ovt deploy; ovt commit (opens, publishes to a file:// store, commits);
 *   ovt audit from the store with the auditor's key: equal roots settle the
 *   run as verified, and the receipt's EIP-712 signature recovers to the
 *   trainer;
 *   a lying auditor (--lie-at 13): two `ovt agent` processes play the descent
 *   to step 13 while anvil is stopped (state dumped) and restarted from its
 *   state mid-game; the game reaches AwaitingVerdict at step 13, the trainer
 *   has published state 12 and log 13, each party sent exactly one
 *   transaction per round (nonces), and the verdict posted from the arbiter's
 *   key ends both agents with the outcome;
 *   an auditor that stops answering: the trainer agent (stopped by SIGTERM
 *   and started again on the way, sending nothing twice) claims the timeout
 *   once the clock passes the deadline (evm_increaseTime);
 *   a trainer agent with --withhold against `ovt audit --agent`;
 *   open challenges: `ovt audit --challenge` (agreeing: nothing sent; lying:
 *   a challenge played by `ovt agent --game` against it);
 *   the challenger's daemon `ovt audit --watch` (test_challenger_daemon). */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/ovt_fixture.h"
#include "chain/arbitration.h"
#include "chain/keystore.h"
#include "chain/session.h"
#include "check.h"
#include "support/anvil.h"
#include "trainer/checkpoint.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "store/store.h"

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
static char contract[43], addr[4][43], store_url[600], store_dir[512], state_file[512];
static char run_dir[512];

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *json_str(const char *text, const char *key, char *out, size_t cap)
{
    json_t *j = json_loads(text ? text : "", 0, NULL);
    const char *v = json_string_value(json_object_get(j, key));
    snprintf(out, cap, "%s", v ? v : "");
    json_decref(j);
    return out;
}

/* ovt commit of run_dir: returns the run id (hex) in rid. The trainer's
 * key comes from its keystore when keystore is set, else --private-key. */
static int commit_with(char rid[67], const char *move_timeout, const char *keystore, const char *password_file)
{
    char *out = NULL, data_abs[600];
    snprintf(data_abs, sizeof data_abs, "%s", af_text);
    char *args[40] = {af_ovt, "commit", run_dir, "--rpc-url", node.url, "--contract", contract, "--auditor",
                      addr[AUDITOR], "--arbiter", addr[ARBITER], "--bond", "1000", "--move-timeout",
                      (char *)move_timeout, "--store", store_url, "--data", data_abs, "--json"};
    int n = 20;
    if (keystore) {
        args[n++] = "--keystore";
        args[n++] = (char *)keystore;
        args[n++] = "--password-file";
        args[n++] = (char *)password_file;
    } else {
        args[n++] = "--private-key";
        args[n++] = (char *)keys[TRAINER];
    }
    args[n] = NULL;
    int rv = tsup_run(args, &out);
    json_str(out, "run_id", rid, 67);
    free(out);
    return rv;
}

static int commit(char rid[67], const char *move_timeout)
{
    return commit_with(rid, move_timeout, NULL, NULL);
}

static int audit(const char *rid, const char *out_dir, const char *lie_at)
{
    char *out = NULL;
    int rv = lie_at ? af_ovt_run(&out, "audit", store_url, "--run-id", rid, "--out", out_dir, "--backend", "ref",
                                 "--rpc-url", node.url, "--contract", contract, "--private-key", keys[AUDITOR],
                                 "--accept-arbiter", addr[ARBITER], "--lie-at", lie_at, "--json", NULL)
                    : af_ovt_run(&out, "audit", store_url, "--run-id", rid, "--out", out_dir, "--backend", "ref",
                                 "--rpc-url", node.url, "--contract", contract, "--private-key", keys[AUDITOR],
                                 "--accept-arbiter", addr[ARBITER], "--json", NULL);
    if (rv != 0)
        fprintf(stderr, "audit: %s\n", out ? out : "");
    /* The trainer committed first: its root is that of the table it published. */
    CHECK(out && strstr(out, "\"trainer_root_matches\":true"));
    free(out);
    return rv;
}

static int game(const char *rid, chain_arb_game *g)
{
    ovt_hash id;
    if (chain_parse_hash(&id, "run id", rid))
        return -1;
    return chain_arb_get_game(&arb, &id, NULL, g);
}

/* Starts `ovt agent` for a role; stdout goes to OUT_PATH. */
/* Starts a child running `ovt` with args (NULL-terminated); stdout to out_path. */
static pid_t spawn(const char *out_path, char *const *args)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0)
        _exit(126);
    execv(af_ovt, args);
    _exit(127);
}

static pid_t agent_every(const char *role, const char *rid, const char *dir, const char *out_path,
                         const char *poll)
{
    char *key = (char *)(!strcmp(role, "trainer") ? keys[TRAINER] : keys[AUDITOR]);
    char *args[] = {af_ovt, "agent", "--role", (char *)role, "--run-id", (char *)rid, "--rpc-url", node.url,
                    "--contract", contract, "--private-key", key, "--run", (char *)dir, "--poll-interval",
                    (char *)poll, "--accept-arbiter", addr[ARBITER], "--json", NULL};
    return spawn(out_path, args);
}

static pid_t agent(const char *role, const char *rid, const char *dir, const char *out_path)
{
    return agent_every(role, rid, dir, out_path, "0.1");
}

/* Waits for an agent to exit (up to seconds); its exit status or -1. */
static int wait_agent(pid_t pid, int seconds)
{
    for (int waited = 0; waited < seconds * 10; waited++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        sleep_ms(100);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return -1;
}

static int file_has(const char *path, const char *what)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 24))
        return 0;
    int has = strstr((char *)buf, what) != NULL;
    free(buf);
    return has;
}

static uint64_t nonce_of(int who)
{
    chain_address a;
    uint64_t n = 0;
    CHECK(chain_address_from_string(&a, addr[who]) == 0);
    CHECK(chain_rpc_nonce(rpc, &n, &a, "latest") == 0);
    return n;
}

/* Waits until the game is in phase (up to seconds). */
static int wait_phase(const char *rid, chain_arb_phase phase, int seconds, chain_arb_game *g)
{
    for (int waited = 0; waited < seconds * 10; waited++) {
        if (game(rid, g) == 0 && g->phase == phase)
            return 0;
        sleep_ms(100);
    }
    return -1;
}

/* Posts a verdict from the arbiter's key. */
static int verdict(const char *rid, uint64_t step, chain_arb_outcome outcome, const ovt_hash *evidence)
{
    chain_txm m;
    chain_privkey k;
    ovt_hash id;
    if (chain_key_from_hex(&k, keys[ARBITER]) || chain_txm_init(&m, rpc, &k, NULL))
        return -1;
    int rv = chain_parse_hash(&id, "id", rid);
    if (!rv)
        rv = chain_arb_verdict(&arb, &m, &id, step, outcome, evidence, NULL);
    chain_txm_free(&m);
    return rv;
}

static void test_verified(void)
{
    char rid[67], aud[600];
    CHECK(commit(rid, "600") == 0);
    CHECK(strlen(rid) == 66);
    snprintf(aud, sizeof aud, "%s/aud-honest", af_dir);
    CHECK(audit(rid, aud, NULL) == 0);
    chain_arb_game g;
    CHECK(game(rid, &g) == 0);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_VERIFIED);
    CHECK(memcmp(g.trainer_root.b, g.auditor_root.b, 32) == 0);
    /* The trainer's root is the one of its own step table for this runId,
     * and the receipt's signature recovers to the trainer. */
    char path[600], sig_hex[200], root_hex[80];
    snprintf(path, sizeof path, "%s/steps.bin", run_dir);
    trn_step_table t;
    ovt_hash id, root;
    CHECK(trn_step_table_read(&t, path) == 0 && chain_parse_hash(&id, "id", rid) == 0);
    CHECK(trn_step_table_root(&root, &t, &id) == 0);
    CHECK(memcmp(root.b, g.trainer_root.b, 32) == 0);
    trn_step_table_free(&t);
    snprintf(path, sizeof path, "%s/receipt.json", run_dir);
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(path, &buf, &len, 1 << 20) == 0);
    json_str((char *)buf, "signature", sig_hex, sizeof sig_hex);
    json_str((char *)buf, "root", root_hex, sizeof root_hex);
    free(buf);
    chain_arb_params p;
    CHECK(chain_arb_get_run(&arb, &id, NULL, &p) == 0);
    ovt_hash digest;
    chain_arb_commitment_digest(&digest, arb.chain_id, &arb.address, &id, &root, &p);
    uint8_t rsv[65];
    chain_sig sig;
    chain_address signer, trainer;
    CHECK(strlen(sig_hex) == 132 && ovt_hex_decode(rsv, 65, sig_hex + 2) == 0);
    CHECK(chain_sig_from_rsv(&sig, rsv) == 0 && chain_recover_address(&signer, &sig, &digest) == 0);
    CHECK(chain_address_from_string(&trainer, addr[TRAINER]) == 0 && chain_address_eq(&signer, &trainer));
    /* `ovt verify` accepts the receipt `ovt commit` wrote: its runId derives
     * from its terms as the contract derived it when the run was opened. */
    char *vout = NULL;
    CHECK(af_ovt_run(&vout, "verify", path, NULL) == 0);
    CHECK_MSG(vout && strstr(vout, "ok   run_id ") && strstr(vout, "receipt consistent") &&
                  strstr(vout, "NOT checked: whether any training step is right"), "%s", vout ? vout : "(none)");
    free(vout);
    /* Bad input: clear errors, nothing sent. */
    char *out0 = NULL;
    CHECK(af_ovt_run(&out0, "agent", "--role", "trainer", "--run-id", rid, "--rpc-url", node.url, "--contract",
                     contract, "--private-key", keys[TRAINER], "--run", run_dir, "--confirmations", "0", NULL) == 1);
    free(out0);
    CHECK(af_ovt_run(&out0, "agent", "--role", "judge", "--run-id", rid, "--run", run_dir, NULL) == 2);
    free(out0);
    CHECK(af_ovt_run(&out0, "commit", "--rpc-url", node.url, NULL) == 2); /* no RUNDIR */
    free(out0);
    CHECK(af_ovt_run(&out0, "commit", run_dir, "--rpc-url", node.url, "--contract", contract, "--private-key",
                     keys[TRAINER], "--auditor", addr[AUDITOR], "--arbiter", addr[ARBITER], "--store", store_url,
                     NULL) == 2); /* --store without --data */
    free(out0);
    CHECK(af_ovt_run(&out0, "commit", run_dir, "--rpc-url", node.url, "--contract", contract, "--private-key",
                     keys[TRAINER], "--auditor", "0x1234", "--arbiter", addr[ARBITER], NULL) == 2);
    free(out0);
    /* A second audit commit for the same run is refused before sending. */
    char *out = NULL;
    CHECK(af_ovt_run(&out, "audit", store_url, "--run-id", rid, "--out", aud, "--rpc-url", node.url, "--contract",
                     contract, "--private-key", keys[TRAINER], NULL) == 1);
    free(out);
}

static void test_lying_auditor(void)
{
    char rid[67], aud[600], t_out[600], a_out[600];
    CHECK(commit(rid, "600") == 0);
    snprintf(aud, sizeof aud, "%s/aud-liar", af_dir);
    CHECK(audit(rid, aud, "13") == 0);
    chain_arb_game g;
    CHECK(game(rid, &g) == 0 && g.phase == CHAIN_ARB_PHASE_BISECTING && g.depth == 5);
    uint64_t t0 = nonce_of(TRAINER), a0 = nonce_of(AUDITOR);
    snprintf(t_out, sizeof t_out, "%s/trainer-agent.out", af_dir);
    snprintf(a_out, sizeof a_out, "%s/auditor-agent.out", af_dir);
    /* Agents that take a turn every 0.4 s leave the game in its middle rounds
     * for a second or more, which the 20 ms poll below does not miss even on
     * a loaded machine (at 0.1 s the whole descent can finish between two
     * looks, as it once did in CI). */
    pid_t tp = agent_every("trainer", rid, run_dir, t_out, "0.4");
    pid_t ap = agent_every("auditor", rid, aud, a_out, "0.4");
    /* Mid-game: stop anvil (it dumps its state), keep it away a while, bring
     * it back from the state file on the same port. Both parties still have
     * moves to make while the game is bisecting or revealing. */
    for (int waited = 0; waited < 3000 && (game(rid, &g) != 0 || g.round < 2); waited++)
        sleep_ms(20);
    CHECK_MSG(g.round >= 2 && (g.phase == CHAIN_ARB_PHASE_BISECTING || g.phase == CHAIN_ARB_PHASE_REVEALING),
              "round %u phase %d", g.round, (int)g.phase);
    tsup_anvil_stop(&node);
    sleep_ms(1500);
    const char *args[] = {"--state", state_file, NULL};
    CHECK(tsup_anvil_restart(&node, args) == 0);
    CHECK(wait_phase(rid, CHAIN_ARB_PHASE_AWAITING_VERDICT, 120, &g) == 0);
    CHECK_EQ_U64(g.index, 13);
    /* One transaction per round and party: 5 bisections and the reveal. */
    CHECK_EQ_U64(nonce_of(TRAINER) - t0, 6);
    CHECK_EQ_U64(nonce_of(AUDITOR) - a0, 6);
    /* The trainer published state 12 and log 13, as committed. */
    trn_step_table t;
    char path[600];
    snprintf(path, sizeof path, "%s/steps.bin", run_dir);
    CHECK(trn_step_table_read(&t, path) == 0);
    CHECK(memcmp(g.previous_state.b, t.steps[12].state_hash.b, 32) == 0);
    CHECK(memcmp(g.trainer_log.b, t.steps[13].log_hash.b, 32) == 0);
    store_ctx *store;
    trn_state *st = NULL;
    uint8_t *log, *ckpt = NULL;
    size_t len;
    CHECK(store_open(&store, store_url) == 0);
    for (int waited = 0; waited < 100 && store_get_state(store, &t.steps[12].state_hash, (size_t)1 << 30, &ckpt,
                                                         &len) != 0; waited++)
        sleep_ms(100);
    CHECK(ckpt && trn_checkpoint_decode(&st, ckpt, len) == 0 && st->step == 12);
    free(ckpt);
    trn_state_free(st);
    CHECK(store_get(store, &t.steps[13].log_hash, 1 << 30, &log, &len) == 0);
    free(log);
    /* Batch 13 is a blob whose SHA-256 is the trainer's batchHash_13. */
    CHECK(store_get(store, &t.steps[13].batch_hash, 1 << 30, &log, &len) == 0);
    CHECK(len == 8 + 4 * 2 * 2 * 16);
    free(log);
    store_close(store);
    trn_step_table_free(&t);
    /* The arbiter (another helper's watcher) is played by the test. */
    CHECK(verdict(rid, 13, CHAIN_ARB_TRAINER_RIGHT, &g.trainer_node) == 0);
    CHECK(wait_agent(tp, 60) == 0 && wait_agent(ap, 60) == 0);
    CHECK(file_has(t_out, "{\"outcome\":\"trainer-right\",\"code\":2}") && file_has(a_out, "trainer-right"));
    /* The agents kept their game on disk; the node going away was retried. */
    snprintf(path, sizeof path, "%s/agent/%s/state.json", run_dir, rid + 2);
    CHECK(file_has(path, "\"published\": true") && file_has(path, "trainer-right"));
}

static void test_timeout(void)
{
    char rid[67], aud[600], t_out[600], ks[600], pw[600];
    /* This run's trainer signs from a keystore (light scrypt) and a password file. */
    chain_privkey k;
    snprintf(ks, sizeof ks, "%s/trainer.keystore", af_dir);
    snprintf(pw, sizeof pw, "%s/password", af_dir);
    CHECK(chain_key_from_hex(&k, keys[TRAINER]) == 0);
    CHECK(chain_keystore_write(ks, &k, "hunter2", 7, &chain_scrypt_light) == 0);
    CHECK(ovt_write_atomic(pw, "hunter2\n", 8, 0600) == 0);
    CHECK(commit_with(rid, "600", ks, pw) == 0);
    CHECK(strlen(rid) == 66);
    CHECK(ovt_write_atomic(pw, "wrong\n", 6, 0600) == 0);
    char other[67];
    CHECK(commit_with(other, "600", ks, pw) == 1); /* wrong password: a clear failure */
    snprintf(aud, sizeof aud, "%s/aud-silent", af_dir);
    CHECK(audit(rid, aud, "3") == 0);
    snprintf(t_out, sizeof t_out, "%s/trainer-timeout.out", af_dir);
    pid_t tp = agent("trainer", rid, run_dir, t_out);
    chain_arb_game g;
    for (int waited = 0; waited < 300 && (game(rid, &g) != 0 || !(g.flags & CHAIN_ARB_FLAG_TRAINER)); waited++)
        sleep_ms(100);
    CHECK(g.flags & CHAIN_ARB_FLAG_TRAINER);
    /* SIGTERM stops it between turns (exit 1); started again from its state
     * it sends nothing more for the round it already answered. */
    sleep_ms(300);
    CHECK(kill(tp, SIGTERM) == 0);
    CHECK(wait_agent(tp, 20) == 1);
    uint64_t before = nonce_of(TRAINER);
    tp = agent("trainer", rid, run_dir, t_out);
    sleep_ms(1500);
    CHECK_EQ_U64(nonce_of(TRAINER), before);
    CHECK(game(rid, &g) == 0 && g.phase == CHAIN_ARB_PHASE_BISECTING && g.round == 0);
    json_t *res = NULL;
    CHECK(chain_rpc_call(rpc, &res, "evm_increaseTime", json_pack("[i]", 601)) == 0);
    json_decref(res);
    CHECK(chain_rpc_call(rpc, &res, "evm_mine", NULL) == 0);
    json_decref(res);
    CHECK(wait_agent(tp, 60) == 0);
    CHECK(game(rid, &g) == 0 && g.outcome == CHAIN_ARB_AUDITOR_TIMED_OUT);
    CHECK(file_has(t_out, "auditor-timed-out"));
}

/* A trainer that withholds the inputs, against an auditor playing from
 * `ovt audit --agent`: the game still reaches the verdict, state j-1 and
 * batch j are not in the store, and the arbiter's InputsUnavailable ends it. */
static void test_withhold(void)
{
    char rid[67], aud[600], t_out[600], a_out[600];
    CHECK(commit(rid, "600") == 0);
    snprintf(aud, sizeof aud, "%s/aud-withhold", af_dir);
    snprintf(t_out, sizeof t_out, "%s/trainer-withhold.out", af_dir);
    snprintf(a_out, sizeof a_out, "%s/auditor-withhold.out", af_dir);
    char *targs[] = {af_ovt, "agent", "--role", "trainer", "--run-id", rid, "--rpc-url", node.url, "--contract",
                     contract, "--private-key", (char *)keys[TRAINER], "--run", run_dir, "--poll-interval", "0.1",
                     "--accept-arbiter", addr[ARBITER], "--withhold", NULL};
    char *aargs[] = {af_ovt, "audit", store_url, "--run-id", rid, "--out", aud, "--backend", "ref", "--rpc-url",
                     node.url, "--contract", contract, "--private-key", (char *)keys[AUDITOR], "--lie-at", "7",
                     "--accept-arbiter", addr[ARBITER], "--agent", "--poll-interval", "0.1", NULL};
    pid_t tp = spawn(t_out, targs), ap = spawn(a_out, aargs);
    chain_arb_game g;
    CHECK(wait_phase(rid, CHAIN_ARB_PHASE_AWAITING_VERDICT, 120, &g) == 0);
    CHECK_EQ_U64(g.index, 7);
    store_ctx *store;
    uint8_t *buf;
    size_t len;
    CHECK(store_open(&store, store_url) == 0);
    CHECK(store_get_state(store, &g.previous_state, (size_t)1 << 30, &buf, &len) == OVT_ENOTFOUND);
    CHECK(store_get(store, &g.trainer_batch, 1 << 30, &buf, &len) == OVT_ENOTFOUND);
    store_close(store);
    CHECK(verdict(rid, 7, CHAIN_ARB_INPUTS_UNAVAILABLE, &g.previous_state) == 0);
    CHECK(wait_agent(tp, 60) == 0 && wait_agent(ap, 60) == 0);
    CHECK(file_has(t_out, "inputs-unavailable") && file_has(a_out, "inputs-unavailable"));
}

/* Open challenges (issue 43) from the command line. An honest run settles
 * Verified; `ovt audit --challenge` by an outsider whose replay agrees sends
 * nothing; a lying outsider (--lie-at 9) challenges and, with --agent,
 * plays the challenge's game against `ovt agent --role trainer --defend`,
 * which finds the challenge by itself and exits once the window has closed;
 * the verdict (posted by the test as the arbiter) is TrainerRight: the
 * liar's bond goes to the trainer, the run is not refuted, and the trainer's
 * own bond was never in play. The run's auditor key is refused as a
 * challenger. */
/* `ovt agent --role trainer --defend` for run rid, its output to out. */
static pid_t defender(char *rid, const char *out)
{
    char *args[] = {af_ovt, "agent", "--role", "trainer", "--run-id", rid, "--defend", "--rpc-url", node.url,
                    "--contract", contract, "--private-key", (char *)keys[TRAINER], "--run", run_dir,
                    "--poll-interval", "0.1", "--accept-arbiter", addr[ARBITER], "--json", NULL};
    return spawn(out, args);
}

static void test_challenge(void)
{
    static const char outsider_key[] = "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a";
    char rid[67], dir[600], t_out[600], c_out[600], cid_hex[67];
    CHECK(commit(rid, "600") == 0);
    snprintf(dir, sizeof dir, "%s/aud-ch-named", af_dir);
    CHECK(audit(rid, dir, NULL) == 0);
    chain_arb_game g;
    CHECK(game(rid, &g) == 0 && g.outcome == CHAIN_ARB_VERIFIED);
    char *out = NULL;
    snprintf(dir, sizeof dir, "%s/aud-ch-agree", af_dir);
    CHECK(af_ovt_run(&out, "audit", store_url, "--run-id", rid, "--out", dir, "--backend", "ref", "--rpc-url",
                     node.url, "--contract", contract, "--private-key", outsider_key, "--accept-arbiter",
                     addr[ARBITER], "--challenge", "--json", NULL) == 0);
    CHECK_MSG(out && strstr(out, "\"challenged\":false"), "%s", out ? out : "");
    free(out);
    out = NULL;
    CHECK(af_ovt_run(&out, "audit", store_url, "--run-id", rid, "--out", dir, "--backend", "ref", "--rpc-url",
                     node.url, "--contract", contract, "--private-key", keys[AUDITOR], "--accept-arbiter",
                     addr[ARBITER], "--challenge", "--json", NULL) == 1);
    free(out);
    ovt_hash id;
    chain_address outsider;
    chain_privkey k;
    CHECK(chain_parse_hash(&id, "id", rid) == 0 && chain_key_from_hex(&k, outsider_key) == 0 &&
          chain_key_address(&outsider, &k) == 0);
    ovt_hash cid;
    chain_arb_challenge_id(&cid, &id, &outsider);
    chain_hash_hex(cid_hex, &cid);
    chain_u256 t0;
    chain_address trainer;
    CHECK(chain_address_from_string(&trainer, addr[TRAINER]) == 0 && chain_arb_credit(&arb, &trainer, NULL, &t0) == 0);
    snprintf(dir, sizeof dir, "%s/aud-ch-liar", af_dir);
    snprintf(t_out, sizeof t_out, "%s/trainer-ch.out", af_dir);
    snprintf(c_out, sizeof c_out, "%s/challenger-ch.out", af_dir);
    char *cargs[] = {af_ovt, "audit", store_url, "--run-id", rid, "--out", dir, "--backend", "ref", "--rpc-url",
                     node.url, "--contract", contract, "--private-key", (char *)outsider_key, "--accept-arbiter",
                     addr[ARBITER], "--challenge", "--lie-at", "9", "--agent", "--poll-interval", "0.1", "--json",
                     NULL};
    pid_t cp = spawn(c_out, cargs);
    for (int waited = 0; waited < 600 && game(cid_hex, &g) != 0; waited++)
        sleep_ms(100);
    pid_t tp = defender(rid, t_out);
    CHECK(wait_phase(cid_hex, CHAIN_ARB_PHASE_AWAITING_VERDICT, 120, &g) == 0);
    CHECK_EQ_U64(g.index, 9);
    CHECK(verdict(cid_hex, 9, CHAIN_ARB_TRAINER_RIGHT, &g.trainer_node) == 0);
    CHECK(wait_agent(cp, 60) == 0);
    CHECK(game(cid_hex, &g) == 0 && g.outcome == CHAIN_ARB_TRAINER_RIGHT);
    /* the defending trainer stays until the window (3600 s from its commit) closes */
    sleep_ms(1000);
    CHECK(waitpid(tp, NULL, WNOHANG) == 0);
    json_t *res = NULL;
    CHECK(chain_rpc_call(rpc, &res, "evm_increaseTime", json_pack("[i]", 3601)) == 0);
    json_decref(res);
    res = NULL;
    CHECK(chain_rpc_call(rpc, &res, "evm_mine", NULL) == 0);
    json_decref(res);
    CHECK(wait_agent(tp, 60) == 0);
    CHECK(file_has(t_out, "{\"outcome\":\"verified\",\"code\":1}")); /* the run's own outcome */
    CHECK(file_has(c_out, "\"challenged\":true") && file_has(c_out, "trainer-right"));
    chain_u256 t1;
    CHECK(chain_arb_credit(&arb, &trainer, NULL, &t1) == 0);
    uint64_t before = 0, after = 0;
    for (int i = 24; i < 32; i++) {
        before = before << 8 | t0.b[i];
        after = after << 8 | t1.b[i];
    }
    CHECK_EQ_U64(after - before, 1000); /* the liar's bond */
    ovt_hash by;
    CHECK(chain_arb_refuted_by(&arb, &id, NULL, &by) == 0);
    static const ovt_hash zero;
    CHECK(memcmp(by.b, zero.b, 32) == 0);
}

/* Lines of a file holding needle. */
static int lines_with(const char *path, const char *needle)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 24))
        return 0;
    int n = 0;
    for (const char *p = (const char *)buf; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(buf);
    return n;
}

/* `ovt audit --watch`, the challenger's daemon (from block `from`, state in
 * dir, output to out_path): spawned, or with once run to its end. */
static pid_t challenger(const char *key, const char *dir, const char *from, const char *lie_at, const char *out_path,
                        int once)
{
    char *args[40] = {af_ovt, "audit", "--watch", store_url, "--state-dir", (char *)dir, "--from-block", (char *)from,
                      "--backend", "ref", "--rpc-url", node.url, "--contract", contract, "--private-key", (char *)key,
                      "--accept-arbiter", addr[ARBITER], "--poll-interval", "0.1", "--json"};
    int n = 21;
    if (lie_at) {
        args[n++] = "--lie-at";
        args[n++] = (char *)lie_at;
    }
    if (once)
        args[n++] = "--once";
    args[n] = NULL;
    pid_t pid = spawn(out_path, args);
    return once ? wait_agent(pid, 300) : pid;
}

/* The challenger's daemon (issue 43): an honest one replays the run and
 * sends nothing (a second pass does not replay it again); a lying one
 * (--lie-at 7) challenges it, is killed (SIGKILL) in the middle of the
 * bisection and restarted from its state dir, finishes the game without
 * a second challenge or a repeated move, and loses its bond to the
 * trainer, whose own bond is not touched. */
static void test_challenger_daemon(void)
{
    static const char honest_key[] = "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a";
    static const char liar_key[] = "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba";
    char rid[67], dir[600], from[32], hdir[600], ldir[600], h_out[600], l_out[600], l_out2[600], t_out[600];
    uint64_t head = 0;
    CHECK(chain_rpc_block_number(rpc, &head) == 0);
    snprintf(from, sizeof from, "%llu", (unsigned long long)head + 1);
    CHECK(commit(rid, "600") == 0);
    snprintf(dir, sizeof dir, "%s/aud-daemon-named", af_dir);
    CHECK(audit(rid, dir, NULL) == 0);
    chain_arb_game g;
    CHECK(game(rid, &g) == 0 && g.outcome == CHAIN_ARB_VERIFIED);

    snprintf(hdir, sizeof hdir, "%s/challenger-honest", af_dir);
    snprintf(h_out, sizeof h_out, "%s/challenger-honest.out", af_dir);
    chain_privkey k;
    chain_address honest, liar, trainer;
    CHECK(chain_key_from_hex(&k, honest_key) == 0 && chain_key_address(&honest, &k) == 0);
    CHECK(chain_key_from_hex(&k, liar_key) == 0 && chain_key_address(&liar, &k) == 0);
    CHECK(chain_address_from_string(&trainer, addr[TRAINER]) == 0);
    uint64_t n0 = 0, n1 = 0;
    CHECK(chain_rpc_nonce(rpc, &n0, &honest, "latest") == 0);
    CHECK(challenger(honest_key, hdir, from, NULL, h_out, 1) == 0);
    CHECK_EQ_U64(lines_with(h_out, "\"event\":\"agreed\""), 1);
    CHECK_EQ_U64(lines_with(h_out, "\"event\":\"replaying\""), 1);
    CHECK(lines_with(h_out, honest_key + 2) == 0); /* the key never in the log */
    snprintf(h_out, sizeof h_out, "%s/challenger-honest2.out", af_dir);
    CHECK(challenger(honest_key, hdir, from, NULL, h_out, 1) == 0); /* again: decided before */
    CHECK_EQ_U64(lines_with(h_out, "\"event\":\"start\""), 1);
    CHECK_EQ_U64(lines_with(h_out, "\"event\":\"replaying\""), 0);
    CHECK(chain_rpc_nonce(rpc, &n1, &honest, "latest") == 0);
    CHECK_EQ_U64(n1, n0);

    ovt_hash id, cid;
    char cid_hex[67];
    CHECK(chain_parse_hash(&id, "id", rid) == 0);
    chain_arb_challenge_id(&cid, &id, &liar);
    chain_hash_hex(cid_hex, &cid);
    chain_u256 t0, t1;
    CHECK(chain_arb_credit(&arb, &trainer, NULL, &t0) == 0);
    snprintf(ldir, sizeof ldir, "%s/challenger-liar", af_dir);
    snprintf(l_out, sizeof l_out, "%s/challenger-liar.out", af_dir);
    snprintf(l_out2, sizeof l_out2, "%s/challenger-liar2.out", af_dir);
    snprintf(t_out, sizeof t_out, "%s/trainer-daemon.out", af_dir);
    pid_t lp = challenger(liar_key, ldir, from, "7", l_out, 0);
    for (int waited = 0; waited < 1200 && !lines_with(l_out, "\"event\":\"moved\""); waited++)
        sleep_ms(100);
    CHECK_MSG(game(cid_hex, &g) == 0 && g.phase == CHAIN_ARB_PHASE_BISECTING, "the liar's challenge: phase %s",
              chain_arb_phase_name(g.phase));
    /* killed mid-bisection (the trainer has not answered yet), then restarted */
    kill(lp, SIGKILL);
    waitpid(lp, NULL, 0);
    pid_t tp = defender(rid, t_out);
    lp = challenger(liar_key, ldir, from, "7", l_out2, 0);
    CHECK(wait_phase(cid_hex, CHAIN_ARB_PHASE_AWAITING_VERDICT, 120, &g) == 0);
    CHECK_EQ_U64(g.index, 7);
    CHECK(verdict(cid_hex, 7, CHAIN_ARB_TRAINER_RIGHT, &g.trainer_node) == 0);
    for (int waited = 0; waited < 300 && !lines_with(l_out2, "\"event\":\"challenge_settled\""); waited++)
        sleep_ms(100);
    CHECK(lines_with(l_out2, "\"outcome\":\"trainer-right\"") >= 1);
    kill(lp, SIGTERM);
    CHECK(wait_agent(lp, 30) == 0);
    kill(tp, SIGTERM);
    waitpid(tp, NULL, 0);
    CHECK_EQ_U64(lines_with(l_out, "\"event\":\"challenged\"") + lines_with(l_out2, "\"event\":\"challenged\""), 1);
    CHECK_EQ_U64(lines_with(l_out2, "\"event\":\"replaying\""), 0); /* decided before the kill */
    /* one ChallengeOpened for the run, and no move refused as a repeat */
    uint64_t now = 0;
    chain_arb_event *evs = NULL;
    size_t n = 0;
    int opened = 0;
    CHECK(chain_rpc_block_number(rpc, &now) == 0 && chain_arb_get_events(&arb, &id, head + 1, now, &evs, &n) == 0);
    for (size_t i = 0; i < n; i++)
        opened += evs[i].kind == CHAIN_ARB_EV_CHALLENGE_OPENED;
    free(evs);
    CHECK_EQ_U64(opened, 1);
    CHECK(chain_arb_credit(&arb, &trainer, NULL, &t1) == 0);
    uint64_t before = 0, after = 0;
    for (int i = 24; i < 32; i++) {
        before = before << 8 | t0.b[i];
        after = after << 8 | t1.b[i];
    }
    CHECK_EQ_U64(after - before, 1000); /* the liar's bond, and only it */
    ovt_hash by;
    static const ovt_hash zero;
    CHECK(chain_arb_refuted_by(&arb, &id, NULL, &by) == 0 && memcmp(by.b, zero.b, 32) == 0);
}

int main(void)
{
    CHECK(af_init("aud-game") == 0);
    snprintf(state_file, sizeof state_file, "%s/anvil-state.json", af_dir);
    snprintf(store_dir, sizeof store_dir, "%s/store", af_dir);
    snprintf(store_url, sizeof store_url, "file://%s", store_dir);
    const char *args[] = {"--state", state_file, NULL};
    if (tsup_anvil_start(&node, args) != 0)
        return 1;
    CHECK(af_train("run", 20, run_dir, sizeof run_dir) == 0);
    char *out = NULL;
    CHECK(af_ovt_run(&out, "deploy", "--rpc-url", node.url, "--private-key", keys[DEPLOYER], "--json", NULL) == 0);
    json_str(out, "address", contract, sizeof contract);
    free(out);
    for (int i = 0; i < 4; i++) {
        chain_privkey k;
        chain_address a;
        CHECK(chain_key_from_hex(&k, keys[i]) == 0 && chain_key_address(&a, &k) == 0);
        chain_address_to_string(addr[i], &a);
    }
    chain_address ca;
    CHECK(chain_rpc_open(&rpc, node.url, NULL) == 0);
    CHECK(chain_address_from_string(&ca, contract) == 0 && chain_arb_attach(&arb, rpc, &ca) == 0);

    CHECK_RUN(test_verified());
    CHECK_RUN(test_lying_auditor());
    CHECK_RUN(test_timeout());
    CHECK_RUN(test_withhold());
    CHECK_RUN(test_challenge());
    CHECK_RUN(test_challenger_daemon());

    chain_rpc_close(rpc);
    tsup_anvil_stop(&node);
    af_cleanup();
    return check_done();
}
