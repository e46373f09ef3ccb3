#include "trainer/config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/grid.h"
#include "kernels/site.h"

static const uint8_t config_magic[8] = {'O', 'V', 'T', 'R', 'C', 'F', 'G', 0};

static uint64_t f64_bits(double x);

struct preset {
    const char *name;
    trn_model_config m;
};

/* gpt2-small is GPT-2's 124M model (vocab unpadded); gpt2-tiny is a
 * byte-level toy of the same structure for tests and CPU runs. */
static const struct preset presets[] = {
    {"mlp-demo", {.kind = TRN_MODEL_MLP, .n_layer = 2, .width = 128, .in_dim = 128, .n_class = 32}},
    /* MNIST and Fashion-MNIST as an image file (`ovt data idx`): 28 x 28
     * pixels flattened, 10 classes */
    {"mlp-mnist", {.kind = TRN_MODEL_MLP, .n_layer = 2, .width = 128, .in_dim = 784, .n_class = 10}},
    {"gpt2-tiny",
     {.kind = TRN_MODEL_GPT2, .n_layer = 2, .width = 64, .n_head = 4, .vocab = 256, .max_seq = 64}},
    {"gpt2-small",
     {.kind = TRN_MODEL_GPT2, .n_layer = 12, .width = 768, .n_head = 12, .vocab = 50257, .max_seq = 1024}},
    /* llama-tiny: byte tokens, grouped-query attention (2 query heads per
     * key/value head) and its own output head, for tests; llama-15m and
     * llama-110m: the shapes of llama2.c's stories15M and stories110M
     * (Llama 2's 32000 tokens, tied head) */
    {"llama-tiny",
     {.kind = TRN_MODEL_LLAMA, .n_layer = 2, .width = 64, .n_head = 4, .n_kv_head = 2, .vocab = 256,
      .max_seq = 64, .hidden = 192, .tied = 0, .rope_theta = 10000.0, .norm_eps = 1e-5}},
    {"llama-15m",
     {.kind = TRN_MODEL_LLAMA, .n_layer = 6, .width = 288, .n_head = 6, .n_kv_head = 6, .vocab = 32000,
      .max_seq = 256, .hidden = 768, .tied = 1, .rope_theta = 10000.0, .norm_eps = 1e-5}},
    /* resnet-mini: Fashion-MNIST's 28x28 images, three stages of one basic
     * block; resnet-18 and resnet-50: the CIFAR shapes (3x32x32, 10
     * classes, a 3x3 stem) of the paper's ResNets; resnet-50-block:
     * resnet-50's first two stages, one bottleneck block each (64 -> 64 ->
     * 64 -> 256 at stride 1 and 256 -> 128 -> 128 -> 512 at stride 2, both
     * with projections), on Fashion-MNIST's images, for the PyTorch
     * reference */
    {"resnet-mini",
     {.kind = TRN_MODEL_RESNET, .width = 16, .in_ch = 1, .in_hw = 28, .in_dim = 784, .n_class = 10, .block = 1,
      .stages = {1, 1, 1, 0}, .bn_eps = 1e-5, .bn_momentum = 0.1}},
    {"resnet-18",
     {.kind = TRN_MODEL_RESNET, .width = 64, .in_ch = 3, .in_hw = 32, .in_dim = 3072, .n_class = 10, .block = 1,
      .stages = {2, 2, 2, 2}, .bn_eps = 1e-5, .bn_momentum = 0.1}},
    {"resnet-50",
     {.kind = TRN_MODEL_RESNET, .width = 64, .in_ch = 3, .in_hw = 32, .in_dim = 3072, .n_class = 10, .block = 2,
      .stages = {3, 4, 6, 3}, .bn_eps = 1e-5, .bn_momentum = 0.1}},
    {"resnet-50-block",
     {.kind = TRN_MODEL_RESNET, .width = 64, .in_ch = 1, .in_hw = 28, .in_dim = 784, .n_class = 10, .block = 2,
      .stages = {1, 1, 0, 0}, .bn_eps = 1e-5, .bn_momentum = 0.1}},
    {"llama-110m",
     {.kind = TRN_MODEL_LLAMA, .n_layer = 12, .width = 768, .n_head = 12, .n_kv_head = 12, .vocab = 32000,
      .max_seq = 1024, .hidden = 2048, .tied = 1, .rope_theta = 10000.0, .norm_eps = 1e-5}},
};

int trn_model_equal(const trn_model_config *a, const trn_model_config *b)
{
    return a->kind == b->kind && a->n_layer == b->n_layer && a->width == b->width && a->n_head == b->n_head &&
           a->vocab == b->vocab && a->max_seq == b->max_seq && a->in_dim == b->in_dim && a->n_class == b->n_class &&
           a->n_kv_head == b->n_kv_head && a->hidden == b->hidden && a->tied == b->tied &&
           f64_bits(a->rope_theta) == f64_bits(b->rope_theta) && f64_bits(a->norm_eps) == f64_bits(b->norm_eps) &&
           a->in_ch == b->in_ch && a->in_hw == b->in_hw && a->block == b->block &&
           !memcmp(a->stages, b->stages, sizeof a->stages) && f64_bits(a->bn_eps) == f64_bits(b->bn_eps) &&
           f64_bits(a->bn_momentum) == f64_bits(b->bn_momentum);
}

const char *trn_model_kind_name(trn_model_kind kind)
{
    return kind == TRN_MODEL_MLP     ? "mlp"
           : kind == TRN_MODEL_GPT2  ? "gpt2"
           : kind == TRN_MODEL_LLAMA ? "llama"
           : kind == TRN_MODEL_RESNET ? "resnet"
                                      : "unknown";
}

int trn_model_is_lm(const trn_model_config *m)
{
    return m->kind == TRN_MODEL_GPT2 || m->kind == TRN_MODEL_LLAMA;
}

uint32_t trn_llama_hidden(uint32_t width)
{
    uint32_t h = 2 * (4 * width) / 3;
    return (h + 31) / 32 * 32;
}

int trn_model_preset(trn_model_config *out, const char *name)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i].m;
            return 0;
        }
    }
    char known[512];
    trn_model_preset_list(known, sizeof known, -1, 0);
    return ovt_fail(OVT_EINVAL, "unknown model '%s' (known: %s)", name, known);
}

const char *trn_model_preset_name(size_t i)
{
    return i < sizeof presets / sizeof presets[0] ? presets[i].name : NULL;
}

size_t trn_model_preset_list(char *out, size_t cap, int kind, uint32_t vocab)
{
    size_t n = 0, used = 0;
    if (cap)
        out[0] = '\0';
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const trn_model_config *m = &presets[i].m;
        if ((kind >= 0 && (int)m->kind != kind) || (vocab && m->vocab != vocab))
            continue;
        int w = snprintf(out + used, cap > used ? cap - used : 0, "%s%s", n ? ", " : "", presets[i].name);
        used += w > 0 ? (size_t)w : 0;
        used = used < cap ? used : cap;
        n++;
    }
    return n;
}

/* Whether the Llama-only fields are all 0 (as every other kind has them). */
static int llama_fields_zero(const trn_model_config *m)
{
    return !m->n_kv_head && !m->hidden && !m->tied && m->rope_theta == 0 && m->norm_eps == 0 && !m->in_ch &&
           !m->in_hw && !m->block && !m->stages[0] && !m->stages[1] && !m->stages[2] && !m->stages[3] &&
           m->bn_eps == 0 && m->bn_momentum == 0; /* and the ResNet ones */
}

static int llama_check(const trn_model_config *m)
{
    if (m->n_layer < 1 || m->n_layer > 256 || !m->width || !m->n_head || !m->n_kv_head || !m->vocab ||
        !m->max_seq || !m->hidden)
        return ovt_fail(OVT_EINVAL, "Llama needs n_layer 1..256 and non-zero width, n_head, n_kv_head, vocab, "
                                    "max_seq, hidden");
    if (m->width % m->n_head || (m->width / m->n_head) % 2)
        return ovt_fail(OVT_EINVAL, "Llama width %u must be n_head (%u) heads of an even size", m->width,
                        m->n_head);
    if (m->n_head % m->n_kv_head)
        return ovt_fail(OVT_EINVAL, "Llama n_kv_head %u does not divide n_head %u", m->n_kv_head, m->n_head);
    if (m->width > (1u << 16) || m->hidden > (1u << 18) || m->vocab > (1u << 20) || m->max_seq > (1u << 16))
        return ovt_fail(OVT_EINVAL, "Llama dimensions too large (width <= 65536, hidden <= 2^18, vocab <= 2^20, "
                                    "max_seq <= 65536)");
    if (m->tied > 1)
        return ovt_fail(OVT_EINVAL, "Llama tied is %u, expected 0 (own output head) or 1 (tied to wte)", m->tied);
    if (!(m->rope_theta >= 1.0 && m->rope_theta <= 1e12) || !(m->norm_eps > 0 && m->norm_eps <= 1.0))
        return ovt_fail(OVT_EINVAL, "Llama rope_theta %g (expected 1..1e12) or norm_eps %g (expected (0, 1]) "
                                    "out of range",
                        m->rope_theta, m->norm_eps);
    if (m->in_dim || m->n_class || m->in_ch || m->in_hw || m->block || m->stages[0] || m->bn_eps != 0)
        return ovt_fail(OVT_EINVAL, "Llama config has MLP or ResNet fields set");
    return 0;
}

int trn_model_check(const trn_model_config *m)
{
    if (m->kind == TRN_MODEL_MLP) {
        if (m->n_layer < 1 || m->n_layer > TRN_MAX_LAYERS || !m->width || !m->in_dim || m->n_class < 2)
            return ovt_fail(OVT_EINVAL, "MLP needs 1..%d hidden layers, width and in_dim > 0, n_class >= 2",
                            TRN_MAX_LAYERS);
        if (m->width > (1u << 16) || m->in_dim > (1u << 16) || m->n_class > (1u << 16))
            return ovt_fail(OVT_EINVAL, "MLP dimensions above 65536 are not supported");
        if (m->n_head || m->vocab || m->max_seq || !llama_fields_zero(m))
            return ovt_fail(OVT_EINVAL, "MLP config has GPT-2 or Llama fields set");
        return 0;
    }
    if (m->kind == TRN_MODEL_GPT2) {
        if (m->n_layer < 1 || m->n_layer > 256 || !m->width || !m->n_head || !m->vocab || !m->max_seq)
            return ovt_fail(OVT_EINVAL, "GPT-2 needs n_layer 1..256 and non-zero width, n_head, vocab, max_seq");
        if (m->width % m->n_head)
            return ovt_fail(OVT_EINVAL, "GPT-2 width %u is not a multiple of n_head %u", m->width, m->n_head);
        if (m->width > (1u << 16) || m->vocab > (1u << 20) || m->max_seq > (1u << 16))
            return ovt_fail(OVT_EINVAL, "GPT-2 dimensions too large (width <= 65536, vocab <= 2^20, max_seq <= 65536)");
        if (m->in_dim || m->n_class || !llama_fields_zero(m))
            return ovt_fail(OVT_EINVAL, "GPT-2 config has MLP or Llama fields set");
        return 0;
    }
    if (m->kind == TRN_MODEL_LLAMA)
        return llama_check(m);
    if (m->kind == TRN_MODEL_RESNET) {
        if (!m->width || m->width > 1024 || !m->in_ch || m->in_ch > 16 || m->in_hw < 4 || m->in_hw > 512 ||
            m->in_dim != m->in_ch * m->in_hw * m->in_hw || m->n_class < 2 || (m->block != 1 && m->block != 2) ||
            !m->stages[0] || !(m->bn_eps > 0) || !(m->bn_momentum > 0 && m->bn_momentum <= 1))
            return ovt_fail(OVT_EINVAL, "ResNet needs a width of 1..1024, 1..16 input channels of 4..512 square, "
                                        "in_dim their product, 2+ classes, block 1 or 2, a first stage, bn_eps > 0 "
                                        "and bn_momentum in (0, 1]");
        for (int s = 1; s < 3; s++)
            if (!m->stages[s] && (m->stages[s + 1] || (s == 1 && m->stages[3])))
                return ovt_fail(OVT_EINVAL, "ResNet stages %u-%u-%u-%u: a stage after an empty one (0 ends the list, "
                                "so the later ones would be ignored)", m->stages[0], m->stages[1], m->stages[2],
                                m->stages[3]);
        return 0;
    }
    return ovt_fail(OVT_EINVAL, "unknown model kind %d", (int)m->kind);
}

static int finite_in(double x, double lo, double hi)
{
    return isfinite(x) && x >= lo && x <= hi;
}

int trn_config_check(const trn_run_config *rc)
{
    int rv = trn_model_check(&rc->model);
    if (rv)
        return rv;
    if (krn_grid_check_bits((int)rc->grid_bits))
        return OVT_EINVAL;
    if (rc->band_rules != TRN_BAND_RULES_V1 && rc->band_rules != TRN_BAND_RULES_CANONICAL)
        return ovt_fail(OVT_EINVAL, "band rules version %u is not supported (this build knows %u and %u)",
                        rc->band_rules, TRN_BAND_RULES_V1, TRN_BAND_RULES_CANONICAL);
    if (!finite_in(rc->lr, 0, 10) || !finite_in(rc->lr_min, 0, 10) || !finite_in(rc->beta1, 0, 1) ||
        rc->beta1 >= 1 || !finite_in(rc->beta2, 0, 1) || rc->beta2 >= 1 || !finite_in(rc->eps, 0, 1) ||
        rc->eps <= 0 || !finite_in(rc->weight_decay, 0, 1) || !finite_in(rc->grad_clip, 0, 1e30))
        return ovt_fail(OVT_EINVAL, "optimizer settings out of range (lr and lr_min in [0,10], betas in "
                                    "[0,1), eps in (0,1], weight decay in [0,1], clip >= 0, 0 = off)");
    if (rc->schedule != TRN_SCHEDULE_LINEAR && rc->schedule != TRN_SCHEDULE_COSINE)
        return ovt_fail(OVT_EINVAL, "schedule kind %u is unknown (0 linear, 1 cosine)", (unsigned)rc->schedule);
    int shiftable = rc->model.kind == TRN_MODEL_MLP || rc->model.kind == TRN_MODEL_RESNET ||
                    (rc->model.kind == TRN_MODEL_LLAMA && !rc->model.tied);
    if (rc->head_shift > 20 || (rc->head_shift && !shiftable))
        return ovt_fail(OVT_EINVAL, "head shift %u: only the MLP, a ResNet and a Llama with its own head take one, at most 20",
                        rc->head_shift);
    int resnet = rc->model.kind == TRN_MODEL_RESNET;
    if ((rc->augment_crop || rc->augment_flip) && !resnet)
        return ovt_fail(OVT_EINVAL, "augmentation (crop %u, flip %u): only a ResNet's images take it",
                        rc->augment_crop, rc->augment_flip);
    if (rc->augment_crop > TRN_MAX_AUGMENT_CROP || (resnet && rc->augment_crop >= rc->model.in_hw) ||
        rc->augment_flip > 1)
        return ovt_fail(OVT_EINVAL, "augmentation crop %u and flip %u: the crop's padding is at most %u and "
                                    "less than the image side (%u), the flip 0 or 1",
                        rc->augment_crop, rc->augment_flip, TRN_MAX_AUGMENT_CROP, rc->model.in_hw);
    if (rc->batch_size < 1 || rc->batch_size > (1u << 20))
        return ovt_fail(OVT_EINVAL, "batch size %u out of range 1..2^20", rc->batch_size);
    if (trn_model_is_lm(&rc->model) && (rc->seq_len < 1 || rc->seq_len > rc->model.max_seq))
        return ovt_fail(OVT_EINVAL, "sequence length %u out of range 1..%u", rc->seq_len, rc->model.max_seq);
    if (rc->model.kind == TRN_MODEL_MLP && rc->seq_len)
        return ovt_fail(OVT_EINVAL, "the MLP takes no sequence length");
    if (rc->state_hash != 0 && rc->state_hash != TRN_STATE_HASH_V1 && rc->state_hash != TRN_STATE_HASH_TREE)
        return ovt_fail(OVT_EINVAL, "stateHash version %u is not supported (this build knows %u and %u)",
                        rc->state_hash, TRN_STATE_HASH_V1, TRN_STATE_HASH_TREE);
    uint32_t S = trn_config_shards(rc);
    if (S > TRN_MAX_SHARDS || rc->batch_size % S != 0)
        return ovt_fail(OVT_EINVAL, "%u shards: the shard count must divide the batch size (%u) and be at most %u",
                        S, rc->batch_size, TRN_MAX_SHARDS);
    return 0;
}

int trn_config_rule(const trn_run_config *rc)
{
    return rc->band_rules == TRN_BAND_RULES_CANONICAL ? KRN_RULE_V3 : KRN_RULE_V2;
}

uint32_t trn_config_shards(const trn_run_config *rc)
{
    return rc->shards ? rc->shards : 1;
}

uint32_t trn_config_state_hash(const trn_run_config *rc)
{
    return rc->state_hash ? rc->state_hash : TRN_STATE_HASH_V1;
}

void trn_config_default(trn_run_config *out, const trn_model_config *m)
{
    memset(out, 0, sizeof *out);
    out->model = *m;
    out->lr = 1e-3;
    out->lr_min = 1e-3;
    out->beta1 = 0.9;
    out->beta2 = 0.999;
    out->eps = 1e-8;
    out->weight_decay = 0.0;
    out->grad_clip = 1.0;
    out->batch_size = 8;
    out->seq_len = trn_model_is_lm(m) ? (m->max_seq < 64 ? m->max_seq : 64) : 0;
    out->seed = 1;
    out->grid_bits = 32;
    out->band_rules = TRN_BAND_RULES_CANONICAL;
    out->shards = 1;
    out->state_hash = TRN_STATE_HASH_TREE;
}

static uint64_t f64_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

static double f64_from(uint64_t u)
{
    double x;
    memcpy(&x, &u, 8);
    return x;
}

int trn_config_has_init(const trn_run_config *rc)
{
    static const ovt_hash zero;
    return memcmp(rc->init_hash.b, zero.b, 32) != 0;
}

/* The lowest encoding version that holds rc (canonical encoding). */
static uint32_t enc_version(const trn_run_config *rc)
{
    if (rc->model.kind == TRN_MODEL_LLAMA)
        return 4;
    if (rc->model.kind == TRN_MODEL_RESNET)
        return 5;
    if (trn_config_shards(rc) > 1)
        return 3;
    return rc->schedule != TRN_SCHEDULE_LINEAR || trn_config_has_init(rc) ? 2 : 1;
}

/* The encoding of everything but the stateHash version, field by field
 * (docs/formats.md mirrors this table). */
static size_t encode_body(uint8_t out[TRN_CONFIG_ENC_MAX], const trn_run_config *rc)
{
    const trn_model_config *m = &rc->model;
    uint32_t version = enc_version(rc);
    memcpy(out, config_magic, 8);
    ovt_put_le32(out + 8, version);
    const uint32_t model_fields[8] = {(uint32_t)m->kind, m->n_layer, m->width, m->n_head,
                                      m->vocab,          m->max_seq, m->in_dim, m->n_class};
    for (int i = 0; i < 8; i++)
        ovt_put_le32(out + 12 + 4 * i, model_fields[i]);
    const double opt[7] = {rc->lr, rc->lr_min, rc->beta1, rc->beta2, rc->eps, rc->weight_decay, rc->grad_clip};
    for (int i = 0; i < 7; i++)
        ovt_put_le64(out + 44 + 8 * i, f64_bits(opt[i]));
    ovt_put_le32(out + 100, rc->warmup_steps);
    ovt_put_le32(out + 104, rc->decay_steps);
    ovt_put_le32(out + 108, rc->batch_size);
    ovt_put_le32(out + 112, rc->seq_len);
    ovt_put_le64(out + 116, rc->seed);
    ovt_put_le32(out + 124, rc->grid_bits);
    ovt_put_le32(out + 128, rc->band_rules);
    ovt_put_le32(out + 132, rc->head_shift);
    memcpy(out + 136, rc->dataset_hash.b, 32);
    if (version == 1)
        return TRN_CONFIG_ENC_V1_LEN;
    ovt_put_le32(out + 168, (uint32_t)rc->schedule);
    memcpy(out + 172, rc->init_hash.b, 32);
    if (version == 2)
        return TRN_CONFIG_ENC_V2_LEN;
    ovt_put_le32(out + 204, trn_config_shards(rc));
    if (version == 3)
        return TRN_CONFIG_ENC_V3_LEN;
    if (version == 5) {
        const uint32_t r[7] = {m->in_ch, m->in_hw, m->block, m->stages[0], m->stages[1], m->stages[2], m->stages[3]};
        for (int i = 0; i < 7; i++)
            ovt_put_le32(out + 208 + 4 * i, r[i]);
        ovt_put_le64(out + 236, f64_bits(m->bn_eps));
        ovt_put_le64(out + 244, f64_bits(m->bn_momentum));
        ovt_put_le32(out + 252, rc->augment_crop);
        ovt_put_le32(out + 256, rc->augment_flip);
        return TRN_CONFIG_ENC_V5_LEN;
    }
    ovt_put_le32(out + 208, m->n_kv_head);
    ovt_put_le32(out + 212, m->hidden);
    ovt_put_le32(out + 216, m->tied);
    ovt_put_le64(out + 220, f64_bits(m->rope_theta));
    ovt_put_le64(out + 228, f64_bits(m->norm_eps));
    return TRN_CONFIG_ENC_V4_LEN;
}

size_t trn_config_encode(uint8_t out[TRN_CONFIG_ENC_MAX], const trn_run_config *rc)
{
    size_t len = encode_body(out, rc);
    if (trn_config_state_hash(rc) == TRN_STATE_HASH_V1)
        return len;
    ovt_put_le32(out + len, trn_config_state_hash(rc));
    return len + TRN_CONFIG_ENC_TAIL;
}

int trn_config_decode(trn_run_config *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    if (len < 12)
        return ovt_fail(OVT_EFORMAT, "run config is %zu bytes, shorter than its header", len);
    if (memcmp(buf, config_magic, 8) != 0)
        return ovt_fail(OVT_EFORMAT, "run config has a wrong magic");
    uint32_t version = ovt_get_le32(buf + 8);
    if (version < 1 || version > 5)
        return ovt_fail(OVT_EFORMAT, "run config version %u is not supported (this build reads 1 to 5)", version);
    static const size_t lens[6] = {0, TRN_CONFIG_ENC_V1_LEN, TRN_CONFIG_ENC_V2_LEN, TRN_CONFIG_ENC_V3_LEN,
                                   TRN_CONFIG_ENC_V4_LEN, TRN_CONFIG_ENC_V5_LEN};
    size_t want = lens[version];
    if (len != want && len != want + TRN_CONFIG_ENC_TAIL)
        return ovt_fail(OVT_EFORMAT, "run config version %u is %zu bytes, expected %zu (or %zu with a stateHash "
                                     "version)", version, len, want, want + TRN_CONFIG_ENC_TAIL);
    trn_run_config rc;
    memset(&rc, 0, sizeof rc);
    rc.state_hash = len == want ? TRN_STATE_HASH_V1 : ovt_get_le32(buf + want);
    if (len > want && rc.state_hash != TRN_STATE_HASH_TREE)
        return ovt_fail(OVT_EFORMAT, "run config stateHash version %u is not canonical or not supported (the "
                                     "trailing field holds %u; version %u has none)", rc.state_hash,
                        TRN_STATE_HASH_TREE, TRN_STATE_HASH_V1);
    trn_model_config *m = &rc.model;
    uint32_t *model_fields[8] = {NULL, &m->n_layer, &m->width, &m->n_head, &m->vocab, &m->max_seq,
                                 &m->in_dim, &m->n_class};
    m->kind = (trn_model_kind)ovt_get_le32(buf + 12);
    for (int i = 1; i < 8; i++)
        *model_fields[i] = ovt_get_le32(buf + 12 + 4 * i);
    double *opt[7] = {&rc.lr, &rc.lr_min, &rc.beta1, &rc.beta2, &rc.eps, &rc.weight_decay, &rc.grad_clip};
    for (int i = 0; i < 7; i++)
        *opt[i] = f64_from(ovt_get_le64(buf + 44 + 8 * i));
    rc.warmup_steps = ovt_get_le32(buf + 100);
    rc.decay_steps = ovt_get_le32(buf + 104);
    rc.batch_size = ovt_get_le32(buf + 108);
    rc.seq_len = ovt_get_le32(buf + 112);
    rc.seed = ovt_get_le64(buf + 116);
    rc.grid_bits = ovt_get_le32(buf + 124);
    rc.band_rules = ovt_get_le32(buf + 128);
    rc.head_shift = ovt_get_le32(buf + 132);
    memcpy(rc.dataset_hash.b, buf + 136, 32);
    if (version >= 2) {
        rc.schedule = (trn_schedule_kind)ovt_get_le32(buf + 168);
        memcpy(rc.init_hash.b, buf + 172, 32);
    }
    rc.shards = version >= 3 ? ovt_get_le32(buf + 204) : 1;
    if (version == 3 && rc.shards < 2)
        return ovt_fail(OVT_EFORMAT, "run config version 3 with %u shard(s) is not canonical (one shard encodes "
                                     "as version 1 or 2)", rc.shards);
    if (version >= 4 && rc.shards < 1)
        return ovt_fail(OVT_EFORMAT, "run config version %u with 0 shards is not canonical (one shard is 1)",
                        version);
    if (version == 5) {
        uint32_t *r[7] = {&m->in_ch, &m->in_hw, &m->block, &m->stages[0], &m->stages[1], &m->stages[2],
                          &m->stages[3]};
        for (int i = 0; i < 7; i++)
            *r[i] = ovt_get_le32(buf + 208 + 4 * i);
        m->bn_eps = f64_from(ovt_get_le64(buf + 236));
        m->bn_momentum = f64_from(ovt_get_le64(buf + 244));
        rc.augment_crop = ovt_get_le32(buf + 252);
        rc.augment_flip = ovt_get_le32(buf + 256);
    }
    if ((version == 5) != (m->kind == TRN_MODEL_RESNET))
        return ovt_fail(OVT_EFORMAT, "run config version %u for a model of kind %u: every ResNet config and only a "
                                     "ResNet config is version 5",
                        version, (unsigned)m->kind);
    if (version == 4) {
        m->n_kv_head = ovt_get_le32(buf + 208);
        m->hidden = ovt_get_le32(buf + 212);
        m->tied = ovt_get_le32(buf + 216);
        m->rope_theta = f64_from(ovt_get_le64(buf + 220));
        m->norm_eps = f64_from(ovt_get_le64(buf + 228));
    }
    if ((version == 4) != (m->kind == TRN_MODEL_LLAMA))
        return ovt_fail(OVT_EFORMAT, "run config version %u for a model of kind %u: every Llama config and only a "
                                     "Llama config is version 4",
                        version, (unsigned)m->kind);
    if (version != enc_version(&rc))
        return ovt_fail(OVT_EFORMAT, "run config version %u with a linear schedule, no init_hash and one shard is "
                                     "not canonical (that config encodes as version 1)", version);
    int rv = trn_config_check(&rc);
    if (rv)
        return ovt_fail_wrap(OVT_EFORMAT, "run config");
    *out = rc;
    return 0;
}

void trn_config_hash(ovt_hash *out, const trn_run_config *rc)
{
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t len = trn_config_encode(enc, rc);
    ovt_sha256(out, enc, len);
}

/* Appends "; " (after the first) and the formatted text to out. */
static void diff_add(char *out, size_t cap, int *n, const char *fmt, ...) OVT_PRINTF(4, 5);
static void diff_add(char *out, size_t cap, int *n, const char *fmt, ...)
{
    size_t used = strlen(out);
    if (*n > 0 && used + 2 < cap) {
        memcpy(out + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (used < cap)
        vsnprintf(out + used, cap - used, fmt, ap);
    va_end(ap);
    (*n)++;
}

int trn_config_diff(char *out, size_t cap, const trn_run_config *there, const trn_run_config *here)
{
    int n = 0;
    if (cap)
        out[0] = '\0';
    if (!trn_model_equal(&there->model, &here->model))
        diff_add(out, cap, &n, "--model: L%u C%u V%u there, L%u C%u V%u here", there->model.n_layer,
                 there->model.width, there->model.vocab, here->model.n_layer, here->model.width, here->model.vocab);
    const struct {
        const char *flag;
        double a, b;
    } reals[] = {{"--lr", there->lr, here->lr},
                 {"--lr-min", there->lr_min, here->lr_min},
                 {"beta1", there->beta1, here->beta1},
                 {"beta2", there->beta2, here->beta2},
                 {"eps", there->eps, here->eps},
                 {"--weight-decay", there->weight_decay, here->weight_decay},
                 {"--clip", there->grad_clip, here->grad_clip}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        if (memcmp(&reals[i].a, &reals[i].b, sizeof(double)) != 0)
            diff_add(out, cap, &n, "%s: %.17g there, %.17g here", reals[i].flag, reals[i].a, reals[i].b);
    const struct {
        const char *flag;
        uint64_t a, b;
    } ints[] = {{"--warmup", there->warmup_steps, here->warmup_steps},
                {"--steps (the schedule's length)", there->decay_steps, here->decay_steps},
                {"--batch", there->batch_size, here->batch_size},
                {"--seq", there->seq_len, here->seq_len},
                {"--seed", there->seed, here->seed},
                {"--grid-bits", there->grid_bits, here->grid_bits},
                {"band rules", there->band_rules, here->band_rules},
                {"--head-shift", there->head_shift, here->head_shift},
                {"--shards", trn_config_shards(there), trn_config_shards(here)},
                {"--augment-crop", there->augment_crop, here->augment_crop},
                {"--augment-flip", there->augment_flip, here->augment_flip},
                {"--state-hash", trn_config_state_hash(there), trn_config_state_hash(here)}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].a != ints[i].b)
            diff_add(out, cap, &n, "%s: %llu there, %llu here", ints[i].flag, (unsigned long long)ints[i].a,
                     (unsigned long long)ints[i].b);
    if (there->schedule != here->schedule)
        diff_add(out, cap, &n, "--schedule: %s there, %s here", trn_schedule_name(there->schedule),
                 trn_schedule_name(here->schedule));
    if (memcmp(there->init_hash.b, here->init_hash.b, 32) != 0) {
        char a[17], b[17];
        ovt_hex_encode(a, there->init_hash.b, 8);
        ovt_hex_encode(b, here->init_hash.b, 8);
        diff_add(out, cap, &n, "--init-from: %s there, %s here",
                 trn_config_has_init(there) ? a : "none (the seed's init)",
                 trn_config_has_init(here) ? b : "none (the seed's init)");
    }
    if (memcmp(there->dataset_hash.b, here->dataset_hash.b, 32) != 0)
        diff_add(out, cap, &n, "--data: another dataset (datasetHash differs)");
    return n;
}

const char *trn_schedule_name(trn_schedule_kind kind)
{
    return kind == TRN_SCHEDULE_COSINE ? "cosine" : kind == TRN_SCHEDULE_LINEAR ? "linear" : "unknown";
}

int trn_schedule_parse(trn_schedule_kind *out, const char *name)
{
    if (!strcmp(name, "linear"))
        *out = TRN_SCHEDULE_LINEAR;
    else if (!strcmp(name, "cosine"))
        *out = TRN_SCHEDULE_COSINE;
    else
        return ovt_fail(OVT_EINVAL, "unknown schedule '%s' (known: linear, cosine)", name);
    return 0;
}
