#ifndef OVT_TRAINER_STEP_H
#define OVT_TRAINER_STEP_H

/* One step re-executed outside the training loop, as the arbiter needs it:
 * from the state before the step, with the batch the schedule gives and the
 * trainer's rounding log. */

#include "kernels/rlog.h"
#include "trainer/rundata.h"
#include "trainer/state.h"

/* Re-executes step st->step + 1 on the cpu backend (threads: 0 for its
 * default) in REPLAY mode with the trainer's log, whose step must match.
 * d is the run's data. On success st holds the state after the step and
 * *batch_hash its batch's hash. OVT_EFRAUD when the log fails the check (a
 * log for another step, an entry for an element farther than 2*tau from a
 * midpoint, entries for sites never executed, a wrong site size),
 * OVT_ENUMERIC when the step produces a non-finite value; st is then
 * unspecified. */
int trn_step_replay(trn_state *st, const trn_run_data *d, krn_rlog *log, int threads,
                    ovt_hash *batch_hash) OVT_MUST_USE;

/* What trn_step_replay_run found for the last step it re-executed. */
typedef struct {
    uint64_t from_checkpoint; /* the checkpoint the replay started from */
    ovt_hash state_hash;      /* after step k */
    ovt_hash batch_hash;      /* of step k */
    ovt_hash log_hash;        /* SHA-256 of logs/step-k.rlog as read */
} trn_replay_result;

/* Re-executes step k >= 1 of the run in directory dir (data d): loads the
 * latest checkpoint at or before step k-1 (checked against the run's
 * config.bin), replays the steps up to k-1 with their logs, then step k.
 * Errors name the step and file: a missing, truncated or corrupted
 * checkpoint or log (OVT_EFORMAT, OVT_ENOTFOUND), a log that fails the
 * fraud check (OVT_EFRAUD), a non-finite value (OVT_ENUMERIC). */
int trn_step_replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads,
                        trn_replay_result *out) OVT_MUST_USE;

#endif
