#ifndef OVT_TESTS_SUPPORT_HTTPD_H
#define OVT_TESTS_SUPPORT_HTTPD_H

/* A tiny HTTP/1.1 responder on 127.0.0.1 (free port) running in a thread,
 * for serving malformed or scripted JSON-RPC responses to a client under
 * test. One request per connection; the handler decides each reply. A
 * hostile store's replies (endless, trickling) go on until the client
 * hangs up or the server stops. */

#include <pthread.h>
#include <stddef.h>

typedef struct {
    int status;              /* HTTP status, default 200 */
    char body[65536];        /* response body (NUL-terminated) */
    size_t body_len;         /* 0: strlen(body) */
    long content_length;     /* >= 0: declared length (a larger one truncates); -1: body_len */
    int hang_ms;             /* sleep before answering */
    int close_silently;      /* close the connection without any reply */
    int endless;             /* after the headers, a chunked body of 64 KiB chunks that never ends */
    int trickle_ms;          /* > 0: declare content_length, then send one byte every trickle_ms */
} tsup_http_reply;

typedef void (*tsup_http_handler)(void *ctx, const char *request_body, tsup_http_reply *reply);

typedef struct {
    int listen_fd;
    int port;
    char url[64];
    tsup_http_handler handler;
    void *ctx;
    pthread_t thread;
    volatile int stopping;
    int requests;          /* requests received so far (read with __atomic_load_n) */
    char request_line[512]; /* of the request being answered (for the handler) */
} tsup_httpd;

int tsup_httpd_start(tsup_httpd *h, tsup_http_handler handler, void *ctx);
void tsup_httpd_stop(tsup_httpd *h);

#endif
