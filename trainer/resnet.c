/* ResNet (torchvision's CIFAR-style structure, issue 29) on
 * kernels/ops.h: the order of ops below fixes the rounding sites of a
 * ResNet step. A 3x3 stem conv, batch norm, ReLU; per stage, residual
 * blocks (basic: conv3x3-bn-relu-conv3x3-bn; bottleneck: conv1x1-bn-relu-
 * conv3x3-bn-relu-conv1x1-bn), the shortcut the identity or a projection
 * (conv1x1 with the block's stride, bn), the sum, ReLU; global average
 * pooling, a linear head, mean cross-entropy.
 *
 * Batch norm in training mode writes the batch's mean and unbiased variance
 * into the gradient vector's slots of the running statistics (momentum 1
 * into zeroed slots: the values themselves); the optimizer then updates the
 * running statistics from those slots once per step (docs/decisions.md). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/trace.h"
#include "trainer/train.h"
#include "trainer/workspace.h"

/* One conv + batch norm (+ ReLU) of the network. */
typedef struct {
    size_t conv, bnw, bnb, rmean, rvar; /* layout tensors */
    size_t C, OC, k, stride, pad, H, W, OH, OW;
    bool relu;
    float *conv_out, *bn_out, *mean, *rstd, *act; /* act: relu(bn_out), or bn_out itself */
    float *dconv, *dbn, *dact;
} rn_unit;

/* One residual block: units first .. first + n - 1 on the main path, the
 * projection unit `proj` (or none: -1), the sum and its ReLU. */
typedef struct {
    size_t first, n;
    long proj;
    const float *in;
    float *din;
    size_t C, OC, H, W, OH, OW;
    float *sum, *out, *dsum, *dout;
} rn_block;

struct trn_resnet_plan {
    size_t nunits, nblocks, B;
    rn_unit u[TRN_MAX_TENSORS / 3];
    rn_block b[64];
    float *pooled, *dpooled, *logits, *dlogits, *probs, *losses; /* (B, Cf), (B, K), (B) */
    size_t Cf, HWf, K;     /* the last stage's channels and positions; the classes */
    size_t fc_w, fc_b;     /* layout tensors */
    float *mem;
    krn_ctx *mem_ctx; /* whose backend memory mem is (trn_tensor_alloc), or NULL */
};

static size_t tensor_index(const trn_layout *l, const char *name)
{
    const trn_tensor_info *t = trn_layout_find(l, name);
    if (!t)
        abort(); /* programming error: the layout and the plan disagree */
    return (size_t)(t - l->t);
}

/* Adds unit "prefix conv / bn" reading (C, H, W) and returns its output size. */
static rn_unit *add_unit(trn_resnet_plan *p, const trn_layout *l, const char *prefix, const char *conv, const char *bn,
                         size_t C, size_t H, size_t W, size_t stride, bool relu)
{
    rn_unit *u = &p->u[p->nunits++];
    char name[TRN_TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s%s.weight", prefix, conv);
    u->conv = tensor_index(l, name);
    const trn_tensor_info *t = &l->t[u->conv];
    snprintf(name, sizeof name, "%s%s.weight", prefix, bn);
    u->bnw = tensor_index(l, name);
    snprintf(name, sizeof name, "%s%s.bias", prefix, bn);
    u->bnb = tensor_index(l, name);
    snprintf(name, sizeof name, "%s%s.running_mean", prefix, bn);
    u->rmean = tensor_index(l, name);
    snprintf(name, sizeof name, "%s%s.running_var", prefix, bn);
    u->rvar = tensor_index(l, name);
    u->OC = t->shape[0];
    u->C = C;
    u->k = t->shape[2];
    u->stride = stride;
    u->pad = u->k / 2;
    u->H = H;
    u->W = W;
    u->OH = (H + 2 * u->pad - u->k) / stride + 1;
    u->OW = (W + 2 * u->pad - u->k) / stride + 1;
    u->relu = relu;
    return u;
}

/* The plan of model m for batches of B: the units and blocks in layout
 * order (trainer/layout.c resnet_layout), then their buffers. */
static void plan_units(trn_resnet_plan *p, const trn_layout *l, const trn_model_config *m)
{
    size_t H = m->in_hw, C = m->width, exp = m->block == 2 ? 4 : 1;
    add_unit(p, l, "", "conv1", "bn1", m->in_ch, H, H, 1, true);
    for (uint32_t s = 0; s < 4 && m->stages[s]; s++) {
        size_t planes = (size_t)m->width << s;
        for (uint32_t bi = 0; bi < m->stages[s]; bi++) {
            char pre[32];
            snprintf(pre, sizeof pre, "layer%u.%u.", s + 1, bi);
            size_t stride = s > 0 && bi == 0 ? 2 : 1;
            rn_block *b = &p->b[p->nblocks++];
            b->first = p->nunits;
            b->C = C;
            b->H = H;
            rn_unit *last;
            if (m->block == 2) {
                add_unit(p, l, pre, "conv1", "bn1", C, H, H, 1, true);
                rn_unit *u2 = add_unit(p, l, pre, "conv2", "bn2", planes, H, H, stride, true);
                last = add_unit(p, l, pre, "conv3", "bn3", planes, u2->OH, u2->OW, 1, false);
            } else {
                rn_unit *u1 = add_unit(p, l, pre, "conv1", "bn1", C, H, H, stride, true);
                last = add_unit(p, l, pre, "conv2", "bn2", planes, u1->OH, u1->OW, 1, false);
            }
            b->n = p->nunits - b->first;
            b->OC = planes * exp;
            b->OH = last->OH;
            b->OW = last->OW;
            /* the projection where the layout has one (trainer/layout.c decides) */
            char proj[sizeof pre + sizeof "downsample.0.weight"];
            snprintf(proj, sizeof proj, "%sdownsample.0.weight", pre);
            b->proj = -1;
            if (trn_layout_find(l, proj)) {
                b->proj = (long)p->nunits;
                add_unit(p, l, pre, "downsample.0", "downsample.1", C, H, H, stride, false);
            }
            C = planes * exp;
            H = b->OH;
        }
    }
    p->Cf = C;
    p->HWf = H * H;
}

/* Slices the activations and their gradients out of one allocation (or
 * counts them, base NULL). */
static size_t plan_slice(trn_resnet_plan *p, float *base)
{
    size_t used = 0, B = p->B;
#define TAKE(ptr, n)                                     \
    do {                                                 \
        (ptr) = base ? base + used : NULL;               \
        used += (n);                                     \
    } while (0)
    for (size_t i = 0; i < p->nunits; i++) {
        rn_unit *u = &p->u[i];
        size_t n = B * u->OC * u->OH * u->OW;
        TAKE(u->conv_out, n);
        TAKE(u->bn_out, n);
        TAKE(u->mean, u->OC);
        TAKE(u->rstd, u->OC);
        TAKE(u->dconv, n);
        TAKE(u->dbn, n);
        if (u->relu) {
            TAKE(u->act, n);
            TAKE(u->dact, n);
        } else {
            u->act = u->bn_out;
            u->dact = u->dbn;
        }
    }
    for (size_t i = 0; i < p->nblocks; i++) {
        rn_block *b = &p->b[i];
        size_t n = B * b->OC * b->OH * b->OW;
        TAKE(b->sum, n);
        TAKE(b->out, n);
        TAKE(b->dsum, n);
        TAKE(b->dout, n);
    }
    TAKE(p->pooled, B * p->Cf);
    TAKE(p->dpooled, B * p->Cf);
    TAKE(p->logits, B * p->K);
    TAKE(p->dlogits, B * p->K);
    TAKE(p->probs, B * p->K);
    TAKE(p->losses, B);
#undef TAKE
    return used;
}

int trn_resnet_plan_new(trn_resnet_plan **out, const trn_layout *l, size_t B, krn_ctx *mem_ctx)
{
    *out = NULL;
    trn_resnet_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory for the ResNet's plan");
    p->B = B;
    p->K = l->model.n_class;
    plan_units(p, l, &l->model);
    p->fc_w = tensor_index(l, "fc.weight");
    p->fc_b = tensor_index(l, "fc.bias");
    size_t n = plan_slice(p, NULL);
    p->mem_ctx = mem_ctx;
    int rv = trn_tensor_alloc(mem_ctx, &p->mem, n, "the ResNet's activations");
    if (rv) {
        free(p);
        return rv;
    }
    plan_slice(p, p->mem);
    *out = p;
    return 0;
}

void trn_resnet_plan_free(trn_resnet_plan *p)
{
    if (p)
        trn_tensor_free(p->mem_ctx, p->mem);
    free(p);
}

const float *trn_resnet_logits(const trn_resnet_plan *p)
{
    return p->logits;
}

/* Runs one op; returns its error from the enclosing function (rv in scope). */
#define TRY(call)          \
    do {                   \
        if ((rv = (call))) \
            return rv;     \
    } while (0)

static int unit_forward(krn_ctx *ctx, const rn_unit *u, const float *in, const float *P, float *G, const trn_layout *l,
                        size_t B, double eps, int eval)
{
    size_t n = B * u->OC * u->OH * u->OW, HW = u->OH * u->OW;
    int rv;
    TRY(krn_conv2d_forward(ctx, u->conv_out, in, P + l->t[u->conv].offset, NULL, B, u->C, u->H, u->W, u->OC, u->k,
                           u->k, u->stride, u->pad));
    if (eval)
        TRY(krn_batchnorm_eval(ctx, u->bn_out, u->conv_out, P + l->t[u->bnw].offset, P + l->t[u->bnb].offset,
                               P + l->t[u->rmean].offset, P + l->t[u->rvar].offset, B, u->OC, HW, eps));
    else /* momentum 1 into the zeroed gradient slots: the batch's own statistics */
        TRY(krn_batchnorm_forward(ctx, u->bn_out, u->mean, u->rstd, G + l->t[u->rmean].offset,
                                  G + l->t[u->rvar].offset, u->conv_out, P + l->t[u->bnw].offset,
                                  P + l->t[u->bnb].offset, B, u->OC, HW, eps, 1.0));
    if (u->relu)
        TRY(krn_relu_forward(ctx, u->act, u->bn_out, n));
    return 0;
}

static int unit_backward(krn_ctx *ctx, const rn_unit *u, float *din, const float *in, const float *P, float *G,
                         const trn_layout *l, size_t B)
{
    size_t n = B * u->OC * u->OH * u->OW, HW = u->OH * u->OW;
    int rv;
    if (u->relu)
        TRY(krn_relu_backward(ctx, u->dbn, u->bn_out, u->dact, n));
    TRY(krn_batchnorm_backward(ctx, u->dconv, G + l->t[u->bnw].offset, G + l->t[u->bnb].offset, u->dbn, u->conv_out,
                               P + l->t[u->bnw].offset, u->mean, u->rstd, B, u->OC, HW));
    TRY(krn_conv2d_backward(ctx, din, G + l->t[u->conv].offset, NULL, u->dconv, in, P + l->t[u->conv].offset, B, u->C,
                            u->H, u->W, u->OC, u->k, u->k, u->stride, u->pad));
    return 0;
}

int trn_resnet_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch, float *loss)
{
    trn_resnet_plan *p = w->resnet;
    const trn_layout *l = &w->layout;
    const trn_model_config *m = &w->config.model;
    size_t B = batch->B;
    float *G = w->grads;
    int rv;
    TRY(unit_forward(ctx, &p->u[0], batch->x, params, G, l, B, m->bn_eps, w->eval_mode));
    const float *x = p->u[0].act;
    for (size_t i = 0; i < p->nblocks; i++) {
        rn_block *b = &p->b[i];
        b->in = x;
        for (size_t k = 0; k < b->n; k++) {
            const rn_unit *u = &p->u[b->first + k];
            TRY(unit_forward(ctx, u, k == 0 ? x : p->u[b->first + k - 1].act, params, G, l, B, m->bn_eps, w->eval_mode));
        }
        const float *shortcut = x;
        if (b->proj >= 0) {
            TRY(unit_forward(ctx, &p->u[b->proj], x, params, G, l, B, m->bn_eps, w->eval_mode));
            shortcut = p->u[b->proj].act;
        }
        size_t n = B * b->OC * b->OH * b->OW;
        TRY(krn_residual_forward(ctx, b->sum, p->u[b->first + b->n - 1].act, shortcut, n));
        TRY(krn_relu_forward(ctx, b->out, b->sum, n));
        x = b->out;
    }
    TRY(krn_avgpool_global_forward(ctx, p->pooled, x, B, p->Cf, p->HWf));
    TRY(krn_matmul_forward(ctx, p->logits, p->pooled, params + l->t[p->fc_w].offset, params + l->t[p->fc_b].offset, B,
                           p->Cf, p->K));
    return krn_crossentropy_forward(ctx, loss, p->losses, p->probs, p->logits, batch->labels, B, p->K);
}

int trn_resnet_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch)
{
    trn_resnet_plan *p = w->resnet;
    const trn_layout *l = &w->layout;
    size_t B = batch->B;
    float *G = w->grads;
    int rv;
    /* every activation gradient starts at zero (the backward ops accumulate) */
    for (size_t i = 0; i < p->nunits; i++) {
        rn_unit *u = &p->u[i];
        size_t n = B * u->OC * u->OH * u->OW;
        TRY(krn_mem_zero(ctx, u->dconv, n * sizeof(float)));
        TRY(krn_mem_zero(ctx, u->dbn, n * sizeof(float)));
        krn_trace_zero(ctx, u->dconv, n);
        krn_trace_zero(ctx, u->dbn, n);
        if (u->relu) {
            TRY(krn_mem_zero(ctx, u->dact, n * sizeof(float)));
            krn_trace_zero(ctx, u->dact, n);
        }
    }
    for (size_t i = 0; i < p->nblocks; i++) {
        size_t n = B * p->b[i].OC * p->b[i].OH * p->b[i].OW;
        TRY(krn_mem_zero(ctx, p->b[i].dsum, n * sizeof(float)));
        TRY(krn_mem_zero(ctx, p->b[i].dout, n * sizeof(float)));
        krn_trace_zero(ctx, p->b[i].dsum, n);
        krn_trace_zero(ctx, p->b[i].dout, n);
    }
    TRY(krn_mem_zero(ctx, p->dpooled, B * p->Cf * sizeof(float)));
    TRY(krn_mem_zero(ctx, p->dlogits, B * p->K * sizeof(float)));
    krn_trace_zero(ctx, p->dpooled, B * p->Cf);
    krn_trace_zero(ctx, p->dlogits, B * p->K);
    TRY(krn_crossentropy_backward(ctx, p->dlogits, p->probs, batch->labels, 1.0f, B, p->K));
    TRY(krn_matmul_backward(ctx, p->dpooled, G + l->t[p->fc_w].offset, G + l->t[p->fc_b].offset, p->dlogits, p->pooled,
                            params + l->t[p->fc_w].offset, B, p->Cf, p->K));
    float *dx = p->nblocks ? p->b[p->nblocks - 1].dout : p->u[0].dact;
    TRY(krn_avgpool_global_backward(ctx, dx, p->dpooled, B, p->Cf, p->HWf));
    for (size_t i = p->nblocks; i-- > 0;) {
        rn_block *b = &p->b[i];
        size_t n = B * b->OC * b->OH * b->OW;
        float *din = i == 0 ? p->u[0].dact : p->b[i - 1].dout;
        rn_unit *last = &p->u[b->first + b->n - 1];
        TRY(krn_relu_backward(ctx, b->dsum, b->sum, b->dout, n));
        /* the sum's two inputs: the main path's last unit and the shortcut */
        float *dshort = b->proj >= 0 ? p->u[b->proj].dact : din;
        TRY(krn_residual_backward(ctx, last->dact, dshort, b->dsum, n));
        if (b->proj >= 0)
            TRY(unit_backward(ctx, &p->u[b->proj], din, b->in, params, G, l, B));
        for (size_t k = b->n; k-- > 0;) {
            const rn_unit *u = &p->u[b->first + k];
            float *dprev = k == 0 ? din : p->u[b->first + k - 1].dact;
            const float *in = k == 0 ? b->in : p->u[b->first + k - 1].act;
            TRY(unit_backward(ctx, u, dprev, in, params, G, l, B));
        }
    }
    /* the stem: its input is the batch, whose gradient nobody needs */
    return unit_backward(ctx, &p->u[0], NULL, batch->x, params, G, l, B);
}
#undef TRY
