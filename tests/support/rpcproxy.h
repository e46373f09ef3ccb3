#ifndef OVT_TESTS_SUPPORT_RPCPROXY_H
#define OVT_TESTS_SUPPORT_RPCPROXY_H

/* A JSON-RPC proxy in front of a real node (tests/support/httpd.c for the
 * listening side, libcurl to the node), for what a provider or a flaky
 * network does to a client:
 *   losing the answer to eth_sendRawTransaction: the request reaches the node
 *   (so the transaction is in its pool, or mined on an automining node), but
 *   the client gets HTTP 502, no answer before its timeout, or a connection
 *   closed without a reply;
 *   capping eth_getLogs: a range of more than logs_cap blocks is answered with
 *   the error object providers use ("query exceeds max block range").
 * Everything else is passed through unchanged. Answers are limited to
 * httpd's 64 KiB. */

#include <stdint.h>

#include "support/httpd.h"

typedef enum { TSUP_LOSE_502 = 1, TSUP_LOSE_HANG, TSUP_LOSE_RESET } tsup_lose_mode;

typedef struct {
    tsup_httpd httpd;
    char upstream[128];
    /* set by the test between calls */
    int lose_sends;         /* this many next eth_sendRawTransaction answers are lost */
    tsup_lose_mode lose_mode;
    int hang_ms;            /* TSUP_LOSE_HANG: how long to hold the answer back */
    uint64_t logs_cap;      /* 0: no cap */
    /* counted by the proxy */
    int sends_forwarded;
    int answers_lost;
    int logs_refused;
    uint64_t widest_logs_range; /* of the eth_getLogs calls passed through */
} tsup_rpcproxy;

/* 0, or -1 with a message on stderr. The URL to give the client is
 * p->httpd.url. */
int tsup_rpcproxy_start(tsup_rpcproxy *p, const char *upstream_url);
void tsup_rpcproxy_stop(tsup_rpcproxy *p);

#endif
