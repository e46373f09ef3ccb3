/* llama2.c's checkpoint files (see llama2c.h). */
#include "modelio/llama2c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/fileio.h"
#include "kernels/cpu/backend.h" /* krn_pow, krn_cos, krn_sin: the same bits on every processor */
#include "modelio/export.h"

#define V0_HEADER 28
#define V1_HEADER 256
#define V1_SHARED 36 /* the offset of shared_classifier */

/* ovt's layout tensors (trainer/layout.c: wte 0, rms_att 1, wq 2, wk 3, wv
 * 4, wo 5, rms_ffn 6, w1 7, w2 8, w3 9, rms_final 10, wcls 11) in version
 * 1's order: the norms first, then the embedding and the weights, the head
 * last when it is its own. Version 0's order is the layout's, with the
 * rotary tables between rms_final and wcls. */
static const uint32_t v1_order[12] = {1, 6, 10, 0, 2, 3, 4, 5, 7, 8, 9, 11};
#define RMS_FINAL 10

/* The 7 int32 of the header for model m (version 0 flags an own head with
 * a negative vocab_size). */
static void put_params(uint8_t *p, const trn_model_config *m, uint32_t version)
{
    int32_t vocab = (int32_t)m->vocab;
    const int32_t v[7] = {(int32_t)m->width,     (int32_t)m->hidden, (int32_t)m->n_layer, (int32_t)m->n_head,
                          (int32_t)m->n_kv_head, version == 0 && !m->tied ? -vocab : vocab,
                          (int32_t)m->max_seq};
    for (int k = 0; k < 7; k++)
        ovt_put_le32(p + 4 * k, (uint32_t)v[k]);
}

/* export.py's precompute_freqs_cis for head size hs and max_seq
 * positions, in double with ovt's own pow, cos and sin (so a file's bytes
 * are the same whichever processor wrote it), rounded: cos into tab, sin
 * into tab + max_seq*hs/2. */
static void rotary_tables(float *tab, const trn_model_config *m)
{
    size_t hs = m->width / m->n_head, half = hs / 2, T = m->max_seq;
    for (size_t i = 0; i < half; i++) {
        double freq = 1.0 / krn_pow(m->rope_theta, (double)(2 * i) / (double)hs);
        for (size_t t = 0; t < T; t++) {
            tab[t * half + i] = (float)krn_cos((double)t * freq);
            tab[T * half + t * half + i] = (float)krn_sin((double)t * freq);
        }
    }
}

int trn_export_llama2c(const char *path, const trn_state *st, uint32_t version)
{
    const trn_model_config *m = &st->config.model;
    const trn_layout *l = &st->layout;
    if (m->kind != TRN_MODEL_LLAMA)
        return ovt_fail(OVT_EINVAL, "the llama2c format holds Llama models only; export %s",
                        m->kind == TRN_MODEL_GPT2 ? "a GPT-2 as safetensors or llmc" : "an MLP as safetensors");
    if (version > 1)
        return ovt_fail(OVT_EINVAL, "llama2.c file version %u: ovt writes 0 (legacy, what run.c reads) or 1", version);
    uint8_t head[V1_HEADER] = {0};
    ovt_span parts[13];
    size_t n = 0;
    float *tab = NULL, *owned;
    const float *params;
    int rv = trn_export_params_le(&params, &owned, st);
    if (rv)
        return rv;
    if (version == 0) {
        size_t ntab = (size_t)m->max_seq * (m->width / m->n_head);
        if (!(tab = malloc(ntab * sizeof(float)))) {
            free(owned);
            return ovt_fail(OVT_ENOMEM, "out of memory for the rotary tables (%zu floats)", ntab);
        }
        rotary_tables(tab, m);
        ovt_swap_le32(tab, ntab);
        put_params(head, m, 0);
        const trn_tensor_info *last = &l->t[RMS_FINAL];
        parts[n++] = (ovt_span){head, V0_HEADER};
        parts[n++] = (ovt_span){params, (last->offset + last->size) * sizeof(float)};
        parts[n++] = (ovt_span){tab, ntab * sizeof(float)};
        if (!m->tied)
            parts[n++] = (ovt_span){params + l->t[11].offset, l->t[11].size * sizeof(float)};
    } else {
        ovt_put_le32(head, TRN_LLAMA2C_MAGIC);
        ovt_put_le32(head + 4, 1);
        put_params(head + 8, m, 1);
        head[V1_SHARED] = m->tied ? 1 : 0;
        parts[n++] = (ovt_span){head, V1_HEADER};
        for (size_t k = 0; k < l->count; k++) {
            const trn_tensor_info *t = &l->t[v1_order[k]];
            parts[n++] = (ovt_span){params + t->offset, t->size * sizeof(float)};
        }
    }
    rv = ovt_write_atomic_parts(path, parts, n, 0644);
    free(tab);
    free(owned);
    return rv;
}

int trn_llama2c_has_magic(const uint8_t *prefix, size_t n)
{
    return n >= 4 && ovt_get_le32(prefix) == TRN_LLAMA2C_MAGIC;
}

int trn_llama2c_parse(trn_llama2c_header *h, const uint8_t *prefix, size_t n, double theta, double eps)
{
    memset(h, 0, sizeof *h);
    int v1 = trn_llama2c_has_magic(prefix, n);
    size_t need = v1 ? V1_SHARED + 1 : V0_HEADER;
    if (n < need)
        return ovt_fail(OVT_EFORMAT, "%zu bytes, shorter than a llama2.c header (%zu)", n, need);
    if (v1 && ovt_get_le32(prefix + 4) != 1)
        return ovt_fail(OVT_EFORMAT, "llama2.c file version %u is not supported (ovt reads 1, and the legacy "
                                     "format without a magic; version 2 is int8)",
                        ovt_get_le32(prefix + 4));
    if (v1 && prefix[V1_SHARED] > 1)
        return ovt_fail(OVT_EFORMAT, "llama2.c shared_classifier is %u, not 0 or 1", prefix[V1_SHARED]);
    int32_t p[7];
    for (int k = 0; k < 7; k++)
        p[k] = (int32_t)ovt_get_le32(prefix + (v1 ? 8 : 0) + 4 * k);
    /* version 0 flags an own head by a negative vocab_size, version 1 by its byte */
    int tied = v1 ? prefix[V1_SHARED] : p[5] > 0;
    int64_t vocab = p[5] < 0 && !v1 ? -(int64_t)p[5] : p[5];
    int ok = vocab > 0;
    for (int k = 0; k < 7; k++)
        ok = ok && (k == 5 || p[k] > 0);
    h->version = v1 ? 1 : 0;
    h->header_len = v1 ? V1_HEADER : V0_HEADER;
    h->model = (trn_model_config){.kind = TRN_MODEL_LLAMA, .width = (uint32_t)p[0], .hidden = (uint32_t)p[1],
                                  .n_layer = (uint32_t)p[2], .n_head = (uint32_t)p[3], .n_kv_head = (uint32_t)p[4],
                                  .vocab = (uint32_t)vocab, .max_seq = (uint32_t)p[6], .tied = (uint32_t)tied,
                                  .rope_theta = theta, .norm_eps = eps};
    trn_layout l;
    int rv = ok ? trn_layout_build(&l, &h->model) : ovt_fail(OVT_EINVAL, "a size is zero or negative");
    if (rv)
        return ovt_fail_wrap(OVT_EFORMAT, "llama2.c header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, "
                                          "n_kv_heads %d, vocab_size %d, seq_len %d) is no Llama ovt supports",
                             p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
    uint64_t tables = v1 ? 0 : (uint64_t)h->model.max_seq * (h->model.width / h->model.n_head);
    h->file_len = h->header_len + 4 * ((uint64_t)l.nparams + tables);
    return 0;
}

void trn_llama2c_import(float *params, const trn_layout *l, const trn_llama2c_header *h, const uint8_t *buf)
{
    const uint8_t *p = buf + h->header_len;
    if (h->version == 0) {
        const trn_tensor_info *last = &l->t[RMS_FINAL];
        size_t body = last->offset + last->size;
        ovt_copy_le32(params, p, body);
        p += 4 * (body + (size_t)h->model.max_seq * (h->model.width / h->model.n_head)); /* the tables unread */
        if (l->count > 11)
            ovt_copy_le32(params + l->t[11].offset, p, l->t[11].size);
        return;
    }
    for (size_t k = 0; k < l->count; k++) {
        const trn_tensor_info *t = &l->t[v1_order[k]];
        ovt_copy_le32(params + t->offset, p, t->size);
        p += 4 * t->size;
    }
}
