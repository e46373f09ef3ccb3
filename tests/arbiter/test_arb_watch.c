/* The arbiter daemon (the built `ovt arbiter watch`) against a real anvil,
 * on a small MLP run trained by `ovt train` in this test. The test plays
 * both parties itself (chain_arb_* through the contract fixture) from the
 * trainer's real step table, with faults injected into one side, drives
 * each game to AwaitingVerdict and checks the verdict the daemon posts:
 *   lying auditor at step 3        -> trainer right at 3
 *   lying auditor at step 0        -> trainer right at 0 (initial state from the config)
 *   one bit flipped in state 2     -> auditor right at 2
 *   both parties wrong at step 3   -> neither
 *   a forged rounding-log entry    -> fraudulent rounding log
 *   log 5 withheld from the store  -> inputs not made available (logHash_5)
 *   state 3 corrupt in the store   -> inputs not made available (stateHash_3)
 * every verdict's evidence equal to the leaf computed here from the
 * trainer's files. Then: the daemon killed (SIGKILL) during the bisection
 * and again while it waits for a missing input, restarted, finishes with
 * the right verdict, posted once, and stops cleanly on SIGTERM; and a
 * reorg that removes the block holding VerdictDue does not make it act on
 * the vanished event, while the event mined again is seen exactly once;
 * and anvil stopped and restarted from its state under the running daemon,
 * which waits for it, goes on and posts the one right verdict. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chain/keystore.h"
#include "check.h"
#include "common/fileio.h"
#include "fixture.h"
#include "kernels/rlog.h"
#include "support/proc.h"
#include "data/dataset.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "store/store.h"
#include "util.h"

#define STEPS 6
#define WITHHELD 5
#define CORRUPT 4 /* the store's copy of state CORRUPT-1 is corrupt */

static fx_env env;
static char root[64], ovt[4096], run_dir[128], store_url[160], arbiter_key[65];
static char anvil_state[128]; /* anvil dumps its state here when stopped */
static char keystore_path[256], password_path[256]; /* when set, the arbiter's key comes from a keystore */
static trn_step_table table; /* the honest trainer's */
static ovt_hash config_hash, dataset_hash, forged_log;
static uint64_t forged_step;

/* Publishes checkpoint file `path` as state/<its stateHash>. */
static int put_checkpoint(store_ctx *s, const char *path)
{
    trn_state *st;
    int rv = trn_checkpoint_read(&st, path);
    if (rv)
        return rv;
    rv = store_put_state(s, st);
    trn_state_free(st);
    return rv;
}

static void step_path(char *out, size_t cap, const char *sub, uint64_t step, const char *ext)
{
    snprintf(out, cap, "%s/%s/step-%08llu.%s", run_dir, sub, (unsigned long long)step, ext);
}

/* Replaces a file:// store's copy of a checkpoint (state/<stateHash>,
 * docs/store.md) with the checkpoint's bytes with one bit flipped. */
static int corrupt_checkpoint(const char *url, const char *ckpt, const ovt_hash *state_hash)
{
    uint8_t *buf;
    size_t len;
    char hex[65], path[512];
    int rv = ovt_read_file(ckpt, &buf, &len, (size_t)1 << 30);
    if (rv)
        return rv;
    buf[len / 2] ^= 0x04;
    ovt_hex_encode(hex, state_hash->b, 32);
    snprintf(path, sizeof path, "%s/state/%s", url + strlen("file://"), hex);
    rv = ovt_write_atomic(path, buf, len, 0644);
    free(buf);
    return rv;
}

/* Fills a store with what an honest trainer publishes: config, dataset,
 * every checkpoint (named by its stateHash) and every log but `skip_log`,
 * with state CORRUPT-1 corrupted if corrupt_state. */
static int publish(const char *url, uint64_t skip_log, int corrupt_state)
{
    store_ctx *s;
    char path[512];
    int rv = store_open(&s, url);
    snprintf(path, sizeof path, "%s/config.bin", run_dir);
    if (!rv)
        rv = store_put_file(s, path, NULL);
    snprintf(path, sizeof path, "%s/samples.bin", root);
    if (!rv)
        rv = store_put_file(s, path, NULL);
    for (uint64_t i = 0; !rv && i <= STEPS; i++) {
        step_path(path, sizeof path, "ckpt", i, "ckpt");
        rv = put_checkpoint(s, path);
        if (!rv && corrupt_state && i == CORRUPT - 1)
            rv = corrupt_checkpoint(url, path, &table.steps[i].state_hash);
        if (!rv && i > 0 && i != skip_log) {
            step_path(path, sizeof path, "logs", i, "rlog");
            rv = store_put_file(s, path, NULL);
        }
    }
    store_close(s);
    return rv;
}

/* The forged log: the trainer's log of a step with entries, plus one entry
 * for an element next to a logged one that is not logged itself (far from
 * any midpoint, as almost every element is), stored under its own hash. */
static int forge_log(void)
{
    char path[512];
    for (uint64_t i = 1; i <= STEPS; i++) {
        if (i == WITHHELD || i == CORRUPT)
            continue;
        krn_rlog *log = krn_rlog_new(), *bad = krn_rlog_new();
        step_path(path, sizeof path, "logs", i, "rlog");
        int rv = krn_rlog_read_file(log, path);
        if (rv || krn_rlog_nsites(log) == 0) {
            krn_rlog_free(log);
            krn_rlog_free(bad);
            if (rv)
                return rv;
            continue;
        }
        krn_rlog_reset(bad, i);
        int added = 0;
        for (size_t k = 0; k < krn_rlog_nsites(log) && !rv; k++) {
            const krn_rlog_site *site = krn_rlog_site_at(log, k);
            for (size_t e = 0; e < site->count && !rv; e++) {
                const krn_rlog_entry *en = &site->entries[e];
                uint64_t next = en->index + 1;
                rv = krn_rlog_add(bad, site->site, site->n, en->index, en->dir, en->value);
                if (!rv && !added && next < site->n && (e + 1 == site->count || site->entries[e + 1].index != next)) {
                    rv = krn_rlog_add(bad, site->site, site->n, next, KRN_DIR_UP, 0);
                    added = 1;
                }
            }
        }
        uint8_t *bytes = NULL;
        size_t len = 0;
        if (!rv && added)
            rv = krn_rlog_encode(bad, &bytes, &len);
        krn_rlog_free(log);
        krn_rlog_free(bad);
        if (rv)
            return rv;
        if (!added)
            continue;
        forged_step = i;
        store_ctx *s;
        rv = store_open(&s, store_url);
        if (!rv)
            rv = store_put(s, bytes, len, &forged_log);
        store_close(s);
        free(bytes);
        printf("forged log: step %llu, %zu bytes\n", (unsigned long long)i, len);
        return rv;
    }
    return ovt_fail(OVT_ENOTFOUND, "no step of the run has a rounding-log entry to forge next to");
}

/* Trains the run with the built binary and reads its step table. */
static int train_run(void)
{
    data_samples s;
    uint8_t *buf;
    size_t len;
    char path[512], cfg[512];
    if (data_samples_synthetic(&s, 7, 256, 128, 32, 32) || data_samples_encode(&s, &buf, &len))
        return -1;
    data_samples_free(&s);
    snprintf(path, sizeof path, "%s/samples.bin", root);
    int rv = ovt_write_atomic(path, buf, len, 0644);
    ovt_sha256(&dataset_hash, buf, len);
    free(buf);
    if (rv)
        return rv;
    snprintf(run_dir, sizeof run_dir, "%s/run", root);
    if (tsup_runl(NULL, ovt, "train", "--model", "mlp-demo", "--data", path, "--out", run_dir, "--steps", "6",
                  "--batch", "8", "--checkpoint-every", "1", "--json", NULL) != 0)
        return ovt_fail(OVT_EIO, "ovt train failed");
    snprintf(path, sizeof path, "%s/steps.bin", run_dir);
    if ((rv = trn_step_table_read(&table, path)))
        return rv;
    snprintf(cfg, sizeof cfg, "%s/config.bin", run_dir);
    if ((rv = ovt_read_file(cfg, &buf, &len, 4096)))
        return rv;
    ovt_sha256(&config_hash, buf, len);
    free(buf);
    return table.count == STEPS + 1 && !memcmp(table.config_hash.b, config_hash.b, 32)
               ? 0
               : ovt_fail(OVT_EFORMAT, "unexpected step table");
}

/* --- games */

typedef struct {
    const char *name;
    fx_run run;
    uint64_t step;
    chain_arb_outcome outcome;
    ovt_hash evidence;
} scenario;

static void set_history(fx_history *h, const chain_merkle_preimage *pre, const ovt_hash *run_id)
{
    memset(h, 0, sizeof *h);
    h->steps = STEPS;
    h->pre = malloc((STEPS + 1) * sizeof *h->pre);
    h->leaves = calloc(STEPS + 2, sizeof *h->leaves);
    memcpy(h->pre, pre, (STEPS + 1) * sizeof *pre);
    for (uint64_t i = 0; i <= STEPS; i++)
        chain_merkle_leaf_hash(&h->leaves[i], run_id, i, &h->pre[i]);
}

static void honest_leaf(ovt_hash *out, const fx_run *run, uint64_t i)
{
    chain_merkle_leaf_hash(out, &run->run_id, i, &table.steps[i]);
}

/* Opens a run of the trained config and commits both histories. */
static int open_run(fx_run *run, const chain_merkle_preimage *trainer, const chain_merkle_preimage *auditor)
{
    chain_arb_params p;
    fx_params(&env, &p, STEPS, 600, 1000, 1000);
    p.config_hash = config_hash;
    p.dataset_hash = dataset_hash;
    int rv = fx_open(&env, run, &p, NULL);
    if (rv)
        return rv;
    set_history(&run->trainer, trainer, &run->run_id);
    set_history(&run->auditor, auditor, &run->run_id);
    if ((rv = fx_build_tree(&run->trainer, STEPS + 1)) || (rv = fx_build_tree(&run->auditor, STEPS + 1)))
        return rv;
    return fx_commit_both(&env, run, NULL);
}

static chain_arb_game game_of(const fx_run *run)
{
    chain_arb_game g;
    if (chain_arb_get_game(&env.arb, &run->run_id, NULL, &g) != 0)
        memset(&g, 0, sizeof g);
    return g;
}

/* The VerdictGiven events of a run (count; the last one in *out). */
static int verdicts(const fx_run *run, chain_arb_event *out)
{
    uint64_t head;
    chain_arb_event *evs = NULL;
    size_t n = 0;
    int count = 0;
    if (chain_rpc_block_number(env.rpc, &head) || chain_arb_get_events(&env.arb, &run->run_id, 0, head, &evs, &n))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (evs[i].kind == CHAIN_ARB_EV_VERDICT_GIVEN) {
            count++;
            if (out)
                *out = evs[i];
        }
    free(evs);
    return count;
}

static void check_verdict(const scenario *s)
{
    chain_arb_event v;
    int n = verdicts(&s->run, &v);
    CHECK_MSG(n == 1, "%s: %d verdicts", s->name, n);
    if (n != 1)
        return;
    CHECK_MSG(v.u.verdict_given.step == s->step && v.u.verdict_given.outcome == s->outcome &&
                  !memcmp(v.u.verdict_given.evidence.b, s->evidence.b, 32),
              "%s: verdict %s at step %llu (want %s at %llu)", s->name,
              chain_arb_outcome_name(v.u.verdict_given.outcome), (unsigned long long)v.u.verdict_given.step,
              chain_arb_outcome_name(s->outcome), (unsigned long long)s->step);
    chain_arb_game g = game_of(&s->run);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == s->outcome);
}

/* --- the daemon */

static uint64_t head(void)
{
    uint64_t h = 0;
    CHECK(chain_rpc_block_number(env.rpc, &h) == 0);
    return h;
}

/* Runs `ovt arbiter watch` with the common flags and extra ones; stdout
 * and stderr go to log_path. Returns the pid (daemon) or, with wait_it,
 * the exit status. */
static int arbiter(const char *state_dir, const char *url, uint64_t from_block, const char *log_path, int wait_it,
                   const char *const *extra)
{
    char contract[43], from[24];
    chain_address_to_string(contract, &env.arb.address);
    snprintf(from, sizeof from, "%llu", (unsigned long long)from_block);
    const char *argv[40] = {ovt, "arbiter", "watch", "--rpc-url", env.node.url, "--contract", contract,
                            "--store", url, "--state-dir", state_dir, "--poll-interval", "0.1", "--from-block", from};
    int n = from_block == UINT64_MAX ? 13 : 15; /* UINT64_MAX: the default (the deployment block) */
    if (keystore_path[0]) {
        argv[n++] = "--keystore";
        argv[n++] = keystore_path;
        argv[n++] = "--password-file";
        argv[n++] = password_path;
    } else {
        argv[n++] = "--private-key";
        argv[n++] = arbiter_key;
    }
    for (int k = 0; extra && extra[k]; k++)
        argv[n++] = extra[k];
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(ovt, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0 || !wait_it)
        return pid;
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path)
{
    uint8_t *buf = NULL;
    size_t len;
    if (ovt_read_file(path, &buf, &len, (size_t)1 << 26) != 0)
        return strdup("");
    return (char *)buf;
}

/* Occurrences of `needle` in the file. */
static int count_in(const char *path, const char *needle)
{
    char *text = slurp(path);
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(text);
    return n;
}

/* Every line of a --json log is one JSON object and none holds the key. */
static void check_log_lines(const char *path)
{
    char *text = slurp(path);
    CHECK_MSG(strstr(text, arbiter_key) == NULL, "%s contains the private key", path);
    int lines = 0, bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        lines++;
        bad += !json_is_object(j) || !json_is_string(json_object_get(j, "event"));
        json_decref(j);
    }
    CHECK_MSG(lines > 0 && bad == 0, "%s: %d of %d lines are not JSON log objects", path, bad, lines);
    free(text);
}

static int wait_for(const char *path, const char *needle, int seconds)
{
    for (int i = 0; i < seconds * 10; i++) {
        if (count_in(path, needle) > 0)
            return 0;
        usleep(100000);
    }
    return -1;
}

/* --- the scenarios */

/* The honest history with every stateHash from step `from` on changed. */
static void lie_from(chain_merkle_preimage *h, uint64_t from, uint8_t mask)
{
    memcpy(h, table.steps, (STEPS + 1) * sizeof *h);
    for (uint64_t i = from; i <= STEPS; i++)
        h[i].state_hash.b[i % 32] ^= mask;
}

/* Opens a run between these histories, expecting `outcome` at `step` with
 * `evidence` (NULL: the honest leaf of the step). */
static void add_scenario(scenario *sc, const char *name, const chain_merkle_preimage *t, const chain_merkle_preimage *a,
                         uint64_t step, chain_arb_outcome outcome, const ovt_hash *evidence)
{
    sc->name = name;
    CHECK_MSG(open_run(&sc->run, t, a) == 0, "%s: %s", name, ovt_errmsg());
    sc->step = step;
    sc->outcome = outcome;
    if (evidence)
        sc->evidence = *evidence;
    else
        honest_leaf(&sc->evidence, &sc->run, step);
}

static void test_verdicts(void)
{
    static scenario sc[7];
    chain_merkle_preimage honest[STEPS + 1], t[STEPS + 1], a[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    uint64_t from = head() + 1;
    int k = 0;

    lie_from(a, 3, 0x10);
    add_scenario(&sc[k++], "lying auditor", honest, a, 3, CHAIN_ARB_TRAINER_RIGHT, NULL);
    /* at step 0 the initial state comes from the config */
    lie_from(a, 0, 0x01);
    add_scenario(&sc[k++], "step 0", honest, a, 0, CHAIN_ARB_TRAINER_RIGHT, NULL);

    /* one bit flipped in the trainer's state after step 2 (and everything
     * after it differs too) */
    trn_state *st = NULL;
    char path[512];
    step_path(path, sizeof path, "ckpt", 2, "ckpt");
    CHECK(trn_checkpoint_read(&st, path) == 0);
    lie_from(t, 3, 0x40);
    if (st) {
        uint32_t bits;
        memcpy(&bits, &st->params[17], 4);
        bits ^= 1u << 9;
        memcpy(&st->params[17], &bits, 4);
        trn_state_hash(&t[2].state_hash, st);
        CHECK(memcmp(t[2].state_hash.b, honest[2].state_hash.b, 32) != 0);
        trn_state_free(st);
    }
    add_scenario(&sc[k++], "bit flip", t, honest, 2, CHAIN_ARB_AUDITOR_RIGHT, NULL);

    /* both wrong at 3: the recomputed (honest) leaf is the evidence */
    lie_from(t, 3, 0x02);
    lie_from(a, 3, 0x04);
    add_scenario(&sc[k++], "neither", t, a, 3, CHAIN_ARB_NEITHER, NULL);

    /* forged log entry: the trainer commits the forged log's hash */
    memcpy(t, honest, sizeof t);
    t[forged_step].log_hash = forged_log;
    add_scenario(&sc[k++], "forged log", t, honest, forged_step, CHAIN_ARB_FRAUDULENT_LOG, &forged_log);

    /* log WITHHELD is not in the store; the auditor lies there */
    lie_from(a, WITHHELD, 0x08);
    add_scenario(&sc[k++], "withheld", honest, a, WITHHELD, CHAIN_ARB_INPUTS_UNAVAILABLE,
                 &honest[WITHHELD].log_hash);

    /* the store's copy of state CORRUPT-1 is corrupt; the auditor lies at CORRUPT */
    lie_from(a, CORRUPT, 0x11);
    add_scenario(&sc[k++], "corrupt state", honest, a, CORRUPT, CHAIN_ARB_INPUTS_UNAVAILABLE,
                 &honest[CORRUPT - 1].state_hash);

    for (int i = 0; i < k; i++) {
        CHECK(fx_play(&env, &sc[i].run, NULL, NULL) == 0);
        chain_arb_game g = game_of(&sc[i].run);
        CHECK_MSG(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == sc[i].step, "%s: phase %d step %llu",
                  sc[i].name, g.phase, (unsigned long long)g.index);
    }
    char state[512], logp[512];
    snprintf(state, sizeof state, "%s/state-a", root);
    snprintf(logp, sizeof logp, "%s/a.log", root);
    /* At its defaults: on automining anvil one confirmation (the head, where
     * the last move is, counts), read from the contract's deployment block. */
    const char *once[] = {"--once", "--json", "--input-wait", "0", NULL};
    (void)from;
    CHECK(arbiter(state, store_url, UINT64_MAX, logp, 1, once) == 0);
    for (int i = 0; i < k; i++)
        check_verdict(&sc[i]);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"verdict_mined\""), k);
    CHECK_EQ_U64(count_in(logp, "\"confirmations\":1"), 1);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"from_block\""), 1);
    check_log_lines(logp);

    /* a second pass posts nothing more (human log lines this time) */
    snprintf(logp, sizeof logp, "%s/a2.log", root);
    const char *human[] = {"--once", "--confirmations", "1", NULL};
    CHECK(arbiter(state, store_url, from, logp, 1, human) == 0);
    CHECK_EQ_U64(count_in(logp, "verdict"), 0);
    CHECK_EQ_U64(count_in(logp, " done "), k); /* each settled game is left once */
    CHECK(count_in(logp, " start ") == 1 && count_in(logp, "{") == 0);
    for (int i = 0; i < k; i++) {
        CHECK(verdicts(&sc[i].run, NULL) == 1);
        fx_run_free(&sc[i].run);
    }
}

static void kill_pid(pid_t pid, int sig)
{
    kill(pid, sig);
    int st;
    waitpid(pid, &st, 0);
}

static void test_kill_restart(void)
{
    chain_merkle_preimage honest[STEPS + 1], a[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    lie_from(a, WITHHELD, 0x20);
    char state[256], url[512], logp[512], cursor[512];
    snprintf(state, sizeof state, "%s/state-b", root);
    snprintf(cursor, sizeof cursor, "%s/cursor.json", state);
    snprintf(url, sizeof url, "file://%s/store-b", root);
    CHECK(publish(url, WITHHELD, 0) == 0);
    uint64_t from = head() + 1;
    const char *daemon[] = {"--json", "--confirmations", "1", "--input-wait", "3600", NULL};

    /* killed during the bisection */
    snprintf(logp, sizeof logp, "%s/b1.log", root);
    pid_t pid = arbiter(state, url, from, logp, 0, daemon);
    CHECK(pid > 0);
    fx_run run;
    CHECK(open_run(&run, honest, a) == 0);
    int moved;
    CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && moved);
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    CHECK(wait_for(logp, "ChildrenRevealed", 30) == 0);
    kill_pid(pid, SIGKILL);
    CHECK(count_in(cursor, "\"next\"") == 1);

    /* the rest of the game happens while it is down */
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    CHECK(game_of(&run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT);

    /* restarted: it finds log 5 missing and waits; killed again */
    snprintf(logp, sizeof logp, "%s/b2.log", root);
    pid = arbiter(state, url, from, logp, 0, daemon);
    CHECK(wait_for(logp, "\"event\":\"waiting\"", 60) == 0);
    CHECK(count_in(logp, "\"event\":\"verdict_due\"") == 1); /* read after the restart, not missed */
    usleep(600000); /* several more polls: each looks in the store again, quietly */
    CHECK(count_in(logp, "\"event\":\"inputs_unavailable\"") == 1);
    kill_pid(pid, SIGKILL);
    CHECK(verdicts(&run, NULL) == 0);

    /* the trainer publishes the log; the third life posts the verdict */
    store_ctx *s;
    char path[512];
    step_path(path, sizeof path, "logs", WITHHELD, "rlog");
    CHECK(store_open(&s, url) == 0 && store_put_file(s, path, NULL) == 0);
    store_close(s);
    snprintf(logp, sizeof logp, "%s/b3.log", root);
    pid = arbiter(state, url, from, logp, 0, daemon);
    CHECK(wait_for(logp, "\"event\":\"done\"", 60) == 0);
    kill(pid, SIGTERM);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(count_in(logp, "\"event\":\"stop\"") == 1);
    check_log_lines(logp);
    scenario sc = {.name = "after restarts", .run = run, .step = WITHHELD, .outcome = CHAIN_ARB_TRAINER_RIGHT};
    honest_leaf(&sc.evidence, &run, WITHHELD);
    check_verdict(&sc);

    /* and once more, the key from a keystore this time: nothing is posted again */
    snprintf(keystore_path, sizeof keystore_path, "%s/arbiter.json", root);
    snprintf(password_path, sizeof password_path, "%s/password", root);
    CHECK(chain_keystore_write(keystore_path, &env.key[FX_ARBITER], "arbiter pw", 10, &chain_scrypt_light) == 0);
    CHECK(ovt_write_atomic(password_path, "arbiter pw\n", 11, 0600) == 0);
    snprintf(logp, sizeof logp, "%s/b4.log", root);
    const char *once[] = {"--once", "--json", "--confirmations", "1", NULL};
    CHECK(arbiter(state, url, from, logp, 1, once) == 0);
    char self[43];
    chain_address_to_string(self, &env.addr[FX_ARBITER]);
    CHECK(count_in(logp, "\"event\":\"start\"") == 1 && count_in(logp, self) > 0);
    CHECK_EQ_U64(count_in(logp, "verdict_sent"), 0);
    check_log_lines(logp);
    /* a wrong password is a clear error, before anything is read or sent */
    CHECK(ovt_write_atomic(password_path, "not it\n", 7, 0600) == 0);
    snprintf(logp, sizeof logp, "%s/b5.log", root);
    CHECK(arbiter(state, url, from, logp, 1, once) == 1);
    CHECK(count_in(logp, "ovt arbiter watch:") == 1 && count_in(logp, "\"event\"") == 0);
    keystore_path[0] = 0;
    CHECK(verdicts(&run, NULL) == 1);
    fx_run_free(&run);
}

static void test_reorg(void)
{
    chain_merkle_preimage honest[STEPS + 1], a[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    lie_from(a, 3, 0x80);
    char state[256], url[512], logp[512], gamefile[512];
    snprintf(state, sizeof state, "%s/state-c", root);
    snprintf(url, sizeof url, "file://%s/store-c", root);
    uint64_t from = head() + 1;
    fx_run run;
    CHECK(open_run(&run, honest, a) == 0);
    char id[65];
    ovt_hex_encode(id, run.run_id.b, 32);
    snprintf(gamefile, sizeof gamefile, "%s/games/%s/game.json", state, id);
    /* play to the reveal; the trainer reveals, then the auditor (VerdictDue) */
    int moved;
    while (game_of(&run).phase == CHAIN_ARB_PHASE_BISECTING) {
        CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0);
        CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0);
    }
    CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && moved);
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    CHECK(game_of(&run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT);

    /* the arbiter sees VerdictDue; its store is still empty, so it waits */
    const char *once[] = {"--once", "--json", "--confirmations", "1", "--input-wait", "3600", NULL};
    snprintf(logp, sizeof logp, "%s/c1.log", root);
    CHECK(arbiter(state, url, from, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"event\":\"verdict_due\"") == 1 && count_in(logp, "\"event\":\"waiting\"") == 1);
    CHECK(count_in(gamefile, "VerdictDue") == 1);

    /* the block holding the auditor's reveal and VerdictDue is replaced */
    CHECK(fx_raw(&env, "anvil_reorg", json_pack("[i,[]]", 1)) == 0);
    CHECK(game_of(&run).phase == CHAIN_ARB_PHASE_REVEALING);
    CHECK(publish(url, 0, 0) == 0); /* the inputs are there now: only the reorg holds it back */
    snprintf(logp, sizeof logp, "%s/c2.log", root);
    CHECK(arbiter(state, url, from, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"event\":\"reorg\"") == 1);
    CHECK(count_in(logp, "run_vanished") == 0); /* rewound one block, not to the start */
    CHECK_EQ_U64(count_in(logp, "verdict_sent"), 0);
    CHECK(count_in(gamefile, "VerdictDue") == 0);
    CHECK(verdicts(&run, NULL) == 0);
    CHECK(game_of(&run).phase == CHAIN_ARB_PHASE_REVEALING);

    /* the auditor reveals again on the new chain: seen once, ruled once */
    CHECK(chain_rpc_nonce(env.rpc, &env.txm[FX_AUDITOR].next_nonce, &env.addr[FX_AUDITOR], "pending") == 0);
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    snprintf(logp, sizeof logp, "%s/c3.log", root);
    CHECK(arbiter(state, url, from, logp, 1, once) == 0);
    CHECK(count_in(gamefile, "VerdictDue") == 1);
    scenario sc = {.name = "after reorg", .run = run, .step = 3, .outcome = CHAIN_ARB_TRAINER_RIGHT};
    honest_leaf(&sc.evidence, &run, 3);
    check_verdict(&sc);
    check_log_lines(logp);

    /* the verdict's own block is reorganised away: the game is back at
     * AwaitingVerdict, and the arbiter rules again (once on this chain) */
    CHECK(fx_raw(&env, "anvil_reorg", json_pack("[i,[]]", 1)) == 0);
    CHECK(verdicts(&run, NULL) == 0);
    CHECK(game_of(&run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT);
    CHECK(fx_raw(&env, "evm_mine", NULL) == 0);
    snprintf(logp, sizeof logp, "%s/c4.log", root);
    CHECK(arbiter(state, url, from, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"event\":\"verdict_sent\"") == 1); /* its first verdict is gone: sent again */
    check_verdict(&sc);
    fx_run_free(&run);
}

/* Where needle first occurs in the file (-1: nowhere). */
static long first_at(const char *path, const char *needle)
{
    char *text = slurp(path);
    const char *p = strstr(text, needle);
    long at = p ? (long)(p - text) : -1;
    free(text);
    return at;
}

/* The node goes away under the running daemon: anvil is stopped (dumping
 * its state) during the bisection, kept away a few seconds and started
 * again from its state on the same port; the game reaches AwaitingVerdict
 * after the restart. The daemon keeps running, says the node does not
 * answer and that it retries, says when it is back, posts one verdict (the
 * right one) and stops cleanly on SIGTERM. */
static void test_node_outage(void)
{
    chain_merkle_preimage honest[STEPS + 1], a[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    lie_from(a, 3, 0x21);
    char state[256], logp[512];
    snprintf(state, sizeof state, "%s/state-d", root);
    snprintf(logp, sizeof logp, "%s/d.log", root);
    uint64_t from = head() + 1;
    const char *daemon[] = {"--json", "--confirmations", "1", "--input-wait", "0", NULL};
    pid_t pid = arbiter(state, store_url, from, logp, 0, daemon);
    CHECK(pid > 0);
    fx_run run;
    CHECK(open_run(&run, honest, a) == 0);
    int moved, st = 0;
    CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && moved);
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    CHECK(wait_for(logp, "ChildrenRevealed", 30) == 0);

    tsup_anvil_stop(&env.node);
    CHECK(wait_for(logp, "\"event\":\"node_unreachable\"", 30) == 0);
    sleep(3);
    CHECK_MSG(waitpid(pid, &st, WNOHANG) == 0, "the daemon exited while the node was away (status %d)", st);
    CHECK(count_in(logp, "retry 1 in") == 1);
    CHECK(count_in(logp, "\"event\":\"node_back\"") == 0);
    const char *args[] = {"--state", anvil_state, NULL};
    CHECK(tsup_anvil_restart(&env.node, args) == 0);
    CHECK(game_of(&run).phase == CHAIN_ARB_PHASE_BISECTING); /* the state came back */
    CHECK(wait_for(logp, "\"event\":\"node_back\"", 60) == 0);

    /* the rest of the game, on the restarted node */
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    CHECK(wait_for(logp, "\"event\":\"done\"", 60) == 0);
    CHECK_MSG(waitpid(pid, &st, WNOHANG) == 0, "the daemon exited (status %d)", st);
    kill(pid, SIGTERM);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    long down = first_at(logp, "\"event\":\"node_unreachable\""), back = first_at(logp, "\"event\":\"node_back\""),
         due = first_at(logp, "\"event\":\"verdict_due\"");
    CHECK_MSG(down >= 0 && down < back && back < due, "log order: unreachable %ld, back %ld, verdict_due %ld", down,
              back, due);
    CHECK(count_in(logp, "\"event\":\"verdict_due\"") == 1);
    CHECK(count_in(logp, "\"event\":\"verdict_sent\"") == 1);
    CHECK(count_in(logp, "\"event\":\"stop\"") == 1);
    check_log_lines(logp);
    scenario sc = {.name = "node outage", .run = run, .step = 3, .outcome = CHAIN_ARB_TRAINER_RIGHT};
    honest_leaf(&sc.evidence, &run, 3);
    check_verdict(&sc);
    fx_run_free(&run);
}

static void test_usage(void)
{
    char *out = NULL;
    CHECK(tsup_runl(&out, ovt, "arbiter", "watch", "--help", NULL) == 0 && out && strstr(out, "--state-dir"));
    free(out);
    out = NULL;
    CHECK(tsup_runl(&out, ovt, "arbiter", "watch", "--rpc-url", "http://127.0.0.1:1", NULL) == 2);
    free(out);
    out = NULL;
    CHECK(tsup_runl(&out, ovt, "arbiter", "watch", "--rpc-url", env.node.url, "--contract", "0x1234", "--store",
                    "file:///tmp", "--state-dir", "/tmp/x", "--private-key", arbiter_key, NULL) == 2);
    free(out);
}

/* State dirs the daemon must refuse with a clear error: one of another
 * contract, and one with a corrupt game file. */
static void test_bad_state_dirs(void)
{
    char dir[256], file[512], logp[512];
    snprintf(dir, sizeof dir, "%s/state-other", root);
    snprintf(file, sizeof file, "%s/cursor.json", dir);
    CHECK(ovt_mkdirs(dir, 0700) == 0);
    static const char other[] = "{\"chain_id\": 31337, \"contract\": \"0x1111111111111111111111111111111111111111\", "
                                "\"next\": 5, \"recent\": []}";
    CHECK(ovt_write_atomic(file, other, strlen(other), 0644) == 0);
    snprintf(logp, sizeof logp, "%s/bad1.log", root);
    const char *once[] = {"--once", "--json", NULL};
    CHECK(arbiter(dir, store_url, 0, logp, 1, once) == 1);
    CHECK(count_in(logp, "belongs to another chain or contract") == 1);

    snprintf(dir, sizeof dir, "%s/state-corrupt", root);
    snprintf(file, sizeof file, "%s/games/%064d/game.json", dir, 0);
    CHECK(ovt_mkdirs(dir, 0700) == 0);
    snprintf(logp, sizeof logp, "%s/bad2.log", root);
    CHECK(arbiter(dir, store_url, 0, logp, 1, once) == 0); /* a fresh dir: fine */
    snprintf(logp, sizeof logp, "%s/games/%064d", dir, 0);
    CHECK(ovt_mkdirs(logp, 0700) == 0);
    CHECK(ovt_write_atomic(file, "{\"run_id\": 1", 13, 0644) == 0);
    snprintf(logp, sizeof logp, "%s/bad3.log", root);
    CHECK(arbiter(dir, store_url, 0, logp, 1, once) == 1);
    CHECK(count_in(logp, "game.json") == 1 && count_in(logp, "not a JSON object") == 1);
}

int main(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!bin) {
        fprintf(stderr, "OVT_BINARY_DIR is not set\n");
        return 1;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    snprintf(root, sizeof root, "/tmp/ovt-arb-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(store_url, sizeof store_url, "file://%s/store", root);
    if (train_run() != 0 || publish(store_url, WITHHELD, 1) != 0 || forge_log() != 0) {
        fprintf(stderr, "setup: %s\n", ovt_errmsg());
        return 1;
    }
    snprintf(anvil_state, sizeof anvil_state, "%s/anvil-state.json", root);
    const char *anvil_args[] = {"--state", anvil_state, NULL};
    if (fx_start_with(&env, anvil_args) != 0)
        return 1;
    ovt_hex_encode(arbiter_key, env.key[FX_ARBITER].b, 32);
    CHECK_RUN(test_usage());
    CHECK_RUN(test_bad_state_dirs());
    CHECK_RUN(test_verdicts());
    CHECK_RUN(test_kill_restart());
    CHECK_RUN(test_reorg());
    CHECK_RUN(test_node_outage());
    fx_stop(&env);
    ovt_wipe(arbiter_key, sizeof arbiter_key);
    if (check_failures == 0 && !getenv("OVT_TEST_KEEP"))
        tsup_runl(NULL, "/bin/rm", "-rf", root, NULL);
    else
        fprintf(stderr, "files kept in %s\n", root);
    return check_done();
}
