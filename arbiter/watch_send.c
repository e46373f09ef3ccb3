/* The watcher's transactions for one game (arbiter/watch_send.h): verdict,
 * accept, sealed ballot and its reveal. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "arbiter/watch_send.h"
#include "arbiter/status.h"

void arb_say(const watcher *w, const char *event, const ovt_hash *run, json_t *fields, const char *fmt, ...)
{
    char msg[1024], when[32], id[67] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (run)
        arb_hex32(id, run);
    arb_status_event(event, run, msg);
    FILE *f = w->o->log;
    if (w->o->json) {
        json_t *j = fields ? fields : json_object();
        json_object_set_new(j, "time", json_string(when));
        json_object_set_new(j, "event", json_string(event));
        if (run)
            json_object_set_new(j, "run_id", json_string(id));
        json_object_set_new(j, "message", json_string(msg));
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        if (text)
            fprintf(f, "%s\n", text);
        free(text);
    } else {
        json_decref(fields);
        if (run)
            fprintf(f, "%s %-14s run %.10s: %s\n", when, event, id, msg);
        else
            fprintf(f, "%s %-14s %s\n", when, event, msg);
    }
    fflush(f);
}

void arb_block_tag(char out[24], uint64_t block)
{
    snprintf(out, 24, "0x%" PRIx64, block);
}
uint64_t arb_now_s(const watcher *w)
{
    uint64_t wall = (uint64_t)time(NULL);
    return wall > w->head_time ? wall : w->head_time;
}

/* "; shard J of S: its gradient differs ..." for the evaluation's log line
 * (empty when no shard's does), naming the rank and host when the trainer's
 * ranks.json did, and saying where they come from. */
void arb_shard_phrase(char *out, size_t cap, const arb_eval *e)
{
    out[0] = 0;
    if (e->shard_differs < 0)
        return;
    const char *why = e->shard_from_site ? "the narrowed site is among its sites"
                                         : "its gradient differs from the trainer's shard table";
    if (e->has_owner)
        snprintf(out, cap, "; shard %" PRId64 " of %u: %s (computed by rank %u on host %s, per %s)", e->shard_differs,
                 e->shards, why, e->owner_rank, e->owner_host, ARB_OWNER_SOURCE);
    else
        snprintf(out, cap, "; shard %" PRId64 " of %u: %s", e->shard_differs, e->shards, why);
}

/* One of the game's transactions: NAME_sent and NAME_mined in the log. */
typedef struct {
    const char *name;         /* "verdict", "accept", "ballot", "reveal" */
    const chain_u256 *value;  /* NULL: 0 */
    uint64_t extra_gas;
    bool *has;                /* set, with *tx, as soon as it is sent (and saved) */
    ovt_hash *tx;
} game_tx;

/* Sends calldata as t, saves its hash, logs NAME_sent with fields (stolen)
 * and msg, waits for it and logs NAME_mined. */
static int send_tx(watcher *w, arb_game *g, const game_tx *t, const chain_buf *data, uint64_t step, json_t *fields,
                   const char *msg)
{
    chain_txm_pending p;
    memset(&p, 0, sizeof p);
    chain_receipt r;
    memset(&r, 0, sizeof r);
    int rv = chain_txm_prepare(w->m, &p, &w->arb->address, t->value, data->data, data->len);
    if (!rv) {
        p.tx.gas_limit += t->extra_gas;
        rv = chain_txm_submit(w->m, &p);
    }
    if (!rv) {
        *t->has = true;
        *t->tx = p.hashes[p.nversions - 1];
        rv = arb_game_save(g, w->o->state_dir);
    }
    if (rv) {
        json_decref(fields);
        chain_txm_pending_free(&p);
        return ovt_fail_wrap(rv, "sending the %s", t->name);
    }
    char tx[67], event[32];
    arb_hex32(tx, t->tx);
    if (fields)
        json_object_set_new(fields, "tx", json_string(tx));
    snprintf(event, sizeof event, "%s_sent", t->name);
    arb_say(w, event, &g->run_id, fields, "%s, tx %s", msg, tx);
    rv = chain_txm_wait(w->m, &p, &r);
    if (p.nversions)
        *t->tx = p.hashes[p.nversions - 1];
    if (rv == 0) {
        *t->tx = r.tx_hash;
        arb_hex32(tx, &r.tx_hash);
        snprintf(event, sizeof event, "%s_mined", t->name);
        arb_say(w, event, &g->run_id,
            json_pack("{s:I, s:s, s:I, s:I, s:b}", "step", (json_int_t)step, "tx", tx, "block",
                      (json_int_t)r.block_number, "gas_used", (json_int_t)r.gas_used, "ok", r.status == 1),
            "%s mined in block %" PRIu64 " (gas %" PRIu64 ")%s", t->name, r.block_number, r.gas_used,
            r.status == 1 ? "" : ", reverted");
    }
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
    int rv2 = arb_game_save(g, w->o->state_dir);
    return rv ? rv : rv2;
}

/* The fields of a verdict, ballot or reveal line; the shard finding with a
 * verdict, if the evaluation made one. */
static json_t *verdict_fields(const arb_game *g, const arb_action *a, char *shard, size_t cap)
{
    char ev[67];
    arb_hex32(ev, &a->evidence);
    json_t *f = json_pack("{s:I, s:s, s:s}", "step", (json_int_t)a->step, "outcome",
                          chain_arb_outcome_name(a->outcome), "evidence", ev);
    shard[0] = 0;
    if (f && a->lie)
        json_object_set_new(f, "lie", json_true());
    if (f && g->has_eval && g->eval.exec == ARB_EXEC_OK) {
        arb_shard_phrase(shard, cap, &g->eval);
        json_object_set_new(f, "shard_differs", arb_shard_json(&g->eval));
    }
    return f;
}

int arb_send_verdict(watcher *w, arb_game *g, const arb_action *a)
{
    chain_buf data;
    chain_buf_init(&data);
    int rv = chain_arb_encode_verdict(&data, &g->run_id, a->step, a->outcome, &a->evidence);
    if (rv) {
        chain_buf_free(&data);
        return ovt_fail_wrap(rv, "encoding the verdict");
    }
    g->verdict_outcome = a->outcome;
    g->verdict_evidence = a->evidence;
    char shard[512], msg[1024];
    json_t *fields = verdict_fields(g, a, shard, sizeof shard);
    snprintf(msg, sizeof msg, "verdict %s on step %" PRIu64 " (%s)%s", chain_arb_outcome_name(a->outcome), a->step,
             a->reason, shard);
    game_tx t = {.name = "verdict", .has = &g->has_verdict, .tx = &g->verdict_tx};
    rv = send_tx(w, g, &t, &data, a->step, fields, msg);
    chain_buf_free(&data);
    return rv;
}

int arb_send_accept(watcher *w, arb_game *g, const chain_arb_params *run, const arb_action *a)
{
    chain_buf data;
    chain_buf_init(&data);
    int rv = chain_arb_encode_accept(&data, &g->run_id);
    if (rv) {
        chain_buf_free(&data);
        return ovt_fail_wrap(rv, "encoding accept");
    }
    char bond[80], msg[256];
    chain_u256_to_dec(bond, &run->arbiter_bond);
    int seat = chain_arb_seat(run, &w->m->from);
    snprintf(msg, sizeof msg, "taking seat %d with an arbiter bond of %s wei (%s)", seat, bond, a->reason);
    game_tx t = {.name = "accept", .value = &run->arbiter_bond, .has = &g->has_accept, .tx = &g->accept_tx};
    rv = send_tx(w, g, &t, &data, a->step, json_pack("{s:i, s:s}", "seat", seat, "arbiter_bond", bond), msg);
    chain_buf_free(&data);
    return rv;
}

/* 32 bytes from the OS's random source (getrandom: /dev/urandom's pool). */
static int random_salt(ovt_hash *salt)
{
    size_t got = 0;
    while (got < sizeof salt->b) {
        ssize_t n = getrandom(salt->b + got, sizeof salt->b - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return ovt_fail_errno(OVT_EIO, "getrandom for a ballot's salt");
        got += (size_t)n;
    }
    return 0;
}

/* Seals a ballot. The ballot on disk is used again if it was made for this
 * game (its first commitVerdict vanished, or a restart came between saving
 * and sending); otherwise a new one, with a new salt, is saved before its
 * transaction is sent, so a restarted watcher opens the ballot it sealed
 * and never seals two different ones. */
int arb_send_ballot(watcher *w, arb_game *g, const chain_arb_game *game, const arb_action *a)
{
    arb_basis basis;
    arb_basis_of(&basis, game);
    int rv;
    bool same = g->has_ballot && g->ballot.step == a->step && !memcmp(&g->ballot.basis, &basis, sizeof basis);
    if (same && (g->ballot.outcome != a->outcome || memcmp(g->ballot.evidence.b, a->evidence.b, 32)))
        return ovt_fail(OVT_EINVAL, "the ballot on disk for step %" PRIu64 " says %s, the decision %s: not sealing "
                                    "another", a->step, chain_arb_outcome_name(g->ballot.outcome),
                        chain_arb_outcome_name(a->outcome));
    if (!same) {
        if (g->has_ballot)
            arb_say(w, "ballot_replaced", &g->run_id, NULL,
                "the ballot on disk was for another game state (step %" PRIu64 "; a reorg): choosing a new one",
                g->ballot.step);
        arb_ballot b = {.basis = basis, .step = a->step, .outcome = a->outcome, .evidence = a->evidence};
        if ((rv = random_salt(&b.salt)))
            return rv;
        g->ballot = b;
        g->has_ballot = true;
        g->has_ballot_tx = false;
        if ((rv = arb_game_save(g, w->o->state_dir)))
            return rv;
    }
    ovt_hash ballot;
    chain_arb_ballot_hash(&ballot, &g->run_id, &w->m->from, g->ballot.step, g->ballot.outcome, &g->ballot.evidence,
                          &g->ballot.salt);
    chain_buf data;
    chain_buf_init(&data);
    if ((rv = chain_arb_encode_commit_verdict(&data, &g->run_id, &ballot))) {
        chain_buf_free(&data);
        return ovt_fail_wrap(rv, "encoding commitVerdict");
    }
    char shard[512], msg[1024], hex[67];
    arb_hex32(hex, &ballot);
    json_t *fields = verdict_fields(g, a, shard, sizeof shard);
    if (fields)
        json_object_set_new(fields, "ballot", json_string(hex));
    snprintf(msg, sizeof msg, "ballot sealed: %s on step %" PRIu64 " (%s)%s", chain_arb_outcome_name(a->outcome),
             a->step, a->reason, shard);
    game_tx t = {.name = "ballot", .has = &g->has_ballot_tx, .tx = &g->ballot_tx};
    rv = send_tx(w, g, &t, &data, a->step, fields, msg);
    chain_buf_free(&data);
    return rv;
}

int arb_send_reveal(watcher *w, arb_game *g, const arb_action *a)
{
    const arb_ballot *b = &g->ballot;
    chain_buf data;
    chain_buf_init(&data);
    int rv = chain_arb_encode_reveal_verdict(&data, &g->run_id, b->step, b->outcome, &b->evidence, &b->salt);
    if (rv) {
        chain_buf_free(&data);
        return ovt_fail_wrap(rv, "encoding revealVerdict");
    }
    char shard[512], msg[1024];
    json_t *fields = verdict_fields(g, a, shard, sizeof shard);
    snprintf(msg, sizeof msg, "ballot opened: %s on step %" PRIu64 " (%s)", chain_arb_outcome_name(b->outcome),
             b->step, a->reason);
    game_tx t = {.name = "reveal", .extra_gas = CHAIN_ARB_REVEAL_GAS, .has = &g->has_reveal, .tx = &g->reveal_tx};
    rv = send_tx(w, g, &t, &data, b->step, fields, msg);
    chain_buf_free(&data);
    return rv;
}

