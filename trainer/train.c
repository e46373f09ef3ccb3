/* The training step: model forward/backward, then the optimizer, all inside
 * one numbered step of a krn_ctx. */
#include "trainer/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bigmem.h"
#include "kernels/grid.h"
#include "kernels/ops.h"
#include "trainer/schedule.h"
#include "trainer/workspace.h"

int trn_workspace_new(trn_workspace **out, const trn_run_config *rc)
{
    *out = NULL;
    int rv = trn_config_check(rc);
    if (rv)
        return rv;
    trn_workspace *w = calloc(1, sizeof *w);
    if (!w)
        return ovt_fail(OVT_ENOMEM, "out of memory for the model workspace");
    w->config = *rc;
    if ((rv = trn_layout_build(&w->layout, &rc->model)))
        goto fail;
    const trn_model_config *m = &rc->model;
    if (m->kind == TRN_MODEL_GPT2) {
        size_t n = trn_gpt2_acts_size(m, rc->batch_size, rc->seq_len);
        size_t nd = trn_gpt2_dacts_size(m, rc->batch_size, rc->seq_len);
        w->mem_floats = n + nd;
        w->mem = ovt_big_calloc(n + nd, sizeof(float));
        w->grads = ovt_big_calloc(w->layout.nparams, sizeof(float));
        if (!w->mem || !w->grads) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory for GPT-2 activations (%zu + %zu floats) and gradients", n, nd);
            goto fail;
        }
        trn_gpt2_acts_slice(&w->acts, m, rc->batch_size, rc->seq_len, w->mem);
        trn_gpt2_dacts_slice(&w->dacts, m, rc->batch_size, rc->seq_len, w->mem + n, &w->acts);
        *out = w;
        return 0;
    }
    size_t B = rc->batch_size, total = 0;
    for (uint32_t l = 0; l <= m->n_layer; l++) {
        size_t o = l == m->n_layer ? m->n_class : m->width;
        total += 2 * B * o + (l < m->n_layer ? 2 * B * o : 0);
    }
    total += B * m->n_class + B;
    w->mem_floats = total;
    w->mem = calloc(total, sizeof(float));
    w->grads = calloc(w->layout.nparams, sizeof(float));
    if (!w->mem || !w->grads) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for activations (%zu floats) and gradients", total);
        goto fail;
    }
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
    free(w->mem);
    free(w->grads);
    free(w);
}

float *trn_workspace_grads(trn_workspace *w)
{
    return w->grads;
}

static int check_batch(const trn_workspace *w, const trn_batch *batch)
{
    const trn_run_config *rc = &w->config;
    if (batch->B != rc->batch_size || (rc->model.kind == TRN_MODEL_GPT2 && batch->T != rc->seq_len))
        return ovt_fail(OVT_EINVAL, "batch of %u x %u does not match the run config's %u x %u", batch->B,
                        batch->T, rc->batch_size, rc->seq_len);
    if (rc->model.kind == TRN_MODEL_MLP && (!batch->x || !batch->labels))
        return ovt_fail(OVT_EINVAL, "an MLP batch needs features and labels");
    if (rc->model.kind == TRN_MODEL_GPT2 && (!batch->inputs || !batch->targets))
        return ovt_fail(OVT_EINVAL, "a GPT-2 batch needs input and target tokens");
    return 0;
}

static int model_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch, float *loss)
{
    if (w->config.model.kind == TRN_MODEL_GPT2)
        return trn_gpt2_forward(ctx, w, params, batch, loss);
    return trn_mlp_forward(ctx, w, params, batch, loss);
}

static int model_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch)
{
    if (w->config.model.kind == TRN_MODEL_GPT2)
        return trn_gpt2_backward(ctx, w, params, batch);
    return trn_mlp_backward(ctx, w, params, batch);
}

static int optimizer_step(krn_ctx *ctx, trn_workspace *w, trn_state *st, uint64_t i, trn_step_info *info)
{
    const trn_run_config *rc = &st->config;
    int b = (int)rc->grid_bits;
    size_t n = st->layout.nparams;
    float norm, scale = 1.0f, lr, bc1, bc2;
    int rv;
    if ((rv = krn_grad_norm(ctx, &norm, w->grads, n)))
        return rv;
    if (rc->grad_clip > 0 && (rv = krn_clip_factor(ctx, &scale, norm, krn_grid_round(rc->grad_clip, b))))
        return rv;
    double lr64 = trn_schedule_lr(rc, i); /* + - * / only: the site is exact */
    const krn_band exact = {.kind = KRN_BAND_ZERO};
    if ((rv = krn_site(ctx, "schedule.lr", &lr, &lr64, 1, &exact)))
        return rv;
    float beta1 = krn_grid_round(rc->beta1, b), beta2 = krn_grid_round(rc->beta2, b);
    if ((rv = krn_adamw_corrections(ctx, &bc1, &bc2, beta1, beta2, i)))
        return rv;
    if ((rv = krn_adamw_update(ctx, st->params, st->m, st->v, w->grads, bc1, bc2, lr, beta1, beta2,
                               krn_grid_round(rc->eps, b), krn_grid_round(rc->weight_decay, b), scale, n)))
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

int trn_train_step(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                   trn_step_info *info)
{
    memset(info, 0, sizeof *info);
    int rv = check_batch(w, batch);
    if (rv)
        return rv;
    uint64_t i = st->step + 1;
    if ((rv = krn_step_begin(ctx, i, log)))
        return rv;
    memset(w->grads, 0, st->layout.nparams * sizeof(float));
    if ((rv = model_forward(ctx, w, st->params, batch, &info->loss)) ||
        (rv = model_backward(ctx, w, st->params, batch)) || (rv = optimizer_step(ctx, w, st, i, info))) {
        abandon_step(ctx, rv);
        return step_fail(rv, i);
    }
    if ((rv = krn_step_end(ctx, &info->stats)))
        return step_fail(rv, i);
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
    if ((rv = model_forward(ctx, w, st->params, batch, loss))) {
        abandon_step(ctx, rv);
        return rv;
    }
    krn_stats stats;
    return krn_step_end(ctx, &stats);
}
