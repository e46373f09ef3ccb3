/* The ResNet presets' layouts (issue 29, in progress): torchvision's tensor
 * names, and the parameter counts of the CIFAR-style networks as published
 * elsewhere: ResNet-18 for 10 classes with a 3x3 stem, 11,173,962 (the
 * figure of the common CIFAR-10 implementations); ResNet-50, 23,520,842
 * (torchvision's 25,557,032 less its 1000-class head, 2,049,000, plus a
 * 10-class one, 20,490, less its 7x7 stem, 9,408, plus a 3x3 one, 1,728).
 * The running statistics follow the trainable tensors, two per batch-norm
 * channel. */
#include <string.h>

#include "check.h"
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

/* A ResNet's run config is version 5 (252 bytes) and decodes back; a
 * ResNet field changes the configHash; version 5 holds nothing else. */
static void check_config(void)
{
    trn_model_config m;
    CHECK(trn_model_preset(&m, "resnet-mini") == 0);
    trn_run_config rc, back;
    trn_config_default(&rc, &m);
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(len, 252);
    CHECK_EQ_U64(enc[8], 5);
    CHECK_MSG(trn_config_decode(&back, enc, len) == 0, "%s", ovt_errmsg());
    CHECK(trn_model_equal(&back.model, &rc.model));
    ovt_hash h1, h2;
    trn_config_hash(&h1, &rc);
    rc.model.stages[2] = 2;
    trn_config_hash(&h2, &rc);
    CHECK(memcmp(h1.b, h2.b, 32) != 0);
    enc[12] = TRN_MODEL_MLP;
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
}

int main(void)
{
    check_config();
    /* batch-norm channels, counted by hand per block (two or three norms
     * of the block's widths, and the projection's): 4,800 and 26,560 */
    check_preset("resnet-18", 11173962, 4800);
    check_preset("resnet-50", 23520842, 26560);
    trn_model_config m;
    trn_layout l;
    CHECK(trn_model_preset(&m, "resnet-mini") == 0 && trn_layout_build(&l, &m) == 0);
    int found = 0;
    for (size_t k = 0; k < l.count; k++)
        found += !strcmp(l.t[k].name, "layer2.0.downsample.0.weight") && l.t[k].shape[0] == 32 &&
                 l.t[k].shape[1] == 16 && l.t[k].shape[2] == 1;
    CHECK(found == 1);
    return check_done();
}
