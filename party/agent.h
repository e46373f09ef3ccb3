#ifndef OVT_PARTY_AGENT_H
#define OVT_PARTY_AGENT_H

/* A party agent (trainer or auditor) playing one run's game to the end
 * (docs/agent.md). A loop:
 *   read the block number, that block's timestamp and getGame at that block;
 *   settled: print the outcome and return;
 *   plan this party's move with chain_arb_plan_move (a pure function of the
 *   game and the party's own tree) and send it through the transaction
 *   manager, which checks it with eth_call first: a duplicate or stale move
 *   is refused by the contract before anything is sent;
 *   nothing due and the deadline passed: claim the timeout;
 *   trainer, once the game stands on step j: publish the step's inputs
 *   (state j-1, batch j, log j, config, dataset) to the store, unless
 *   withholding.
 * A node that does not answer is retried with a doubling backoff (up to
 * 5 s); each turn re-reads the chain, so a move is never sent twice, and
 * after a failure the node's pending count picks the next nonce. The
 * per-game state (what was sent and published, the outcome) is kept in
 * STATE_DIR/<runId>/state.json, written atomically. SIGINT/SIGTERM stop the
 * loop between turns. */

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "chain/session.h"
#include "party/policy.h"
#include "party/narrow.h"
#include "trainer/fault.h"
#include "trainer/run.h"
#include "store/store.h"

typedef struct {
    bool is_trainer;
    ovt_hash run_id;       /* the run whose history this is (its leaves are hashed with it) */
    ovt_hash game_id;      /* the game to play when it is not the run's own (a challenge of the run,
                              docs/contract.md "Open challenges"; the auditor's side); zero: run_id */
    const char *run_dir;   /* this party's history: RUN_DIR/steps.bin */
    const char *data_path; /* trainer: the dataset, to rebuild state j-1 */
    store_ctx *store;      /* trainer: where the inputs of step j go (may be NULL) */
    const char *state_dir; /* parent of the per-game folder */
    long poll_ms;
    bool json;             /* log lines as JSON objects */
    bool withhold;         /* fault injection: the trainer never publishes the inputs */
    bool defend;           /* trainer: also play every challenge of the run (ChallengeOpened), and
                              return only once its own game and every challenge are settled and
                              the challenge window (commitTimeout from its commit) has closed */
    FILE *log;             /* log lines (stderr if NULL) */
    /* The narrowing (docs/agent.md, "Narrowing"): with narrow set (the
     * OvtNarrow contract bound to the arbitration contract), once the game
     * awaits the verdict on step K the agent re-executes step K of
     * narrow_dir (data: narrow_data) with its trace, plays levels 2 and 3
     * with chain_narrow_plan_move, and when the narrowing ends at a block
     * puts that block's package in store (block/<its claimed leaf>). */
    const chain_address *narrow;
    const char *narrow_dir;
    const char *narrow_data;
    bool withhold_block;           /* testing only: never publish its block package */
    bool forge_block_entries;      /* testing only: its block package's log entries are not the trainer's
                                      log's (party_narrow_pack's forge_entries) */
    const trn_fault *narrow_fault; /* testing only: step K re-executed under this fault (the trainer's
                                      faulty hardware), so that its trace matches its committed state */
    party_chain_forgery narrow_forge_chain; /* testing only: at level 4, post a chunk chain forged
                                               (from the middle chunk on, or with a leaf too many) */
    bool narrow_no_chain;          /* testing only: at level 4, post no chunk chain (it loses by silence) */
} party_agent_opts;

/* Runs until the run is settled (*outcome gets it) or a stop signal
 * (OVT_ETIMEOUT with "stopped"), or a failure that retrying cannot mend (a
 * history whose root is not the party's committed root, an unknown run). */
int party_agent_run(chain_session *s, const party_agent_opts *o, chain_arb_outcome *outcome) OVT_MUST_USE;

/* One game played a turn at a time, by a loop that plays many (the
 * challenger's daemon, party/challenger.h): the same turn as
 * party_agent_run's (re-read the game, plan, send, or claim a timeout),
 * with its state in STATE_DIR/<gameId>/state.json. The options are
 * copied; s must outlive the game. party_game_turn sets *done once the
 * game is settled (*outcome: how) and *wait when nothing was sent (the
 * caller may sleep). */
typedef struct party_game party_game;
int party_game_open(party_game **out, chain_session *s, const party_agent_opts *o) OVT_MUST_USE;
int party_game_turn(party_game *g, chain_arb_outcome *outcome, int *done, int *wait) OVT_MUST_USE;
void party_game_free(party_game *g);

/* `ovt agent`: one party's agent with what it needs around it. */
typedef struct {
    party_agent_opts agent;          /* its store is opened from store_url */
    const chain_session_args *chain; /* the node, the contract and the party's key */
    const party_policy *policy;      /* the terms this party accepts */
    const char *store_url;           /* trainer: where the inputs go (NULL: the receipt's store) */
    const char *metrics_addr;        /* serve /metrics and /healthz there (NULL: off) */
} party_agent_play_opts;

/* Plays the game as party_agent_run does, once the run's terms are found
 * inside the policy; a trainer takes the store and the dataset its
 * RUN_DIR/receipt.json names when none is given. Serves the metrics while
 * it plays, and installs the stop signals. */
int party_agent_play(const party_agent_play_opts *o, chain_arb_outcome *outcome) OVT_MUST_USE;

/* Prints the outcome to stdout: its name, or with json
 * {"outcome": NAME, "code": N} on one line. */
void party_print_outcome(chain_arb_outcome outcome, bool json);

/* Installs SIGINT/SIGTERM handlers that make party_agent_run return. */
void party_agent_install_signals(void);

/* One log line of a party's process: with json one object, fields (taken
 * over; may be NULL) with time, role, event and message; else
 * "WHO EVENT: message". Flushed. */
void party_log_line(FILE *f, bool json, const char *role, const char *who, const char *event, json_t *fields,
                    const char *message);

/* Whether one of those signals came. */
bool party_agent_stop_requested(void);

/* Loads a party's history (DIR/steps.bin) and builds its tree for run_id:
 * the leaves, the tree and the preimages for chain_arb_plan_move. */
typedef struct {
    trn_step_table table;
    chain_merkle *tree;
} party_history;

int party_history_load(party_history *h, const char *dir, const ovt_hash *run_id) OVT_MUST_USE;
int party_history_from_table(party_history *h, const trn_step_table *t, const ovt_hash *run_id) OVT_MUST_USE;
void party_history_free(party_history *h);

#endif
