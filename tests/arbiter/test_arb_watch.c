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
 * which waits for it, goes on and posts the one right verdict. Committees
 * of three (the other two seats played here with the bindings): the
 * watcher accepts, seals, is killed between its ballot and the reveals and
 * opens the same ballot after the restart, and is paid its share of a
 * liar's bond; with --misbehave lie it is the liar and loses its bond; a
 * bond above --max-arbiter-bond is refused, then taken once raised. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chain/keystore.h"
#include "check.h"
#include "common/fileio.h"
#include "fixture.h"
#include "kernels/rlog.h"
#include "support/proc.h"
#include "data/dataset.h"
#include "trainer/checkpoint.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "store/store.h"
#include "trainer/state_hash.h"
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
    uint8_t *buf;
    size_t len;
    ovt_hash h;
    int rv = trn_checkpoint_read(&st, path);
    if (rv)
        return rv;
    trn_state_hash(&h, st);
    rv = trn_checkpoint_encode(st, &buf, &len);
    trn_state_free(st);
    if (rv)
        return rv;
    rv = store_put_state(s, &h, buf, len);
    free(buf);
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

/* A committee's terms for open_run_with (NULL there: the fixture's one
 * arbiter, no arbiter bond). */
typedef struct {
    chain_address arbiters[3];
    unsigned threshold;
    uint64_t bond;
} committee_terms;

/* Opens a run of the trained config and commits both histories. */
static int open_run_with(fx_run *run, const chain_merkle_preimage *trainer, const chain_merkle_preimage *auditor,
                         const committee_terms *c)
{
    chain_arb_params p;
    fx_params(&env, &p, STEPS, 600, 1000, 1000);
    p.config_hash = config_hash;
    p.dataset_hash = dataset_hash;
    if (c) {
        memcpy(p.arbiters, c->arbiters, sizeof c->arbiters);
        p.threshold = c->threshold;
        p.arbiter_bond = chain_u256_from_u64(c->bond);
        p.arbiter_timeout = 600;
    }
    int rv = fx_open(&env, run, &p, NULL);
    if (rv)
        return rv;
    set_history(&run->trainer, trainer, &run->run_id);
    set_history(&run->auditor, auditor, &run->run_id);
    if ((rv = fx_build_tree(&run->trainer, STEPS + 1)) || (rv = fx_build_tree(&run->auditor, STEPS + 1)))
        return rv;
    return fx_commit_both(&env, run, NULL);
}

static int open_run(fx_run *run, const chain_merkle_preimage *trainer, const chain_merkle_preimage *auditor)
{
    return open_run_with(run, trainer, auditor, NULL);
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

/* --- committees: the watcher in one seat, the other two seats played
 * here with the bindings from anvil's dev accounts 5 and 6 */

static const char *const member_hex[2] = {
    "8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
};
static chain_privkey member_key[2];
static chain_address member[2];
static chain_txm member_txm[2];

static int members_init(void)
{
    chain_txm_opts t;
    chain_txm_opts_default(&t);
    t.poll_ms = 5;
    for (int k = 0; k < 2; k++)
        if (chain_key_from_hex(&member_key[k], member_hex[k]) || chain_key_address(&member[k], &member_key[k]) ||
            chain_txm_init(&member_txm[k], env.rpc, &member_key[k], &t))
            return -1;
    return 0;
}

static void members_free(void)
{
    for (int k = 0; k < 2; k++) {
        if (member_txm[k].rpc)
            chain_txm_free(&member_txm[k]);
        ovt_wipe(&member_key[k], sizeof member_key[k]);
    }
}

static void member_salt(ovt_hash *salt, int k)
{
    for (int i = 0; i < 32; i++)
        salt->b[i] = (uint8_t)(0x50 + 17 * k + i);
}

/* Member k seals (outcome, evidence) on the disputed step, or opens it. */
static int member_ballot(int k, const fx_run *run, chain_arb_outcome o, const ovt_hash *evidence, int reveal)
{
    ovt_hash salt, ballot;
    member_salt(&salt, k);
    uint64_t step = game_of(run).index;
    if (reveal)
        return chain_arb_reveal_verdict(&env.arb, &member_txm[k], &run->run_id, step, o, evidence, &salt, NULL);
    chain_arb_ballot_hash(&ballot, &run->run_id, &member[k], step, o, evidence, &salt);
    return chain_arb_commit_verdict(&env.arb, &member_txm[k], &run->run_id, &ballot, NULL);
}

static chain_arb_committee committee_of(const fx_run *run)
{
    chain_arb_committee c;
    if (chain_arb_get_committee(&env.arb, &run->run_id, NULL, &c) != 0)
        memset(&c, 0, sizeof c);
    return c;
}

/* The run's ArbiterSettled event for `who` (0: found). */
static int arbiter_settled(const fx_run *run, const chain_address *who, chain_arb_event *out)
{
    uint64_t h = head();
    chain_arb_event *evs = NULL;
    size_t n = 0;
    int rv = chain_arb_get_events(&env.arb, &run->run_id, 0, h, &evs, &n) ? -1 : 1;
    for (size_t i = 0; rv == 1 && i < n; i++)
        if (evs[i].kind == CHAIN_ARB_EV_ARBITER_SETTLED && chain_address_eq(&evs[i].u.arbiter_settled.arbiter, who)) {
            *out = evs[i];
            rv = 0;
        }
    free(evs);
    return rv;
}

static uint64_t u64_of(const chain_u256 *v)
{
    uint64_t x = UINT64_MAX;
    CHECK(chain_u256_to_u64(&x, v) == 0);
    return x;
}

/* The members take their seats and the game is played to AwaitingVerdict
 * on `step`; *leaf is the honest leaf there. */
static chain_arb_game members_sit_and_play(fx_run *run, uint64_t step, ovt_hash *leaf)
{
    for (int k = 0; k < 2; k++)
        CHECK(chain_arb_accept(&env.arb, &member_txm[k], &run->run_id, NULL) == 0);
    CHECK(fx_play(&env, run, NULL, NULL) == 0);
    chain_arb_game g = game_of(run);
    CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == step);
    honest_leaf(leaf, run, step);
    return g;
}

/* The salt in the game's game.json (0: found). */
static int salt_on_disk(const char *gamefile, ovt_hash *salt)
{
    json_error_t err;
    json_t *j = json_load_file(gamefile, 0, &err);
    const char *hex = json_string_value(json_object_get(json_object_get(j, "ballot"), "salt"));
    int rv = hex && strlen(hex) == 66 && ovt_hex_decode(salt->b, 32, hex + 2) == 0 ? 0 : -1;
    json_decref(j);
    return rv;
}

/* An honest watcher in seat 1 of {member 0, watcher, member 1}, m = 2, an
 * arbiter bond of 1001 wei: it accepts during the bisection, seals the
 * honest verdict, is killed (SIGKILL) between its ballot and the reveals,
 * and restarted opens the ballot from its state dir. Member 0 votes with
 * it, member 1 lies; the run settles TrainerRight, member 1's bond is
 * shared: 500 wei to the watcher, 501 to member 0 (the odd wei to the first
 * matching seat). */
static void test_committee_restart(void)
{
    chain_merkle_preimage honest[STEPS + 1], a[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    lie_from(a, 3, 0x42);
    char state[256], logp[512], gamefile[512], self[43];
    snprintf(state, sizeof state, "%s/state-e", root);
    chain_address_to_string(self, &env.addr[FX_ARBITER]);
    uint64_t from = head() + 1, credit0 = fx_credit(&env, FX_ARBITER);
    const char *daemon[] = {"--json", "--confirmations", "1", "--input-wait", "0", NULL};
    snprintf(logp, sizeof logp, "%s/e1.log", root);
    pid_t pid = arbiter(state, store_url, from, logp, 0, daemon);
    CHECK(pid > 0);
    committee_terms terms = {.arbiters = {member[0], env.addr[FX_ARBITER], member[1]}, .threshold = 2, .bond = 1001};
    fx_run run;
    CHECK(open_run_with(&run, honest, a, &terms) == 0);
    char id[65];
    ovt_hex_encode(id, run.run_id.b, 32);
    snprintf(gamefile, sizeof gamefile, "%s/games/%s/game.json", state, id);
    CHECK(wait_for(logp, "\"event\":\"accept_mined\"", 60) == 0);
    CHECK(committee_of(&run).seated == 2); /* the watcher's seat, before the members sit */
    CHECK(count_in(logp, "\"seat\":1") >= 1);
    ovt_hash leaf;
    chain_arb_game g = members_sit_and_play(&run, 3, &leaf);
    CHECK(member_ballot(0, &run, CHAIN_ARB_TRAINER_RIGHT, &leaf, 0) == 0);

    /* its ballot is mined; killed before anyone can reveal */
    CHECK(wait_for(logp, "\"event\":\"ballot_mined\"", 60) == 0);
    kill_pid(pid, SIGKILL);
    chain_arb_committee c = committee_of(&run);
    CHECK(c.committed == 3 && c.revealed == 0);
    ovt_hash salt, expect;
    CHECK(salt_on_disk(gamefile, &salt) == 0);
    chain_arb_ballot_hash(&expect, &run.run_id, &env.addr[FX_ARBITER], 3, CHAIN_ARB_TRAINER_RIGHT, &leaf, &salt);
    CHECK_MSG(!memcmp(c.ballots[1].b, expect.b, 32), "the sealed ballot is not the honest verdict with the salt on disk");
    struct stat sb;
    CHECK(stat(gamefile, &sb) == 0 && (sb.st_mode & 077) == 0); /* the salt is not for others to read */
    CHECK(count_in(logp, "\"event\":\"reveal_sent\"") == 0);
    char salt_hex[65];
    ovt_hex_encode(salt_hex, salt.b, 32);
    CHECK_MSG(count_in(logp, salt_hex) == 0, "the log shows the salt before the reveal");

    /* member 1 seals a lie, member 0 opens; the watcher, restarted, opens its own */
    CHECK(member_ballot(1, &run, CHAIN_ARB_AUDITOR_RIGHT, &g.auditor_node, 0) == 0);
    CHECK(member_ballot(0, &run, CHAIN_ARB_TRAINER_RIGHT, &leaf, 1) == 0);
    const char *once[] = {"--once", "--json", "--confirmations", "1", "--input-wait", "0", NULL};
    snprintf(logp, sizeof logp, "%s/e2.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"reveal_mined\""), 1);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"ballot_sent\""), 0); /* never a second ballot */
    CHECK_EQ_U64(count_in(logp, "\"event\":\"evaluate\""), 0);    /* nor a second evaluation */
    CHECK(committee_of(&run).revealed == 3);
    CHECK(member_ballot(1, &run, CHAIN_ARB_AUDITOR_RIGHT, &g.auditor_node, 1) == 0); /* the last: settles */

    g = game_of(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_TRAINER_RIGHT);
    scenario sc = {.name = "committee", .run = run, .step = 3, .outcome = CHAIN_ARB_TRAINER_RIGHT, .evidence = leaf};
    check_verdict(&sc);
    chain_arb_event ev;
    CHECK(arbiter_settled(&run, &env.addr[FX_ARBITER], &ev) == 0 &&
          ev.u.arbiter_settled.verdict == CHAIN_ARB_TRAINER_RIGHT && u64_of(&ev.u.arbiter_settled.forfeited) == 0 &&
          u64_of(&ev.u.arbiter_settled.reward) == 500);
    CHECK_EQ_U64(fx_credit(&env, FX_ARBITER) - credit0, 1001 + 500);

    /* the next pass reads the settlement: what the watcher was paid */
    snprintf(logp, sizeof logp, "%s/e3.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"arbiter_settled\""), 1);
    CHECK(count_in(logp, "\"forfeited\":\"0\"") == 1 && count_in(logp, "\"reward\":\"500\"") == 1 &&
          count_in(logp, "\"verdict\":\"trainer-right\"") == 1);
    CHECK(count_in(logp, "\"event\":\"done\"") == 1);
    check_log_lines(logp);
    fx_run_free(&run);
}

/* --misbehave lie in seat 0 of {watcher, member 0, member 1}: it seals and
 * opens AuditorRight with the auditor's leaf where TrainerRight is right;
 * the two honest members outvote it and share its bond. The block holding
 * its ballot is reorganised away in between: it seals the same ballot again
 * (from disk, not re-evaluated). Then a run whose arbiter bond is above
 * --max-arbiter-bond: the watcher does not sit; raised, it sits, and with
 * --misbehave silent seals nothing when the verdict is due. */
static void test_committee_liar(void)
{
    chain_merkle_preimage honest[STEPS + 1], a[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    lie_from(a, 3, 0x24);
    char state[256], logp[512];
    snprintf(state, sizeof state, "%s/state-f", root);
    uint64_t from = head() + 1;
    committee_terms terms = {.arbiters = {env.addr[FX_ARBITER], member[0], member[1]}, .threshold = 2, .bond = 1000};
    fx_run run;
    CHECK(open_run_with(&run, honest, a, &terms) == 0);
    const char *lie[] = {"--once", "--json", "--confirmations", "1", "--input-wait", "0", "--misbehave", "lie", NULL};
    snprintf(logp, sizeof logp, "%s/f1.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, lie) == 0);
    CHECK(count_in(logp, "\"misbehave\":\"lie\"") == 1 && count_in(logp, "MISBEHAVING") == 1);
    CHECK(committee_of(&run).seated == 1);
    ovt_hash leaf;
    chain_arb_game g = members_sit_and_play(&run, 3, &leaf);
    snprintf(logp, sizeof logp, "%s/f2.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, lie) == 0);
    CHECK(count_in(logp, "\"event\":\"ballot_mined\"") == 1 && count_in(logp, "\"lie\":true") == 1);
    CHECK(count_in(logp, "\"event\":\"reveal_sent\"") == 0); /* the members have not sealed yet */
    /* the block with its ballot is reorganised away: the same ballot is sealed again */
    chain_arb_committee c = committee_of(&run);
    ovt_hash sealed = c.ballots[0];
    CHECK(c.committed == 1);
    CHECK(fx_raw(&env, "anvil_reorg", json_pack("[i,[]]", 1)) == 0);
    CHECK(committee_of(&run).committed == 0);
    CHECK(fx_raw(&env, "evm_mine", NULL) == 0);
    snprintf(logp, sizeof logp, "%s/f2b.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, lie) == 0);
    CHECK(count_in(logp, "its transaction is gone") == 1);
    CHECK(count_in(logp, "\"event\":\"ballot_mined\"") == 1 && count_in(logp, "\"event\":\"evaluate\"") == 0);
    c = committee_of(&run);
    CHECK_MSG(c.committed == 1 && !memcmp(c.ballots[0].b, sealed.b, 32), "the ballot sealed again is another one");
    for (int k = 0; k < 2; k++)
        CHECK(member_ballot(k, &run, CHAIN_ARB_TRAINER_RIGHT, &leaf, 0) == 0);
    snprintf(logp, sizeof logp, "%s/f3.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, lie) == 0);
    CHECK(count_in(logp, "\"event\":\"reveal_mined\"") == 1 && count_in(logp, "\"outcome\":\"auditor-right\"") >= 1);
    c = committee_of(&run);
    CHECK(c.revealed == 1 && c.outcomes[0] == CHAIN_ARB_AUDITOR_RIGHT && !memcmp(c.ballots[0].b, g.auditor_node.b, 32));
    for (int k = 0; k < 2; k++)
        CHECK(member_ballot(k, &run, CHAIN_ARB_TRAINER_RIGHT, &leaf, 1) == 0);
    g = game_of(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_TRAINER_RIGHT);
    chain_arb_event ev;
    CHECK(arbiter_settled(&run, &env.addr[FX_ARBITER], &ev) == 0 &&
          ev.u.arbiter_settled.verdict == CHAIN_ARB_AUDITOR_RIGHT && u64_of(&ev.u.arbiter_settled.forfeited) == 1000 &&
          u64_of(&ev.u.arbiter_settled.reward) == 0);
    snprintf(logp, sizeof logp, "%s/f4.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, lie) == 0);
    CHECK(count_in(logp, "\"forfeited\":\"1000\"") == 1 && count_in(logp, "\"reward\":\"0\"") == 1);
    fx_run_free(&run);

    /* 2 ether asked, 1 ether the default bound: seat_refused, nothing sent */
    terms.bond = 2000000000000000000ULL;
    CHECK(open_run_with(&run, honest, a, &terms) == 0);
    const char *once[] = {"--once", "--json", "--confirmations", "1", NULL};
    snprintf(logp, sizeof logp, "%s/f5.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"event\":\"seat_refused\"") == 1 && count_in(logp, "accept_sent") == 0);
    CHECK(committee_of(&run).seated == 0);
    /* raised: it sits, --misbehave silent: and does nothing more */
    const char *more[] = {"--once", "--json", "--confirmations", "1", "--max-arbiter-bond", "2ether",
                          "--misbehave", "silent", NULL};
    snprintf(logp, sizeof logp, "%s/f6.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, more) == 0);
    CHECK(count_in(logp, "\"event\":\"accept_mined\"") == 1 && committee_of(&run).seated == 1);
    CHECK(count_in(logp, "\"misbehave\":\"silent\"") == 1);
    members_sit_and_play(&run, 3, &leaf);
    snprintf(logp, sizeof logp, "%s/f7.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, more) == 0);
    CHECK(count_in(logp, "\"event\":\"verdict_due\"") == 1 && count_in(logp, "\"event\":\"prepare\"") == 0);
    CHECK(count_in(logp, "_sent\"") == 0 && count_in(logp, "--misbehave silent: no ballot") == 1);
    CHECK(committee_of(&run).committed == 0);
    fx_run_free(&run);
}

/* Issue 43: four runs opened by a stranger, naming this watcher with a
 * 0.3 ETH arbiter bond and a trainer and an auditor that never commit. The
 * watcher declines each seat (seat_refused, decline "uncommitted": nothing
 * sent), and a fifth whose commit window is above --max-commit-timeout
 * ("window"). Once the trainer of the first commits, that seat is taken;
 * with the trainer a --known-party, the other three are taken before any
 * commitment. No bond is held: past the window timeout() ends the first
 * Unchallenged and the others Cancelled, and the watcher's 1.2 ETH is
 * credited back. */
static void test_stranger_runs(void)
{
    const uint64_t bond = 300000000000000000ULL; /* 0.3 ETH */
    char state[256], logp[512], trainer[43];
    snprintf(state, sizeof state, "%s/state-g", root);
    chain_address_to_string(trainer, &env.addr[FX_TRAINER]);
    uint64_t from = head() + 1, credit0 = fx_credit(&env, FX_ARBITER);
    fx_run run[5];
    for (int k = 0; k < 5; k++) {
        chain_arb_params p;
        fx_params(&env, &p, STEPS, 600, 1000, 1000);
        p.arbiter_bond = chain_u256_from_u64(bond);
        if (k == 4)
            p.commit_timeout = 30 * 86400;
        CHECK(fx_open(&env, &run[k], &p, NULL) == 0);
    }
    const char *once[] = {"--once", "--json", "--confirmations", "1", NULL};
    snprintf(logp, sizeof logp, "%s/g1.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"decline\":\"uncommitted\"") == 4 && count_in(logp, "\"decline\":\"window\"") == 1);
    CHECK(count_in(logp, "accept_sent") == 0);
    check_log_lines(logp);
    for (int k = 0; k < 5; k++)
        CHECK(committee_of(&run[k]).seated == 0);
    /* the first run's trainer commits: its seat is taken; a known trainer's
     * seat is taken before it commits (the second run) */
    set_history(&run[0].trainer, table.steps, &run[0].run_id);
    CHECK(fx_build_tree(&run[0].trainer, STEPS + 1) == 0);
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run[0].run_id, chain_merkle_root(run[0].trainer.tree), NULL,
                           NULL, NULL) == 0);
    snprintf(logp, sizeof logp, "%s/g2.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"event\":\"accept_mined\"") == 1 && committee_of(&run[0]).seated == 1);
    CHECK(committee_of(&run[1]).seated == 0 && count_in(logp, "\"decline\":\"uncommitted\"") == 3);
    const char *known[] = {"--once", "--json", "--confirmations", "1", "--known-party", trainer, NULL};
    snprintf(logp, sizeof logp, "%s/g3.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, known) == 0);
    CHECK(count_in(logp, "\"event\":\"accept_mined\"") == 3 && committee_of(&run[4]).seated == 0);
    for (int k = 1; k < 4; k++)
        CHECK(committee_of(&run[k]).seated == 1);
    /* nobody commits further: past the window anyone ends them, bonds back */
    CHECK(fx_warp(&env, 3601) == 0);
    for (int k = 0; k < 4; k++) {
        CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run[k].run_id, NULL) == 0);
        chain_arb_game g = game_of(&run[k]);
        CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED &&
              g.outcome == (k == 0 ? CHAIN_ARB_UNCHALLENGED : CHAIN_ARB_CANCELLED));
    }
    CHECK_EQ_U64(fx_credit(&env, FX_ARBITER) - credit0, 4 * bond); /* 1.2 ETH */
    for (int k = 0; k < 5; k++)
        fx_run_free(&run[k]);
}

/* An open challenge, settled by the watcher alone: the trainer lies from
 * step 3, the named auditor colludes (commits the trainer's root: Verified),
 * an outsider challenges with the honest history and the two play the
 * challenge's bisection. The watcher, named on the run, follows the
 * challenge's game (ChallengeOpened) and rules AuditorRight at step 3 with
 * the honest leaf hashed with the run's id (a challenge's leaves are the
 * run's), which marks the run refuted; once, across a second pass. The
 * watcher runs once while the challenge bisects and again (a restart)
 * when the verdict is due: the challenge's game comes back from its
 * game.json as a challenge of the run. */
static void test_challenge(void)
{
    chain_merkle_preimage honest[STEPS + 1], lie[STEPS + 1];
    memcpy(honest, table.steps, sizeof honest);
    lie_from(lie, 3, 0x20);
    uint64_t from = head() + 1;
    fx_run run, c;
    fx_history outsider;
    CHECK(open_run(&run, lie, lie) == 0); /* the auditor copies the trainer's root */
    CHECK(game_of(&run).outcome == CHAIN_ARB_VERIFIED);
    set_history(&outsider, honest, &run.run_id);
    CHECK(fx_build_tree(&outsider, STEPS + 1) == 0);
    CHECK_MSG(fx_challenge(&env, &c, &run, FX_OUTSIDER, &outsider, NULL) == 0, "challenge: %s", ovt_errmsg());
    char state[512], logp[512], file[700], id[65];
    snprintf(state, sizeof state, "%s/state-challenge", root);
    snprintf(logp, sizeof logp, "%s/challenge0.log", root);
    const char *once[] = {"--once", "--json", "--input-wait", "0", NULL};
    /* a first pass while the challenge is bisecting: its game is saved, and
     * the pass after the restart must read it back as a challenge */
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"challenge_opened\""), 1);
    CHECK(fx_play(&env, &c, NULL, NULL) == 0);
    chain_arb_game g = game_of(&c);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == 3, "challenge: phase %s step %llu",
              chain_arb_phase_name(g.phase), (unsigned long long)g.index);

    snprintf(logp, sizeof logp, "%s/challenge.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    scenario sc = {.name = "challenge", .run = c, .step = 3, .outcome = CHAIN_ARB_AUDITOR_RIGHT};
    honest_leaf(&sc.evidence, &run, 3);
    check_verdict(&sc);
    CHECK_EQ_U64(count_in(logp, "\"event\":\"challenge_opened\""), 0); /* known from the first pass */
    ovt_hash by;
    CHECK(chain_arb_refuted_by(&env.arb, &run.run_id, NULL, &by) == 0 && !memcmp(by.b, c.run_id.b, 32));
    /* its folder names the run it disputes */
    ovt_hex_encode(id, c.run_id.b, 32);
    snprintf(file, sizeof file, "%s/games/%s/game.json", state, id);
    CHECK(count_in(file, "\"challenge_of\"") == 1 && count_in(file, "\"format\": 3") == 1);

    snprintf(logp, sizeof logp, "%s/challenge2.log", root);
    CHECK(arbiter(state, store_url, from, logp, 1, once) == 0);
    CHECK_EQ_U64(count_in(logp, "verdict_mined"), 0);
    CHECK(verdicts(&c, NULL) == 1);
    fx_history_free(&outsider);
    fx_run_free(&c);
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

    /* a game.json as the watcher wrote it before committees (no "format")
     * still loads; one of a later format is refused, saying so */
    static const char v1[] = "{\"done\": true, \"events\": [], \"first_missing\": 0, \"opened_block\": 3, "
                             "\"run_id\": \"0x0000000000000000000000000000000000000000000000000000000000000000\", "
                             "\"verdict\": {\"evidence\": \"0x0101010101010101010101010101010101010101010101010101010101010101\", "
                             "\"outcome\": 2, \"tx\": \"0x0202020202020202020202020202020202020202020202020202020202020202\"}}";
    CHECK(ovt_write_atomic(file, v1, strlen(v1), 0644) == 0);
    snprintf(logp, sizeof logp, "%s/bad4.log", root);
    CHECK(arbiter(dir, store_url, 0, logp, 1, once) == 0);
    CHECK(count_in(logp, "\"open_games\":0") == 1);
    char *v3 = malloc(sizeof v1 + 16);
    snprintf(v3, sizeof v1 + 16, "{\"format\": 4, %s", v1 + 1);
    CHECK(ovt_write_atomic(file, v3, strlen(v3), 0644) == 0);
    free(v3);
    snprintf(logp, sizeof logp, "%s/bad5.log", root);
    CHECK(arbiter(dir, store_url, 0, logp, 1, once) == 1);
    CHECK(count_in(logp, "\"format\" 4 is not one this ovt reads (1 to 3)") == 1 && count_in(logp, "game.json") == 1);
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
    CHECK_RUN(test_challenge());
    CHECK_RUN(test_kill_restart());
    CHECK_RUN(test_reorg());
    CHECK_RUN(test_node_outage());
    if (members_init() != 0) {
        fprintf(stderr, "committee members: %s\n", ovt_errmsg());
        return 1;
    }
    CHECK_RUN(test_committee_restart());
    CHECK_RUN(test_committee_liar());
    CHECK_RUN(test_stranger_runs());
    members_free();
    fx_stop(&env);
    ovt_wipe(arbiter_key, sizeof arbiter_key);
    if (check_failures == 0 && !getenv("OVT_TEST_KEEP"))
        tsup_runl(NULL, "/bin/rm", "-rf", root, NULL);
    else
        fprintf(stderr, "files kept in %s\n", root);
    return check_done();
}
