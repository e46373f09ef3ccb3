#ifndef OVT_TRAINER_SNAPSHOT_H
#define OVT_TRAINER_SNAPSHOT_H

/* The state a run directory holds at one of its checkpoints, for the
 * commands that take a model out of a run (`ovt export`, `ovt eval`). */

#include <stdbool.h>
#include <stdint.h>

#include "trainer/run.h"
#include "trainer/state.h"

/* The state at step K of the run in dir (K = the latest checkpoint when
 * has_step is false): its checkpoint, checked against config.bin and the
 * stateHash steps.bin holds for K (trn_run_start_state); *table gets
 * steps.bin. OVT_ENOTFOUND when K has no checkpoint (naming the latest
 * before it). For `ovt export` and `ovt eval`. */
int trn_snapshot_load(trn_state **st, trn_step_table *table, const char *dir, bool has_step,
                      uint64_t step) OVT_MUST_USE;

#endif
