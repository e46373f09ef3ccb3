#ifndef OVT_ARBITER_DAEMON_H
#define OVT_ARBITER_DAEMON_H

/* `ovt arbiter watch` as a daemon: the watcher (arb_watch, arbiter/watch.h)
 * with what it runs among: SIGINT/SIGTERM, which stop it between ticks and
 * end a fetch at once; the /metrics and /healthz server (docs/arbiter.md,
 * "Operating a watcher"); the arbiter's session; the confirmations the node
 * calls for; and the artifact store with its blob cap. */

#include <stddef.h>

#include "arbiter/watch.h"
#include "chain/session.h"

typedef struct {
    arb_watch_opts watch;            /* confirmations 0: arb_watch_confirmations decides */
    const chain_session_args *chain; /* the node, the contract and the arbiter's key */
    const char *store_url;
    size_t max_blob;                 /* the largest object fetched (store_set_max_blob) */
    const char *metrics_addr;        /* serve /metrics, /healthz and /status there (NULL: off) */
} arb_daemon_opts;

/* Runs until a stop signal (0) or, with watch.once, until it has caught up
 * with the head; a negative code when it could not start or, with once,
 * failed (arb_watch). */
int arb_daemon_run(const arb_daemon_opts *o) OVT_MUST_USE;

#endif
