#ifndef OVT_COMMON_METRICS_H
#define OVT_COMMON_METRICS_H

/* The daemons' metrics (`--metrics-addr` of `ovt arbiter watch` and
 * `ovt agent`; docs/arbiter.md, "Operating a watcher"). One set per
 * process: the daemon loop, the chain client, the transaction manager and
 * the store update it through the hook calls below (cheap, thread-safe,
 * usable whether or not anything is served), and ovt_metrics_serve exposes
 * it as /metrics in the Prometheus text exposition format (version 0.0.4)
 * and /healthz. */

#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "common/httpserve.h"

typedef enum {
    OVT_METRIC_TX_SENT = 0,      /* transactions submitted (first versions) */
    OVT_METRIC_TX_BUMPED,        /* replacement versions sent with higher fees */
    OVT_METRIC_TX_FAILED,        /* submissions or waits that ended in an error (reverts included) */
    OVT_METRIC_NODE_ERRORS,      /* JSON-RPC requests the node did not answer (transport, HTTP status) */
    OVT_METRIC_STORE_FETCH_BYTES,
    OVT_METRIC_STORE_FETCHES,
    OVT_METRIC_STORE_FETCH_FAILURES, /* missing, unreachable, oversized (not: forged, counted by the caller) */
    OVT_METRIC_TICKS,            /* loop iterations that completed without error */
    OVT_METRIC_TICK_ERRORS,      /* loop iterations that failed */
    OVT_METRIC_COUNT
} ovt_metric_counter;

void ovt_metrics_add(ovt_metric_counter c, uint64_t n);
uint64_t ovt_metrics_get(ovt_metric_counter c);

/* The chain as the daemon last read it: the head, the block it acts on
 * (read up to), and the head's timestamp (unix seconds). */
void ovt_metrics_chain(uint64_t head, uint64_t read_block, uint64_t head_time);

/* A game the daemon follows: its phase name (chain_arb_phase_name) and its
 * deadline (unix seconds, 0 when none runs). Called again on every read;
 * `done` games stay counted under their phase but have no deadline. Up to
 * 1024 games are tracked. */
void ovt_metrics_game(const ovt_hash *run_id, const char *phase, uint64_t deadline, int done);

/* The arbiter declined a run's seat (arbiter/decide.h: the action's
 * decline, a static string such as "bond", "window", "uncommitted"):
 * counted by reason, once each time the watcher decides so anew. */
void ovt_metrics_seat_declined(const char *reason);

/* Seconds the last re-execution (or replay) of a step took. */
void ovt_metrics_eval_seconds(double seconds);

/* The loop completed an iteration (ok) or failed one; /healthz answers 200
 * while the last completed iteration is younger than the stale limit. */
void ovt_metrics_tick(int ok);

/* The role label ("arbiter", "trainer", "auditor") and the stale limit of
 * /healthz in milliseconds (at least the loop's pause plus slack). */
void ovt_metrics_configure(const char *role, long stale_ms);

/* Renders /metrics; malloc'd text. */
int ovt_metrics_render(char **text, size_t *len) OVT_MUST_USE;

/* Whether the daemon is healthy (1) or not (0), with a one-line reason. */
int ovt_metrics_healthy(char *why, size_t cap);

/* Another page on the same server: handler answers the GETs it fills a
 * reply for (others stay 404 for the next route). Up to 8 routes; register
 * before ovt_metrics_serve (the arbiter's /status: arbiter/status.h). */
int ovt_metrics_route(ovt_http_handler handler, void *ctx) OVT_MUST_USE;

/* Serves /metrics, /healthz and the routes on addr (ovt_httpserve_start). */
int ovt_metrics_serve(ovt_httpserve **out, const char *addr) OVT_MUST_USE;

#endif
