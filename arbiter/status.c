/* The watcher's status page (see status.h). The facts are one JSON
 * document under a mutex: the watcher replaces its parts, a render copies
 * the text out (JSON) or walks it (HTML) while holding the lock. */
#include "arbiter/status.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain/keys.h"
#include "chain/types.h"
#include "common/metrics.h"
#include "common/text.h"

#define STATUS_EVENTS 30 /* recent log events kept */
#define STATUS_ERRORS 10 /* last errors kept */
#define STATUS_REFRESH_S 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *doc; /* {"arbiter", "chain_id", "contract", "chain", "runs": {runId: run}, "errors", "events"} */

/* The document, made on first use; called with the lock held. */
static json_t *the_doc(void)
{
    if (!doc)
        doc = json_pack("{s:s, s:n, s:n, s:n, s:n, s:o, s:o, s:o}", "role", "arbiter", "arbiter", "chain_id",
                        "contract", "chain", "runs", json_object(), "errors", json_array(), "events", json_array());
    return doc;
}

static json_t *address_json(const chain_address *a)
{
    char s[43];
    chain_address_to_string(s, a);
    return json_string(s);
}

static json_t *hash_json(const ovt_hash *h)
{
    char s[67];
    arb_hex32(s, h);
    return json_string(s);
}

static json_t *wei_json(const chain_u256 *v)
{
    char s[80];
    chain_u256_to_dec(s, v);
    return json_string(s);
}

static void utc(char out[32], uint64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void arb_status_start(const chain_address *self, uint64_t chain_id, const chain_address *contract)
{
    pthread_mutex_lock(&lock);
    json_t *d = the_doc();
    if (d) {
        json_object_set_new(d, "arbiter", address_json(self));
        json_object_set_new(d, "chain_id", json_integer((json_int_t)chain_id));
        json_object_set_new(d, "contract", address_json(contract));
    }
    pthread_mutex_unlock(&lock);
}

void arb_status_chain(uint64_t head, uint64_t read_block, uint64_t head_time)
{
    pthread_mutex_lock(&lock);
    json_t *d = the_doc();
    if (d)
        json_object_set_new(d, "chain", json_pack("{s:I, s:I, s:I}", "head", (json_int_t)head, "read_block",
                                                  (json_int_t)read_block, "head_time", (json_int_t)head_time));
    pthread_mutex_unlock(&lock);
}

static const char *exec_phrase(arb_exec e)
{
    switch (e) {
    case ARB_EXEC_OK: return "re-executed";
    case ARB_EXEC_FRAUD: return "the trainer's log failed the fraud check";
    case ARB_EXEC_FAILED: return "the step fails (a non-finite value)";
    default: return "not run: inputs missing from the store";
    }
}

/* The evaluation: the step, what the re-execution found, and whose leaf the
 * recomputed one is. */
static json_t *eval_json(const arb_eval *e)
{
    json_t *j = json_pack("{s:I, s:s}", "step", (json_int_t)e->basis.step, "result", exec_phrase(e->exec));
    if (j && e->exec == ARB_EXEC_OK) {
        const char *whose = !memcmp(e->leaf.b, e->basis.trainer_leaf.b, 32)   ? "the trainer's"
                            : !memcmp(e->leaf.b, e->basis.auditor_leaf.b, 32) ? "the auditor's"
                                                                              : "neither party's";
        json_object_set_new(j, "leaf", hash_json(&e->leaf));
        json_object_set_new(j, "leaf_matches", json_string(whose));
    }
    return j;
}

/* What this arbiter sent: the verdict (one arbiter) or its ballot and
 * reveal (a committee); null when nothing. */
static json_t *sent_json(const arb_game *g)
{
    if (g->has_verdict)
        return json_pack("{s:s, s:s, s:o, s:o}", "kind", "verdict", "outcome",
                         chain_arb_outcome_name(g->verdict_outcome), "tx", hash_json(&g->verdict_tx), "evidence",
                         hash_json(&g->verdict_evidence));
    if (g->has_ballot)
        return json_pack("{s:s, s:s, s:I, s:o, s:o}", "kind", g->has_reveal ? "ballot revealed" : "ballot sealed",
                         "outcome", chain_arb_outcome_name(g->ballot.outcome), "step", (json_int_t)g->ballot.step,
                         "tx", g->has_ballot_tx ? hash_json(&g->ballot_tx) : json_null(), "reveal_tx",
                         g->has_reveal ? hash_json(&g->reveal_tx) : json_null());
    return json_null();
}

/* The parties, terms and bonds of the run (getRun). */
static void run_terms(json_t *j, const chain_arb_params *run)
{
    json_object_set_new(j, "steps", json_integer((json_int_t)run->steps));
    json_object_set_new(j, "trainer", address_json(&run->trainer));
    json_object_set_new(j, "auditor", address_json(&run->auditor));
    json_object_set_new(j, "bonds", json_pack("{s:o, s:o, s:o}", "trainer_wei", wei_json(&run->trainer_bond),
                                              "auditor_wei", wei_json(&run->auditor_bond), "arbiter_wei",
                                              wei_json(&run->arbiter_bond)));
    json_object_set_new(j, "timeouts_s", json_pack("{s:I, s:I, s:I}", "commit", (json_int_t)run->commit_timeout,
                                                   "move", (json_int_t)run->move_timeout, "arbiter",
                                                   (json_int_t)run->arbiter_timeout));
}

/* The game as getGame and getCommittee read it. */
static void game_state(json_t *j, const chain_arb_game *game, const chain_arb_committee *c)
{
    json_object_set_new(j, "phase", json_string(chain_arb_phase_name(game->phase)));
    json_object_set_new(j, "outcome", json_string(chain_arb_outcome_name(game->outcome)));
    json_object_set_new(j, "bisection", json_pack("{s:I, s:I, s:I}", "round", (json_int_t)game->round, "depth",
                                                  (json_int_t)game->depth, "index", (json_int_t)game->index));
    json_object_set_new(j, "deadline", json_integer((json_int_t)game->deadline));
    if (c)
        json_object_set_new(j, "committee",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "count", (json_int_t)c->count, "threshold",
                                      (json_int_t)c->threshold, "seated", (json_int_t)c->seated, "committed",
                                      (json_int_t)c->committed, "revealed", (json_int_t)c->revealed,
                                      "commit_deadline", (json_int_t)c->commit_deadline));
}

void arb_status_game(const arb_game *g, const chain_arb_params *run, const chain_arb_game *game,
                     const chain_arb_committee *committee, const arb_action *next)
{
    char id[67];
    arb_hex32(id, &g->run_id);
    pthread_mutex_lock(&lock);
    json_t *d = the_doc(), *runs = d ? json_object_get(d, "runs") : NULL;
    json_t *j = runs ? json_object_get(runs, id) : NULL;
    /* a game over before a restart is not read again: say so, not "unknown" */
    const char *first = g->done ? "over (the state dir's record; not read again)" : "unknown (not read yet)";
    if (runs && !j && (j = json_pack("{s:s, s:s}", "run_id", id, "phase", first)))
        json_object_set_new(runs, id, j);
    if (j) {
        json_object_set_new(j, "followed", json_boolean(!g->done));
        if (g->is_challenge) /* a challenge's game: the run whose trainer root it disputes */
            json_object_set_new(j, "challenge_of", hash_json(&g->challenged_run));
        if (run)
            run_terms(j, run);
        if (game)
            game_state(j, game, committee);
        if (next)
            json_object_set_new(j, "next_action", json_pack("{s:s, s:s}", "action", arb_act_name(next->kind),
                                                            "reason", next->reason ? next->reason : ""));
        if (g->has_eval) /* the watcher drops one of missing inputs to look again: keep it shown */
            json_object_set_new(j, "evaluation", eval_json(&g->eval));
        json_object_set_new(j, "sent", sent_json(g));
        json_object_set_new(j, "events", g->events ? json_deep_copy(g->events) : json_array());
    }
    pthread_mutex_unlock(&lock);
}

static bool is_error_event(const char *event)
{
    return !strcmp(event, "error") || !strcmp(event, "node_unreachable") || strstr(event, "failed") ||
           strstr(event, "held") || strstr(event, "refused");
}

/* Appends e to the array under key, keeping its last `keep`. */
static void ring_push(json_t *d, const char *key, json_t *e, size_t keep)
{
    json_t *a = json_object_get(d, key);
    json_array_append(a, e);
    while (json_array_size(a) > keep)
        json_array_remove(a, 0);
}

void arb_status_event(const char *event, const ovt_hash *run, const char *message)
{
    char when[32], id[67] = "";
    utc(when, (uint64_t)time(NULL));
    if (run)
        arb_hex32(id, run);
    pthread_mutex_lock(&lock);
    json_t *d = the_doc();
    json_t *e = d ? json_pack("{s:s, s:s, s:s, s:s}", "time", when, "event", event, "run_id", id, "message", message)
                  : NULL;
    if (e) {
        ring_push(d, "events", e, STATUS_EVENTS);
        if (is_error_event(event))
            ring_push(d, "errors", e, STATUS_ERRORS);
        json_decref(e);
    }
    pthread_mutex_unlock(&lock);
}

/* The document with the moment of the render and the daemon's health;
 * called with the lock held. */
static json_t *snapshot_locked(void)
{
    json_t *d = the_doc(), *s = d ? json_deep_copy(d) : NULL;
    if (!s)
        return NULL;
    char why[256], when[32];
    uint64_t now = (uint64_t)time(NULL);
    int ok = ovt_metrics_healthy(why, sizeof why);
    utc(when, now);
    json_object_set_new(s, "now", json_integer((json_int_t)now));
    json_object_set_new(s, "now_utc", json_string(when));
    json_object_set_new(s, "healthy", json_boolean(ok));
    json_object_set_new(s, "health", json_string(why));
    json_object_set_new(s, "refresh_s", json_integer(STATUS_REFRESH_S));
    /* the runs as a list, oldest first */
    json_t *list = json_array(), *runs = json_object_get(s, "runs"), *r;
    const char *key;
    json_object_foreach(runs, key, r) json_array_append(list, r);
    json_object_set_new(s, "runs", list);
    return s;
}

json_t *arb_status_snapshot(void)
{
    pthread_mutex_lock(&lock);
    json_t *s = snapshot_locked();
    pthread_mutex_unlock(&lock);
    return s;
}

int arb_status_render_json(char **out, size_t *len)
{
    json_t *s = arb_status_snapshot();
    *out = s ? json_dumps(s, JSON_INDENT(2)) : NULL;
    json_decref(s);
    if (!*out)
        return ovt_fail(OVT_ENOMEM, "out of memory rendering the status");
    *len = strlen(*out);
    return 0;
}

void arb_status_handle(void *ctx, const char *path, ovt_http_reply *r)
{
    (void)ctx;
    bool json = strcmp(path, "/status.json") == 0;
    if (!json && strcmp(path, "/status") != 0 && strcmp(path, "/") != 0)
        return;
    int rv = json ? arb_status_render_json(&r->body, &r->body_len) : arb_status_render_html(&r->body, &r->body_len);
    r->status = rv ? 500 : 200;
    r->content_type = json ? "application/json" : "text/html; charset=utf-8";
}
