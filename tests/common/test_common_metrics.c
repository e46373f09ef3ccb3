/* The daemons' metrics server (common/metrics.h, common/httpserve.h) on
 * 127.0.0.1, read with libcurl as Prometheus would: /metrics in the text
 * exposition format with the values the hooks set, /healthz 503 until a
 * loop iteration completes and 200 after, 404 elsewhere, HEAD without a
 * body; a client that connects and sends nothing does not keep the next
 * one from being answered; an address in use or malformed is a clear error. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "common/metrics.h"

struct body {
    char data[65536];
    size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    size_t k = size * n;
    if (k > sizeof b->data - 1 - b->len)
        k = sizeof b->data - 1 - b->len;
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return size * n;
}

/* GET (or HEAD) http://127.0.0.1:port/path; returns the status, 0 on failure. */
static long get(int port, const char *path, int head, struct body *b, char *ctype, size_t ctype_cap)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    memset(b, 0, sizeof *b);
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    if (head)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ctype)
            snprintf(ctype, ctype_cap, "%s", ct ? ct : "");
    }
    curl_easy_cleanup(c);
    return status;
}

static int has(const struct body *b, const char *needle)
{
    if (strstr(b->data, needle))
        return 1;
    fprintf(stderr, "body lacks '%s':\n%s\n", needle, b->data);
    return 0;
}

static void test_addr_parse(void)
{
    char host[64], port[8];
    CHECK(ovt_http_addr_parse("9100", host, sizeof host, port, sizeof port) == 0);
    CHECK(strcmp(host, "127.0.0.1") == 0 && strcmp(port, "9100") == 0);
    CHECK(ovt_http_addr_parse("0.0.0.0:9100", host, sizeof host, port, sizeof port) == 0);
    CHECK(strcmp(host, "0.0.0.0") == 0 && strcmp(port, "9100") == 0);
    CHECK(ovt_http_addr_parse("[::1]:80", host, sizeof host, port, sizeof port) == 0);
    CHECK(strcmp(host, "::1") == 0 && strcmp(port, "80") == 0);
    CHECK(ovt_http_addr_parse("abc", host, sizeof host, port, sizeof port) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "HOST:PORT") != NULL);
    CHECK(ovt_http_addr_parse("localhost:99999", host, sizeof host, port, sizeof port) == OVT_EINVAL);
    CHECK(ovt_http_addr_parse("localhost:", host, sizeof host, port, sizeof port) == OVT_EINVAL);
    CHECK(ovt_http_addr_parse(":80", host, sizeof host, port, sizeof port) == OVT_EINVAL);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CHECK_RUN(test_addr_parse());

    ovt_metrics_configure("arbiter", 60000);
    ovt_httpserve *srv = NULL;
    CHECK(ovt_metrics_serve(&srv, "127.0.0.1:0") == 0);
    if (!srv)
        return check_done();
    int port = ovt_httpserve_port(srv);
    CHECK(port > 0);

    /* the same port again: a clear error naming the address */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    ovt_httpserve *again = NULL;
    CHECK(ovt_metrics_serve(&again, addr) == OVT_EIO);
    CHECK(strstr(ovt_errmsg(), addr) != NULL && strstr(ovt_errmsg(), "--metrics-addr") != NULL);

    struct body b;
    char ctype[128];
    CHECK(get(port, "/healthz", 0, &b, NULL, 0) == 503);
    CHECK(has(&b, "starting"));
    ovt_metrics_tick(0);
    CHECK(get(port, "/healthz", 0, &b, NULL, 0) == 503);
    CHECK(has(&b, "failed"));
    ovt_metrics_tick(1);
    CHECK(get(port, "/healthz", 0, &b, NULL, 0) == 200);
    CHECK(has(&b, "ok"));

    /* nothing about the chain yet: no chain gauges, zero counters */
    CHECK(get(port, "/metrics", 0, &b, ctype, sizeof ctype) == 200);
    CHECK_MSG(strstr(ctype, "text/plain") && strstr(ctype, "version=0.0.4"), "%s", ctype);
    CHECK(has(&b, "ovt_info{role=\"arbiter\",version=\""));
    CHECK(strstr(b.data, "ovt_chain_head_block") == NULL);
    CHECK(has(&b, "\novt_transactions_sent_total 0\n"));
    CHECK(has(&b, "\novt_games_followed 0\n"));
    CHECK(strstr(b.data, "ovt_nearest_deadline_seconds") == NULL);
    CHECK(strstr(b.data, "ovt_seats_declined_total") == NULL); /* none declined yet */

    ovt_metrics_chain(42, 40, 1000);
    ovt_hash g1 = {{1}}, g2 = {{2}}, g3 = {{3}};
    uint64_t soon = (uint64_t)time(NULL) + 3600, later = soon + 7200;
    ovt_metrics_game(&g1, "bisecting", later, 0);
    ovt_metrics_game(&g2, "bisecting", soon, 0);
    ovt_metrics_game(&g3, "awaiting-verdict", 0, 0);
    ovt_metrics_game(&g3, "settled", 0, 1); /* the same game, moved on */
    ovt_metrics_add(OVT_METRIC_TX_SENT, 3);
    ovt_metrics_add(OVT_METRIC_TX_BUMPED, 1);
    ovt_metrics_add(OVT_METRIC_STORE_FETCH_BYTES, 12345);
    ovt_metrics_eval_seconds(1.5);
    ovt_metrics_seat_declined("uncommitted");
    ovt_metrics_seat_declined("bond");
    ovt_metrics_seat_declined("uncommitted");
    CHECK(get(port, "/metrics", 0, &b, NULL, 0) == 200);
    CHECK(has(&b, "# TYPE ovt_chain_head_block gauge\novt_chain_head_block 42\n"));
    CHECK(has(&b, "\novt_chain_read_block 40\n"));
    CHECK(has(&b, "\novt_chain_lag_blocks 2\n"));
    CHECK(has(&b, "\novt_games{phase=\"bisecting\"} 2\n"));
    CHECK(has(&b, "\novt_games{phase=\"settled\"} 1\n"));
    CHECK(strstr(b.data, "awaiting-verdict") == NULL);
    CHECK(has(&b, "\novt_games_followed 2\n"));
    CHECK(has(&b, "# TYPE ovt_transactions_sent_total counter\novt_transactions_sent_total 3\n"));
    CHECK(has(&b, "\novt_transactions_bumped_total 1\n"));
    CHECK(has(&b, "\novt_store_fetch_bytes_total 12345\n"));
    CHECK(has(&b, "\novt_last_step_evaluation_seconds 1.500000\n"));
    CHECK(has(&b, "# TYPE ovt_seats_declined_total counter\novt_seats_declined_total{reason=\"uncommitted\"} 2\n"));
    CHECK(has(&b, "\novt_seats_declined_total{reason=\"bond\"} 1\n"));
    const char *d = strstr(b.data, "\novt_nearest_deadline_seconds ");
    CHECK(d != NULL);
    if (d) {
        long secs = atol(d + strlen("\novt_nearest_deadline_seconds "));
        CHECK_MSG(secs > 3000 && secs <= 3600, "%ld", secs); /* the nearer game's, not the later one's */
    }
    /* every line is a comment or "name{labels} value" */
    int lines_ok = 1;
    for (char *line = b.data; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) {
            lines_ok = 0;
            break;
        }
        if (line[0] != '#') {
            char *sp = memchr(line, ' ', (size_t)(nl - line));
            lines_ok &= sp != NULL && sp > line && (line[0] == '_' || (line[0] >= 'a' && line[0] <= 'z'));
        }
        line = nl + 1;
    }
    CHECK(lines_ok);

    CHECK(get(port, "/nope", 0, &b, NULL, 0) == 404);
    CHECK(get(port, "/metrics?x=1", 0, &b, NULL, 0) == 200);
    CHECK(get(port, "/metrics", 1, &b, NULL, 0) == 200);
    CHECK(b.len == 0);

    /* a client that connects and says nothing is dropped; the next is answered */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(get(port, "/healthz", 0, &b, NULL, 0) == 200);
    if (fd >= 0)
        close(fd);

    ovt_httpserve_stop(srv);
    CHECK(get(port, "/healthz", 0, &b, NULL, 0) == 0); /* nothing listens after stop */
    curl_global_cleanup();
    return check_done();
}
