#ifndef OVT_TRAINER_CONFIG_H
#define OVT_TRAINER_CONFIG_H

/* The run config: everything that determines a training run's states bit for
 * bit (model, optimizer, schedule, batch size, seed, grid width, band rules,
 * dataset). configHash is SHA-256 of its canonical binary encoding
 * (docs/formats.md, "Run config"), never of JSON text. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/rlog.h"

typedef enum { TRN_MODEL_MLP = 1, TRN_MODEL_GPT2 = 2, TRN_MODEL_LLAMA = 3, TRN_MODEL_RESNET = 4 } trn_model_kind;

/* "mlp", "gpt2", "llama" ("unknown" otherwise). */
const char *trn_model_kind_name(trn_model_kind kind);

/* The shape of the learning-rate fall after warmup (trainer/schedule.h). */
typedef enum { TRN_SCHEDULE_LINEAR = 0, TRN_SCHEDULE_COSINE = 1 } trn_schedule_kind;

/* "linear" / "cosine" and back; parse fails with OVT_EINVAL. */
const char *trn_schedule_name(trn_schedule_kind kind);
int trn_schedule_parse(trn_schedule_kind *out, const char *name) OVT_MUST_USE;

/* Model shape. MLP: in_dim -> n_layer hidden layers of `width` (GELU) ->
 * n_class logits. GPT-2: llm.c's layout, n_layer blocks of `width` channels
 * and n_head heads, vocab tokens, max_seq positions, output head tied to the
 * token embedding. Llama (llama2.c's layout, trainer/llama.c): n_layer
 * blocks of `width` channels, n_head query heads sharing n_kv_head key and
 * value heads (grouped-query attention; n_kv_head divides n_head), rotary
 * positions with base rope_theta on q and k, RMSNorm with norm_eps, a
 * SwiGLU MLP of `hidden` units, no biases, the output head tied to the token
 * embedding or its own (tied). Fields a kind does not use are 0. */
typedef struct {
    trn_model_kind kind;
    uint32_t n_layer;
    uint32_t width;
    uint32_t n_head;    /* GPT-2, Llama */
    uint32_t vocab;     /* GPT-2, Llama */
    uint32_t max_seq;   /* GPT-2, Llama */
    uint32_t in_dim;    /* MLP */
    uint32_t n_class;   /* MLP */
    uint32_t n_kv_head; /* Llama */
    uint32_t hidden;    /* Llama: the SwiGLU width */
    uint32_t tied;      /* Llama: 1 = the output head is wte */
    double rope_theta;  /* Llama */
    double norm_eps;    /* Llama */
    /* ResNet (issue 29; docs/decisions.md): images of in_ch x
     * in_hw x in_hw (in_dim = their product), a 3x3 stem of `width`
     * channels, stages[s] residual blocks in stage s (0 ends the list; the
     * channels double and the size halves from stage to stage), basic (1)
     * or bottleneck (2, expansion 4) blocks, batch norm with bn_eps and
     * bn_momentum, a linear head over n_class classes. */
    uint32_t in_ch, in_hw, block;
    uint32_t stages[4];
    double bn_eps, bn_momentum;
} trn_model_config;

/* Whether two model configs are the same, field by field (the doubles by
 * their bits). */
int trn_model_equal(const trn_model_config *a, const trn_model_config *b);

/* Whether the model reads token sequences (GPT-2, Llama): batches of B x T
 * tokens, a token file, seq_len in the run config. */
int trn_model_is_lm(const trn_model_config *m);

/* llama2.c's SwiGLU width for `width` channels: 4*width, two thirds of it
 * (rounded down), rounded up to a multiple of 32. */
uint32_t trn_llama_hidden(uint32_t width);

/* The band rules the run was made under: the numeric contract's version and
 * the fixed parts of summation order it imposes (GEMM chunk).
 *   1  the REPLAY rule of version 2: every verifier applies it to its own
 *      values, and an auditor widens it by the op's bound since it cannot
 *      know the arbiter's (every run made before band rules 2);
 *   2  the canonical computation, version 1 (docs/numeric-contract.md
 *      section 10): the arbiter's values are the cpu backend's, the same
 *      bits on every CPU, and the REPLAY rule is version 3. The default.
 * The trainer's own arithmetic and its log are the same under both: only
 * what a verifier demands of the log differs (and, through configHash,
 * every stateHash). */
#define TRN_BAND_RULES_V1 1u
#define TRN_BAND_RULES_CANONICAL 2u

typedef struct {
    trn_model_config model;
    /* AdamW and schedule: lr rises linearly over warmup_steps, then stays
     * (decay_steps == 0) or falls to lr_min at decay_steps, linearly or
     * along a cosine (trainer/schedule.h). */
    double lr, lr_min, beta1, beta2, eps, weight_decay, grad_clip;
    uint32_t warmup_steps;
    uint32_t decay_steps;
    uint32_t batch_size; /* B: samples (MLP) or sequences (GPT-2) per step */
    uint32_t seq_len;    /* T (GPT-2, Llama), 0 for the MLP */
    uint64_t seed;       /* init and batch schedule */
    uint32_t grid_bits;  /* b in 24..32 */
    uint32_t band_rules; /* TRN_BAND_RULES_V1 */
    /* MLP, ResNet (fc) and Llama with its own head (not tied) only, 0 =
     * off: the output layer starts with a common shift of
     * +-2^head_shift/16 added to every weight of each input column (sign per
     * column from krn_rng). Softmax ignores a shift common to all logits, so
     * the model computes the same function, but the backward reduction over
     * classes then cancels 2^head_shift-fold: values near grid midpoints
     * become frequent, which is what the exactness demo needs to show the
     * no-log ablation diverge within a short run. At most 20. */
    uint32_t head_shift;
    ovt_hash dataset_hash;
    trn_schedule_kind schedule;
    /* The starting point: all zero = parameters drawn from the seed
     * (trn_state_init); otherwise the paramsHash (trainer/init.h: SHA-256 of
     * the parameters' little-endian bytes in layout order) of the parameters
     * state 0 starts from, with m = v = 0 (fine-tuning, `--init-from`). */
    ovt_hash init_hash;
    /* S, the shards each step's batch is split into (docs/data-parallel.md):
     * 1 = one batch, the step of every run before shards existed; S > 1
     * divides batch_size, and each shard's gradient is computed on its own
     * and the S of them averaged by the exact site "grad.sum". 0 reads as 1
     * (trn_config_shards). At most TRN_MAX_SHARDS. */
    uint32_t shards;
    /* ResNet only, 0 = off (data/augment.h, docs/trainer.md "Data
     * augmentation"): each step's images are cropped at a random offset of
     * up to augment_crop pixels each way (zero padding; at most
     * TRN_MAX_AUGMENT_CROP and less than in_hw), and with augment_flip = 1
     * flipped left to right with probability 1/2, all drawn from krn_rng
     * (seed, step, KRN_RNG_AUGMENT, per-sample counters). */
    uint32_t augment_crop;
    uint32_t augment_flip;
    /* How the stateHash covers a tensor (trainer/state_hash.h,
     * docs/formats.md "State and stateHash"): TRN_STATE_HASH_V1 (0 reads as
     * it), one SHA-256 over the tensor's bytes, every run made before
     * issue 40; TRN_STATE_HASH_TREE, the root of its tensor tree
     * (common/tree.h), the default of new runs. */
    uint32_t state_hash;
} trn_run_config;

#define TRN_STATE_HASH_V1 1u
#define TRN_STATE_HASH_TREE 3u

/* rc->state_hash, with 0 read as TRN_STATE_HASH_V1. */
uint32_t trn_config_state_hash(const trn_run_config *rc);

#define TRN_MAX_AUGMENT_CROP 8u

#define TRN_MAX_LAYERS 8 /* MLP hidden layers */

/* A step's shard table in its rounding log holds at most this many. */
#define TRN_MAX_SHARDS KRN_RLOG_MAX_SHARDS

/* The REPLAY rule version (krn_config.rule) a run's band rules call for:
 * KRN_RULE_V2 for band rules 1, KRN_RULE_V3 for 2. */
int trn_config_rule(const trn_run_config *rc);

/* rc->shards, with 0 read as 1. */
uint32_t trn_config_shards(const trn_run_config *rc);

/* Named model shapes: "mlp-demo", "mlp-mnist", "gpt2-tiny", "gpt2-small",
 * "llama-tiny", "llama-15m", "llama-110m", "resnet-mini", "resnet-18",
 * "resnet-50", "resnet-50-block". Fails with
 * OVT_EINVAL for an unknown name (the message lists the known ones). */
int trn_model_preset(trn_model_config *out, const char *name) OVT_MUST_USE;

/* The name of preset i (0, 1, ...), NULL past the last: what help texts and
 * messages list, so that they name every preset there is. */
const char *trn_model_preset_name(size_t i);

/* The names of the presets of `kind` (every kind when kind < 0) whose
 * vocabulary is `vocab` (any when 0), joined by ", " into out[cap]; the
 * number of them. */
size_t trn_model_preset_list(char *out, size_t cap, int kind, uint32_t vocab);

/* Checks a model config for sizes the code supports (non-zero, heads divide
 * width, layer count within TRN_MAX_LAYERS, element counts within size_t). */
int trn_model_check(const trn_model_config *m) OVT_MUST_USE;

/* Checks the whole run config (model, b, optimizer values finite and in range). */
int trn_config_check(const trn_run_config *rc) OVT_MUST_USE;

/* A run config with AdamW defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8,
 * weight decay 0, clip 1.0), b = 32, band rules 2 (canonical), the tree
 * stateHash (TRN_STATE_HASH_TREE), for model m. */
void trn_config_default(trn_run_config *out, const trn_model_config *m);

/* Canonical encoding, little-endian, fixed order (docs/formats.md): version
 * 1 (168 bytes) for a linear schedule started from the seed in one shard,
 * which every run made before version 2 is, so their configHash and
 * stateHashes stay; version 2 (204 bytes: version 1's fields, then the
 * schedule kind and init_hash) for another schedule or start in one shard;
 * version 3 (208 bytes: version 2's fields, then the shard count) for S > 1;
 * version 4 (236 bytes: version 3's fields, then n_kv_head, hidden, tied,
 * rope_theta and norm_eps) for every Llama and only for Llama; version 5
 * (260 bytes: version 3's fields, then in_ch, in_hw, block, stages[4],
 * bn_eps, bn_momentum, augment_crop and augment_flip) for every ResNet and
 * only for it.
 * A tree stateHash (TRN_STATE_HASH_TREE) adds one trailing u32, its value
 * 3, to whichever version the rest needs (TRN_CONFIG_ENC_TAIL more
 * bytes); a v1 stateHash adds nothing, so every run made before the tree
 * keeps its encoding, configHash and stateHashes, and no config has two
 * encodings.
 * Returns the length written. */
#define TRN_CONFIG_ENC_V1_LEN 168
#define TRN_CONFIG_ENC_V2_LEN 204
#define TRN_CONFIG_ENC_V3_LEN 208
#define TRN_CONFIG_ENC_V4_LEN 236
#define TRN_CONFIG_ENC_V5_LEN 260
#define TRN_CONFIG_ENC_TAIL 4
#define TRN_CONFIG_ENC_MAX (TRN_CONFIG_ENC_V5_LEN + TRN_CONFIG_ENC_TAIL)
size_t trn_config_encode(uint8_t out[TRN_CONFIG_ENC_MAX], const trn_run_config *rc);

/* Names what differs between two configs, as the `ovt train` flags that
 * set it with both values ("--steps: 6 there, 10 here; --init-from: ..."),
 * into out (cap bytes, always terminated). Returns the number of fields
 * that differ. `there` is the stored run's, `here` the one asked for. */
int trn_config_diff(char *out, size_t cap, const trn_run_config *there, const trn_run_config *here);

/* Whether init_hash is set (the run starts from given parameters). */
int trn_config_has_init(const trn_run_config *rc);

/* Parses an encoding of any version; OVT_EFORMAT on a wrong magic,
 * version or length, an encoding of a config a lower version can hold (not
 * canonical), and the checks of trn_config_check. */
int trn_config_decode(trn_run_config *out, const uint8_t *buf, size_t len) OVT_MUST_USE;

/* configHash = SHA-256(trn_config_encode(rc)). */
void trn_config_hash(ovt_hash *out, const trn_run_config *rc);

#endif
