#include "arbiter/watch.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arbiter/decide.h"
#include "arbiter/evaluate.h"
#include "arbiter/narrow_eval.h"
#include "arbiter/watch_state.h"
#include "arbiter/watch_send.h"
#include "chain/clock.h"
#include "common/cpus.h"
#include "common/fileio.h"
#include "arbiter/status.h"
#include "common/metrics.h"

void arb_watch_opts_default(arb_watch_opts *o)
{
    memset(o, 0, sizeof *o);
    o->confirmations = 0;
    o->poll_ms = 4000;
    o->log_range = 2000;
    o->input_wait = 600;
    o->deadline_margin = 120;
    o->max_arbiter_bond = chain_u256_from_u64(1000000000000000000ULL); /* 1 ETH */
    o->max_commit_timeout = 7 * 86400;
    o->log = stdout;
}

/* Whether method answers true (a node without it: no). */
static int node_flag(chain_rpc *rpc, const char *method)
{
    json_t *res;
    if (chain_rpc_call(rpc, &res, method, NULL) != 0) {
        ovt_err_clear();
        return 0;
    }
    int yes = json_is_true(res);
    json_decref(res);
    return yes;
}

int arb_watch_confirmations(chain_rpc *rpc, unsigned *out, const char **why)
{
    json_t *res;
    const char *client = "";
    int ganache = 0;
    if (chain_rpc_call(rpc, &res, "web3_clientVersion", NULL) == 0) {
        client = json_string_value(res) ? json_string_value(res) : "";
        ganache = strstr(client, "Ganache") != NULL || strstr(client, "ganache") != NULL;
        json_decref(res);
    } else {
        ovt_err_clear();
    }
    if (node_flag(rpc, "anvil_getAutomine") || node_flag(rpc, "hardhat_getAutomine") || ganache) {
        *out = 1;
        *why = "automining devnet: a block is made per transaction, the head counts";
    } else {
        *out = 2;
        *why = "blocks on a clock: act on blocks one deep";
    }
    return 0;
}

static int has_code(chain_rpc *rpc, const chain_address *address, uint64_t block, int *yes)
{
    char a[43], tag[24];
    chain_address_to_string(a, address);
    snprintf(tag, sizeof tag, "0x%" PRIx64, block);
    json_t *res;
    int rv = chain_rpc_call(rpc, &res, "eth_getCode", json_pack("[s, s]", a, tag));
    if (rv)
        return ovt_fail_wrap(rv, "eth_getCode at block %" PRIu64, block);
    const char *code = json_string_value(res);
    *yes = code && strlen(code) > 2;
    json_decref(res);
    return 0;
}

int arb_deployment_block(chain_rpc *rpc, const chain_address *address, uint64_t *out)
{
    uint64_t head;
    int yes, rv = chain_rpc_block_number(rpc, &head);
    if (rv || (rv = has_code(rpc, address, head, &yes)))
        return rv;
    if (!yes)
        return ovt_fail(OVT_ENOTFOUND, "no contract code at the head");
    uint64_t lo = 0, hi = head; /* the code is at hi, and not before lo */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((rv = has_code(rpc, address, mid, &yes)))
            return ovt_fail_wrap(rv, "finding the contract's deployment block (a node without old state: pass "
                                     "--from-block, the block_number that ovt deploy --json printed)");
        if (yes)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = hi;
    return 0;
}



/* Hash and timestamp of block `number` (eth_getBlockByNumber). */
static int block_info(chain_rpc *rpc, uint64_t number, ovt_hash *hash, uint64_t *timestamp)
{
    char tag[24];
    arb_block_tag(tag, number);
    json_t *res = NULL;
    int rv = chain_rpc_call(rpc, &res, "eth_getBlockByNumber", json_pack("[s,b]", tag, 0));
    if (rv)
        return rv;
    uint64_t ts = 0;
    if (!json_is_object(res))
        rv = ovt_fail(OVT_ENOTFOUND, "block %" PRIu64 " does not exist (yet)", number);
    else if ((rv = chain_json_hash(hash, res, "hash")) == 0)
        rv = chain_json_u64(&ts, res, "timestamp");
    json_decref(res);
    if (timestamp)
        *timestamp = ts;
    return rv ? ovt_fail_wrap(rv, "block %" PRIu64, number) : 0;
}

static arb_game *find_game(watcher *w, const ovt_hash *run_id)
{
    for (size_t i = 0; i < w->ngames; i++)
        if (memcmp(w->games[i].run_id.b, run_id->b, 32) == 0)
            return &w->games[i];
    return NULL;
}

/* --- following the events */

/* What the run's settlement did to this arbiter's bond (ArbiterSettled). */
static void say_arbiter_settled(const watcher *w, const arb_game *g, const chain_arb_event *ev, json_t *f)
{
    char lost[80], paid[80];
    chain_u256_to_dec(lost, &ev->u.arbiter_settled.forfeited);
    chain_u256_to_dec(paid, &ev->u.arbiter_settled.reward);
    const char *verdict = ev->u.arbiter_settled.verdict == CHAIN_ARB_NONE
                              ? "none"
                              : chain_arb_outcome_name(ev->u.arbiter_settled.verdict);
    json_object_set_new(f, "verdict", json_string(verdict));
    json_object_set_new(f, "forfeited", json_string(lost));
    json_object_set_new(f, "reward", json_string(paid));
    arb_say(w, "arbiter_settled", &g->run_id, f,
        "settled for this arbiter: its verdict %s, bond forfeited %s wei, reward %s wei", verdict, lost, paid);
}

static int remember_event(watcher *w, arb_game *g, const chain_arb_event *ev)
{
    size_t i;
    json_t *e;
    json_array_foreach(g->events, i, e) {
        json_t *b = json_object_get(e, "block"), *li = json_object_get(e, "log_index");
        if ((uint64_t)json_integer_value(b) == ev->block_number && (uint64_t)json_integer_value(li) == ev->log_index)
            return 0; /* seen before a restart */
    }
    char tx[67];
    arb_hex32(tx, &ev->tx_hash);
    json_array_append_new(g->events, json_pack("{s:s, s:I, s:I, s:s}", "event", chain_arb_event_name(ev->kind),
                                               "block", (json_int_t)ev->block_number, "log_index",
                                               (json_int_t)ev->log_index, "tx", tx));
    json_t *f = json_pack("{s:s, s:I}", "kind", chain_arb_event_name(ev->kind), "block", (json_int_t)ev->block_number);
    if (ev->kind == CHAIN_ARB_EV_VERDICT_DUE)
        arb_say(w, "verdict_due", &g->run_id, f, "a verdict on step %" PRIu64 " is due by %" PRIu64 " (block %" PRIu64 ")",
            ev->u.verdict_due.step, ev->u.verdict_due.deadline, ev->block_number);
    else if (ev->kind == CHAIN_ARB_EV_SETTLED)
        arb_say(w, "settled", &g->run_id, f, "settled: %s", chain_arb_outcome_name(ev->u.settled.outcome));
    else if (ev->kind == CHAIN_ARB_EV_ARBITER_SETTLED && chain_address_eq(&ev->u.arbiter_settled.arbiter, &w->m->from))
        say_arbiter_settled(w, g, ev, f);
    else
        arb_say(w, "event", &g->run_id, f, "%s in block %" PRIu64, chain_arb_event_name(ev->kind), ev->block_number);
    return arb_game_save(g, w->o->state_dir);
}

/* A new game to follow (its folder is written by remember_event). */
static int add_game(watcher *w, arb_game **out, const ovt_hash *id, uint64_t block)
{
    arb_game *more = realloc(w->games, (w->ngames + 1) * sizeof *w->games);
    if (!more)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    w->games = more;
    arb_game *g = &w->games[w->ngames++];
    memset(g, 0, sizeof *g);
    g->run_id = *id;
    g->opened_block = block;
    g->events = json_array();
    *out = g;
    return 0;
}

/* A challenge of a run this arbiter follows is a game of its own, with the
 * run's committee (so this arbiter sits on it too): followed like the run's
 * own dispute, under the challenge's id, its leaves hashed with the run's. */
static int on_challenge(watcher *w, const chain_arb_event *ev)
{
    const ovt_hash *id = &ev->u.challenge_opened.challenge_id;
    arb_game *c = find_game(w, id);
    if (!c) {
        int rv = add_game(w, &c, id, ev->block_number);
        if (rv)
            return rv;
        c->is_challenge = true;
        c->challenged_run = ev->run_id;
        char who[43], run[67];
        chain_address_to_string(who, &ev->u.challenge_opened.challenger);
        arb_hex32(run, &ev->run_id);
        arb_say(w, "challenge_opened", &c->run_id,
            json_pack("{s:s, s:s, s:I}", "challenge_of", run, "challenger", who, "block", (json_int_t)ev->block_number),
            "%s challenges the trainer's root of run %s: a game of its own on the run's committee, followed", who, run);
    }
    return remember_event(w, c, ev);
}

static int on_event(watcher *w, const chain_arb_event *ev)
{
    arb_game *g = find_game(w, &ev->run_id);
    if (ev->kind == CHAIN_ARB_EV_CHALLENGE_OPENED && g && !g->is_challenge) {
        int rv = on_challenge(w, ev);
        if (rv)
            return rv;
        g = find_game(w, &ev->run_id); /* the games may have moved */
    }
    if (ev->kind == CHAIN_ARB_EV_RUN_OPENED && !g) {
        int seat = -1;
        unsigned n = 0;
        for (unsigned k = 0; k < CHAIN_ARB_MAX_ARBITERS; k++) {
            const chain_address *a = &ev->u.run_opened.arbiters[k];
            n += !chain_address_eq(a, &(chain_address){{0}});
            if (seat < 0 && chain_address_eq(a, &w->m->from))
                seat = (int)k;
        }
        if (seat < 0)
            return 0;
        int rv = add_game(w, &g, &ev->run_id, ev->block_number);
        if (rv)
            return rv;
        char bond[80];
        chain_u256_to_dec(bond, &ev->u.run_opened.arbiter_bond);
        arb_say(w, "run_opened", &g->run_id,
            json_pack("{s:I, s:I, s:i, s:i, s:i, s:s}", "steps", (json_int_t)ev->u.run_opened.steps, "block",
                      (json_int_t)ev->block_number, "seat", seat, "arbiters", (int)n, "threshold",
                      (int)ev->u.run_opened.threshold, "arbiter_bond", bond),
            "a run of %" PRIu64 " steps names this arbiter (seat %d of %u, %u to agree, arbiter bond %s wei)",
            ev->u.run_opened.steps, seat, n, ev->u.run_opened.threshold, bond);
    }
    return g ? remember_event(w, g, ev) : 0;
}

/* A reorg: the newest remembered block hash no longer matches the chain.
 * Rewinds the cursor to the newest block that still matches (or to the
 * start), forgets the events read after it and the runs opened after it. */
static int check_reorg(watcher *w)
{
    arb_cursor *c = &w->cursor;
    size_t keep = c->nrecent;
    while (keep > 0) {
        ovt_hash h;
        int rv = block_info(w->arb->rpc, c->recent_block[keep - 1], &h, NULL);
        if (rv && rv != OVT_ENOTFOUND)
            return rv;
        if (rv == 0 && memcmp(h.b, c->recent_hash[keep - 1].b, 32) == 0)
            break;
        keep--;
    }
    if (keep == c->nrecent)
        return 0;
    uint64_t old_next = c->next, start = w->o->from_block;
    /* Without --from-block the start is the deployment block (not 0: on a
     * public chain that would be thousands of log queries). */
    int drv = !keep && !w->o->has_from_block ? arb_deployment_block(w->arb->rpc, &w->arb->address, &start) : 0;
    if (drv)
        return ovt_fail_wrap(drv, "a reorg deeper than the blocks remembered: finding the deployment block");
    c->next = keep ? c->recent_block[keep - 1] + 1 : start;
    c->nrecent = keep;
    arb_say(w, "reorg", NULL, json_pack("{s:I, s:I}", "from_block", (json_int_t)c->next, "was", (json_int_t)old_next),
        "the chain was reorganised: reading again from block %" PRIu64 " (was at %" PRIu64 ")", c->next, old_next);
    for (size_t i = 0; i < w->ngames;) {
        arb_game *g = &w->games[i];
        int rv;
        if (g->opened_block >= c->next) {
            arb_say(w, "run_vanished", &g->run_id, NULL, "the run's opening is no longer on the chain");
            if ((rv = arb_game_remove(g, w->o->state_dir)))
                return rv;
            arb_game_free(g);
            w->games[i] = w->games[--w->ngames];
            continue;
        }
        json_t *kept = json_array(), *e;
        size_t k;
        json_array_foreach(g->events, k, e) {
            if ((uint64_t)json_integer_value(json_object_get(e, "block")) < c->next)
                json_array_append(kept, e);
        }
        json_decref(g->events);
        g->events = kept;
        if ((rv = arb_game_save(g, w->o->state_dir)))
            return rv;
        i++;
    }
    return arb_cursor_save(c, w->o->state_dir);
}

/* Reads events from the cursor up to the safe block, one bounded range at a
 * time; the cursor moves (and is saved) after the games are. The hashes of
 * the range's last ARB_RECENT blocks are kept for check_reorg; they are
 * read between two reads of the last block's hash, which must agree (the
 * blocks under an unchanged block are unchanged). */
static int follow(watcher *w)
{
    arb_cursor *c = &w->cursor;
    while (c->next <= w->safe && !*w->stop) {
        uint64_t to = w->safe - c->next + 1 > w->o->log_range ? c->next + w->o->log_range - 1 : w->safe;
        uint64_t first = to + 1 - c->next > ARB_RECENT ? to + 1 - ARB_RECENT : c->next;
        ovt_hash before, hashes[ARB_RECENT];
        chain_arb_event *evs = NULL;
        size_t n = 0;
        int rv = block_info(w->arb->rpc, to, &before, NULL);
        if (!rv)
            rv = chain_arb_get_events(w->arb, NULL, c->next, to, &evs, &n);
        for (uint64_t b = first; !rv && b <= to; b++)
            rv = block_info(w->arb->rpc, b, &hashes[b - first], NULL);
        if (!rv && memcmp(before.b, hashes[to - first].b, 32) != 0)
            rv = ovt_fail(OVT_EIO, "block %" PRIu64 " changed while its logs were read", to);
        for (size_t i = 0; !rv && i < n; i++)
            rv = on_event(w, &evs[i]);
        free(evs);
        if (rv)
            return rv;
        c->next = to + 1;
        for (uint64_t b = first; b <= to; b++)
            arb_cursor_push(c, b, &hashes[b - first]);
        if ((rv = arb_cursor_save(c, w->o->state_dir)))
            return rv;
    }
    return 0;
}

/* --- acting on one game */

/* Whether a transaction of ours (has: one was sent) is mined (successfully)
 * or still known to the node; one that vanished (reorg, dropped) or
 * reverted may be sent again. */
static int tx_known(watcher *w, bool has, const ovt_hash *hash, bool *known)
{
    *known = false;
    if (!has)
        return 0;
    chain_receipt r;
    int found;
    int rv = chain_rpc_receipt(w->arb->rpc, &r, &found, hash);
    if (rv)
        return rv;
    if (found) {
        *known = r.status == 1;
        chain_receipt_free(&r);
        return 0;
    }
    char tx[67];
    arb_hex32(tx, hash);
    json_t *res = NULL;
    if ((rv = chain_rpc_call(w->arb->rpc, &res, "eth_getTransactionByHash", json_pack("[s]", tx))))
        return rv;
    *known = json_is_object(res);
    json_decref(res);
    return 0;
}

/* Which of the game's transactions are mined or pending. */
typedef struct {
    bool verdict, accept, ballot, reveal;
} sent_txs;

static int txs_known(watcher *w, const arb_game *g, sent_txs *s)
{
    int rv;
    if ((rv = tx_known(w, g->has_verdict, &g->verdict_tx, &s->verdict)) ||
        (rv = tx_known(w, g->has_accept, &g->accept_tx, &s->accept)) ||
        (rv = tx_known(w, g->has_ballot_tx, &g->ballot_tx, &s->ballot)) ||
        (rv = tx_known(w, g->has_reveal, &g->reveal_tx, &s->reveal)))
        return rv;
    return 0;
}


/* What arb_decide looks at; c (getCommittee) at the same block as game. */
typedef struct {
    const chain_arb_params *run;
    const chain_arb_game *game;
    const chain_arb_committee *committee;
    const sent_txs *sent;
} game_read;

static void view_of(arb_view *v, const watcher *w, const arb_game *g, const game_read *r)
{
    memset(v, 0, sizeof *v);
    v->self = &w->m->from;
    v->run_id = &g->run_id;
    v->run = r->run;
    v->game = r->game;
    v->committee = r->committee;
    v->now = arb_now_s(w);
    v->head_time = w->head_time;
    v->first_missing = g->first_missing;
    v->input_wait = w->o->input_wait;
    v->deadline_margin = w->o->deadline_margin;
    v->max_arbiter_bond = w->o->max_arbiter_bond;
    v->max_commit_timeout = w->o->max_commit_timeout;
    v->known = w->o->known;
    v->nknown = w->o->nknown;
    v->misbehave = w->o->misbehave;
    v->verdict_sent = r->sent->verdict;
    v->accept_sent = r->sent->accept;
    v->ballot_sent = r->sent->ballot;
    v->reveal_sent = r->sent->reveal;
    v->ballot = g->has_ballot ? &g->ballot : NULL;
    v->eval = g->has_eval ? &g->eval : NULL;
}

/* Evaluates the step and saves the result. prev (may be NULL) is the
 * previous evaluation with inputs missing: while nothing changes, the
 * repeated look into the store is not logged again. */
static int evaluate(watcher *w, arb_game *g, const chain_arb_params *run, const chain_arb_game *game,
                    uint64_t deadline, const arb_eval *prev)
{
    char note[1024];
    if (!prev)
        arb_say(w, "evaluate", &g->run_id, json_pack("{s:I}", "step", (json_int_t)game->index),
            "fetching the inputs of step %" PRIu64 " and re-executing it", game->index);
    /* Every fetch ends by the last moment a verdict (or a committee's
     * ballot) can still be sent (its deadline less the margin): an input
     * that cannot be had by then is missing, and the next pass rules
     * InputsUnavailable in time. */
    uint64_t now = arb_now_s(w), last = deadline > w->o->deadline_margin ? deadline - w->o->deadline_margin : 0;
    store_set_deadline(w->store, last > now ? (double)(last - now) : 0.001);
    store_expect(w->store, &run->config_hash, STORE_MAX_CONFIG);
    arb_eval e;
    /* A replay dispute: the step is traced for the beacon's site's output. */
    krn_trace *trace = NULL;
    chain_arb_replay rp;
    bool sites = chain_arb_is_replay_dispute(game);
    int rv = sites ? chain_arb_get_replay(w->arb, &g->run_id, NULL, &rp) : 0;
    if (!rv && sites && !(rv = krn_trace_new(&trace, false)))
        krn_trace_outputs_only(trace, KRN_TRACE_ALL_SITES); /* its outputs' roots, no reads */
    if (rv)
        return ovt_fail_wrap(rv, "preparing the replay dispute's trace");
    long long t0 = chain_now_ms();
    arb_narrow_result nr = ARB_NARROW_WHOLE_STEP;
    if (w->o->has_narrow && !sites && game->index > 0) {
        /* the narrowing first (docs/arbiter.md, "Ruling on a narrowed step"); waited for until the
         * whole step's fallback would no longer fit before the deadline */
        chain_narrow n = {.rpc = w->arb->rpc, .address = w->o->narrow, .chain_id = w->arb->chain_id};
        arb_narrow_finding nf;
        uint64_t reserve = (uint64_t)w->o->deadline_margin + ARB_NARROW_RESERVE_S;
        rv = arb_narrow_evaluate(&nr, &e, &nf, w->store, &n, &g->run_id, run, game, now,
                                 deadline > reserve ? deadline - reserve : 0, &g->narrow_ended_seen,
                                 w->o->input_wait, w->o->has_from_block ? w->o->from_block : 0, w->safe,
                                 w->o->log_range, w->o->threads, note, sizeof note);
        if (rv)
            return ovt_fail_wrap(rv, "reading the narrowing of step %" PRIu64, game->index);
        if (nr == ARB_NARROW_WAIT) {
            bool packages = g->narrow_ended_seen != 0; /* one line for the game, one for the packages */
            if (!g->narrow_waiting || (packages && g->narrow_waiting == 1))
                arb_say(w, "narrow_wait", &g->run_id, json_pack("{s:I}", "step", (json_int_t)game->index), "%s",
                        note);
            g->narrow_waiting = packages ? 2 : 1;
            return 0;
        }
        char rec[67];
        arb_hex32(rec, &nf.recomputed);
        arb_say(w, nr == ARB_NARROW_DECIDED ? "narrow_evaluated" : "narrow_fallback", &g->run_id,
                json_pack("{s:I, s:i, s:I, s:s, s:I, s:o, s:s, s:i, s:i, s:I, s:f}", "step", (json_int_t)game->index,
                          "outcome", (int)nf.outcome, "site", (json_int_t)nf.site, "op", nf.op, "block",
                          (json_int_t)nf.block, "chunk",
                          nf.chunked ? json_integer((json_int_t)nf.chunk) : json_null(), /* level 4 */
                          "recomputed", rec, "packages", nf.packages, "entries_replaced", nf.entries_replaced,
                          "log_window", (json_int_t)nf.log_window, "seconds", nf.seconds),
                "step %" PRIu64 ": %s", game->index, note);
        if (nr == ARB_NARROW_WHOLE_STEP)
            note[0] = '\0';
    }
    if (nr != ARB_NARROW_DECIDED)
        rv = arb_evaluate(&e, w->store, arb_game_tree_id(g), run, game, w->o->threads, g->prep, trace, note,
                          sizeof note);
    double eval_s = (double)(chain_now_ms() - t0) / 1000.0;
    ovt_metrics_eval_seconds(eval_s);
    if (!rv && nr == ARB_NARROW_DECIDED) {
        note[0] = '\0';
        if (e.shard_differs >= 0) /* named from the narrowed site: whose process, by the trainer's ranks.json */
            arb_eval_find_owner(&e, w->store, arb_game_tree_id(g), game->index, note, sizeof note);
    }
    if (!rv && sites)
        arb_eval_site_leaf(&e, &rp.beacon, trace, arb_game_tree_id(g), game->index, note, sizeof note);
    krn_trace_free(trace);
    if (rv)
        return ovt_fail_wrap(rv, "evaluating step %" PRIu64, game->index);
    bool same = prev && !memcmp(&prev->basis, &e.basis, sizeof e.basis) && !memcmp(prev->input, e.input, sizeof e.input);
    bool complete = true;
    json_t *inputs = json_object();
    for (int k = 0; k < ARB_NINPUTS; k++) {
        static const char *const st[] = {"ok", "missing", "mismatch"};
        json_object_set_new(inputs, arb_input_name(k), json_string(st[e.input[k]]));
        complete &= e.input[k] == ARB_INPUT_OK;
    }
    static const char *const ex[] = {"not run", "ok", "fraud", "failed"};
    char leaf[67], shard[512];
    arb_hex32(leaf, &e.leaf);
    arb_shard_phrase(shard, sizeof shard, &e);
    if (same) {
        json_decref(inputs);
    } else {
        json_t *fields = json_pack("{s:I, s:o, s:s, s:s, s:s}", "step", (json_int_t)game->index, "inputs", inputs,
                                   "exec", ex[e.exec], "leaf", leaf, "note", note);
        if (fields)
            json_object_set_new(fields, "seconds", json_real(eval_s));
        if (fields && e.exec == ARB_EXEC_OK) {
            json_object_set_new(fields, "shards", json_integer(e.shards));
            json_object_set_new(fields, "shard_differs", arb_shard_json(&e));
        }
        arb_say(w, complete ? "evaluated" : "inputs_unavailable", &g->run_id, fields, "step %" PRIu64 ": %s%s%s%s",
            game->index, complete ? ex[e.exec] : "inputs unavailable", shard, note[0] ? ": " : "", note);
    }
    g->eval = e;
    g->has_eval = true;
    if (!complete && !g->first_missing)
        g->first_missing = arb_now_s(w);
    return arb_game_save(g, w->o->state_dir);
}

static void note_action(watcher *w, arb_game *g, const chain_arb_params *run, const arb_action *a)
{
    if (a->kind == g->last_act && a->reason == g->last_reason)
        return;
    g->last_act = a->kind;
    g->last_reason = a->reason;
    if (a->kind == ARB_ACT_WAIT || a->kind == ARB_ACT_NONE)
        arb_say(w, a->kind == ARB_ACT_WAIT ? "waiting" : "idle", &g->run_id, json_pack("{s:s}", "action", arb_act_name(a->kind)),
            "%s", a->reason);
    if (a->kind == ARB_ACT_REFUSE) {
        char bond[80], max[80], trainer[43];
        chain_u256_to_dec(bond, &run->arbiter_bond);
        chain_u256_to_dec(max, &w->o->max_arbiter_bond);
        chain_address_to_string(trainer, &run->trainer);
        ovt_metrics_seat_declined(a->decline);
        arb_say(w, "seat_refused", &g->run_id,
            json_pack("{s:s, s:s, s:s, s:I, s:I, s:s}", "decline", a->decline, "arbiter_bond", bond, "max_arbiter_bond",
                      max, "commit_timeout", (json_int_t)run->commit_timeout, "max_commit_timeout",
                      (json_int_t)w->o->max_commit_timeout, "trainer", trainer),
            "%s (arbiter bond %s wei, commit timeout %u s)", a->reason, bond, run->commit_timeout);
    }
}

/* The arbiter warm from its first step: once the roots differ, the
 * bisection takes a move per level (minutes on a real chain) before the
 * disputed step is known, so the re-execution's ctx and workspace are made
 * and their memory written now (a runner opened with prefault), not when the verdict is
 * due. Tried once per game and process; a failure (the config not in the
 * store yet, no memory) only means the evaluation makes its own. */
static void prepare(watcher *w, arb_game *g, const chain_arb_params *run)
{
    g->prep_tried = true;
    uint8_t *buf = NULL;
    size_t len = 0;
    trn_run_config rc;
    store_set_deadline(w->store, 30);
    long long t0 = chain_now_ms();
    int rv = store_get(w->store, &run->config_hash, STORE_MAX_CONFIG, &buf, &len);
    if (!rv)
        rv = trn_config_decode(&rc, buf, len);
    free(buf);
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = w->o->threads,
                          .prefault = true};
    if (!rv)
        rv = trn_runner_open(&g->prep, &rc, NULL, &ro);
    if (rv) {
        arb_say(w, "prepare", &g->run_id, json_pack("{s:b, s:s}", "ready", 0, "error", ovt_errmsg()),
            "the re-execution is not prepared in advance (%s); it will set itself up when due", ovt_errmsg());
        ovt_err_clear();
        return;
    }
    arb_say(w, "prepare", &g->run_id,
        json_pack("{s:b, s:f}", "ready", 1, "seconds", (double)(chain_now_ms() - t0) / 1000.0),
        "the re-execution's workspace is ready (%.1f s), before the disputed step is known",
        (double)(chain_now_ms() - t0) / 1000.0);
}

/* getGame and getCommittee at block tag. */
static int read_game(watcher *w, const arb_game *g, const char *tag, chain_arb_game *game, chain_arb_committee *c)
{
    int rv = chain_arb_get_game(w->arb, &g->run_id, tag, game);
    return rv ? rv : chain_arb_get_committee(w->arb, &g->run_id, tag, c);
}

static bool sends(arb_act k)
{
    return k == ARB_ACT_VERDICT || k == ARB_ACT_ACCEPT || k == ARB_ACT_COMMIT || k == ARB_ACT_REVEAL;
}

/* Re-reads the game as it is now (the send happens there) and decides
 * again: only an action that the latest state still calls for is sent. */
static int send_action(watcher *w, arb_game *g, const chain_arb_params *run, const sent_txs *sent, const arb_action *a)
{
    chain_arb_game latest;
    chain_arb_committee c;
    int rv = read_game(w, g, "latest", &latest, &c);
    if (rv)
        return rv;
    arb_action again;
    arb_view v;
    game_read r = {.run = run, .game = &latest, .committee = &c, .sent = sent};
    view_of(&v, w, g, &r);
    arb_decide(&again, &v);
    if (again.kind != a->kind || again.outcome != a->outcome || memcmp(again.evidence.b, a->evidence.b, 32)) {
        arb_say(w, a->kind == ARB_ACT_VERDICT ? "verdict_held" : "action_held", &g->run_id,
            json_pack("{s:s}", "action", arb_act_name(a->kind)), "the game changed since the read block (%s); not sending",
            again.reason ? again.reason : "-");
        return 0;
    }
    switch (again.kind) {
    case ARB_ACT_VERDICT: return arb_send_verdict(w, g, &again);
    case ARB_ACT_ACCEPT: return arb_send_accept(w, g, run, &again);
    case ARB_ACT_COMMIT: return arb_send_ballot(w, g, &latest, &again);
    case ARB_ACT_REVEAL: return arb_send_reveal(w, g, &again);
    default: return 0;
    }
}

static int act(watcher *w, arb_game *g)
{
    char tag[24];
    arb_block_tag(tag, w->safe);
    chain_arb_params run;
    chain_arb_game game;
    chain_arb_committee committee;
    int rv;
    if ((rv = chain_arb_get_run(w->arb, &g->run_id, tag, &run)) || (rv = read_game(w, g, tag, &game, &committee)))
        return rv == OVT_EREVERT ? 0 : rv; /* not yet at the safe block: a later tick sees it */
    ovt_metrics_game(&g->run_id, chain_arb_phase_name(game.phase), game.deadline, game.phase == CHAIN_ARB_PHASE_SETTLED);
    /* nothing to prepare for a seat it will not take, or a silent one */
    if (!g->prep_tried && !*w->stop && w->o->misbehave != ARB_MISBEHAVE_SILENT &&
        chain_u256_cmp(&run.arbiter_bond, &w->o->max_arbiter_bond) <= 0 &&
        (game.phase == CHAIN_ARB_PHASE_BISECTING || game.phase == CHAIN_ARB_PHASE_REVEALING ||
         game.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT))
        prepare(w, g, &run);
    sent_txs sent;
    if ((rv = txs_known(w, g, &sent)))
        return rv;
    arb_eval missing;
    bool was_missing = g->has_eval && g->eval.exec == ARB_EXEC_NOT_RUN;
    if (was_missing) {
        missing = g->eval;
        g->has_eval = false; /* inputs were missing: look in the store again */
    }
    /* a committee's ballot is due by the commit deadline, a verdict by the game's */
    uint64_t due = chain_arb_arbiter_count(&run) > 1 ? committee.commit_deadline : game.deadline;
    arb_view v;
    arb_action a;
    game_read r = {.run = &run, .game = &game, .committee = &committee, .sent = &sent};
    for (int pass = 0; pass < 2; pass++) {
        view_of(&v, w, g, &r);
        arb_decide(&a, &v);
        if (a.kind != ARB_ACT_EVALUATE || *w->stop)
            break;
        if ((rv = evaluate(w, g, &run, &game, due, was_missing ? &missing : NULL)))
            return rv;
    }
    note_action(w, g, &run, &a);
    g->done = a.kind == ARB_ACT_DONE;
    arb_status_game(g, &run, &game, &committee, &a);
    if (g->done) {
        trn_runner_free(g->prep); /* its memory back: the game is over */
        g->prep = NULL;
        arb_say(w, "done", &g->run_id, json_pack("{s:s}", "outcome", chain_arb_outcome_name(game.outcome)),
            "no longer followed: %s (outcome %s)", a.reason, chain_arb_outcome_name(game.outcome));
        return arb_game_save(g, w->o->state_dir);
    }
    if (!sends(a.kind) || *w->stop)
        return 0;
    rv = send_action(w, g, &run, &sent, &a);
    arb_status_game(g, &run, &game, &committee, &a); /* what was sent */
    return rv;
}

/* --- the loop */

static int tick(watcher *w)
{
    int rv;
    if ((rv = chain_rpc_block_number(w->arb->rpc, &w->head)))
        return rv;
    if ((rv = block_info(w->arb->rpc, w->head, &(ovt_hash){{0}}, &w->head_time)) || (rv = check_reorg(w)))
        return rv;
    if (w->head + 1 < w->o->confirmations)
        return 0;
    w->safe = w->head + 1 - w->o->confirmations;
    if ((rv = follow(w)))
        return rv;
    ovt_metrics_chain(w->head, w->cursor.next ? w->cursor.next - 1 : 0, w->head_time);
    arb_status_chain(w->head, w->cursor.next ? w->cursor.next - 1 : 0, w->head_time);
    /* One game's failure (a node error, a local error while evaluating) is
     * reported and retried next tick; it does not hold the others back. */
    int first = 0;
    for (size_t i = 0; i < w->ngames && !*w->stop; i++) {
        arb_game *g = &w->games[i];
        if (g->done || g->opened_block > w->safe)
            continue;
        if ((rv = act(w, g))) {
            arb_say(w, "error", &g->run_id, json_pack("{s:s}", "error", ovt_errname(rv)), "%s", ovt_errmsg());
            if (!first)
                first = rv;
        }
    }
    return first;
}

/* A node that does not answer (stopped, restarted, unreachable) is waited
 * for, not given up on: the ticks are retried with a doubling pause, capped,
 * and the state on disk stays as it is (every action is re-derived from
 * the chain once it answers). */
#define ARB_BACKOFF_MAX_MS 30000L

typedef struct {
    unsigned retries;
    long backoff_ms;  /* the pause before the next retry */
    time_t since;
} outage;

/* Whether the failed tick (rv) was the node not answering, asked again
 * with a plain eth_blockNumber; if so, logs it and grows the backoff. */
static bool node_down(watcher *w, outage *out, int rv)
{
    char why[512];
    snprintf(why, sizeof why, "%s", ovt_errmsg());
    uint64_t h;
    int probe = chain_rpc_block_number(w->arb->rpc, &h);
    if (probe != OVT_ETIMEOUT && probe != OVT_EIO) {
        (void)ovt_fail(rv, "%s", why); /* the tick's own error, for the caller to log */
        return false;
    }
    if (out->retries++ == 0) {
        out->since = time(NULL);
        out->backoff_ms = w->o->poll_ms;
    } else {
        long cap = w->o->poll_ms > ARB_BACKOFF_MAX_MS ? w->o->poll_ms : ARB_BACKOFF_MAX_MS;
        out->backoff_ms = out->backoff_ms > cap / 2 ? cap : out->backoff_ms * 2;
    }
    /* A verdict sent just before may be lost with the node's pool: the
     * node's pending count picks the next nonce again. */
    w->m->next_nonce = 0;
    arb_say(w, "node_unreachable", NULL,
        json_pack("{s:s, s:I, s:I}", "error", ovt_errname(probe), "retry", (json_int_t)out->retries, "backoff_ms",
                  (json_int_t)out->backoff_ms),
        "the node does not answer (%s); retry %u in %ld ms", why, out->retries, out->backoff_ms);
    return true;
}

static void node_back(watcher *w, outage *out)
{
    arb_say(w, "node_back", NULL,
        json_pack("{s:I, s:I}", "retries", (json_int_t)out->retries, "seconds", (json_int_t)(time(NULL) - out->since)),
        "the node answers again after %u retries (%lld s)", out->retries, (long long)(time(NULL) - out->since));
    out->retries = 0;
    out->backoff_ms = w->o->poll_ms;
}

static int open_state(watcher *w)
{
    int rv = ovt_mkdirs(w->o->state_dir, 0700);
    if (rv)
        return rv;
    rv = arb_cursor_load(&w->cursor, w->o->state_dir);
    if (rv == OVT_ENOTFOUND) {
        memset(&w->cursor, 0, sizeof w->cursor);
        w->cursor.chain_id = w->arb->chain_id;
        w->cursor.contract = w->arb->address;
        w->cursor.next = w->o->from_block;
        if (!w->o->has_from_block) {
            rv = arb_deployment_block(w->arb->rpc, &w->arb->address, &w->cursor.next);
            if (rv)
                return rv;
            arb_say(w, "from_block", NULL, json_pack("{s:I}", "block", (json_int_t)w->cursor.next),
                "the contract was deployed in block %" PRIu64 ": reading from there", w->cursor.next);
        }
        rv = arb_cursor_save(&w->cursor, w->o->state_dir);
    }
    if (rv)
        return rv;
    if (w->cursor.chain_id != w->arb->chain_id || !chain_address_eq(&w->cursor.contract, &w->arb->address))
        return ovt_fail(OVT_EINVAL, "%s belongs to another chain or contract: use another --state-dir",
                        w->o->state_dir);
    return arb_games_load(&w->games, &w->ngames, w->o->state_dir);
}

int arb_watch(const arb_watch_opts *opts, const chain_arb *arb, chain_txm *m, store_ctx *store, volatile int *stop)
{
    arb_watch_opts eff = *opts;
    const arb_watch_opts *o = &eff;
    watcher w = {.o = o, .arb = arb, .m = m, .store = store, .stop = stop};
    int rv = 0;
    if (eff.confirmations == 0) {
        const char *why;
        if ((rv = arb_watch_confirmations(arb->rpc, &eff.confirmations, &why)))
            goto done;
    }
    rv = open_state(&w);
    if (rv)
        goto done;
    char self[43];
    chain_address_to_string(self, &m->from);
    size_t open = 0;
    arb_status_start(&m->from, arb->chain_id, &arb->address);
    for (size_t i = 0; i < w.ngames; i++) {
        open += !w.games[i].done;
        arb_status_game(&w.games[i], NULL, NULL, NULL, NULL); /* as the state dir has it, until read */
    }
    /* built_for: which build re-executes the steps (an aarch64 one under
     * qemu says aarch64), for whoever reads the log */
    char max_bond[80], misbehaving[160] = "";
    chain_u256_to_dec(max_bond, &o->max_arbiter_bond);
    if (o->misbehave != ARB_HONEST)
        snprintf(misbehaving, sizeof misbehaving, "; MISBEHAVING (--misbehave %s, for devnet simulations only)",
                 arb_misbehave_name(o->misbehave));
    arb_say(&w, "start", NULL,
        json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:s}", "arbiter", self, "next_block", (json_int_t)w.cursor.next,
                  "open_games", (json_int_t)open, "confirmations", (json_int_t)o->confirmations, "built_for",
                  ovt_built_for(), "max_arbiter_bond", max_bond, "misbehave", arb_misbehave_name(o->misbehave)),
        "arbiter %s from block %" PRIu64 ", %zu open game(s), %u confirmation(s), built for %s, seats taken for an "
        "arbiter bond up to %s wei%s",
        self, w.cursor.next, open, o->confirmations, ovt_built_for(), max_bond, misbehaving);
    outage out = {.backoff_ms = o->poll_ms};
    while (!*stop) {
        rv = tick(&w);
        ovt_metrics_tick(rv == 0);
        if (rv && o->once)
            break;
        long pause = o->poll_ms;
        if (rv && node_down(&w, &out, rv))
            pause = out.backoff_ms;
        else if (rv)
            arb_say(&w, "error", NULL, json_pack("{s:s}", "error", ovt_errname(rv)), "%s (retrying)", ovt_errmsg());
        else if (out.retries)
            node_back(&w, &out);
        if (o->once)
            break;
        for (long slept = 0; slept < pause && !*stop; slept += 50)
            chain_sleep_ms(pause - slept < 50 ? pause - slept : 50);
        rv = 0;
    }
    if (!rv)
        arb_say(&w, "stop", NULL, json_pack("{s:I}", "next_block", (json_int_t)w.cursor.next), "stopped at block %" PRIu64,
            w.cursor.next);
done:
    for (size_t i = 0; i < w.ngames; i++)
        arb_game_free(&w.games[i]);
    free(w.games);
    return rv;
}
