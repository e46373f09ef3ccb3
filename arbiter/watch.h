#ifndef OVT_ARBITER_WATCH_H
#define OVT_ARBITER_WATCH_H

/* The arbiter watcher (`ovt arbiter watch`), op-challenger style: each tick
 * reads the chain at one fixed block (the head less the confirmations),
 * follows the contract's events over bounded eth_getLogs ranges, asks
 * arb_decide what each of its games needs, and sends verdicts through the
 * one transaction manager that owns its key, nonces and fees.
 *
 * On disk (--state-dir DIR), every write atomic (temporary file, fsync,
 * rename):
 *   DIR/cursor.json                 the next block to read and the hashes of
 *                                   the last blocks read (reorg detection)
 *   DIR/games/<runId>/game.json     one folder per run whose arbiter it is:
 *                                   the events seen, when inputs were first
 *                                   missing, the verdict transaction sent
 *   DIR/games/<runId>/eval.json     the step's evaluation (so a restart does
 *                                   not re-execute it)
 * Game state is written before the cursor, so a crash repeats work (safely:
 * every action is re-derived from the chain) and never skips an event. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "chain/arbitration.h"
#include "chain/txm.h"
#include "trainer/store.h"

typedef struct {
    const char *state_dir;
    unsigned confirmations;   /* >= 1: a block counts once this many blocks (itself included) exist */
    long poll_ms;             /* between ticks */
    uint64_t from_block;      /* first block to read when there is no cursor yet */
    uint64_t log_range;       /* blocks per eth_getLogs range */
    uint32_t input_wait;      /* seconds to wait for missing inputs before ruling them unavailable */
    uint32_t deadline_margin; /* seconds before the verdict deadline that end any wait */
    int threads;              /* cpu backend threads for re-execution (0: default) */
    bool once;                /* process up to the current head and return */
    bool json;                /* one JSON object per log line */
    FILE *log;                /* where log lines go */
} arb_watch_opts;

void arb_watch_opts_default(arb_watch_opts *o);

/* Runs the watcher until *stop becomes non-zero (a signal handler sets it)
 * or, with once, until it has caught up with the head. A failed tick is
 * logged and retried; a node that does not answer is retried with a
 * doubling pause (at most 30 s, or poll_ms if longer). arb and m are bound
 * to the same node; m's account is the arbiter. Returns 0 on a clean stop,
 * or a negative code (a bad state dir, a state dir of another contract or
 * chain, or with once any failure). */
int arb_watch(const arb_watch_opts *o, const chain_arb *arb, chain_txm *m, trn_store *store,
              volatile int *stop) OVT_MUST_USE;

/* `ovt arbiter` (cli/main.c). */
int arb_cmd_arbiter(int argc, char **argv);

#endif
