/* The JSON-RPC proxy (see rpcproxy.h). */
#include "support/rpcproxy.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sink {
    char *buf;
    size_t len, cap;
};

static size_t on_data(char *ptr, size_t size, size_t n, void *ud)
{
    struct sink *s = ud;
    size_t add = size * n;
    if (s->len + add >= s->cap)
        return 0; /* too large for httpd's reply: fail the transfer */
    memcpy(s->buf + s->len, ptr, add);
    s->len += add;
    s->buf[s->len] = '\0';
    return add;
}

/* POSTs body to the node; the answer goes into reply. */
static void forward(tsup_rpcproxy *p, const char *body, tsup_http_reply *reply)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct sink s = {reply->body, 0, sizeof reply->body};
    reply->body[0] = '\0';
    long code = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (c) {
        curl_easy_setopt(c, CURLOPT_URL, p->upstream);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
    }
    curl_slist_free_all(h);
    if (rc != CURLE_OK) {
        reply->status = 502;
        snprintf(reply->body, sizeof reply->body, "proxy: upstream failed: %s", curl_easy_strerror(rc));
        reply->body_len = 0;
        return;
    }
    reply->status = (int)code;
    reply->body_len = s.len;
}

static uint64_t quantity(const json_t *v, uint64_t dflt)
{
    const char *s = json_string_value(v);
    if (!s || strncmp(s, "0x", 2) != 0)
        return dflt;
    return strtoull(s + 2, NULL, 16);
}

static void handle(void *ctx, const char *body, tsup_http_reply *reply)
{
    tsup_rpcproxy *p = ctx;
    json_t *req = json_loads(body, 0, NULL);
    const char *method = json_string_value(json_object_get(req, "method"));
    method = method ? method : "";
    if (!strcmp(method, "eth_getLogs") && p->logs_cap) {
        json_t *f = json_array_get(json_object_get(req, "params"), 0);
        uint64_t from = quantity(json_object_get(f, "fromBlock"), 0), to = quantity(json_object_get(f, "toBlock"), 0);
        uint64_t width = to >= from ? to - from + 1 : 0;
        if (width > p->logs_cap) {
            __atomic_add_fetch(&p->logs_refused, 1, __ATOMIC_SEQ_CST);
            snprintf(reply->body, sizeof reply->body,
                     "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"error\":{\"code\":-32005,\"message\":\"query exceeds max "
                     "block range %llu\"}}",
                     (long long)json_integer_value(json_object_get(req, "id")), (unsigned long long)p->logs_cap);
            json_decref(req);
            return;
        }
        if (width > p->widest_logs_range)
            p->widest_logs_range = width;
    }
    forward(p, body, reply);
    if (!strcmp(method, "eth_sendRawTransaction")) {
        p->sends_forwarded++;
        if (p->lose_sends > 0) {
            p->lose_sends--;
            p->answers_lost++;
            switch (p->lose_mode) {
            case TSUP_LOSE_502:
                reply->status = 502;
                snprintf(reply->body, sizeof reply->body, "<html>502 Bad Gateway</html>");
                reply->body_len = 0;
                break;
            case TSUP_LOSE_HANG: reply->hang_ms = p->hang_ms; break;
            case TSUP_LOSE_RESET: reply->close_silently = 1; break;
            }
        }
    }
    json_decref(req);
}

int tsup_rpcproxy_start(tsup_rpcproxy *p, const char *upstream_url)
{
    memset(p, 0, sizeof *p);
    snprintf(p->upstream, sizeof p->upstream, "%s", upstream_url);
    p->hang_ms = 2000;
    return tsup_httpd_start(&p->httpd, handle, p);
}

void tsup_rpcproxy_stop(tsup_rpcproxy *p)
{
    tsup_httpd_stop(&p->httpd);
}
