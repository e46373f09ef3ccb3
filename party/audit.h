#ifndef OVT_PARTY_AUDIT_H
#define OVT_PARTY_AUDIT_H

/* `ovt audit` with the chain flags (docs/agent.md): the run's terms are
 * checked against this auditor's policy and key before anything is fetched
 * (let alone any bond moved), the run is audited (auditor/audit.h), the
 * auditor's own root is committed for it, and with `agent` the game is then
 * played to the end (party/agent.h). Without the chain, only the audit. */

#include <stdbool.h>

#include "auditor/audit.h"
#include "chain/session.h"
#include "party/policy.h"

typedef struct {
    aud_audit_opts audit;            /* audit.run_id: the run on chain */
    const chain_session_args *chain; /* the node, contract and auditor's key; NULL: off chain */
    const party_policy *policy;      /* with chain: the terms this auditor accepts */
    bool agent;                      /* then play the game as the auditor's agent */
    bool challenge;                  /* an outside challenger, not the run's auditor: once the trainer has
                                        committed, challenge() its root if the replay's differs (and with
                                        agent play that challenge's game); nothing sent if they agree */
    bool copy_trainer_root;          /* fault injection (devnet tests only): a colluding or lazy named
                                        auditor that commits the trainer's root, not its replay's */
    uint64_t guess_sites_from;       /* fault injection (devnet tests only; 0: off): on a run with proof
                                        of replay, a lazy auditor's site hashes, guessed from this step
                                        on (party/sites.h) */
    const char *state_dir;           /* the agent's (NULL: OUT/agent) */
    long poll_ms;                    /* the agent's polling interval */
    bool json;                       /* the agent's log lines as JSON */
    bool withhold_block;             /* fault injection (devnet tests only): with narrow, never publish
                                        the block package */
    const chain_address *narrow;     /* with agent and a store source: the OvtNarrow contract; the agent
                                        plays the narrowing from OUT/trainer (the fetched copy of the
                                        run) and puts its block package in that store */
    /* Called once with the report when it is final: after the commit, with
     * "root" (and "trainer_root_matches" once the trainer has committed)
     * added, and before the agent plays. */
    void (*on_report)(void *ctx, const aud_report *r, const json_t *report);
    void *ctx;
} party_audit_opts;

typedef struct {
    aud_finding finding;
    bool played;                     /* the agent played the game to its end */
    chain_arb_outcome outcome;       /* then, how it ended */
} party_audit_result;

/* Returns 0 when the audit ran (and, on chain, the root was committed and
 * any game played out), whatever it found; else an error. */
int party_audit(const party_audit_opts *o, party_audit_result *out) OVT_MUST_USE;

#endif
