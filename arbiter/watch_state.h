#ifndef OVT_ARBITER_WATCH_STATE_H
#define OVT_ARBITER_WATCH_STATE_H

/* Internal to arbiter/: the watcher's state on disk (see watch.h): the
 * cursor and one folder per game. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "arbiter/decide.h"
#include "trainer/runner.h"

#define ARB_RECENT 64 /* block hashes kept for reorg detection */

typedef struct {
    uint64_t chain_id;
    chain_address contract;
    uint64_t next;                   /* first block not yet read */
    size_t nrecent;                  /* oldest first */
    uint64_t recent_block[ARB_RECENT];
    ovt_hash recent_hash[ARB_RECENT];
} arb_cursor;

typedef struct {
    ovt_hash run_id;                 /* the game's id: a run's, or a challenge's (challengeId) */
    bool is_challenge;               /* an open challenge of a run this arbiter sits on */
    ovt_hash challenged_run;         /* is_challenge: the run it disputes, whose id its leaves are hashed with */
    uint64_t opened_block;
    bool done;
    uint64_t first_missing;
    bool has_eval;
    arb_eval eval;
    bool has_verdict;                /* a verdict transaction was sent */
    ovt_hash verdict_tx;
    chain_arb_outcome verdict_outcome;
    ovt_hash verdict_evidence;
    bool has_accept;                 /* an accept() transaction was sent */
    ovt_hash accept_tx;
    bool has_ballot;                 /* n > 1: the ballot chosen (saved before its commitVerdict is sent) */
    arb_ballot ballot;
    bool has_ballot_tx;              /* its commitVerdict transaction was sent */
    ovt_hash ballot_tx;
    bool has_reveal;                 /* its revealVerdict transaction was sent */
    ovt_hash reveal_tx;
    json_t *events;                  /* array of {event, block, log_index, tx} */
    arb_act last_act;                /* not saved: for logging changes */
    const char *last_reason;
    trn_runner *prep;                /* not saved: the runner prepared when the dispute opened */
    bool prep_tried;                 /* not saved: preparing was tried (once per process) */
    int narrow_waiting;              /* not saved: "waiting for the narrowing" was logged (1), and for its packages (2) */
    uint64_t narrow_ended_seen;      /* not saved: when the narrowing was first seen ended (0: not yet) */
} arb_game;

/* cursor.json: OVT_ENOTFOUND when there is none yet. */
int arb_cursor_load(arb_cursor *c, const char *dir) OVT_MUST_USE;
int arb_cursor_save(const arb_cursor *c, const char *dir) OVT_MUST_USE;
void arb_cursor_push(arb_cursor *c, uint64_t block, const ovt_hash *hash);

/* game.json's format: 1 (no "format" field) before committees, 2 with the
 * accept, ballot and reveal transactions and the ballot's salt, 3 for a
 * challenge's game ("challenge_of": the run it disputes; a run's own game
 * is still written as 2). A file of a later format is refused with a
 * message naming it: an ovt that does not know challenges would hash the
 * challenge's leaves with the wrong id. */
#define ARB_GAME_FORMAT 3
#define ARB_GAME_FORMAT_RUN 2

/* games/<runId>/: load every game folder (*games malloc'd), save one, and
 * remove one (a run whose opening vanished in a reorg). */
int arb_games_load(arb_game **games, size_t *n, const char *dir) OVT_MUST_USE;
int arb_game_save(const arb_game *g, const char *dir) OVT_MUST_USE;
int arb_game_remove(const arb_game *g, const char *dir) OVT_MUST_USE;
void arb_game_free(arb_game *g);

/* Where an evaluation's rank and host come from, as the log and eval.json
 * say it: the trainer's record, which no hash commits to. */
#define ARB_OWNER_SOURCE "the trainer's ranks.json: its own record, a hint, not committed"

/* An evaluation's shard finding: {"shard", "shards", "rank", "host",
 * "owner_source"} (rank and host null when not known), or JSON null when no
 * shard's gradient differs. */
json_t *arb_shard_json(const arb_eval *e);

/* The id a game's leaves are hashed with: the run's own, or for a
 * challenge the run it disputes. */
const ovt_hash *arb_game_tree_id(const arb_game *g);

/* "0x" + 64 hex digits, and back. */
void arb_hex32(char out[67], const ovt_hash *h);
int arb_parse_hex32(ovt_hash *out, const json_t *v) OVT_MUST_USE;

#endif
