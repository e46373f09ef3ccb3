#ifndef OVT_TRAINER_RUNDATA_H
#define OVT_TRAINER_RUNDATA_H

/* A run's dataset and the batch of each step, as every party builds them:
 * the trainer (`ovt train`), the auditor's replay and the arbiter. */

#include "trainer/config.h"
#include "data/dataset.h"
#include "trainer/train.h"

/* The data of a run: tokens (GPT-2) or samples (MLP). */
typedef struct {
    data_tokens tokens;
    data_samples samples;
} trn_run_data;

/* Loads the data file for run config rc and checks it fits the model.
 * rc->dataset_hash is set from the file when set_hash is nonzero (a new
 * run); otherwise the file's hash must equal it (OVT_ECRYPTO if not). */
int trn_run_data_load(trn_run_data *d, const char *path, trn_run_config *rc, int set_hash) OVT_MUST_USE;
/* The same from the file's bytes (what names them in messages). */
int trn_run_data_parse(trn_run_data *d, const uint8_t *buf, size_t len, trn_run_config *rc, int set_hash,
                       const char *what) OVT_MUST_USE;
void trn_run_data_free(trn_run_data *d);

/* A language model's tokens are of the model's own vocabulary: a token file
 * whose stated vocabulary differs (byte-level tokens, 256 symbols, for
 * gpt2-small's 50257 or llama-15m's 32000) trains a model most of whose
 * embeddings no token reaches. OVT_EINVAL with a message that names the
 * tokenizer to use, or the presets of the file's vocabulary (`model` names
 * the model in it); 0 when they agree or the model is not a language model.
 * `ovt train` refuses a new run on it unless --force. */
int trn_run_data_vocab_check(const trn_run_data *d, const trn_run_config *rc, const char *model) OVT_MUST_USE;

/* The batch of step i, a view for trn_train_step, and its batchHash: the
 * one place every party makes it. A ResNet's images are augmented here
 * (rc->augment_crop, augment_flip; data/augment.h), the whole batch before
 * any shard split, and batchHash is of the augmented images. */
typedef struct {
    data_token_batch tb;
    data_sample_batch sb;
    trn_batch view;
    ovt_hash hash;
} trn_step_batch;

int trn_step_batch_get(trn_step_batch *b, const trn_run_data *d, const trn_run_config *rc, uint64_t i) OVT_MUST_USE;
void trn_step_batch_free(trn_step_batch *b);

/* The bytes batchHash is the SHA-256 of (docs/formats.md, "Batches"):
 * u32le(B) || u32le(T or dim) || inputs or features || targets or labels,
 * all 4-byte little-endian. Published to the artifact store as a blob, the
 * batch is then found by its batchHash. malloc'd *buf. */
int trn_step_batch_encode(const trn_step_batch *b, uint8_t **buf, size_t *len) OVT_MUST_USE;

/* A path in a run directory: DIR/SUB/step-NNNNNNNN.EXT, or DIR/EXT when
 * sub is NULL (EXT is then the file name, e.g. "steps.bin"). */
int trn_run_path(char *out, size_t cap, const char *dir, const char *sub, uint64_t step, const char *ext) OVT_MUST_USE;

/* The steps that have a checkpoint in DIR/ckpt, ascending, as text into
 * out[cap]: "0, 50, 100" (a long list keeps its first and last three:
 * "0, 50, 100, ..., 900, 950, 1000 (21 checkpoints)"; "none" when there
 * are none). For a message that says which steps a command can take. */
void trn_run_checkpoint_list(char *out, size_t cap, const char *dir);

/* The highest step <= max_step with a checkpoint in DIR/ckpt, or OVT_ENOTFOUND. */
int trn_run_latest_checkpoint(const char *dir, uint64_t max_step, uint64_t *step) OVT_MUST_USE;

/* Reads DIR/config.bin: the decoded run config and configHash (SHA-256 of
 * the file's bytes). */
int trn_run_load_config(const char *dir, trn_run_config *rc, ovt_hash *config_hash) OVT_MUST_USE;

#endif
