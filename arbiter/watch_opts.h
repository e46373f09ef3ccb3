#ifndef OVT_ARBITER_WATCH_OPTS_H
#define OVT_ARBITER_WATCH_OPTS_H

/* The watcher's options (arbiter/watch.h; arb_watch_opts_default there),
 * apart so the watcher's own parts can share them without a circle. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arbiter/decide.h"
#include "chain/types.h"

/* The most --known-party addresses. */
#define ARB_MAX_KNOWN 16

typedef struct {
    const char *state_dir;
    unsigned confirmations;   /* >= 1: a block counts once this many blocks (itself included) exist;
                                 0 (the default): arb_watch_confirmations decides */
    long poll_ms;             /* between ticks */
    uint64_t from_block;      /* first block to read when there is no cursor yet */
    bool has_from_block;      /* false (the default): the contract's deployment block, found with
                                 eth_getCode */
    uint64_t log_range;       /* blocks per eth_getLogs range */
    uint32_t input_wait;      /* seconds to wait for missing inputs before ruling them unavailable */
    uint32_t deadline_margin; /* seconds before the verdict deadline that end any wait */
    int threads;              /* cpu backend threads for re-execution (0: default) */
    chain_u256 max_arbiter_bond; /* the most wei accept() pays for a seat (default 1 ETH) */
    uint32_t max_commit_timeout; /* the longest commit window of a run it sits on (default 7 days) */
    chain_address known[ARB_MAX_KNOWN]; /* --known-party: trainers it sits for before they commit */
    size_t nknown;
    bool has_narrow;          /* --narrow: the OvtNarrow contract whose end state a tree-stateHash run's
                                 verdict follows (arbiter/narrow_eval.h) */
    chain_address narrow;
    arb_misbehave misbehave;  /* devnet fault injection (--misbehave); ARB_HONEST by default */
    bool once;                /* process up to the current head and return */
    bool json;                /* one JSON object per log line */
    FILE *log;                /* where log lines go */
} arb_watch_opts;

#endif
