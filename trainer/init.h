#ifndef OVT_TRAINER_INIT_H
#define OVT_TRAINER_INIT_H

/* The starting point of a run (docs/trainer.md, "Fine-tuning"): state 0 is
 * either drawn from the seed (trn_state_init) or, when the run config's
 * init_hash is set, given parameters with m = v = 0. The config commits to
 * those parameters through init_hash = paramsHash (below), so trainer,
 * auditor and arbiter agree on state 0 without trusting a file. */

#include <stddef.h>
#include <stdint.h>

#include "trainer/state.h"

/* paramsHash = SHA-256 of the parameters' little-endian float32 bytes
 * (4 * nparams), tensors in layout order: the name of the blob `ovt commit`
 * publishes for an init run (docs/store.md). Not a stateHash: that one
 * covers the configHash, which covers init_hash. */
void trn_params_hash(ovt_hash *out, const trn_state *st);

/* The exact length of the starting-parameters blob of a run of config rc
 * (the bytes init_hash names): 4 bytes for each of the model's nparams
 * parameters, with no header. What a fetch of that blob may take
 * (docs/store.md, "Limits"). OVT_EINVAL for a model shape that is not
 * valid. */
int trn_init_blob_len(const trn_run_config *rc, size_t *len) OVT_MUST_USE;

/* State 0 of a run of config rc: from the seed when rc->init_hash is zero
 * (params must be NULL), else from params (len bytes: 4 * nparams
 * little-endian grid values) whose paramsHash must equal rc->init_hash;
 * m = v = 0, step 0. OVT_EFORMAT on a wrong length, a value off the grid or
 * a paramsHash that is not init_hash. */
int trn_state_start(trn_state **out, const trn_run_config *rc, const uint8_t *params, size_t len) OVT_MUST_USE;

/* Checks that st (e.g. a step-0 checkpoint) is state 0 of its own config:
 * step 0, m = v = 0 and paramsHash = init_hash (or, with no init_hash, the
 * parameters trn_state_init draws). OVT_EFORMAT naming what differs. */
int trn_state_check_start(const trn_state *st) OVT_MUST_USE;

#endif
