#ifndef OVT_ARBITER_WATCH_SEND_H
#define OVT_ARBITER_WATCH_SEND_H

/* Inside the watcher: arbiter/watch.c (the loop: events, reorgs, decisions)
 * and arbiter/watch_send.c (the transactions it sends for a game, each saved
 * before it is sent, and their log lines). Not a public API: watch.h is. */

#include <stdint.h>

#include "arbiter/decide.h"
#include "arbiter/watch_opts.h"
#include "arbiter/watch_state.h"
#include "chain/arbitration.h"
#include "store/store.h"
#include "chain/txm.h"
#include "common/bytes.h"

typedef struct {
    const arb_watch_opts *o;
    const chain_arb *arb;
    chain_txm *m;
    store_ctx *store;
    volatile int *stop;
    arb_cursor cursor;
    arb_game *games;
    size_t ngames;
    uint64_t head, safe, head_time;
} watcher;

/* One log line: JSON {"time", "event", "run_id"?, "message", ...fields} or
 * "TIME EVENT [run 0x12345678] message". fields (may be NULL) is stolen. */
void arb_say(const watcher *w, const char *event, const ovt_hash *run, json_t *fields, const char *fmt, ...)
    OVT_PRINTF(5, 6);
/* "0x..." of a block number, as eth_call takes it. */
void arb_block_tag(char out[24], uint64_t block);
/* Unix seconds: max(wall clock, the head block's timestamp). */
uint64_t arb_now_s(const watcher *w);
/* "; shard J of S: its gradient differs ..." (empty when no shard's does). */
void arb_shard_phrase(char *out, size_t cap, const arb_eval *e);

/* The sends of arb_decide's actions (watch_send.c): each saves the game with
 * the transaction's hash before waiting for it, and logs NAME_sent and
 * NAME_mined. */
int arb_send_verdict(watcher *w, arb_game *g, const arb_action *a) OVT_MUST_USE;
int arb_send_accept(watcher *w, arb_game *g, const chain_arb_params *run, const arb_action *a) OVT_MUST_USE;
/* Seals a.outcome/evidence with a salt chosen once per game and saved
 * before the ballot is sent; a ballot already on disk is sent again as it is. */
int arb_send_ballot(watcher *w, arb_game *g, const chain_arb_game *game, const arb_action *a) OVT_MUST_USE;
int arb_send_reveal(watcher *w, arb_game *g, const arb_action *a) OVT_MUST_USE;

#endif
