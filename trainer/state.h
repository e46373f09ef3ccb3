#ifndef OVT_TRAINER_STATE_H
#define OVT_TRAINER_STATE_H

/* The training state after step i: the run config, the step number, the
 * parameters and the AdamW moments m and v, all grid values, in one
 * allocation of 3 * nparams floats sliced by the layout. Its stateHash
 * (trainer/state_hash.h) and its checkpoint file are defined in
 * docs/formats.md ("State"). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "trainer/config.h"
#include "trainer/layout.h"

typedef struct trn_state {
    trn_run_config config;
    ovt_hash config_hash;
    trn_layout layout;
    uint64_t step;
    float *mem;    /* 3 * nparams floats; owns the memory */
    float *params; /* mem */
    float *m;      /* mem + nparams */
    float *v;      /* mem + 2 * nparams */
    struct trn_state_hashing *hashing; /* trn_state_hash_begin's, until trn_state_hash_end */
    /* Ends a hash in flight (discarding it), so that trn_state_free never
     * frees memory the hash still reads: set with `hashing` by
     * trainer/state_hash.c, which this file does not include. */
    void (*hashing_end)(struct trn_state *st);
    struct krn_ctx *hash_ctx;          /* trn_state_hash_threads's; not owned */
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

#endif
