#ifndef OVT_ARBITER_STATUS_H
#define OVT_ARBITER_STATUS_H

/* The watcher's status page (docs/arbiter.md, "The status page"): what an
 * operator wants at a glance, served on the daemon's --metrics-addr next to
 * /metrics and /healthz:
 *   /status       plain HTML, no external assets, refreshed by itself
 *                 every 5 s (<meta http-equiv="refresh">), every value
 *                 HTML-escaped; "/" serves the same page
 *   /status.json  the same facts as JSON
 * The runs watched (each one's phase, outcome, deadlines, bonds, the
 * bisection's round of its depth, the evaluation, the verdict or ballot
 * sent, the next action and why, the game's events from RunOpened on), the
 * chain as last read, the last errors and the recent log events.
 *
 * The watcher (one thread) reports through the calls below; the HTTP
 * server's thread renders. One set per process, behind a mutex, like
 * common/metrics.h; the watcher's own state is not touched by a render. */

#include <jansson.h>
#include <stdint.h>

#include "arbiter/decide.h"
#include "arbiter/watch_state.h"
#include "chain/arbitration.h"
#include "common/httpserve.h"

/* Who watches what: the arbiter's address, the chain and the contract. */
void arb_status_start(const chain_address *self, uint64_t chain_id, const chain_address *contract);

/* The chain as the watcher last read it (head, the block it acts on, the
 * head's timestamp). */
void arb_status_chain(uint64_t head, uint64_t read_block, uint64_t head_time);

/* One run as last read: g (the state on disk: events, evaluation, the
 * transactions sent), and when read from the chain this tick its run, game
 * and committee and the next action decided (each may be NULL: a game
 * loaded from the state dir and no longer followed). */
void arb_status_game(const arb_game *g, const chain_arb_params *run, const chain_arb_game *game,
                     const chain_arb_committee *committee, const arb_action *next);

/* One log event (arb_say): kept among the recent events, and among the last
 * errors when it is one (error, node_unreachable, a failed or held send). */
void arb_status_event(const char *event, const ovt_hash *run, const char *message);

/* The facts as /status.json has them, with the moment of the render and
 * the daemon's health (common/metrics.h): a new JSON reference the caller
 * owns (NULL out of memory). */
json_t *arb_status_snapshot(void);

/* The page as JSON or HTML (malloc'd, NUL-terminated; the HTML in
 * status_html.c). */
int arb_status_render_json(char **out, size_t *len) OVT_MUST_USE;
int arb_status_render_html(char **out, size_t *len) OVT_MUST_USE;

/* The ovt_httpserve handler of "/", "/status" and "/status.json" (register
 * with ovt_metrics_route). */
void arb_status_handle(void *ctx, const char *path, ovt_http_reply *reply);

#endif
