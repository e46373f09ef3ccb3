#ifndef OVT_TRAINER_LOOP_H
#define OVT_TRAINER_LOOP_H

/* The training loop of `ovt train`: a run directory (trainer/run.h) made,
 * or continued with resume, step by step. Each step: get the batch the
 * schedule gives, run the step, write its rounding log, hash the state,
 * checkpoint every ckpt_every steps and at the last, report. Under
 * processes (dp) every rank computes each step's share of shards and the
 * ranks agree after each step on failure and on the stateHash; only rank 0
 * (the writer) writes the run directory and reports. Fault injection for
 * the tests (trainer/fault.h) goes through that module's hooks, one call
 * each per step. The loop prints nothing: what a user sees comes through
 * the report callbacks. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/site.h"
#include "trainer/config.h"
#include "trainer/fault.h"

typedef struct dp_ctx dp_ctx;

/* What the run is, once opened (before its first step of this session). */
typedef struct {
    const trn_run_config *config; /* as the run uses it (init_hash set by init_from) */
    size_t nparams;
    uint64_t start; /* the step the session starts from: it runs start + 1 .. steps */
    uint32_t data_vocab; /* a language model's: the token file's vocabulary (force_vocab: may differ) */
} trn_loop_begin;

/* One step done: its files written (and, at a checkpoint, the checkpoint). */
typedef struct {
    uint64_t step, start;     /* this step; trn_loop_begin's start */
    float loss, lr, grad_norm;
    uint64_t log_entries;     /* of this step's log */
    size_t log_bytes;         /* its file's size */
    uint64_t session_entries; /* of the session's steps so far */
    double step_seconds;      /* wall time of this step's computation */
    double session_seconds;   /* since the session's first step began */
} trn_loop_step;

/* The callbacks that report the run as it goes, called on the writer only
 * (any may be NULL): begin once, step after every step, state with the
 * stateHash of every step once it is known (a step's hash runs during the
 * next step's forward and backward, so it comes later). */
typedef struct {
    void (*begin)(void *arg, const trn_loop_begin *b);
    void (*step)(void *arg, const trn_loop_step *s);
    void (*state)(void *arg, uint64_t step, const ovt_hash *state_hash);
    void *arg;
} trn_loop_report;

typedef struct {
    const char *model;     /* the model's name, for run.json and the loss plot's title */
    const char *data;      /* the dataset file */
    const char *out;       /* the run directory */
    const char *backend;   /* the backend's name, for run.json */
    krn_backend_kind backend_kind;
    int threads;           /* 0: the backend's default */
    const char *replay;    /* NULL, or a run directory whose logs every step applies (REPLAY) */
    bool nearest;          /* round to nearest without a log */
    bool resume;           /* continue the run in out from its latest checkpoint */
    bool force_vocab;      /* train a language model on tokens of another vocabulary
                              (trn_run_data_vocab_check; refused otherwise) */
    const char *init_from; /* NULL, or the name of the file state 0's parameters come from */
    const float *init_params; /* with init_from: its init_nparams parameters in layout order, as the
                                 caller read them (modelio/import.h); the loop copies them */
    size_t init_nparams;
    uint64_t steps;        /* the run's last step */
    uint32_t ckpt_every;   /* checkpoint every K steps (0: only step 0 and the last) */
    ovt_hash run_id;       /* for the root in run.json */
    trn_run_config config;
    trn_fault fault;       /* testing only; kind TRN_FAULT_NONE for a real run */
    bool mem_guard;        /* testing only, CPU backends: the runner's tensors on the guard (trainer/runner.h) */
    dp_ctx *dp;            /* the processes sharing each step (dp/dp.h); NULL: this one alone */
    trn_loop_report report;
} trn_loop_opts;

typedef struct {
    bool together;          /* the failure is every rank's (they stop together); otherwise it is
                               this rank's alone, and the caller ends the job (dp_abort) */
    uint64_t steps;         /* the run's step count now */
    ovt_hash config_hash, final_state_hash, root;
    char *summary;          /* the text of run.json (the writer; malloc'd), else NULL */
} trn_loop_result;

/* Runs (or continues) the run o describes into o->out: config.bin and the
 * step-0 checkpoint of a new run (an existing run without resume is
 * refused), logs/step-N.rlog for every step, ckpt/step-N.ckpt every
 * ckpt_every steps and at the last, steps.bin, loss.csv and loss.svg at every
 * checkpoint, a sharded run's ranks.json, and at the end steps.bin and
 * run.json, whose text res->summary gets. A step that produces a non-finite
 * value fails the run naming it, with nothing of it written. Every rank
 * calls it; res->together says whether a failure is every rank's. Free res
 * with trn_loop_result_free. */
int trn_loop_run(const trn_loop_opts *o, trn_loop_result *res) OVT_MUST_USE;
void trn_loop_result_free(trn_loop_result *res);

#endif
