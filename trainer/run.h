#ifndef OVT_TRAINER_RUN_H
#define OVT_TRAINER_RUN_H

/* A training run on disk (`ovt train`, docs/formats.md "Run directory"):
 *   DIR/config.bin              the run config encoding (configHash = its SHA-256)
 *   DIR/logs/step-NNNNNNNN.rlog the rounding log of every step i >= 1
 *   DIR/ckpt/step-NNNNNNNN.ckpt checkpoints (step 0, every K steps, the last)
 *   DIR/steps.bin               stateHash, batchHash, logHash of steps 0..n
 *   DIR/run.json                summary: hashes, step count, root
 * The step table holds what every leaf needs except runId, which the
 * contract assigns when the run is opened on chain; the root is computed for
 * a given runId. */

#include <stddef.h>
#include <stdint.h>

#include "chain/merkle.h"
#include "common/bytes.h"
#include "common/err.h"

/* The step table: preimages[i] for i = 0..count-1 (count = steps + 1). */
typedef struct {
    ovt_hash config_hash;
    size_t count;
    chain_merkle_preimage *steps;
} trn_step_table;

/* Encoding: magic "OVTSTEPS", u32 version 1, u32 0, configHash, u64 count,
 * then count x (stateHash, batchHash, logHash). */
int trn_step_table_encode(const trn_step_table *t, uint8_t **buf, size_t *len) OVT_MUST_USE;
int trn_step_table_decode(trn_step_table *out, const uint8_t *buf, size_t len) OVT_MUST_USE;
int trn_step_table_write(const trn_step_table *t, const char *path) OVT_MUST_USE;
int trn_step_table_read(trn_step_table *out, const char *path) OVT_MUST_USE;
void trn_step_table_free(trn_step_table *t);

/* The Merkle root over the table's leaves for run run_id (chain/merkle.h). */
int trn_step_table_root(ovt_hash *root, const trn_step_table *t, const ovt_hash *run_id) OVT_MUST_USE;


#endif
