/* A run's dataset and batches (see rundata.h). */
#include "trainer/rundata.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/bytes.h"
#include "data/augment.h"
#include "data/images.h"

static int check_hash(const ovt_hash *got, trn_run_config *rc, int set_hash, const char *path)
{
    if (set_hash) {
        rc->dataset_hash = *got;
        return 0;
    }
    if (memcmp(got->b, rc->dataset_hash.b, 32) != 0)
        return ovt_fail(OVT_ECRYPTO, "%s is not the run's dataset (its SHA-256 differs from the datasetHash)", path);
    return 0;
}

/* An MLP's samples: a samples file, or an image file read as one (each
 * image flattened, pixel / 256: exact on every grid, data/images.h). */
static int samples_parse(data_samples *s, const uint8_t *buf, size_t len, int grid_bits)
{
    if (!data_images_is(buf, len))
        return data_samples_parse(s, buf, len, grid_bits);
    return data_images_parse_samples(s, buf, len);
}

int trn_run_data_parse(trn_run_data *d, const uint8_t *buf, size_t len, trn_run_config *rc, int set_hash,
                       const char *what)
{
    memset(d, 0, sizeof *d);
    int rv;
    if (trn_model_is_lm(&rc->model)) {
        if ((rv = data_tokens_parse(&d->tokens, buf, len)))
            return ovt_fail_wrap(rv, "%s", what);
        if (d->tokens.vocab > rc->model.vocab)
            return ovt_fail(OVT_EINVAL, "%s has vocab %u, larger than the model's %u", what, d->tokens.vocab,
                            rc->model.vocab);
        if (d->tokens.count < (size_t)rc->seq_len + 1)
            return ovt_fail(OVT_EINVAL, "%s holds %zu tokens, fewer than one sequence of %u plus a target", what,
                            d->tokens.count, rc->seq_len);
        return check_hash(&d->tokens.hash, rc, set_hash, what);
    }
    if ((rv = samples_parse(&d->samples, buf, len, (int)rc->grid_bits)))
        return ovt_fail_wrap(rv, "%s", what);
    if (d->samples.dim != rc->model.in_dim || d->samples.n_class != rc->model.n_class)
        return ovt_fail(OVT_EINVAL, "%s has %u features and %u classes; the model takes %u and %u", what,
                        d->samples.dim, d->samples.n_class, rc->model.in_dim, rc->model.n_class);
    return check_hash(&d->samples.hash, rc, set_hash, what);
}

int trn_run_data_load(trn_run_data *d, const char *path, trn_run_config *rc, int set_hash)
{
    memset(d, 0, sizeof *d);
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, (size_t)1 << 36);
    if (rv)
        return rv;
    rv = trn_run_data_parse(d, buf, len, rc, set_hash, path);
    free(buf);
    return rv;
}

/* The `ovt data text` flags (each followed by a space) that make tokens of
 * a vocabulary of v, or NULL for none of its tokenizers. */
static const char *tokenizer_flags(uint32_t v)
{
    return v == 256 ? "" : v == 50257 ? "--tokenizer gpt2 " : v == 32000 ? "--tokenizer llama2 " : NULL;
}

int trn_run_data_vocab_check(const trn_run_data *d, const trn_run_config *rc, const char *model)
{
    uint32_t have = d->tokens.vocab, want = rc->model.vocab;
    if (!trn_model_is_lm(&rc->model) || have == want)
        return 0;
    char fits[256], make[128] = "";
    const char *flags = tokenizer_flags(want);
    if (flags)
        snprintf(make, sizeof make, "Make its tokens with `ovt data text FILE %s--out TOKENS`, ", flags);
    size_t n = trn_model_preset_list(fits, sizeof fits, (int)rc->model.kind, have);
    if (!n)
        n = trn_model_preset_list(fits, sizeof fits, -1, have);
    return ovt_fail(OVT_EINVAL,
                    "the token file holds tokens of a %u-symbol vocabulary%s, but %s's vocabulary is %u tokens: "
                    "it would train on symbols that are not its tokens, %u of its embeddings never reached. "
                    "%s%s%s%s%s --force to train it anyway",
                    have, have == 256 ? " (byte-level: `ovt data text` without --tokenizer)" : "", model, want,
                    want > have ? want - have : 0, make, n ? (flags ? "train " : "Train ") : "",
                    n ? "a model of that vocabulary (--model " : "", n ? fits : "",
                    n ? "), or pass" : flags ? "or pass" : "Pass");
}

void trn_run_data_free(trn_run_data *d)
{
    data_tokens_free(&d->tokens);
    data_samples_free(&d->samples);
}

int trn_step_batch_get(trn_step_batch *b, const trn_run_data *d, const trn_run_config *rc, uint64_t i)
{
    memset(b, 0, sizeof *b);
    int rv;
    if (trn_model_is_lm(&rc->model)) {
        if ((rv = data_token_batch_get(&b->tb, &d->tokens, rc->seed, i, rc->batch_size, rc->seq_len)))
            return rv;
        data_token_batch_hash(&b->hash, &b->tb);
        trn_batch v = {.B = b->tb.B, .T = b->tb.T, .inputs = b->tb.inputs, .targets = b->tb.targets};
        b->view = v;
        return 0;
    }
    const trn_model_config *m = &rc->model;
    if ((rv = data_sample_batch_get(&b->sb, &d->samples, rc->seed, i, rc->batch_size)) ||
        (rv = data_sample_batch_augment(&b->sb, rc->seed, i, m->in_ch, m->in_hw, m->in_hw, rc->augment_crop,
                                        rc->augment_flip))) {
        data_sample_batch_free(&b->sb);
        return rv;
    }
    data_sample_batch_hash(&b->hash, &b->sb);
    trn_batch v = {.B = b->sb.B, .x = b->sb.x, .labels = b->sb.y};
    b->view = v;
    return 0;
}

int trn_step_batch_encode(const trn_step_batch *b, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int tokens = b->tb.inputs != NULL;
    uint32_t B = tokens ? b->tb.B : b->sb.B, W = tokens ? b->tb.T : b->sb.dim;
    size_t cells = (size_t)B * W, total = 8 + 4 * (tokens ? 2 * cells : cells + B);
    uint8_t *p = malloc(total);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory for a batch of %zu bytes", total);
    ovt_put_le32(p, B);
    ovt_put_le32(p + 4, W);
    uint8_t *q = p + 8;
    for (size_t k = 0; k < cells; k++, q += 4) {
        uint32_t v;
        if (tokens)
            v = (uint32_t)b->tb.inputs[k];
        else
            memcpy(&v, &b->sb.x[k], 4);
        ovt_put_le32(q, v);
    }
    for (size_t k = 0; k < (tokens ? cells : B); k++, q += 4)
        ovt_put_le32(q, tokens ? (uint32_t)b->tb.targets[k] : (uint32_t)b->sb.y[k]);
    *buf = p;
    *len = total;
    return 0;
}

void trn_step_batch_free(trn_step_batch *b)
{
    data_token_batch_free(&b->tb);
    data_sample_batch_free(&b->sb);
}

int trn_run_path(char *out, size_t cap, const char *dir, const char *sub, uint64_t step, const char *ext)
{
    int n = sub ? snprintf(out, cap, "%s/%s/step-%08llu.%s", dir, sub, (unsigned long long)step, ext)
                : snprintf(out, cap, "%s/%s", dir, ext);
    if (n < 0 || (size_t)n >= cap)
        return ovt_fail(OVT_EINVAL, "path under %s is too long", dir);
    return 0;
}

/* The step of checkpoint file `name` (step-NNNNNNNN.ckpt) in *step. */
static bool checkpoint_step(const char *name, uint64_t *step)
{
    unsigned long long s;
    char tail[8];
    if (sscanf(name, "step-%8llu.%5s", &s, tail) != 2 || strcmp(tail, "ckpt") != 0 || strlen(name) != 18)
        return false;
    *step = s;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Appends ", " (unless first) and step to out[cap] at *used. */
static void append_step(char *out, size_t cap, size_t *used, uint64_t step, bool first)
{
    int w = snprintf(out + *used, cap - *used, "%s%llu", first ? "" : ", ", (unsigned long long)step);
    *used += w > 0 && (size_t)w < cap - *used ? (size_t)w : 0;
}

void trn_run_checkpoint_list(char *out, size_t cap, const char *dir)
{
    char path[4096];
    snprintf(out, cap, "none");
    snprintf(path, sizeof path, "%s/ckpt", dir);
    DIR *dh = opendir(path);
    if (!dh)
        return;
    uint64_t *steps = NULL, s;
    size_t n = 0, room = 0, used = 0;
    struct dirent *e;
    while ((e = readdir(dh))) {
        if (!checkpoint_step(e->d_name, &s))
            continue;
        if (n == room) {
            uint64_t *p = realloc(steps, (room = room ? 2 * room : 64) * sizeof *steps);
            if (!p)
                break;
            steps = p;
        }
        steps[n++] = s;
    }
    closedir(dh);
    if (n)
        qsort(steps, n, sizeof *steps, cmp_u64);
    for (size_t k = 0; k < n; k++) {
        if (n > 8 && k == 3) {
            int w = snprintf(out + used, cap - used, ", ...");
            used += w > 0 && (size_t)w < cap - used ? (size_t)w : 0;
            k = n - 4;
            continue;
        }
        append_step(out, cap, &used, steps[k], k == 0);
    }
    if (n > 8)
        snprintf(out + used, cap - used, " (%zu checkpoints)", n);
    free(steps);
}

int trn_run_latest_checkpoint(const char *dir, uint64_t max_step, uint64_t *step)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt", dir);
    DIR *dh = opendir(path);
    if (!dh)
        return ovt_fail(OVT_ENOTFOUND, "%s has no checkpoint at or before the step", path);
    bool found = false;
    struct dirent *e;
    while ((e = readdir(dh))) {
        uint64_t s;
        if (checkpoint_step(e->d_name, &s) && s <= max_step && (!found || s > *step)) {
            *step = s;
            found = true;
        }
    }
    closedir(dh);
    return found ? 0 : ovt_fail(OVT_ENOTFOUND, "%s has no checkpoint at or before the step", path);
}


int trn_run_load_config(const char *dir, trn_run_config *rc, ovt_hash *config_hash)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    int rv = trn_run_path(path, sizeof path, dir, NULL, 0, "config.bin");
    if (rv || (rv = ovt_read_file(path, &buf, &len, 4096)))
        return rv;
    ovt_sha256(config_hash, buf, len);
    rv = trn_config_decode(rc, buf, len);
    free(buf);
    return rv ? ovt_fail_wrap(rv, "%s", path) : 0;
}
