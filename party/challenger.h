#ifndef OVT_PARTY_CHALLENGER_H
#define OVT_PARTY_CHALLENGER_H

/* The outside challenger's daemon (`ovt audit --watch STORE`, docs/agent.md
 * "The challenger"): it audits every run it sees and challenges a wrong
 * trainer root within the run's challenge window, so no run depends on its
 * one named auditor doing its work (docs/contract.md "Open challenges").
 * A loop, op-challenger style:
 *   read the contract's events from its cursor to the head: each trainer's
 *   Committed opens a run's window (commitTimeout from that block) and makes
 *   the run a candidate;
 *   for each candidate not yet decided: skip it (window closed, a run of
 *   which this key is a party or an arbiter, no auditor bond, terms outside
 *   the policy), else replay it from the store and challenge() its root
 *   when the replay's differs (party_audit with challenge; it checks first
 *   that this account has no challenge of the run yet); a replay that fails
 *   (the run not in the store yet, the node) is retried with a growing
 *   pause until the window closes;
 *   play a turn of each open challenge (party_game_turn) until it settles.
 * On disk (state_dir), every write atomic:
 *   cursor.json              chain id, contract, the next block to read
 *   runs/<runId>.json        the run's commit block and window, and once
 *                            decided: "agreed", "challenged" (with the
 *                            challenge id and the replay's root), or
 *                            "skipped" (why); then the challenge's outcome
 *   replay/<runId>/          the replay (the auditor's steps.bin, audit.json)
 *   games/<challengeId>/     the challenge's agent state (party/agent.h)
 * A run is written before the cursor moves past its Committed, and its
 * decision once made, so a restart neither misses a run nor decides one
 * twice; and a challenge is sent only when the chain has none of this
 * account for the run (a crash between sending it and writing the decision
 * finds it there and records it). */

#include <stdbool.h>
#include <stdio.h>

#include "auditor/audit.h"
#include "chain/session.h"
#include "party/policy.h"

typedef struct {
    const chain_session_args *chain; /* the node, the contract and the challenger's key */
    const party_policy *policy;      /* the runs it takes on: their bonds, arbiters, timeouts, ... */
    const char *store_url;           /* where the runs are published (`ovt commit --store`) */
    const char *state_dir;
    aud_audit_opts audit;            /* the replay's backend, threads, fetch limits (and lie_at, a
                                        lying challenger for devnet tests); source, out, run_id are
                                        set per run */
    uint64_t from_block;             /* the first block read when there is no cursor yet */
    bool has_from_block;             /* false: the head at the first start */
    long poll_ms;
    bool once;                       /* one pass up to the head, a turn of each game, and return */
    bool json;                       /* log lines as JSON objects */
    FILE *log;                       /* stdout if NULL */
} party_challenger_opts;

/* Runs until a stop signal (party_agent_install_signals), or with once for
 * one pass. Returns 0 on a clean stop; a failed pass is logged and retried
 * (with once: returned). */
int party_challenger_run(const party_challenger_opts *o) OVT_MUST_USE;

#endif
