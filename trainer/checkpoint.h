#ifndef OVT_TRAINER_CHECKPOINT_H
#define OVT_TRAINER_CHECKPOINT_H

/* The checkpoint file of a training state (docs/formats.md, "Checkpoint"):
 * a header (magic, version, the run config, the step, the tensor sizes),
 * the state's tensors little-endian and a SHA-256 checksum. */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "trainer/state.h"

/* Checkpoint file (docs/formats.md, "Checkpoint"): encode to a malloc'd
 * buffer, or parse one. The parser rejects anything malformed (short,
 * wrong magic/version, sizes that disagree with the config or the file
 * length, a bad checksum, values that are not finite grid values) with
 * OVT_EFORMAT and a message saying which. */
int trn_checkpoint_encode(const trn_state *st, uint8_t **buf, size_t *len) OVT_MUST_USE;
int trn_checkpoint_decode(trn_state **out, const uint8_t *buf, size_t len) OVT_MUST_USE;

/* The length of the checkpoint of a state of config rc, as
 * trn_checkpoint_encode writes it: what a reader of an untrusted store caps
 * a checkpoint's get at (store/store.h). OVT_EINVAL for a model shape that
 * is not valid. */
int trn_checkpoint_size(size_t *len, const trn_run_config *rc) OVT_MUST_USE;

/* The same bytes as encode, written to a temporary file, fsynced and
 * renamed (ovt_write_atomic_parts) straight from the state's memory; and
 * the checks of decode, reading the file's tensor bytes straight into the
 * new state's memory. Neither holds a second copy of the state. */
int trn_checkpoint_write(const trn_state *st, const char *path) OVT_MUST_USE;
int trn_checkpoint_read(trn_state **out, const char *path) OVT_MUST_USE;

#endif
