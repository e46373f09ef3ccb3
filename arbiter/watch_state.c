#include "arbiter/watch_state.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"

#define MAX_STATE_FILE ((size_t)16 << 20)

void arb_hex32(char out[67], const ovt_hash *h)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, h->b, 32);
}

int arb_parse_hex32(ovt_hash *out, const json_t *v)
{
    if (!json_is_string(v) || ovt_hex_decode(out->b, 32, json_string_value(v)))
        return ovt_fail(OVT_EFORMAT, "expected a 32-byte hex string");
    return 0;
}

static json_t *hexj(const ovt_hash *h)
{
    char s[67];
    arb_hex32(s, h);
    return json_string(s);
}

/* Writes j (stolen) to path atomically. */
static int save_json(const char *path, json_t *j, int mode)
{
    char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory for %s", path);
    int rv = ovt_write_atomic(path, text, strlen(text), mode);
    free(text);
    return rv;
}

static int load_json(json_t **out, const char *path)
{
    *out = NULL;
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, MAX_STATE_FILE);
    if (rv)
        return rv;
    json_error_t err;
    *out = json_loadb((const char *)buf, len, 0, &err);
    free(buf);
    if (!*out || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ovt_fail(OVT_EFORMAT, "%s is not a JSON object (line %d: %s)", path, err.line, err.text);
    }
    return 0;
}

static int get_u64(uint64_t *out, const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return ovt_fail(OVT_EFORMAT, "field '%s' must be a non-negative integer", key);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_hash(ovt_hash *out, const json_t *o, const char *key)
{
    int rv = arb_parse_hex32(out, json_object_get(o, key));
    return rv ? ovt_fail_wrap(rv, "field '%s'", key) : 0;
}

void arb_cursor_push(arb_cursor *c, uint64_t block, const ovt_hash *hash)
{
    if (c->nrecent == ARB_RECENT) {
        memmove(c->recent_block, c->recent_block + 1, (ARB_RECENT - 1) * sizeof *c->recent_block);
        memmove(c->recent_hash, c->recent_hash + 1, (ARB_RECENT - 1) * sizeof *c->recent_hash);
        c->nrecent--;
    }
    c->recent_block[c->nrecent] = block;
    c->recent_hash[c->nrecent] = *hash;
    c->nrecent++;
}

int arb_cursor_load(arb_cursor *c, const char *dir)
{
    memset(c, 0, sizeof *c);
    char path[4096];
    int rv = ovt_path_join(path, sizeof path, dir, "cursor.json");
    if (rv)
        return rv;
    if (access(path, F_OK) != 0)
        return ovt_fail(OVT_ENOTFOUND, "no cursor yet");
    json_t *j;
    if ((rv = load_json(&j, path)))
        return rv;
    json_t *recent = json_object_get(j, "recent");
    const char *contract = json_string_value(json_object_get(j, "contract"));
    if ((rv = get_u64(&c->chain_id, j, "chain_id")) || (rv = get_u64(&c->next, j, "next")))
        goto done;
    if (!contract || chain_address_from_string(&c->contract, contract) || !json_is_array(recent) ||
        json_array_size(recent) > ARB_RECENT) {
        rv = ovt_fail(OVT_EFORMAT, "bad contract or recent blocks");
        goto done;
    }
    size_t i;
    json_t *e;
    json_array_foreach(recent, i, e) {
        if ((rv = get_u64(&c->recent_block[i], e, "block")) || (rv = get_hash(&c->recent_hash[i], e, "hash")))
            goto done;
        c->nrecent = i + 1;
    }
done:
    json_decref(j);
    return rv ? ovt_fail_wrap(rv, "%s", path) : 0;
}

int arb_cursor_save(const arb_cursor *c, const char *dir)
{
    char path[4096], contract[43];
    int rv = ovt_path_join(path, sizeof path, dir, "cursor.json");
    if (rv)
        return rv;
    chain_address_to_string(contract, &c->contract);
    json_t *recent = json_array();
    for (size_t i = 0; i < c->nrecent; i++)
        json_array_append_new(recent, json_pack("{s:I, s:o}", "block", (json_int_t)c->recent_block[i], "hash",
                                                hexj(&c->recent_hash[i])));
    return save_json(path, json_pack("{s:I, s:s, s:I, s:o}", "chain_id", (json_int_t)c->chain_id, "contract",
                                     contract, "next", (json_int_t)c->next, "recent", recent), 0644);
}

static int game_dir(char *out, size_t cap, const char *dir, const ovt_hash *run_id)
{
    char hex[65];
    ovt_hex_encode(hex, run_id->b, 32);
    int n = snprintf(out, cap, "%s/games/%s", dir, hex);
    return n > 0 && (size_t)n < cap ? 0 : ovt_fail(OVT_EINVAL, "state dir path is too long");
}

json_t *arb_shard_json(const arb_eval *e)
{
    if (e->shard_differs < 0)
        return json_null();
    json_t *o = json_pack("{s:I, s:I}", "shard", (json_int_t)e->shard_differs, "shards", (json_int_t)e->shards);
    json_object_set_new(o, "rank", e->has_owner ? json_integer(e->owner_rank) : json_null());
    json_object_set_new(o, "host", e->has_owner ? json_string(e->owner_host) : json_null());
    json_object_set_new(o, "owner_source", json_string(e->has_owner ? ARB_OWNER_SOURCE : "none"));
    return o;
}

/* The shard finding of eval.json ("shards", "shard_differs"), absent from
 * files written before it: then none is known. Only a hint, so a malformed
 * one is dropped rather than refused. */
static void shard_parse(arb_eval *e, const json_t *j)
{
    json_t *S = json_object_get(j, "shards"), *sd = json_object_get(j, "shard_differs");
    e->shard_differs = -1;
    if (json_is_integer(S) && json_integer_value(S) >= 0 && json_integer_value(S) <= UINT32_MAX)
        e->shards = (uint32_t)json_integer_value(S);
    json_t *shard = json_object_get(sd, "shard"), *rank = json_object_get(sd, "rank");
    json_t *host = json_object_get(sd, "host");
    if (!json_is_integer(shard) || json_integer_value(shard) < 0 || json_integer_value(shard) >= (json_int_t)e->shards)
        return;
    e->shard_differs = json_integer_value(shard);
    if (json_is_integer(rank) && json_integer_value(rank) >= 0 && json_integer_value(rank) <= UINT32_MAX &&
        json_is_string(host) && strlen(json_string_value(host)) < sizeof e->owner_host) {
        e->has_owner = true;
        e->owner_rank = (uint32_t)json_integer_value(rank);
        snprintf(e->owner_host, sizeof e->owner_host, "%s", json_string_value(host));
    }
}

/* The basis' fields into o (eval.json keeps them at its top level, a
 * ballot in its own object). */
static json_t *basis_json(json_t *o, const arb_basis *b)
{
    json_object_set_new(o, "step", json_integer((json_int_t)b->step));
    json_object_set_new(o, "trainer_leaf", hexj(&b->trainer_leaf));
    json_object_set_new(o, "auditor_leaf", hexj(&b->auditor_leaf));
    json_object_set_new(o, "previous_state", hexj(&b->previous_state));
    json_object_set_new(o, "trainer_batch", hexj(&b->trainer_batch));
    json_object_set_new(o, "trainer_log", hexj(&b->trainer_log));
    return o;
}

static int basis_parse(arb_basis *b, const json_t *j)
{
    int rv;
    if ((rv = get_u64(&b->step, j, "step")) || (rv = get_hash(&b->trainer_leaf, j, "trainer_leaf")) ||
        (rv = get_hash(&b->auditor_leaf, j, "auditor_leaf")) ||
        (rv = get_hash(&b->previous_state, j, "previous_state")) ||
        (rv = get_hash(&b->trainer_batch, j, "trainer_batch")) || (rv = get_hash(&b->trainer_log, j, "trainer_log")))
        return rv;
    return 0;
}

static json_t *eval_json(const arb_eval *e)
{
    json_t *inputs = json_array();
    for (int k = 0; k < ARB_NINPUTS; k++)
        json_array_append_new(inputs, json_integer(e->input[k]));
    json_t *j = json_pack("{s:o, s:i, s:o, s:o, s:o, s:I, s:o}", "inputs", inputs, "exec", (int)e->exec, "leaf",
                          hexj(&e->leaf), "state_hash", hexj(&e->state_hash), "batch_hash", hexj(&e->batch_hash),
                          "shards", (json_int_t)e->shards, "shard_differs", arb_shard_json(e));
    return j ? basis_json(j, &e->basis) : NULL;
}

static int eval_parse(arb_eval *e, const json_t *j)
{
    memset(e, 0, sizeof *e);
    json_t *inputs = json_object_get(j, "inputs");
    json_t *exec = json_object_get(j, "exec");
    int rv;
    if ((rv = basis_parse(&e->basis, j)) || (rv = get_hash(&e->leaf, j, "leaf")) ||
        (rv = get_hash(&e->state_hash, j, "state_hash")) || (rv = get_hash(&e->batch_hash, j, "batch_hash")))
        return rv;
    if (!json_is_array(inputs) || json_array_size(inputs) != ARB_NINPUTS || !json_is_integer(exec) ||
        json_integer_value(exec) < ARB_EXEC_NOT_RUN || json_integer_value(exec) > ARB_EXEC_FAILED)
        return ovt_fail(OVT_EFORMAT, "bad inputs or exec");
    for (int k = 0; k < ARB_NINPUTS; k++) {
        json_t *v = json_array_get(inputs, (size_t)k);
        if (!json_is_integer(v) || json_integer_value(v) < ARB_INPUT_OK || json_integer_value(v) > ARB_INPUT_MISMATCH)
            return ovt_fail(OVT_EFORMAT, "bad input status");
        e->input[k] = (arb_input)json_integer_value(v);
    }
    e->exec = (arb_exec)json_integer_value(exec);
    shard_parse(e, j);
    return 0;
}

/* {"tx": hash} of a sent transaction. */
static json_t *tx_json(const ovt_hash *tx)
{
    return json_pack("{s:o}", "tx", hexj(tx));
}

/* The committee fields of game.json: "accept", "ballot" (with its salt, so
 * game.json is written 0600), "reveal". */
static void committee_json(json_t *j, const arb_game *g)
{
    if (g->has_accept)
        json_object_set_new(j, "accept", tx_json(&g->accept_tx));
    if (g->has_ballot) {
        const arb_ballot *b = &g->ballot;
        json_t *o = json_pack("{s:I, s:i, s:o, s:o, s:o}", "step", (json_int_t)b->step, "outcome", (int)b->outcome,
                              "evidence", hexj(&b->evidence), "salt", hexj(&b->salt), "basis",
                              basis_json(json_object(), &b->basis));
        if (o && g->has_ballot_tx)
            json_object_set_new(o, "tx", hexj(&g->ballot_tx));
        json_object_set_new(j, "ballot", o);
    }
    if (g->has_reveal)
        json_object_set_new(j, "reveal", tx_json(&g->reveal_tx));
}

static int committee_parse(arb_game *g, const json_t *j)
{
    json_t *accept = json_object_get(j, "accept"), *ballot = json_object_get(j, "ballot");
    json_t *reveal = json_object_get(j, "reveal");
    int rv;
    if (accept && (rv = get_hash(&g->accept_tx, accept, "tx")))
        return ovt_fail_wrap(rv, "\"accept\"");
    g->has_accept = accept != NULL;
    if (reveal && (rv = get_hash(&g->reveal_tx, reveal, "tx")))
        return ovt_fail_wrap(rv, "\"reveal\"");
    g->has_reveal = reveal != NULL;
    if (!ballot)
        return 0;
    arb_ballot *b = &g->ballot;
    uint64_t outcome = 0;
    if ((rv = get_u64(&b->step, ballot, "step")) || (rv = get_u64(&outcome, ballot, "outcome")) ||
        (rv = get_hash(&b->evidence, ballot, "evidence")) || (rv = get_hash(&b->salt, ballot, "salt")) ||
        (rv = basis_parse(&b->basis, json_object_get(ballot, "basis"))))
        return ovt_fail_wrap(rv, "\"ballot\"");
    if (outcome < CHAIN_ARB_TRAINER_RIGHT || outcome > CHAIN_ARB_INPUTS_UNAVAILABLE)
        return ovt_fail(OVT_EFORMAT, "\"ballot\": outcome %" PRIu64 " is not a verdict", outcome);
    b->outcome = (chain_arb_outcome)outcome;
    g->has_ballot = true;
    if (json_object_get(ballot, "tx")) {
        if ((rv = get_hash(&g->ballot_tx, ballot, "tx")))
            return ovt_fail_wrap(rv, "\"ballot\"");
        g->has_ballot_tx = true;
    }
    return 0;
}

const ovt_hash *arb_game_tree_id(const arb_game *g)
{
    return g->is_challenge ? &g->challenged_run : &g->run_id;
}

int arb_game_save(const arb_game *g, const char *dir)
{
    char path[4096], file[4200];
    int rv;
    if ((rv = game_dir(path, sizeof path, dir, &g->run_id)) || (rv = ovt_mkdirs(path, 0755)))
        return rv;
    json_t *j = json_pack("{s:i, s:o, s:I, s:b, s:I, s:O}", "format",
                          g->is_challenge ? ARB_GAME_FORMAT : ARB_GAME_FORMAT_RUN, "run_id", hexj(&g->run_id),
                          "opened_block", (json_int_t)g->opened_block, "done", g->done, "first_missing",
                          (json_int_t)g->first_missing, "events", g->events);
    if (j && g->has_verdict)
        json_object_set_new(j, "verdict", json_pack("{s:o, s:i, s:o}", "tx", hexj(&g->verdict_tx), "outcome",
                                                    (int)g->verdict_outcome, "evidence", hexj(&g->verdict_evidence)));
    if (j && g->is_challenge)
        json_object_set_new(j, "challenge_of", hexj(&g->challenged_run));
    if (j)
        committee_json(j, g);
    snprintf(file, sizeof file, "%s/eval.json", path);
    if (g->has_eval) {
        if ((rv = save_json(file, eval_json(&g->eval), 0644)))
            return rv;
    } else if (unlink(file) != 0 && errno != ENOENT) {
        return ovt_fail_errno(OVT_EIO, "removing %s", file);
    }
    snprintf(file, sizeof file, "%s/game.json", path);
    return save_json(file, j, 0600); /* a ballot's salt is secret until it is revealed */
}

static int game_load(arb_game *g, const char *dir, const char *name)
{
    memset(g, 0, sizeof *g);
    char file[4200];
    json_t *j = NULL, *e = NULL;
    snprintf(file, sizeof file, "%s/games/%s/game.json", dir, name);
    int rv = load_json(&j, file);
    if (rv)
        return rv;
    json_t *done = json_object_get(j, "done"), *verdict = json_object_get(j, "verdict");
    json_t *format = json_object_get(j, "format");
    if (format && (!json_is_integer(format) || json_integer_value(format) < 1 ||
                   json_integer_value(format) > ARB_GAME_FORMAT)) {
        rv = ovt_fail(OVT_EFORMAT,
                      "\"format\" %lld is not one this ovt reads (1 to %d): the file was written by a later "
                      "ovt; run that one on this --state-dir, or give this one another",
                      json_is_integer(format) ? (long long)json_integer_value(format) : -1LL, ARB_GAME_FORMAT);
        goto done;
    }
    if ((rv = get_hash(&g->run_id, j, "run_id")) || (rv = get_u64(&g->opened_block, j, "opened_block")) ||
        (rv = get_u64(&g->first_missing, j, "first_missing")))
        goto done;
    if (json_object_get(j, "challenge_of")) {
        if ((rv = get_hash(&g->challenged_run, j, "challenge_of")))
            goto done;
        g->is_challenge = true;
    }
    g->done = json_is_true(done);
    g->events = json_incref(json_object_get(j, "events"));
    if (!json_is_array(g->events)) {
        rv = ovt_fail(OVT_EFORMAT, "no events list");
        goto done;
    }
    if (verdict) {
        uint64_t outcome = 0;
        if ((rv = get_hash(&g->verdict_tx, verdict, "tx")) || (rv = get_hash(&g->verdict_evidence, verdict, "evidence")) ||
            (rv = get_u64(&outcome, verdict, "outcome")))
            goto done;
        g->verdict_outcome = (chain_arb_outcome)outcome;
        g->has_verdict = true;
    }
    if ((rv = committee_parse(g, j)))
        goto done;
    snprintf(file, sizeof file, "%s/games/%s/eval.json", dir, name);
    if (access(file, F_OK) == 0) {
        if ((rv = load_json(&e, file)) || (rv = eval_parse(&g->eval, e)))
            goto done;
        g->has_eval = true;
    }
done:
    json_decref(j);
    json_decref(e);
    if (rv) {
        arb_game_free(g);
        return ovt_fail_wrap(rv, "%s", file);
    }
    return 0;
}

int arb_games_load(arb_game **games, size_t *n, const char *dir)
{
    *games = NULL;
    *n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/games", dir);
    int rv = ovt_mkdirs(path, 0755);
    if (rv)
        return rv;
    DIR *dh = opendir(path);
    if (!dh)
        return ovt_fail_errno(OVT_EIO, "opening %s", path);
    struct dirent *d;
    while ((d = readdir(dh))) {
        if (strlen(d->d_name) != 64)
            continue;
        arb_game *more = realloc(*games, (*n + 1) * sizeof **games);
        if (!more) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory");
            break;
        }
        *games = more;
        if ((rv = game_load(&(*games)[*n], dir, d->d_name)))
            break;
        (*n)++;
    }
    closedir(dh);
    return rv;
}

int arb_game_remove(const arb_game *g, const char *dir)
{
    char path[4096], file[4200];
    int rv = game_dir(path, sizeof path, dir, &g->run_id);
    if (rv)
        return rv;
    const char *names[] = {"eval.json", "game.json"};
    for (int k = 0; k < 2; k++) {
        snprintf(file, sizeof file, "%s/%s", path, names[k]);
        if (unlink(file) != 0 && errno != ENOENT)
            return ovt_fail_errno(OVT_EIO, "removing %s", file);
    }
    if (rmdir(path) != 0 && errno != ENOENT)
        return ovt_fail_errno(OVT_EIO, "removing %s", path);
    return 0;
}

void arb_game_free(arb_game *g)
{
    trn_runner_free(g->prep);
    json_decref(g->events);
    memset(g, 0, sizeof *g);
}
