#ifndef OVT_TESTS_TRAINER_HELPERS_H
#define OVT_TESTS_TRAINER_HELPERS_H

/* Shared by the trainer suites. */
#include <stdlib.h>
#include <string.h>

#include "kernels/site.h"
#include "data/dataset.h"
#include "trainer/train.h"

/* A single-threaded ctx at b = 32 for backend and mode; aborts on failure
 * (a broken test setup, not a result). */
static inline krn_ctx *trn_test_ctx(krn_backend_kind backend, krn_mode mode, uint64_t shuffle_seed)
{
    krn_config kc = {.backend = backend, .mode = mode, .grid_bits = 32, .shuffle_seed = shuffle_seed, .threads = 1};
    krn_ctx *ctx = NULL;
    if (krn_ctx_new(&ctx, &kc) != 0)
        abort();
    return ctx;
}

/* A preset's run config for a few test steps (seed, no warmup, batches
 * of B in `shards` shards, a language model's sequences of 8) and its data,
 * dataset_hash set: 400 tokens, token i = (i*mul + i/div) % vocab, or 64
 * synthetic samples of the seed. 0, or the preset's or data's error. */
static inline int trn_test_preset_run(trn_run_config *rc, data_tokens *tokens, data_samples *samples,
                                      const char *preset, uint64_t seed, uint32_t B, uint32_t shards, int mul, int div)
{
    trn_model_config m;
    int rv = trn_model_preset(&m, preset);
    if (rv)
        return rv;
    trn_config_default(rc, &m);
    rc->seed = seed;
    rc->warmup_steps = 0;
    rc->batch_size = B;
    rc->shards = shards;
    if (!trn_model_is_lm(&m)) {
        rv = data_samples_synthetic(samples, seed, 64, m.in_dim, m.n_class, 32);
        rc->dataset_hash = samples->hash;
        return rv;
    }
    enum { N = 400 };
    uint32_t toks[N];
    for (int i = 0; i < N; i++)
        toks[i] = (uint32_t)((i * mul + i / div) % (int)m.vocab);
    uint8_t *buf;
    size_t len;
    if ((rv = data_tokens_encode(toks, N, m.vocab, &buf, &len)))
        return rv;
    rv = data_tokens_parse(tokens, buf, len);
    free(buf);
    rc->seq_len = 8;
    rc->dataset_hash = tokens->hash;
    return rv;
}

/* One MLP step of st with the schedule's batch of its next step. */
static inline int trn_test_mlp_step(krn_ctx *ctx, trn_workspace *w, trn_state *st, const data_samples *data,
                                    krn_rlog *log, trn_step_info *info)
{
    data_sample_batch sb;
    int rv = data_sample_batch_get(&sb, data, st->config.seed, st->step + 1, st->config.batch_size);
    if (rv)
        return rv;
    trn_batch b = {.B = sb.B, .x = sb.x, .labels = sb.y};
    rv = trn_train_step(ctx, w, st, &b, log, info);
    data_sample_batch_free(&sb);
    return rv;
}

/* The schedule's token batch of step `step` into tb, and b its view. */
static inline int trn_test_token_batch(data_token_batch *tb, trn_batch *b, const data_tokens *data,
                                       const trn_run_config *rc, uint64_t step)
{
    int rv = data_token_batch_get(tb, data, rc->seed, step, rc->batch_size, rc->seq_len);
    trn_batch view = {.B = tb->B, .T = tb->T, .inputs = tb->inputs, .targets = tb->targets};
    *b = view;
    return rv;
}

/* One step's inputs for a preset: its run config (seed, batch, sequence
 * length, shards as given; no warmup), its data (ntokens generated tokens,
 * or nsamples synthetic samples for an MLP or ResNet) and the batch of
 * step 1, viewed as b. */
typedef struct {
    trn_run_config rc;
    data_tokens tokens;
    data_samples samples;
    data_token_batch tb;
    data_sample_batch sb;
    trn_batch b;
    bool lm;
} trn_test_step_data;

static inline int trn_test_step_data_open(trn_test_step_data *f, const char *preset, uint64_t seed, uint32_t batch,
                                          uint32_t seq, uint32_t shards, size_t ntokens, uint32_t nsamples)
{
    memset(f, 0, sizeof *f);
    trn_model_config m;
    int rv = trn_model_preset(&m, preset);
    if (rv)
        return rv;
    trn_config_default(&f->rc, &m);
    f->rc.seed = seed;
    f->rc.warmup_steps = 0;
    f->rc.batch_size = batch;
    f->rc.shards = shards;
    f->lm = trn_model_is_lm(&m);
    if (f->lm) {
        uint32_t *toks = malloc(ntokens * sizeof *toks);
        uint8_t *buf = NULL;
        size_t len;
        if (toks == NULL)
            return OVT_ENOMEM;
        for (size_t i = 0; i < ntokens; i++)
            toks[i] = (uint32_t)((i * 37 + i / 5) % m.vocab);
        if (!(rv = data_tokens_encode(toks, ntokens, m.vocab, &buf, &len)))
            rv = data_tokens_parse(&f->tokens, buf, len);
        free(buf);
        free(toks);
        f->rc.seq_len = seq;
        f->rc.dataset_hash = f->tokens.hash;
        return rv ? rv : trn_test_token_batch(&f->tb, &f->b, &f->tokens, &f->rc, 1);
    }
    if ((rv = data_samples_synthetic(&f->samples, 3, nsamples, m.in_dim, m.n_class, 32)))
        return rv;
    f->rc.dataset_hash = f->samples.hash;
    rv = data_sample_batch_get(&f->sb, &f->samples, f->rc.seed, 1, f->rc.batch_size);
    f->b = (trn_batch){.B = f->sb.B, .x = f->sb.x, .labels = f->sb.y};
    return rv;
}

static inline void trn_test_step_data_close(trn_test_step_data *f)
{
    if (f->lm) {
        data_token_batch_free(&f->tb);
        data_tokens_free(&f->tokens);
    } else {
        data_sample_batch_free(&f->sb);
        data_samples_free(&f->samples);
    }
}

/* The "state N HASH" lines of `ovt train --print-state` output, in order,
 * into dst (cap bytes). */
static inline void trn_test_state_lines(char *dst, size_t cap, const char *text)
{
    dst[0] = 0;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 6 && !strncmp(p, "state ", 6) && strlen(dst) + len + 2 < cap) {
            strncat(dst, p, len);
            strcat(dst, "\n");
        }
        p = e ? e + 1 : NULL;
    }
}

#endif
