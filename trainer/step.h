#ifndef OVT_TRAINER_STEP_H
#define OVT_TRAINER_STEP_H

/* One step re-executed outside the training loop, as the arbiter needs it:
 * from the state before the step, with the batch the schedule gives and the
 * trainer's rounding log. */

#include <stdbool.h>

#include "kernels/rlog.h"
#include "kernels/site.h"
#include "kernels/trace.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/state.h"

struct trn_replay_result;

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

/* trn_step_replay that also reports what the step's shards showed: the
 * run's S in res->shards and the first shard whose recomputed gradient hash
 * differs from the log's shard table in res->shard_differs (-1 none, or a
 * step that failed before its shards were compared); res's other fields
 * are zeroed. For the arbiter, which names that shard beside its verdict. */
int trn_step_replay_shards(trn_state *st, const trn_run_data *d, krn_rlog *log, int threads,
                           ovt_hash *batch_hash, struct trn_replay_result *res) OVT_MUST_USE;

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

/* Re-executes step k >= 1 of the run in directory dir (data d): starts from
 * trn_run_start_state (steps.bin must be of the run's config.bin, the
 * checkpoint the state steps.bin claims), replays the steps up to k-1 with
 * their logs, then step k.
 * Errors name the step and file: a missing, truncated or corrupted
 * checkpoint or log (OVT_EFORMAT, OVT_ENOTFOUND), a log that fails the
 * fraud check (OVT_EFRAUD), a non-finite value (OVT_ENUMERIC). */
int trn_step_replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads,
                        trn_replay_result *out) OVT_MUST_USE;

/* trn_step_replay_run that also counts step k per site (krn_site_stats:
 * elements, the log's entries, elements within tau/2 and within tau of a
 * midpoint by the replay's own values), for `ovt rlog RUNDIR --step K
 * --sites`. *rows (malloc'd, the caller frees it) gets *nrows rows, one per
 * site step k executed; also when step k fails after some of its sites ran
 * (a fraud finding: the rows end with the site that failed). rows may be
 * NULL (trn_step_replay_run). */
int trn_step_replay_sites(const char *dir, const trn_run_data *d, uint64_t k, int threads,
                          trn_replay_result *out, krn_site_stats **rows, size_t *nrows) OVT_MUST_USE;

/* A traced re-execution (`ovt step --trace`): step k on `backend` (cpu:
 * the arbiter's strict rule; ref, shuffle: an auditor's), recorded into
 * trace (fresh; trainer/trace.h); the trace's result comes back in
 * trace_rc (its message in krn_trace_error) and root. */
typedef struct {
    krn_backend_kind backend;
    krn_trace *trace;
    int trace_rc;
    ovt_hash root;
} trn_step_trace;

/* trn_step_replay_run with step k re-executed as tr says; the steps before
 * k are replayed untraced on cpu. */
int trn_step_replay_traced(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_step_trace *tr,
                           trn_replay_result *out) OVT_MUST_USE;

/* A prepared replay: the arbiter warm from its first step. A cpu REPLAY ctx
 * and a workspace for one run config, their memory (activations, gradients,
 * a sharded step's shard gradients) written once in advance, so that the
 * re-execution itself does not first fault about a gigabyte of fresh pages
 * in (gpt2-small: 2.5 s of a 4-7 s step on this machine, docs/bench-trainer.md).
 * The watcher makes one when a game's dispute opens, long before the
 * disputed step is known (arbiter/watch.c). threads: 0 for the backend's
 * default. */
typedef struct trn_replayer trn_replayer;
int trn_replayer_new(trn_replayer **out, const trn_run_config *rc, int threads) OVT_MUST_USE;
void trn_replayer_free(trn_replayer *r);
/* Whether r was prepared for st's run config. */
bool trn_replayer_fits(const trn_replayer *r, const trn_state *st);

/* trn_step_replay_shards on prep's ctx and workspace (prep's config must
 * be the state's: OVT_EINVAL otherwise); the same bits as a fresh replay. */
int trn_step_replay_prepared(trn_replayer *prep, trn_state *st, const trn_run_data *d, krn_rlog *log,
                             ovt_hash *batch_hash, trn_replay_result *res) OVT_MUST_USE;

#endif
