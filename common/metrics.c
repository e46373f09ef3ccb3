/* The daemons' metrics (see metrics.h). Counters are atomics; the few
 * gauges that belong together (the chain read, the games) sit under one
 * mutex that a render holds only while copying. */
#include "common/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"

#define METRICS_MAX_GAMES 1024
#define METRICS_MAX_PHASES 16
#define METRICS_MAX_DECLINES 8

struct decline_row {
    const char *reason; /* static string */
    uint64_t count;
};

struct game_row {
    ovt_hash run_id;
    const char *phase; /* static string */
    uint64_t deadline;
    int done;
};

static atomic_uint_fast64_t counters[OVT_METRIC_COUNT];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const char *role;
    long stale_ms;
    int have_chain;
    uint64_t head, read_block, head_time;
    struct game_row games[METRICS_MAX_GAMES];
    size_t ngames;
    double eval_seconds;
    int have_eval;
    double started, last_ok, last_fail; /* unix seconds, 0: never */
    struct decline_row declines[METRICS_MAX_DECLINES];
    size_t ndeclines;
} m = {.role = "daemon", .stale_ms = 60000};

static double wall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void ovt_metrics_add(ovt_metric_counter c, uint64_t n)
{
    if ((unsigned)c < OVT_METRIC_COUNT)
        atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed);
}

uint64_t ovt_metrics_get(ovt_metric_counter c)
{
    return (unsigned)c < OVT_METRIC_COUNT ? atomic_load_explicit(&counters[c], memory_order_relaxed) : 0;
}

void ovt_metrics_configure(const char *role, long stale_ms)
{
    pthread_mutex_lock(&lock);
    m.role = role;
    m.stale_ms = stale_ms;
    m.started = wall_now();
    pthread_mutex_unlock(&lock);
}

void ovt_metrics_chain(uint64_t head, uint64_t read_block, uint64_t head_time)
{
    pthread_mutex_lock(&lock);
    m.have_chain = 1;
    m.head = head;
    m.read_block = read_block;
    m.head_time = head_time;
    pthread_mutex_unlock(&lock);
}

void ovt_metrics_game(const ovt_hash *run_id, const char *phase, uint64_t deadline, int done)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < m.ngames && memcmp(m.games[i].run_id.b, run_id->b, 32) != 0)
        i++;
    if (i == m.ngames && m.ngames < METRICS_MAX_GAMES)
        m.games[m.ngames++].run_id = *run_id;
    if (i < m.ngames) {
        m.games[i].phase = phase;
        m.games[i].deadline = done ? 0 : deadline;
        m.games[i].done = done;
    }
    pthread_mutex_unlock(&lock);
}

void ovt_metrics_seat_declined(const char *reason)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < m.ndeclines && strcmp(m.declines[i].reason, reason) != 0)
        i++;
    if (i == m.ndeclines && m.ndeclines < METRICS_MAX_DECLINES)
        m.declines[m.ndeclines++].reason = reason;
    if (i < m.ndeclines)
        m.declines[i].count++;
    pthread_mutex_unlock(&lock);
}

void ovt_metrics_eval_seconds(double seconds)
{
    pthread_mutex_lock(&lock);
    m.eval_seconds = seconds;
    m.have_eval = 1;
    pthread_mutex_unlock(&lock);
}

void ovt_metrics_tick(int ok)
{
    ovt_metrics_add(ok ? OVT_METRIC_TICKS : OVT_METRIC_TICK_ERRORS, 1);
    pthread_mutex_lock(&lock);
    if (ok)
        m.last_ok = wall_now();
    else
        m.last_fail = wall_now();
    pthread_mutex_unlock(&lock);
}

static void metric(ovt_text *t, const char *name, const char *type, const char *help)
{
    ovt_text_put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(ovt_text *t, const char *name, const char *help, ovt_metric_counter c)
{
    metric(t, name, "counter", help);
    ovt_text_put(t, "%s %llu\n", name, (unsigned long long)ovt_metrics_get(c));
}

int ovt_metrics_render(char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    pthread_mutex_lock(&lock);
    const char *role = m.role;
    int have_chain = m.have_chain, have_eval = m.have_eval;
    uint64_t head = m.head, read_block = m.read_block, head_time = m.head_time;
    double eval_seconds = m.eval_seconds, last_ok = m.last_ok, started = m.started;
    size_t ngames = m.ngames, ndeclines = m.ndeclines;
    struct decline_row declines[METRICS_MAX_DECLINES];
    memcpy(declines, m.declines, sizeof declines);
    struct game_row *games = malloc((ngames ? ngames : 1) * sizeof *games);
    if (games)
        memcpy(games, m.games, ngames * sizeof *games);
    pthread_mutex_unlock(&lock);
    if (!games)
        return ovt_fail(OVT_ENOMEM, "out of memory rendering metrics");
    double now = wall_now();
    ovt_text t = {0};
    metric(&t, "ovt_info", "gauge", "Always 1; the labels say which ovt daemon this is.");
    ovt_text_put(&t, "ovt_info{role=\"%s\",version=\"%s\"} 1\n", role, OVT_VERSION);
    if (started > 0) {
        metric(&t, "ovt_start_time_seconds", "gauge", "Unix time the daemon started.");
        ovt_text_put(&t, "ovt_start_time_seconds %.3f\n", started);
    }
    if (have_chain) {
        metric(&t, "ovt_chain_head_block", "gauge", "The newest block the node reported.");
        ovt_text_put(&t, "ovt_chain_head_block %llu\n", (unsigned long long)head);
        metric(&t, "ovt_chain_read_block", "gauge",
               "The newest block the daemon has read and acts on (the head less the confirmations).");
        ovt_text_put(&t, "ovt_chain_read_block %llu\n", (unsigned long long)read_block);
        metric(&t, "ovt_chain_lag_blocks", "gauge", "Head block minus read block.");
        ovt_text_put(&t, "ovt_chain_lag_blocks %llu\n", (unsigned long long)(head > read_block ? head - read_block : 0));
        metric(&t, "ovt_chain_head_age_seconds", "gauge",
               "Seconds since the head block's timestamp (a stalled chain or node grows this).");
        ovt_text_put(&t, "ovt_chain_head_age_seconds %.0f\n", now > (double)head_time ? now - (double)head_time : 0.0);
    }
    if (last_ok > 0) {
        metric(&t, "ovt_last_tick_timestamp_seconds", "gauge", "Unix time of the last loop iteration that completed.");
        ovt_text_put(&t, "ovt_last_tick_timestamp_seconds %.3f\n", last_ok);
    }
    /* games by phase, the open ones and the nearest deadline */
    const char *phases[METRICS_MAX_PHASES];
    uint64_t per_phase[METRICS_MAX_PHASES];
    size_t nphases = 0, open = 0;
    uint64_t nearest = 0;
    for (size_t i = 0; i < ngames; i++) {
        size_t k = 0;
        while (k < nphases && strcmp(phases[k], games[i].phase) != 0)
            k++;
        if (k == nphases && nphases < METRICS_MAX_PHASES) {
            phases[nphases] = games[i].phase;
            per_phase[nphases++] = 0;
        }
        if (k < nphases)
            per_phase[k]++;
        if (!games[i].done) {
            open++;
            if (games[i].deadline && (!nearest || games[i].deadline < nearest))
                nearest = games[i].deadline;
        }
    }
    metric(&t, "ovt_games", "gauge", "Games this daemon knows, by the phase it last read (settled ones included).");
    for (size_t k = 0; k < nphases; k++)
        ovt_text_put(&t, "ovt_games{phase=\"%s\"} %llu\n", phases[k], (unsigned long long)per_phase[k]);
    metric(&t, "ovt_games_followed", "gauge", "Games not yet settled that this daemon follows.");
    ovt_text_put(&t, "ovt_games_followed %zu\n", open);
    if (nearest) {
        metric(&t, "ovt_nearest_deadline_seconds", "gauge",
               "Seconds until the nearest deadline of a followed game (negative: passed).");
        ovt_text_put(&t, "ovt_nearest_deadline_seconds %.0f\n", (double)nearest - now);
    }
    if (ndeclines) {
        metric(&t, "ovt_seats_declined_total", "counter",
               "Runs whose seat the arbiter did not take when it looked, by reason (bond, window, uncommitted).");
        for (size_t k = 0; k < ndeclines; k++)
            ovt_text_put(&t, "ovt_seats_declined_total{reason=\"%s\"} %llu\n", declines[k].reason,
                         (unsigned long long)declines[k].count);
    }
    counter(&t, "ovt_transactions_sent_total", "Transactions submitted (first versions).", OVT_METRIC_TX_SENT);
    counter(&t, "ovt_transactions_bumped_total", "Replacement transactions sent with raised fees.",
            OVT_METRIC_TX_BUMPED);
    counter(&t, "ovt_transactions_failed_total", "Transactions that failed to send, reverted or were never mined.",
            OVT_METRIC_TX_FAILED);
    counter(&t, "ovt_node_errors_total", "JSON-RPC requests the node did not answer (transport errors, bad HTTP status).",
            OVT_METRIC_NODE_ERRORS);
    counter(&t, "ovt_store_fetches_total", "Objects fetched from the artifact store.", OVT_METRIC_STORE_FETCHES);
    counter(&t, "ovt_store_fetch_bytes_total", "Bytes fetched from the artifact store.", OVT_METRIC_STORE_FETCH_BYTES);
    counter(&t, "ovt_store_fetch_failures_total", "Fetches from the artifact store that failed (missing, unreachable, too large).",
            OVT_METRIC_STORE_FETCH_FAILURES);
    counter(&t, "ovt_ticks_total", "Loop iterations that completed.", OVT_METRIC_TICKS);
    counter(&t, "ovt_tick_errors_total", "Loop iterations that failed (retried).", OVT_METRIC_TICK_ERRORS);
    if (have_eval && isfinite(eval_seconds)) {
        metric(&t, "ovt_last_step_evaluation_seconds", "gauge", "Wall time of the last re-execution of a step.");
        ovt_text_put(&t, "ovt_last_step_evaluation_seconds %.6f\n", eval_seconds);
    }
    free(games);
    if (t.failed) {
        free(t.p);
        return ovt_fail(OVT_ENOMEM, "out of memory rendering metrics");
    }
    *out = t.p;
    *len = t.len;
    return 0;
}

int ovt_metrics_healthy(char *why, size_t cap)
{
    pthread_mutex_lock(&lock);
    double last_ok = m.last_ok, last_fail = m.last_fail;
    long stale_ms = m.stale_ms;
    pthread_mutex_unlock(&lock);
    double now = wall_now();
    if (last_ok <= 0) {
        snprintf(why, cap, "%s", last_fail > 0 ? "no loop iteration has completed yet; the last one failed (see the log)"
                                               : "starting: no loop iteration has completed yet");
        return 0;
    }
    double age = now - last_ok;
    if (age * 1000.0 > (double)stale_ms) {
        snprintf(why, cap, "the last completed loop iteration was %.0f s ago (limit %.0f s)%s", age,
                 (double)stale_ms / 1000.0, last_fail > last_ok ? "; later ones failed (node down? see the log)" : "");
        return 0;
    }
    snprintf(why, cap, "ok: last loop iteration %.1f s ago", age < 0 ? 0.0 : age);
    return 1;
}

#define METRICS_MAX_ROUTES 8
static struct {
    ovt_http_handler handler;
    void *ctx;
} routes[METRICS_MAX_ROUTES];
static size_t nroutes;

int ovt_metrics_route(ovt_http_handler handler, void *ctx)
{
    if (nroutes == METRICS_MAX_ROUTES)
        return ovt_fail(OVT_EINVAL, "internal: more than %d pages on the metrics server", METRICS_MAX_ROUTES);
    routes[nroutes].handler = handler;
    routes[nroutes++].ctx = ctx;
    return 0;
}

static void handle(void *ctx, const char *path, ovt_http_reply *r)
{
    (void)ctx;
    for (size_t k = 0; k < nroutes && r->status == 404 && !r->body; k++)
        routes[k].handler(routes[k].ctx, path, r);
    if (r->status != 404 || r->body)
        return;
    if (strcmp(path, "/metrics") == 0) {
        char *text;
        size_t len;
        if (ovt_metrics_render(&text, &len) == 0) {
            r->status = 200;
            r->content_type = "text/plain; version=0.0.4; charset=utf-8";
            r->body = text;
            r->body_len = len;
        } else {
            r->status = 500;
        }
    } else if (strcmp(path, "/healthz") == 0) {
        char why[256];
        r->status = ovt_metrics_healthy(why, sizeof why) ? 200 : 503;
        size_t n = strlen(why);
        r->body = malloc(n + 2);
        if (r->body) {
            memcpy(r->body, why, n);
            r->body[n] = '\n';
            r->body[n + 1] = '\0';
            r->body_len = n + 1;
        }
    }
}

int ovt_metrics_serve(ovt_httpserve **out, const char *addr)
{
    int rv = ovt_httpserve_start(out, addr, handle, NULL);
    return rv ? ovt_fail_wrap(rv, "--metrics-addr") : 0;
}
