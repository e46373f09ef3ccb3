/* The scripted HTTP responder (see httpd.h). */
#include "support/httpd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* Reads headers and a Content-Length body into a malloc'd string; the
 * request line ("GET /path HTTP/1.1") goes to line. */
static char *read_request(int fd, char *line, size_t line_cap)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    long want = -1;
    size_t header_end = 0;
    while (buf) {
        if (len == cap) {
            char *p = realloc(buf, 2 * cap + 1);
            if (!p)
                break;
            buf = p;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        if (!header_end) {
            char *end = strstr(buf, "\r\n\r\n");
            if (!end)
                continue;
            header_end = (size_t)(end - buf) + 4;
            size_t ll = strcspn(buf, "\r\n");
            snprintf(line, line_cap, "%.*s", (int)(ll < line_cap ? ll : line_cap - 1), buf);
            char *cl = strcasestr(buf, "content-length:");
            want = cl && cl < end ? strtol(cl + 15, NULL, 10) : 0;
        }
        if (header_end && len - header_end >= (size_t)want) {
            memmove(buf, buf + header_end, len - header_end);
            buf[len - header_end] = '\0';
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* An endless chunked body, or a trickle of one byte at a time, until the
 * client hangs up (send fails) or the server stops. */
static void stream(tsup_httpd *h, int fd, const tsup_http_reply *r)
{
    char head[256];
    int n = r->endless ? snprintf(head, sizeof head,
                                  "HTTP/1.1 200 X\r\nContent-Type: application/octet-stream\r\n"
                                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
                       : snprintf(head, sizeof head,
                                  "HTTP/1.1 200 X\r\nContent-Type: application/octet-stream\r\n"
                                  "Content-Length: %ld\r\nConnection: close\r\n\r\n",
                                  r->content_length > 0 ? r->content_length : 1000000000L);
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n)
        return;
    static char chunk[65536 + 16];
    if (r->endless) {
        int k = snprintf(chunk, sizeof chunk, "10000\r\n");
        memset(chunk + k, 'x', 65536);
        memcpy(chunk + k + 65536, "\r\n", 2);
        while (!h->stopping && send(fd, chunk, (size_t)k + 65538, MSG_NOSIGNAL) > 0) {
        }
        return;
    }
    while (!h->stopping && send(fd, "x", 1, MSG_NOSIGNAL) == 1)
        usleep((useconds_t)r->trickle_ms * 1000);
}

static void *serve(void *arg)
{
    tsup_httpd *h = arg;
    while (!h->stopping) {
        int fd = accept(h->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        if (h->stopping) {
            close(fd);
            break;
        }
        char *req = read_request(fd, h->request_line, sizeof h->request_line);
        tsup_http_reply *r = calloc(1, sizeof *r);
        /* Counted before replying, so a client that has its answer sees the count. */
        __atomic_add_fetch(&h->requests, 1, __ATOMIC_SEQ_CST);
        if (req && r) {
            r->status = 200;
            r->content_length = -1;
            h->handler(h->ctx, req, r);
            if (r->hang_ms)
                usleep((useconds_t)r->hang_ms * 1000);
            if (r->endless || r->trickle_ms > 0) {
                stream(h, fd, r);
            } else if (!r->close_silently) {
                size_t blen = r->body_len ? r->body_len : strlen(r->body);
                long declared = r->content_length >= 0 ? r->content_length : (long)blen;
                char head[256];
                int n = snprintf(head, sizeof head,
                                 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %ld\r\n"
                                 "Connection: close\r\n\r\n",
                                 r->status, declared);
                /* MSG_NOSIGNAL: a client that gave up must not kill the test with SIGPIPE. */
                if (send(fd, head, (size_t)n, MSG_NOSIGNAL) == n && blen)
                    (void)!send(fd, r->body, blen, MSG_NOSIGNAL);
            }
        }
        free(r);
        free(req);
        close(fd);
    }
    return NULL;
}

int tsup_httpd_start(tsup_httpd *h, tsup_http_handler handler, void *ctx)
{
    memset(h, 0, sizeof *h);
    h->handler = handler;
    h->ctx = ctx;
    h->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (h->listen_fd < 0)
        return -1;
    int one = 1;
    setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (bind(h->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(h->listen_fd, 16) != 0 ||
        getsockname(h->listen_fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(h->listen_fd);
        return -1;
    }
    h->port = ntohs(sa.sin_port);
    snprintf(h->url, sizeof h->url, "http://127.0.0.1:%d", h->port);
    if (pthread_create(&h->thread, NULL, serve, h) != 0) {
        close(h->listen_fd);
        return -1;
    }
    return 0;
}

void tsup_httpd_stop(tsup_httpd *h)
{
    h->stopping = 1;
    shutdown(h->listen_fd, SHUT_RDWR);
    close(h->listen_fd);
    pthread_join(h->thread, NULL);
}
