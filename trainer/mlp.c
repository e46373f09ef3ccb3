/* The MLP classifier: n_layer hidden layers of GELU units and a linear
 * output with softmax cross-entropy. The sequence of ops below fixes the
 * rounding sites of an MLP step (the optimizer's follow in train.c). */
#include <string.h>

#include "kernels/ops.h"
#include "kernels/trace.h"
#include "trainer/train.h"
#include "trainer/workspace.h"

static size_t fan_in(const trn_model_config *m, uint32_t l)
{
    return l == 0 ? m->in_dim : m->width;
}

static size_t fan_out(const trn_model_config *m, uint32_t l)
{
    return l == m->n_layer ? m->n_class : m->width;
}

int trn_mlp_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch, float *loss)
{
    const trn_model_config *m = &w->config.model;
    trn_mlp_tensors p;
    trn_mlp_slice(&p, &w->layout, (float *)params);
    size_t B = batch->B;
    const float *in = batch->x;
    int rv;
    for (uint32_t l = 0; l < p.n_linear; l++) {
        size_t C = fan_in(m, l), OC = fan_out(m, l);
        if ((rv = krn_matmul_forward(ctx, w->pre[l], in, p.w[l], p.b[l], B, C, OC)))
            return rv;
        if (l == m->n_layer)
            break;
        if ((rv = krn_gelu_forward(ctx, w->act[l], w->pre[l], B * OC)))
            return rv;
        in = w->act[l];
    }
    return krn_crossentropy_forward(ctx, loss, w->losses, w->probs, w->pre[m->n_layer], batch->labels, B,
                                    m->n_class);
}

int trn_mlp_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch)
{
    const trn_model_config *m = &w->config.model;
    trn_mlp_tensors p, g;
    trn_mlp_slice(&p, &w->layout, (float *)params);
    trn_mlp_slice(&g, &w->layout, w->grads);
    size_t B = batch->B;
    int rv;
    for (uint32_t l = 0; l < p.n_linear; l++) {
        if ((rv = krn_mem_zero(ctx, w->dpre[l], B * fan_out(m, l) * sizeof(float))))
            return rv;
        krn_trace_zero(ctx, w->dpre[l], B * fan_out(m, l));
        if (l < m->n_layer) {
            if ((rv = krn_mem_zero(ctx, w->dact[l], B * fan_out(m, l) * sizeof(float))))
                return rv;
            krn_trace_zero(ctx, w->dact[l], B * fan_out(m, l));
        }
    }
    rv = krn_crossentropy_backward(ctx, w->dpre[m->n_layer], w->probs, batch->labels, 1.0f, B, m->n_class);
    if (rv)
        return rv;
    for (uint32_t l = p.n_linear; l-- > 0;) {
        size_t C = fan_in(m, l), OC = fan_out(m, l);
        const float *in = l == 0 ? batch->x : w->act[l - 1];
        float *dinp = l == 0 ? NULL : w->dact[l - 1];
        if ((rv = krn_matmul_backward(ctx, dinp, g.w[l], g.b[l], w->dpre[l], in, p.w[l], B, C, OC)))
            return rv;
        if (l == 0)
            break;
        if ((rv = krn_gelu_backward(ctx, w->dpre[l - 1], w->pre[l - 1], w->dact[l - 1], B * C)))
            return rv;
    }
    return 0;
}
