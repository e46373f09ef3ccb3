/* The one step runner (see runner.h). */
#include "trainer/runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/mem.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "trainer/state_hash.h"
#include "trainer/trace.h"
#include "trainer/workspace.h"

struct trn_runner {
    trn_run_config rc;
    ovt_hash config_hash;
    trn_runner_opts o;
    const trn_run_data *data;
    krn_ctx *ctx;
    trn_workspace *w;      /* steps, or evaluation batches of o.eval_batch */
    trn_workspace *w_rest; /* evaluation: the last, shorter batch (made when first needed) */
    trn_workspace *w_last; /* evaluation: the workspace of the last forward */
    krn_rlog *log;
    trn_state *st;
    krn_trace *trace; /* the next step's recorder (trn_runner_trace_next), or NULL */

    /* A resident runner (runner.h, "Where the tensors are"): the workspace
     * and `res`, the state's copy, in the ctx's backend memory. `fresh`
     * says which of st (the host's) and res holds the state as it is; the
     * other is brought up to date when it is needed. */
    bool resident;
    enum { FRESH_HOST, FRESH_RES, FRESH_BOTH } fresh;
    trn_state res;            /* config and layout as st's; mem, params, m, v backend memory (NULL until used) */
    trn_workspace *w_host;    /* a traced step's (the recorder reads on the host); made when first needed */
    bool pending;             /* trn_runner_hash_begin computed `pending_hash` of res at `pending_step` */
    ovt_hash pending_hash;
    uint64_t pending_step;
};

static trn_state *hashed_on_ctx(trn_runner *r);

/* A workspace for rc (its tensors in mem_ctx's backend memory, or the
 * host's: NULL), or for evaluation batches of B in one shard (the host's). */
static int workspace_for(trn_workspace **out, const trn_run_config *rc, uint32_t B, krn_ctx *mem_ctx)
{
    if (!B)
        return trn_workspace_new_on(out, rc, mem_ctx);
    trn_run_config e = *rc;
    e.batch_size = B;
    e.shards = 1;
    int rv = trn_workspace_new(out, &e);
    if (!rv)
        (*out)->eval_mode = 1; /* a ResNet's batch norm from its running statistics */
    return rv;
}

int trn_runner_open(trn_runner **out, const trn_run_config *rc, const trn_run_data *data, const trn_runner_opts *o)
{
    *out = NULL;
    trn_runner *r = calloc(1, sizeof *r);
    if (!r)
        return ovt_fail(OVT_ENOMEM, "out of memory for the step runner");
    r->rc = *rc;
    r->o = *o;
    r->data = data;
    trn_config_hash(&r->config_hash, rc);
    krn_config kc = {.backend = o->backend, .mode = o->mode, .verifier = o->verifier,
                     .grid_bits = (int)rc->grid_bits, .shuffle_seed = o->shuffle_seed ? o->shuffle_seed : rc->seed,
                     .threads = o->threads, .rule = trn_config_rule(rc)};
    kc.mem_guard = o->mem_guard;
    kc.tolerant = o->mode == KRN_REPLAY && o->tolerant;
    kc.follow_log = kc.tolerant && o->follow_log;
    int rv;
    bool resident = false;
    if ((rv = krn_ctx_new(&r->ctx, &kc)) || (rv = krn_mem_placement(r->ctx, &resident)))
        goto fail;
    /* steps in this process, without an injected fault: the others run on
     * host tensors (a fault's hooks and dp's exchanges read and write them
     * on the host) */
    r->resident = resident && !o->eval_batch && !o->dp && (!o->fault || o->fault->kind == TRN_FAULT_NONE);
    if ((rv = workspace_for(&r->w, rc, o->eval_batch, r->resident ? r->ctx : NULL)))
        goto fail;
    if (!(r->log = krn_rlog_new())) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the rounding log");
        goto fail;
    }
    if (o->fault)
        trn_workspace_fault_shard(r->w, trn_fault_shard_step(o->fault), o->fault->shard);
    if (o->prefault && (rv = trn_workspace_prefault(r->w, r->ctx)))
        goto fail;
    if ((rv = krn_mem_guard(r->ctx, true))) /* the guard's memory is closed between steps */
        goto fail;
    *out = r;
    return 0;
fail:
    trn_runner_free(r);
    return rv;
}

void trn_runner_free(trn_runner *r)
{
    if (!r)
        return;
    trn_state_free(r->st);
    krn_rlog_free(r->log);
    trn_workspace_free(r->w_rest);
    trn_workspace_free(r->w_host);
    trn_workspace_free(r->w);
    if (r->res.mem)
        krn_mem_free(r->ctx, r->res.mem);
    krn_ctx_free(r->ctx);
    free(r);
}

/* The state was replaced on the host (a new one, a copy, a checkpoint
 * read): a hash of the old one is dropped, as trn_state_free drops it. */
static void host_changed(trn_runner *r)
{
    r->fresh = FRESH_HOST;
    r->pending = false;
}

/* res as the state is, uploaded when the host's copy is newer. */
static int res_current(trn_runner *r)
{
    if (r->fresh != FRESH_HOST)
        return 0;
    const trn_state *st = r->st;
    size_t n = st->layout.nparams;
    if (!r->res.mem) {
        void *mem;
        int rv = krn_mem_alloc(r->ctx, &mem, 3 * n * sizeof(float), "the state");
        if (rv)
            return rv;
        r->res.config = st->config;
        r->res.config_hash = st->config_hash;
        r->res.layout = st->layout;
        r->res.mem = mem;
        r->res.params = r->res.mem;
        r->res.m = r->res.mem + n;
        r->res.v = r->res.mem + 2 * n;
    }
    int rv = krn_mem_upload(r->ctx, r->res.mem, st->mem, 3 * n * sizeof(float));
    if (rv)
        return rv;
    r->res.step = st->step;
    r->fresh = FRESH_BOTH;
    return 0;
}

/* st as the state is, downloaded when res is newer. */
static int host_current(trn_runner *r)
{
    if (!r->resident || r->fresh != FRESH_RES)
        return 0;
    trn_state_settle(r->st); /* a background hash of an older state may still read it */
    int rv = krn_mem_download(r->ctx, r->st->mem, r->res.mem, 3 * r->st->layout.nparams * sizeof(float));
    if (rv)
        return rv;
    r->st->step = r->res.step;
    r->fresh = FRESH_BOTH;
    return 0;
}

/* The stateHash of res: each tensor's tree root where its memory is
 * (kernels/mem.h), or, for a v1 stateHash, the host's copy hashed. */
static int res_hash(trn_runner *r, ovt_hash *out)
{
    uint32_t version = trn_config_state_hash(&r->rc);
    if (version != TRN_STATE_HASH_TREE) {
        int rv = host_current(r);
        if (!rv)
            trn_state_hash(out, hashed_on_ctx(r));
        return rv;
    }
    size_t nd = 3 * r->res.layout.count;
    ovt_hash *digests = malloc(nd * sizeof *digests);
    const void **words = malloc(nd * sizeof *words);
    size_t *lens = malloc(nd * sizeof *lens);
    int rv = 0;
    if (!digests || !words || !lens)
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu tensor digests", nd);
    for (size_t d = 0; !rv && d < nd; d++)
        words[d] = trn_state_digest_words(&r->res, d, &lens[d]);
    /* every tensor's root at once (a device: every leaf, then every level) */
    if (!rv && !(rv = krn_mem_tree_roots(r->ctx, digests, words, lens, nd)))
        trn_state_hash_combine(out, version, &r->config_hash, r->res.step, r->res.layout.count, digests);
    free(digests);
    free(words);
    free(lens);
    return rv;
}

void trn_runner_set_data(trn_runner *r, const trn_run_data *data)
{
    r->data = data;
}

bool trn_runner_fits(const trn_runner *r, const trn_state *st)
{
    return memcmp(r->config_hash.b, st->config_hash.b, 32) == 0;
}

int trn_runner_start(trn_runner *r, const uint8_t *init, size_t init_len)
{
    trn_state *st;
    int rv = trn_state_start(&st, &r->rc, init, init_len);
    if (rv)
        return rv;
    trn_state_free(r->st);
    r->st = st;
    host_changed(r);
    return 0;
}

int trn_runner_adopt(trn_runner *r, trn_state **st)
{
    if (!trn_runner_fits(r, *st))
        return ovt_fail(OVT_EINVAL, "the state is of another run config than the runner's");
    trn_state_free(r->st);
    r->st = *st;
    *st = NULL;
    host_changed(r);
    return 0;
}

trn_state *trn_runner_release(trn_runner *r)
{
    if (r->st && host_current(r))
        return NULL; /* the message says why */
    trn_state *st = r->st;
    host_changed(r);
    r->st = NULL;
    if (st)
        trn_state_hash_threads(st, NULL); /* the runner's ctx stays with the runner */
    return st;
}

/* The runner's state with the ctx's threads lent to its stateHash
 * (trainer/state_hash.h); the runner frees the state before the ctx. */
static trn_state *hashed_on_ctx(trn_runner *r)
{
    if (r->st->hash_ctx != r->ctx)
        trn_state_hash_threads(r->st, r->ctx);
    return r->st;
}

int trn_runner_copy_state(trn_runner *r, const trn_state *src)
{
    if (!trn_runner_fits(r, src))
        return ovt_fail(OVT_EINVAL, "the state to copy is of another run config than the runner's");
    host_changed(r);
    if (r->st) {
        trn_state_settle(r->st);
        trn_state_copy(r->st, src);
        return 0;
    }
    return trn_state_clone(&r->st, src);
}

int trn_runner_sync(trn_runner *r)
{
    return r->st ? host_current(r) : 0;
}

const trn_state *trn_runner_state(trn_runner *r)
{
    if (trn_runner_sync(r) != 0) {
        fprintf(stderr, "ovt: the state cannot be copied to the host: %s\n", ovt_errmsg());
        abort(); /* trn_runner_sync's callers see this as an error return */
    }
    return r->st;
}

uint64_t trn_runner_step_no(const trn_runner *r)
{
    if (!r->st)
        return 0;
    return r->resident && r->fresh == FRESH_RES ? r->res.step : r->st->step;
}

bool trn_runner_resident(const trn_runner *r)
{
    return r->resident;
}

krn_mem_stats trn_runner_mem_stats(const trn_runner *r)
{
    return krn_mem_stats_of(r->ctx);
}

int trn_runner_load_checkpoint(trn_runner *r, const char *path)
{
    trn_state *st;
    int rv = trn_checkpoint_read(&st, path);
    if (rv)
        return rv;
    if (!trn_runner_fits(r, st)) {
        trn_state_free(st);
        return ovt_fail(OVT_EFORMAT, "%s does not belong to this run", path);
    }
    trn_state_free(r->st);
    r->st = st;
    host_changed(r);
    return 0;
}

int trn_runner_save_checkpoint(trn_runner *r, const char *path)
{
    if (!r->st)
        return ovt_fail(OVT_EINVAL, "the runner has no state to checkpoint");
    int rv = host_current(r);
    return rv ? rv : trn_checkpoint_write(r->st, path);
}

int trn_runner_hash_begin(trn_runner *r)
{
    if (r->resident && r->fresh == FRESH_RES) {
        /* where the state is; what a device computes it does in its own time */
        int rv = res_hash(r, &r->pending_hash);
        r->pending = rv == 0;
        r->pending_step = r->res.step;
        return rv;
    }
    r->pending = false; /* a second begin drops the first, as trn_state_hash_begin does */
    return trn_state_hash_begin(hashed_on_ctx(r));
}

bool trn_runner_hash_end(trn_runner *r, ovt_hash *out, uint64_t *step)
{
    if (r->pending) {
        r->pending = false;
        *out = r->pending_hash;
        *step = r->pending_step;
        return true;
    }
    return r->st && trn_state_hash_end(r->st, out, step);
}

krn_rlog *trn_runner_log(trn_runner *r)
{
    return r->log;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* REPLAY: the log must be step i's. */
static int check_log_step(const trn_runner *r, uint64_t i)
{
    if (krn_rlog_step(r->log) == i)
        return 0;
    return ovt_fail(OVT_EFRAUD, "the rounding log is for step %llu, not step %llu",
                    (unsigned long long)krn_rlog_step(r->log), (unsigned long long)i);
}

/* Step i's log, read from the replayed run's directory (the log source). */
static int read_replay_log(trn_runner *r, uint64_t i)
{
    char path[4096];
    int rv = trn_run_path(path, sizeof path, r->o.replay_dir, "logs", i, "rlog");
    if (!rv)
        rv = krn_rlog_read_file(r->log, path);
    return rv ? rv : check_log_step(r, i);
}

/* Step i on batch b, between the fault's hooks: the log (REPLAY from
 * replay_dir; NEAREST, PLAIN: reset), then the step, recorded into t when
 * it is not NULL. */
static int step_on(trn_runner *r, trn_state *st, trn_workspace *w, trn_step_batch *b, uint64_t i, krn_trace *t,
                   trn_runner_result *out)
{
    const trn_fault *f = r->o.fault;
    float *kept = NULL;
    int rv = f ? trn_fault_before_step(f, i, r->o.dp, r->ctx, st, &b->tb, &b->sb, &kept) : 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rv && r->o.mode == KRN_REPLAY && r->o.replay_dir)
        rv = read_replay_log(r, i);
    bool logs = r->o.mode == KRN_RECORD || r->o.mode == KRN_REPLAY;
    if (!logs)
        krn_rlog_reset(r->log, i);
    krn_rlog *log = logs ? r->log : NULL;
    if (!rv && t)
        rv = trn_train_step_traced(r->ctx, w, st, &b->view, log, t, &out->info, &out->trace_rc, &out->trace_root);
    else if (!rv)
        rv = trn_train_step_dp(r->ctx, w, st, &b->view, log, r->o.dp, &out->info);
    out->seconds = seconds_since(&t0);
    if (f) {
        rv = trn_fault_after_step(f, i, rv, r->ctx, st, &kept);
        if (!rv)
            rv = trn_fault_on_log(f, i, r->log);
    }
    return rv;
}

int trn_runner_step(trn_runner *r, trn_runner_result *out)
{
    memset(out, 0, sizeof *out);
    out->info.shards = trn_config_shards(&r->rc);
    out->info.shard_differs = -1;
    krn_trace *t = r->trace; /* this step's only, whatever becomes of it */
    r->trace = NULL;
    if (!r->st || !r->data || r->o.eval_batch)
        return ovt_fail(OVT_EINVAL, "internal: a step needs a runner of steps with a state and data");
    uint64_t i = trn_runner_step_no(r) + 1;
    int rv;
    if (r->o.mode == KRN_REPLAY && !r->o.replay_dir && (rv = check_log_step(r, i)))
        return rv;
    trn_step_batch b;
    if ((rv = trn_step_batch_get(&b, r->data, &r->rc, i)))
        return rv;
    out->batch_hash = b.hash;
    if (r->resident && !t) {
        /* the state and workspace stay where the ops run; only the batch
         * goes down (the ops copy it) and the scalars and the log come up;
         * a hash begun on the state before this step stays for hash_end */
        if (!(rv = res_current(r)) && !(rv = krn_mem_guard(r->ctx, false))) {
            rv = step_on(r, &r->res, r->w, &b, i, NULL, out);
            r->fresh = FRESH_RES;
            int grv = krn_mem_guard(r->ctx, true);
            rv = rv ? rv : grv;
        }
        trn_step_batch_free(&b);
        if (!rv && !r->o.hash_later)
            rv = res_hash(r, &out->state_hash);
        return rv;
    }
    /* on the host's state: a runner of host tensors, or a traced step of a
     * resident one (the recorder reads every output on the host), which
     * has a host workspace of its own for it */
    trn_workspace *w = r->w;
    if (r->resident && !(rv = host_current(r)) && !r->w_host)
        rv = workspace_for(&r->w_host, &r->rc, 0, NULL);
    if (r->resident)
        w = r->w_host;
    if (!rv) {
        rv = step_on(r, r->st, w, &b, i, t, out);
        r->fresh = FRESH_HOST; /* a hash begun before stays for hash_end, as on the host */
    }
    trn_step_batch_free(&b);
    if (!rv && !r->o.hash_later)
        trn_state_hash(&out->state_hash, hashed_on_ctx(r));
    return rv;
}

int trn_runner_trace_next(trn_runner *r, krn_trace *t)
{
    if (r->o.dp)
        return ovt_fail(OVT_EINVAL, "a step shared among processes cannot be traced: each sees only its "
                                    "shards' sites; trace it in one process (ovt step --trace)");
    r->trace = t;
    return 0;
}

void trn_runner_collect_sites(trn_runner *r, bool on)
{
    krn_ctx_collect_sites(r->ctx, on);
}

const krn_site_stats *trn_runner_site_stats(const trn_runner *r, size_t *n)
{
    return krn_ctx_site_stats(r->ctx, n);
}

const krn_finding *trn_runner_finding(const trn_runner *r)
{
    return krn_ctx_finding(r->ctx);
}

const krn_finding *trn_runner_violation(const trn_runner *r)
{
    return krn_ctx_violation(r->ctx);
}

int trn_runner_eval(trn_runner *r, const trn_state *st, const trn_batch *batch, uint64_t step, float *loss)
{
    *loss = 0;
    if (!r->o.eval_batch || batch->B > r->o.eval_batch)
        return ovt_fail(OVT_EINVAL, "internal: an evaluation needs an evaluation runner for batches of %u",
                        batch->B);
    int rv;
    trn_workspace **w = batch->B == r->o.eval_batch ? &r->w : &r->w_rest;
    if (*w && (*w)->config.batch_size != batch->B) {
        trn_workspace_free(*w);
        *w = NULL;
    }
    if (!*w && (rv = workspace_for(w, &r->rc, batch->B, NULL)))
        return rv;
    r->w_last = *w;
    if (!(rv = trn_runner_sync(r)))
        rv = trn_eval_loss(r->ctx, *w, st ? st : r->st, batch, step, loss);
    return rv;
}

const float *trn_runner_logits(const trn_runner *r)
{
    const trn_workspace *w = r->w_last;
    if (!w)
        return NULL;
    if (w->config.model.kind == TRN_MODEL_RESNET)
        return trn_resnet_logits(w->resnet);
    return w->pre[w->config.model.n_layer];
}
