/* The ResNet presets' layouts (issue 29): torchvision's tensor
 * names, and the parameter counts of the CIFAR-style networks as published
 * elsewhere: ResNet-18 for 10 classes with a 3x3 stem, 11,173,962 (the
 * figure of the common CIFAR-10 implementations); ResNet-50, 23,520,842
 * (torchvision's 25,557,032 less its 1000-class head, 2,049,000, plus a
 * 10-class one, 20,490, less its 7x7 stem, 9,408, plus a 3x3 one, 1,728).
 * resnet-50-block, the first block of ResNet-50's layer1 and of its layer2
 * on a 1-channel stem: torchvision's layer1 is 215,808 parameters, its
 * block 0 that less two identity blocks of 70,400 (1x1 256->64, 3x3 64->64,
 * 1x1 64->256 and their norms), 75,008; its layer2 1,219,584 less three of
 * 280,064, 379,392; with a 3x3 stem from 1 channel (576 + 128) and a
 * 10-class head on 512 (5,130): 460,234.
 * The running statistics follow the trainable tensors, two per batch-norm
 * channel. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/state_hash.h"
#include "trn_helpers.h"
#include "data/images.h"
#include "trainer/state.h"
#include "trainer/train.h"
#include "trainer/config.h"
#include "trainer/layout.h"

static void check_preset(const char *name, size_t ntrain, size_t channels)
{
    trn_model_config m;
    trn_layout l;
    CHECK(trn_model_preset(&m, name) == 0 && trn_layout_build(&l, &m) == 0);
    CHECK_EQ_U64(l.ntrain, ntrain);
    CHECK_EQ_U64(l.nparams - l.ntrain, 2 * channels);
    CHECK(!strcmp(l.t[0].name, "conv1.weight") && l.t[0].ndim == 4 && l.t[0].shape[2] == 3);
}

/* A ResNet's run config is version 5 (260 bytes, and the tree stateHash's
 * trailing field of a new run: 264) and decodes back; a
 * ResNet field changes the configHash; version 5 holds nothing else. The
 * augmentation fields sit at 252 and 256 (docs/formats.md), each changes
 * the configHash, and out-of-range values are refused. */
static void check_config(void)
{
    trn_model_config m;
    CHECK(trn_model_preset(&m, "resnet-mini") == 0);
    trn_run_config rc, back;
    trn_config_default(&rc, &m);
    rc.augment_crop = 3;
    rc.augment_flip = 1;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(len, 264);
    CHECK_EQ_U64(enc[8], 5);
    CHECK_EQ_U64(ovt_get_le32(enc + 260), TRN_STATE_HASH_TREE);
    CHECK(enc[252] == 3 && !enc[253] && !enc[254] && !enc[255] && enc[256] == 1 && !enc[257] && !enc[258] && !enc[259]);
    CHECK_MSG(trn_config_decode(&back, enc, len) == 0, "%s", ovt_errmsg());
    CHECK(trn_model_equal(&back.model, &rc.model) && back.augment_crop == 3 && back.augment_flip == 1);
    ovt_hash h1, h2, h3, h4;
    trn_config_hash(&h1, &rc);
    rc.augment_crop = 2;
    trn_config_hash(&h3, &rc);
    rc.augment_crop = 3;
    rc.augment_flip = 0;
    trn_config_hash(&h4, &rc);
    rc.augment_flip = 1;
    rc.model.stages[2] = 2;
    trn_config_hash(&h2, &rc);
    CHECK(memcmp(h1.b, h2.b, 32) != 0 && memcmp(h1.b, h3.b, 32) != 0 && memcmp(h1.b, h4.b, 32) != 0);
    rc.model.stages[2] = 1;
    const uint32_t bad[4][2] = {{9, 0}, {0, 2}, {28, 0}, {8, 1}};
    for (int k = 0; k < 4; k++) {
        rc.augment_crop = bad[k][0];
        rc.augment_flip = bad[k][1];
        CHECK_MSG((trn_config_check(&rc) == 0) == (k == 3), "crop %u flip %u", bad[k][0], bad[k][1]);
    }
    enc[252] = 9;
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
    enc[252] = 3;
    enc[12] = TRN_MODEL_MLP;
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
    /* other kinds take no augmentation (an MLP reads images too) */
    CHECK(trn_model_preset(&m, "mlp-mnist") == 0);
    trn_config_default(&rc, &m);
    rc.augment_flip = 1;
    CHECK(trn_config_check(&rc) == OVT_EINVAL);
    /* the stages a layout holds: bottleneck blocks in one stage are 3 units
     * each, plus the stem and block 0's projection (64 -> 256), 5 tensors a
     * unit and fc's 2: 20 blocks are 62 units, 312 tensors; 21 would be 65
     * units, 327 > TRN_MAX_TENSORS, and are refused, as is any count up to
     * 2^32 - 1 and a stage after an empty one */
    CHECK(trn_model_preset(&m, "resnet-50-block") == 0);
    trn_layout *l = malloc(sizeof *l);
    const uint32_t fits[4][4] = {{20, 0, 0, 0}, {21, 0, 0, 0}, {UINT32_MAX, 0, 0, 0}, {1, 0, 1, 0}};
    for (int k = 0; l && k < 4; k++) {
        memcpy(m.stages, fits[k], sizeof m.stages);
        int rv = trn_layout_build(l, &m);
        CHECK_MSG((rv == 0) == (k == 0), "stages %u-%u-%u-%u: %d", fits[k][0], fits[k][1], fits[k][2], fits[k][3],
                  rv);
        if (k == 0)
            CHECK_EQ_U64(l->count, 312);
    }
    free(l);
}

/* A micro ResNet: 8x8 images of one channel, two stages of one basic
 * block (the second with its projection), 3 classes. */
static trn_run_config micro_config(data_samples *data)
{
    trn_model_config m = {.kind = TRN_MODEL_RESNET, .width = 4, .in_ch = 1, .in_hw = 8, .in_dim = 64, .n_class = 3,
                          .block = 1, .stages = {1, 1, 0, 0}, .bn_eps = 1e-5, .bn_momentum = 0.1};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 4;
    rc.lr = 1e-2;
    rc.lr_min = 1e-2;
    if (data_samples_synthetic(data, 3, 256, 64, 3, 32) != 0)
        abort();
    rc.dataset_hash = data->hash;
    return rc;
}

/* The backward pass against central differences of the forward loss (batch
 * statistics in training mode, as the step computes them), on every
 * trainable tensor's largest gradient. */
static void check_gradient(void)
{
    data_samples data;
    trn_run_config rc = micro_config(&data);
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_REF, KRN_NEAREST, 9);
    data_sample_batch sb;
    CHECK(data_sample_batch_get(&sb, &data, rc.seed, 1, rc.batch_size) == 0);
    trn_batch b = {.B = sb.B, .x = sb.x, .labels = sb.y};
    float *g = trn_workspace_grads(w), loss;
    memset(g, 0, st->layout.nparams * sizeof(float));
    CHECK(krn_step_begin(ctx, 1, NULL) == 0);
    CHECK_MSG(trn_resnet_forward(ctx, w, st->params, &b, &loss) == 0, "%s", ovt_errmsg());
    CHECK_MSG(trn_resnet_backward(ctx, w, st->params, &b) == 0, "%s", ovt_errmsg());
    krn_stats stats;
    CHECK(krn_step_end(ctx, &stats) == 0);
    int checked = 0, good = 0;
    for (size_t k = 0; k < st->layout.count; k++) {
        const trn_tensor_info *t = &st->layout.t[k];
        if (t->offset >= st->layout.ntrain)
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
        if (fabs(fd - g[best]) <= 0.05 * fabs(g[best]) + 5e-4)
            good++;
        else
            fprintf(stderr, "%s[%zu]: backward %g, finite difference %g\n", t->name, best - t->offset,
                    (double)g[best], fd);
    }
    CHECK_EQ_U64(good, checked);
    CHECK_EQ_U64(checked, 20); /* stem 3, block 1: 6, block 2 with its projection: 9, head 2 */
    data_sample_batch_free(&sb);
    krn_ctx_free(ctx);
    trn_workspace_free(w);
    trn_state_free(st);
    data_samples_free(&data);
}

/* Ten steps recorded on cpu replay bit for bit on ref and shuffle; the
 * running statistics move (they are state). */
static void check_replay(void)
{
    data_samples data;
    trn_run_config rc = micro_config(&data);
    trn_state *st, *init;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    CHECK(trn_state_clone(&init, st) == 0);
    enum { STEPS = 10 };
    krn_ctx *rec = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 9);
    krn_rlog *logs[STEPS];
    ovt_hash hashes[STEPS];
    for (int i = 0; i < STEPS; i++) {
        logs[i] = krn_rlog_new();
        trn_step_info info;
        CHECK_MSG(trn_test_mlp_step(rec, w, st, &data, logs[i], &info) == 0, "%s", ovt_errmsg());
        trn_state_hash(&hashes[i], st);
    }
    size_t lo = st->layout.ntrain, moved = 0;
    for (size_t i = lo; i < st->layout.nparams; i++)
        moved += st->params[i] != init->params[i];
    CHECK_MSG(moved == st->layout.nparams - lo, "%zu of %zu running statistics moved", moved, st->layout.nparams - lo);
    krn_backend_kind others[2] = {KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE};
    for (int k = 0; k < 2; k++) {
        krn_ctx *rep = trn_test_ctx(others[k], KRN_REPLAY, 11);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        int same = 0;
        for (int i = 0; i < STEPS; i++) {
            trn_step_info info;
            CHECK_MSG(trn_test_mlp_step(rep, w, v, &data, logs[i], &info) == 0, "%s", ovt_errmsg());
            ovt_hash h;
            trn_state_hash(&h, v);
            same += !memcmp(h.b, hashes[i].b, 32);
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
    data_samples_free(&data);
}

/* The first n images of Fashion-MNIST's training set as samples (1 x 28 x
 * 28, pixel / 256), or 0 where Debian's dataset-fashion-mnist is missing. */
static int fashion(data_samples *out, uint32_t n)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    const char *names[2] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"};
    uint8_t *buf[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "gzip -dc %s/%s 2>/dev/null", dir, names[k]);
        FILE *f = popen(cmd, "r");
        size_t cap = 0;
        for (size_t got = 1; f && got;) {
            if (len[k] + 65536 > cap)
                buf[k] = realloc(buf[k], cap = 2 * cap + 65536);
            got = fread(buf[k] + len[k], 1, 65536, f);
            len[k] += got;
        }
        if (f)
            pclose(f);
    }
    data_images im;
    int ok = len[0] && len[1] &&
             data_idx_parse(&im, buf[0], len[0], names[0], buf[1], len[1], names[1], 10, n) == 0;
    free(buf[0]);
    free(buf[1]);
    if (!ok)
        return 0;
    uint8_t *enc;
    size_t enc_len;
    ok = data_images_encode(&im, &enc, &enc_len) == 0 && data_images_parse_samples(out, enc, enc_len) == 0;
    if (ok)
        free(enc);
    data_images_free(&im);
    return ok;
}

/* resnet-mini 40 steps on Fashion-MNIST: the replays with the logs on cpu,
 * ref and shuffle give the trainer's stateHash at every step, and without
 * them (the ablation) ref leaves the trainer's states.
 *
 * The ablation needs the head shift (trainer/config.h) on fc. Without it
 * ref rounds every element as cpu does for 60 steps and more: most of a
 * step's ~1,300 entries are the first convolution's exact ties (8-bit
 * pixels times FP32 weights, sums exact in FP64, the same on every side),
 * and fc's input gradient is a sum of 10 products that is exact in FP64
 * while the softmax is flat. With +-2^20/16 on fc's columns that sum
 * cancels 2^16-fold; once the softmax has peaked its terms span more than
 * 53 bits, the FP64 sums of cpu and ref differ in their last bits, and one
 * of fc's input gradients rounds the other way: the no-log run leaves at
 * step 21 (measured with this configuration; the check asserts only that
 * it leaves within 40). */
static void check_fashion(void)
{
    data_samples data;
    if (!fashion(&data, 2048)) {
        printf("no Fashion-MNIST (apt-get install dataset-fashion-mnist): the 40-step replay skipped\n");
        return;
    }
    trn_model_config m;
    CHECK(trn_model_preset(&m, "resnet-mini") == 0);
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 8;
    rc.lr = 1e-2;
    rc.lr_min = 1e-3;
    rc.decay_steps = 40;
    rc.head_shift = 20;
    rc.dataset_hash = data.hash;
    trn_state *st, *init;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    CHECK(trn_state_clone(&init, st) == 0);
    enum { STEPS = 40 };
    krn_ctx *rec = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 9);
    krn_rlog *logs[STEPS];
    ovt_hash hashes[STEPS];
    uint64_t entries = 0;
    float first = 0, last = 0;
    for (int i = 0; i < STEPS; i++) {
        logs[i] = krn_rlog_new();
        trn_step_info info;
        CHECK_MSG(trn_test_mlp_step(rec, w, st, &data, logs[i], &info) == 0, "%s", ovt_errmsg());
        trn_state_hash(&hashes[i], st);
        entries += krn_rlog_nentries(logs[i]);
        first = i == 0 ? info.loss : first;
        last = info.loss;
    }
    CHECK_MSG(last < first, "loss %g -> %g", (double)first, (double)last);
    printf("resnet-mini on Fashion-MNIST: loss %.4f -> %.4f, %llu log entries in %d steps\n", (double)first,
           (double)last, (unsigned long long)entries, STEPS);
    krn_backend_kind others[4] = {KRN_BACKEND_CPU, KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE, KRN_BACKEND_REF};
    krn_mode modes[4] = {KRN_REPLAY, KRN_REPLAY, KRN_REPLAY, KRN_NEAREST};
    for (int k = 0; k < 4; k++) {
        krn_ctx *rep = trn_test_ctx(others[k], modes[k], 11);
        trn_state *v;
        CHECK(trn_state_clone(&v, init) == 0);
        int same = 0, first_diff = -1;
        for (int i = 0; i < STEPS; i++) {
            trn_step_info info;
            CHECK_MSG(trn_test_mlp_step(rep, w, v, &data, modes[k] == KRN_REPLAY ? logs[i] : NULL, &info) == 0, "%s",
                      ovt_errmsg());
            ovt_hash h;
            trn_state_hash(&h, v);
            int eq = !memcmp(h.b, hashes[i].b, 32);
            same += eq;
            first_diff = !eq && first_diff < 0 ? i + 1 : first_diff;
        }
        if (modes[k] == KRN_REPLAY)
            CHECK_MSG(same == STEPS, "backend %d: %d of %d equal, first differs at %d", (int)others[k], same, STEPS,
                      first_diff);
        else {
            CHECK_MSG(same < STEPS, "the ablation (no log, ref) kept all %d states", STEPS);
            printf("ablation on ref: the state leaves the trainer's at step %d\n", first_diff);
        }
        trn_state_free(v);
        krn_ctx_free(rep);
    }
    for (int i = 0; i < STEPS; i++)
        krn_rlog_free(logs[i]);
    krn_ctx_free(rec);
    trn_workspace_free(w);
    trn_state_free(init);
    trn_state_free(st);
    data_samples_free(&data);
}

int main(void)
{
    check_config();
    CHECK_RUN(check_gradient());
    CHECK_RUN(check_replay());
    CHECK_RUN(check_fashion());
    /* batch-norm channels, counted by hand per block (two or three norms
     * of the block's widths, and the projection's): 4,800, 26,560 and
     * 64 + (64 + 64 + 256 + 256) + (128 + 128 + 512 + 512) = 1,984 */
    check_preset("resnet-18", 11173962, 4800);
    check_preset("resnet-50", 23520842, 26560);
    check_preset("resnet-50-block", 460234, 1984);
    trn_model_config m;
    trn_layout l;
    CHECK(trn_model_preset(&m, "resnet-mini") == 0 && trn_layout_build(&l, &m) == 0);
    int found = 0;
    for (size_t k = 0; k < l.count; k++)
        found += !strcmp(l.t[k].name, "layer2.0.downsample.0.weight") && l.t[k].shape[0] == 32 &&
                 l.t[k].shape[1] == 16 && l.t[k].shape[2] == 1;
    CHECK(found == 1);
    /* resnet-50-block: both blocks project (64 -> 256, 256 -> 512) */
    CHECK(trn_model_preset(&m, "resnet-50-block") == 0 && trn_layout_build(&l, &m) == 0);
    found = 0;
    for (size_t k = 0; k < l.count; k++)
        found += (!strcmp(l.t[k].name, "layer1.0.downsample.0.weight") && l.t[k].shape[0] == 256 &&
                  l.t[k].shape[1] == 64) ||
                 (!strcmp(l.t[k].name, "layer2.0.downsample.0.weight") && l.t[k].shape[0] == 512 &&
                  l.t[k].shape[1] == 256);
    CHECK(found == 2);
    return check_done();
}
