#ifndef OVT_TRAINER_CHECK_H
#define OVT_TRAINER_CHECK_H

/* One step of a run directory re-executed (trainer/step.h) and set against
 * what the run claims: `ovt step` compares it with steps.bin and its leaf,
 * `ovt rlog RUNDIR --step K --sites` counts it per site. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chain/merkle.h"
#include "dp/ranks.h"
#include "kernels/site.h"
#include "trainer/rundata.h"
#include "trainer/step.h"

/* The dataset of the run in dir: the file `data`, else the path
 * dir/receipt.json names (OVT_EINVAL when there is none), loaded against
 * the run's config.bin, which *rc gets; its datasetHash must be the
 * file's. */
int trn_run_dataset(trn_run_data *d, trn_run_config *rc, const char *dir, const char *data) OVT_MUST_USE;

typedef enum {
    TRN_CHECK_MATCH,    /* the step's three hashes are steps.bin's */
    TRN_CHECK_MISMATCH, /* one of them is not */
    TRN_CHECK_FRAUD     /* a log on the way failed the check (fraud says how) */
} trn_check_verdict;

/* What `ovt step` finds for step k. */
typedef struct {
    trn_check_verdict verdict;
    trn_replay_result replay;   /* what the re-execution found */
    chain_merkle_preimage got;  /* its stateHash, batchHash and logHash */
    chain_merkle_preimage want; /* steps.bin's */
    bool state_matches, batch_matches, log_matches;
    bool has_run_id;            /* the run has a runId (non-zero in run.json, else receipt.json's) */
    ovt_hash leaf, table_leaf;  /* with it: leaf k of got and of want */
    bool has_owner;             /* ranks.json names the process of replay.shard_differs */
    dp_shard_owner owner;
    char owner_note[1024];      /* a shard differs and !has_owner: why (ranks.json absent, refused) */
    char fraud[1024];           /* TRN_CHECK_FRAUD: the finding */
} trn_step_check;

/* Re-executes step k of the run in dir (trn_step_replay_run; the dataset as
 * trn_run_dataset finds it) and compares it with steps.bin: 0 with the
 * verdict in *out, which a fraudulent log is too; an error when an input
 * cannot be read or checked, or k is not a step of the run. */
int trn_step_check_run(trn_step_check *out, const char *dir, const char *data, uint64_t k,
                       int threads) OVT_MUST_USE;

/* trn_step_check_run with step k traced as tr says (trainer/step.h; tr
 * NULL: untraced). */
int trn_step_check_traced(trn_step_check *out, const char *dir, const char *data, uint64_t k, int threads,
                          trn_step_trace *tr) OVT_MUST_USE;

/* Step k of the run in dir counted per site (trn_step_replay_run with rows): the
 * rows (malloc'd, the caller frees *rows) of the sites it executed. Errors
 * as trn_step_check_run's, and OVT_EFRAUD when the step's log fails the
 * check: the rows then end with the site that failed (a finding, when
 * there are any). */
int trn_step_sites(krn_site_stats **rows, size_t *nrows, const char *dir, const char *data, uint64_t k,
                   int threads) OVT_MUST_USE;

/* The sums of the rows' counts (n in total's n, and so on; site and op
 * unset). */
void trn_site_totals(krn_site_stats *total, const krn_site_stats *rows, size_t n);

#endif
