/* GPT-2 (llm.c's structure) on kernels/ops.h: the order of ops below fixes
 * the rounding sites of a GPT-2 step. Pre-norm blocks: x += attn(ln1(x)),
 * x += mlp(ln2(x)); final layernorm; output head tied to wte; mean
 * cross-entropy over all B*T positions. */
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

static void act_sizes(size_t sizes[TRN_GPT2_NACTS], const trn_model_config *m, size_t B, size_t T)
{
    size_t C = m->width, L = m->n_layer, NH = m->n_head, V = m->vocab, BT = B * T;
    size_t s[TRN_GPT2_NACTS] = {BT * C,          L * BT * C,     L * BT,     L * BT,      L * BT * 3 * C,
                                L * BT * C,      L * B * NH * T * T, L * B * NH * T * T, L * BT * C,
                                L * BT * C,      L * BT * C,     L * BT,     L * BT,      L * BT * 4 * C,
                                L * BT * 4 * C,  L * BT * C,     L * BT * C, BT * C,      BT,
                                BT,              BT * V,         BT * V,     BT};
    memcpy(sizes, s, sizeof s);
}

size_t trn_gpt2_acts_size(const trn_model_config *m, size_t B, size_t T)
{
    size_t sizes[TRN_GPT2_NACTS], total = 0;
    act_sizes(sizes, m, B, T);
    for (int i = 0; i < TRN_GPT2_NACTS; i++)
        total += sizes[i];
    return total;
}

/* Points out's slots at consecutive pieces of base, sizes[i] floats each. */
static void slice_by(trn_gpt2_acts *out, const size_t sizes[TRN_GPT2_NACTS], float *base)
{
    float **ptrs[TRN_GPT2_NACTS] = {
        &out->encoded, &out->ln1,      &out->ln1_mean, &out->ln1_rstd, &out->qkv,      &out->atty,
        &out->preatt,  &out->att,      &out->attproj,  &out->residual2, &out->ln2,     &out->ln2_mean,
        &out->ln2_rstd, &out->fch,     &out->fch_gelu, &out->fcproj,   &out->residual3, &out->lnf,
        &out->lnf_mean, &out->lnf_rstd, &out->logits,  &out->probs,    &out->losses};
    trn_acts_slice_by(ptrs, sizes, TRN_GPT2_NACTS, base);
}

void trn_gpt2_acts_slice(trn_gpt2_acts *out, const trn_model_config *m, size_t B, size_t T, float *base)
{
    size_t sizes[TRN_GPT2_NACTS];
    act_sizes(sizes, m, B, T);
    slice_by(out, sizes, base);
}

/* The gradient set has no slots of its own for logits and probs (B*T*V
 * each, 103 MB together for GPT-2 small at B = 4, T = 64): dlogits is
 * written over the forward set's logits, which nothing reads once the
 * cross-entropy forward has made probs, and probs has no gradient. */
size_t trn_gpt2_dacts_size(const trn_model_config *m, size_t B, size_t T)
{
    return trn_gpt2_acts_size(m, B, T) - 2 * B * T * (size_t)m->vocab;
}

void trn_gpt2_dacts_slice(trn_gpt2_acts *out, const trn_model_config *m, size_t B, size_t T, float *base,
                          const trn_gpt2_acts *acts)
{
    size_t sizes[TRN_GPT2_NACTS];
    act_sizes(sizes, m, B, T);
    sizes[20] = sizes[21] = 0; /* logits, probs */
    slice_by(out, sizes, base);
    out->logits = acts->logits;
    out->probs = NULL;
}

int trn_gpt2_forward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch, float *loss)
{
    const trn_model_config *m = &w->config.model;
    size_t B = batch->B, T = batch->T, C = m->width, NH = m->n_head, V = m->vocab, BT = B * T;
    trn_gpt2_tensors p;
    trn_gpt2_slice(&p, &w->layout, (float *)params);
    trn_gpt2_acts *a = &w->acts;
    int rv;
    TRY(krn_encoder_forward(ctx, a->encoded, batch->inputs, p.wte, p.wpe, B, T, C, V));
    for (size_t l = 0; l < m->n_layer; l++) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        float *ln1 = a->ln1 + l * BT * C, *ln1_mean = a->ln1_mean + l * BT, *ln1_rstd = a->ln1_rstd + l * BT;
        float *qkv = a->qkv + l * BT * 3 * C, *atty = a->atty + l * BT * C;
        float *preatt = a->preatt + l * B * NH * T * T, *att = a->att + l * B * NH * T * T;
        float *attproj = a->attproj + l * BT * C, *residual2 = a->residual2 + l * BT * C;
        float *ln2 = a->ln2 + l * BT * C, *ln2_mean = a->ln2_mean + l * BT, *ln2_rstd = a->ln2_rstd + l * BT;
        float *fch = a->fch + l * BT * 4 * C, *fch_gelu = a->fch_gelu + l * BT * 4 * C;
        float *fcproj = a->fcproj + l * BT * C, *residual3 = a->residual3 + l * BT * C;
        TRY(krn_layernorm_forward(ctx, ln1, ln1_mean, ln1_rstd, residual, p.ln1w + l * C, p.ln1b + l * C, BT, C));
        TRY(krn_matmul_forward(ctx, qkv, ln1, p.qkvw + l * 3 * C * C, p.qkvb + l * 3 * C, BT, C, 3 * C));
        TRY(krn_attention_forward(ctx, atty, preatt, att, qkv, B, T, C, NH));
        TRY(krn_matmul_forward(ctx, attproj, atty, p.attprojw + l * C * C, p.attprojb + l * C, BT, C, C));
        TRY(krn_residual_forward(ctx, residual2, residual, attproj, BT * C));
        TRY(krn_layernorm_forward(ctx, ln2, ln2_mean, ln2_rstd, residual2, p.ln2w + l * C, p.ln2b + l * C, BT, C));
        TRY(krn_matmul_forward(ctx, fch, ln2, p.fcw + l * 4 * C * C, p.fcb + l * 4 * C, BT, C, 4 * C));
        TRY(krn_gelu_forward(ctx, fch_gelu, fch, BT * 4 * C));
        TRY(krn_matmul_forward(ctx, fcproj, fch_gelu, p.fcprojw + l * C * 4 * C, p.fcprojb + l * C, BT, 4 * C, C));
        TRY(krn_residual_forward(ctx, residual3, residual2, fcproj, BT * C));
    }
    const float *last = a->residual3 + (m->n_layer - 1) * BT * C;
    TRY(krn_layernorm_forward(ctx, a->lnf, a->lnf_mean, a->lnf_rstd, last, p.lnfw, p.lnfb, BT, C));
    TRY(krn_matmul_forward(ctx, a->logits, a->lnf, p.wte, NULL, BT, C, V));
    TRY(krn_crossentropy_forward(ctx, loss, a->losses, a->probs, a->logits, batch->targets, BT, V));
    return 0;
}

int trn_gpt2_backward(krn_ctx *ctx, trn_workspace *w, const float *params, const trn_batch *batch)
{
    const trn_model_config *m = &w->config.model;
    size_t B = batch->B, T = batch->T, C = m->width, NH = m->n_head, V = m->vocab, BT = B * T;
    trn_gpt2_tensors p, g;
    trn_gpt2_slice(&p, &w->layout, (float *)params);
    trn_gpt2_slice(&g, &w->layout, w->grads);
    trn_gpt2_acts *a = &w->acts, *d = &w->dacts;
    /* Backward ops accumulate: every activation gradient starts at zero
     * (dlogits over the forward's logits, trn_gpt2_dacts_slice). */
    int rv;
    TRY(krn_mem_zero(ctx, d->encoded, trn_gpt2_dacts_size(m, B, T) * sizeof(float)));
    TRY(krn_mem_zero(ctx, d->logits, BT * V * sizeof(float)));
    krn_trace_zero(ctx, d->encoded, trn_gpt2_dacts_size(m, B, T));
    krn_trace_zero(ctx, d->logits, BT * V);
    TRY(krn_crossentropy_backward(ctx, d->logits, a->probs, batch->targets, 1.0f, BT, V));
    TRY(krn_matmul_backward(ctx, d->lnf, g.wte, NULL, d->logits, a->lnf, p.wte, BT, C, V));
    const float *last = a->residual3 + (m->n_layer - 1) * BT * C;
    float *dlast = d->residual3 + (m->n_layer - 1) * BT * C;
    TRY(krn_layernorm_backward(ctx, dlast, g.lnfw, g.lnfb, d->lnf, last, p.lnfw, a->lnf_mean, a->lnf_rstd, BT,
                               C));
    for (size_t l = m->n_layer; l-- > 0;) {
        const float *residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        float *dresidual = l == 0 ? d->encoded : d->residual3 + (l - 1) * BT * C;
        size_t o = l * BT * C, o3 = l * BT * 3 * C, o4 = l * BT * 4 * C, on = l * BT, oa = l * B * NH * T * T;
        TRY(krn_residual_backward(ctx, d->residual2 + o, d->fcproj + o, d->residual3 + o, BT * C));
        TRY(krn_matmul_backward(ctx, d->fch_gelu + o4, g.fcprojw + l * C * 4 * C, g.fcprojb + l * C, d->fcproj + o,
                                a->fch_gelu + o4, p.fcprojw + l * C * 4 * C, BT, 4 * C, C));
        TRY(krn_gelu_backward(ctx, d->fch + o4, a->fch + o4, d->fch_gelu + o4, BT * 4 * C));
        TRY(krn_matmul_backward(ctx, d->ln2 + o, g.fcw + l * 4 * C * C, g.fcb + l * 4 * C, d->fch + o4, a->ln2 + o,
                                p.fcw + l * 4 * C * C, BT, C, 4 * C));
        TRY(krn_layernorm_backward(ctx, d->residual2 + o, g.ln2w + l * C, g.ln2b + l * C, d->ln2 + o,
                                   a->residual2 + o, p.ln2w + l * C, a->ln2_mean + on, a->ln2_rstd + on, BT, C));
        TRY(krn_residual_backward(ctx, dresidual, d->attproj + o, d->residual2 + o, BT * C));
        TRY(krn_matmul_backward(ctx, d->atty + o, g.attprojw + l * C * C, g.attprojb + l * C, d->attproj + o,
                                a->atty + o, p.attprojw + l * C * C, BT, C, C));
        TRY(krn_attention_backward(ctx, d->qkv + o3, d->preatt + oa, d->att + oa, d->atty + o, a->qkv + o3,
                                   a->att + oa, B, T, C, NH));
        TRY(krn_matmul_backward(ctx, d->ln1 + o, g.qkvw + l * 3 * C * C, g.qkvb + l * 3 * C, d->qkv + o3,
                                a->ln1 + o, p.qkvw + l * 3 * C * C, BT, C, 3 * C));
        TRY(krn_layernorm_backward(ctx, dresidual, g.ln1w + l * C, g.ln1b + l * C, d->ln1 + o, residual,
                                   p.ln1w + l * C, a->ln1_mean + on, a->ln1_rstd + on, BT, C));
    }
    TRY(krn_encoder_backward(ctx, g.wte, g.wpe, d->encoded, batch->inputs, B, T, C, V));
    return 0;
}
#undef TRY
