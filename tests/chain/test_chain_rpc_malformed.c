/* The JSON-RPC client against a scripted HTTP responder on 127.0.0.1:
 * invalid JSON, wrong types, huge and odd numbers, truncated bodies, HTTP 500,
 * HTTP 429 retried (bounded), timeouts, error objects and revert data,
 * mismatched ids, oversize replies, malformed receipts and fee histories,
 * eth_getLogs ranges that the node refuses (halved), and API keys in the URL
 * kept out of messages. Plus recorded responses fed to the parser directly. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chain/rpc.h"
#include "check.h"
#include "support/anvil.h"
#include "support/httpd.h"

typedef struct {
    const char *result_json; /* served as "result" (raw JSON text) when body is NULL */
    const char *body;        /* served verbatim when set */
    int status;
    long content_length;
    int hang_ms;
    int fail_first;          /* this many requests get fail_status first */
    int fail_status;
    int max_log_range;       /* eth_getLogs: refuse larger ranges (0: off) */
    int refused;             /* eth_getLogs ranges refused */
    long long largest_range; /* largest range answered */
} script;

static void handler(void *ctx, const char *req, tsup_http_reply *r)
{
    script *s = ctx;
    json_error_t e;
    json_t *j = json_loads(req, 0, &e);
    long long id = json_integer_value(json_object_get(j, "id"));
    const char *method = json_string_value(json_object_get(j, "method"));
    if (s->fail_first > 0) {
        s->fail_first--;
        r->status = s->fail_status;
        snprintf(r->body, sizeof r->body, "slow down");
        json_decref(j);
        return;
    }
    r->hang_ms = s->hang_ms;
    if (method && strcmp(method, "eth_getLogs") == 0 && s->max_log_range) {
        json_t *f = json_array_get(json_object_get(j, "params"), 0);
        unsigned long long from = strtoull(json_string_value(json_object_get(f, "fromBlock")), NULL, 16);
        unsigned long long to = strtoull(json_string_value(json_object_get(f, "toBlock")), NULL, 16);
        if (to - from + 1 > (unsigned long long)s->max_log_range) {
            s->refused++;
            snprintf(r->body, sizeof r->body,
                     "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"error\":{\"code\":-32005,\"message\":\"query exceeds max "
                     "block range %d\"}}",
                     id, s->max_log_range);
        } else {
            if ((long long)(to - from + 1) > s->largest_range)
                s->largest_range = (long long)(to - from + 1);
            /* One log per block, its block number as the log index. */
            size_t k = (size_t)snprintf(r->body, sizeof r->body, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":[", id);
            for (unsigned long long b = from; b <= to; b++)
                k += (size_t)snprintf(r->body + k, sizeof r->body - k,
                                      "%s{\"address\":\"0x%040x\",\"topics\":[\"0x%064x\"],\"data\":\"0x\","
                                      "\"blockNumber\":\"0x%llx\",\"blockHash\":\"0x%064x\","
                                      "\"transactionHash\":\"0x%064x\",\"logIndex\":\"0x%llx\",\"removed\":false}",
                                      b == from ? "" : ",", 1, 2, b, 3, 4, b);
            snprintf(r->body + k, sizeof r->body - k, "]}");
        }
        json_decref(j);
        return;
    }
    if (s->body)
        snprintf(r->body, sizeof r->body, "%s", s->body);
    else
        snprintf(r->body, sizeof r->body, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":%s}", id,
                 s->result_json ? s->result_json : "null");
    if (s->status)
        r->status = s->status;
    r->content_length = s->content_length ? s->content_length : -1;
    json_decref(j);
}

static tsup_httpd srv;
static script sc;
static chain_rpc *rpc;

static void reset(void)
{
    memset(&sc, 0, sizeof sc);
    __atomic_store_n(&srv.requests, 0, __ATOMIC_SEQ_CST);
}

static int block_number(uint64_t *v)
{
    return chain_rpc_block_number(rpc, v);
}

static void test_quantities(void)
{
    uint64_t v;
    struct {
        const char *result;
        int code;
        const char *msg;
    } cases[] = {
        {"\"0x1a\"", 0, NULL},
        {"\"0x0\"", 0, NULL},
        {"\"0x000000000000000000001a\"", 0, NULL},
        {"\"0xffffffffffffffff\"", 0, NULL},
        {"\"0x10000000000000000\"", OVT_EFORMAT, "64 bits"},
        {"\"0x\"", OVT_EFORMAT, "empty"},
        {"\"1a\"", OVT_EFORMAT, "0x"},
        {"\"0x1g\"", OVT_EFORMAT, "not hex"},
        {"\"-0x1\"", OVT_EFORMAT, "0x"},
        {"\"0x 1\"", OVT_EFORMAT, "not hex"},
        {"26", OVT_EFORMAT, "not a hex string"},
        {"null", OVT_EFORMAT, "not a hex string"},
        {"{\"a\":1}", OVT_EFORMAT, "not a hex string"},
        {"1e400", OVT_EFORMAT, NULL},
        {"\"0x1\\u0000ff\"", OVT_EFORMAT, "not a hex string"}, /* a NUL must not cut the value short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reset();
        sc.result_json = cases[i].result;
        int rc = block_number(&v);
        CHECK_MSG(rc == cases[i].code, "case %s: rc %d %s", cases[i].result, rc, ovt_errmsg());
        if (cases[i].msg)
            CHECK_MSG(strstr(ovt_errmsg(), cases[i].msg) != NULL, "case %s: %s", cases[i].result, ovt_errmsg());
    }
    reset();
    sc.result_json = "\"0x1a\"";
    CHECK(block_number(&v) == 0 && v == 26);
    /* 256-bit balances: 64 digits fit, 65 do not. */
    chain_address a = {{0}};
    chain_u256 bal;
    sc.result_json = "\"0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\"";
    CHECK(chain_rpc_balance(rpc, &bal, &a, NULL) == 0 && bal.b[0] == 0xff && bal.b[31] == 0xff);
    sc.result_json = "\"0x1ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\"";
    CHECK(chain_rpc_balance(rpc, &bal, &a, NULL) == OVT_EFORMAT && strstr(ovt_errmsg(), "256 bits"));
}

static void test_bodies(void)
{
    uint64_t v;
    reset();
    sc.body = "{not json";
    CHECK(block_number(&v) == OVT_EFORMAT && strstr(ovt_errmsg(), "invalid JSON"));
    reset();
    sc.body = "";
    CHECK(block_number(&v) == OVT_EFORMAT);
    reset();
    sc.body = "[1,2]";
    CHECK(block_number(&v) == OVT_EFORMAT && strstr(ovt_errmsg(), "not a JSON object"));
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":999999,\"result\":\"0x1\"}";
    CHECK(block_number(&v) == OVT_EFORMAT && strstr(ovt_errmsg(), "id does not match"));
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1}";
    CHECK(block_number(&v) == OVT_EFORMAT);
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"boom\"}";
    CHECK(block_number(&v) == OVT_EFORMAT && strstr(ovt_errmsg(), "malformed error"));
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x1\",\"result\":\"0x2\"}";
    CHECK(block_number(&v) == OVT_EFORMAT); /* duplicate keys */
    /* Error objects: a plain node error and a revert with data. */
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"header not found\"}}";
    CHECK(block_number(&v) == OVT_ERPC && strstr(ovt_errmsg(), "header not found") &&
          strstr(ovt_errmsg(), "-32000"));
    CHECK(chain_rpc_last_error(rpc)->is_node_error && chain_rpc_last_error(rpc)->code == -32000);
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":3,\"message\":\"execution reverted: nope\","
              "\"data\":\"0x08c379a0000000000000000000000000000000000000000000000000000000000000002000000000"
              "00000000000000000000000000000000000000000000000000000004"
              "6e6f706500000000000000000000000000000000000000000000000000000000\"}}";
    chain_buf out;
    chain_buf_init(&out);
    chain_call_msg msg = {0};
    CHECK(chain_rpc_eth_call(rpc, &out, &msg, NULL) == OVT_EREVERT && strstr(ovt_errmsg(), "reverted: nope"));
    CHECK(chain_rpc_last_error(rpc)->data_len == 100);
    /* Revert data that is not hex is still a revert, described as such. */
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":3,\"message\":\"execution reverted\",\"data\":\"zz\"}}";
    CHECK(chain_rpc_eth_call(rpc, &out, &msg, NULL) == OVT_EREVERT && strstr(ovt_errmsg(), "without a reason"));
    /* eth_call returning a non-hex or odd-length result. */
    reset();
    sc.result_json = "\"0xabc\"";
    CHECK(chain_rpc_eth_call(rpc, &out, &msg, NULL) == OVT_EFORMAT);
    reset();
    sc.result_json = "42";
    CHECK(chain_rpc_eth_call(rpc, &out, &msg, NULL) == OVT_EFORMAT);
    chain_buf_free(&out);
}

static void test_http(void)
{
    uint64_t v;
    /* HTTP 500 with a text body. */
    reset();
    sc.status = 500;
    sc.body = "internal error";
    CHECK(block_number(&v) == OVT_ERPC && strstr(ovt_errmsg(), "HTTP 500") && strstr(ovt_errmsg(), "internal error"));
    CHECK(__atomic_load_n(&srv.requests, __ATOMIC_SEQ_CST) == 1); /* not retried */
    /* HTTP 500 carrying a JSON-RPC error: the node's words win. */
    reset();
    sc.status = 500;
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"db is down\"}}";
    CHECK(block_number(&v) == OVT_ERPC && strstr(ovt_errmsg(), "db is down"));
    /* HTTP 429 twice, then an answer: retried. */
    reset();
    sc.fail_first = 2;
    sc.fail_status = 429;
    sc.result_json = "\"0x7\"";
    CHECK(block_number(&v) == 0 && v == 7);
    CHECK_EQ_U64(__atomic_load_n(&srv.requests, __ATOMIC_SEQ_CST), 3);
    /* Always 429: bounded (max_retries 3 = 4 attempts), clear message. */
    reset();
    sc.fail_first = 1000;
    sc.fail_status = 429;
    CHECK(block_number(&v) == OVT_ERPC && strstr(ovt_errmsg(), "rate limited") && strstr(ovt_errmsg(), "4 attempts"));
    CHECK_EQ_U64(__atomic_load_n(&srv.requests, __ATOMIC_SEQ_CST), 4);
    /* A truncated body (declared 1000 bytes, sent fewer): retried, then an error. */
    reset();
    sc.result_json = "\"0x7\"";
    sc.content_length = 1000;
    CHECK(block_number(&v) == OVT_EIO && strstr(ovt_errmsg(), "truncated"));
    CHECK_EQ_U64(__atomic_load_n(&srv.requests, __ATOMIC_SEQ_CST), 4);
    /* A reply larger than the cap. */
    chain_rpc_opts o;
    chain_rpc_opts_default(&o);
    o.max_response = 64;
    chain_rpc *small;
    CHECK(chain_rpc_open(&small, srv.url, &o) == 0);
    reset();
    sc.result_json = "\"0x00000000000000000000000000000000000000000000000000000000000000000001\"";
    CHECK(chain_rpc_block_number(small, &v) == OVT_EFORMAT && strstr(ovt_errmsg(), "over 64 bytes"));
    chain_rpc_close(small);
    /* A node that hangs: the request timeout ends it (no retries here). */
    o.max_response = 1 << 20;
    o.timeout_ms = 300;
    o.max_retries = 0;
    CHECK(chain_rpc_open(&small, srv.url, &o) == 0);
    reset();
    sc.hang_ms = 1500;
    sc.result_json = "\"0x1\"";
    CHECK(chain_rpc_block_number(small, &v) == OVT_ETIMEOUT && strstr(ovt_errmsg(), "cannot reach node"));
    chain_rpc_close(small);
    /* API keys in the URL path never reach a message. */
    char url[128];
    snprintf(url, sizeof url, "%s/v3/SECRETAPIKEY?key=SECRETAPIKEY", srv.url);
    CHECK(chain_rpc_open(&small, url, NULL) == 0);
    reset();
    sc.status = 500;
    sc.body = "nope";
    CHECK(chain_rpc_block_number(small, &v) == OVT_ERPC);
    CHECK(strstr(ovt_errmsg(), "SECRETAPIKEY") == NULL && strstr(ovt_errmsg(), "127.0.0.1") != NULL);
    chain_rpc_close(small);
    /* Nothing listening at all. */
    int port = tsup_free_port();
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    o.max_retries = 2;
    o.backoff_ms = 10;
    CHECK(chain_rpc_open(&small, url, &o) == 0);
    int rc = chain_rpc_block_number(small, &v);
    CHECK(rc == OVT_ETIMEOUT && strstr(ovt_errmsg(), "3 attempts") && strstr(ovt_errmsg(), "cannot reach node"));
    chain_rpc_close(small);
    CHECK(chain_rpc_open(&small, "ftp://127.0.0.1/", NULL) == OVT_EINVAL);
}

static void test_receipts_and_fees(void)
{
    chain_receipt r;
    int found;
    ovt_hash h = {{0}};
    reset();
    sc.result_json = "null";
    CHECK(chain_rpc_receipt(rpc, &r, &found, &h) == 0 && !found);
    const char *good =
        "{\"transactionHash\":\"0x" "1111111111111111111111111111111111111111111111111111111111111111\","
        "\"blockHash\":\"0x2222222222222222222222222222222222222222222222222222222222222222\","
        "\"blockNumber\":\"0x5\",\"status\":\"0x1\",\"gasUsed\":\"0x5208\","
        "\"from\":\"0x3333333333333333333333333333333333333333\",\"contractAddress\":null,\"logs\":[]}";
    reset();
    sc.result_json = good;
    CHECK(chain_rpc_receipt(rpc, &r, &found, &h) == 0 && found && r.block_number == 5 && r.gas_used == 21000);
    chain_receipt_free(&r);
    struct {
        const char *from, *to;
    } bad[] = {
        {"\"status\":\"0x1\"", "\"status\":\"0x2\""},
        {"\"status\":\"0x1\"", "\"status\":1"},
        {"\"logs\":[]", "\"logs\":{}"},
        {"\"logs\":[]", "\"logs\":[{\"address\":\"0x12\"}]"},
        {"\"blockNumber\":\"0x5\",", ""},
        {"\"from\":\"0x3333333333333333333333333333333333333333\"", "\"from\":\"0x33\""},
        {"\"contractAddress\":null", "\"contractAddress\":7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[2048];
        const char *at = strstr(good, bad[i].from);
        snprintf(body, sizeof body, "%.*s%s%s", (int)(at - good), good, bad[i].to, at + strlen(bad[i].from));
        reset();
        sc.result_json = body;
        int rc = chain_rpc_receipt(rpc, &r, &found, &h);
        CHECK_MSG(rc == OVT_EFORMAT && !found, "receipt case %zu accepted", i);
    }
    reset();
    sc.result_json = "\"0x1\"";
    CHECK(chain_rpc_receipt(rpc, &r, &found, &h) == OVT_EFORMAT);

    uint64_t base, tip;
    reset();
    sc.result_json = "{\"baseFeePerGas\":[\"0x10\",\"0x20\"],\"reward\":[[\"0x1\"],[\"0x3\"],[\"0x2\"]]}";
    CHECK(chain_rpc_fee_history(rpc, &base, &tip, 3, 50) == 0 && base == 0x20 && tip == 2);
    reset();
    sc.result_json = "{\"baseFeePerGas\":[]}";
    CHECK(chain_rpc_fee_history(rpc, &base, &tip, 3, 50) == OVT_EFORMAT);
    reset();
    sc.result_json = "{\"baseFeePerGas\":[\"0x10\"],\"reward\":[[7]]}";
    CHECK(chain_rpc_fee_history(rpc, &base, &tip, 3, 50) == OVT_EFORMAT);
    reset();
    sc.result_json = "{\"baseFeePerGas\":[\"0x10000000000000000\"]}";
    CHECK(chain_rpc_fee_history(rpc, &base, &tip, 3, 50) == OVT_EFORMAT);
    /* Block headers. */
    chain_block_header bh;
    const char *block =
        "{\"number\":\"0x2\",\"hash\":\"0x1111111111111111111111111111111111111111111111111111111111111111\","
        "\"parentHash\":\"0x2222222222222222222222222222222222222222222222222222222222222222\","
        "\"timestamp\":\"0x6553f100\"}";
    reset();
    sc.result_json = block;
    CHECK(chain_rpc_block_header(rpc, &bh, &found, NULL) == 0 && found && bh.number == 2 &&
          bh.timestamp == 0x6553f100 && bh.base_fee == 0);
    reset();
    sc.result_json = "{\"number\":\"0x2\",\"hash\":\"0x11\",\"parentHash\":\"0x22\",\"timestamp\":\"0x1\"}";
    CHECK(chain_rpc_block_header(rpc, &bh, &found, NULL) == OVT_EFORMAT && !found);
    reset();
    sc.result_json = "[]";
    CHECK(chain_rpc_block_header(rpc, &bh, &found, NULL) == OVT_EFORMAT);
    /* eth_sendRawTransaction must return a 32-byte hash. */
    reset();
    sc.result_json = "\"0x1234\"";
    uint8_t rawtx[1] = {0};
    CHECK(chain_rpc_send_raw(rpc, &h, rawtx, 1) == OVT_EFORMAT);
}

static void test_log_chunks(void)
{
    chain_log *logs;
    size_t n;
    chain_log_filter f = {0};
    f.from_block = 0;
    f.to_block = 20;
    f.chunk = 16;
    reset();
    sc.max_log_range = 3;
    int rc = chain_rpc_get_logs(rpc, &logs, &n, &f);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK_EQ_U64(n, 21);
    int in_order = 1;
    for (size_t i = 0; i < n; i++)
        in_order &= logs[i].block_number == i && logs[i].log_index == i;
    CHECK(in_order);
    CHECK(sc.refused >= 2 && sc.largest_range <= 3 && sc.largest_range >= 2);
    chain_logs_free(logs, n);
    /* A node that refuses even one block: a clear error naming the range. */
    reset();
    sc.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32005,\"message\":\"no\"}}";
    CHECK(chain_rpc_get_logs(rpc, &logs, &n, &f) == OVT_ERPC && strstr(ovt_errmsg(), "logs of blocks 0..0"));
    f.from_block = 5;
    f.to_block = 4;
    CHECK(chain_rpc_get_logs(rpc, &logs, &n, &f) == OVT_EINVAL);
}

/* Recorded responses straight into the parser (as the fuzzer does). */
static void test_parser_direct(void)
{
    json_t *res;
    chain_rpc_error err = {0};
    const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"0x7a69\"}";
    CHECK(chain_rpc_parse_response(&res, &err, ok, strlen(ok), 7, NULL) == 0 && json_is_string(res));
    json_decref(res);
    const char *anvil_revert =
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":3,\"message\":\"execution reverted: custom error "
        "0xdeadbeef\",\"data\":\"0xdeadbeef0000000000000000000000000000000000000000000000000000000000000005\"}}";
    const char *const errs[] = {"Boom(uint256)", NULL};
    CHECK(chain_rpc_parse_response(&res, &err, anvil_revert, strlen(anvil_revert), 3, errs) == OVT_EREVERT);
    CHECK(err.is_node_error && err.code == 3 && err.data_len == 36 && res == NULL);
    CHECK(strstr(ovt_errmsg(), "custom error 0xdeadbeef") != NULL);
    chain_rpc_error_clear(&err);
    CHECK(chain_rpc_parse_response(&res, NULL, ok, 10, 7, NULL) == OVT_EFORMAT); /* truncated */
}

int main(void)
{
    if (tsup_httpd_start(&srv, handler, &sc) != 0) {
        fprintf(stderr, "cannot start the HTTP responder\n");
        return 1;
    }
    chain_rpc_opts o;
    chain_rpc_opts_default(&o);
    o.backoff_ms = 10;
    o.timeout_ms = 5000;
    if (chain_rpc_open(&rpc, srv.url, &o) != 0)
        return 1;
    CHECK_RUN(test_quantities());
    CHECK_RUN(test_bodies());
    CHECK_RUN(test_http());
    CHECK_RUN(test_receipts_and_fees());
    CHECK_RUN(test_log_chunks());
    CHECK_RUN(test_parser_direct());
    chain_rpc_close(rpc);
    tsup_httpd_stop(&srv);
    return check_done();
}
