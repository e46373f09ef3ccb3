/* The daemons' small HTTP server (see httpserve.h). */
#include "common/httpserve.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HTTP_MAX_REQUEST 8192
#define HTTP_REQUEST_MS 5000 /* a request must arrive whole within this */

struct ovt_httpserve {
    int listen_fd;
    int wake[2]; /* a byte on wake[1] stops the thread */
    int port;
    ovt_http_handler handler;
    void *ctx;
    pthread_t thread;
};

int ovt_http_addr_parse(const char *addr, char *host, size_t host_cap, char *port, size_t port_cap)
{
    const char *colon = strrchr(addr, ':');
    const char *h = "127.0.0.1", *p = addr;
    size_t hlen = strlen(h);
    if (colon) {
        h = addr;
        hlen = (size_t)(colon - addr);
        p = colon + 1;
        if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
            h++;
            hlen -= 2;
        }
    }
    size_t plen = strlen(p);
    int ok = plen > 0 && plen <= 5 && hlen > 0 && hlen < host_cap && plen < port_cap;
    for (size_t i = 0; ok && i < plen; i++)
        ok = p[i] >= '0' && p[i] <= '9';
    if (ok && atol(p) > 65535)
        ok = 0;
    if (!ok)
        return ovt_fail(OVT_EINVAL, "'%s' is not an address to listen on: give PORT (on 127.0.0.1) or HOST:PORT",
                        addr);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, p, plen + 1);
    return 0;
}

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void write_all(int fd, const char *p, size_t n)
{
    long deadline = now_ms() + HTTP_REQUEST_MS;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return;
        long left = deadline - now_ms();
        if (left <= 0)
            return;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        (void)poll(&pf, 1, (int)left);
    }
}

static void reply_simple(int fd, int status, const char *reason, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, strlen(body));
    write_all(fd, head, (size_t)n);
    write_all(fd, body, strlen(body));
}

static const char *reason_of(int status)
{
    switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

/* Reads one request from fd (non-blocking) and answers it. */
static void serve_one(struct ovt_httpserve *s, int fd, const int *wake_fd)
{
    char req[HTTP_MAX_REQUEST + 1];
    size_t len = 0;
    long deadline = now_ms() + HTTP_REQUEST_MS;
    for (;;) {
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
        if (len == HTTP_MAX_REQUEST) {
            reply_simple(fd, 431, "Request Header Fields Too Large", "request too large\n");
            return;
        }
        long left = deadline - now_ms();
        if (left <= 0)
            return;
        struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = *wake_fd, .events = POLLIN}};
        if (poll(pf, 2, (int)left) < 0 && errno != EINTR)
            return;
        if (pf[1].revents)
            return; /* stopping */
        if (!pf[0].revents)
            continue;
        ssize_t k = recv(fd, req + len, HTTP_MAX_REQUEST - len, MSG_DONTWAIT);
        if (k == 0)
            return;
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                continue;
            return;
        }
        len += (size_t)k;
    }
    char method[8], target[1024];
    if (sscanf(req, "%7s %1023s", method, target) != 2) {
        reply_simple(fd, 400, "Bad Request", "bad request\n");
        return;
    }
    int head_only = strcmp(method, "HEAD") == 0;
    if (!head_only && strcmp(method, "GET") != 0) {
        reply_simple(fd, 405, "Method Not Allowed", "only GET and HEAD\n");
        return;
    }
    char *q = strchr(target, '?');
    if (q)
        *q = '\0';
    ovt_http_reply r = {.status = 404, .content_type = "text/plain; charset=utf-8"};
    s->handler(s->ctx, target, &r);
    if (!r.body) {
        r.body = strdup(r.status == 404 ? "not found: try /metrics or /healthz\n" : "");
        r.body_len = r.body ? strlen(r.body) : 0;
    }
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
                     "Connection: close\r\n\r\n",
                     r.status, reason_of(r.status), r.content_type, r.body_len);
    write_all(fd, head, (size_t)n);
    if (!head_only && r.body)
        write_all(fd, r.body, r.body_len);
    free(r.body);
}

static void *serve(void *arg)
{
    struct ovt_httpserve *s = arg;
    for (;;) {
        struct pollfd pf[2] = {{.fd = s->listen_fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        if (!pf[0].revents)
            continue;
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        serve_one(s, fd, &s->wake[0]);
        close(fd);
    }
    return NULL;
}

int ovt_httpserve_start(ovt_httpserve **out, const char *addr, ovt_http_handler handler, void *ctx)
{
    *out = NULL;
    char host[256], port[8];
    int rv = ovt_http_addr_parse(addr, host, sizeof host, port, sizeof port);
    if (rv)
        return rv;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai)
        return ovt_fail(OVT_EINVAL, "cannot listen on %s: %s", addr, gai_strerror(gai));
    struct ovt_httpserve *s = calloc(1, sizeof *s);
    if (!s) {
        freeaddrinfo(ai);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    s->listen_fd = -1;
    s->wake[0] = s->wake[1] = -1;
    s->handler = handler;
    s->ctx = ctx;
    int err = 0;
    for (struct addrinfo *a = ai; a && s->listen_fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
            err = errno;
            close(fd);
            continue;
        }
        s->listen_fd = fd;
    }
    freeaddrinfo(ai);
    if (s->listen_fd < 0) {
        free(s);
        return ovt_fail(OVT_EIO, "cannot listen on %s: %s (another process on that port? pick another with "
                        "--metrics-addr)", addr, strerror(err));
    }
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (getsockname(s->listen_fd, (struct sockaddr *)&sa, &sl) == 0)
        s->port = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&sa)->sin_port);
    if (pipe2(s->wake, O_CLOEXEC) != 0) {
        rv = ovt_fail_errno(OVT_EIO, "pipe");
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, serve, s) != 0) {
        rv = ovt_fail(OVT_EIO, "cannot start the HTTP server thread");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    close(s->listen_fd);
    free(s);
    return rv;
}

int ovt_httpserve_port(const ovt_httpserve *s)
{
    return s->port;
}

void ovt_httpserve_stop(ovt_httpserve *s)
{
    if (!s)
        return;
    char b = 1;
    while (write(s->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
    close(s->wake[1]);
    close(s->listen_fd);
    free(s);
}
