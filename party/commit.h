#ifndef OVT_PARTY_COMMIT_H
#define OVT_PARTY_COMMIT_H

/* The trainer's commitment (`ovt commit`, docs/agent.md): party_commit_run
 * opens the run on the arbitration contract (or joins one), publishes what
 * an auditor needs to the artifact store and commits the step Merkle root
 * with its EIP-712 signature, keeping RUNDIR/commit.json so that a run
 * again after any failure continues; then it writes RUNDIR/receipt.json,
 * enough to check the commitment off chain (the signature over
 * Commitment(runId, root, steps, configHash, datasetHash) recovers to the
 * trainer) and for the trainer agent to play the run's game. */

#include <stdbool.h>

#include "chain/session.h"
#include "party/policy.h"
#include "trainer/run.h"
#include "store/store.h"

typedef struct {
    uint64_t chain_id;
    chain_address contract;
    chain_arb_params params; /* nonce 0 when the run was joined */
    ovt_hash run_id;
    ovt_hash root;
    uint8_t signature[65];
    ovt_hash commit_tx;
    bool has_open_tx;
    ovt_hash open_tx;
    const char *store;      /* may be NULL */
    const char *data;       /* absolute path of the dataset, may be NULL */
    ovt_hash steps_blob;    /* the step table's store name (zero if not published) */
} party_receipt;

typedef struct {
    const char *dir;                 /* RUNDIR, written by `ovt train` */
    const chain_session_args *chain; /* the node, the contract and the trainer's key */
    chain_arb_params terms;          /* auditor, arbiter, bonds, timeouts and nonce; the trainer,
                                        hashes and steps come from the key and RUNDIR */
    bool have_parties;               /* the auditor and the arbiter were named (needed to open) */
    bool have_nonce;                 /* terms.nonce was given: it must be the journal's */
    bool have_run_id;                /* join run_id, opened by someone else, instead of opening */
    ovt_hash run_id;
    const party_policy *policy;      /* with have_run_id: the terms this trainer accepts */
    const char *store;               /* publish the run there (NULL: not published) */
    const char *data;                /* with store: the dataset, an absolute path */
    bool replay;                     /* ask for proof of replay: commitReplay (docs/contract.md) */
} party_commit_opts;

typedef struct {
    party_receipt receipt;           /* its store and data point into the opts */
    char *json;                      /* the receipt's text, as written */
    char path[4096];                 /* RUNDIR/receipt.json */
} party_commit_result;

/* Commits RUNDIR as above; on failure (nothing to free in *out) a run again
 * with the same opts continues: the run is opened once, committed once.
 * Once receipt.json names the journal's run that commit is finished, and a
 * new party_commit_run opens a new run. */
int party_commit_run(const party_commit_opts *o, party_commit_result *out) OVT_MUST_USE;
void party_commit_result_free(party_commit_result *r);

/* The receipt as indented JSON (malloc'd). */
int party_receipt_json(const party_receipt *r, char **text) OVT_MUST_USE;

/* Publishes run directory `dir` (whose step table is t) to store s for
 * run_id: config.bin, the dataset at data_path (its SHA-256 must be
 * dataset_hash), the starting parameters of a run with an init_hash
 * (party_publish_init), every step's log (each must hash to its logHash), a
 * sharded run's ranks.json (when the run has one: the manifest's "ranks"),
 * the step table, and the manifest, which *m gets. docs/store.md. */
int party_publish_run(store_ctx *s, const char *dir, const trn_step_table *t, const char *data_path,
                    const ovt_hash *dataset_hash, const ovt_hash *run_id, store_manifest *m) OVT_MUST_USE;

/* For a run in `dir` whose config has an init_hash: its step-0 checkpoint's
 * parameters (checked to be the state 0 the config names) as
 * blob/<init_hash>. Nothing for a run that starts from its seed. */
int party_publish_init(store_ctx *s, const char *dir) OVT_MUST_USE;

/* RUNDIR/commit.json, written (temp + fsync + rename) before `ovt commit`
 * sends anything: the chain, the contract, the runId and the open's nonce
 * (so a run again opens nothing new: the same terms give the same runId) and
 * the block it started from (where its events are looked for). A run again
 * reads it, waits for what the interrupted run sent, then asks the chain
 * what is done (the run, the trainer's Committed event) and does the rest. */
typedef struct {
    uint64_t chain_id;
    chain_address contract;
    ovt_hash run_id;
    uint64_t nonce;      /* the open's nonce parameter */
    uint64_t from_block; /* the head before the first transaction */
    bool joined;         /* --run-id: the run was opened by someone else */
} party_commit_journal;

/* OVT_ENOTFOUND when RUNDIR has none. */
int party_commit_journal_load(const char *dir, party_commit_journal *j) OVT_MUST_USE;
int party_commit_journal_save(const char *dir, const party_commit_journal *j) OVT_MUST_USE;

/* The first event of kind for run_id (of party, for COMMITTED) from
 * from_block to the head: *tx its transaction, *found 0 when none. */
int party_commit_find_event(const chain_arb *arb, const ovt_hash *run_id, chain_arb_event_kind kind,
                          const chain_address *party, uint64_t from_block, ovt_hash *tx, int *found) OVT_MUST_USE;


#endif
