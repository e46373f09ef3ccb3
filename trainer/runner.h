#ifndef OVT_TRAINER_RUNNER_H
#define OVT_TRAINER_RUNNER_H

/* The one step runner: what every role that executes a step holds (the
 * training loop, `ovt step`, the auditor's replay and its canonical
 * re-execution, the arbiter, `ovt eval`, the demo). A runner is opened from
 * a run config, the run's data, a backend and a mode, and owns everything a
 * step touches: the kernel context, the workspace (activations, gradients,
 * a sharded step's shard gradients), the rounding log and the state.
 * Callers see the state through trn_runner_state and the log through
 * trn_runner_log, and never the workspace: where the memory lives is the
 * runner's business.
 *
 * Where the tensors are (docs/gpu.md, "Memory"). A runner of steps is
 * resident when its backend keeps tensors apart from the host
 * (krn_mem_placement: cuda's device memory, unless OVT_CUDA_HOST_TENSORS=1;
 * the guard of mem_guard) and its steps run in this process without an
 * injected fault. It allocates the workspace and a copy of the state in
 * the backend's memory (kernels/mem.h) and runs every step there: per step
 * only the batch goes down and the scalars, the flagged elements and the
 * log come up (a sharded step's shard gradients also come up, once each,
 * for their hashes and mean, which goes down), and the stateHash is
 * computed where the state is (krn_mem_tree_root). The host's copy of the state is brought up to date
 * only when it is asked for: trn_runner_state, trn_runner_sync, a
 * checkpoint, a release, an evaluation, a traced step (which runs on the
 * host's copy with a host workspace of its own). Any other runner keeps its
 * tensors in host memory, and a cuda ctx then copies them per op.
 *
 * The modes are the kernel context's (kernels/site.h):
 *   KRN_RECORD   each step writes its log (trn_runner_log afterwards);
 *   KRN_REPLAY   each step applies the log the caller loaded into
 *                trn_runner_log before it, or the one read from the
 *                replay_dir the runner was opened with (the log source);
 *                the log must be the step's (OVT_EFRAUD otherwise);
 *   KRN_NEAREST  round to nearest without a log (the log is reset to the
 *                step, with no entries);
 *   KRN_PLAIN    sites that only convert, without a log (as NEAREST): the
 *                benchmarks' plain FP64 baseline (bench/bench_step.c).
 * An evaluation runner (eval_batch > 0) runs forwards only
 * (trn_runner_eval), never steps. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/mem.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "kernels/trace.h"
#include "trainer/config.h"
#include "trainer/fault.h"
#include "trainer/rundata.h"
#include "trainer/state.h"
#include "trainer/train.h"

typedef struct dp_ctx dp_ctx;

typedef struct {
    krn_backend_kind backend;
    krn_mode mode;           /* KRN_RECORD, KRN_REPLAY, KRN_NEAREST (or KRN_PLAIN: benchmarks) */
    krn_verifier verifier;   /* REPLAY: who applies the rule (KRN_VERIFY_ARBITER: the strict one) */
    int threads;             /* 0: the backend's default */
    uint64_t shuffle_seed;   /* the shuffle backend's summation orders; 0: the run config's seed */
    const char *replay_dir;  /* REPLAY: a run directory whose logs/step-N.rlog step N reads; NULL: the caller
                                loads trn_runner_log before each step */
    dp_ctx *dp;              /* the processes sharing each step (dp/dp.h); NULL: this one computes every shard */
    const trn_fault *fault;  /* testing only (trainer/fault.h); NULL: none */
    bool prefault;           /* write the workspace's memory once now, not during the first step (the arbiter
                                warm from its first step) */
    bool hash_later;         /* the caller hashes the state (trn_runner_hash_begin/end) instead of the step */
    uint32_t eval_batch;     /* > 0: an evaluation runner for batches of up to this many, in one shard, batch
                                norm from the running statistics; 0: a runner of steps */
    bool mem_guard;          /* testing, CPU backends (krn_config.mem_guard): a resident runner whose tensors
                                are PROT_NONE between its steps, so that a host access to them outside
                                kernels/mem.h faults */
    bool tolerant;           /* REPLAY, off by default: a violation of the log does not fail the step
                                (krn_config.tolerant; the first one: trn_runner_violation). Never for a
                                verdict */
    bool follow_log;         /* testing only, with tolerant: rejected entries are followed (krn_config) */
} trn_runner_opts;

typedef struct trn_runner trn_runner;

/* Opens a runner for run config rc (checked) with the opts' backend and
 * mode: its context and workspace; no state yet (trn_runner_start,
 * trn_runner_adopt, trn_runner_copy_state, trn_runner_load_checkpoint give
 * it one). data (borrowed, may be NULL until trn_runner_set_data) is where
 * the steps take their batches. Errors are the context's and the
 * workspace's (an unknown backend, no memory). */
int trn_runner_open(trn_runner **out, const trn_run_config *rc, const trn_run_data *data,
                    const trn_runner_opts *o) OVT_MUST_USE;
void trn_runner_free(trn_runner *r);

/* The data the steps take their batches from (borrowed). */
void trn_runner_set_data(trn_runner *r, const trn_run_data *data);

/* Whether r runs st's run config (its configHash). */
bool trn_runner_fits(const trn_runner *r, const trn_state *st);

/* State 0 of the run (trn_state_start: from init, the given parameters,
 * or the seed when init is NULL). */
int trn_runner_start(trn_runner *r, const uint8_t *init, size_t init_len) OVT_MUST_USE;

/* Takes *st (of r's run config: OVT_EINVAL otherwise, *st untouched) as the
 * runner's state, freeing the one it had; *st becomes NULL. */
int trn_runner_adopt(trn_runner *r, trn_state **st) OVT_MUST_USE;

/* Hands the runner's state to the caller (who frees it), leaving the runner
 * without one; NULL when it has none. */
trn_state *trn_runner_release(trn_runner *r);

/* The runner's state becomes a copy of src (of r's run config). */
int trn_runner_copy_state(trn_runner *r, const trn_state *src) OVT_MUST_USE;

/* The host's copy of the state brought up to date (a resident runner's is
 * not after its steps): 0, or the backend's error copying it. */
int trn_runner_sync(trn_runner *r) OVT_MUST_USE;

/* The state (NULL before one is given), synced first (trn_runner_sync; a
 * failure to copy it is reported on stderr and aborts: call
 * trn_runner_sync first where it can fail); it changes with every step. */
const trn_state *trn_runner_state(trn_runner *r);

/* The step the state is at (0 without one), without syncing it. */
uint64_t trn_runner_step_no(const trn_runner *r);

/* Whether r runs its steps on tensors in the backend's memory (above). */
bool trn_runner_resident(const trn_runner *r);

/* What crossed between the host and the backend's memory so far
 * (kernels/mem.h), for tests and benchmarks. */
krn_mem_stats trn_runner_mem_stats(const trn_runner *r);

/* A checkpoint file (trainer/checkpoint.h) read into the runner's state,
 * which must then be of r's run config (OVT_EFORMAT naming the file); and
 * the state written as one. */
int trn_runner_load_checkpoint(trn_runner *r, const char *path) OVT_MUST_USE;
int trn_runner_save_checkpoint(trn_runner *r, const char *path) OVT_MUST_USE;

/* The stateHash of the state, in the background (trn_state_hash_begin,
 * trn_state_hash_end): for a runner opened with hash_later. */
int trn_runner_hash_begin(trn_runner *r) OVT_MUST_USE;
bool trn_runner_hash_end(trn_runner *r, ovt_hash *out, uint64_t *step);

/* The rounding log of the current step: what a RECORD step wrote, what a
 * REPLAY step applies (load it before the step, or let replay_dir be the
 * source). */
krn_rlog *trn_runner_log(trn_runner *r);

/* What a step did. */
typedef struct {
    ovt_hash batch_hash;  /* of the step's batch (set once the batch is made, also when the step then fails) */
    ovt_hash state_hash;  /* after the step; zero for a runner opened with hash_later */
    trn_step_info info;   /* loss, lr, gradient norm, counters, shards (trainer/train.h) */
    double seconds;       /* wall time of the log's read and the step's computation */
    int trace_rc;         /* a step traced (trn_runner_trace_next): 0, or why its trace failed (the
                             message in krn_trace_error); the step's own result is the return value */
    ovt_hash trace_root;  /* the traced step's trace root (kernels/trace.h) */
} trn_runner_result;

/* Runs step st->step + 1 on the runner's state with the batch the
 * schedule gives (trn_step_batch_get), under the fault's hooks when one is
 * set. On failure the state is unspecified (trn_train_step): OVT_EFRAUD for
 * a REPLAY log that fails the check (another step's, an entry too far from
 * a midpoint, ...), OVT_ENUMERIC for a non-finite value. */
int trn_runner_step(trn_runner *r, trn_runner_result *out) OVT_MUST_USE;

/* Per-site counts (krn_site_stats) of the steps from now on, or not; the
 * rows of the last step (n rows; also after a step that failed once some
 * sites ran), valid until the next step. */
/* Records the next step (only) into t (fresh; docs/formats.md "Step
 * trace"): the state's tensors and the batch registered by name, the
 * recorder on the context for that step. Tracing never changes the step's
 * bits; its result is the step's trace_rc and trace_root. OVT_EINVAL for a
 * step shared among processes (a rank sees only its shards' sites). */
int trn_runner_trace_next(trn_runner *r, krn_trace *t) OVT_MUST_USE;

void trn_runner_collect_sites(trn_runner *r, bool on);
const krn_site_stats *trn_runner_site_stats(const trn_runner *r, size_t *n);

/* What the REPLAY rule found in the last step (krn_ctx_finding). */
const krn_finding *trn_runner_finding(const trn_runner *r);

/* A tolerant runner's first violation of the last step (krn_ctx_violation):
 * what the strict replay would have failed the step with; rule is
 * KRN_RULE_NONE when there was none. */
const krn_finding *trn_runner_violation(const trn_runner *r);

/* An evaluation runner: the mean loss of batch (of up to eval_batch
 * samples or sequences) under state st (NULL: the runner's own), forward
 * only, numbered as step `step` (trn_eval_loss); no state changes. A
 * shorter batch than eval_batch (the last) gets a workspace of its own. */
int trn_runner_eval(trn_runner *r, const trn_state *st, const trn_batch *batch, uint64_t step,
                    float *loss) OVT_MUST_USE;

/* The logits (batch x n_class) the last forward of a classifier (MLP,
 * ResNet) left, valid until the next. */
const float *trn_runner_logits(const trn_runner *r);

#endif
