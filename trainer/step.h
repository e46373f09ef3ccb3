#ifndef OVT_TRAINER_STEP_H
#define OVT_TRAINER_STEP_H

/* What it takes to execute one step of a run outside the training loop:
 * the run's dataset, the batch of step i rebuilt from it (the schedule is a
 * pure function of seed and step, docs/formats.md "Batches"), and one step
 * re-executed from the state before it with the trainer's rounding log, as
 * the arbiter and `ovt train` both need. */

#include <stddef.h>
#include <stdint.h>

#include "kernels/rlog.h"
#include "trainer/data.h"
#include "trainer/state.h"
#include "trainer/train.h"

/* The data of a run: tokens (GPT-2) or samples (MLP); hash is datasetHash. */
typedef struct {
    trn_tokens tokens;
    trn_samples samples;
    ovt_hash hash;
} trn_dataset;

/* Parses dataset file bytes for run config rc (model kind, b, sizes) and
 * checks they fit the model. `what` names the data in messages. Does not
 * compare the hash with rc->dataset_hash (the caller decides). */
int trn_dataset_parse(trn_dataset *d, const trn_run_config *rc, const uint8_t *buf, size_t len,
                      const char *what) OVT_MUST_USE;
void trn_dataset_free(trn_dataset *d);

/* The batch of step i >= 1 and its batchHash; view points into it. */
typedef struct {
    trn_token_batch tb;
    trn_sample_batch sb;
    trn_batch view;
    ovt_hash hash;
} trn_step_batch;

int trn_step_batch_get(trn_step_batch *b, const trn_dataset *d, const trn_run_config *rc, uint64_t i) OVT_MUST_USE;
void trn_step_batch_free(trn_step_batch *b);

/* Re-executes step st->step + 1 on the cpu backend (threads: 0 for its
 * default) in REPLAY mode with the trainer's log, whose step must match.
 * On success st holds the state after the step and *batch_hash its batch's
 * hash. OVT_EFRAUD when the log fails the check (an entry for an element
 * farther than 2*tau from a midpoint, entries for sites never executed, a
 * wrong site size), OVT_ENUMERIC when the step produces a non-finite value;
 * st is then unspecified. */
int trn_step_replay(trn_state *st, const trn_dataset *d, krn_rlog *log, int threads,
                    ovt_hash *batch_hash) OVT_MUST_USE;

#endif
