/* Sharded steps in one process (trainer/train.c, --shards S):
 *   - the S shards' summed gradient is the batch's gradient: from one state,
 *     S = 4 and S = 1 give gradients and losses that agree to far below the
 *     gradient's size (an independent fact: the mean of the shards' mean
 *     losses is the batch's mean loss), and differ in their bits only where
 *     rounding differs;
 *   - exactness: the trainer's run (cpu, RECORD) replayed with its logs on
 *     the ref and shuffle backends gives the same stateHash at every step;
 *     without the logs (NEAREST, the ablation) the shuffle backend leaves the
 *     trainer's states;
 *   - the log's shard table: S hashes, each the SHA-256 of that shard's
 *     gradient; a bit flipped in shard 2's gradient (bitflip-shard) is named
 *     by a replay as shard 2, and its state differs; a table changed after the
 *     fact is named but changes no state (a hint, not a commitment the state
 *     depends on); a sharded step's log without a table, or a one-shard
 *     step's with one, is fraud (ranks.json: tests/dp/test_dp_ranks.c);
 *   - trn_shard_sites, P counted on one sample of one token, is the P of
 *     real sharded steps of each model kind: steps of S = 2 and S = 4 (B 8,
 *     T 16) count 2P + Q and 4P + Q sites. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "trainer/state_hash.h"
#include "trn_helpers.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "common/fileio.h"
#include "data/dataset.h"
#include "trainer/state.h"
#include "trainer/train.h"

#define STEPS 40

static trn_run_config mlp_config(data_samples *data, uint32_t S, uint32_t head_shift)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 2, .width = 32, .in_dim = 24, .n_class = 5};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 16;
    rc.lr = 1e-2;
    rc.lr_min = 1e-3;
    rc.warmup_steps = 2;
    rc.decay_steps = STEPS;
    rc.seed = 77;
    rc.head_shift = head_shift;
    rc.shards = S;
    if (data_samples_synthetic(data, rc.seed, 512, m.in_dim, m.n_class, 32) != 0)
        abort();
    rc.dataset_hash = data->hash;
    return rc;
}


static void test_sum_is_the_batch_gradient(void)
{
    data_samples data;
    trn_run_config r1 = mlp_config(&data, 1, 0);
    trn_run_config r4 = r1;
    r4.shards = 4;
    trn_state *s1, *s4;
    trn_workspace *w1, *w4;
    CHECK(trn_state_new(&s1, &r1) == 0 && trn_state_new(&s4, &r4) == 0);
    trn_state_init(s1);
    trn_state_init(s4); /* the shard count is not part of init: same parameters */
    CHECK(memcmp(s1->params, s4->params, s1->layout.nparams * sizeof(float)) == 0);
    CHECK(trn_workspace_new(&w1, &r1) == 0 && trn_workspace_new(&w4, &r4) == 0);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_CPU, KRN_NEAREST, 1);
    trn_step_info i1, i4;
    CHECK(trn_test_mlp_step(ctx, w1, s1, &data, NULL, &i1) == 0);
    CHECK(trn_test_mlp_step(ctx, w4, s4, &data, NULL, &i4) == 0);
    CHECK(i1.shards == 1 && i4.shards == 4 && i1.shard_hashes == NULL && i4.shard_hashes != NULL);
    const float *g1 = trn_workspace_grads(w1), *g4 = trn_workspace_grads(w4);
    size_t n = s1->layout.nparams, differ = 0;
    double gmax = 0, dmax = 0;
    for (size_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs((double)g1[i]));
        dmax = fmax(dmax, fabs((double)g1[i] - (double)g4[i]));
        differ += g1[i] != g4[i];
    }
    CHECK_MSG(gmax > 0 && dmax <= 1e-5 * gmax, "max |g1 - g4| %g against max |g| %g", dmax, gmax);
    CHECK_MSG(fabs((double)i1.loss - (double)i4.loss) <= 1e-6 * fabs((double)i1.loss), "loss %.9g vs %.9g",
              (double)i1.loss, (double)i4.loss);
    CHECK(differ < n); /* most elements agree bit for bit */
    krn_ctx_free(ctx);
    trn_workspace_free(w1);
    trn_workspace_free(w4);
    trn_state_free(s1);
    trn_state_free(s4);
    data_samples_free(&data);
}

static void test_replay_and_ablation(void)
{
    /* the exactness demo's model and head shift (docs/demo.md): values near
     * midpoints are frequent, so the ablation leaves the run within steps */
    data_samples data;
    trn_model_config m;
    if (trn_model_preset(&m, "mlp-demo") != 0)
        abort();
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 32;
    rc.lr = 3e-3;
    rc.lr_min = 3e-4;
    rc.warmup_steps = 10;
    rc.decay_steps = STEPS;
    rc.head_shift = 12;
    rc.shards = 4;
    if (data_samples_synthetic(&data, rc.seed, 2048, m.in_dim, m.n_class, 32) != 0)
        abort();
    rc.dataset_hash = data.hash;
    trn_state *st, *init;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    CHECK(trn_state_clone(&init, st) == 0);
    krn_ctx *rec = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 5);
    krn_rlog *logs[STEPS];
    ovt_hash hashes[STEPS];
    for (int i = 0; i < STEPS; i++) {
        logs[i] = krn_rlog_new();
        trn_step_info info;
        CHECK_MSG(trn_test_mlp_step(rec, w, st, &data, logs[i], &info) == 0, "%s", ovt_errmsg());
        trn_state_hash(&hashes[i], st);
        CHECK(krn_rlog_nshards(logs[i]) == 4);
        /* each table entry is the SHA-256 of that shard's gradient as it was summed */
        for (uint32_t s = 0; s < 4; s++)
            CHECK(!memcmp(krn_rlog_shard_hash(logs[i], s)->b, info.shard_hashes[s].b, 32));
    }
    krn_backend_kind others[3] = {KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE, KRN_BACKEND_SHUFFLE};
    krn_mode modes[3] = {KRN_REPLAY, KRN_REPLAY, KRN_NEAREST};
    for (int k = 0; k < 3; k++) {
        krn_ctx *rep = trn_test_ctx(others[k], modes[k], 9);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        int same = 0;
        for (int i = 0; i < STEPS; i++) {
            trn_step_info info;
            CHECK_MSG(trn_test_mlp_step(rep, w, v, &data, modes[k] == KRN_REPLAY ? logs[i] : NULL, &info) == 0, "%s",
                      ovt_errmsg());
            ovt_hash h;
            trn_state_hash(&h, v);
            same += memcmp(h.b, hashes[i].b, 32) == 0;
            if (modes[k] == KRN_REPLAY)
                CHECK(info.shard_differs == -1);
        }
        if (modes[k] == KRN_REPLAY)
            CHECK_EQ_U64(same, STEPS);
        else
            CHECK_MSG(same < STEPS, "the ablation (no log, shuffled sums) kept all %d states", STEPS);
        trn_state_free(v);
        krn_ctx_free(rep);
    }

    /* A table with shard 1's hash changed: named, the state is the same. */
    krn_ctx *rep = trn_test_ctx(KRN_BACKEND_REF, KRN_REPLAY, 9);
    trn_state *v;
    CHECK(trn_state_clone(&v, init) == 0);
    ovt_hash table[4];
    for (uint32_t s = 0; s < 4; s++)
        table[s] = *krn_rlog_shard_hash(logs[0], s);
    table[1].b[7] ^= 1;
    CHECK(krn_rlog_set_shards(logs[0], table, 4) == 0);
    trn_step_info info;
    CHECK(trn_test_mlp_step(rep, w, v, &data, logs[0], &info) == 0);
    CHECK(info.shard_differs == 1);
    ovt_hash h;
    trn_state_hash(&h, v);
    CHECK(!memcmp(h.b, hashes[0].b, 32));
    /* No table: fraud. */
    CHECK(krn_rlog_set_shards(logs[1], NULL, 0) == 0);
    CHECK(trn_test_mlp_step(rep, w, v, &data, logs[1], &info) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "shard table of 0 shards") != NULL);
    trn_state_free(v);

    /* A bit flipped in shard 2's gradient at step 1: a replay names shard 2,
     * and its state is not the faulty trainer's. */
    trn_state *bad;
    CHECK(trn_state_clone(&bad, init) == 0);
    krn_rlog *flog = krn_rlog_new();
    trn_workspace_fault_shard(w, 1, 2);
    CHECK(trn_test_mlp_step(rec, w, bad, &data, flog, &info) == 0);
    trn_workspace_fault_shard(w, 0, 0);
    ovt_hash hb;
    trn_state_hash(&hb, bad);
    CHECK(memcmp(hb.b, hashes[0].b, 32) != 0);
    CHECK(memcmp(krn_rlog_shard_hash(flog, 2)->b, krn_rlog_shard_hash(logs[0], 2)->b, 32) != 0);
    CHECK(!memcmp(krn_rlog_shard_hash(flog, 0)->b, info.shard_hashes[0].b, 32));
    CHECK(trn_state_clone(&v, init) == 0);
    CHECK(trn_test_mlp_step(rep, w, v, &data, flog, &info) == 0);
    CHECK(info.shard_differs == 2);
    trn_state_hash(&h, v);
    CHECK(!memcmp(h.b, hashes[0].b, 32)); /* the honest state: the auditor is right */
    trn_state_free(v);
    trn_state_free(bad);
    krn_rlog_free(flog);
    krn_ctx_free(rep);

    for (int i = 0; i < STEPS; i++)
        krn_rlog_free(logs[i]);
    krn_ctx_free(rec);
    trn_workspace_free(w);
    trn_state_free(init);
    trn_state_free(st);
    data_samples_free(&data);
}

/* A one-shard step's log with a shard table is fraud too. */
static void test_one_shard_table(void)
{
    data_samples data;
    trn_run_config rc = mlp_config(&data, 1, 0);
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    krn_ctx *rep = trn_test_ctx(KRN_BACKEND_REF, KRN_REPLAY, 9);
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 1);
    ovt_hash t[2] = {{{0}}, {{1}}};
    CHECK(krn_rlog_set_shards(log, t, 2) == 0);
    trn_step_info info;
    CHECK(trn_test_mlp_step(rep, w, st, &data, log, &info) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "one shard") != NULL);
    krn_rlog_free(log);
    krn_ctx_free(rep);
    trn_workspace_free(w);
    trn_state_free(st);
    data_samples_free(&data);
}

static void shard_sites_of(const char *preset, uint32_t want)
{
    uint32_t P = 0;
    uint64_t sites[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        trn_test_step_data f;
        CHECK(trn_test_step_data_open(&f, preset, 5, 8, 16, k ? 4 : 2, 2000, 64) == 0);
        if (k == 0)
            CHECK_MSG(trn_shard_sites(&f.rc, &P) == 0, "%s: %s", preset, ovt_errmsg());
        trn_state *st = NULL;
        trn_workspace *w = NULL;
        CHECK(trn_state_new(&st, &f.rc) == 0 && trn_workspace_new(&w, &f.rc) == 0);
        trn_state_init(st);
        krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_CPU, KRN_NEAREST, 1);
        trn_step_info info;
        CHECK_MSG(trn_train_step(ctx, w, st, &f.b, NULL, &info) == 0, "%s: %s", preset, ovt_errmsg());
        sites[k] = info.stats.sites;
        krn_ctx_free(ctx);
        trn_workspace_free(w);
        trn_state_free(st);
        trn_test_step_data_close(&f);
    }
    CHECK_MSG(P > 0 && sites[1] - sites[0] == 2 * (uint64_t)P, "%s: P %u, steps of 2 and 4 shards %llu and %llu sites",
              preset, P, (unsigned long long)sites[0], (unsigned long long)sites[1]);
    if (want)
        CHECK_MSG(P == want, "%s: P %u, not %u", preset, P, want);
}

static void test_shard_sites(void)
{
    shard_sites_of("gpt2-tiny", 140); /* test_devnet_narrow's 4 x 140 */
    shard_sites_of("llama-tiny", 0);
    shard_sites_of("mlp-demo", 0);
    shard_sites_of("resnet-mini", 0);
}

int main(void)
{
    CHECK_RUN(test_sum_is_the_batch_gradient());
    CHECK_RUN(test_replay_and_ablation());
    CHECK_RUN(test_one_shard_table());
    CHECK_RUN(test_shard_sites());
    return check_done();
}
