#ifndef OVT_PARTY_VERIFY_H
#define OVT_PARTY_VERIFY_H

/* A commitment receipt (RUNDIR/receipt.json, party/commit.h) checked
 * offline against the run directory it lies in and the dataset
 * (`ovt verify`, docs/trainer.md): the EIP-712 signature recovers to the
 * trainer, the runId derives from the receipt's terms, steps.bin's leaves
 * hash to the root, config.bin and the dataset hash to what the receipt
 * names, and optionally a spread of steps re-executed equals steps.bin.
 * With a model file instead (`ovt verify --model`): the signature, the
 * runId, then the model against the receipt alone (party/model_check.h).
 * Nothing on chain is read. */

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* One check's outcome. */
typedef struct {
    const char *name;   /* "signature", "run_id", "steps", "config", "dataset", "replay", "step K", "model" */
    bool ok;
    const char *detail; /* what it found, or what differs (valid during the callback) */
} party_check;

typedef struct {
    const char *receipt; /* the path of RUNDIR/receipt.json */
    const char *model;   /* a safetensors file of `ovt export`: check it instead of the run directory */
    const char *data;    /* the dataset; NULL: the path the receipt names */
    uint64_t replay;     /* re-execute this many steps, spread evenly over the run (0: none) */
    int threads;         /* the replay's cpu threads; 0: the backend's default */
    /* Called with each check as it is made, in order. */
    void (*on_check)(void *arg, const party_check *c);
    void *arg;
} party_verify_opts;

typedef struct {
    bool ok;        /* every check passed */
    uint64_t steps; /* the receipt's step count */
} party_verify_result;

/* Runs the checks. Returns 0 when the receipt could be read, whatever the
 * checks found (res->ok); an error (OVT_EFORMAT naming the field, or the
 * read's) when it cannot. The replay runs only when every other check
 * passed (else a failed "replay" check says so). */
int party_verify(const party_verify_opts *o, party_verify_result *res) OVT_MUST_USE;

#endif
