/* A model's parameters in Hugging Face's and llm.c's layouts (see export.h). */
#include "modelio/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/fileio.h"

#define LLMC_MAGIC 20240326
#define LLMC_VERSION_F32 3
#define LLMC_HEADER_INTS 256
#define LLMC_VOCAB_ALIGN 128 /* llm.c pads the vocabulary to a multiple of 128 */

/* GPT-2's tensors in Hugging Face's names, layout order: per_layer ones are
 * "transformer.h.N." + name, the others "transformer." + name; conv1d ones
 * are Conv1D weights, stored (in, out). */
static const struct {
    const char *name;
    int per_layer, conv1d;
} gpt2_names[16] = {
    {"wte.weight", 0, 0},         {"wpe.weight", 0, 0},         {"ln_1.weight", 1, 0},
    {"ln_1.bias", 1, 0},          {"attn.c_attn.weight", 1, 1}, {"attn.c_attn.bias", 1, 0},
    {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 1, 0},   {"ln_2.weight", 1, 0},
    {"ln_2.bias", 1, 0},          {"mlp.c_fc.weight", 1, 1},    {"mlp.c_fc.bias", 1, 0},
    {"mlp.c_proj.weight", 1, 1},  {"mlp.c_proj.bias", 1, 0},    {"ln_f.weight", 0, 0},
    {"ln_f.bias", 0, 0},
};

/* Entry for ovt tensor k (layer `layer` of a stacked one), named `name`,
 * transposed or not; the shape is the file's. */
static void fill_entry(trn_export_tensor *e, const trn_layout *l, uint32_t k, uint32_t layer, int per_layer,
                       int transpose, const char *name)
{
    const trn_tensor_info *t = &l->t[k];
    memset(e, 0, sizeof *e);
    e->index = k;
    snprintf(e->name, sizeof e->name, "%s", name);
    if (per_layer) {
        /* a stacked (L, a[, b]) tensor: layer `layer` is an (a[, b]) block */
        e->rows = t->ndim == 3 ? t->shape[1] : 1;
        e->cols = t->ndim == 3 ? t->shape[2] : t->shape[1];
        e->offset = t->offset + (size_t)layer * e->rows * e->cols;
    } else {
        e->rows = t->ndim == 2 ? t->shape[0] : 1;
        e->cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
        e->offset = t->offset;
    }
    e->transpose = transpose;
    e->ndim = t->ndim - (uint32_t)per_layer;
    e->shape[0] = e->ndim == 1 ? e->cols : e->transpose ? e->cols : e->rows;
    e->shape[1] = e->ndim == 1 ? 0 : e->transpose ? e->rows : e->cols;
}

static void gpt2_entry(trn_export_tensor *e, const trn_layout *l, uint32_t k, uint32_t layer)
{
    char name[64];
    if (gpt2_names[k].per_layer)
        snprintf(name, sizeof name, "transformer.h.%u.%s", layer, gpt2_names[k].name);
    else
        snprintf(name, sizeof name, "transformer.%s", gpt2_names[k].name);
    fill_entry(e, l, k, layer, gpt2_names[k].per_layer, gpt2_names[k].conv1d, name);
}

/* Llama's tensors in Hugging Face's LlamaForCausalLM names, ovt's layout
 * order (trainer/layout.h); q_proj and k_proj rows are permuted from
 * llama2.c's interleaved rotary pairs to Hugging Face's halves. */
static const struct {
    const char *name;
    int per_layer, rope;
} llama_names[12] = {
    {"model.embed_tokens.weight", 0, 0},
    {"input_layernorm.weight", 1, 0},
    {"self_attn.q_proj.weight", 1, 1},
    {"self_attn.k_proj.weight", 1, 2},
    {"self_attn.v_proj.weight", 1, 0},
    {"self_attn.o_proj.weight", 1, 0},
    {"post_attention_layernorm.weight", 1, 0},
    {"mlp.gate_proj.weight", 1, 0},
    {"mlp.down_proj.weight", 1, 0},
    {"mlp.up_proj.weight", 1, 0},
    {"model.norm.weight", 0, 0},
    {"lm_head.weight", 0, 0},
};

static void llama_entry(trn_export_tensor *e, const trn_layout *l, uint32_t k, uint32_t layer)
{
    char name[64];
    if (llama_names[k].per_layer)
        snprintf(name, sizeof name, "model.layers.%u.%s", layer, llama_names[k].name);
    else
        snprintf(name, sizeof name, "%s", llama_names[k].name);
    fill_entry(e, l, k, layer, llama_names[k].per_layer, 0, name);
    if (llama_names[k].rope)
        e->rope_heads = llama_names[k].rope == 1 ? l->model.n_head : l->model.n_kv_head;
}

int trn_export_tensors(trn_export_tensor **out, size_t *n, const trn_layout *l)
{
    *out = NULL;
    *n = 0;
    size_t L = trn_model_is_lm(&l->model) ? l->model.n_layer : 0;
    size_t cap = trn_model_is_lm(&l->model) ? 4 + 12 * L : l->count;
    trn_export_tensor *e = calloc(cap, sizeof *e);
    if (!e)
        return ovt_fail(OVT_ENOMEM, "out of memory for the export's tensor list");
    size_t k = 0;
    if (l->model.kind == TRN_MODEL_MLP || l->model.kind == TRN_MODEL_RESNET) {
        for (uint32_t i = 0; i < l->count; i++, k++) {
            const trn_tensor_info *t = &l->t[i];
            snprintf(e[k].name, sizeof e[k].name, "%s", t->name);
            e[k].ndim = t->ndim;
            for (uint32_t d = 0; d < t->ndim; d++)
                e[k].shape[d] = t->shape[d];
            e[k].index = i;
            e[k].offset = t->offset;
            e[k].rows = t->ndim > 1 ? t->shape[0] : 1;
            e[k].cols = t->ndim > 1 ? t->size / t->shape[0] : t->shape[0];
        }
    } else if (l->model.kind == TRN_MODEL_LLAMA) {
        llama_entry(&e[k++], l, 0, 0);
        for (uint32_t layer = 0; layer < L; layer++)
            for (uint32_t i = 1; i < 10; i++)
                llama_entry(&e[k++], l, i, layer);
        for (uint32_t i = 10; i < l->count; i++)
            llama_entry(&e[k++], l, i, 0);
    } else {
        gpt2_entry(&e[k++], l, 0, 0);
        gpt2_entry(&e[k++], l, 1, 0);
        for (uint32_t layer = 0; layer < L; layer++)
            for (uint32_t i = 2; i < 14; i++)
                gpt2_entry(&e[k++], l, i, layer);
        gpt2_entry(&e[k++], l, 14, 0);
        gpt2_entry(&e[k++], l, 15, 0);
    }
    *out = e;
    *n = k;
    return 0;
}

/* dst (cols, rows) = src (rows, cols) transposed. */
static void transpose(float *dst, const float *src, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            dst[c * rows + r] = src[r * cols + c];
}

/* Rows of a (heads*hs, cols) block between llama2.c's order, where head
 * h's rotary pair i is rows h*hs + 2i and 2i + 1, and Hugging Face's, where
 * they are rows h*hs + i and h*hs + hs/2 + i: to_hf moves llama2.c's rows
 * to Hugging Face's places, !to_hf back. */
static void rope_rows(float *dst, const float *src, size_t rows, size_t cols, size_t heads, int to_hf)
{
    size_t hs = rows / heads, half = hs / 2;
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < half; i++)
            for (size_t p = 0; p < 2; p++) {
                size_t meta = h * hs + 2 * i + p, hf = h * hs + p * half + i;
                memcpy(dst + (to_hf ? hf : meta) * cols, src + (to_hf ? meta : hf) * cols, cols * sizeof(float));
            }
}

/* The file's data of entry e from the parameters (into buf when it moves). */
static void entry_out(float *buf, const trn_export_tensor *e, const float *params)
{
    if (e->transpose)
        transpose(buf, params + e->offset, e->rows, e->cols);
    else
        rope_rows(buf, params + e->offset, e->rows, e->cols, e->rope_heads, 1);
}

int trn_export_params_le(const float **out, float **owned, const trn_state *st)
{
    *owned = NULL;
    *out = st->params;
    if (!OVT_HOST_BIG_ENDIAN)
        return 0;
    if (!(*owned = malloc(st->layout.nparams * sizeof(float))))
        return ovt_fail(OVT_ENOMEM, "out of memory for the little-endian copy of %zu parameters", st->layout.nparams);
    ovt_copy_le32(*owned, st->params, st->layout.nparams);
    *out = *owned;
    return 0;
}

int trn_export_safetensors(const char *path, const trn_state *st, const trn_st_meta *meta, size_t nmeta)
{
    trn_export_tensor *e;
    size_t n, moved = 0;
    const float *params;
    float *owned;
    int rv = trn_export_params_le(&params, &owned, st);
    if (rv)
        return rv;
    if ((rv = trn_export_tensors(&e, &n, &st->layout))) {
        free(owned);
        return rv;
    }
    for (size_t i = 0; i < n; i++)
        moved += e[i].transpose || e[i].rope_heads ? e[i].rows * e[i].cols : 0;
    /* the transposed and permuted tensors need a copy; the others are written from the state */
    float *copy = moved ? malloc(moved * sizeof(float)) : NULL;
    trn_st_out *out = calloc(n, sizeof *out);
    if ((moved && !copy) || !out) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the export of %zu parameters", st->layout.nparams);
        goto done;
    }
    float *at = copy;
    for (size_t i = 0; i < n; i++) {
        out[i] = (trn_st_out){.name = e[i].name, .dtype = TRN_ST_F32, .ndim = e[i].ndim,
                              .shape = {e[i].shape[0], e[i].shape[1], e[i].shape[2], e[i].shape[3]},
                              .data = params + e[i].offset};
        if (e[i].transpose || e[i].rope_heads) {
            entry_out(at, &e[i], params); /* moves whole words: still little-endian */
            out[i].data = at;
            at += e[i].rows * e[i].cols;
        }
    }
    rv = trn_st_write(path, out, n, meta, nmeta);
done:
    free(out);
    free(copy);
    free(e);
    free(owned);
    return rv;
}

int trn_export_llmc(const char *path, const trn_state *st)
{
    const trn_model_config *m = &st->config.model;
    if (m->kind != TRN_MODEL_GPT2)
        return ovt_fail(OVT_EINVAL, "the llmc format holds GPT-2 models only; export %s",
                        m->kind == TRN_MODEL_LLAMA ? "a Llama as safetensors or llama2c" : "an MLP as safetensors");
    uint32_t Vp = (m->vocab + LLMC_VOCAB_ALIGN - 1) / LLMC_VOCAB_ALIGN * LLMC_VOCAB_ALIGN;
    uint8_t head[4 * LLMC_HEADER_INTS] = {0};
    uint32_t h[8] = {LLMC_MAGIC, LLMC_VERSION_F32, m->max_seq, m->vocab, m->n_layer, m->n_head, m->width, Vp};
    for (int k = 0; k < 8; k++)
        ovt_put_le32(head + 4 * k, h[k]);
    size_t wte = st->layout.t[0].size, pad = (size_t)(Vp - m->vocab) * m->width;
    const float *params;
    float *owned;
    int rv = trn_export_params_le(&params, &owned, st);
    if (rv)
        return rv;
    float *zeros = pad ? calloc(pad, sizeof(float)) : NULL;
    if (pad && !zeros) {
        free(owned);
        return ovt_fail(OVT_ENOMEM, "out of memory for the padded vocabulary");
    }
    /* llm.c's order is ovt's, with wte's padding rows right after wte */
    ovt_span parts[4] = {{head, sizeof head},
                         {params, wte * sizeof(float)},
                         {zeros, pad * sizeof(float)},
                         {params + wte, (st->layout.nparams - wte) * sizeof(float)}};
    rv = ovt_write_atomic_parts(path, parts, 4, 0644);
    free(zeros);
    free(owned);
    return rv;
}

static const char *shape_text(char *buf, size_t cap, uint32_t ndim, const uint64_t *shape)
{
    size_t at = (size_t)snprintf(buf, cap, "(");
    for (uint32_t k = 0; k < ndim && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%llu", k ? ", " : "", (unsigned long long)shape[k]);
    if (at < cap)
        snprintf(buf + at, cap - at, ")");
    return buf;
}

/* The file's tensor for export entry e: its exact name, or (lenient) the
 * name without "transformer.". */
static const trn_st_tensor *find_entry(const trn_st_file *f, const trn_export_tensor *e, int lenient)
{
    const trn_st_tensor *t = trn_st_find(f, e->name);
    if (!t && lenient && strncmp(e->name, "transformer.", 12) == 0)
        t = trn_st_find(f, e->name + 12);
    return t;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* A file tensor no entry took: with lenient, the attention mask buffers
 * and the rotary frequencies older Hugging Face Llama checkpoints store are
 * skipped and an lm_head equal to wte is the tied head; otherwise it is an
 * extra tensor. */
static int check_extra(const trn_st_tensor *t, const trn_st_tensor *wte, int lenient,
                       const char *missing, const char *what)
{
    if (lenient && (ends_with(t->name, ".attn.bias") || ends_with(t->name, ".attn.masked_bias") ||
                    ends_with(t->name, ".rotary_emb.inv_freq")))
        return 0;
    if (lenient && strcmp(t->name, "lm_head.weight") == 0) {
        if (wte && t->dtype == wte->dtype && t->end - t->begin == wte->end - wte->begin &&
            memcmp(t->data, wte->data, t->end - t->begin) == 0)
            return 0;
        return ovt_fail(OVT_EFORMAT, "%s: lm_head.weight differs from the token embedding, and this model's "
                                     "output head is tied to it (a Llama with its own head: a config with tied = 0)",
                        what);
    }
    if (missing)
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" is not one of the model's, and \"%s\" is missing "
                                     "(renamed?)",
                        what, t->name, missing);
    return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" is not one of the model's", what, t->name);
}

int trn_export_import(float *params, const trn_layout *l, const trn_st_file *f, int lenient, const char *what)
{
    trn_export_tensor *e;
    size_t n;
    int rv = trn_export_tensors(&e, &n, l);
    if (rv)
        return rv;
    char *taken = calloc(f->ntensors + 1, 1);
    const char *missing = NULL;
    const trn_st_tensor *wte = NULL;
    if (!taken) {
        free(e);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n && !rv; i++) {
        const trn_st_tensor *t = find_entry(f, &e[i], lenient);
        char have[96], want[96];
        if (!t) {
            missing = missing ? missing : e[i].name;
            continue;
        }
        taken[t - f->t] = 1;
        wte = i == 0 && trn_model_is_lm(&l->model) ? t : wte;
        if (t->dtype != TRN_ST_F32 || t->ndim != e[i].ndim || memcmp(t->shape, e[i].shape, e[i].ndim * 8) != 0) {
            rv = ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" is %s %s, the model's is F32 %s", what, t->name,
                          trn_st_dtype_name(t->dtype), shape_text(have, sizeof have, t->ndim, t->shape),
                          shape_text(want, sizeof want, e[i].ndim, e[i].shape));
            break;
        }
        float *dst = params + e[i].offset;
        size_t count = e[i].rows * e[i].cols;
        if (!e[i].transpose && !e[i].rope_heads) {
            ovt_copy_le32(dst, t->data, count); /* the file's little-endian floats */
            continue;
        }
        float *tmp = malloc(count * sizeof(float));
        if (!tmp) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory for tensor %s", t->name);
            break;
        }
        ovt_copy_le32(tmp, t->data, count); /* the file's data need not be aligned */
        if (e[i].transpose)
            transpose(dst, tmp, e[i].cols, e[i].rows);
        else
            rope_rows(dst, tmp, e[i].rows, e[i].cols, e[i].rope_heads, 0);
        free(tmp);
    }
    for (size_t j = 0; j < f->ntensors && !rv; j++)
        if (!taken[j])
            rv = check_extra(&f->t[j], wte, lenient, missing, what);
    if (!rv && missing)
        rv = ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" is missing", what, missing);
    free(taken);
    free(e);
    return rv;
}

const char *trn_export_format_name(size_t i)
{
    static const char *const names[] = {"safetensors", "llmc", "llama2c"};
    return i < sizeof names / sizeof names[0] ? names[i] : NULL;
}
