/* Debian's prometheus scrapes the arbiter daemon during a dispute on anvil
 * (label arbiter, anvil): the test starts prometheus on 127.0.0.1 (free
 * port, temporary TSDB, scraping the arbiter's --metrics-addr every second)
 * and `ovt devnet --fault bitflip --arbiter-metrics-addr ...`, waits for
 * prometheus to report the target up, reads /healthz from the arbiter
 * itself, and once the dispute has settled asks prometheus's HTTP API that
 * the read block moved, that a game was followed and that its phases were
 * seen. Skipped (exit 77) when prometheus is not installed. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "support/anvil.h"
#include "support/servers.h"

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

    char ovt[4096], maddr[64], out_path[256], err_path[256];
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", metrics_port);
    snprintf(out_path, sizeof out_path, "%s/devnet.out", dir);
    snprintf(err_path, sizeof err_path, "%s/devnet.err", dir);
    char *dargv[] = {ovt, "devnet", "--fault", "bitflip", "--steps", "32", "--batch", "2", "--seq", "16",
                     "--arbiter-metrics-addr", maddr, "--json", NULL};
    pid_t dev_pid = ready ? tsup_spawn(dargv, out_path) : -1;
    CHECK(dev_pid > 0);

    /* the event: prometheus has scraped the arbiter successfully */
    double v = 0;
    int up = 0, dev_status = -2, dev_done = 0;
    while (dev_pid > 0 && !up && !(dev_done = tsup_exited(dev_pid, &dev_status))) {
        up = prom_query("up{job=\"ovt-arbiter\"} == 1", &v) == 0;
        if (!up)
            tsup_sleep_ms(200);
    }
    CHECK_MSG(up, "prometheus never scraped the arbiter successfully; see %s and %s", prom_log, out_path);
    if (up) {
        /* the arbiter's own health check, while it runs */
        char hurl[128];
        snprintf(hurl, sizeof hurl, "http://%s/healthz", maddr);
        long hs = tsup_http_get(hurl, body, sizeof body);
        CHECK_MSG(hs == 200 || dev_done, "healthz %ld: %s", hs, body);
        CHECK(prom_query("ovt_chain_head_block", &v) == 0 && v >= 1);
        CHECK(prom_query("ovt_info{role=\"arbiter\"}", &v) == 0 && v == 1);
    }
    while (dev_pid > 0 && !dev_done) {
        dev_done = tsup_exited(dev_pid, &dev_status);
        if (!dev_done)
            tsup_sleep_ms(200);
    }
    CHECK_MSG(dev_status == 0, "ovt devnet exited %d; see %s", dev_status, out_path);
    uint8_t *outb = NULL;
    size_t outl = 0;
    CHECK(ovt_read_file(out_path, &outb, &outl, 1 << 22) == 0);
    CHECK(outb && strstr((char *)outb, "\"outcome\": \"auditor-right\"") != NULL);
    free(outb);

    /* what prometheus recorded during the dispute */
    CHECK(prom_query("max_over_time(ovt_chain_read_block[1h]) - min_over_time(ovt_chain_read_block[1h])", &v) == 0);
    CHECK_MSG(v > 0, "the read block never moved in the scrapes (%g)", v);
    CHECK(prom_query("max_over_time(ovt_games_followed[1h])", &v) == 0);
    CHECK_MSG(v >= 1, "no scrape saw a followed game (%g)", v);
    CHECK(prom_query("count(count_over_time(ovt_games[1h]))", &v) == 0);
    CHECK_MSG(v >= 1, "no phase series (%g)", v);
    CHECK(prom_query("max_over_time(ovt_ticks_total[1h])", &v) == 0 && v >= 2);
    CHECK(prom_query("max_over_time(ovt_node_errors_total[1h])", &v) == 0 && v == 0);

    tsup_stop(dev_pid > 0 && !dev_done ? dev_pid : -1);
    tsup_stop(prom_pid);
    int rv = check_done();
    if (rv == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    } else {
        fprintf(stderr, "kept %s\n", dir);
    }
    curl_global_cleanup();
    return rv;
}
