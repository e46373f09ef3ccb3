#ifndef OVT_DEMO_DEMO_H
#define OVT_DEMO_DEMO_H

/* The exactness demo (`ovt demo`): an MLP classifier trained with controlled
 * rounding on the cpu backend (RECORD), replayed step by step on the ref and
 * shuffle backends with the trainer's rounding logs (REPLAY: the state hash
 * must be identical at every step), and, as the ablation, the same run on
 * ref and shuffle without the logs (NEAREST), whose first divergent step is
 * reported. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/bytes.h"
#include "trainer/config.h"

/* Runs of the demo, in the order they step. */
enum {
    DEMO_RECORD_CPU = 0,
    DEMO_REPLAY_REF,
    DEMO_REPLAY_SHUFFLE,
    DEMO_NEAREST_REF,
    DEMO_NEAREST_SHUFFLE,
    DEMO_RUNS
};

typedef struct {
    trn_run_config config; /* an MLP; dataset_hash is filled by the demo */
    uint64_t steps;
    uint32_t n_samples;     /* size of the synthetic training set */
    uint32_t every;         /* a progress line every `every` steps (0: none) */
    FILE *progress;         /* where progress lines go (NULL: nowhere) */
    bool ablation;          /* run the NEAREST runs */
    bool shuffle;           /* run the shuffle-backend runs (slow: random orders) */
    bool fp32;              /* the contrast: plain FP32 training in two summation orders */
    int threads;            /* cpu backend threads (0: default) */
    const char *log_dir;    /* if set, the trainer's rounding logs are written there */
} demo_opts;

typedef struct {
    uint64_t steps;                        /* steps completed by the trainer */
    uint64_t first_mismatch[DEMO_RUNS]; /* first step whose state hash differs from
                                              the trainer's, 0 if none (index 0 unused) */
    uint64_t steps_run[DEMO_RUNS];     /* each run stops at its first mismatch */
    uint64_t entries_total, entries_max;   /* rounding-log entries of the trainer's steps */
    uint64_t log_bytes_total, log_bytes_max;
    uint64_t outputs_total;                /* elements rounded by the trainer */
    uint64_t wide_total;                   /* entries that are explicit values */
    double replay_max_dist_over_tau;       /* largest d/tau a verifier saw on a logged element */
    float loss_start, loss_end;            /* mean training loss of the first and last 10% of steps */
    float eval_start, eval_end;            /* loss on a held-out batch at step 0 and at the end */
    ovt_hash dataset_hash, config_hash, final_state_hash;
    /* The Merkle root over leaves 0..steps (chain/merkle.h, runId =
     * configHash: the demo opens no run on chain) computed from each run's
     * own stateHashes; has_root is false for a run that stopped early. */
    ovt_hash root[DEMO_RUNS];
    bool has_root[DEMO_RUNS];
    double seconds[DEMO_RUNS];         /* wall time per run (reported, never asserted) */
    /* The plain FP32 contrast (examples/demo/fp32.h): two runs from the same
     * initial state, one summing forward and one backward; the first step
     * whose states differ (0: none within the run), and at that step the
     * share of state values (parameters, m, v) that differ. */
    uint64_t fp32_first_mismatch;
    double fp32_params_differing;
    float fp32_loss_end;
} demo_result;

/* The demo's default settings (MLP "mlp-demo", 300 steps, ...). */
void demo_defaults(demo_opts *opts);

/* Runs the demo. Returns 0 when every run executed (whatever the
 * comparison's outcome: read *res), or a negative code if a step failed
 * (for instance a REPLAY rejecting the trainer's log as fraudulent). */
int demo_run(const demo_opts *opts, demo_result *res) OVT_MUST_USE;

/* Whether run `run` (DEMO_*) is part of the demo under opts. */
bool demo_enabled(const demo_opts *opts, int run);

/* True when every replay that ran matched the trainer at every step. */
bool demo_replay_exact(const demo_opts *opts, const demo_result *res);


#endif
