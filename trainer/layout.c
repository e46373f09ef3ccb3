#include "trainer/layout.h"

#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tensor named by a format: name of up to 4 dims (unused 0). */
static void addf(trn_layout *l, uint32_t ndim, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3, const char *fmt,
                 ...) OVT_PRINTF(7, 8);
static void addf(trn_layout *l, uint32_t ndim, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3, const char *fmt,
                 ...)
{
    trn_tensor_info *t = &l->t[l->count++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    uint64_t d[4] = {d0, d1, d2, d3};
    t->ndim = ndim;
    t->size = 1;
    for (uint32_t k = 0; k < 4; k++) {
        t->shape[k] = k < ndim ? d[k] : 0;
        t->size *= k < ndim ? (size_t)d[k] : 1;
    }
    t->offset = l->nparams;
    l->nparams += t->size;
}

/* A tensor of up to 3 dims, trainable like every tensor before it (the
 * models other than the ResNet have no buffers). */
static void add(trn_layout *l, const char *name, uint32_t ndim, uint64_t d0, uint64_t d1, uint64_t d2)
{
    addf(l, ndim, d0, d1, d2, 0, "%s", name);
    l->ntrain = l->nparams;
}

static const char *const mlp_w_names[TRN_MAX_LAYERS + 1] = {"w0", "w1", "w2", "w3", "w4",
                                                             "w5", "w6", "w7", "w8"};
static const char *const mlp_b_names[TRN_MAX_LAYERS + 1] = {"b0", "b1", "b2", "b3", "b4",
                                                             "b5", "b6", "b7", "b8"};

/* A convolution's weight and its batch norm's weight and bias, under
 * torchvision's names (prefix "layer1.0.", the conv "conv1", the norm "bn1").
 * Refused where the whole layout would not fit TRN_MAX_TENSORS: the n units
 * so far and this one, 3 tensors and 2 running statistics each, and fc's 2
 * (a config's stages are not bounded otherwise: this is the bound). */
static int conv_bn(trn_layout *l, const char *prefix, const char *conv, const char *bn, uint64_t oc, uint64_t c,
                   uint64_t k)
{
    size_t units = l->count / 3 + 1;
    if (5 * units + 2 > TRN_MAX_TENSORS)
        return ovt_fail(OVT_EINVAL, "this ResNet has more than %d tensors (%zu convolutions with their batch norms "
                        "and counting): fewer blocks in its stages", TRN_MAX_TENSORS, units);
    addf(l, 4, oc, c, k, k, "%s%s.weight", prefix, conv);
    addf(l, 1, oc, 0, 0, 0, "%s%s.weight", prefix, bn);
    addf(l, 1, oc, 0, 0, 0, "%s%s.bias", prefix, bn);
    return 0;
}

/* A CIFAR-style ResNet (3x3 stem, no max pooling) in torchvision's names:
 * the trainable tensors in module order, then every batch norm's
 * running_mean and running_var in the same order (the buffers). */
static int resnet_layout(trn_layout *out, const trn_model_config *m)
{
    uint64_t w = m->width, exp = m->block == 2 ? 4 : 1, in = w;
    int rv;
    if ((rv = conv_bn(out, "", "conv1", "bn1", w, m->in_ch, 3)))
        return rv;
    for (uint32_t s = 0; s < 4 && m->stages[s]; s++) {
        uint64_t planes = w << s;
        for (uint32_t b = 0; b < m->stages[s]; b++) {
            char pre[32];
            snprintf(pre, sizeof pre, "layer%u.%u.", s + 1, b);
            uint64_t stride = s > 0 && b == 0 ? 2 : 1;
            if (m->block == 2)
                rv = conv_bn(out, pre, "conv1", "bn1", planes, in, 1) ||
                     conv_bn(out, pre, "conv2", "bn2", planes, planes, 3) ||
                     conv_bn(out, pre, "conv3", "bn3", planes * exp, planes, 1);
            else
                rv = conv_bn(out, pre, "conv1", "bn1", planes, in, 3) ||
                     conv_bn(out, pre, "conv2", "bn2", planes, planes, 3);
            if (!rv && (stride != 1 || in != planes * exp))
                rv = conv_bn(out, pre, "downsample.0", "downsample.1", planes * exp, in, 1);
            if (rv)
                return OVT_EINVAL;
            in = planes * exp;
        }
    }
    addf(out, 2, m->n_class, in, 0, 0, "fc.weight");
    addf(out, 1, m->n_class, 0, 0, 0, "fc.bias");
    out->ntrain = out->nparams;
    /* the buffers: each batch norm's weight names its running statistics */
    size_t ntrained = out->count;
    for (size_t k = 0; k < ntrained; k++) {
        const char *name = out->t[k].name;
        size_t len = strlen(name);
        if (out->t[k].ndim != 1 || len < 7 || strcmp(name + len - 7, ".weight") || !strncmp(name, "fc.", 3))
            continue;
        addf(out, 1, out->t[k].shape[0], 0, 0, 0, "%.*s.running_mean", (int)(len - 7), name);
        addf(out, 1, out->t[k].shape[0], 0, 0, 0, "%.*s.running_var", (int)(len - 7), name);
    }
    return 0;
}

const trn_tensor_info *trn_layout_find(const trn_layout *l, const char *name)
{
    for (size_t k = 0; k < l->count; k++)
        if (!strcmp(l->t[k].name, name))
            return &l->t[k];
    return NULL;
}

int trn_layout_build(trn_layout *out, const trn_model_config *m)
{
    memset(out, 0, sizeof *out);
    int rv = trn_model_check(m);
    if (rv)
        return rv;
    out->model = *m;
    if (m->kind == TRN_MODEL_RESNET)
        return resnet_layout(out, m);
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
