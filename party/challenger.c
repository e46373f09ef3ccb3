/* The outside challenger's daemon (see challenger.h). */
#include "party/challenger.h"

#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain/clock.h"
#include "chain/keys.h"
#include "common/fileio.h"
#include "party/agent.h"
#include "party/audit.h"

#define LOG_RANGE 2000       /* blocks per eth_getLogs */
#define RETRY_MAX_MS 60000L  /* the longest pause between two replays of a run that failed */

/* A run whose trainer committed: a candidate until decided, then (when
 * challenged) a game to play until it settles. */
typedef struct {
    ovt_hash run_id;
    json_t *rec;         /* runs/<runId>.json */
    party_game *game;    /* the challenge being played (NULL: none, or settled) */
    long long next_try;  /* ms (monotonic): a failed replay is tried again from then */
    long retry_ms;
} candidate;

typedef struct {
    const party_challenger_opts *o;
    chain_session s;
    uint64_t next;       /* the first block not read yet */
    uint64_t head, head_time;
    candidate *runs;
    size_t nruns;
} challenger;

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void say(challenger *c, const char *event, const ovt_hash *run, json_t *fields, const char *fmt, ...)
    OVT_PRINTF(5, 6);

/* One log line (party_log_line, role "challenger", with the run's id):
 * keys never appear in it. */
static void say(challenger *c, const char *event, const ovt_hash *run, json_t *fields, const char *fmt, ...)
{
    char msg[1024], id[67] = "", who[96] = "ovt challenger";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (run) {
        chain_hash_hex(id, run);
        snprintf(who, sizeof who, "ovt challenger [run %.18s..]", id);
        if (c->o->json) {
            fields = fields ? fields : json_object();
            json_object_set_new(fields, "run_id", json_string(id));
        }
    }
    party_log_line(c->o->log ? c->o->log : stdout, c->o->json, "challenger", who, event, fields, msg);
}

/* --- state on disk */

static int save_json(const char *path, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int rv = ovt_write_atomic(path, text, strlen(text), 0644);
    free(text);
    return rv;
}

static int load_json(json_t **out, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, 1 << 20);
    if (rv)
        return rv;
    json_error_t err;
    *out = json_loadb((const char *)buf, len, 0, &err);
    free(buf);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ovt_fail(OVT_EFORMAT, "%s: not a JSON object (%s); move it away to start over", path, err.text);
    }
    return 0;
}

static void run_path(char *out, size_t cap, const challenger *c, const ovt_hash *run_id)
{
    char hex[65];
    ovt_hex_encode(hex, run_id->b, 32);
    snprintf(out, cap, "%s/runs/%s.json", c->o->state_dir, hex);
}

static int save_run(const challenger *c, const candidate *r)
{
    char path[4300];
    run_path(path, sizeof path, c, &r->run_id);
    return save_json(path, r->rec);
}

static int save_cursor(const challenger *c)
{
    char path[4200], contract[43];
    snprintf(path, sizeof path, "%s/cursor.json", c->o->state_dir);
    chain_address_to_string(contract, &c->s.arb.address);
    return save_json(path, json_pack("{s:I, s:s, s:I}", "chain_id", (json_int_t)c->s.arb.chain_id, "contract",
                                     contract, "next", (json_int_t)c->next));
}

static int add_run(challenger *c, const ovt_hash *run_id, json_t *rec)
{
    candidate *more = realloc(c->runs, (c->nruns + 1) * sizeof *more);
    if (!more) {
        json_decref(rec);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    c->runs = more;
    candidate *r = &c->runs[c->nruns++];
    memset(r, 0, sizeof *r);
    r->run_id = *run_id;
    r->rec = rec;
    return 0;
}

/* runs/<runId>.json, every one. */
static int load_runs(challenger *c)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/runs", c->o->state_dir);
    DIR *d = opendir(dir);
    if (!d)
        return ovt_fail_errno(OVT_EIO, "cannot read %s", dir);
    int rv = 0;
    struct dirent *e;
    while (!rv && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n != 64 + 5 || strcmp(e->d_name + 64, ".json") != 0)
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_t *rec = NULL;
        ovt_hash id;
        if (!(rv = load_json(&rec, path)) && (rv = chain_json_hash(&id, rec, "run_id")))
            rv = ovt_fail_wrap(rv, "%s", path);
        if (!rv)
            rv = add_run(c, &id, rec);
        else
            json_decref(rec);
    }
    closedir(d);
    return rv;
}

/* The cursor (a state dir of another chain or contract is refused), or at
 * the first start --from-block, else the head. */
static int open_state(challenger *c)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/runs", c->o->state_dir);
    int rv = ovt_mkdirs(path, 0700);
    if (rv)
        return rv;
    snprintf(path, sizeof path, "%s/cursor.json", c->o->state_dir);
    json_t *cur = NULL;
    rv = load_json(&cur, path);
    if (rv == OVT_ENOTFOUND) {
        ovt_err_clear();
        if (c->o->has_from_block)
            c->next = c->o->from_block;
        else if ((rv = chain_rpc_block_number(c->s.rpc, &c->next)))
            return rv;
        return save_cursor(c);
    }
    if (rv)
        return rv;
    json_t *chain_id = json_object_get(cur, "chain_id"), *next = json_object_get(cur, "next");
    const char *contract = json_string_value(json_object_get(cur, "contract"));
    chain_address a;
    if (!json_is_integer(chain_id) || !json_is_integer(next) || json_integer_value(next) < 0 || !contract ||
        chain_address_from_string(&a, contract) != 0)
        rv = ovt_fail(OVT_EFORMAT, "%s is not a challenger's cursor; give another --state-dir", path);
    else if ((uint64_t)json_integer_value(chain_id) != c->s.arb.chain_id || !chain_address_eq(&a, &c->s.arb.address))
        rv = ovt_fail(OVT_EINVAL, "%s belongs to another chain or contract: use another --state-dir", c->o->state_dir);
    else
        c->next = (uint64_t)json_integer_value(next);
    json_decref(cur);
    return rv ? rv : load_runs(c);
}

/* --- following the chain */

static int block_time(challenger *c, uint64_t block, uint64_t *ts)
{
    char tag[24];
    snprintf(tag, sizeof tag, "0x%" PRIx64, block);
    json_t *res = NULL;
    int rv = chain_rpc_call(c->s.rpc, &res, "eth_getBlockByNumber", json_pack("[s, b]", tag, 0));
    if (rv)
        return rv;
    rv = json_is_object(res) ? chain_json_u64(ts, res, "timestamp")
                             : ovt_fail(OVT_ERPC, "the node has no block %" PRIu64 " (reorganised away?)", block);
    json_decref(res);
    return rv;
}

static candidate *find_run(challenger *c, const ovt_hash *run_id)
{
    for (size_t i = 0; i < c->nruns; i++)
        if (!memcmp(c->runs[i].run_id.b, run_id->b, 32))
            return &c->runs[i];
    return NULL;
}

/* A Committed event: the trainer's opens the run's challenge window. */
static int on_committed(challenger *c, const chain_arb_event *ev)
{
    if (find_run(c, &ev->run_id))
        return 0;
    chain_arb_params p;
    uint64_t at;
    int rv = chain_arb_get_run(&c->s.arb, &ev->run_id, NULL, &p);
    if (rv || !chain_address_eq(&ev->u.committed.party, &p.trainer))
        return rv;
    if ((rv = block_time(c, ev->block_number, &at)))
        return rv;
    char id[67];
    chain_hash_hex(id, &ev->run_id);
    json_t *rec = json_pack("{s:s, s:I, s:I, s:n}", "run_id", id, "committed_block", (json_int_t)ev->block_number,
                            "closes", (json_int_t)(at + p.commit_timeout), "decision");
    if (!rec || (rv = add_run(c, &ev->run_id, rec)))
        return rv ? rv : ovt_fail(OVT_ENOMEM, "out of memory");
    say(c, "run_seen", &ev->run_id, json_pack("{s:I, s:I}", "block", (json_int_t)ev->block_number, "closes",
                                              (json_int_t)(at + p.commit_timeout)),
        "the trainer committed in block %" PRIu64 "; challenges close at %" PRIu64, ev->block_number,
        at + p.commit_timeout);
    return save_run(c, &c->runs[c->nruns - 1]);
}

/* Reads the events from the cursor to the head, a bounded range at a time;
 * the runs are saved before the cursor moves past them. */
static int follow(challenger *c)
{
    int rv = chain_rpc_block_number(c->s.rpc, &c->head);
    if (rv || (rv = block_time(c, c->head, &c->head_time)))
        return rv;
    while (c->next <= c->head && !party_agent_stop_requested()) {
        uint64_t to = c->head - c->next >= LOG_RANGE ? c->next + LOG_RANGE - 1 : c->head;
        chain_arb_event *evs = NULL;
        size_t n = 0;
        rv = chain_arb_get_events(&c->s.arb, NULL, c->next, to, &evs, &n);
        for (size_t i = 0; !rv && i < n; i++)
            if (evs[i].kind == CHAIN_ARB_EV_COMMITTED)
                rv = on_committed(c, &evs[i]);
        free(evs);
        if (rv)
            return rv;
        c->next = to + 1;
        if ((rv = save_cursor(c)))
            return rv;
    }
    return 0;
}

/* --- deciding a run */

static int decide(challenger *c, candidate *r, const char *decision, const char *reason)
{
    json_object_set_new(r->rec, "decision", json_string(decision));
    if (reason)
        json_object_set_new(r->rec, "reason", json_string(reason));
    return save_run(c, r);
}

/* Why this challenger does not take the run on (NULL: it does); the
 * policy's message in why. */
static const char *skip_reason(challenger *c, const chain_arb_params *p, char *why, size_t cap)
{
    const chain_address *self = &c->s.txm.from;
    if (chain_address_eq(&p->trainer, self) || chain_address_eq(&p->auditor, self) || chain_arb_seat(p, self) >= 0)
        return "this key is a party or an arbiter of the run (the contract refuses its challenge)";
    if (chain_u256_is_zero(&p->auditor_bond))
        return "the run has no auditor bond: it takes no challenges";
    if (party_policy_check(c->o->policy, p, c->s.arb.chain_id, &c->s.arb.address, 0)) {
        snprintf(why, cap, "outside the policy: %s", ovt_errmsg());
        ovt_err_clear();
        return why;
    }
    return NULL;
}

struct replay_report {
    bool challenged;
    ovt_hash challenge_id, root;
};

static void on_report(void *ctx, const aud_report *r, const json_t *j)
{
    (void)r;
    struct replay_report *out = ctx;
    out->challenged = json_is_true(json_object_get(j, "challenged"));
    if (chain_json_hash(&out->root, j, "root"))
        ovt_err_clear();
    if (out->challenged && chain_json_hash(&out->challenge_id, j, "challenge_id"))
        ovt_err_clear();
}

/* Replays the run from the store and challenges its root when the
 * replay's differs (party_audit): the decision, or a pause before the
 * next try when it failed. */
static int replay(challenger *c, candidate *r)
{
    const party_challenger_opts *o = c->o;
    char hex[65], out[4300];
    ovt_hex_encode(hex, r->run_id.b, 32);
    snprintf(out, sizeof out, "%s/replay/%s", o->state_dir, hex);
    struct replay_report rep = {0};
    party_audit_opts ao = {.audit = o->audit, .chain = o->chain, .policy = o->policy, .challenge = true,
                           .json = o->json, .on_report = on_report, .ctx = &rep};
    ao.audit.source = o->store_url;
    ao.audit.out = out;
    ao.audit.run_id = r->run_id;
    party_audit_result res;
    say(c, "replaying", &r->run_id, NULL, "replaying the run from %s", o->store_url);
    int rv = party_audit(&ao, &res);
    c->s.txm.next_nonce = 0; /* party_audit sent with a session of its own: the node picks the next nonce */
    if (rv) {
        r->retry_ms = r->retry_ms ? (r->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : r->retry_ms * 2) : o->poll_ms;
        r->next_try = now_ms() + r->retry_ms;
        say(c, "replay_failed", &r->run_id, json_pack("{s:s, s:I}", "error", ovt_errmsg(), "retry_ms",
                                                       (json_int_t)r->retry_ms),
            "%s; trying again in %ld ms while the window is open", ovt_errmsg(), r->retry_ms);
        ovt_err_clear();
        return 0;
    }
    char root[67], id[67];
    chain_hash_hex(root, &rep.root);
    json_object_set_new(r->rec, "root", json_string(root));
    if (!rep.challenged) {
        say(c, "agreed", &r->run_id, json_pack("{s:s}", "root", root),
            "the replay's root is the trainer's: nothing to challenge");
        return decide(c, r, "agreed", NULL);
    }
    chain_hash_hex(id, &rep.challenge_id);
    json_object_set_new(r->rec, "challenge_id", json_string(id));
    say(c, "challenged", &r->run_id, json_pack("{s:s, s:s}", "challenge_id", id, "root", root),
        "the replay's root %s is not the trainer's: challenged (game %s)", root, id);
    return decide(c, r, "challenged", NULL);
}

static int consider(challenger *c, candidate *r)
{
    if (r->next_try && now_ms() < r->next_try)
        return 0;
    uint64_t closes = (uint64_t)json_integer_value(json_object_get(r->rec, "closes"));
    if (c->head_time > closes) {
        say(c, "skipped", &r->run_id, json_pack("{s:s}", "reason", "window"),
            "the challenge window closed at %" PRIu64 " before a replay was done", closes);
        return decide(c, r, "skipped", "the challenge window closed before a replay was done");
    }
    chain_arb_params p;
    char why[1024];
    int rv = chain_arb_get_run(&c->s.arb, &r->run_id, NULL, &p);
    if (rv)
        return rv;
    const char *skip = skip_reason(c, &p, why, sizeof why);
    ovt_hash by;
    static const ovt_hash zero;
    if (!skip && (rv = chain_arb_refuted_by(&c->s.arb, &r->run_id, NULL, &by)))
        return rv;
    if (!skip && memcmp(by.b, zero.b, 32))
        skip = "the trainer's root is already refuted (refutedBy): another game showed it wrong";
    if (skip) {
        say(c, "skipped", &r->run_id, json_pack("{s:s}", "reason", skip), "not taken on: %s", skip);
        return decide(c, r, "skipped", skip);
    }
    return replay(c, r);
}

/* --- playing the challenges */

static int play(challenger *c, candidate *r)
{
    ovt_hash game_id;
    int rv;
    if (!r->game) {
        char hex[65], run_dir[4300], games[4200];
        if ((rv = chain_json_hash(&game_id, r->rec, "challenge_id")))
            return rv;
        ovt_hex_encode(hex, r->run_id.b, 32);
        snprintf(run_dir, sizeof run_dir, "%s/replay/%s", c->o->state_dir, hex);
        snprintf(games, sizeof games, "%s/games", c->o->state_dir);
        party_agent_opts ao = {.is_trainer = false, .run_id = r->run_id, .game_id = game_id, .run_dir = run_dir,
                               .state_dir = games, .poll_ms = c->o->poll_ms, .json = c->o->json,
                               .log = c->o->log ? c->o->log : stdout};
        if ((rv = party_game_open(&r->game, &c->s, &ao)))
            return rv;
    }
    chain_arb_outcome outcome;
    int done = 0, wait = 1;
    if ((rv = party_game_turn(r->game, &outcome, &done, &wait)) || !done)
        return rv;
    party_game_free(r->game);
    r->game = NULL;
    json_object_set_new(r->rec, "outcome", json_string(chain_arb_outcome_name(outcome)));
    say(c, "challenge_settled", &r->run_id, json_pack("{s:s}", "outcome", chain_arb_outcome_name(outcome)),
        "the challenge settled: %s", chain_arb_outcome_name(outcome));
    return save_run(c, r);
}

/* --- the loop */

static int pass(challenger *c)
{
    int rv = follow(c), first = rv;
    for (size_t i = 0; !rv && i < c->nruns && !party_agent_stop_requested(); i++) {
        candidate *r = &c->runs[i];
        const char *decision = json_string_value(json_object_get(r->rec, "decision"));
        int one = 0;
        if (!decision)
            one = consider(c, r);
        else if (!strcmp(decision, "challenged") && !json_object_get(r->rec, "outcome"))
            one = play(c, r);
        if (one) {
            say(c, "error", &r->run_id, json_pack("{s:s}", "error", ovt_errmsg()), "%s (retrying)", ovt_errmsg());
            if (!first)
                first = one;
        }
    }
    return first;
}

int party_challenger_run(const party_challenger_opts *o)
{
    challenger c;
    memset(&c, 0, sizeof c);
    c.o = o;
    int rv = chain_session_open(&c.s, o->chain, 1);
    if (rv)
        return rv;
    if ((rv = open_state(&c)))
        goto done;
    char self[43];
    chain_address_to_string(self, &c.s.txm.from);
    say(&c, "start", NULL, json_pack("{s:s, s:I, s:I, s:s}", "challenger", self, "next_block", (json_int_t)c.next,
                                     "runs", (json_int_t)c.nruns, "store", o->store_url),
        "challenger %s from block %" PRIu64 ", %zu run(s) on record, replaying from %s", self, c.next, c.nruns,
        o->store_url);
    while (!party_agent_stop_requested()) {
        rv = pass(&c);
        if (rv && o->once)
            break;
        if (rv)
            say(&c, "error", NULL, json_pack("{s:s}", "error", ovt_errmsg()), "%s (retrying)", ovt_errmsg());
        rv = 0;
        if (o->once)
            break;
        for (long slept = 0; slept < o->poll_ms && !party_agent_stop_requested(); slept += 50)
            chain_sleep_ms(o->poll_ms - slept < 50 ? o->poll_ms - slept : 50);
    }
    if (!rv)
        say(&c, "stop", NULL, json_pack("{s:I}", "next_block", (json_int_t)c.next), "stopped at block %" PRIu64, c.next);
done:
    for (size_t i = 0; i < c.nruns; i++) {
        party_game_free(c.runs[i].game);
        json_decref(c.runs[i].rec);
    }
    free(c.runs);
    chain_session_close(&c.s);
    return rv;
}
