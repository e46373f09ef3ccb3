/* Llama (llama2.c's structure) on kernels/ops.h: the order of ops below
 * fixes the rounding sites of a Llama step. Token embedding, no position
 * embedding; the rotary table once per forward; pre-norm blocks:
 * x += wo(attn(rope(wq h), rope(wk h), wv h)) with h = rmsnorm(x), then
 * x += w2(silu(w1 h) * w3 h) with h = rmsnorm(x); final RMSNorm; output head
 * wcls (wte when tied); mean cross-entropy over all B*T positions. */
#include <string.h>

#include "kernels/ops.h"
#include "kernels/trace.h"
#include "trainer/train.h"
#include "trainer/workspace.h"

/* Runs one op; returns its error from the enclosing function (rv in scope). */
#define TRY(call)          \
    do {                   \
        if ((rv = (call))) \
            return rv;     \
    } while (0)

#define LOGITS_SLOT 24
#define PROBS_SLOT 25

static void act_sizes(size_t s[TRN_LLAMA_NACTS], const trn_model_config *m, size_t B, size_t T)
{
    size_t C = m->width, L = m->n_layer, NH = m->n_head, V = m->vocab, BT = B * T, H = m->hidden;
    size_t hs = C / NH, KV = m->n_kv_head * hs, TT = L * B * NH * T * T;
    size_t sizes[TRN_LLAMA_NACTS] = {
        BT * C,     T * hs / 2, T * hs / 2, L * BT * C, L * BT,     L * BT * C, L * BT * C,
        L * BT * KV, L * BT * KV, L * BT * KV, TT,       TT,         L * BT * C, L * BT * C,
        L * BT * C, L * BT * C, L * BT,     L * BT * H, L * BT * H, L * BT * H, L * BT * C,
        L * BT * C, BT * C,     BT,         BT * V,     BT * V,     BT};
    memcpy(s, sizes, sizeof sizes);
}

size_t trn_llama_acts_size(const trn_model_config *m, size_t B, size_t T)
{
    size_t sizes[TRN_LLAMA_NACTS], total = 0;
    act_sizes(sizes, m, B, T);
    for (int i = 0; i < TRN_LLAMA_NACTS; i++)
        total += sizes[i];
    return total;
}

static void slice_by(trn_llama_acts *out, const size_t sizes[TRN_LLAMA_NACTS], float *base)
{
    float **ptrs[TRN_LLAMA_NACTS] = {
        &out->encoded,  &out->rope_cos, &out->rope_sin, &out->ln1,      &out->ln1_rstd,  &out->q,
        &out->qr,       &out->k,        &out->kr,       &out->v,        &out->preatt,    &out->att,
        &out->atty,     &out->attproj,  &out->residual2, &out->ln2,     &out->ln2_rstd,  &out->h1,
        &out->h3,       &out->hg,       &out->fcproj,   &out->residual3, &out->lnf,      &out->lnf_rstd,
        &out->logits,   &out->probs,    &out->losses};
    trn_acts_slice_by(ptrs, sizes, TRN_LLAMA_NACTS, base);
}

void trn_llama_acts_slice(trn_llama_acts *out, const trn_model_config *m, size_t B, size_t T, float *base)
{
    size_t sizes[TRN_LLAMA_NACTS];
    act_sizes(sizes, m, B, T);
    slice_by(out, sizes, base);
}

/* As GPT-2's: dlogits is written over the forward's logits, probs has no
 * gradient. */
size_t trn_llama_dacts_size(const trn_model_config *m, size_t B, size_t T)
{
    return trn_llama_acts_size(m, B, T) - 2 * B * T * (size_t)m->vocab;
}

void trn_llama_dacts_slice(trn_llama_acts *out, const trn_model_config *m, size_t B, size_t T, float *base,
                           const trn_llama_acts *acts)
{
    size_t sizes[TRN_LLAMA_NACTS];
    act_sizes(sizes, m, B, T);
    sizes[LOGITS_SLOT] = sizes[PROBS_SLOT] = 0;
    slice_by(out, sizes, base);
    out->logits = acts->logits;
    out->probs = NULL;
}

/* The shapes of one call. */
typedef struct {
    size_t B, T, C, NH, NKV, hs, KV, H, V, BT;
} dims;

static dims dims_of(const trn_model_config *m, const trn_batch *batch)
{
    dims d = {.B = batch->B, .T = batch->T, .C = m->width, .NH = m->n_head, .NKV = m->n_kv_head,
              .H = m->hidden, .V = m->vocab};
    d.hs = d.C / d.NH;
    d.KV = d.NKV * d.hs;
    d.BT = d.B * d.T;
    return d;
}

/* One block's forward: attention, then the MLP, each with its RMSNorm. */
static int block_forward(krn_ctx *ctx, const trn_llama_acts *a, const trn_llama_tensors *p, const dims *d,
                         double eps, size_t l)
{
    size_t B = d->B, T = d->T, C = d->C, BT = d->BT, KV = d->KV, H = d->H;
    size_t o = l * BT * C, okv = l * BT * KV, oh = l * BT * H, on = l * BT, oa = l * B * d->NH * T * T;
    const float *residual = l == 0 ? a->encoded : a->residual3 + o - BT * C;
    int rv;
    TRY(krn_rmsnorm_forward(ctx, a->ln1 + o, a->ln1_rstd + on, residual, p->rms_att + l * C, eps, BT, C));
    TRY(krn_matmul_forward(ctx, a->q + o, a->ln1 + o, p->wq + l * C * C, NULL, BT, C, C));
    TRY(krn_matmul_forward(ctx, a->k + okv, a->ln1 + o, p->wk + l * KV * C, NULL, BT, C, KV));
    TRY(krn_matmul_forward(ctx, a->v + okv, a->ln1 + o, p->wv + l * KV * C, NULL, BT, C, KV));
    TRY(krn_rope_forward(ctx, a->qr + o, a->q + o, a->rope_cos, a->rope_sin, B, T, d->NH, d->hs));
    TRY(krn_rope_forward(ctx, a->kr + okv, a->k + okv, a->rope_cos, a->rope_sin, B, T, d->NKV, d->hs));
    TRY(krn_gqa_forward(ctx, a->atty + o, a->preatt + oa, a->att + oa, a->qr + o, a->kr + okv, a->v + okv, B, T,
                        d->NH, d->NKV, d->hs));
    TRY(krn_matmul_forward(ctx, a->attproj + o, a->atty + o, p->wo + l * C * C, NULL, BT, C, C));
    TRY(krn_residual_forward(ctx, a->residual2 + o, residual, a->attproj + o, BT * C));
    TRY(krn_rmsnorm_forward(ctx, a->ln2 + o, a->ln2_rstd + on, a->residual2 + o, p->rms_ffn + l * C, eps, BT, C));
    TRY(krn_matmul_forward(ctx, a->h1 + oh, a->ln2 + o, p->w1 + l * H * C, NULL, BT, C, H));
    TRY(krn_matmul_forward(ctx, a->h3 + oh, a->ln2 + o, p->w3 + l * H * C, NULL, BT, C, H));
    TRY(krn_swiglu_forward(ctx, a->hg + oh, a->h1 + oh, a->h3 + oh, BT * H));
    TRY(krn_matmul_forward(ctx, a->fcproj + o, a->hg + oh, p->w2 + l * C * H, NULL, BT, H, C));
    TRY(krn_residual_forward(ctx, a->residual3 + o, a->residual2 + o, a->fcproj + o, BT * C));
    return 0;
}

int trn_llama_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch, float *loss)
{
    const trn_model_config *m = &w->config.model;
    dims d = dims_of(m, batch);
    trn_llama_tensors p;
    trn_llama_slice(&p, &w->layout, (float *)params);
    trn_llama_acts *a = &w->lacts;
    int rv;
    TRY(krn_encoder_forward(ctx, a->encoded, batch->inputs, p.wte, NULL, d.B, d.T, d.C, d.V));
    TRY(krn_rope_table(ctx, a->rope_cos, a->rope_sin, d.T, d.hs, m->rope_theta));
    for (size_t l = 0; l < m->n_layer; l++)
        TRY(block_forward(ctx, a, &p, &d, m->norm_eps, l));
    const float *last = a->residual3 + (m->n_layer - 1) * d.BT * d.C;
    TRY(krn_rmsnorm_forward(ctx, a->lnf, a->lnf_rstd, last, p.rms_final, m->norm_eps, d.BT, d.C));
    TRY(krn_matmul_forward(ctx, a->logits, a->lnf, p.wcls, NULL, d.BT, d.C, d.V));
    TRY(krn_crossentropy_forward(ctx, loss, a->losses, a->probs, a->logits, batch->targets, d.BT, d.V));
    return 0;
}

/* One block's backward, the forward's ops in reverse; dresidual receives
 * the gradient of the block's input. */
static int block_backward(krn_ctx *ctx, const trn_llama_acts *a, const trn_llama_acts *dd, const trn_llama_tensors *p,
                          const trn_llama_tensors *g, const dims *d, size_t l)
{
    size_t B = d->B, T = d->T, C = d->C, BT = d->BT, KV = d->KV, H = d->H;
    size_t o = l * BT * C, okv = l * BT * KV, oh = l * BT * H, on = l * BT, oa = l * B * d->NH * T * T;
    const float *residual = l == 0 ? a->encoded : a->residual3 + o - BT * C;
    float *dresidual = l == 0 ? dd->encoded : dd->residual3 + o - BT * C;
    int rv;
    TRY(krn_residual_backward(ctx, dd->residual2 + o, dd->fcproj + o, dd->residual3 + o, BT * C));
    TRY(krn_matmul_backward(ctx, dd->hg + oh, g->w2 + l * C * H, NULL, dd->fcproj + o, a->hg + oh, p->w2 + l * C * H,
                            BT, H, C));
    TRY(krn_swiglu_backward(ctx, dd->h1 + oh, dd->h3 + oh, dd->hg + oh, a->h1 + oh, a->h3 + oh, BT * H));
    TRY(krn_matmul_backward(ctx, dd->ln2 + o, g->w3 + l * H * C, NULL, dd->h3 + oh, a->ln2 + o, p->w3 + l * H * C,
                            BT, C, H));
    TRY(krn_matmul_backward(ctx, dd->ln2 + o, g->w1 + l * H * C, NULL, dd->h1 + oh, a->ln2 + o, p->w1 + l * H * C,
                            BT, C, H));
    TRY(krn_rmsnorm_backward(ctx, dd->residual2 + o, g->rms_ffn + l * C, dd->ln2 + o, a->residual2 + o,
                             p->rms_ffn + l * C, a->ln2_rstd + on, BT, C));
    TRY(krn_residual_backward(ctx, dresidual, dd->attproj + o, dd->residual2 + o, BT * C));
    TRY(krn_matmul_backward(ctx, dd->atty + o, g->wo + l * C * C, NULL, dd->attproj + o, a->atty + o,
                            p->wo + l * C * C, BT, C, C));
    TRY(krn_gqa_backward(ctx, dd->qr + o, dd->kr + okv, dd->v + okv, dd->preatt + oa, dd->att + oa, dd->atty + o,
                         a->qr + o, a->kr + okv, a->v + okv, a->att + oa, B, T, d->NH, d->NKV, d->hs));
    TRY(krn_rope_backward(ctx, dd->q + o, dd->qr + o, a->rope_cos, a->rope_sin, B, T, d->NH, d->hs));
    TRY(krn_rope_backward(ctx, dd->k + okv, dd->kr + okv, a->rope_cos, a->rope_sin, B, T, d->NKV, d->hs));
    TRY(krn_matmul_backward(ctx, dd->ln1 + o, g->wq + l * C * C, NULL, dd->q + o, a->ln1 + o, p->wq + l * C * C, BT,
                            C, C));
    TRY(krn_matmul_backward(ctx, dd->ln1 + o, g->wk + l * KV * C, NULL, dd->k + okv, a->ln1 + o, p->wk + l * KV * C,
                            BT, C, KV));
    TRY(krn_matmul_backward(ctx, dd->ln1 + o, g->wv + l * KV * C, NULL, dd->v + okv, a->ln1 + o, p->wv + l * KV * C,
                            BT, C, KV));
    TRY(krn_rmsnorm_backward(ctx, dresidual, g->rms_att + l * C, dd->ln1 + o, residual, p->rms_att + l * C,
                             a->ln1_rstd + on, BT, C));
    return 0;
}

int trn_llama_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch)
{
    const trn_model_config *m = &w->config.model;
    dims d = dims_of(m, batch);
    trn_llama_tensors p, g;
    trn_llama_slice(&p, &w->layout, (float *)params);
    trn_llama_slice(&g, &w->layout, w->grads);
    trn_llama_acts *a = &w->lacts, *dd = &w->ldacts;
    /* Backward ops accumulate: every activation gradient starts at zero. */
    int rv;
    TRY(krn_mem_zero(ctx, dd->encoded, trn_llama_dacts_size(m, d.B, d.T) * sizeof(float)));
    TRY(krn_mem_zero(ctx, dd->logits, d.BT * d.V * sizeof(float)));
    krn_trace_zero(ctx, dd->encoded, trn_llama_dacts_size(m, d.B, d.T));
    krn_trace_zero(ctx, dd->logits, d.BT * d.V);
    TRY(krn_crossentropy_backward(ctx, dd->logits, a->probs, batch->targets, 1.0f, d.BT, d.V));
    TRY(krn_matmul_backward(ctx, dd->lnf, g.wcls, NULL, dd->logits, a->lnf, p.wcls, d.BT, d.C, d.V));
    const float *last = a->residual3 + (m->n_layer - 1) * d.BT * d.C;
    float *dlast = dd->residual3 + (m->n_layer - 1) * d.BT * d.C;
    TRY(krn_rmsnorm_backward(ctx, dlast, g.rms_final, dd->lnf, last, p.rms_final, a->lnf_rstd, d.BT, d.C));
    for (size_t l = m->n_layer; l-- > 0;)
        TRY(block_backward(ctx, a, dd, &p, &g, &d, l));
    TRY(krn_encoder_backward(ctx, g.wte, NULL, dd->encoded, batch->inputs, d.B, d.T, d.C, d.V));
    return 0;
}
#undef TRY
