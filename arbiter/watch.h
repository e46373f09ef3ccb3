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
 *   DIR/games/<runId>/game.json     one folder per run naming it in any seat:
 *                                   the events seen, when inputs were first
 *                                   missing, the accept, verdict, ballot and
 *                                   reveal transactions sent, and a
 *                                   committee's ballot with its salt (0600),
 *                                   written before its commitVerdict is sent
 *   DIR/games/<runId>/eval.json     the step's evaluation (so a restart does
 *                                   not re-execute it)
 *   DIR/games/<challengeId>/        the same for each open challenge of a run
 *                                   it follows (ChallengeOpened): a game of
 *                                   its own on the run's committee, its
 *                                   game.json naming the run ("challenge_of"),
 *                                   whose id its leaves are hashed with
 * Game state is written before the cursor, so a crash repeats work (safely:
 * every action is re-derived from the chain) and never skips an event. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arbiter/decide.h"
#include "arbiter/watch_opts.h"
#include "chain/arbitration.h"
#include "chain/txm.h"
#include "store/store.h"


void arb_watch_opts_default(arb_watch_opts *o);

/* The default confirmations for the node: 1 on an automining devnet (a node
 * that answers anvil_getAutomine or hardhat_getAutomine with true, or
 * ganache, whose default is to mine one block per transaction: there no block
 * comes until the next transaction, so the head itself must count), else 2
 * (a chain that makes blocks on a clock: act on blocks one deep). *why says
 * which. */
int arb_watch_confirmations(chain_rpc *rpc, unsigned *out, const char **why) OVT_MUST_USE;

/* The block in which the code at address appeared (binary search with
 * eth_getCode); OVT_ENOTFOUND when there is no code at the head. A node that
 * cannot answer for old blocks (not an archive node) fails: pass
 * --from-block then. */
int arb_deployment_block(chain_rpc *rpc, const chain_address *address, uint64_t *out) OVT_MUST_USE;

/* Runs the watcher until *stop becomes non-zero (a signal handler sets it)
 * or, with once, until it has caught up with the head. A failed tick is
 * logged and retried; a node that does not answer is retried with a
 * doubling pause (at most 30 s, or poll_ms if longer). arb and m are bound
 * to the same node; m's account is the arbiter. Returns 0 on a clean stop,
 * or a negative code (a bad state dir, a state dir of another contract or
 * chain, or with once any failure). */
int arb_watch(const arb_watch_opts *o, const chain_arb *arb, chain_txm *m, store_ctx *store,
              volatile int *stop) OVT_MUST_USE;


#endif
