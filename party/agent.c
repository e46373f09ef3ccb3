/* The party agent's loop (see agent.h). */
#include "party/agent.h"

#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auditor/replay.h"
#include "common/fileio.h"
#include "common/metrics.h"
#include "common/signals.h"
#include "party/commit.h"
#include "party/narrow.h"
#include "party/sites.h"
#include "trainer/checkpoint.h"
#include "trainer/rundata.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

void party_print_outcome(chain_arb_outcome outcome, bool json)
{
    if (json)
        printf("{\"outcome\":\"%s\",\"code\":%d}\n", chain_arb_outcome_name(outcome), (int)outcome);
    else
        printf("%s\n", chain_arb_outcome_name(outcome));
    fflush(stdout);
}

void party_log_line(FILE *f, bool json, const char *role, const char *who, const char *event, json_t *fields,
                    const char *message)
{
    if (json) {
        json_t *j = fields ? fields : json_object();
        json_object_set_new(j, "time", json_integer((json_int_t)time(NULL)));
        json_object_set_new(j, "role", json_string(role));
        json_object_set_new(j, "event", json_string(event));
        json_object_set_new(j, "message", json_string(message));
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        if (text)
            fprintf(f, "%s\n", text);
        free(text);
        json_decref(j);
    } else {
        fprintf(f, "%s %s: %s\n", who, event, message);
        json_decref(fields);
    }
    fflush(f);
}

bool party_agent_stop_requested(void)
{
    return stop_requested != 0;
}

void party_agent_install_signals(void)
{
    ovt_on_stop_signals(on_signal);
}

void party_history_free(party_history *h)
{
    trn_step_table_free(&h->table);
    chain_merkle_free(h->tree);
    memset(h, 0, sizeof *h);
}

int party_history_from_table(party_history *h, const trn_step_table *t, const ovt_hash *run_id)
{
    memset(h, 0, sizeof *h);
    if (t->count < 2)
        return ovt_fail(OVT_EINVAL, "a history needs at least one step");
    ovt_hash *leaves = malloc(t->count * sizeof *leaves);
    h->table.steps = malloc(t->count * sizeof *h->table.steps);
    if (!leaves || !h->table.steps) {
        free(leaves);
        party_history_free(h);
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaves", t->count);
    }
    h->table.config_hash = t->config_hash;
    h->table.count = t->count;
    memcpy(h->table.steps, t->steps, t->count * sizeof *t->steps);
    for (size_t i = 0; i < t->count; i++)
        chain_merkle_leaf_hash(&leaves[i], run_id, i, &t->steps[i]);
    int rv = chain_merkle_build(&h->tree, leaves, t->count);
    free(leaves);
    if (rv)
        party_history_free(h);
    return rv;
}

int party_history_load(party_history *h, const char *dir, const ovt_hash *run_id)
{
    memset(h, 0, sizeof *h);
    char path[4096];
    trn_step_table t;
    int rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin");
    if (rv || (rv = trn_step_table_read(&t, path)))
        return rv;
    rv = party_history_from_table(h, &t, run_id);
    trn_step_table_free(&t);
    return rv;
}

static int preimage_of(void *ctx, uint64_t index, chain_merkle_preimage *out)
{
    const party_history *h = ctx;
    if (index >= h->table.count)
        return ovt_fail(OVT_EINVAL, "no leaf %llu in a history of %zu", (unsigned long long)index, h->table.count);
    *out = h->table.steps[index];
    return 0;
}

/* --- the agent's on-disk state and log */

struct agent {
    chain_session *s;
    const party_agent_opts *o;
    party_history hist;
    party_sites sites; /* a run with proof of replay: its site hashes, once needed */
    bool has_sites;
    party_narrow_step narrow; /* step K re-executed with its trace, once the narrowing needs it */
    bool narrow_loaded, narrow_over, narrow_uploaded;
    bool narrow_said_no_chain; /* --narrow-no-chain logged once */
    char dir[4096];
    json_t *state; /* {"role", "run_id", "published", "sent": [...], "outcome"} */
};

static void agent_log(struct agent *a, const char *event, json_t *fields, const char *fmt, ...) OVT_PRINTF(4, 5);

static void agent_log(struct agent *a, const char *event, json_t *fields, const char *fmt, ...)
{
    char msg[1024], who[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *role = a->o->is_trainer ? "trainer" : "auditor";
    snprintf(who, sizeof who, "ovt agent [%s]", role);
    party_log_line(a->o->log ? a->o->log : stderr, a->o->json, role, who, event, fields, msg);
}

static int save_state(struct agent *a)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/state.json", a->dir);
    char *text = json_dumps(a->state, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int rv = ovt_write_atomic(path, text, strlen(text), 0644);
    free(text);
    return rv;
}

/* The game this agent plays: the run's own, or a challenge of it. */
static const ovt_hash *game_of(const party_agent_opts *o)
{
    static const ovt_hash zero;
    return memcmp(o->game_id.b, zero.b, 32) ? &o->game_id : &o->run_id;
}

static int load_state(struct agent *a)
{
    char rid[65];
    ovt_hex_encode(rid, game_of(a->o)->b, 32);
    int n = snprintf(a->dir, sizeof a->dir, "%s/%s", a->o->state_dir, rid);
    if (n < 0 || (size_t)n >= sizeof a->dir)
        return ovt_fail(OVT_EINVAL, "--state-dir is too long");
    int rv = ovt_mkdirs(a->dir, 0755);
    if (rv)
        return rv;
    char path[4200];
    snprintf(path, sizeof path, "%s/state.json", a->dir);
    uint8_t *buf;
    size_t len;
    rv = ovt_read_file(path, &buf, &len, 1 << 20);
    if (rv == OVT_ENOTFOUND) {
        a->state = json_pack("{s:s, s:s, s:b, s:[], s:n}", "role", a->o->is_trainer ? "trainer" : "auditor",
                             "run_id", rid, "published", 0, "sent", "outcome");
        return a->state ? save_state(a) : ovt_fail(OVT_ENOMEM, "out of memory");
    }
    if (rv)
        return rv;
    json_error_t jerr;
    a->state = json_loadb((const char *)buf, len, 0, &jerr);
    free(buf);
    if (!json_is_object(a->state) || !json_is_array(json_object_get(a->state, "sent")))
        return ovt_fail(OVT_EFORMAT, "%s is not an agent state file", path);
    const char *role = json_string_value(json_object_get(a->state, "role"));
    if (!role || strcmp(role, a->o->is_trainer ? "trainer" : "auditor") != 0)
        return ovt_fail(OVT_EINVAL, "%s belongs to the other role's agent", path);
    return 0;
}

static int record_sent(struct agent *a, const char *kind, unsigned round, const ovt_hash *tx)
{
    char hex[67];
    chain_hash_hex(hex, tx);
    json_array_append_new(json_object_get(a->state, "sent"),
                          json_pack("{s:s, s:i, s:s}", "kind", kind, "round", (int)round, "tx", hex));
    return save_state(a);
}

/* --- reading the chain */

static int block_timestamp(chain_rpc *rpc, const char *block, uint64_t *ts)
{
    json_t *res;
    int rv = chain_rpc_call(rpc, &res, "eth_getBlockByNumber", json_pack("[s, b]", block, 0));
    if (rv)
        return rv;
    rv = json_is_object(res) ? chain_json_u64(ts, res, "timestamp")
                             : ovt_fail(OVT_ERPC, "the node has no block %s (reorganised away?)", block);
    json_decref(res);
    return rv;
}

/* Reads the game and the time at one block. */
static int read_chain(struct agent *a, chain_arb_game *g, uint64_t *block, uint64_t *now)
{
    int rv = chain_rpc_block_number(a->s->rpc, block);
    if (rv)
        return rv;
    char tag[32];
    snprintf(tag, sizeof tag, "0x%llx", (unsigned long long)*block);
    if ((rv = block_timestamp(a->s->rpc, tag, now)))
        return rv;
    ovt_metrics_chain(*block, *block, *now);
    if ((rv = chain_arb_get_game(&a->s->arb, game_of(a->o), tag, g)) == 0)
        ovt_metrics_game(game_of(a->o), chain_arb_phase_name(g->phase), g->deadline, g->phase == CHAIN_ARB_PHASE_SETTLED);
    return rv;
}

/* --- the trainer's data availability */

/* Publishes the bytes of batch j, named by their SHA-256: the batchHash. */
static int publish_batch(const party_agent_opts *o, uint64_t j, const ovt_hash *batch_hash)
{
    trn_run_config rc;
    ovt_hash ch, name;
    trn_run_data data;
    trn_step_batch batch;
    uint8_t *buf = NULL;
    size_t len;
    int rv = trn_run_load_config(o->run_dir, &rc, &ch);
    if (rv || (rv = trn_run_data_load(&data, o->data_path, &rc, 0)))
        return rv;
    if (!(rv = trn_step_batch_get(&batch, &data, &rc, j))) {
        if (!(rv = trn_step_batch_encode(&batch, &buf, &len)) && !(rv = store_put(o->store, buf, len, &name)) &&
            memcmp(name.b, batch_hash->b, 32) != 0)
            rv = ovt_fail(OVT_EFORMAT, "batch %llu of the dataset is not the one the step table names",
                          (unsigned long long)j);
        free(buf);
        trn_step_batch_free(&batch);
    }
    trn_run_data_free(&data);
    return rv;
}

static int publish_inputs(struct agent *a, uint64_t j)
{
    const party_agent_opts *o = a->o;
    char path[4096];
    int rv;
    if ((rv = trn_run_path(path, sizeof path, o->run_dir, NULL, 0, "config.bin")) ||
        (rv = store_put_file(o->store, path, NULL)))
        return rv;
    if (o->data_path && (rv = store_put_file(o->store, o->data_path, NULL)))
        return rv;
    if (j == 0) /* the initial state is the config's (and the parameters its init_hash names) */
        return party_publish_init(o->store, o->run_dir);
    if ((rv = trn_run_path(path, sizeof path, o->run_dir, "logs", j, "rlog")) ||
        (rv = store_put_file(o->store, path, NULL)))
        return rv;
    if (!o->data_path)
        return ovt_fail(OVT_EINVAL, "the trainer agent needs the dataset (--data) to rebuild state %llu",
                        (unsigned long long)(j - 1));
    if ((rv = publish_batch(o, j, &a->hist.table.steps[j].batch_hash)))
        return rv;
    trn_state *st;
    if ((rv = aud_rebuild_state(&st, o->run_dir, o->data_path, j - 1)))
        return rv;
    ovt_hash h;
    uint8_t *buf;
    size_t len;
    trn_state_hash(&h, st);
    rv = trn_checkpoint_encode(st, &buf, &len);
    trn_state_free(st);
    if (rv)
        return rv;
    rv = store_put_state(o->store, &h, buf, len);
    free(buf);
    return rv;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!stop_requested && nanosleep(&ts, &ts) != 0)
        ;
}

static const char *move_name(chain_arb_move_kind k)
{
    return k == CHAIN_ARB_MOVE_BISECT         ? "bisect"
           : k == CHAIN_ARB_MOVE_REVEAL       ? "reveal"
           : k == CHAIN_ARB_MOVE_REVEAL_SITE ? "reveal-site"
                                              : "none";
}

/* A run with proof of replay: *rp gets the beacon and the site roots; the
 * party's site hashes are loaded from RUN_DIR/sites.bin or, the trainer's,
 * computed by replaying its own run (every step traced) and kept there. */
static int ensure_sites(struct agent *a, chain_arb_replay *rp)
{
    const party_agent_opts *o = a->o;
    int rv = chain_arb_get_replay(&a->s->arb, &o->run_id, NULL, rp);
    if (rv || a->has_sites)
        return rv;
    rv = party_sites_load(&a->sites, o->run_dir, &rp->beacon, &o->run_id);
    if (rv == OVT_ENOTFOUND && o->is_trainer) {
        ovt_err_clear();
        agent_log(a, "sites", NULL, "replaying its own run for the output hashes of the beacon's site");
        if (!(rv = party_sites_compute(&a->sites, o->run_dir, o->data_path, &rp->beacon, &o->run_id)))
            rv = party_sites_save(&a->sites, o->run_dir);
    }
    if (!rv)
        a->has_sites = true;
    return rv;
}

/* The trainer of a run with proof of replay whose roots agree: its site
 * root (revealSites). */
static int reveal_sites(struct agent *a, int *wait)
{
    chain_arb_replay rp;
    chain_receipt r;
    memset(&r, 0, sizeof r);
    int rv = ensure_sites(a, &rp);
    if (!rv)
        rv = chain_arb_reveal_sites(&a->s->arb, &a->s->txm, game_of(a->o), chain_merkle_root(a->sites.tree), &r);
    if (rv == OVT_EREVERT) {
        agent_log(a, "refused", NULL, "revealSites refused (%s); re-reading the game", ovt_errmsg());
        rv = 0;
    } else if (!rv) {
        char tx[67], root[67];
        chain_hash_hex(tx, &r.tx_hash);
        chain_hash_hex(root, chain_merkle_root(a->sites.tree));
        agent_log(a, "sites_revealed", json_pack("{s:s, s:s, s:I}", "tx", tx, "sites", root, "gas",
                                                 (json_int_t)r.gas_used),
                  "site root %s revealed in tx %s", root, tx);
        rv = record_sent(a, "reveal-sites", 0, &r.tx_hash);
        *wait = 0;
    }
    chain_receipt_free(&r);
    return rv;
}

/* --- the narrowing (levels 2, 3 and 4) */

static const char *narrow_move_name(chain_narrow_move_kind k)
{
    return k == CHAIN_NARROW_MOVE_POST      ? "post-trace"
           : k == CHAIN_NARROW_MOVE_DESCEND ? "descend"
           : k == CHAIN_NARROW_MOVE_REVEAL  ? "reveal-record"
           : k == CHAIN_NARROW_MOVE_COMPARE ? "compare-states"
           : k == CHAIN_NARROW_MOVE_POST_CHUNKS ? "post-chunks"
           : k == CHAIN_NARROW_MOVE_POST_ELEMENTS ? "post-elements"
                                            : "none";
}

/* Once the narrowing ended at a block of a site's output: that block's
 * package, named by the leaf hash this party claims for it; at level 4
 * (stage Chunks) the package of the chunk found, named by the party's
 * chain leaf there. */
static int narrow_upload(struct agent *a, const chain_narrow_game *ng)
{
    const party_agent_opts *o = a->o;
    const chain_narrow_side *own = o->is_trainer ? &ng->trainer_side : &ng->auditor_side;
    uint8_t *buf = NULL;
    size_t len = 0;
    bool chunks = ng->stage == CHAIN_NARROW_STAGE_CHUNKS; /* level 4: the chunk's package, named by its chain leaf */
    bool element = ng->outcome == CHAIN_NARROW_NARROWED && ng->stage == CHAIN_NARROW_STAGE_ELEMENTS; /* an element:
                                                                      its own package, named by its element leaf */
    int rv = chunks    ? party_narrow_pack_chunk(&a->narrow, ng->item, ng->block, ng->chunk, &buf, &len)
             : element ? party_narrow_pack_element(&a->narrow, ng->item, ng->block, ng->chunk, &buf, &len)
                       : party_narrow_pack(&a->narrow, ng->item, ng->block, o->forge_block_entries, &buf, &len);
    if (!rv)
        rv = store_put_block(o->store, &own->node, buf, len);
    free(buf);
    char claim[67];
    chain_hash_hex(claim, &own->node);
    if (rv && chunks)
        return ovt_fail_wrap(rv, "the package of chunk %llu of block %llu of site %llu", (unsigned long long)ng->chunk,
                             (unsigned long long)ng->block, (unsigned long long)ng->item);
    if (rv)
        return ovt_fail_wrap(rv, "the package of block %llu of site %llu", (unsigned long long)ng->block,
                             (unsigned long long)ng->item);
    if (chunks) {
        agent_log(a, "block_published",
                  json_pack("{s:I, s:I, s:I, s:I, s:s, s:I}", "step", (json_int_t)ng->step, "site",
                            (json_int_t)ng->item, "block", (json_int_t)ng->block, "chunk", (json_int_t)ng->chunk,
                            "claim", claim, "bytes", (json_int_t)len),
                  "package of step %llu, site %llu, block %llu, chunk %llu (%zu bytes) published as block/%s",
                  (unsigned long long)ng->step, (unsigned long long)ng->item, (unsigned long long)ng->block,
                  (unsigned long long)ng->chunk, len, claim);
        return 0;
    }
    agent_log(a, "block_published",
              json_pack("{s:I, s:I, s:I, s:s, s:I}", "step", (json_int_t)ng->step, "site", (json_int_t)ng->item, "block",
                        (json_int_t)ng->block, "claim", claim, "bytes", (json_int_t)len),
              "package of step %llu, site %llu, block %llu (%zu bytes) published as block/%s",
              (unsigned long long)ng->step, (unsigned long long)ng->item, (unsigned long long)ng->block, len, claim);
    return 0;
}

/* One turn of the narrowing of the game, which awaits the verdict on step
 * g->index: *acted when a transaction was sent. Failures that a later turn
 * may mend are logged and retried; a step this party cannot re-execute ends
 * its part (the arbiter then rules on what the chain shows). */
static int narrow_turn(struct agent *a, const chain_arb_game *g, uint64_t now, int *acted)
{
    const party_agent_opts *o = a->o;
    chain_narrow n = {.rpc = a->s->arb.rpc, .address = *o->narrow, .chain_id = a->s->arb.chain_id};
    chain_narrow_game ng;
    *acted = 0;
    int rv = chain_narrow_get(&n, game_of(o), NULL, &ng);
    if (rv)
        return rv;
    if (ng.phase == CHAIN_NARROW_PHASE_ENDED) {
        bool block_due = chain_narrow_ends_on_block(ng.outcome);
        if (block_due && a->narrow_loaded && !a->narrow_uploaded && o->withhold_block) {
            agent_log(a, "withhold", json_pack("{s:I}", "block", (json_int_t)ng.block),
                      "not publishing the package of block %llu (--withhold-block)", (unsigned long long)ng.block);
            a->narrow_uploaded = true;
        } else if (block_due && a->narrow_loaded && !a->narrow_uploaded && o->store) {
            if ((rv = narrow_upload(a, &ng))) {
                /* an op the block engine does not re-execute can never be packed: said once */
                bool never = rv == OVT_EINVAL;
                agent_log(a, "block_publish_failed", NULL, "%s%s", ovt_errmsg(),
                          never ? " (the arbiters rule on the whole step)" : "; trying again");
                a->narrow_uploaded = never;
                a->narrow_over = never;
                return 0;
            }
            a->narrow_uploaded = true;
        }
        a->narrow_over = true;
        return 0;
    }
    if (!a->narrow_loaded) {
        if (g->index == 0 || g->index >= a->hist.table.count) {
            a->narrow_over = true;
            return 0;
        }
        agent_log(a, "narrow_trace", json_pack("{s:I}", "step", (json_int_t)g->index),
                  "re-executing step %llu with its trace for the narrowing", (unsigned long long)g->index);
        trn_fault fault;
        if (o->narrow_fault) {
            fault = *o->narrow_fault;
            fault.step = g->index;
        }
        rv = party_narrow_load(&a->narrow, o->narrow_dir ? o->narrow_dir : o->run_dir,
                               o->narrow_data ? o->narrow_data : o->data_path, g->index,
                               &a->hist.table.steps[g->index], o->narrow_fault ? &fault : NULL);
        if (rv) {
            agent_log(a, "narrow_unplayable", NULL, "cannot play the narrowing of step %llu: %s",
                      (unsigned long long)g->index, ovt_errmsg());
            a->narrow_over = true;
            return 0;
        }
        a->narrow_loaded = true;
        a->narrow.forge_chain = o->narrow_forge_chain;
    }
    chain_narrow_party party = party_narrow_party(&a->narrow, o->is_trainer, ng.moved == 0);
    if (o->narrow_no_chain) {
        party.chunk_leaves = NULL; /* a party without level 4: it posts no chain */
        if (ng.stage == CHAIN_NARROW_STAGE_CHUNKS && !a->narrow_said_no_chain) {
            agent_log(a, "narrow_no_chain", json_pack("{s:I}", "block", (json_int_t)ng.block),
                      "not posting the chunk chain of block %llu of site %llu (--narrow-no-chain)",
                      (unsigned long long)ng.block, (unsigned long long)ng.item);
            a->narrow_said_no_chain = true;
        }
    }
    chain_narrow_move mv;
    chain_receipt r;
    memset(&r, 0, sizeof r);
    bool had_chain = a->narrow.has_chain;
    if ((rv = chain_narrow_plan_move(&mv, &ng, &party)))
        return rv;
    if (!had_chain && a->narrow.has_chain && a->narrow.chain_differs)
        agent_log(a, "chunk_chain_differs",
                  json_pack("{s:I, s:I, s:I}", "step", (json_int_t)ng.step, "site", (json_int_t)ng.item, "block",
                            (json_int_t)ng.block),
                  "WARNING: the canonical chunk chain of step %llu, site %llu, block %llu ends in another leaf "
                  "than this party's own output: its output of that block is wrong, and it will lose level 4",
                  (unsigned long long)ng.step, (unsigned long long)ng.item, (unsigned long long)ng.block);
    const char *what = narrow_move_name(mv.kind);
    if (mv.kind != CHAIN_NARROW_MOVE_NONE) {
        rv = chain_narrow_send_move(&n, &a->s->txm, game_of(o), &party, &mv, &r);
    } else if (ng.phase != CHAIN_NARROW_PHASE_NONE && ng.deadline && now > ng.deadline &&
               !(o->narrow_no_chain && ng.stage == CHAIN_NARROW_STAGE_CHUNKS)) {
        /* (--narrow-no-chain: the silent party leaves the timeout it loses to the other) */
        what = "narrow-timeout";
        rv = chain_narrow_timeout(&n, &a->s->txm, game_of(o), &r);
    } else {
        return 0;
    }
    if (rv == OVT_EREVERT) {
        agent_log(a, "refused", NULL, "%s of round %u refused (%s); re-reading the narrowing", what, mv.round,
                  ovt_errmsg());
        chain_receipt_free(&r);
        return 0;
    }
    if (!rv) {
        char tx[67];
        chain_hash_hex(tx, &r.tx_hash);
        agent_log(a, "narrow_moved",
                  json_pack("{s:s, s:i, s:I, s:I, s:s}", "move", what, "round", (int)mv.round, "block",
                            (json_int_t)r.block_number, "gas", (json_int_t)r.gas_used, "tx", tx),
                  "%s round %u in tx %s", what, mv.round, tx);
        rv = record_sent(a, what, mv.round, &r.tx_hash);
        *acted = 1;
    }
    chain_receipt_free(&r);
    return rv;
}

/* One turn: read, then at most one action. *done when settled; *wait is
 * whether to sleep before the next turn. */
static int turn(struct agent *a, chain_arb_outcome *outcome, int *done, int *wait)
{
    const party_agent_opts *o = a->o;
    chain_arb_game g;
    uint64_t block, now;
    *done = 0;
    *wait = 1;
    int rv = read_chain(a, &g, &block, &now);
    if (rv)
        return rv;
    if (g.phase == CHAIN_ARB_PHASE_SETTLED) {
        *outcome = g.outcome;
        *done = 1;
        json_object_set_new(a->state, "outcome", json_string(chain_arb_outcome_name(g.outcome)));
        return save_state(a);
    }
    int published = json_is_true(json_object_get(a->state, "published"));
    if (o->is_trainer && g.phase >= CHAIN_ARB_PHASE_REVEALING && !published) {
        if (o->withhold || !o->store) {
            agent_log(a, "withhold", json_pack("{s:I}", "step", (json_int_t)g.index),
                      "not publishing the inputs of step %llu (%s)", (unsigned long long)g.index,
                      o->withhold ? "--withhold" : "no --store");
        } else if ((rv = publish_inputs(a, g.index))) {
            /* Keep playing (the reveal is still due); try again next turn. */
            agent_log(a, "publish_failed", json_pack("{s:I}", "step", (json_int_t)g.index),
                      "publishing the inputs of step %llu failed: %s", (unsigned long long)g.index, ovt_errmsg());
            published = -1;
        } else {
            agent_log(a, "published", json_pack("{s:I, s:s}", "step", (json_int_t)g.index, "store",
                                                store_url_of(o->store)),
                      "inputs of step %llu published to %s", (unsigned long long)g.index, store_url_of(o->store));
        }
        if (published == 0) {
            json_object_set_new(a->state, "published", json_true());
            if ((rv = save_state(a)))
                return rv;
        }
    }
    if (g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && o->narrow && !a->narrow_over) {
        int acted = 0;
        if ((rv = narrow_turn(a, &g, now, &acted)) || acted) {
            *wait = !acted;
            return rv;
        }
    }
    chain_arb_move mv;
    unsigned both = CHAIN_ARB_FLAG_TRAINER | CHAIN_ARB_FLAG_AUDITOR;
    if (o->is_trainer && g.phase == CHAIN_ARB_PHASE_COMMITTING && (g.flags & CHAIN_ARB_FLAG_REPLAY) &&
        (g.flags & both) == both && now <= g.deadline) {
        return reveal_sites(a, wait);
    } else if (chain_arb_is_replay_dispute(&g)) {
        chain_arb_replay rp;
        if ((rv = ensure_sites(a, &rp)) ||
            (rv = chain_arb_plan_site_move(&mv, &o->run_id, &g, &rp, o->is_trainer, a->sites.tree, a->sites.hash,
                                           a->hist.tree, preimage_of, &a->hist)))
            return rv;
    } else if (g.phase == CHAIN_ARB_PHASE_BISECTING || g.phase == CHAIN_ARB_PHASE_REVEALING) {
        if ((rv = chain_arb_plan_move(&mv, &o->run_id, &g, o->is_trainer, a->hist.tree, preimage_of, &a->hist)))
            return rv;
    } else {
        mv.kind = CHAIN_ARB_MOVE_NONE;
    }
    chain_receipt r;
    memset(&r, 0, sizeof r);
    if (mv.kind != CHAIN_ARB_MOVE_NONE) {
        rv = chain_arb_send_move(&a->s->arb, &a->s->txm, game_of(o), &mv, &r);
        if (rv == OVT_EREVERT) {
            agent_log(a, "refused", NULL, "%s of round %u refused (%s); re-reading the game", move_name(mv.kind),
                      mv.round, ovt_errmsg());
            chain_receipt_free(&r);
            return 0;
        }
        if (!rv) {
            json_t *f = json_pack("{s:s, s:i, s:I, s:I}", "move", move_name(mv.kind), "round", (int)mv.round, "block",
                                  (json_int_t)r.block_number, "gas", (json_int_t)r.gas_used);
            char tx[67];
            chain_hash_hex(tx, &r.tx_hash);
            json_object_set_new(f, "tx", json_string(tx));
            if (mv.kind == CHAIN_ARB_MOVE_REVEAL || mv.kind == CHAIN_ARB_MOVE_REVEAL_SITE)
                json_object_set_new(f, "step", json_integer((json_int_t)mv.step));
            agent_log(a, "moved", f, "%s round %u in tx %s", move_name(mv.kind), mv.round, tx);
            rv = record_sent(a, move_name(mv.kind), mv.round, &r.tx_hash);
            *wait = 0;
        }
        chain_receipt_free(&r);
        return rv;
    }
    if (g.deadline && now > g.deadline) {
        rv = chain_arb_timeout(&a->s->arb, &a->s->txm, game_of(o), &r);
        if (rv == OVT_EREVERT) {
            chain_receipt_free(&r);
            return 0; /* not due yet by the contract's clock, or claimed by someone else */
        }
        if (!rv) {
            char tx[67];
            chain_hash_hex(tx, &r.tx_hash);
            agent_log(a, "timeout", json_pack("{s:s, s:s}", "tx", tx, "phase", chain_arb_phase_name(g.phase)),
                      "claimed the timeout of phase %s (deadline %llu passed) in tx %s",
                      chain_arb_phase_name(g.phase), (unsigned long long)g.deadline, tx);
            rv = record_sent(a, "timeout", g.round, &r.tx_hash);
            *wait = 0;
        }
        chain_receipt_free(&r);
        return rv;
    }
    return 0;
}

/* --- one game at a time, for a loop of many (agent.h) */

struct party_game {
    struct agent a;
    party_agent_opts o;
};

int party_game_open(party_game **out, chain_session *s, const party_agent_opts *o)
{
    *out = NULL;
    party_game *g = calloc(1, sizeof *g);
    if (!g)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    g->o = *o;
    g->a.s = s;
    g->a.o = &g->o;
    int rv = party_history_load(&g->a.hist, o->run_dir, &o->run_id);
    if (!rv)
        rv = load_state(&g->a);
    if (rv) {
        party_game_free(g);
        return rv;
    }
    *out = g;
    return 0;
}

int party_game_turn(party_game *g, chain_arb_outcome *outcome, int *done, int *wait)
{
    return turn(&g->a, outcome, done, wait);
}

void party_game_free(party_game *g)
{
    if (!g)
        return;
    party_history_free(&g->a.hist);
    party_sites_free(&g->a.sites);
    party_narrow_free(&g->a.narrow);
    json_decref(g->a.state);
    free(g);
}

/* --- the trainer's defence of its root in the run's challenges */

#define PARTY_MAX_CHALLENGES 32

struct defence {
    struct agent game[PARTY_MAX_CHALLENGES];
    party_agent_opts opts[PARTY_MAX_CHALLENGES];
    int done[PARTY_MAX_CHALLENGES];
    size_t n;
    uint64_t next_block; /* ChallengeOpened read up to here */
    uint64_t closes;     /* the challenge window's last second (0: not known yet) */
};

/* A new challenge: its own agent, history and state folder. */
static int defend_add(struct agent *own, struct defence *d, const ovt_hash *challenge_id)
{
    for (size_t k = 0; k < d->n; k++)
        if (!memcmp(d->opts[k].game_id.b, challenge_id->b, 32))
            return 0;
    if (d->n == PARTY_MAX_CHALLENGES)
        return ovt_fail(OVT_EINVAL, "more than %d challenges of one run", PARTY_MAX_CHALLENGES);
    struct agent *a = &d->game[d->n];
    d->opts[d->n] = *own->o;
    d->opts[d->n].game_id = *challenge_id;
    memset(a, 0, sizeof *a);
    a->s = own->s;
    a->o = &d->opts[d->n];
    int rv = party_history_load(&a->hist, a->o->run_dir, &a->o->run_id);
    if (rv || (rv = load_state(a)))
        return rv;
    char id[67];
    chain_hash_hex(id, challenge_id);
    agent_log(own, "challenge", json_pack("{s:s}", "challenge_id", id), "defending the root in challenge %s", id);
    d->n++;
    return 0;
}

/* Reads the run's new events: challenges to defend, and the trainer's own
 * commit, which opens the challenge window for commitTimeout. */
static int defend_scan(struct agent *own, struct defence *d)
{
    uint64_t head;
    int rv = chain_rpc_block_number(own->s->rpc, &head);
    if (rv || head < d->next_block)
        return rv;
    chain_arb_event *ev = NULL;
    size_t n = 0;
    if ((rv = chain_arb_get_events(&own->s->arb, &own->o->run_id, d->next_block, head, &ev, &n)))
        return rv;
    for (size_t i = 0; i < n && !rv; i++) {
        if (ev[i].kind == CHAIN_ARB_EV_CHALLENGE_OPENED) {
            rv = defend_add(own, d, &ev[i].u.challenge_opened.challenge_id);
        } else if (ev[i].kind == CHAIN_ARB_EV_COMMITTED &&
                   chain_address_eq(&ev[i].u.committed.party, &own->s->txm.from)) {
            chain_arb_params p;
            char tag[32];
            uint64_t at;
            snprintf(tag, sizeof tag, "0x%llx", (unsigned long long)ev[i].block_number);
            if (!(rv = chain_arb_get_run(&own->s->arb, &own->o->run_id, NULL, &p)) &&
                !(rv = block_timestamp(own->s->rpc, tag, &at)))
                d->closes = at + p.commit_timeout;
        }
    }
    free(ev);
    if (!rv)
        d->next_block = head + 1;
    return rv;
}

/* One turn of every open challenge; *finished once every challenge is
 * settled and the window has closed by the chain's clock. */
static int defend_turn(struct agent *own, struct defence *d, int *finished)
{
    *finished = 0;
    int rv = defend_scan(own, d);
    for (size_t k = 0; k < d->n && !rv; k++) {
        if (d->done[k])
            continue;
        chain_arb_outcome o;
        int wait;
        if (!(rv = turn(&d->game[k], &o, &d->done[k], &wait)) && d->done[k]) {
            char id[67];
            chain_hash_hex(id, &d->opts[k].game_id);
            agent_log(own, "challenge_settled", json_pack("{s:s, s:s}", "challenge_id", id, "outcome",
                                                          chain_arb_outcome_name(o)),
                      "challenge %s settled: %s", id, chain_arb_outcome_name(o));
        }
    }
    uint64_t now;
    if (rv || !d->closes || (rv = block_timestamp(own->s->rpc, "latest", &now)) || now <= d->closes)
        return rv;
    int open = 0;
    for (size_t k = 0; k < d->n; k++)
        open += !d->done[k];
    *finished = !open;
    return 0;
}

static void defend_free(struct defence *d)
{
    for (size_t k = 0; d && k < d->n; k++) {
        party_history_free(&d->game[k].hist);
        party_narrow_free(&d->game[k].narrow);
        json_decref(d->game[k].state);
    }
    free(d);
}

int party_agent_run(chain_session *s, const party_agent_opts *o, chain_arb_outcome *outcome)
{
    struct agent a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.o = o;
    *outcome = CHAIN_ARB_NONE;
    struct defence *d = NULL;
    int own_done = 0, defended = 0;
    int rv = party_history_load(&a.hist, o->run_dir, &o->run_id);
    if (!rv && o->defend && o->is_trainer && !(d = calloc(1, sizeof *d)))
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the challenges");
    if (rv || (rv = load_state(&a)))
        goto done;
    char rid[67];
    chain_hash_hex(rid, game_of(o));
    char root[67];
    chain_hash_hex(root, chain_merkle_root(a.hist.tree));
    agent_log(&a, "start", json_pack("{s:s, s:s}", "run_id", rid, "root", root), "playing run %s with root %s", rid,
              root);
    long backoff = o->poll_ms;
    while (!stop_requested) {
        int done = own_done, wait = 1;
        rv = own_done ? 0 : turn(&a, outcome, &done, &wait);
        if (!rv && d)
            rv = defend_turn(&a, d, &defended);
        ovt_metrics_tick(rv == 0);
        if (rv == OVT_EIO || rv == OVT_ETIMEOUT || rv == OVT_ERPC) {
            agent_log(&a, "retry", json_pack("{s:I}", "backoff_ms", (json_int_t)backoff),
                      "the node did not answer (%s); retrying in %ld ms", ovt_errmsg(), backoff);
            sleep_ms(backoff);
            backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
            /* A transaction sent before the failure may be lost with the
             * node's pool: let the node's pending count pick the nonce. */
            s->txm.next_nonce = 0;
            continue;
        }
        if (rv)
            goto done;
        backoff = o->poll_ms;
        if (done && !own_done)
            agent_log(&a, "settled", json_pack("{s:s, s:i}", "outcome", chain_arb_outcome_name(*outcome), "code",
                                               (int)*outcome),
                      "run settled: %s", chain_arb_outcome_name(*outcome));
        own_done = done;
        if (own_done && (!d || defended))
            goto done;
        if (wait)
            sleep_ms(o->poll_ms);
    }
    rv = ovt_fail(OVT_ETIMEOUT, "stopped by a signal before the run was settled");
done:
    defend_free(d);
    party_history_free(&a.hist);
    party_sites_free(&a.sites);
    party_narrow_free(&a.narrow);
    json_decref(a.state);
    return rv;
}

/* The store and dataset the trainer named in its receipt (if any). */
static void receipt_defaults(const char *dir, char *store, char *data, size_t cap)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    if (ovt_path_join(path, sizeof path, dir, "receipt.json") || ovt_read_file(path, &buf, &len, 1 << 20))
        return;
    json_t *j = json_loadb((const char *)buf, len, 0, NULL);
    free(buf);
    const char *s = json_string_value(json_object_get(j, "store"));
    const char *d = json_string_value(json_object_get(j, "data"));
    if (s && strlen(s) < cap)
        strcpy(store, s);
    if (d && strlen(d) < cap)
        strcpy(data, d);
    json_decref(j);
}

int party_agent_play(const party_agent_play_opts *po, chain_arb_outcome *outcome)
{
    party_agent_opts o = po->agent;
    const char *store_url = po->store_url;
    char rstore[4096] = "", rdata[4096] = "";
    if (o.is_trainer) {
        receipt_defaults(o.run_dir, rstore, rdata, sizeof rstore);
        if (!store_url && rstore[0])
            store_url = rstore;
        if (!o.data_path && rdata[0])
            o.data_path = rdata;
    }
    store_ctx *store = NULL;
    chain_session s;
    chain_arb_params terms;
    ovt_httpserve *metrics = NULL;
    ovt_metrics_configure(o.is_trainer ? "trainer" : "auditor", o.poll_ms * 10 > 60000 ? o.poll_ms * 10 : 60000);
    int rv = 0;
    if (po->metrics_addr)
        rv = ovt_metrics_serve(&metrics, po->metrics_addr);
    if (!rv && store_url)
        rv = store_open(&store, store_url);
    o.store = store;
    if (!rv && !(rv = chain_session_open(&s, po->chain, 1))) {
        party_agent_install_signals();
        /* The run's terms against this party's policy before any move. */
        if (o.narrow) /* a --narrow that cannot narrow this contract's games: said now, not when it is needed */
            rv = chain_narrow_check_bound(&s.arb, o.narrow);
        if (!rv && !(rv = chain_arb_get_run(&s.arb, &o.run_id, NULL, &terms)))
            rv = party_policy_check(po->policy, &terms, s.arb.chain_id, &s.arb.address, o.is_trainer);
        if (!rv)
            rv = party_agent_run(&s, &o, outcome);
        chain_session_close(&s);
    }
    store_close(store);
    ovt_httpserve_stop(metrics);
    return rv;
}
