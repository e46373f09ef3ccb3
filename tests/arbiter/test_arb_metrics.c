/* Debian's prometheus scrapes the arbiter daemon during a dispute on anvil
 * (label arbiter, anvil). The test starts anvil with the contract (the
 * contract fixture), `ovt arbiter watch --metrics-addr`, and prometheus on
 * 127.0.0.1 (free port, temporary TSDB, 1 s scrapes), then drives the chain
 * itself and after every step waits until prometheus's HTTP API
 * (/api/v1/query) shows the change, so the checks wait on events:
 *   the target is up and the read block is there; blocks mined -> the read
 *   block moves; a run naming the arbiter opened and disputed -> one game
 *   bisecting with a deadline ahead; the bisection played out and the store
 *   empty -> the arbiter rules inputs unavailable: settled, one verdict
 *   transaction sent, store fetch failures counted. /healthz answers 200.
 * Skipped (exit 77) when prometheus is not installed. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "fixture.h"
#include "support/anvil.h"
#include "support/proc.h"
#include "support/servers.h"
#include "watch_fixture.h"

#define SKIP 77

static int prom_port;
static char body[1 << 16];

/* The value of the first series an instant query returns; -1 if none. */
static int prom_query(const char *query, double *out)
{
    CURL *c = curl_easy_init();
    char *q = c ? curl_easy_escape(c, query, 0) : NULL;
    char url[2048];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/v1/query?query=%s", prom_port, q ? q : "");
    curl_free(q);
    curl_easy_cleanup(c);
    if (tsup_http_get(url, body, sizeof body) != 200)
        return -1;
    json_t *j = json_loads(body, 0, NULL);
    json_t *res = json_object_get(json_object_get(j, "data"), "result");
    const char *v = json_string_value(json_array_get(json_object_get(json_array_get(res, 0), "value"), 1));
    int rv = -1;
    if (v) {
        *out = strtod(v, NULL);
        rv = 0;
    }
    json_decref(j);
    return rv;
}

int main(void)
{
    static const char *const proms[] = {"/usr/bin/prometheus", "/usr/local/bin/prometheus", NULL};
    const char *prom = tsup_find_exe(proms);
    if (!prom) {
        printf("SKIP: prometheus is not installed (apt-get install prometheus; scripts/setup.sh)\n");
        return SKIP;
    }
    const char *bin = getenv("OVT_BINARY_DIR");
    char dir[] = "/tmp/ovt-metrics-XXXXXX";
    if (!bin || !mkdtemp(dir)) {
        fprintf(stderr, "OVT_BINARY_DIR unset or mkdtemp failed\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int metrics_port = tsup_free_port();
    prom_port = tsup_free_port();
    while (prom_port == metrics_port)
        prom_port = tsup_free_port();
    CHECK(metrics_port > 0 && prom_port > 0);

    char cfg[256], tsdb[256], prom_log[256], config[1024], listen[64], cfg_flag[300], tsdb_flag[300];
    snprintf(cfg, sizeof cfg, "%s/prometheus.yml", dir);
    snprintf(tsdb, sizeof tsdb, "%s/tsdb", dir);
    snprintf(prom_log, sizeof prom_log, "%s/prometheus.log", dir);
    int n = snprintf(config, sizeof config,
                     "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                     "scrape_configs:\n  - job_name: ovt-arbiter\n    static_configs:\n"
                     "      - targets: ['127.0.0.1:%d']\n",
                     metrics_port);
    CHECK(ovt_write_atomic(cfg, config, (size_t)n, 0644) == 0);
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", prom_port);
    snprintf(cfg_flag, sizeof cfg_flag, "--config.file=%s", cfg);
    snprintf(tsdb_flag, sizeof tsdb_flag, "--storage.tsdb.path=%s", tsdb);
    char *pargv[] = {(char *)prom, cfg_flag, tsdb_flag, listen, NULL};
    pid_t prom_pid = tsup_spawn(pargv, prom_log);
    CHECK(prom_pid > 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/-/ready", prom_port);
    int ready = 0, st;
    for (int i = 0; i < 600 && !ready; i++) { /* up to a minute for prometheus to open its TSDB */
        ready = tsup_http_get(url, body, sizeof body) == 200;
        if (!ready && tsup_exited(prom_pid, &st))
            break;
        if (!ready)
            tsup_sleep_ms(100);
    }
    CHECK_MSG(ready, "prometheus did not become ready; see %s", prom_log);

    /* anvil with the contract, and the arbiter watching it */
    fx_env env;
    CHECK(ready && fx_start(&env) == 0);
    if (!ready || !env.rpc) {
        tsup_stop(prom_pid);
        return check_done();
    }
    char maddr[64], arb_log[256], contract[43];
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", metrics_port);
    snprintf(arb_log, sizeof arb_log, "%s/arbiter.log", dir);
    pid_t arb_pid = watch_spawn(&env, dir, maddr, true, contract);
    CHECK(arb_pid > 0);

    /* each wait: until prometheus shows it (give up after two minutes) */
#define WAIT_FOR(query, cond, what)                                                       \
    do {                                                                                  \
        int seen_ = 0, st_;                                                               \
        for (int i_ = 0; i_ < 1200 && !seen_; i_++) {                                     \
            seen_ = prom_query(query, &v) == 0 && (cond);                                 \
            if (!seen_ && tsup_exited(arb_pid, &st_)) {                                   \
                arb_pid = -1;                                                             \
                break;                                                                    \
            }                                                                             \
            if (!seen_)                                                                   \
                tsup_sleep_ms(100);                                                       \
        }                                                                                 \
        CHECK_MSG(seen_, "prometheus never showed %s (%s); see %s and %s", what, query, arb_log, prom_log); \
    } while (0)

    double v = 0, v0 = 0;
    WAIT_FOR("up{job=\"ovt-arbiter\"}", v == 1, "the arbiter up");
    WAIT_FOR("ovt_chain_read_block", v >= 1, "a read block");
    v0 = v;
    CHECK(prom_query("ovt_info{role=\"arbiter\"}", &v) == 0 && v == 1);
    char hurl[128], hbody[512];
    snprintf(hurl, sizeof hurl, "http://%s/healthz", maddr);
    CHECK(tsup_http_get(hurl, hbody, sizeof hbody) == 200);

    /* blocks mined: the read block moves */
    for (int i = 0; i < 3; i++)
        CHECK(fx_raw(&env, "evm_mine", NULL) == 0);
    WAIT_FOR("ovt_chain_read_block", v >= v0 + 3, "the read block moving");
    CHECK(prom_query("ovt_games_followed", &v) == 0 && v == 0);

    /* a run naming this arbiter, disputed: one game bisecting, its deadline ahead */
    fx_run run;
    CHECK(watch_dispute(&env, &run) == 0);
    WAIT_FOR("ovt_games{phase=\"bisecting\"}", v == 1, "a game bisecting");
    CHECK(prom_query("ovt_games_followed", &v) == 0 && v == 1);
    CHECK(prom_query("ovt_nearest_deadline_seconds", &v) == 0 && v > 0);
    CHECK(prom_query("ovt_transactions_sent_total", &v) == 0 && v == 0);

    /* played out; the store is empty: the verdict is inputs unavailable */
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    WAIT_FOR("ovt_games{phase=\"settled\"}", v == 1, "the game settled");
    CHECK(prom_query("ovt_games_followed", &v) == 0 && v == 0);
    CHECK(prom_query("ovt_transactions_sent_total", &v) == 0 && v == 1);
    CHECK(prom_query("ovt_transactions_failed_total", &v) == 0 && v == 0);
    CHECK(prom_query("ovt_store_fetch_failures_total", &v) == 0 && v >= 1);
    CHECK(prom_query("ovt_node_errors_total", &v) == 0 && v == 0);
    CHECK(prom_query("max_over_time(ovt_ticks_total[1h])", &v) == 0 && v >= 2);
    chain_arb_game g;
    CHECK(chain_arb_get_game(&env.arb, &run.run_id, "latest", &g) == 0 && g.phase == CHAIN_ARB_PHASE_SETTLED &&
          g.outcome == CHAIN_ARB_INPUTS_UNAVAILABLE);
    fx_run_free(&run);

    tsup_stop(arb_pid);
    fx_stop(&env);
    tsup_stop(prom_pid);
    int rv = tsup_finish_dir(dir, check_done());
    curl_global_cleanup();
    return rv;
}
