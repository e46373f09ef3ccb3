/* The GPT-2 model on a micro config: the initial loss is about ln(V) (an
 * independent fact about a small-init softmax), the backward pass agrees
 * with finite differences of the forward loss (including the tied output
 * head, which gets two gradient contributions), training lowers the loss on
 * a repetitive text, and replaying the trainer's logs on the ref and shuffle
 * backends reproduces every stateHash. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "trainer/state_hash.h"
#include "trn_helpers.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "data/dataset.h"
#include "trainer/state.h"
#include "trainer/train.h"

#define STEPS 30

static trn_run_config micro_config(data_tokens *data)
{
    /* A text that repeats with period 7 over a 48-token vocabulary. */
    enum { N = 700 };
    uint32_t toks[N];
    for (int i = 0; i < N; i++)
        toks[i] = (uint32_t)((i % 7) * 5 + 3);
    uint8_t *buf;
    size_t len;
    if (data_tokens_encode(toks, N, 48, &buf, &len) != 0 || data_tokens_parse(data, buf, len) != 0)
        abort();
    free(buf);
    trn_model_config m = {.kind = TRN_MODEL_GPT2, .n_layer = 2, .width = 32, .n_head = 4, .vocab = 48, .max_seq = 16};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 4;
    rc.seq_len = 12;
    rc.lr = 1e-2;
    rc.lr_min = 1e-2;
    rc.warmup_steps = 0;
    rc.seed = 3;
    rc.dataset_hash = data->hash;
    return rc;
}

static void test_gradient(void)
{
    data_tokens data;
    trn_run_config rc = micro_config(&data);
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_REF, KRN_NEAREST, 9);
    data_token_batch tb;
    trn_batch b;
    CHECK(trn_test_token_batch(&tb, &b, &data, &rc, 1) == 0);
    size_t n = st->layout.nparams;
    float *g = trn_workspace_grads(w), loss;
    memset(g, 0, n * sizeof(float));
    CHECK(krn_step_begin(ctx, 1, NULL) == 0);
    CHECK(trn_gpt2_forward(ctx, w, st->params, &b, &loss) == 0);
    CHECK(trn_gpt2_backward(ctx, w, st->params, &b) == 0);
    krn_stats stats;
    CHECK(krn_step_end(ctx, &stats) == 0);
    CHECK_MSG(fabs(loss - log(48.0)) < 0.15, "initial loss %g, ln V %g", (double)loss, log(48.0));

    /* The largest gradients of a few tensors, wte among them. */
    const char *names[] = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw", "ln1w", "lnfb"};
    int checked = 0, good = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const trn_tensor_info *t = NULL;
        for (size_t j = 0; j < st->layout.count; j++)
            if (!strcmp(st->layout.t[j].name, names[k]))
                t = &st->layout.t[j];
        if (!t)
            continue;
        size_t best = t->offset;
        for (size_t i = t->offset; i < t->offset + t->size; i++)
            if (fabsf(g[i]) > fabsf(g[best]))
                best = i;
        float saved = st->params[best], h = 1e-2f, lp, lm;
        st->params[best] = saved + h;
        CHECK(trn_eval_loss(ctx, w, st, &b, 1, &lp) == 0);
        st->params[best] = saved - h;
        CHECK(trn_eval_loss(ctx, w, st, &b, 1, &lm) == 0);
        st->params[best] = saved;
        double fd = ((double)lp - (double)lm) / (2.0 * h);
        checked++;
        if (fabs(fd - g[best]) <= 0.05 * fabs(g[best]) + 2e-4)
            good++;
        else
            fprintf(stderr, "%s[%zu]: backward %g, finite difference %g\n", names[k], best - t->offset,
                    (double)g[best], fd);
    }
    CHECK_EQ_U64(good, checked);
    CHECK(checked == 8);
    data_token_batch_free(&tb);
    krn_ctx_free(ctx);
    trn_workspace_free(w);
    trn_state_free(st);
    data_tokens_free(&data);
}

static void test_train_and_replay(void)
{
    data_tokens data;
    trn_run_config rc = micro_config(&data);
    trn_state *st, *init;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    CHECK(trn_state_clone(&init, st) == 0);
    krn_ctx *rec = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 9);
    krn_rlog *logs[STEPS];
    ovt_hash hashes[STEPS];
    float first = 0, last = 0;
    uint64_t entries = 0;
    for (int i = 0; i < STEPS; i++) {
        data_token_batch tb;
        trn_batch b;
        CHECK(trn_test_token_batch(&tb, &b, &data, &rc, (uint64_t)i + 1) == 0);
        logs[i] = krn_rlog_new();
        trn_step_info info;
        CHECK_MSG(trn_train_step(rec, w, st, &b, logs[i], &info) == 0, "%s", ovt_errmsg());
        entries += krn_rlog_nentries(logs[i]);
        trn_state_hash(&hashes[i], st);
        if (i == 0)
            first = info.loss;
        last = info.loss;
        data_token_batch_free(&tb);
    }
    CHECK_MSG(last < 0.5f * first, "loss %g -> %g", (double)first, (double)last);
    printf("gpt2 micro: loss %.4f -> %.4f, %llu log entries in %d steps\n", (double)first, (double)last,
           (unsigned long long)entries, STEPS);

    krn_backend_kind others[2] = {KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE};
    for (int k = 0; k < 2; k++) {
        krn_ctx *rep = trn_test_ctx(others[k], KRN_REPLAY, 9);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        int same = 0;
        for (int i = 0; i < STEPS; i++) {
            data_token_batch tb;
            trn_batch b;
            CHECK(trn_test_token_batch(&tb, &b, &data, &rc, (uint64_t)i + 1) == 0);
            trn_step_info info;
            CHECK_MSG(trn_train_step(rep, w, v, &b, logs[i], &info) == 0, "%s", ovt_errmsg());
            ovt_hash h;
            trn_state_hash(&h, v);
            same += memcmp(h.b, hashes[i].b, 32) == 0;
            data_token_batch_free(&tb);
        }
        CHECK_EQ_U64(same, STEPS);
        trn_state_free(v);
        krn_ctx_free(rep);
    }
    for (int i = 0; i < STEPS; i++)
        krn_rlog_free(logs[i]);
    krn_ctx_free(rec);
    trn_workspace_free(w);
    trn_state_free(init);
    trn_state_free(st);
    data_tokens_free(&data);
}

int main(void)
{
    CHECK_RUN(test_gradient());
    CHECK_RUN(test_train_and_replay());
    return check_done();
}
