/* Tests of the training step: resuming from a checkpoint equals training
 * without interruption (hash by hash); a verifier replaying from the
 * trainer's log files on another backend matches every step; a forged or
 * misplaced log is refused; the MLP's gradient agrees with finite
 * differences of its loss; the loss falls. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "trainer/state_hash.h"
#include "trn_helpers.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "data/dataset.h"
#include "trainer/checkpoint.h"
#include "trainer/state.h"
#include "trainer/train.h"

#define STEPS 12

static trn_run_config small_config(data_samples *data)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 2, .width = 32, .in_dim = 24, .n_class = 5};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 16;
    rc.lr = 1e-2;
    rc.lr_min = 1e-3;
    rc.warmup_steps = 3;
    rc.decay_steps = STEPS;
    rc.weight_decay = 0.01;
    rc.seed = 77;
    rc.head_shift = 4;
    if (data_samples_synthetic(data, rc.seed, 512, m.in_dim, m.n_class, 32) != 0)
        abort();
    rc.dataset_hash = data->hash;
    return rc;
}


static void test_resume_and_replay(const char *dir)
{
    data_samples data;
    trn_run_config rc = small_config(&data);
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    trn_state *init;
    CHECK(trn_state_clone(&init, st) == 0);

    /* The trainer: STEPS uninterrupted steps, logs to files. */
    krn_ctx *rec = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 5);
    krn_rlog *log = krn_rlog_new();
    ovt_hash hashes[STEPS + 1];
    trn_state_hash(&hashes[0], st);
    float first_loss = 0, last_loss = 0;
    uint64_t entries = 0;
    char path[512];
    for (int i = 1; i <= STEPS; i++) {
        trn_step_info info;
        CHECK_MSG(trn_test_mlp_step(rec, w, st, &data, log, &info) == 0, "%s", ovt_errmsg());
        trn_state_hash(&hashes[i], st);
        entries += krn_rlog_nentries(log);
        snprintf(path, sizeof path, "%s/step-%d.rlog", dir, i);
        CHECK(krn_rlog_write_file(log, path) == 0);
        if (i == 1)
            first_loss = info.loss;
        last_loss = info.loss;
        if (i == STEPS / 2) {
            snprintf(path, sizeof path, "%s/half.ckpt", dir);
            CHECK(trn_checkpoint_write(st, path) == 0);
        }
    }
    CHECK(st->step == STEPS);
    CHECK_MSG(last_loss < first_loss, "loss %g -> %g", (double)first_loss, (double)last_loss);
    CHECK(entries > 0); /* the head shift makes near-midpoint values common */

    /* Resume: read the mid-run checkpoint, continue on a fresh ctx and
     * workspace; every later state equals the uninterrupted run's. */
    trn_state *res = NULL;
    snprintf(path, sizeof path, "%s/half.ckpt", dir);
    CHECK(trn_checkpoint_read(&res, path) == 0);
    if (res) {
        CHECK(res->step == STEPS / 2);
        ovt_hash h;
        trn_state_hash(&h, res);
        CHECK_MEM(h.b, hashes[STEPS / 2].b, 32);
        krn_ctx *rec2 = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 5);
        trn_workspace *w2;
        CHECK(trn_workspace_new(&w2, &res->config) == 0);
        int same = 0;
        for (int i = STEPS / 2 + 1; i <= STEPS; i++) {
            trn_step_info info;
            CHECK(trn_test_mlp_step(rec2, w2, res, &data, log, &info) == 0);
            trn_state_hash(&h, res);
            same += memcmp(h.b, hashes[i].b, 32) == 0;
        }
        CHECK_EQ_U64(same, STEPS - STEPS / 2);
        trn_workspace_free(w2);
        krn_ctx_free(rec2);
        trn_state_free(res);
    }

    /* A verifier on each other backend, from the log files. */
    krn_backend_kind others[2] = {KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE};
    for (int k = 0; k < 2; k++) {
        krn_ctx *rep = trn_test_ctx(others[k], KRN_REPLAY, 5);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        int same = 0;
        for (int i = 1; i <= STEPS; i++) {
            snprintf(path, sizeof path, "%s/step-%d.rlog", dir, i);
            CHECK(krn_rlog_read_file(log, path) == 0);
            trn_step_info info;
            CHECK_MSG(trn_test_mlp_step(rep, w, v, &data, log, &info) == 0, "%s", ovt_errmsg());
            ovt_hash h;
            trn_state_hash(&h, v);
            same += memcmp(h.b, hashes[i].b, 32) == 0;
        }
        CHECK_EQ_U64(same, STEPS);
        trn_state_free(v);
        krn_ctx_free(rep);
    }

    /* The log of step 2 replayed at step 1 is refused (it belongs to
     * another step). */
    {
        krn_ctx *rep = trn_test_ctx(KRN_BACKEND_REF, KRN_REPLAY, 5);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        snprintf(path, sizeof path, "%s/step-2.rlog", dir);
        CHECK(krn_rlog_read_file(log, path) == 0);
        trn_step_info info;
        CHECK(trn_test_mlp_step(rep, w, v, &data, log, &info) != 0);
        CHECK(strstr(ovt_errmsg(), "step 1") != NULL);
        trn_state_free(v);
        krn_ctx_free(rep);
    }

    /* A flipped bit in the state at step k shows in stateHash_k, and the
     * run stays apart afterwards. */
    {
        krn_ctx *rep = trn_test_ctx(KRN_BACKEND_REF, KRN_NEAREST, 5);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        int first_bad = 0;
        for (int i = 1; i <= 4; i++) {
            trn_step_info info;
            CHECK(trn_test_mlp_step(rep, w, v, &data, NULL, &info) == 0);
            if (i == 3) {
                uint32_t bits;
                memcpy(&bits, &v->m[100], 4);
                bits ^= 1;
                memcpy(&v->m[100], &bits, 4);
            }
            ovt_hash h;
            trn_state_hash(&h, v);
            if (!first_bad && memcmp(h.b, hashes[i].b, 32) != 0)
                first_bad = i;
        }
        CHECK(first_bad == 3);
        trn_state_free(v);
        krn_ctx_free(rep);
    }

    krn_rlog_free(log);
    krn_ctx_free(rec);
    trn_workspace_free(w);
    trn_state_free(init);
    trn_state_free(st);
    data_samples_free(&data);
}

/* The MLP's backward against central differences of its forward loss, for
 * the parameters with the largest gradients (loose: the loss is a rounded
 * FP32 value). */
static void test_gradient(void)
{
    data_samples data;
    trn_run_config rc = small_config(&data);
    rc.head_shift = 0;
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_REF, KRN_NEAREST, 5);
    data_sample_batch sb;
    CHECK(data_sample_batch_get(&sb, &data, 1, 1, rc.batch_size) == 0);
    trn_batch b = {.B = sb.B, .x = sb.x, .labels = sb.y};
    float loss;
    size_t n = st->layout.nparams;
    float *g = trn_workspace_grads(w);
    memset(g, 0, n * sizeof(float));
    CHECK(krn_step_begin(ctx, 1, NULL) == 0);
    CHECK(trn_mlp_forward(ctx, w, st->params, &b, &loss) == 0);
    CHECK(trn_mlp_backward(ctx, w, st->params, &b) == 0);
    krn_stats stats;
    CHECK(krn_step_end(ctx, &stats) == 0);
    float *grad = malloc(n * sizeof(float));
    memcpy(grad, g, n * sizeof(float));
    int checked = 0, good = 0;
    /* The 8 largest gradients, one per tensor region picked by a scan. */
    for (int pick = 0; pick < 8; pick++) {
        size_t best = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(grad[i]) > fabsf(grad[best]))
                best = i;
        float saved = st->params[best], h = 1e-2f;
        float lp, lm;
        st->params[best] = saved + h;
        CHECK(trn_eval_loss(ctx, w, st, &b, 1, &lp) == 0);
        st->params[best] = saved - h;
        CHECK(trn_eval_loss(ctx, w, st, &b, 1, &lm) == 0);
        st->params[best] = saved;
        double fd = ((double)lp - (double)lm) / (2.0 * h);
        checked++;
        if (fabs(fd - grad[best]) <= 0.05 * fabs(grad[best]) + 1e-4)
            good++;
        else
            fprintf(stderr, "param %zu: backward %g, finite difference %g\n", best, (double)grad[best], fd);
        grad[best] = 0; /* next pick */
    }
    CHECK_EQ_U64(good, checked);
    free(grad);
    data_sample_batch_free(&sb);
    krn_ctx_free(ctx);
    trn_workspace_free(w);
    trn_state_free(st);
    data_samples_free(&data);
}

int main(void)
{
    char dir[] = "/tmp/ovt-trn-train-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK_RUN(test_resume_and_replay(dir));
    CHECK_RUN(test_gradient());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
