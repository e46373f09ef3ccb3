#include "examples/demo/fp32.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/schedule.h"

struct demo_fp32 {
    trn_run_config config;
    trn_layout layout;
    float *grads;
    float *mem;
    float *pre[TRN_MAX_LAYERS + 1], *dpre[TRN_MAX_LAYERS + 1];
    float *act[TRN_MAX_LAYERS], *dact[TRN_MAX_LAYERS];
    float *probs;
};

static size_t dim_out(const trn_model_config *m, uint32_t l)
{
    return l == m->n_layer ? m->n_class : m->width;
}

static size_t dim_in(const trn_model_config *m, uint32_t l)
{
    return l == 0 ? m->in_dim : m->width;
}

int demo_fp32_new(demo_fp32 **out, const trn_run_config *rc)
{
    *out = NULL;
    if (rc->model.kind != TRN_MODEL_MLP)
        return ovt_fail(OVT_EINVAL, "plain FP32 training is implemented for the MLP only");
    demo_fp32 *w = calloc(1, sizeof *w);
    if (!w)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    w->config = *rc;
    int rv = trn_layout_build(&w->layout, &rc->model);
    if (rv) {
        free(w);
        return rv;
    }
    const trn_model_config *m = &rc->model;
    size_t B = rc->batch_size, total = B * m->n_class;
    for (uint32_t l = 0; l <= m->n_layer; l++)
        total += (l < m->n_layer ? 4 : 2) * B * dim_out(m, l);
    w->mem = calloc(total, sizeof(float));
    w->grads = calloc(w->layout.nparams, sizeof(float));
    if (!w->mem || !w->grads) {
        demo_fp32_free(w);
        return ovt_fail(OVT_ENOMEM, "out of memory for plain FP32 activations");
    }
    float *p = w->mem;
    for (uint32_t l = 0; l <= m->n_layer; l++) {
        size_t o = B * dim_out(m, l);
        w->pre[l] = p, p += o;
        w->dpre[l] = p, p += o;
        if (l < m->n_layer) {
            w->act[l] = p, p += o;
            w->dact[l] = p, p += o;
        }
    }
    w->probs = p;
    *out = w;
    return 0;
}

void demo_fp32_free(demo_fp32 *w)
{
    if (!w)
        return;
    free(w->mem);
    free(w->grads);
    free(w);
}

/* sum_k a[k*sa] * b[k*sb] in float, forward or backward over k. */
static float dot(const float *a, size_t sa, const float *b, size_t sb, size_t n, bool reversed)
{
    float s = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = reversed ? n - 1 - i : i;
        s += a[k * sa] * (b ? b[k * sb] : 1.0f);
    }
    return s;
}

static const float gelu_s = 0.7978845608028654f;

int demo_fp32_step(demo_fp32 *w, trn_state *st, const trn_batch *batch, bool reversed, float *loss)
{
    const trn_run_config *rc = &w->config;
    const trn_model_config *m = &rc->model;
    size_t B = batch->B, V = m->n_class, n = w->layout.nparams;
    trn_mlp_tensors p, g;
    trn_mlp_slice(&p, &w->layout, st->params);
    trn_mlp_slice(&g, &w->layout, w->grads);
    memset(w->grads, 0, n * sizeof(float));
    /* Forward. */
    const float *in = batch->x;
    for (uint32_t l = 0; l <= m->n_layer; l++) {
        size_t C = dim_in(m, l), OC = dim_out(m, l);
        for (size_t r = 0; r < B; r++)
            for (size_t o = 0; o < OC; o++)
                w->pre[l][r * OC + o] = dot(in + r * C, 1, p.w[l] + o * C, 1, C, reversed) + p.b[l][o];
        if (l == m->n_layer)
            break;
        for (size_t i = 0; i < B * OC; i++) {
            float x = w->pre[l][i];
            w->act[l][i] = 0.5f * x * (1.0f + tanhf(gelu_s * (x + 0.044715f * x * x * x)));
        }
        in = w->act[l];
    }
    const float *logits = w->pre[m->n_layer];
    float total = 0;
    for (size_t r = 0; r < B; r++) {
        const float *z = logits + r * V;
        float mx = z[0];
        for (size_t j = 1; j < V; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (size_t j = 0; j < V; j++)
            w->probs[r * V + j] = expf(z[j] - mx);
        float s = dot(w->probs + r * V, 1, NULL, 0, V, reversed);
        for (size_t j = 0; j < V; j++)
            w->probs[r * V + j] /= s;
        total += logf(s) - (z[batch->labels[r]] - mx);
    }
    *loss = total / (float)B;
    if (!isfinite(*loss))
        return ovt_fail(OVT_ENUMERIC, "plain FP32 step %llu: non-finite loss", (unsigned long long)st->step + 1);
    /* Backward. */
    for (size_t r = 0; r < B; r++)
        for (size_t j = 0; j < V; j++)
            w->dpre[m->n_layer][r * V + j] = (w->probs[r * V + j] - (j == (size_t)batch->labels[r])) / (float)B;
    for (uint32_t l = m->n_layer + 1; l-- > 0;) {
        size_t C = dim_in(m, l), OC = dim_out(m, l);
        const float *x = l == 0 ? batch->x : w->act[l - 1];
        for (size_t o = 0; o < OC; o++) {
            for (size_t c = 0; c < C; c++)
                g.w[l][o * C + c] = dot(w->dpre[l] + o, OC, x + c, C, B, reversed);
            g.b[l][o] = dot(w->dpre[l] + o, OC, NULL, 0, B, reversed);
        }
        if (l == 0)
            break;
        for (size_t r = 0; r < B; r++)
            for (size_t c = 0; c < C; c++)
                w->dact[l - 1][r * C + c] = dot(w->dpre[l] + r * OC, 1, p.w[l] + c, C, OC, reversed);
        for (size_t i = 0; i < B * C; i++) {
            float xv = w->pre[l - 1][i], t = tanhf(gelu_s * (xv + 0.044715f * xv * xv * xv));
            float d = 0.5f * (1.0f + t) + 0.5f * xv * (1.0f - t * t) * gelu_s * (1.0f + 3.0f * 0.044715f * xv * xv);
            w->dpre[l - 1][i] = w->dact[l - 1][i] * d;
        }
    }
    /* Clip, schedule, AdamW. */
    float norm = sqrtf(dot(w->grads, 1, w->grads, 1, n, reversed));
    float clip = (float)rc->grad_clip, scale = clip > 0 && norm > clip ? clip / norm : 1.0f;
    uint64_t t = st->step + 1;
    float lr = (float)rc->lr;
    if (rc->warmup_steps && t <= rc->warmup_steps)
        lr = (float)rc->lr * (float)t / (float)rc->warmup_steps;
    else if (rc->decay_steps > rc->warmup_steps && t >= rc->decay_steps)
        lr = (float)rc->lr_min;
    else if (rc->decay_steps > rc->warmup_steps && rc->schedule == TRN_SCHEDULE_COSINE)
        lr = (float)rc->lr_min + (float)(rc->lr - rc->lr_min) *
                                     (0.5f * (1.0f + (float)trn_cospi((double)((float)(t - rc->warmup_steps) /
                                                                               (float)(rc->decay_steps - rc->warmup_steps)))));
    else if (rc->decay_steps > rc->warmup_steps)
        lr = (float)rc->lr - (float)(rc->lr - rc->lr_min) * (float)(t - rc->warmup_steps) /
                                 (float)(rc->decay_steps - rc->warmup_steps);
    float b1 = (float)rc->beta1, b2 = (float)rc->beta2, eps = (float)rc->eps, wd = (float)rc->weight_decay;
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    for (size_t i = 0; i < n; i++) {
        float gi = w->grads[i] * scale;
        st->m[i] = b1 * st->m[i] + (1.0f - b1) * gi;
        st->v[i] = b2 * st->v[i] + (1.0f - b2) * (gi * gi);
        st->params[i] -= lr * ((st->m[i] / bc1) / (sqrtf(st->v[i] / bc2) + eps) + wd * st->params[i]);
    }
    st->step = t;
    return 0;
}
