#ifndef OVT_TRAINER_STATE_H
#define OVT_TRAINER_STATE_H

/* The training state after step i: the run config, the step number, the
 * parameters and the AdamW moments m and v, all grid values, in one
 * allocation of 3 * nparams floats sliced by the layout. Its stateHash and
 * its checkpoint file are defined in docs/formats.md ("State"). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "trainer/config.h"
#include "trainer/layout.h"

typedef struct {
    trn_run_config config;
    ovt_hash config_hash;
    trn_layout layout;
    uint64_t step;
    float *mem;    /* 3 * nparams floats; owns the memory */
    float *params; /* mem */
    float *m;      /* mem + nparams */
    float *v;      /* mem + 2 * nparams */
    struct trn_state_hashing *hashing; /* trn_state_hash_begin's, until trn_state_hash_end */
} trn_state;

/* Allocates a zeroed state (step 0) for a checked run config. */
int trn_state_new(trn_state **out, const trn_run_config *rc) OVT_MUST_USE;
void trn_state_free(trn_state *st);

/* A state (step 0) of a checked run config whose 3 * nparams floats are
 * mem (ovt_big_alloc'd), which it takes, also on failure: for a reader that
 * puts a file's bytes straight into the state's memory (trainer/checkpoint.c). */
int trn_state_from_mem(trn_state **out, const trn_run_config *rc, float *mem) OVT_MUST_USE;

/* A deep copy of src. */
int trn_state_clone(trn_state **out, const trn_state *src) OVT_MUST_USE;

/* dst becomes a copy of src (its step, parameters and moments); both of one
 * run config, dst settled (no background hash). */
void trn_state_copy(trn_state *dst, const trn_state *src);

/* Step-0 state: parameters drawn from krn_rng (seed, step 0, KRN_RNG_INIT,
 * index = the element's offset in the flat parameter array) scaled and
 * rounded to the grid, m = v = 0. MLP: w ~ N(0, 1/in), b = 0. GPT-2 (as
 * GPT-2): weights N(0, 0.02^2), residual projections N(0, (0.02/sqrt(2L))^2),
 * biases 0, layernorm weights 1. */
void trn_state_init(trn_state *st);

/* stateHash_i (docs/formats.md): SHA-256("ovt.state.v1" || configHash ||
 * u64le(step) || u32le(3 * ntensors) || SHA-256 of every tensor's
 * little-endian bytes, parameters then m then v, each in layout order). */
void trn_state_hash(ovt_hash *out, const trn_state *st);

/* The 3 * ntensors per-tensor digests stateHash combines, D(params, t) for
 * every tensor t in layout order, then D(m, t), then D(v, t); out has room
 * for 3 * TRN_MAX_TENSORS. */
void trn_state_digests(ovt_hash *out, const trn_state *st);

/* stateHash from its parts (docs/formats.md): a configHash, the step and
 * the 3 * ntensors digests in trn_state_digests's order. What a verifier
 * holding only the digests computes (party/model_check.h). */
void trn_state_hash_combine(ovt_hash *out, const ovt_hash *config_hash, uint64_t step, size_t ntensors,
                            const ovt_hash *digests);

/* trn_state_hash of the state as it is now, computed in the background while
 * the caller goes on with work that only reads the state (the trainer: the
 * next step's forward and backward). The background threads run at
 * SCHED_IDLE, on CPU time the caller's threads leave unused; what they have
 * not done when the hash is needed, the caller does with threads at normal
 * priority, and a background thread hands over the tensor it is hashing
 * within 256 KiB. On a machine with no idle CPU the overlap gains nothing
 * and costs little (bench_step --loop). Until trn_state_hash_end the state
 * must not change: whatever writes it calls trn_state_settle first (the
 * optimizer step does). Without
 * threads the caller computes it all when it settles. OVT_ENOMEM when no
 * memory is left for the job. One hash at a time: a second begin settles
 * and discards the first. */
int trn_state_hash_begin(trn_state *st) OVT_MUST_USE;

/* Waits for trn_state_hash_begin's digests (taking those no thread has
 * started), after which the state may change; a no-op without a begin. */
void trn_state_settle(trn_state *st);

/* The hash trn_state_hash_begin started (settling it first) and the step
 * the state was at then. Returns false, out and step untouched, when none
 * was started. */
bool trn_state_hash_end(trn_state *st, ovt_hash *out, uint64_t *step);

#endif
