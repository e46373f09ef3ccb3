#include "trainer/step.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/site.h"

int trn_dataset_parse(trn_dataset *d, const trn_run_config *rc, const uint8_t *buf, size_t len, const char *what)
{
    memset(d, 0, sizeof *d);
    int rv;
    if (rc->model.kind == TRN_MODEL_GPT2) {
        if ((rv = trn_tokens_parse(&d->tokens, buf, len)))
            return ovt_fail_wrap(rv, "%s", what);
        d->hash = d->tokens.hash;
        if (d->tokens.vocab > rc->model.vocab)
            return ovt_fail(OVT_EINVAL, "%s has vocab %u, larger than the model's %u", what, d->tokens.vocab,
                            rc->model.vocab);
        if (d->tokens.count < (size_t)rc->seq_len + 1)
            return ovt_fail(OVT_EINVAL, "%s holds %zu tokens, fewer than one sequence of %u plus a target", what,
                            d->tokens.count, rc->seq_len);
        return 0;
    }
    if ((rv = trn_samples_parse(&d->samples, buf, len, (int)rc->grid_bits)))
        return ovt_fail_wrap(rv, "%s", what);
    d->hash = d->samples.hash;
    if (d->samples.dim != rc->model.in_dim || d->samples.n_class != rc->model.n_class)
        return ovt_fail(OVT_EINVAL, "%s has %u features and %u classes; the model takes %u and %u", what,
                        d->samples.dim, d->samples.n_class, rc->model.in_dim, rc->model.n_class);
    return 0;
}

void trn_dataset_free(trn_dataset *d)
{
    trn_tokens_free(&d->tokens);
    trn_samples_free(&d->samples);
}

int trn_step_batch_get(trn_step_batch *b, const trn_dataset *d, const trn_run_config *rc, uint64_t i)
{
    memset(b, 0, sizeof *b);
    int rv;
    if (rc->model.kind == TRN_MODEL_GPT2) {
        if ((rv = trn_token_batch_get(&b->tb, &d->tokens, rc->seed, i, rc->batch_size, rc->seq_len)))
            return rv;
        trn_token_batch_hash(&b->hash, &b->tb);
        trn_batch v = {.B = b->tb.B, .T = b->tb.T, .inputs = b->tb.inputs, .targets = b->tb.targets};
        b->view = v;
        return 0;
    }
    if ((rv = trn_sample_batch_get(&b->sb, &d->samples, rc->seed, i, rc->batch_size)))
        return rv;
    trn_sample_batch_hash(&b->hash, &b->sb);
    trn_batch v = {.B = b->sb.B, .x = b->sb.x, .labels = b->sb.y};
    b->view = v;
    return 0;
}

void trn_step_batch_free(trn_step_batch *b)
{
    trn_token_batch_free(&b->tb);
    trn_sample_batch_free(&b->sb);
}

int trn_step_replay(trn_state *st, const trn_dataset *d, krn_rlog *log, int threads, ovt_hash *batch_hash)
{
    memset(batch_hash, 0, sizeof *batch_hash);
    uint64_t i = st->step + 1;
    if (krn_rlog_step(log) != i)
        return ovt_fail(OVT_EFRAUD, "the rounding log is for step %llu, not step %llu",
                        (unsigned long long)krn_rlog_step(log), (unsigned long long)i);
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .grid_bits = (int)st->config.grid_bits,
                     .threads = threads};
    krn_ctx *ctx = NULL;
    trn_workspace *w = NULL;
    trn_step_batch b;
    memset(&b, 0, sizeof b);
    int rv;
    if ((rv = krn_ctx_new(&ctx, &kc)) || (rv = trn_workspace_new(&w, &st->config)) ||
        (rv = trn_step_batch_get(&b, d, &st->config, i)))
        goto done;
    *batch_hash = b.hash;
    trn_step_info info;
    rv = trn_train_step(ctx, w, st, &b.view, log, &info);
done:
    trn_step_batch_free(&b);
    trn_workspace_free(w);
    krn_ctx_free(ctx);
    return rv;
}
