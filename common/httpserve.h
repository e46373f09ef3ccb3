#ifndef OVT_COMMON_HTTPSERVE_H
#define OVT_COMMON_HTTPSERVE_H

/* A very small HTTP/1.1 server for the daemons' /metrics and /healthz
 * (docs/arbiter.md, "Operating a watcher"): one thread, poll-based, one
 * connection at a time, GET and HEAD only, every reply closes the
 * connection. A request must arrive whole (headers within 8 KiB) within a
 * few seconds, or the connection is dropped: a slow or hostile client
 * cannot hold the thread. Nothing here touches the daemon's own state; the
 * handler renders from whatever it reads (common/metrics.h). */

#include <stddef.h>

#include "common/err.h"

typedef struct ovt_httpserve ovt_httpserve;

/* What the handler fills in for one GET of `path` (the query string
 * stripped): the status, the content type (a static string) and a malloc'd
 * body the server frees. */
typedef struct {
    int status;
    const char *content_type;
    char *body;
    size_t body_len;
} ovt_http_reply;

typedef void (*ovt_http_handler)(void *ctx, const char *path, ovt_http_reply *reply);

/* Parses "HOST:PORT", "[V6]:PORT" or a bare "PORT" (host 127.0.0.1) into
 * host and port strings. 0 or OVT_EINVAL with a message naming addr. */
int ovt_http_addr_parse(const char *addr, char *host, size_t host_cap, char *port, size_t port_cap) OVT_MUST_USE;

/* Binds addr (see ovt_http_addr_parse; port 0 picks a free one) and starts
 * the thread. Fails with OVT_EIO naming the address when it cannot bind
 * (in use, not a local address). */
int ovt_httpserve_start(ovt_httpserve **out, const char *addr, ovt_http_handler handler, void *ctx) OVT_MUST_USE;

/* The port it listens on (useful with port 0). */
int ovt_httpserve_port(const ovt_httpserve *s);

/* Stops the thread, closes the socket, frees s. NULL is fine. */
void ovt_httpserve_stop(ovt_httpserve *s);

#endif
