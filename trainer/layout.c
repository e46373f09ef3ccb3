#include "trainer/layout.h"

#include <stdlib.h>
#include <string.h>

static void add(trn_layout *l, const char *name, uint32_t ndim, uint64_t d0, uint64_t d1, uint64_t d2)
{
    trn_tensor_info *t = &l->t[l->count++];
    t->name = name;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim > 1 ? d1 : 0;
    t->shape[2] = ndim > 2 ? d2 : 0;
    t->size = (size_t)d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    t->offset = l->nparams;
    l->nparams += t->size;
}

static const char *const mlp_w_names[TRN_MAX_LAYERS + 1] = {"w0", "w1", "w2", "w3", "w4",
                                                             "w5", "w6", "w7", "w8"};
static const char *const mlp_b_names[TRN_MAX_LAYERS + 1] = {"b0", "b1", "b2", "b3", "b4",
                                                             "b5", "b6", "b7", "b8"};

int trn_layout_build(trn_layout *out, const trn_model_config *m)
{
    memset(out, 0, sizeof *out);
    int rv = trn_model_check(m);
    if (rv)
        return rv;
    out->model = *m;
    if (m->kind == TRN_MODEL_MLP) {
        for (uint32_t l = 0; l <= m->n_layer; l++) {
            uint64_t in = l == 0 ? m->in_dim : m->width;
            uint64_t o = l == m->n_layer ? m->n_class : m->width;
            add(out, mlp_w_names[l], 2, o, in, 0);
            add(out, mlp_b_names[l], 1, o, 0, 0);
        }
        return 0;
    }
    if (m->kind == TRN_MODEL_LLAMA) {
        uint64_t V = m->vocab, C = m->width, L = m->n_layer, H = m->hidden;
        uint64_t KV = (uint64_t)m->n_kv_head * (C / m->n_head);
        add(out, "wte", 2, V, C, 0);
        add(out, "rms_att", 2, L, C, 0);
        add(out, "wq", 3, L, C, C);
        add(out, "wk", 3, L, KV, C);
        add(out, "wv", 3, L, KV, C);
        add(out, "wo", 3, L, C, C);
        add(out, "rms_ffn", 2, L, C, 0);
        add(out, "w1", 3, L, H, C);
        add(out, "w2", 3, L, C, H);
        add(out, "w3", 3, L, H, C);
        add(out, "rms_final", 1, C, 0, 0);
        if (!m->tied)
            add(out, "wcls", 2, V, C, 0);
        return 0;
    }
    uint64_t V = m->vocab, C = m->width, L = m->n_layer, T = m->max_seq;
    add(out, "wte", 2, V, C, 0);
    add(out, "wpe", 2, T, C, 0);
    add(out, "ln1w", 2, L, C, 0);
    add(out, "ln1b", 2, L, C, 0);
    add(out, "qkvw", 3, L, 3 * C, C);
    add(out, "qkvb", 2, L, 3 * C, 0);
    add(out, "attprojw", 3, L, C, C);
    add(out, "attprojb", 2, L, C, 0);
    add(out, "ln2w", 2, L, C, 0);
    add(out, "ln2b", 2, L, C, 0);
    add(out, "fcw", 3, L, 4 * C, C);
    add(out, "fcb", 2, L, 4 * C, 0);
    add(out, "fcprojw", 3, L, C, 4 * C);
    add(out, "fcprojb", 2, L, C, 0);
    add(out, "lnfw", 1, C, 0, 0);
    add(out, "lnfb", 1, C, 0, 0);
    return 0;
}

void trn_mlp_slice(trn_mlp_tensors *out, const trn_layout *layout, float *base)
{
    if (layout->model.kind != TRN_MODEL_MLP)
        abort(); /* programming error: wrong model kind */
    memset(out, 0, sizeof *out);
    out->n_linear = layout->model.n_layer + 1;
    for (uint32_t l = 0; l < out->n_linear; l++) {
        out->w[l] = base + layout->t[2 * l].offset;
        out->b[l] = base + layout->t[2 * l + 1].offset;
    }
}

void trn_gpt2_slice(trn_gpt2_tensors *out, const trn_layout *layout, float *base)
{
    if (layout->model.kind != TRN_MODEL_GPT2 || layout->count != 16)
        abort(); /* programming error: wrong model kind */
    float **ptrs[16] = {&out->wte,     &out->wpe,      &out->ln1w, &out->ln1b, &out->qkvw,    &out->qkvb,
                        &out->attprojw, &out->attprojb, &out->ln2w, &out->ln2b, &out->fcw,     &out->fcb,
                        &out->fcprojw, &out->fcprojb,  &out->lnfw, &out->lnfb};
    for (int i = 0; i < 16; i++)
        *ptrs[i] = base + layout->t[i].offset;
}

void trn_llama_slice(trn_llama_tensors *out, const trn_layout *layout, float *base)
{
    int tied = layout->model.tied;
    if (layout->model.kind != TRN_MODEL_LLAMA || layout->count != (tied ? 11u : 12u))
        abort(); /* programming error: wrong model kind */
    float **ptrs[12] = {&out->wte, &out->rms_att, &out->wq, &out->wk,        &out->wv,  &out->wo,
                        &out->rms_ffn, &out->w1,  &out->w2, &out->w3, &out->rms_final, &out->wcls};
    for (size_t i = 0; i < layout->count; i++)
        *ptrs[i] = base + layout->t[i].offset;
    if (tied)
        out->wcls = out->wte;
}
