#ifndef OVT_TRAINER_STEP_H
#define OVT_TRAINER_STEP_H

/* One step of a run directory re-executed outside the training loop
 * (`ovt step`, `ovt rlog --sites`, `ovt verify`): the state a replay starts
 * from, and the replay up to the step on a runner (trainer/runner.h). */

#include <stdbool.h>
#include <stddef.h>

#include "kernels/rlog.h"
#include "kernels/site.h"
#include "kernels/trace.h"
#include "trainer/fault.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/state.h"

/* The state a replay of the run in dir (config rc, hashing to config_hash;
 * step table `table`, which must be the config's) starts from to reach step
 * `step`: state 0 from the config (the seed, or the run's step-0 checkpoint
 * when the config names given parameters by init_hash, checked against
 * them), or else the latest checkpoint at or before `step`, which must be
 * of this config, at the step it names, and hash to the stateHash the step
 * table claims there. *at gets the state's step. OVT_EFORMAT naming the
 * file when a check fails. Shared by `ovt audit` and `ovt step`. */
int trn_run_start_state(trn_state **out, uint64_t *at, const char *dir, const trn_run_config *rc,
                        const ovt_hash *config_hash, const trn_step_table *table, uint64_t step) OVT_MUST_USE;

/* What trn_step_replay_run found for the last step it re-executed. */
typedef struct trn_replay_result {
    uint64_t from_checkpoint; /* the checkpoint the replay started from */
    ovt_hash state_hash;      /* after step k */
    ovt_hash batch_hash;      /* of step k */
    ovt_hash log_hash;        /* SHA-256 of logs/step-k.rlog as read */
    uint32_t shards;          /* the run's S */
    int64_t shard_differs;    /* the first shard of step k whose recomputed gradient hash differs from
                                 the log's shard table; -1 when none does (or S = 1) */
} trn_replay_result;

/* Re-executes step k >= 1 of the run in directory dir (data d) on the
 * cpu backend (threads: 0 for its default) in REPLAY mode, on a runner
 * (trainer/runner.h): starts from trn_run_start_state (steps.bin must be
 * of the run's config.bin, the checkpoint the state steps.bin claims),
 * replays the steps up to k-1 with their logs, then step k.
 * Errors name the step and file: a missing, truncated or corrupted
 * checkpoint or log (OVT_EFORMAT, OVT_ENOTFOUND), a log that fails the
 * fraud check (OVT_EFRAUD), a non-finite value (OVT_ENUMERIC).
 * With rows != NULL it also counts step k per site (krn_site_stats:
 * elements, the log's entries, elements within tau/2 and within tau of a
 * midpoint by the replay's own values), for `ovt rlog RUNDIR --step K
 * --sites`: *rows (malloc'd, the caller frees it) gets *nrows rows, one per
 * site step k executed; also when step k fails after some of its sites ran
 * (a fraud finding: the rows end with the site that failed). */
int trn_step_replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_replay_result *out,
                        krn_site_stats **rows, size_t *nrows) OVT_MUST_USE;

/* A traced re-execution (`ovt step --trace`): step k on `backend` (cpu:
 * the arbiter's strict rule; ref, shuffle: an auditor's), recorded into
 * trace (fresh; kernels/trace.h); the trace's result comes back in
 * trace_rc (its message in krn_trace_error) and root. */
typedef struct {
    krn_backend_kind backend;
    const trn_fault *fault; /* testing only: step k under this fault (`ovt block pack --inject-fault`; forged-log:
                               replayed tolerantly following the log's rejected entries, as the forging
                               trainer computed it); NULL */
    krn_trace *trace;
    int trace_rc;
    ovt_hash root;
    /* Optional, for a party narrowing the step (party/narrow.h): roots_before
     * (room for 3 * TRN_MAX_TENSORS) gets state k-1's per-tensor digests
     * (trn_state_digests), *after a copy of state k (the caller frees it). */
    ovt_hash *roots_before;
    trn_state **after;
    /* Optional: step k replayed tolerantly (trn_runner_opts.tolerant; the
     * steps before it stay strict): a violation of its log does not fail
     * it, the first one comes back in violation (rule KRN_RULE_NONE: none)
     * and the state and trace are the tolerant replay's. For the party's
     * trace of a step it disputes as fraud (party/narrow.c); never for a
     * verdict. */
    bool tolerant;
    krn_finding violation;
} trn_step_trace;

/* trn_step_replay_run with step k re-executed as tr says, on a runner of
 * its backend; the steps before k are replayed untraced on cpu. */
int trn_step_replay_traced(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_step_trace *tr,
                           trn_replay_result *out) OVT_MUST_USE;

#endif
