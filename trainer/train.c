/* The training step: model forward/backward, then the optimizer, all inside
 * one numbered step of a krn_ctx. */
#include "trainer/state_hash.h"
#include "trainer/train.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/bigmem.h"
#include "kernels/grid.h"
#include "kernels/trace.h"
#include "kernels/ops.h"
#include "kernels/shard.h"
#include "dp/dp.h"
#include "trainer/fault.h"
#include "trainer/schedule.h"
#include "trainer/workspace.h"

int trn_tensor_alloc(krn_ctx *mem_ctx, float **out, size_t n, const char *what)
{
    *out = NULL;
    if (n > SIZE_MAX / sizeof(float))
        return ovt_fail(OVT_ENOMEM, "no room for %s (%zu floats)", what, n);
    if (mem_ctx)
        return krn_mem_alloc(mem_ctx, (void **)out, (n ? n : 1) * sizeof(float), what);
    if (!(*out = ovt_big_calloc(n ? n : 1, sizeof(float))))
        return ovt_fail(OVT_ENOMEM, "out of memory for %s (%zu floats)", what, n);
    return 0;
}

void trn_tensor_free(krn_ctx *mem_ctx, float *p)
{
    if (mem_ctx)
        krn_mem_free(mem_ctx, p);
    else
        free(p);
}

int trn_workspace_new(trn_workspace **out, const trn_run_config *rc)
{
    return trn_workspace_new_on(out, rc, NULL);
}

int trn_workspace_new_on(trn_workspace **out, const trn_run_config *rc, krn_ctx *mem_ctx)
{
    *out = NULL;
    int rv = trn_config_check(rc);
    if (rv)
        return rv;
    trn_workspace *w = calloc(1, sizeof *w);
    if (!w)
        return ovt_fail(OVT_ENOMEM, "out of memory for the model workspace");
    w->config = *rc;
    w->mem_ctx = mem_ctx;
    if ((rv = trn_layout_build(&w->layout, &rc->model)))
        goto fail;
    const trn_model_config *m = &rc->model;
    uint32_t S = trn_config_shards(rc);
    size_t B = rc->batch_size / S; /* one shard's: the model runs shard by shard */
    if (S > 1) {
        w->shard_hashes = calloc(S, sizeof *w->shard_hashes);
        w->shard_loss = calloc(S, sizeof *w->shard_loss);
        if (!w->shard_hashes || !w->shard_loss) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory for the table of %u shards", S);
            goto fail;
        }
    }
    if (m->kind == TRN_MODEL_RESNET) {
        if ((rv = trn_resnet_plan_new(&w->resnet, &w->layout, B, mem_ctx)))
            goto fail;
        w->mem_floats = 0; /* the plan's own allocation */
        if ((rv = trn_tensor_alloc(mem_ctx, &w->grads, w->layout.nparams, "the ResNet's gradients")))
            goto fail;
        *out = w;
        return 0;
    }
    if (trn_model_is_lm(m)) {
        /* GPT-2 and Llama: the activations and their gradients in one allocation */
        int llama = m->kind == TRN_MODEL_LLAMA;
        size_t T = rc->seq_len;
        size_t n = llama ? trn_llama_acts_size(m, B, T) : trn_gpt2_acts_size(m, B, T);
        size_t nd = llama ? trn_llama_dacts_size(m, B, T) : trn_gpt2_dacts_size(m, B, T);
        w->mem_floats = n + nd;
        if ((rv = trn_tensor_alloc(mem_ctx, &w->mem, n + nd, llama ? "the Llama activations" : "the GPT-2 activations")) ||
            (rv = trn_tensor_alloc(mem_ctx, &w->grads, w->layout.nparams, "the gradients")))
            goto fail;
        if (llama) {
            trn_llama_acts_slice(&w->lacts, m, B, T, w->mem);
            trn_llama_dacts_slice(&w->ldacts, m, B, T, w->mem + n, &w->lacts);
        } else {
            trn_gpt2_acts_slice(&w->acts, m, B, T, w->mem);
            trn_gpt2_dacts_slice(&w->dacts, m, B, T, w->mem + n, &w->acts);
        }
        *out = w;
        return 0;
    }
    size_t total = 0;
    for (uint32_t l = 0; l <= m->n_layer; l++) {
        size_t o = l == m->n_layer ? m->n_class : m->width;
        total += 2 * B * o + (l < m->n_layer ? 2 * B * o : 0);
    }
    total += B * m->n_class + B;
    w->mem_floats = total;
    if ((rv = trn_tensor_alloc(mem_ctx, &w->mem, total, "the MLP activations")) ||
        (rv = trn_tensor_alloc(mem_ctx, &w->grads, w->layout.nparams, "the gradients")))
        goto fail;
    float *p = w->mem;
    for (uint32_t l = 0; l <= m->n_layer; l++) {
        size_t o = l == m->n_layer ? m->n_class : m->width;
        w->pre[l] = p, p += B * o;
        w->dpre[l] = p, p += B * o;
        if (l < m->n_layer) {
            w->act[l] = p, p += B * o;
            w->dact[l] = p, p += B * o;
        }
    }
    w->probs = p, p += B * m->n_class;
    w->losses = p;
    *out = w;
    return 0;
fail:
    trn_workspace_free(w);
    return rv;
}

void trn_workspace_free(trn_workspace *w)
{
    if (!w)
        return;
    trn_tensor_free(w->mem_ctx, w->mem);
    trn_tensor_free(w->mem_ctx, w->grads);
    trn_resnet_plan_free(w->resnet);
    for (uint32_t k = 0; k < w->nshard_grads; k++) {
        trn_tensor_free(w->mem_ctx, w->shard_grads[k]);
        if (w->shard_host)
            free(w->shard_host[k]);
    }
    free(w->shard_grads);
    free(w->shard_host);
    free(w->sum_host);
    free(w->shard_hashes);
    free(w->shard_loss);
    free(w);
}

void trn_workspace_fault_shard(trn_workspace *w, uint64_t step, uint32_t shard)
{
    w->fault_step = step;
    w->fault_shard = shard;
}

/* Zeroes piece i of PREFAULT_PIECES of one buffer. */
#define PREFAULT_PIECE ((size_t)32 << 20)
typedef struct {
    float *p;
    size_t n; /* floats */
} prefault_arg;

static void prefault_piece(void *arg, size_t i)
{
    const prefault_arg *a = arg;
    size_t per = PREFAULT_PIECE / sizeof(float), lo = i * per, hi = lo + per < a->n ? lo + per : a->n;
    memset(a->p + lo, 0, (hi - lo) * sizeof(float));
}

static int prefault(krn_ctx *ctx, float *p, size_t n)
{
    prefault_arg a = {p, n};
    size_t per = PREFAULT_PIECE / sizeof(float);
    return krn_ctx_parallel(ctx, (n + per - 1) / per, prefault_piece, &a);
}

static int shard_grads_reserve(trn_workspace *w, uint32_t k);

int trn_workspace_prefault(trn_workspace *w, krn_ctx *ctx)
{
    if (w->mem_ctx)
        return 0; /* backend memory: the backend's to place */
    uint32_t S = trn_config_shards(&w->config);
    int rv = S > 1 ? shard_grads_reserve(w, S) : 0;
    if (!rv)
        rv = prefault(ctx, w->mem, w->mem_floats);
    if (!rv)
        rv = prefault(ctx, w->grads, w->layout.nparams);
    for (uint32_t k = 0; !rv && k < w->nshard_grads; k++)
        rv = prefault(ctx, w->shard_grads[k], w->layout.nparams);
    return rv;
}

/* Gradient buffers for the k shards this process computes. */
static int shard_grads_reserve(trn_workspace *w, uint32_t k)
{
    if (k <= w->nshard_grads)
        return 0;
    float **g = realloc(w->shard_grads, k * sizeof *g);
    if (!g)
        return ovt_fail(OVT_ENOMEM, "out of memory for %u shard gradients", k);
    w->shard_grads = g;
    if (w->mem_ctx) {
        float **h = realloc(w->shard_host, k * sizeof *h);
        if (!h)
            return ovt_fail(OVT_ENOMEM, "out of memory for %u shard gradients", k);
        w->shard_host = h;
        if (!w->sum_host && !(w->sum_host = ovt_big_alloc(w->layout.nparams, sizeof(float))))
            return ovt_fail(OVT_ENOMEM, "out of memory for the shards' mean of %zu floats", w->layout.nparams);
    }
    for (; w->nshard_grads < k; w->nshard_grads++) {
        int rv = trn_tensor_alloc(w->mem_ctx, &g[w->nshard_grads], w->layout.nparams, "a shard's gradient");
        if (!rv && w->mem_ctx && !(w->shard_host[w->nshard_grads] = ovt_big_alloc(w->layout.nparams, sizeof(float))))
            rv = ovt_fail(OVT_ENOMEM, "out of memory for %u shard gradients of %zu floats", k, w->layout.nparams);
        if (rv) {
            if (w->mem_ctx) /* not counted yet: the gradient goes now */
                trn_tensor_free(w->mem_ctx, g[w->nshard_grads]);
            return rv;
        }
    }
    return 0;
}

float *trn_workspace_grads(trn_workspace *w)
{
    return w->grads;
}

static int check_batch(const trn_workspace *w, const trn_batch *batch)
{
    const trn_run_config *rc = &w->config;
    if (batch->B != rc->batch_size || (trn_model_is_lm(&rc->model) && batch->T != rc->seq_len))
        return ovt_fail(OVT_EINVAL, "batch of %u x %u does not match the run config's %u x %u", batch->B,
                        batch->T, rc->batch_size, rc->seq_len);
    if (rc->model.kind == TRN_MODEL_MLP && (!batch->x || !batch->labels))
        return ovt_fail(OVT_EINVAL, "an MLP batch needs features and labels");
    if (trn_model_is_lm(&rc->model) && (!batch->inputs || !batch->targets))
        return ovt_fail(OVT_EINVAL, "a %s batch needs input and target tokens", trn_model_kind_name(rc->model.kind));
    return 0;
}

static int model_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch, float *loss)
{
    if (w->config.model.kind == TRN_MODEL_GPT2)
        return trn_gpt2_forward(ctx, w, params, batch, loss);
    if (w->config.model.kind == TRN_MODEL_LLAMA)
        return trn_llama_forward(ctx, w, params, batch, loss);
    if (w->config.model.kind == TRN_MODEL_RESNET)
        return trn_resnet_forward(ctx, w, params, batch, loss);
    return trn_mlp_forward(ctx, w, params, batch, loss);
}

/* Shard s of S of a batch: its sequences (samples) s*B/S .. (s+1)*B/S - 1. */
static trn_batch shard_of(const trn_batch *b, const trn_model_config *m, uint32_t s, uint32_t S)
{
    trn_batch v = *b;
    v.B = b->B / S;
    size_t first = (size_t)s * v.B;
    if (trn_model_is_lm(m)) {
        v.inputs = b->inputs + first * b->T;
        v.targets = b->targets + first * b->T;
    } else {
        v.x = b->x + first * m->in_dim;
        v.labels = b->labels + first;
    }
    return v;
}

static int model_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch)
{
    if (w->config.model.kind == TRN_MODEL_GPT2)
        return trn_gpt2_backward(ctx, w, params, batch);
    if (w->config.model.kind == TRN_MODEL_LLAMA)
        return trn_llama_backward(ctx, w, params, batch);
    if (w->config.model.kind == TRN_MODEL_RESNET)
        return trn_resnet_backward(ctx, w, params, batch);
    return trn_mlp_backward(ctx, w, params, batch);
}

/* The model's own buffers after its trainable parameters (a ResNet's running
 * statistics, docs/decisions.md): running = (1 - momentum)*running +
 * momentum*slot, slot the buffer's entry of the step's gradient vector (the
 * batch statistic, averaged over the shards by grad.sum). Site "bn.running"
 * (exact); none for a model without buffers. */
static int buffers_update(krn_ctx *ctx, trn_state *st, trn_workspace *w)
{
    size_t lo = st->layout.ntrain, n = st->layout.nparams - lo;
    if (n == 0)
        return 0;
    double mom = st->config.model.bn_momentum, keep = 1.0 - mom;
    /* in backend memory (a resident run) the few statistics come up, and
     * their new values go down */
    bool host = krn_mem_is_host(ctx, st->params) && krn_mem_is_host(ctx, w->grads);
    double *x = malloc(n * sizeof *x);
    float *old = host ? st->params + lo : malloc(2 * n * sizeof *old);
    const float *slot = host ? w->grads + lo : old + n;
    int rv = 0;
    if (!x || !old) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu running statistics", n);
        goto done;
    }
    if (!host && ((rv = krn_mem_download(ctx, old, st->params + lo, n * sizeof *old)) ||
                  (rv = krn_mem_download(ctx, old + n, w->grads + lo, n * sizeof *old))))
        goto done;
    for (size_t i = 0; i < n; i++)
        x[i] = keep * (double)old[i] + mom * (double)slot[i];
    const krn_band exact = {.kind = KRN_BAND_ZERO};
    KRN_TRACE_READS(ctx, 0, {st->params + lo, n}, {w->grads + lo, n});
    rv = krn_site(ctx, "bn.running", old, x, n, &exact);
    if (!rv && !host)
        rv = krn_mem_upload(ctx, st->params + lo, old, n * sizeof *old);
done:
    if (!host)
        free(old);
    free(x);
    return rv;
}

static int optimizer_step(krn_ctx *ctx, trn_workspace *w, trn_state *st, uint64_t i, trn_step_info *info)
{
    const trn_run_config *rc = &st->config;
    int b = (int)rc->grid_bits;
    size_t n = st->layout.ntrain; /* the trainable parameters: the buffers after them are the model's own */
    float norm, scale = 1.0f, lr, bc1, bc2;
    int rv;
    if ((rv = krn_grad_norm(ctx, &norm, w->grads, n)))
        return rv;
    KRN_TRACE_READS(ctx, 0, {&norm, 1}); /* clip.factor's norm, by value */
    if (rc->grad_clip > 0 && (rv = krn_clip_factor(ctx, &scale, norm, krn_grid_round(rc->grad_clip, b))))
        return rv;
    double lr64 = trn_schedule_lr(rc, i); /* + - * / only: the site is exact */
    const krn_band exact = {.kind = KRN_BAND_ZERO};
    if ((rv = krn_site(ctx, "schedule.lr", &lr, &lr64, 1, &exact)))
        return rv;
    float beta1 = krn_grid_round(rc->beta1, b), beta2 = krn_grid_round(rc->beta2, b);
    if ((rv = krn_adamw_corrections(ctx, &bc1, &bc2, beta1, beta2, i)))
        return rv;
    trn_state_settle(st); /* a stateHash of the state before this step may still be running */
    /* AdamW's scalars come by value: the sites they came from (ops.h's order m, v, param) */
    const float *scale_site = rc->grad_clip > 0 ? &scale : NULL;
    for (unsigned k = 0; k < 3; k++)
        KRN_TRACE_READS(ctx, k, {scale_site, 1});
    KRN_TRACE_READS(ctx, 2, {&bc1, 1}, {&bc2, 1}, {&lr, 1});
    if ((rv = krn_adamw_update(ctx, st->params, st->m, st->v, w->grads, bc1, bc2, lr, beta1, beta2,
                               krn_grid_round(rc->eps, b), krn_grid_round(rc->weight_decay, b), scale, n)))
        return rv;
    if ((rv = buffers_update(ctx, st, w)))
        return rv;
    info->grad_norm = norm;
    info->lr = lr;
    return 0;
}

/* Closes a failed step so the ctx can start another, keeping the failure's
 * message (the step's own end may fail too and would overwrite it). */
static void abandon_step(krn_ctx *ctx, int rv)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ovt_errmsg());
    krn_stats ignored;
    int end_rv = krn_step_end(ctx, &ignored);
    (void)end_rv; /* the first failure is the one to report */
    ovt_fail(rv, "%s", msg);
}

/* A failed step's message names the step once: the rounding sites' own
 * messages already begin with "step N " (site, op, element). */
static int step_fail(int rv, uint64_t i)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "step %llu ", (unsigned long long)i);
    if (strncmp(ovt_errmsg(), prefix, strlen(prefix)) == 0)
        return rv;
    return ovt_fail_wrap(rv, "step %llu", (unsigned long long)i);
}

/* fill for "grad.sum" and "loss.mean": the exact mean of the shard values. */
typedef struct {
    const float *const *g;
    uint32_t S;
} shard_mean_arg;

static void fill_shard_mean(void *arg, size_t i0, size_t len, double *x)
{
    const shard_mean_arg *a = arg;
    krn_shard_mean_block(x, a->g, a->S, i0, len);
}

/* Site "loss.mean": the exact mean of the S shard losses. */
static int loss_mean(krn_ctx *ctx, trn_workspace *w, float *loss)
{
    uint32_t S = trn_config_shards(&w->config);
    const float *losses[TRN_MAX_SHARDS];
    for (uint32_t s = 0; s < S; s++)
        losses[s] = &w->shard_loss[s];
    shard_mean_arg l = {losses, S};
    KRN_TRACE_READS(ctx, 0, {w->shard_loss, S});
    return krn_site_exact_fill(ctx, "loss.mean", loss, 1, fill_shard_mean, &l);
}

/* The SHA-256 of shard lo + k's gradient, for the k-th of a rank's shards. */
typedef struct {
    trn_workspace *w;
    uint32_t lo;
} shard_hash_arg;

static void hash_shard(void *arg, size_t k)
{
    const shard_hash_arg *a = arg;
    const float *g = a->w->shard_host ? a->w->shard_host[k] : a->w->shard_grads[k];
    ovt_sha256_le32(&a->w->shard_hashes[a->lo + k], g, a->w->layout.nparams * sizeof(float));
}

/* Forward and backward of shards lo .. hi-1 of a sharded step, each into
 * its own gradient (w->shard_grads[s - lo]), hashed into w->shard_hashes[s];
 * their losses into w->shard_loss[s]. Sites are numbered from where the ctx
 * stands: shard s at (s - lo) * P on. */
static int shards_run(krn_ctx *ctx, trn_workspace *w, const trn_state *st, const trn_batch *batch, uint32_t lo,
                      uint32_t hi, uint64_t i)
{
    uint32_t S = trn_config_shards(&w->config);
    size_t n = st->layout.nparams;
    int rv = shard_grads_reserve(w, hi - lo);
    if (rv)
        return rv;
    float *sum = w->grads;
    uint32_t first_site = krn_ctx_next_site(ctx);
    for (uint32_t s = lo; s < hi && !rv; s++) {
        trn_batch v = shard_of(batch, &w->config.model, s, S);
        w->grads = w->shard_grads[s - lo];
        if ((rv = krn_mem_zero(ctx, w->grads, n * sizeof(float))))
            break;
        krn_trace_zero(ctx, w->grads, n);
        if (!(rv = model_forward(ctx, w, st->params, &v, &w->shard_loss[s])))
            rv = model_backward(ctx, w, st->params, &v);
        if (!rv && w->fault_step == i && w->fault_shard == s)
            trn_fault_bitflip_grad(w->grads, n);
        if (!rv && s == lo) {
            uint32_t P = krn_ctx_next_site(ctx) - first_site;
            if (w->sites_per_shard && w->sites_per_shard != P)
                rv = ovt_fail(OVT_EINVAL, "a shard ran %u sites, an earlier one %u", P, w->sites_per_shard);
            w->sites_per_shard = P;
        }
    }
    w->grads = sum;
    /* in backend memory the shard gradients come up, once each */
    for (uint32_t k = 0; !rv && w->shard_host && k < hi - lo; k++)
        rv = krn_mem_download(ctx, w->shard_host[k], w->shard_grads[k], n * sizeof(float));
    /* the shards' hashes side by side on the ctx's threads */
    shard_hash_arg h = {w, lo};
    if (!rv)
        rv = krn_ctx_parallel(ctx, hi - lo, hash_shard, &h);
    return rv;
}

/* fill for "grad.sum" under several processes: the transport has already
 * rounded the mean into out (a grid value), which the site takes as is. */
static void fill_rounded(void *arg, size_t i0, size_t len, double *x)
{
    const float *out = arg;
    for (size_t j = 0; j < len; j++)
        x[j] = out[i0 + j];
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The gradient sum of shards spread over the processes of dp: each rank
 * ran shards lo .. hi-1, its sites numbered from lo*P when it knew P (every
 * step after its first: `numbered`), else from 0, and then they move to
 * where one process computing every shard numbers them (shard s at s*P);
 * the ranks exchange the shards' hashes and losses and sum the gradients. */
static int dp_sum(krn_ctx *ctx, trn_workspace *w, const trn_state *st, krn_rlog *log, dp_ctx *dp, uint32_t lo,
                  uint32_t hi, bool numbered, uint64_t i, double *comm)
{
    uint32_t S = trn_config_shards(&w->config), P = w->sites_per_shard;
    int rv = 0;
    if (log && lo > 0 && !numbered && krn_ctx_config(ctx)->mode == KRN_RECORD)
        rv = krn_rlog_shift_sites(log, lo * P);
    if (!rv)
        rv = krn_ctx_set_next_site(ctx, S * P);
    dp_shard_record *rec = calloc(S, sizeof *rec);
    if (!rec)
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the records of %u shards", S);
    for (uint32_t s = lo; rec && s < hi; s++) {
        rec[s].grad_hash = w->shard_hashes[s];
        rec[s].loss = w->shard_loss[s];
        rec[s].rank = (uint32_t)dp_rank(dp);
        snprintf(rec[s].host, sizeof rec[s].host, "%s", dp_host(dp));
    }
    /* a rank that failed so far stops every rank here, together */
    double t0 = now_seconds();
    if ((rv = dp_agree(dp, rv, i)))
        goto done;
    if ((rv = dp_share_shards(dp, rec, S, i)))
        goto done;
    for (uint32_t s = 0; s < S; s++) {
        w->shard_hashes[s] = rec[s].grad_hash;
        w->shard_loss[s] = rec[s].loss;
    }
    rv = dp_grad_sum(dp, w->grads, (const float *const *)w->shard_grads, hi - lo, S, st->layout.nparams,
                         (int)w->config.grid_bits, i);
    *comm += now_seconds() - t0;
    if (rv)
        goto done;
    rv = krn_site_exact_fill(ctx, "grad.sum", w->grads, st->layout.nparams, fill_rounded, w->grads);
done:
    free(rec);
    return rv;
}

/* The shards of a sharded step and their sum, up to the optimizer: every
 * shard in this process (dp NULL), or this rank's share of them. */
static int sharded_grads(krn_ctx *ctx, trn_workspace *w, const trn_state *st, const trn_batch *batch, krn_rlog *log,
                         dp_ctx *dp, uint64_t i, trn_step_info *info)
{
    uint32_t S = trn_config_shards(&w->config);
    uint32_t R = (uint32_t)dp_size(dp), r = (uint32_t)dp_rank(dp);
    int replay = krn_ctx_config(ctx)->mode == KRN_REPLAY;
    if (S % R != 0)
        return ovt_fail(OVT_EINVAL, "%u shards cannot be split evenly over %u processes: the number of processes "
                                    "(mpirun -np) must divide --shards",
                        S, R);
    if (replay && dp)
        return ovt_fail(OVT_EINVAL, "a replay runs in one process");
    if (dp && w->mem_ctx)
        return ovt_fail(OVT_EINVAL, "internal: a step shared among processes sums host gradients, not a "
                                    "resident workspace's");
    uint32_t lo = r * (S / R), hi = lo + S / R;
    /* number this rank's sites where they belong once P is known */
    bool numbered = dp && lo > 0 && w->sites_per_shard > 0;
    int rv = numbered ? krn_ctx_set_next_site(ctx, lo * w->sites_per_shard) : 0;
    if (!rv)
        rv = shards_run(ctx, w, st, batch, lo, hi, i);
    if (dp)
        rv = rv ? dp_agree(dp, rv, i) : dp_sum(ctx, w, st, log, dp, lo, hi, numbered, i, &info->comm_seconds);
    if (rv)
        return rv;
    if (!dp) {
        /* the mean on the host; in backend memory it then goes down */
        float *const *host = w->shard_host ? w->shard_host : w->shard_grads;
        shard_mean_arg g = {(const float *const *)host, S};
        for (uint32_t s = 0; s < S; s++)
            KRN_TRACE_READS(ctx, 0, {w->shard_grads[s], st->layout.nparams});
        float *sum = w->shard_host ? w->sum_host : w->grads;
        if ((rv = krn_site_exact_fill(ctx, "grad.sum", sum, st->layout.nparams, fill_shard_mean, &g)) ||
            (w->shard_host && (rv = krn_mem_upload(ctx, w->grads, sum, st->layout.nparams * sizeof(float)))))
            return rv;
    }
    if ((rv = loss_mean(ctx, w, &info->loss)))
        return rv;
    info->shard_hashes = w->shard_hashes;
    for (uint32_t s = 0; replay && s < S && info->shard_differs < 0; s++)
        if (memcmp(krn_rlog_shard_hash(log, s)->b, w->shard_hashes[s].b, 32) != 0)
            info->shard_differs = s;
    return 0;
}

int trn_false_shard_table(uint64_t step, int64_t shard_differs, bool state_right)
{
    if (!state_right || shard_differs < 0)
        return 0;
    return ovt_fail(OVT_EFRAUD,
                    "step %llu: the rounding log's shard table is false: it gives shard %lld a gradient hash that "
                    "shard does not compute, yet the step's state is the one claimed (the table blames a shard "
                    "that did nothing wrong)",
                    (unsigned long long)step, (long long)shard_differs);
}

int trn_train_step(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                   trn_step_info *info)
{
    return trn_train_step_dp(ctx, w, st, batch, log, NULL, info);
}

int trn_train_step_dp(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                      dp_ctx *dp, trn_step_info *info)
{
    memset(info, 0, sizeof *info);
    info->shard_differs = -1;
    int rv = check_batch(w, batch);
    if (rv)
        return rv;
    uint64_t i = st->step + 1;
    uint32_t S = trn_config_shards(&w->config);
    info->shards = S;
    /* a replayed log's shard table must be the run's: S hashes, or none for one shard */
    if (log && krn_ctx_config(ctx)->mode == KRN_REPLAY && krn_rlog_nshards(log) != (S > 1 ? S : 0)) {
        char steps[32] = "are in one shard";
        if (S > 1)
            snprintf(steps, sizeof steps, "have %u", S);
        return ovt_fail(OVT_EFRAUD, "step %llu: the rounding log has a shard table of %u shards, the run's steps %s",
                        (unsigned long long)i, krn_rlog_nshards(log), steps);
    }
    if ((rv = krn_step_begin(ctx, i, log)))
        return rv;
    if (S > 1) {
        rv = sharded_grads(ctx, w, st, batch, log, dp, i, info); /* grad.sum writes every gradient */
    } else {
        rv = krn_mem_zero(ctx, w->grads, st->layout.nparams * sizeof(float)); /* the backward ops accumulate */
        krn_trace_zero(ctx, w->grads, st->layout.nparams);
        if (!rv && !(rv = model_forward(ctx, w, st->params, batch, &info->loss)))
            rv = model_backward(ctx, w, st->params, batch);
    }
    if (rv || (rv = optimizer_step(ctx, w, st, i, info))) {
        abandon_step(ctx, rv);
        return step_fail(rv, i);
    }
    if ((rv = krn_step_end(ctx, &info->stats)))
        return step_fail(rv, i);
    if (S > 1 && log && krn_ctx_config(ctx)->mode == KRN_RECORD &&
        (rv = krn_rlog_set_shards(log, w->shard_hashes, S)))
        return step_fail(rv, i);
    /* the other ranks keep the entries of their own shards for rank 0's merge
     * (the sites from grad.sum on, every rank computed alike) */
    if (S > 1 && log && dp && dp_rank(dp) > 0 && krn_ctx_config(ctx)->mode == KRN_RECORD)
        krn_rlog_drop_sites_from(log, S * w->sites_per_shard);
    st->step = i;
    return 0;
}

int trn_eval_loss(krn_ctx *ctx, trn_workspace *w, const trn_state *st, const trn_batch *batch, uint64_t step,
                  float *loss)
{
    *loss = 0;
    int rv = check_batch(w, batch);
    if (rv)
        return rv;
    if ((rv = krn_step_begin(ctx, step, NULL)))
        return rv;
    uint32_t S = trn_config_shards(&w->config);
    if (S == 1) {
        rv = model_forward(ctx, w, st->params, batch, loss);
    } else {
        for (uint32_t s = 0; s < S && !rv; s++) {
            trn_batch v = shard_of(batch, &w->config.model, s, S);
            rv = model_forward(ctx, w, st->params, &v, &w->shard_loss[s]);
        }
        if (!rv)
            rv = loss_mean(ctx, w, loss);
    }
    if (rv) {
        abandon_step(ctx, rv);
        return rv;
    }
    krn_stats stats;
    return krn_step_end(ctx, &stats);
}

int trn_shard_sites(const trn_run_config *rc, uint32_t *P)
{
    *P = 0;
    trn_run_config c = *rc; /* one shard of one sample (of one token), zero parameters: the same ops, the
                               fewest elements, nothing drawn */
    c.shards = 1;
    c.batch_size = 1;
    if (trn_model_is_lm(&c.model))
        c.seq_len = 1;
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = (int)c.grid_bits};
    krn_ctx *ctx = NULL;
    trn_workspace *w = NULL;
    trn_state *st = NULL;
    size_t per = trn_model_is_lm(&c.model) ? 1 : c.model.in_dim;
    float *x = calloc(per, sizeof *x);
    int32_t *tok = calloc(2, sizeof *tok); /* labels or inputs, and targets: class and token 0 */
    int rv = x && tok ? 0 : ovt_fail(OVT_ENOMEM, "out of memory for a one-sample batch");
    if (!rv && !(rv = krn_ctx_new(&ctx, &kc)) && !(rv = trn_workspace_new(&w, &c)) && !(rv = trn_state_new(&st, &c))) {
        trn_batch b = {.B = 1, .T = c.seq_len, .x = x, .labels = tok, .inputs = tok, .targets = tok + 1};
        float loss;
        if (!(rv = krn_step_begin(ctx, 1, NULL))) {
            if (!(rv = krn_mem_zero(ctx, w->grads, st->layout.nparams * sizeof(float))) &&
                !(rv = model_forward(ctx, w, st->params, &b, &loss)) && !(rv = model_backward(ctx, w, st->params, &b)))
                *P = krn_ctx_next_site(ctx);
            krn_stats stats;
            if (rv)
                abandon_step(ctx, rv);
            else
                rv = krn_step_end(ctx, &stats);
        }
    }
    trn_state_free(st);
    trn_workspace_free(w);
    krn_ctx_free(ctx);
    free(x);
    free(tok);
    return rv ? ovt_fail_wrap(rv, "counting the sites of one shard") : 0;
}
