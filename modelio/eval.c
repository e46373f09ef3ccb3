/* A checkpoint's loss on held-out tokens (see eval.h). */
#include "modelio/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/runner.h"

/* The inputs and targets of windows first .. first+B-1. */
static void fill_batch(int32_t *inputs, int32_t *targets, const data_tokens *data, uint64_t first, uint32_t B,
                       uint32_t T)
{
    for (uint32_t j = 0; j < B; j++) {
        const uint32_t *w = data->tokens + (first + j) * (T + 1);
        for (uint32_t t = 0; t < T; t++) {
            inputs[(size_t)j * T + t] = (int32_t)w[t];
            targets[(size_t)j * T + t] = (int32_t)w[t + 1];
        }
    }
}

static int check_input(const trn_state *st, const data_tokens *data, uint64_t *windows)
{
    const trn_run_config *rc = &st->config;
    if (!trn_model_is_lm(&rc->model))
        return ovt_fail(OVT_EINVAL, "evaluation on held-out tokens is for GPT-2 and Llama models; this run is an MLP");
    uint64_t T = rc->seq_len;
    *windows = data->count / (T + 1);
    if (*windows == 0)
        return ovt_fail(OVT_EINVAL, "the held-out file has %zu tokens, fewer than one window of %llu (the run's "
                                    "sequence length %llu plus its target)",
                        data->count, (unsigned long long)(T + 1), (unsigned long long)T);
    if (data->vocab > rc->model.vocab)
        for (size_t i = 0; i < data->count; i++)
            if (data->tokens[i] >= rc->model.vocab)
                return ovt_fail(OVT_EINVAL, "the held-out file's token %zu is %u, outside the model's vocabulary "
                                            "of %u",
                                i, data->tokens[i], rc->model.vocab);
    return 0;
}

/* An evaluation runner for st's run in NEAREST mode, batches of up to B
 * in one shard. */
static int eval_runner(trn_runner **r, const trn_state *st, krn_backend_kind backend, int threads, uint32_t B)
{
    trn_runner_opts ro = {.backend = backend, .mode = KRN_NEAREST, .threads = threads, .eval_batch = B};
    return trn_runner_open(r, &st->config, NULL, &ro);
}

int trn_eval_run(const trn_state *st, const data_tokens *data, krn_backend_kind backend, int threads,
                 uint64_t max_windows, trn_eval_result *out)
{
    memset(out, 0, sizeof *out);
    uint64_t windows = 0;
    int rv = check_input(st, data, &windows);
    if (rv)
        return rv;
    if (max_windows && max_windows < windows)
        windows = max_windows;
    uint32_t T = st->config.seq_len;
    uint32_t B = windows < st->config.batch_size ? (uint32_t)windows : st->config.batch_size;
    trn_runner *r = NULL;
    int32_t *inputs = malloc((size_t)B * T * sizeof(int32_t)), *targets = malloc((size_t)B * T * sizeof(int32_t));
    if (!inputs || !targets) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for a batch of %u x %u tokens", B, T);
        goto done;
    }
    if ((rv = eval_runner(&r, st, backend, threads, B)))
        goto done;
    double total = 0;
    uint64_t j = 0;
    for (uint64_t first = 0; first < windows; first += B, j++) {
        uint32_t n = windows - first < B ? (uint32_t)(windows - first) : B;
        fill_batch(inputs, targets, data, first, n, T);
        trn_batch batch = {.B = n, .T = T, .inputs = inputs, .targets = targets};
        float mean;
        if ((rv = trn_runner_eval(r, st, &batch, j + 1, &mean)))
            goto done;
        total += (double)mean * (double)n;
    }
    *out = (trn_eval_result){.windows = windows, .tokens = windows * T, .batches = j, .T = T, .B = B,
                             .loss = total / (double)windows};
    out->perplexity = exp(out->loss);
done:
    trn_runner_free(r);
    free(inputs);
    free(targets);
    return rv;
}

/* How many of batch's B samples have their label as the first largest of
 * the logits the forward left in r. */
static uint64_t count_correct(const trn_runner *r, const trn_batch *batch, uint32_t n_class)
{
    const float *logits = trn_runner_logits(r);
    uint64_t correct = 0;
    for (uint32_t j = 0; j < batch->B; j++) {
        const float *z = logits + (size_t)j * n_class;
        uint32_t best = 0;
        for (uint32_t c = 1; c < n_class; c++)
            if (z[c] > z[best])
                best = c;
        correct += (int32_t)best == batch->labels[j];
    }
    return correct;
}

static int check_samples(const trn_state *st, const data_samples *data)
{
    const trn_model_config *m = &st->config.model;
    if (m->kind != TRN_MODEL_MLP && m->kind != TRN_MODEL_RESNET)
        return ovt_fail(OVT_EINVAL, "evaluation on held-out samples is for MLP and ResNet models; this run is %s",
                        trn_model_kind_name(m->kind));
    if (data->dim != m->in_dim || data->n_class != m->n_class || !data->count)
        return ovt_fail(OVT_EINVAL, "the held-out file has %u samples of %u features and %u classes; the model "
                                    "takes %u and %u", data->count, data->dim, data->n_class, m->in_dim, m->n_class);
    return 0;
}

int trn_eval_samples(const trn_state *st, const data_samples *data, krn_backend_kind backend, int threads,
                     uint64_t max_samples, trn_eval_class_result *out)
{
    memset(out, 0, sizeof *out);
    int rv = check_samples(st, data);
    if (rv)
        return rv;
    uint64_t count = max_samples && max_samples < data->count ? max_samples : data->count;
    uint32_t B = count < st->config.batch_size ? (uint32_t)count : st->config.batch_size;
    trn_runner *r = NULL;
    int32_t *labels = malloc((size_t)count * sizeof *labels);
    if (!labels) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %llu labels", (unsigned long long)count);
        goto done;
    }
    for (uint64_t i = 0; i < count; i++)
        labels[i] = (int32_t)data->y[i];
    if ((rv = eval_runner(&r, st, backend, threads, B)))
        goto done;
    double total = 0;
    uint64_t j = 0, correct = 0;
    for (uint64_t first = 0; first < count; first += B, j++) {
        uint32_t n = count - first < B ? (uint32_t)(count - first) : B;
        trn_batch batch = {.B = n, .x = data->x + first * data->dim, .labels = labels + first};
        float mean;
        if ((rv = trn_runner_eval(r, st, &batch, j + 1, &mean)))
            goto done;
        total += (double)mean * (double)n;
        correct += count_correct(r, &batch, data->n_class);
    }
    *out = (trn_eval_class_result){.samples = count, .correct = correct, .batches = j, .B = B,
                                   .loss = total / (double)count, .accuracy = (double)correct / (double)count};
done:
    trn_runner_free(r);
    free(labels);
    return rv;
}
