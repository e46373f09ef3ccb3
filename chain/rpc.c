/* JSON-RPC transport and response parsing (see rpc.h). The typed helpers
 * live in rpc_eth.c. */
#include "chain/rpc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "chain/clock.h"
#include "common/metrics.h"

struct chain_rpc {
    CURL *curl;
    struct curl_slist *headers;
    char *url;
    char where[128]; /* scheme://host:port, safe to print */
    chain_rpc_opts opts;
    long long next_id;
    chain_rpc_error last;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void chain_rpc_opts_default(chain_rpc_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->timeout_ms = 15000;
    opts->connect_timeout_ms = 3000;
    opts->max_retries = 3;
    opts->backoff_ms = 100;
    opts->backoff_max_ms = 2000;
    opts->max_response = 64u << 20;
}

/* scheme://host[:port] of url, without path, query or credentials. */
static void redact_url(char *out, size_t cap, const char *url)
{
    const char *p = strstr(url, "://");
    const char *host = p ? p + 3 : url;
    const char *at = strpbrk(host, "@/?#");
    if (at && *at == '@')
        host = at + 1;
    size_t n = strcspn(host, "/?#");
    snprintf(out, cap, "%.*s%.*s", p ? (int)(p + 3 - url) : 0, url, (int)n, host);
}

int chain_rpc_open(chain_rpc **out, const char *url, const chain_rpc_opts *opts)
{
    *out = NULL;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return ovt_fail(OVT_EINVAL, "RPC URL must start with http:// or https://");
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return ovt_fail(OVT_EIO, "libcurl initialisation failed");
    chain_rpc *rpc = calloc(1, sizeof *rpc);
    if (!rpc)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    if (opts)
        rpc->opts = *opts;
    else
        chain_rpc_opts_default(&rpc->opts);
    rpc->url = strdup(url);
    rpc->curl = curl_easy_init();
    rpc->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (!rpc->url || !rpc->curl || !rpc->headers) {
        chain_rpc_close(rpc);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    redact_url(rpc->where, sizeof rpc->where, url);
    rpc->next_id = 1;
    *out = rpc;
    return 0;
}

void chain_rpc_error_clear(chain_rpc_error *err)
{
    free(err->data);
    memset(err, 0, sizeof *err);
}

void chain_rpc_close(chain_rpc *rpc)
{
    if (!rpc)
        return;
    if (rpc->curl)
        curl_easy_cleanup(rpc->curl);
    curl_slist_free_all(rpc->headers);
    free(rpc->url);
    chain_rpc_error_clear(&rpc->last);
    free(rpc);
}

const chain_rpc_error *chain_rpc_last_error(const chain_rpc *rpc)
{
    return &rpc->last;
}

typedef struct {
    char *data;
    size_t len, cap, max;
    int too_big;
} body_buf;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    body_buf *b = userdata;
    size_t n = size * nmemb;
    if (n > b->max - b->len) {
        b->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (b->cap - b->len < n + 1) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* Printable, shortened copy of a body for error messages. */
static void snippet(char *out, size_t cap, const char *s, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 4 < cap; i++)
        out[k++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '.';
    if (len > 0 && k + 4 >= cap)
        memcpy(out + k, "...", 3), k += 3;
    out[k] = '\0';
}

int chain_hexq_u64(uint64_t *out, const char *s)
{
    chain_u256 v;
    *out = 0;
    int rc = chain_hexq_u256(&v, s);
    if (rc)
        return rc;
    if (chain_u256_to_u64(out, &v) != 0)
        return ovt_fail(OVT_EFORMAT, "quantity %.80s does not fit in 64 bits", s);
    return 0;
}

int chain_hexq_u256(chain_u256 *out, const char *s)
{
    memset(out, 0, sizeof *out);
    if (strncmp(s, "0x", 2) != 0)
        return ovt_fail(OVT_EFORMAT, "quantity '%.80s' does not start with 0x", s);
    const char *d = s + 2;
    size_t n = strlen(d);
    if (n == 0)
        return ovt_fail(OVT_EFORMAT, "empty quantity '0x'");
    while (n > 1 && *d == '0')
        d++, n--;
    if (n > 64)
        return ovt_fail(OVT_EFORMAT, "quantity %.80s... does not fit in 256 bits", s);
    for (size_t i = 0; i < n; i++) {
        char c = d[n - 1 - i];
        int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (v < 0) {
            memset(out, 0, sizeof *out);
            return ovt_fail(OVT_EFORMAT, "quantity '%.80s' is not hex", s);
        }
        out->b[31 - i / 2] |= (uint8_t)(i % 2 ? v << 4 : v);
    }
    return 0;
}

/* Fills err from a JSON-RPC error object and records the message. */
static int node_error(chain_rpc_error *err, const json_t *error, const char *const *custom_errors)
{
    json_t *code = json_object_get(error, "code");
    json_t *msg = json_object_get(error, "message");
    json_t *data = json_object_get(error, "data");
    long long c = json_is_integer(code) ? (long long)json_integer_value(code) : 0;
    const char *m = json_is_string(msg) ? json_string_value(msg) : "(no message)";
    chain_rpc_error local;
    memset(&local, 0, sizeof local);
    if (!err)
        err = &local;
    chain_rpc_error_clear(err);
    err->is_node_error = 1;
    err->code = c;
    snippet(err->message, sizeof err->message, m, strlen(m));
    /* Revert data: a hex string in data (anvil, geth) or data.data (some providers). */
    if (json_is_object(data))
        data = json_object_get(data, "data");
    int reverted = c == 3 || strstr(m, "revert") != NULL;
    if (json_is_string(data) && strlen(json_string_value(data)) == json_string_length(data) &&
        ovt_hex_decode_alloc(&err->data, &err->data_len, json_string_value(data)) != 0) {
        err->data = NULL;
        err->data_len = 0;
    }
    int rc;
    if (reverted) {
        char reason[512];
        chain_abi_decode_revert(reason, sizeof reason, err->data, err->data_len, custom_errors);
        rc = ovt_fail(OVT_EREVERT, "execution reverted (node error %lld): %s", c, reason);
    } else {
        rc = ovt_fail(OVT_ERPC, "node error %lld: %s", c, err->message);
    }
    if (err == &local)
        chain_rpc_error_clear(&local);
    return rc;
}

int chain_rpc_parse_response(json_t **result, chain_rpc_error *err, const char *body, size_t len,
                             long long id, const char *const *custom_errors)
{
    *result = NULL;
    if (err)
        chain_rpc_error_clear(err);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        char s[80];
        snippet(s, sizeof s, body, len);
        return ovt_fail(OVT_EFORMAT, "node sent invalid JSON (%s at byte %d): %s", jerr.text, jerr.position, s);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = ovt_fail(OVT_EFORMAT, "node response is not a JSON object");
        goto done;
    }
    json_t *jid = json_object_get(root, "id");
    json_t *error = json_object_get(root, "error");
    json_t *res = json_object_get(root, "result");
    if (error && !json_is_null(error)) {
        if (!json_is_object(error)) {
            rc = ovt_fail(OVT_EFORMAT, "node response has a malformed error member");
            goto done;
        }
        rc = node_error(err, error, custom_errors);
        goto done;
    }
    if (!json_is_integer(jid) || json_integer_value(jid) != id) {
        rc = ovt_fail(OVT_EFORMAT, "node response id does not match the request id %lld", id);
        goto done;
    }
    if (!res) {
        rc = ovt_fail(OVT_EFORMAT, "node response has neither result nor error");
        goto done;
    }
    *result = json_incref(res);
done:
    json_decref(root);
    return rc;
}

/* One HTTP exchange. Returns 0 with the body, or a negative code; *retry is
 * set when the failure is worth retrying. */
static int http_post(chain_rpc *rpc, body_buf *b, long *status, const char *req, int *retry)
{
    *retry = 0;
    *status = 0;
    CURL *c = rpc->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, rpc->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, rpc->headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, rpc->opts.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, rpc->opts.connect_timeout_ms);
    /* Signals stay allowed: libcurl then ignores SIGPIPE during the transfer
     * (a node closing a TLS connection must not kill the process), and with
     * its threaded resolver it never uses alarm() for DNS timeouts. */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    CURLcode cc = curl_easy_perform(c);
    if (b->too_big)
        return ovt_fail(OVT_EFORMAT, "node %s sent a response over %zu bytes", rpc->where, rpc->opts.max_response);
    if (cc != CURLE_OK) {
        *retry = cc != CURLE_URL_MALFORMAT && cc != CURLE_UNSUPPORTED_PROTOCOL && cc != CURLE_WRITE_ERROR;
        int code = (cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_COULDNT_CONNECT) ? OVT_ETIMEOUT : OVT_EIO;
        const char *what = cc == CURLE_PARTIAL_FILE ? "response truncated" : curl_easy_strerror(cc);
        return ovt_fail(code, "cannot reach node %s: %s", rpc->where, what);
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (*status == 429 || *status == 502 || *status == 503 || *status == 504) {
        *retry = 1; /* rate limits and gateways in front of a restarting node */
        return ovt_fail(OVT_ERPC, "node %s answered HTTP %ld (%s)", rpc->where, *status,
                        *status == 429 ? "rate limited" : "unavailable");
    }
    return 0;
}

int chain_rpc_call(chain_rpc *rpc, json_t **result, const char *method, json_t *params)
{
    *result = NULL;
    chain_rpc_error_clear(&rpc->last);
    if (!params)
        params = json_array();
    long long id = rpc->next_id++;
    json_t *reqj = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method,
                             "params", params);
    char *req = reqj ? json_dumps(reqj, JSON_COMPACT) : NULL;
    json_decref(reqj);
    if (!req)
        return ovt_fail(OVT_ENOMEM, "cannot build the %s request", method);
    int rc = 0, attempts = 0;
    long wait = rpc->opts.backoff_ms;
    body_buf b;
    for (;;) {
        memset(&b, 0, sizeof b);
        b.max = rpc->opts.max_response;
        long status;
        int retry;
        attempts++;
        rc = http_post(rpc, &b, &status, req, &retry);
        if (rc || status != 200)
            ovt_metrics_add(OVT_METRIC_NODE_ERRORS, 1);
        if (rc == 0) {
            if (status != 200) {
                /* Some nodes put a JSON-RPC error in a non-200 reply: prefer it. */
                json_t *ignored = NULL;
                int prc = b.len ? chain_rpc_parse_response(&ignored, &rpc->last, b.data, b.len, id,
                                                           rpc->opts.custom_errors)
                                : OVT_EFORMAT;
                json_decref(ignored);
                if (!rpc->last.is_node_error) {
                    char s[120];
                    snippet(s, sizeof s, b.data ? b.data : "", b.len);
                    rc = ovt_fail(OVT_ERPC, "node %s answered HTTP %ld: %s", rpc->where, status, s);
                } else {
                    rc = prc;
                }
            } else {
                rc = chain_rpc_parse_response(result, &rpc->last, b.data ? b.data : "", b.len, id,
                                              rpc->opts.custom_errors);
            }
            free(b.data);
            break;
        }
        free(b.data);
        if (!retry || attempts > rpc->opts.max_retries)
            break;
        chain_sleep_ms(wait);
        wait = wait * 2 > rpc->opts.backoff_max_ms ? rpc->opts.backoff_max_ms : wait * 2;
    }
    free(req);
    if (rc && attempts > 1)
        ovt_fail_wrap(rc, "%s failed after %d attempts", method, attempts);
    else if (rc)
        ovt_fail_wrap(rc, "%s", method);
    return rc;
}
