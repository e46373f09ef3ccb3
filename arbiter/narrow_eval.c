/* The arbiter's verdict from the narrowing (see narrow_eval.h). */
#include "arbiter/narrow_eval.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block.h"
#include "arbiter/block_chunk.h"
#include "arbiter/block_file.h"
#include "arbiter/evaluate.h"
#include "chain/clock.h"
#include "common/tree.h"
#include "trainer/config.h"
#include "trainer/layout.h"
#include "trainer/rundata.h"
#include "trainer/trace.h"
#include "trainer/train.h"

#define MAX_CONFIG_OBJECT 4096
#define MAX_DATASET ((size_t)1 << 36)
#define MAX_PACKAGE ((size_t)4 << 30)

static void say(char *note, size_t cap, const char *fmt, ...) OVT_PRINTF(3, 4);

static void say(char *note, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, cap, fmt, ap);
    va_end(ap);
}

/* The batch of step k's arrays, as the trace registers them, with their
 * tree roots: what a package's batch slices must prove against. */
typedef struct {
    char name[TRN_BATCH_ARRAYS][16];
    ovt_hash root[TRN_BATCH_ARRAYS];
    size_t n;
} batch_roots;

static int batch_roots_of(batch_roots *out, store_ctx *store, const chain_arb_params *run,
                          const trn_run_config *rc0, uint64_t k)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    trn_run_config rc = *rc0;
    trn_run_data d;
    trn_step_batch b;
    int rv = store_get(store, &run->dataset_hash, MAX_DATASET, &buf, &len);
    if (rv)
        return rv;
    rv = trn_run_data_parse(&d, buf, len, &rc, 0, "the run's dataset");
    free(buf);
    if (rv)
        return rv;
    if (!(rv = trn_step_batch_get(&b, &d, &rc, k))) {
        trn_batch_array arr[TRN_BATCH_ARRAYS];
        size_t n = trn_batch_arrays(arr, &b.view, rc.model.in_dim);
        for (size_t i = 0; i < n && !rv; i++) {
            snprintf(out->name[out->n], sizeof out->name[out->n], "%s", arr[i].name);
            rv = ovt_tree_root_le32(&out->root[out->n], arr[i].words, arr[i].n * 4);
            out->n++;
        }
        trn_step_batch_free(&b);
    }
    trn_run_data_free(&d);
    return rv;
}

/* Where a state slice's root must come from: its index in state K-1's
 * 3 * ntensors roots ("params/wte": section 0, tensor wte). */
static int state_index(const trn_layout *l, const char *name, size_t *index)
{
    static const char *const section[3] = {"params/", "m/", "v/"};
    for (size_t s = 0; s < 3; s++) {
        size_t len = strlen(section[s]);
        if (strncmp(name, section[s], len))
            continue;
        for (size_t i = 0; i < l->count; i++)
            if (!strcmp(name + len, l->t[i].name)) {
                *index = s * l->count + i;
                return 0;
            }
    }
    return -1;
}

/* Whether the game ended on one element (level 4 of an element op): the
 * packages are element packages. (ElementsAgree ends on the whole leaf.) */
static bool on_element(const chain_narrow_game *ng)
{
    return ng->stage == CHAIN_NARROW_STAGE_ELEMENTS && ng->outcome == CHAIN_NARROW_NARROWED;
}

/* The leaf a package's claim must be: the party's level-3 leaf (on an
 * element kept as block_leaf, the node being the element's). */
static const ovt_hash *claimed_leaf(const chain_narrow_game *ng, const chain_narrow_side *side)
{
    return on_element(ng) ? &side->block_leaf : &side->node;
}

/* What a package's recomputation is compared with on chain: the block's
 * leaf hash, or at the element stage the element's leaf. */
static void recomputed_node(ovt_hash *out, const chain_narrow_game *ng, const arb_block_result *r)
{
    if (on_element(ng))
        chain_narrow_element_leaves(out, r->values, 1);
    else
        *out = r->leaf;
}

/* The package version the narrowing's end needs: a chunk package at stage
 * Chunks, an element package on one element, else the whole leaf's. */
static uint32_t package_version(const chain_narrow_game *ng)
{
    if (ng->stage == CHAIN_NARROW_STAGE_CHUNKS)
        return ARB_BLOCK_VERSION_CHUNK;
    return on_element(ng) ? ARB_BLOCK_VERSION_ELEMENT : ARB_BLOCK_VERSION;
}

static const char *version_name(uint32_t version)
{
    return version == ARB_BLOCK_VERSION_CHUNK     ? "chunk"
           : version == ARB_BLOCK_VERSION_ELEMENT ? "element"
                                                  : "block";
}

/* Whether package p (fetched as the claim of `side`) is bound to the chain:
 * "" when it is, else why not (into why). */
static void bound(char *why, size_t cap, const arb_block_package *p, const chain_narrow_game *ng,
                  const chain_narrow_side *side, const ovt_hash *config_hash, const trn_layout *layout,
                  const chain_narrow_evidence *ev, const batch_roots *br)
{
    ovt_hash h;
    trn_config_hash(&h, &p->config);
    why[0] = '\0';
    bool chunks = ng->stage == CHAIN_NARROW_STAGE_CHUNKS;
    if (memcmp(h.b, config_hash->b, 32))
        say(why, cap, "its run config is not the run's");
    else if (memcmp(p->trace_root.b, side->trace_root.b, 32))
        say(why, cap, "it is bound to another trace root than the party posted");
    else if (p->version != package_version(ng))
        say(why, cap, "it is a %s package, the narrowing ended at a %s", version_name(p->version),
            version_name(package_version(ng)));
    else if (!chunks && memcmp(p->claim.b, claimed_leaf(ng, side)->b, 32))
        say(why, cap, "its claim is not the leaf the party's narrowing ended on");
    else if (chunks && memcmp(p->claim.b, side->block_leaf.b, 32))
        say(why, cap, "its claim is not the party's level-3 leaf");
    else if (chunks && (memcmp(p->chunk.root.b, side->chain_root.b, 32) || p->chunk.leaves != side->chunks))
        say(why, cap, "its chain is not the one the party posted (root or leaf count)");
    else if (chunks && (p->chunk.chunk != ng->chunk || memcmp(p->chunk.node.b, side->node.b, 32)))
        say(why, cap, "it is of another chunk, or another node there, than the narrowing ended on");
    else if (!chunks && (on_element(ng) ? p->task.span_count != 1 ||
                                              p->task.span_first != ng->block * CHAIN_NARROW_LEAF_ELEMENTS + ng->chunk
                                        : p->task.span_count != 0))
        say(why, cap, "it is not the package of the %s the narrowing ended on",
            on_element(ng) ? "element" : "whole block");
    else if (p->task.step != ng->step || p->task.site != ng->item || p->task.leaf != ng->block ||
             p->nrecords != side->sites)
        say(why, cap, "it is of another step, site, block or trace length than the narrowing's");
    for (size_t i = 0; !why[0] && i < p->task.nslices; i++) {
        const arb_block_slice *s = &p->task.slices[i];
        size_t at;
        if (s->kind == KRN_TRACE_STATE) {
            if (state_index(layout, s->name, &at) || at >= ev->nprevious)
                say(why, cap, "slice of %s: no such state tensor", s->name);
            else if (memcmp(s->root.b, ev->previous_roots[at].b, 32))
                say(why, cap, "slice of %s: its root is not state K-1's (PreviousRoots)", s->name);
        } else if (s->kind == KRN_TRACE_BATCH) {
            int found = 0;
            for (size_t b = 0; b < br->n; b++)
                if (!strcmp(br->name[b], s->name)) {
                    found = 1;
                    if (memcmp(s->root.b, br->root[b].b, 32))
                        say(why, cap, "slice of %s: its root is not batch K's", s->name);
                }
            if (!found && !why[0])
                say(why, cap, "slice of %s: batch K has no such array", s->name);
        }
    }
}

/* The trainer's committed rounding log of step K, the narrowing's logHash
 * (both parties' leaves K carry it, else the game ended InputsDiffer):
 * 0 and *log, or why not (note) with *log NULL. Negative only for memory. */
static int trainer_log(krn_rlog **log, store_ctx *store, const chain_narrow_game *ng, char *note, size_t cap)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    *log = krn_rlog_new();
    if (*log == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for a rounding log");
    int rv = arb_log_bytes(&buf, &len, store, &ng->log_hash, ng->step);
    if (rv == 0)
        rv = krn_rlog_decode(*log, buf, len);
    free(buf);
    if (rv == 0 && krn_rlog_step(*log) != ng->step)
        rv = ovt_fail(OVT_EFORMAT, "it is the log of step %llu", (unsigned long long)krn_rlog_step(*log));
    if (rv == 0)
        return 0;
    krn_rlog_free(*log);
    *log = NULL;
    if (rv == OVT_ENOMEM)
        return rv;
    say(note, cap, "the trainer's rounding log of step %llu (the narrowing's logHash) could not be had (%s): the "
                   "whole step",
        (unsigned long long)ng->step, ovt_errmsg());
    ovt_err_clear();
    return 0;
}

/* A sharded run's narrowed site names its shard (docs/arbiter.md, "Which
 * shard"): the first site the parties' traces disagree on lies in shard
 * site / P's forward and backward when below S*P, in no shard's after
 * (grad.sum, loss.mean, the optimizer). Only when the trainer's block is
 * not the recomputed one, and only a finding: a count that fails names
 * none. */
static void name_shard(arb_eval *out, const trn_run_config *rc, uint64_t site, bool trainer_right, char *shard,
                       size_t cap)
{
    uint32_t S = trn_config_shards(rc), P = 0;
    out->shards = S;
    shard[0] = '\0';
    if (S < 2 || trainer_right)
        return;
    if (trn_shard_sites(rc, &P)) {
        snprintf(shard, cap, "; no shard named (%s)", ovt_errmsg());
        ovt_err_clear();
    } else if (site < (uint64_t)S * P) {
        out->shard_differs = (int64_t)(site / P);
        out->shard_from_site = true;
        snprintf(shard, cap, "; shard %lld of %u (%u sites each)", (long long)out->shard_differs, S, P);
    } else {
        snprintf(shard, cap, "; after the %u shards' sites (%u each): no shard's", S, P);
    }
}

static int narrowed(arb_narrow_result *res, arb_eval *out, arb_narrow_finding *found, store_ctx *store,
                    const chain_narrow *n, const ovt_hash *game_id, const chain_narrow_game *ng,
                    const chain_arb_params *run, const chain_arb_game *g, const trn_run_config *rc,
                    uint64_t from_block, uint64_t to_block, uint64_t log_window, int threads, char *note,
                    size_t cap)
{
    trn_layout layout;
    chain_narrow_evidence ev;
    batch_roots br;
    int rv = trn_layout_build(&layout, &rc->model);
    if (rv)
        return rv;
    if ((rv = chain_narrow_get_evidence(n, game_id, ng, from_block, to_block, log_window, &ev)))
        return rv;
    found->log_window = ev.window;
    char events[160] = "";
    if (log_window && ev.window < log_window)
        snprintf(events, sizeof events, "; the node refused eth_getLogs over %llu blocks: the narrowing's events "
                                        "were read in windows of %llu",
                 (unsigned long long)log_window, (unsigned long long)ev.window);
    if (ev.nprevious != 3 * layout.count) {
        say(note, cap, "the narrowing's PreviousRoots were not found (%zu roots, blocks %llu..%llu)%s", ev.nprevious,
            (unsigned long long)from_block, (unsigned long long)to_block, events);
        chain_narrow_evidence_free(&ev);
        return 0;
    }
    if ((rv = batch_roots_of(&br, store, run, rc, ng->step))) {
        say(note, cap, "batch %llu could not be rebuilt from the run's dataset: %s", (unsigned long long)ng->step,
            ovt_errmsg());
        chain_narrow_evidence_free(&ev);
        return rv < 0 && rv != OVT_ENOTFOUND && rv != OVT_EIO && rv != OVT_ECRYPTO ? rv : 0;
    }
    krn_rlog *log;
    if ((rv = trainer_log(&log, store, ng, note, cap)) < 0 || log == NULL) {
        chain_narrow_evidence_free(&ev);
        return rv;
    }
    const chain_narrow_side *sides[2] = {&ng->trainer_side, &ng->auditor_side};
    static const char *const who[2] = {"trainer", "auditor"};
    ovt_hash leaf[2];
    int have[2] = {0, 0}, replaced[2] = {0, 0}, fraud[2] = {0, 0};
    char why[2][256] = {"", ""}, fraud_msg[512] = "";
    long long t0 = chain_now_ms();
    for (int k = 0; k < 2; k++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        arb_block_package p;
        arb_block_result r;
        rv = store_get_block(store, &sides[k]->node, MAX_PACKAGE, &buf, &len);
        if (rv) {
            say(why[k], sizeof why[k], "no package (%s)", ovt_errmsg());
            ovt_err_clear();
            continue;
        }
        rv = arb_block_package_read(&p, buf, len);
        free(buf);
        if (rv) {
            say(why[k], sizeof why[k], "a malformed package (%s)", ovt_errmsg());
            ovt_err_clear();
            continue;
        }
        bound(why[k], sizeof why[k], &p, ng, sides[k], &run->config_hash, &layout, &ev, &br);
        bool differed = false, chunks = ng->stage == CHAIN_NARROW_STAGE_CHUNKS;
        /* the trainer's committed entries replace the package's: a block's or
         * an element's, and at level 4 the chain's last step's (chunk C), the
         * only chunk that rounds */
        if (!why[k][0] && (!chunks || p.chunk.chunk + 1 == p.chunk.leaves) &&
            (rv = arb_block_entries_from_log(&p.task, &p.own, log, &differed)) < 0) {
            say(why[k], sizeof why[k], "refused (%s)", ovt_errmsg());
            ovt_err_clear();
        }
        replaced[k] = differed;
        if (!why[k][0] && chunks) {
            /* level 4: chain leaf ng->chunk from P_{chunk-1} and the chunk's rows (or the final step) */
            p.task.threads = threads;
            if ((rv = arb_chunk_package_run(&p, &leaf[k], NULL)) == 0) {
                have[k] = 1;
            } else {
                say(why[k], sizeof why[k], "refused (%s)", ovt_errmsg());
                ovt_err_clear();
            }
        } else if (!why[k][0]) {
            p.task.threads = threads;
            if ((rv = arb_block_run(&p.task, &r)) == 0) {
                recomputed_node(&leaf[k], ng, &r);
                have[k] = 1;
                arb_block_result_free(&r);
            } else if (rv == OVT_EFRAUD) { /* the trainer's committed entries fail the strict rule */
                fraud[k] = 1;
                snprintf(fraud_msg, sizeof fraud_msg, "%s", ovt_errmsg());
                say(why[k], sizeof why[k], "the trainer's log is fraudulent there");
                ovt_err_clear();
            } else {
                say(why[k], sizeof why[k], "refused (%s)", ovt_errmsg());
                ovt_err_clear();
            }
        }
        arb_block_package_free(&p);
    }
    found->seconds = (double)(chain_now_ms() - t0) / 1000.0;
    chain_narrow_evidence_free(&ev);
    krn_rlog_free(log);
    found->entries_replaced = replaced[0] + replaced[1];
    found->packages = have[0] + have[1] + fraud[0] + fraud[1];
    if (!have[0] && !have[1] && (fraud[0] || fraud[1])) {
        /* the block, from proven inputs, with the trainer's committed log
         * entries fails the strict rule: the whole step's verdict for a
         * fraudulent log (FraudulentLog, logHash_K), from the block */
        memset(out, 0, sizeof *out);
        arb_basis_of(&out->basis, g);
        out->exec = ARB_EXEC_FRAUD;
        out->shard_differs = -1;
        say(note, cap, "block %llu of site %llu (%s) re-executed from the %s with the trainer's log: the log is "
                       "fraudulent there: %s%s",
            (unsigned long long)ng->block, (unsigned long long)ng->item, found->op,
            fraud[0] && fraud[1] ? "both packages" : fraud[0] ? "trainer's package" : "auditor's package", fraud_msg,
            events);
        *res = ARB_NARROW_DECIDED;
        return 0;
    }
    if (!have[0] && !have[1]) {
        say(note, cap, "no valid block package: trainer's %s; auditor's %s", why[0], why[1]);
        return 0;
    }
    if (have[0] && have[1] && memcmp(leaf[0].b, leaf[1].b, 32)) {
        say(note, cap, "the two packages give two different blocks");
        return 0;
    }
    ovt_hash block = have[0] ? leaf[0] : leaf[1];
    found->recomputed = block;
    memset(out, 0, sizeof *out);
    arb_basis_of(&out->basis, g);
    out->exec = ARB_EXEC_OK;
    out->shards = 1;
    out->shard_differs = -1;
    if (!memcmp(block.b, ng->trainer_side.node.b, 32))
        out->leaf = g->trainer_node;
    else if (!memcmp(block.b, ng->auditor_side.node.b, 32))
        out->leaf = g->auditor_node;
    else
        out->leaf = block; /* neither: the recomputed block's leaf, neither party's leaf K */
    char shard[160];
    name_shard(out, rc, ng->item, !memcmp(block.b, ng->trainer_side.node.b, 32), shard, sizeof shard);
    int lone = have[0] ? 1 : 0; /* the side without a valid package, when only one has one */
    char entries[160] = "";
    if (replaced[0] || replaced[1])
        snprintf(entries, sizeof entries, "; %s%s log entries differ from the trainer's log: replaced by the log's",
                 replaced[0] && replaced[1] ? "both packages'" : who[replaced[1]],
                 replaced[0] && replaced[1] ? "" : "'s package's");
    char what[160];
    if (ng->stage == CHAIN_NARROW_STAGE_CHUNKS)
        snprintf(what, sizeof what, "chunk %llu of the chain of block %llu", (unsigned long long)ng->chunk,
                 (unsigned long long)ng->block);
    else
        snprintf(what, sizeof what, "block %llu", (unsigned long long)ng->block);
    if (have[0] && have[1])
        say(note, cap, "%s of site %llu (%s) recomputed from both packages with the trainer's log%s%s%s", what,
            (unsigned long long)ng->item, found->op, shard, entries, events);
    else
        say(note, cap, "%s of site %llu (%s) recomputed from the %s's package with the trainer's log%s; the "
                       "%s's: %s%s%s",
            what, (unsigned long long)ng->item, found->op, who[!lone], shard, who[lone], why[lone], entries, events);
    *res = ARB_NARROW_DECIDED;
    return 0;
}

/* Level 4 ended CountsDiffer: the parties' chains have different leaf
 * counts. The right count is ceil(N / 128) + 1, N from the agreed record
 * (revealed at level 2; the records agree apart from their output roots);
 * the party whose count is not that is wrong. Both wrong, or no record:
 * the whole step. */
static int chunk_counts(arb_narrow_result *res, arb_eval *out, const chain_narrow *n, const ovt_hash *game_id,
                        const chain_narrow_game *ng, const chain_arb_game *g, const trn_run_config *rc,
                        uint64_t from_block, uint64_t to_block, uint64_t log_window, char *note, size_t cap)
{
    chain_narrow_evidence ev;
    int rv = chain_narrow_get_evidence(n, game_id, ng, from_block, to_block, log_window, &ev);
    if (rv)
        return rv;
    int k = ev.record[0] ? 0 : 1;
    arb_block_task task = {.config = rc, .step = ng->step, .leaf = ng->block};
    arb_block_read *reads = NULL;
    arb_chunk_info info;
    if (!ev.record[k]) {
        say(note, cap, "the chunk chains' counts differ, and no record was revealed: the whole step");
    } else if (arb_block_record_task(&task, &reads, ev.record[k], ev.record_len[k]) ||
               arb_chunk_info_of(&task, &info)) {
        say(note, cap, "the chunk chains' counts differ, and the record gives no count (%s): the whole step",
            ovt_errmsg());
        ovt_err_clear();
    } else {
        uint64_t want = info.chunks + 1, t = ng->trainer_side.chunks, a = ng->auditor_side.chunks;
        if ((t == want) == (a == want)) {
            say(note, cap, "the chunk chains' counts differ (trainer %llu, auditor %llu) and neither is %llu "
                           "(N = %llu rows): the whole step",
                (unsigned long long)t, (unsigned long long)a, (unsigned long long)want,
                (unsigned long long)info.rows);
        } else {
            memset(out, 0, sizeof *out);
            arb_basis_of(&out->basis, g);
            out->exec = ARB_EXEC_OK;
            out->shards = 1;
            out->shard_differs = -1;
            out->leaf = t == want ? g->trainer_node : g->auditor_node;
            say(note, cap, "the %s's chunk chain has %llu leaves, not the %llu that N = %llu rows make "
                           "(ceil(N / 128) + 1)",
                t == want ? "auditor" : "trainer", (unsigned long long)(t == want ? a : t),
                (unsigned long long)want, (unsigned long long)info.rows);
            *res = ARB_NARROW_DECIDED;
        }
    }
    free(reads);
    chain_narrow_evidence_free(&ev);
    return 0;
}

int arb_narrow_evaluate(arb_narrow_result *res, arb_eval *out, arb_narrow_finding *found, store_ctx *store,
                        const chain_narrow *n, const ovt_hash *game_id, const chain_arb_params *run,
                        const chain_arb_game *g, uint64_t now, uint64_t wait_until, uint64_t *ended_seen,
                        uint32_t package_wait, uint64_t from_block, uint64_t to_block, uint64_t log_window,
                        int threads, char *note, size_t cap)
{
    *res = ARB_NARROW_WHOLE_STEP;
    memset(found, 0, sizeof *found);
    note[0] = '\0';
    chain_narrow_game ng;
    int rv = chain_narrow_get(n, game_id, NULL, &ng);
    if (rv)
        return rv;
    found->outcome = ng.outcome;
    if (ng.phase != CHAIN_NARROW_PHASE_ENDED) {
        if (now < wait_until) {
            *res = ARB_NARROW_WAIT;
            say(note, cap, "the narrowing of step %llu is being played (phase %d)", (unsigned long long)g->index,
                (int)ng.phase);
        } else {
            say(note, cap, "the narrowing did not end in time: the whole step");
        }
        return 0;
    }
    if (!*ended_seen)
        *ended_seen = now;
    if (chain_narrow_ends_on_block(ng.outcome) && now < wait_until && now < *ended_seen + package_wait) {
        int present = 0;
        for (int k = 0; k < 2; k++) {
            uint8_t *pk = NULL;
            size_t pl = 0;
            const ovt_hash *claim = k ? &ng.auditor_side.node : &ng.trainer_side.node;
            if (store_get_block(store, claim, MAX_PACKAGE, &pk, &pl) == 0)
                present++;
            free(pk);
            ovt_err_clear();
        }
        if (present < 2) {
            *res = ARB_NARROW_WAIT;
            if (ng.stage == CHAIN_NARROW_STAGE_CHUNKS)
                say(note, cap, "the narrowing ended at chunk %llu of block %llu of site %llu; waiting for the "
                               "parties' chunk packages (%d of 2 in the store)",
                    (unsigned long long)ng.chunk, (unsigned long long)ng.block, (unsigned long long)ng.item, present);
            else
                say(note, cap, "the narrowing ended at block %llu of site %llu; waiting for the parties' block "
                               "packages (%d of 2 in the store)",
                    (unsigned long long)ng.block, (unsigned long long)ng.item, present);
            return 0;
        }
    }
    if (ng.step != g->index || memcmp(ng.trainer_leaf.b, g->trainer_node.b, 32) ||
        memcmp(ng.auditor_leaf.b, g->auditor_node.b, 32)) {
        say(note, cap, "the narrowing is of other leaves than the game's: the whole step");
        return 0;
    }
    /* only a run with the tree stateHash weighs the narrowing */
    uint8_t *buf = NULL;
    size_t len = 0;
    trn_run_config rc;
    if ((rv = store_get(store, &run->config_hash, MAX_CONFIG_OBJECT, &buf, &len))) {
        say(note, cap, "the run config is not in the store (%s): the whole step", ovt_errmsg());
        ovt_err_clear();
        return 0;
    }
    rv = trn_config_decode(&rc, buf, len);
    free(buf);
    if (rv || rc.state_hash != TRN_STATE_HASH_TREE) {
        say(note, cap, "%s: the whole step", rv ? "the run config does not decode" : "not a tree-stateHash run");
        ovt_err_clear();
        return 0;
    }
    found->site = ng.item;
    found->block = ng.block;
    found->chunked = ng.stage == CHAIN_NARROW_STAGE_CHUNKS && ng.outcome == CHAIN_NARROW_NARROWED;
    found->chunk = found->chunked ? ng.chunk : 0;
    memcpy(found->op, ng.op.b, 32);
    found->op[32] = '\0';
    if (ng.outcome == CHAIN_NARROW_TRAINER_LOST || ng.outcome == CHAIN_NARROW_AUDITOR_LOST) {
        /* A loss by timeout proves nothing: an honest party that cannot trace step K because the
         * other's log is fraudulent there (a fault at an early site) times out too. Only a move its
         * own commitments contradict decides without computing. */
        const char *who = ng.outcome == CHAIN_NARROW_TRAINER_LOST ? "trainer" : "auditor";
        chain_narrow_evidence ev;
        if ((rv = chain_narrow_get_evidence(n, game_id, &ng, from_block, to_block, log_window, &ev)))
            return rv;
        chain_narrow_reason why = ev.lost;
        chain_narrow_evidence_free(&ev);
        if (why == CHAIN_NARROW_REASON_NONE && now < wait_until) { /* the end is newer than the blocks read */
            *res = ARB_NARROW_WAIT;
            say(note, cap, "the %s lost the narrowing; waiting for its Lost event to reach the blocks read", who);
            return 0;
        }
        if (why == CHAIN_NARROW_REASON_TIMEOUT || why == CHAIN_NARROW_REASON_NONE) {
            say(note, cap, "the %s lost the narrowing %s: the whole step", who,
                why == CHAIN_NARROW_REASON_TIMEOUT ? "by timeout, which an honest party unable to trace the "
                                                     "other's step also does"
                                                   : "(its Lost event is not in the blocks read)");
            return 0;
        }
        memset(out, 0, sizeof *out);
        arb_basis_of(&out->basis, g);
        out->exec = ARB_EXEC_OK;
        out->shards = 1;
        out->shard_differs = -1;
        out->leaf = ng.outcome == CHAIN_NARROW_TRAINER_LOST ? g->auditor_node : g->trainer_node;
        say(note, cap, "the %s lost the narrowing: a move its own commitments contradict (reason %d)", who,
            (int)why);
        *res = ARB_NARROW_DECIDED;
        return 0;
    }
    if (ng.outcome == CHAIN_NARROW_COUNTS_DIFFER && ng.stage == CHAIN_NARROW_STAGE_CHUNKS)
        return chunk_counts(res, out, n, game_id, &ng, g, &rc, from_block, to_block, log_window, note, cap);
    if (!chain_narrow_ends_on_block(ng.outcome) || ng.item_stage != CHAIN_NARROW_STAGE_TRACE) {
        say(note, cap, "the narrowing ended without a block of a site (outcome %d): the whole step", (int)ng.outcome);
        return 0;
    }
    return narrowed(res, out, found, store, n, game_id, &ng, run, g, &rc, from_block, to_block, log_window, threads,
                    note, cap);
}
