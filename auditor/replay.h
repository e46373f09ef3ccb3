#ifndef OVT_AUDITOR_REPLAY_H
#define OVT_AUDITOR_REPLAY_H

/* The auditor's replay (docs/agent.md, "ovt audit"): re-executes a trainer's run
 * from its published files, in REPLAY mode on the auditor's own backend, and
 * compares leaf by leaf: for every step i its own (stateHash_i, batchHash_i,
 * logHash_i) against the trainer's step table. The replay applies the rule
 * as an auditor (KRN_VERIFY_AUDITOR, docs/numeric-contract.md section 6,
 * "Who applies the rule"): only a certain violation is fraud; one that only the strict rule
 * sees is reported in suspect and the replay goes on.
 *
 * The trainer's run is a directory in the layout of `ovt train`
 * (trainer/run.h): config.bin, steps.bin, logs/step-N.rlog and, for partial
 * audits and for runs that start from given parameters (config init_hash:
 * state 0 is then ckpt/step-00000000.ckpt, checked against it),
 * ckpt/step-N.ckpt. aud_fetch_run fills such a directory from an
 * artifact store. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/site.h"
#include "kernels/trace.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "store/store.h"

typedef struct {
    const char *run_dir;   /* the trainer's run */
    const char *data_path; /* the dataset file (checked against the config's datasetHash) */
    krn_backend_kind backend;
    int threads;           /* 0: the backend's default */
    uint64_t from, to;     /* compare steps from..to; 0: 1 and N. from > 1 starts from
                              the latest checkpoint at or before from - 1 */
    uint64_t lie_at;       /* fault injection (0: off): from this step on, the
                              auditor's own table carries wrong stateHashes */
    FILE *progress;        /* a line every `every` steps (NULL: none) */
    uint64_t every;
    uint64_t trace_step;   /* 0: none; else this step, if replayed, is recorded into trace
                              (docs/formats.md, "Step trace"): the auditor's view of it */
    krn_trace *trace;      /* with trace_step: a fresh recorder (kernels/trace.h), the caller's */
    bool sites;            /* proof of replay (docs/contract.md): every replayed step traced and each
                              site's output root kept (aud_report.site_roots) */
    const ovt_hash *site_beacon; /* with sites: keep only the site this beacon picks (chain_arb_site_index
                              of the step's site count), one root per step; NULL: every site's */
} aud_replay_opts;

typedef enum { AUD_VERIFIED = 0, AUD_DIVERGED, AUD_FRAUD } aud_finding;

typedef struct {
    aud_finding finding;
    uint64_t steps;       /* N, the trainer's step count */
    uint64_t step;        /* DIVERGED / FRAUD: the first divergent step */
    bool state_differs, batch_differs, log_differs; /* which part of leaf `step` differs */
    char detail[512];     /* FRAUD: why the log was rejected */
    /* The first violation of the arbiter's strict rule that is not certain
     * (an honest arbiter within the op's bound could accept it): reported,
     * not disputed; the replay followed the trainer's entry there, or
     * rounded the unlogged element to nearest. suspect_step 0: none. */
    uint64_t suspect_step;
    char suspect[512];
    /* A sharded run: the first replayed step whose recomputed shard gradient
     * differs from the hash in the trainer's shard table, and that shard
     * (shard_step 0: none). Which process computed it: the trainer's
     * ranks.json, when its run directory has one (shard_owner_known). */
    uint64_t shard_step;
    uint32_t shard;
    bool shard_owner_known;
    uint32_t shard_rank;
    char shard_host[64];
    bool shard_owner_bound;  /* ranks.json.sha256 binds the ranks.json it came from */
    char shard_owner_note[1024]; /* shard_step and !shard_owner_known: why (absent, refused) */
    uint64_t replayed;    /* steps executed */
    /* Band rules 2 on another backend than cpu: the steps re-executed
     * canonically (the arbiter's computation) because the auditor's own view
     * was uncertain there; that view decided them. */
    uint64_t canonical_steps;
    int rule;             /* the REPLAY rule the run's band rules call for (2 or 3) */
    bool canonical_view;  /* rule 3 on the cpu backend: the auditor's values are the arbiter's */
    bool partial;         /* from > 1 or to < N: own is not a full history */
    /* The auditor's own history, steps 0..N. Steps before `from` are copied
     * from the trainer's table; from the first divergent step on, the
     * auditor stops replaying (the game only reaches the leftmost difference)
     * and its leaves there carry a zero stateHash, except leaf `step` itself
     * when the state was computed. */
    trn_step_table own;
    trn_step_table trainer;
    /* opts.trace_step: whether that step was replayed (traced), the trace's
     * result (0, or why it failed: krn_trace_error) and its root. */
    uint64_t trace_step;
    bool traced;
    int trace_rc;
    ovt_hash trace_root;
    /* opts.sites: the sites of a step (the trace's records) and, for every
     * replayed step i, their output roots at site_roots[i * site_stride] in
     * site order (step 0's, and those of steps not replayed, zero); with
     * opts.site_beacon only the site it picks is kept (site_stride 1, that
     * site's index in site); malloc'd, freed by aud_report_free. */
    uint32_t nsites;
    uint32_t site_stride;
    uint32_t site;
    ovt_hash site_beacon;
    ovt_hash *site_roots;
} aud_report;

/* Replays and compares. Returns 0 when the replay ran (read the finding),
 * or a negative code when it could not (a missing file, a dataset that is
 * not the run's, ...). The caller frees the report with aud_report_free. */
int aud_replay(const aud_replay_opts *opts, aud_report *out) OVT_MUST_USE;
void aud_report_free(aud_report *r);

/* Rebuilds the trainer's own state after step `step` from its run directory:
 * the latest checkpoint at or before it, then its logged steps replayed on
 * the cpu backend, each stateHash checked against its step table. */
int aud_rebuild_state(trn_state **out, const char *run_dir, const char *data_path, uint64_t step) OVT_MUST_USE;

/* Fills dir (created) with the run published under run_id in the store:
 * config.bin, steps.bin, dataset.bin, every step's log and, for a run
 * that starts from given parameters, ckpt/step-00000000.ckpt built from the
 * blob named by the config's init_hash, each checked against its hash; *manifest (may be NULL) gets the manifest. Logs the
 * store does not have are left out (the replay then fails at that step). */
int aud_fetch_run(store_ctx *store, const ovt_hash *run_id, const char *dir,
                  store_manifest *manifest) OVT_MUST_USE;

#endif
