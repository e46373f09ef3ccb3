/* A run's starting parameters from a model file (modelio/import.h). */
#include "modelio/import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/grid.h"
#include "modelio/export.h"
#include "modelio/llama2c.h"
#include "trainer/checkpoint.h"

#define LLMC_MAGIC 20240326
#define LLMC_HEADER_INTS 256
#define LLMC_MAX_FILE ((size_t)1 << 36)

/* "gpt2 L12 C768 NH12 V50257 maxT1024" or "mlp L2 width128 in128 classes32". */
static void shape_text(char *buf, size_t cap, const trn_model_config *m)
{
    if (m->kind == TRN_MODEL_GPT2)
        snprintf(buf, cap, "gpt2 L%u C%u NH%u V%u maxT%u", m->n_layer, m->width, m->n_head, m->vocab, m->max_seq);
    else if (m->kind == TRN_MODEL_LLAMA)
        snprintf(buf, cap, "llama L%u C%u NH%u KV%u V%u maxT%u H%u %s theta%g eps%g", m->n_layer, m->width,
                 m->n_head, m->n_kv_head, m->vocab, m->max_seq, m->hidden, m->tied ? "tied" : "untied",
                 m->rope_theta, m->norm_eps);
    else
        snprintf(buf, cap, "mlp L%u width%u in%u classes%u", m->n_layer, m->width, m->in_dim, m->n_class);
}

static int shape_mismatch(const char *path, const char *what, const trn_model_config *file,
                          const trn_model_config *run)
{
    char fs[128], rs[128];
    shape_text(fs, sizeof fs, file);
    shape_text(rs, sizeof rs, run);
    return ovt_fail(OVT_EINVAL, "%s: the %s holds a model of shape %s, the run's model is %s", path, what, fs, rs);
}

/* Rounds n imported values to grid b in place; a non-finite one fails. */
static int round_imported(float *v, size_t n, int b, const char *path, const trn_layout *l)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            const char *name = "?";
            for (size_t k = 0; k < l->count; k++)
                if (i >= l->t[k].offset && i < l->t[k].offset + l->t[k].size)
                    name = l->t[k].name;
            return ovt_fail(OVT_EFORMAT, "%s: parameter %zu (tensor %s) is not finite (%g)", path, i, name,
                            (double)v[i]);
        }
        v[i] = krn_grid_round((double)v[i], b);
    }
    return 0;
}

/* Each loader checks the file's model shape against the run's before it
 * allocates the run's nparams floats (*out). */
static int load_checkpoint(float **out, const trn_run_config *rc, const trn_layout *l, const char *path)
{
    trn_state *src;
    int rv = trn_checkpoint_read(&src, path);
    if (rv)
        return rv;
    if (!trn_model_equal(&src->config.model, &rc->model))
        rv = shape_mismatch(path, "checkpoint", &src->config.model, &rc->model);
    else if (!(*out = malloc(l->nparams * sizeof(float))))
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu parameters", l->nparams);
    else
        memcpy(*out, src->params, l->nparams * sizeof(float));
    trn_state_free(src);
    return rv;
}

static int load_llmc(float **out, const trn_run_config *rc, const trn_layout *l, const uint8_t *buf, size_t len,
                     const char *path)
{
    if (len < 4 * LLMC_HEADER_INTS)
        return ovt_fail(OVT_EFORMAT, "%s: truncated llm.c weight file (%zu bytes, shorter than its 1024-byte header)",
                        path, len);
    uint32_t h[8];
    for (int k = 0; k < 8; k++)
        h[k] = ovt_get_le32(buf + 4 * k);
    if (h[1] != 3)
        return ovt_fail(OVT_EFORMAT, "%s: llm.c weight file version %u is not supported (only 3: float32; "
                                     "version 5 is bfloat16)",
                        path, h[1]);
    uint32_t maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
    trn_model_config file = {.kind = TRN_MODEL_GPT2, .n_layer = L, .width = C, .n_head = NH, .vocab = V,
                             .max_seq = maxT};
    if (!trn_model_equal(&file, &rc->model))
        return shape_mismatch(path, "llm.c weight file", &file, &rc->model);
    if (Vp < V || Vp > (1u << 21))
        return ovt_fail(OVT_EFORMAT, "%s: padded vocabulary %u is below the vocabulary %u or too large", path, Vp, V);
    /* llm.c's wte is (Vp, C); ovt's is (V, C) and comes first. */
    size_t pad = (size_t)(Vp - V) * C;
    uint64_t expect = 4ull * LLMC_HEADER_INTS + 4ull * (l->nparams + pad);
    if (len != expect)
        return ovt_fail(OVT_EFORMAT, "%s: llm.c weight file is %zu bytes, its header implies %llu (%s)", path, len,
                        (unsigned long long)expect, len < expect ? "truncated" : "trailing bytes");
    if (!(*out = malloc(l->nparams * sizeof(float))))
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu parameters", l->nparams);
    const uint8_t *p = buf + 4 * LLMC_HEADER_INTS;
    size_t wte = l->t[0].size;
    ovt_copy_le32(*out, p, wte);
    ovt_copy_le32(*out + wte, p + 4 * (wte + pad), l->nparams - wte);
    return 0;
}

/* A safetensors file with the export's names (modelio/export.h): Hugging
 * Face GPT-2's, with or without "transformer.", or an MLP's layout names. */
static int load_safetensors(float **out, const trn_layout *l, const char *path)
{
    trn_st_file f;
    int rv = trn_st_read(&f, path, LLMC_MAX_FILE);
    if (rv)
        return rv;
    if (!(*out = malloc(l->nparams * sizeof(float))))
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu parameters", l->nparams);
    else
        rv = trn_export_import(*out, l, &f, 1, path);
    trn_st_free(&f);
    return rv;
}

/* The first bytes of path (*n of them, the rest of prefix zero) and its
 * size. */
static int read_prefix(uint8_t prefix[TRN_LLAMA2C_PREFIX], size_t *n, uint64_t *size, const char *path)
{
    memset(prefix, 0, TRN_LLAMA2C_PREFIX);
    *n = 0;
    int fd;
    struct stat st;
    int rv = ovt_open_regular(path, &fd, &st);
    if (rv)
        return ovt_fail_wrap(rv, "--init-from");
    *size = (uint64_t)st.st_size;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ovt_fail_errno(OVT_EIO, "--init-from %s", path);
    }
    *n = fread(prefix, 1, TRN_LLAMA2C_PREFIX, f); /* a short file keeps zeros and fails as none of the formats */
    fclose(f);
    return 0;
}

/* The llama2.c header in prefix; the file has no rope_theta and norm_eps:
 * a Llama run's own (llama2.c's 10000 and 1e-5 for another kind, which
 * then fails as a shape that differs). */
static int parse_llama2c(trn_llama2c_header *h, const trn_run_config *rc, const uint8_t *prefix, size_t n)
{
    int llama = rc->model.kind == TRN_MODEL_LLAMA;
    return trn_llama2c_parse(h, prefix, n, llama ? rc->model.rope_theta : 10000.0, llama ? rc->model.norm_eps : 1e-5);
}

/* A llama2.c file of header h (both versions; modelio/llama2c.h). */
static int load_llama2c(float **out, const trn_run_config *rc, const trn_layout *l, const trn_llama2c_header *h,
                        const char *path)
{
    const char *what = h->version ? "llama2.c file (version 1)" : "legacy llama2.c file";
    if (!trn_model_equal(&h->model, &rc->model))
        return shape_mismatch(path, what, &h->model, &rc->model);
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, LLMC_MAX_FILE);
    if (rv)
        return rv;
    if (len != h->file_len)
        rv = ovt_fail(OVT_EFORMAT, "%s: %s is %zu bytes, its header implies %llu (%s)", path, what, len,
                      (unsigned long long)h->file_len, len < h->file_len ? "truncated" : "trailing bytes");
    else if (!(*out = malloc(l->nparams * sizeof(float))))
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu parameters", l->nparams);
    else
        trn_llama2c_import(*out, l, h, buf);
    free(buf);
    return rv;
}

/* A file of no known magic: a legacy llama2.c file when its first 28 bytes
 * are a header whose model's file is exactly `size` bytes; otherwise the
 * error says what each format expects. */
static int load_unknown(float **out, const trn_run_config *rc, const trn_layout *l, const uint8_t *prefix, size_t n,
                        uint64_t size, const char *path)
{
    const trn_model_config *m = &rc->model;
    trn_llama2c_header h;
    char why[512];
    if (parse_llama2c(&h, rc, prefix, n) == 0) {
        if (h.file_len == size)
            return load_llama2c(out, rc, l, &h, path);
        snprintf(why, sizeof why, "its header implies a file of %llu bytes, not %llu (%s)",
                 (unsigned long long)h.file_len, (unsigned long long)size, size < h.file_len ? "truncated" : "trailing "
                                                                                                           "bytes");
    } else {
        snprintf(why, sizeof why, "%s", ovt_errmsg());
    }
    char run[128] = "";
    if (m->kind == TRN_MODEL_LLAMA)
        snprintf(run, sizeof run, "; the run's model as one is %llu bytes",
                 28ull + 4ull * (l->nparams + (uint64_t)m->max_seq * (m->width / m->n_head)));
    return ovt_fail(OVT_EFORMAT, "%s is neither an ovt checkpoint (magic OVTCKPT), a safetensors file, an llm.c "
                                 "weight file (magic %d) nor a llama2.c file (version 1: magic \"ak42\"); as a "
                                 "legacy llama2.c file (no magic) %s%s",
                    path, LLMC_MAGIC, why, run);
}

int trn_init_load(float **params, size_t *nparams, const trn_run_config *rc, const char *path)
{
    *params = NULL;
    *nparams = 0;
    trn_layout l;
    uint8_t magic[TRN_LLAMA2C_PREFIX], *buf = NULL;
    size_t len = 0, n = 0;
    uint64_t size = 0;
    float *v = NULL;
    int rv = trn_layout_build(&l, &rc->model);
    if (rv || (rv = read_prefix(magic, &n, &size, path)))
        return rv;
    if (!memcmp(magic, "OVTCKPT", 8)) {
        rv = load_checkpoint(&v, rc, &l, path); /* parsed and checked by the checkpoint reader */
    } else if (trn_st_sniff(magic, n)) {
        rv = load_safetensors(&v, &l, path);
    } else if (trn_llama2c_has_magic(magic, n)) {
        trn_llama2c_header h;
        if ((rv = parse_llama2c(&h, rc, magic, n)))
            rv = ovt_fail_wrap(rv, "%s", path);
        else
            rv = load_llama2c(&v, rc, &l, &h, path);
    } else if (n < 4 || ovt_get_le32(magic) != LLMC_MAGIC) {
        rv = load_unknown(&v, rc, &l, magic, n, size, path);
    } else if (!(rv = ovt_read_file(path, &buf, &len, LLMC_MAX_FILE))) {
        rv = load_llmc(&v, rc, &l, buf, len, path);
        free(buf);
    }
    if (!rv)
        rv = round_imported(v, l.nparams, (int)rc->grid_bits, path, &l);
    if (rv) {
        free(v);
        return rv;
    }
    *params = v;
    *nparams = l.nparams;
    return 0;
}
