/* Hostile stores and hostile files.
 *   The arbiter daemon (`ovt arbiter watch`) against an HTTP store whose
 *   every object is an endless chunked body, and against one that trickles
 *   one byte every 100 ms under a 1 GB Content-Length: a dispute in
 *   AwaitingVerdict with a 30 s verdict timeout is ruled InputsUnavailable
 *   (the contract accepts a verdict only before the deadline) and the
 *   daemon's peak RSS (VmHWM) stays below the binary's own peak (`ovt
 *   arbiter watch --help`: the CUDA and BLAS libraries it loads are most of
 *   it) plus RSS_GROWTH_KB; SIGTERM while it is
 *   stuck in a trickling fetch ends it within a safety bound (the time is
 *   printed).
 *   A FIFO is refused at once, without blocking, by every command that
 *   reads a file: ovt rlog, keys address --keystore, verify, train --data,
 *   and a file:// store whose manifest is a FIFO. */
#include <sys/resource.h>
#include <sys/stat.h>

#include "adv_fixture.h"
#include "check.h"
#include "fixture.h"

#define STEPS 6
#define VERDICT_TIMEOUT 30
#define MARGIN "8"
/* What the daemon may add to the binary's own peak: an object buffered in
 * memory would be hundreds of MB (the review saw 3.9 GB in 75 s). */
#define RSS_GROWTH_KB (64 * 1024)

static long baseline_kb;

static fx_env env;
static char arbiter_key[65];
static tsup_httpd endless_store, trickle_store;

static void endless(void *ctx, const char *body, tsup_http_reply *r)
{
    (void)ctx, (void)body;
    r->endless = 1;
}

static void trickle(void *ctx, const char *body, tsup_http_reply *r)
{
    (void)ctx, (void)body;
    r->trickle_ms = 100;
    r->content_length = 1000000000L;
}

/* A run in AwaitingVerdict, with this test's arbiter (random histories
 * that differ from step 3: the verdict is due on step 3). */
static int dispute(fx_run *run)
{
    chain_arb_params p;
    fx_params(&env, &p, STEPS, 600, 1000, 1000);
    p.arbiter_timeout = VERDICT_TIMEOUT;
    int rv = fx_open(&env, run, &p, NULL);
    if (!rv)
        rv = fx_histories(run, 3);
    if (!rv)
        rv = fx_commit_both(&env, run, NULL);
    if (!rv)
        rv = fx_play(&env, run, NULL, NULL);
    chain_arb_game g;
    if (!rv && (rv = chain_arb_get_game(&env.arb, &run->run_id, NULL, &g)) == 0 &&
        g.phase != CHAIN_ARB_PHASE_AWAITING_VERDICT)
        rv = ovt_fail(OVT_EINVAL, "the game is in phase %s, not awaiting a verdict", chain_arb_phase_name(g.phase));
    return rv;
}

static pid_t start_arbiter(const char *store, const char *state_dir, uint64_t from_block, const char *log)
{
    char contract[43], from[24];
    chain_address_to_string(contract, &env.arb.address);
    snprintf(from, sizeof from, "%llu", (unsigned long long)from_block);
    char *argv[] = {af_ovt, "arbiter", "watch", "--rpc-url", env.node.url, "--contract", contract, "--store",
                    (char *)store, "--state-dir", (char *)state_dir, "--from-block", from, "--poll-interval", "1",
                    "--confirmations", "1", "--deadline-margin", MARGIN, "--max-dataset", "16777216",
                    "--private-key-env", "ADV_ARBITER_KEY", NULL};
    return adv_spawn(argv, log, log);
}

static long vm_hwm_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static void hostile_store(const char *name, tsup_httpd *store)
{
    fx_run run;
    memset(&run, 0, sizeof run);
    uint64_t from;
    CHECK(chain_rpc_block_number(env.rpc, &from) == 0);
    CHECK_MSG(dispute(&run) == 0, "%s: %s", name, ovt_errmsg());
    chain_arb_game g;
    CHECK(chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0);
    char state[600], log[600];
    snprintf(state, sizeof state, "%s/arb-%s", af_dir, name);
    snprintf(log, sizeof log, "%s/arb-%s.log", af_dir, name);
    double t0 = adv_now();
    pid_t pid = start_arbiter(store->url, state, from, log);
    long peak = 0;
    int settled = 0;
    /* Wait on the chain: the game settles when a verdict is mined (or the
     * deadline passes: then nobody can rule, and the game shows it). */
    for (double end = t0 + VERDICT_TIMEOUT + 60; !settled && adv_now() < end; adv_sleep_ms(200)) {
        long kb = vm_hwm_kb(pid);
        if (kb > peak)
            peak = kb;
        settled = chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0 && g.phase == CHAIN_ARB_PHASE_SETTLED;
    }
    long kb = vm_hwm_kb(pid);
    if (kb > peak)
        peak = kb;
    double took = adv_now() - t0;
    kill(pid, SIGTERM);
    CHECK(adv_wait(pid, 10) >= 0);
    char *text = adv_slurp(log);
    CHECK_MSG(settled && g.outcome == CHAIN_ARB_INPUTS_UNAVAILABLE, "%s: outcome %s; log:\n%s", name,
              chain_arb_outcome_name(g.outcome), text);
    CHECK_MSG(peak > 0 && peak < baseline_kb + RSS_GROWTH_KB, "%s: peak RSS %ld kB (bound %ld + %d kB)", name, peak,
              baseline_kb, RSS_GROWTH_KB);
    CHECK_MSG(strstr(text, arbiter_key) == NULL, "%s: the log holds the key", name);
    printf("%s store: InputsUnavailable %.1f s after the daemon started (verdict timeout %d s, margin %s s), "
           "peak RSS %ld kB (the binary alone: %ld kB), %d requests\n",
           name, took, VERDICT_TIMEOUT, MARGIN, peak, baseline_kb, __atomic_load_n(&store->requests, __ATOMIC_SEQ_CST));
    free(text);
    fx_run_free(&run);
}

static void sigterm_mid_fetch(void)
{
    fx_run run;
    memset(&run, 0, sizeof run);
    uint64_t from;
    CHECK(chain_rpc_block_number(env.rpc, &from) == 0);
    CHECK(dispute(&run) == 0);
    char state[600], log[600];
    snprintf(state, sizeof state, "%s/arb-sigterm", af_dir);
    snprintf(log, sizeof log, "%s/arb-sigterm.log", af_dir);
    int before = __atomic_load_n(&trickle_store.requests, __ATOMIC_SEQ_CST);
    pid_t pid = start_arbiter(trickle_store.url, state, from, log);
    /* Wait until it is inside a fetch (the store has its request). */
    int fetching = 0;
    for (double end = adv_now() + 60; !fetching && adv_now() < end; adv_sleep_ms(50))
        fetching = __atomic_load_n(&trickle_store.requests, __ATOMIC_SEQ_CST) > before;
    CHECK(fetching);
    adv_sleep_ms(500); /* well into the trickle */
    double t0 = adv_now();
    kill(pid, SIGTERM);
    int rv = adv_wait(pid, 10);
    double took = adv_now() - t0;
    CHECK_MSG(rv >= 0 && took < 5.0, "exit %d after %.2f s", rv, took);
    printf("SIGTERM during a trickling fetch: the arbiter exited %.2f s later (status %d)\n", took, rv);
    fx_run_free(&run);
}

/* Runs ovt with args; it must end (not hang on the FIFO) and refuse it. */
static void refuses_fifo(const char *what, char **args)
{
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/fifo.out", af_dir);
    snprintf(err, sizeof err, "%s/fifo.err", af_dir);
    double t0 = adv_now();
    int rv = adv_wait(adv_spawn(args, out, err), 20);
    double took = adv_now() - t0;
    char *text = adv_slurp(err);
    CHECK_MSG(rv > 0 && strstr(text, "not a regular file"), "%s: exit %d after %.1f s: %s", what, rv, took, text);
    printf("FIFO refused by %s in %.2f s\n", what, took);
    free(text);
}

static void fifos(void)
{
    char fifo[600], pw[600], store[600], run_dir[600], url[700], receipt[700];
    snprintf(fifo, sizeof fifo, "%s/a.fifo", af_dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(pw, sizeof pw, "%s/pw", af_dir);
    CHECK(ovt_write_atomic(pw, "pw\n", 3, 0600) == 0);
    char *rlog[] = {af_ovt, "rlog", fifo, NULL};
    refuses_fifo("ovt rlog", rlog);
    char *keys[] = {af_ovt, "keys", "address", "--keystore", fifo, "--password-file", pw, NULL};
    refuses_fifo("ovt keys address --keystore", keys);
    char *verify[] = {af_ovt, "verify", fifo, NULL};
    refuses_fifo("ovt verify", verify);
    snprintf(run_dir, sizeof run_dir, "%s/fifo-run", af_dir);
    char *train[] = {af_ovt, "train", "--model", "gpt2-tiny", "--data", fifo, "--out", run_dir, "--steps", "2", NULL};
    refuses_fifo("ovt train --data", train);
    /* A file:// store whose run manifest is a FIFO. */
    static const char rid[] = "0x1111111111111111111111111111111111111111111111111111111111111111";
    snprintf(store, sizeof store, "%s/fifo-store/run", af_dir);
    CHECK(ovt_mkdirs(store, 0755) == 0);
    snprintf(receipt, sizeof receipt, "%s/%s.json", store, rid + 2);
    CHECK(mkfifo(receipt, 0600) == 0);
    snprintf(url, sizeof url, "file://%s/fifo-store", af_dir);
    char out_dir[700];
    snprintf(out_dir, sizeof out_dir, "%s/fifo-audit", af_dir);
    char *audit[] = {af_ovt, "audit", url, "--run-id", (char *)rid, "--out", out_dir, NULL};
    refuses_fifo("ovt audit on a file:// store", audit);
}

/* The peak RSS of `ovt arbiter watch --help`: the binary and its libraries. */
static long binary_peak_kb(void)
{
    char *argv[] = {af_ovt, "arbiter", "watch", "--help", NULL};
    pid_t pid = adv_spawn(argv, NULL, NULL);
    struct rusage ru;
    int status;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid)
        return -1;
    return ru.ru_maxrss;
}

int main(void)
{
    CHECK(af_init("adv-store") == 0);
    CHECK((baseline_kb = binary_peak_kb()) > 0);
    CHECK_RUN(fifos());
    if (fx_start(&env) != 0)
        return 1;
    ovt_hex_encode(arbiter_key, env.key[FX_ARBITER].b, 32);
    setenv("ADV_ARBITER_KEY", arbiter_key, 1);
    CHECK(tsup_httpd_start(&endless_store, endless, NULL) == 0);
    CHECK(tsup_httpd_start(&trickle_store, trickle, NULL) == 0);
    CHECK_RUN(hostile_store("endless", &endless_store));
    CHECK_RUN(hostile_store("trickling", &trickle_store));
    CHECK_RUN(sigterm_mid_fetch());
    tsup_httpd_stop(&endless_store);
    tsup_httpd_stop(&trickle_store);
    fx_stop(&env);
    ovt_wipe(arbiter_key, sizeof arbiter_key);
    af_cleanup();
    return check_done();
}
