/* Typed eth_* helpers on top of chain_rpc_call (see rpc.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/keys.h"
#include "chain/rpc.h"

/* The text of a JSON string, or NULL if v is not a string or hides a NUL
 * byte (which would cut the C string short and pass a truncated value on). */
static const char *text(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    return strlen(s) == json_string_length(v) ? s : NULL;
}

static const char *str_field(const json_t *obj, const char *key)
{
    return text(json_is_object(obj) ? json_object_get(obj, key) : NULL);
}

int chain_json_u64(uint64_t *out, const json_t *obj, const char *key)
{
    *out = 0;
    const char *s = str_field(obj, key);
    if (!s)
        return ovt_fail(OVT_EFORMAT, "node response: field %s missing or not a string", key);
    int rc = chain_hexq_u64(out, s);
    return rc ? ovt_fail_wrap(rc, "node response: field %s", key) : 0;
}

static int fixed_hex(uint8_t *out, size_t len, const json_t *obj, const char *key)
{
    const char *s = str_field(obj, key);
    if (!s)
        return ovt_fail(OVT_EFORMAT, "node response: field %s missing or not a string", key);
    if (strncmp(s, "0x", 2) != 0 || ovt_hex_decode(out, len, s) != 0)
        return ovt_fail(OVT_EFORMAT, "node response: field %s is not 0x and %zu hex digits", key, 2 * len);
    return 0;
}

int chain_json_hash(ovt_hash *out, const json_t *obj, const char *key)
{
    return fixed_hex(out->b, 32, obj, key);
}

int chain_json_address(chain_address *out, const json_t *obj, const char *key)
{
    return fixed_hex(out->b, 20, obj, key);
}

/* Hex data of any even length ("0x" allowed) into a malloc'd buffer. */
static int json_data(uint8_t **out, size_t *len, const json_t *v, const char *what)
{
    *out = NULL;
    *len = 0;
    if (!text(v) || strncmp(text(v), "0x", 2) != 0)
        return ovt_fail(OVT_EFORMAT, "node response: %s is not a 0x hex string", what);
    int rc = ovt_hex_decode_alloc(out, len, text(v));
    return rc ? ovt_fail_wrap(rc, "node response: %s", what) : 0;
}

int chain_json_log(chain_log *out, const json_t *obj)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(obj))
        return ovt_fail(OVT_EFORMAT, "node response: a log is not an object");
    int rc;
    if ((rc = chain_json_address(&out->address, obj, "address")) ||
        (rc = chain_json_u64(&out->block_number, obj, "blockNumber")) ||
        (rc = chain_json_hash(&out->block_hash, obj, "blockHash")) ||
        (rc = chain_json_hash(&out->tx_hash, obj, "transactionHash")) ||
        (rc = chain_json_u64(&out->log_index, obj, "logIndex")))
        goto fail;
    json_t *topics = json_object_get(obj, "topics");
    if (!json_is_array(topics) || json_array_size(topics) > 4) {
        rc = ovt_fail(OVT_EFORMAT, "node response: log topics is not an array of at most 4");
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(topics); i++) {
        json_t *t = json_array_get(topics, i);
        if (!text(t) || strncmp(text(t), "0x", 2) != 0 ||
            ovt_hex_decode(out->topics[i].b, 32, text(t)) != 0) {
            rc = ovt_fail(OVT_EFORMAT, "node response: log topic %zu is not a 32-byte hex string", i);
            goto fail;
        }
    }
    out->ntopics = json_array_size(topics);
    if ((rc = json_data(&out->data, &out->data_len, json_object_get(obj, "data"), "log data")))
        goto fail;
    json_t *removed = json_object_get(obj, "removed");
    out->removed = json_is_true(removed);
    return 0;
fail:
    chain_log_free(out);
    return rc;
}

/* Calls a method whose result is a quantity. */
static int call_u64(chain_rpc *rpc, uint64_t *out, const char *method, json_t *params)
{
    json_t *res;
    *out = 0;
    int rc = chain_rpc_call(rpc, &res, method, params);
    if (rc)
        return rc;
    if (!text(res))
        rc = ovt_fail(OVT_EFORMAT, "%s: result is not a hex string", method);
    else if ((rc = chain_hexq_u64(out, text(res))) != 0)
        rc = ovt_fail_wrap(rc, "%s", method);
    json_decref(res);
    return rc;
}

static void address_hex(char out[43], const chain_address *a)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, a->b, 20);
}

static char *data_hex(const uint8_t *data, size_t len)
{
    char *s = malloc(2 * len + 3);
    if (!s)
        return NULL;
    s[0] = '0';
    s[1] = 'x';
    ovt_hex_encode(s + 2, data, len);
    return s;
}

int chain_rpc_chain_id(chain_rpc *rpc, uint64_t *out)
{
    return call_u64(rpc, out, "eth_chainId", NULL);
}

int chain_rpc_block_number(chain_rpc *rpc, uint64_t *out)
{
    return call_u64(rpc, out, "eth_blockNumber", NULL);
}

int chain_rpc_nonce(chain_rpc *rpc, uint64_t *out, const chain_address *addr, const char *block)
{
    char a[43];
    address_hex(a, addr);
    return call_u64(rpc, out, "eth_getTransactionCount", json_pack("[s, s]", a, block ? block : "latest"));
}

int chain_rpc_balance(chain_rpc *rpc, chain_u256 *out, const chain_address *addr, const char *block)
{
    char a[43];
    json_t *res;
    memset(out, 0, sizeof *out);
    address_hex(a, addr);
    int rc = chain_rpc_call(rpc, &res, "eth_getBalance", json_pack("[s, s]", a, block ? block : "latest"));
    if (rc)
        return rc;
    if (!text(res))
        rc = ovt_fail(OVT_EFORMAT, "eth_getBalance: result is not a hex string");
    else if ((rc = chain_hexq_u256(out, text(res))) != 0)
        rc = ovt_fail_wrap(rc, "eth_getBalance");
    json_decref(res);
    return rc;
}

int chain_rpc_max_priority_fee(chain_rpc *rpc, uint64_t *out)
{
    return call_u64(rpc, out, "eth_maxPriorityFeePerGas", NULL);
}

int chain_rpc_block_header(chain_rpc *rpc, chain_block_header *out, int *found, const char *block)
{
    memset(out, 0, sizeof *out);
    *found = 0;
    json_t *res;
    int rc = chain_rpc_call(rpc, &res, "eth_getBlockByNumber", json_pack("[s, b]", block ? block : "latest", 0));
    if (rc)
        return rc;
    if (json_is_null(res)) {
        json_decref(res);
        return 0;
    }
    if (!json_is_object(res)) {
        rc = ovt_fail(OVT_EFORMAT, "eth_getBlockByNumber: result is not an object");
    } else if ((rc = chain_json_u64(&out->number, res, "number")) || (rc = chain_json_hash(&out->hash, res, "hash")) ||
               (rc = chain_json_hash(&out->parent_hash, res, "parentHash")) ||
               (rc = chain_json_u64(&out->timestamp, res, "timestamp"))) {
        rc = ovt_fail_wrap(rc, "eth_getBlockByNumber");
    } else if (json_object_get(res, "baseFeePerGas") &&
               (rc = chain_json_u64(&out->base_fee, res, "baseFeePerGas")) != 0) {
        rc = ovt_fail_wrap(rc, "eth_getBlockByNumber");
    } else {
        out->has_base_fee = json_object_get(res, "baseFeePerGas") != NULL;
        *found = 1;
    }
    if (rc)
        memset(out, 0, sizeof *out);
    json_decref(res);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int chain_rpc_fee_history(chain_rpc *rpc, uint64_t *next_base_fee, uint64_t *priority_fee,
                          unsigned blocks, double percentile)
{
    *next_base_fee = 0;
    *priority_fee = 0;
    if (blocks == 0 || blocks > 1024)
        return ovt_fail(OVT_EINVAL, "eth_feeHistory: block count %u not in 1..1024", blocks);
    char count[24];
    snprintf(count, sizeof count, "0x%x", blocks);
    json_t *res;
    int rc = chain_rpc_call(rpc, &res, "eth_feeHistory", json_pack("[s, s, [f]]", count, "latest", percentile));
    if (rc)
        return rc;
    json_t *base = json_object_get(res, "baseFeePerGas");
    json_t *reward = json_object_get(res, "reward");
    uint64_t *rewards = NULL;
    size_t nrewards = 0;
    if (!json_is_array(base) || json_array_size(base) == 0) {
        rc = ovt_fail(OVT_EFORMAT, "eth_feeHistory: baseFeePerGas is not a non-empty array");
        goto done;
    }
    json_t *last = json_array_get(base, json_array_size(base) - 1);
    if (!text(last) || (rc = chain_hexq_u64(next_base_fee, text(last))) != 0) {
        rc = ovt_fail(OVT_EFORMAT, "eth_feeHistory: malformed baseFeePerGas");
        goto done;
    }
    if (json_is_array(reward) && json_array_size(reward) > 0) {
        nrewards = json_array_size(reward);
        rewards = calloc(nrewards, sizeof *rewards);
        if (!rewards) {
            rc = ovt_fail(OVT_ENOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < nrewards; i++) {
            json_t *row = json_array_get(reward, i);
            json_t *r0 = json_is_array(row) ? json_array_get(row, 0) : NULL;
            if (!text(r0) || chain_hexq_u64(&rewards[i], text(r0)) != 0) {
                rc = ovt_fail(OVT_EFORMAT, "eth_feeHistory: malformed reward row %zu", i);
                goto done;
            }
        }
        qsort(rewards, nrewards, sizeof *rewards, cmp_u64);
        *priority_fee = rewards[nrewards / 2];
    }
done:
    if (rc)
        *next_base_fee = 0;
    free(rewards);
    json_decref(res);
    return rc;
}

/* The call object shared by eth_call and eth_estimateGas. */
static json_t *call_object(const chain_call_msg *msg)
{
    json_t *o = json_object();
    char a[43], q[80];
    if (!o)
        return NULL;
    if (msg->from) {
        address_hex(a, msg->from);
        json_object_set_new(o, "from", json_string(a));
    }
    if (msg->to) {
        address_hex(a, msg->to);
        json_object_set_new(o, "to", json_string(a));
    }
    if (msg->value) {
        /* 0x + hex without leading zeros */
        char h[65];
        ovt_hex_encode(h, msg->value->b, 32);
        const char *p = h;
        while (*p == '0' && p[1])
            p++;
        snprintf(q, sizeof q, "0x%s", p);
        json_object_set_new(o, "value", json_string(q));
    }
    if (msg->gas) {
        snprintf(q, sizeof q, "0x%llx", (unsigned long long)msg->gas);
        json_object_set_new(o, "gas", json_string(q));
    }
    char *d = data_hex(msg->data, msg->data_len);
    if (!d) {
        json_decref(o);
        return NULL;
    }
    json_object_set_new(o, "input", json_string(d));
    free(d);
    return o;
}

int chain_rpc_eth_call(chain_rpc *rpc, chain_buf *out, const chain_call_msg *msg, const char *block)
{
    json_t *o = call_object(msg), *res;
    if (!o)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int rc = chain_rpc_call(rpc, &res, "eth_call", json_pack("[o, s]", o, block ? block : "latest"));
    if (rc)
        return rc;
    uint8_t *data;
    size_t len;
    rc = json_data(&data, &len, res, "eth_call result");
    if (rc == 0) {
        chain_buf_append(out, data, len);
        free(data);
        rc = chain_buf_check(out);
    }
    json_decref(res);
    return rc;
}

int chain_rpc_estimate_gas(chain_rpc *rpc, uint64_t *gas, const chain_call_msg *msg)
{
    json_t *o = call_object(msg);
    *gas = 0;
    if (!o)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    return call_u64(rpc, gas, "eth_estimateGas", json_pack("[o]", o));
}

int chain_rpc_send_raw(chain_rpc *rpc, ovt_hash *tx_hash, const uint8_t *raw, size_t len)
{
    memset(tx_hash, 0, sizeof *tx_hash);
    char *d = data_hex(raw, len);
    if (!d)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    json_t *res;
    int rc = chain_rpc_call(rpc, &res, "eth_sendRawTransaction", json_pack("[s]", d));
    free(d);
    if (rc)
        return rc;
    if (!text(res) || strncmp(text(res), "0x", 2) != 0 ||
        ovt_hex_decode(tx_hash->b, 32, text(res)) != 0)
        rc = ovt_fail(OVT_EFORMAT, "eth_sendRawTransaction: result is not a transaction hash");
    json_decref(res);
    return rc;
}

void chain_receipt_free(chain_receipt *r)
{
    if (!r)
        return;
    chain_logs_free(r->logs, r->nlogs);
    memset(r, 0, sizeof *r);
}

static int parse_logs(chain_log **logs, size_t *n, const json_t *arr)
{
    *logs = NULL;
    *n = 0;
    if (!json_is_array(arr))
        return ovt_fail(OVT_EFORMAT, "node response: logs is not an array");
    size_t count = json_array_size(arr);
    if (count == 0)
        return 0;
    chain_log *l = calloc(count, sizeof *l);
    if (!l)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu logs", count);
    for (size_t i = 0; i < count; i++) {
        int rc = chain_json_log(&l[i], json_array_get(arr, i));
        if (rc) {
            chain_logs_free(l, i);
            return ovt_fail_wrap(rc, "log %zu", i);
        }
    }
    *logs = l;
    *n = count;
    return 0;
}

int chain_rpc_receipt(chain_rpc *rpc, chain_receipt *out, int *found, const ovt_hash *tx_hash)
{
    memset(out, 0, sizeof *out);
    *found = 0;
    char h[67] = "0x";
    ovt_hex_encode(h + 2, tx_hash->b, 32);
    json_t *res;
    int rc = chain_rpc_call(rpc, &res, "eth_getTransactionReceipt", json_pack("[s]", h));
    if (rc)
        return rc;
    if (json_is_null(res)) {
        json_decref(res);
        return 0;
    }
    uint64_t status;
    json_t *ca = json_object_get(res, "contractAddress");
    if (!json_is_object(res)) {
        rc = ovt_fail(OVT_EFORMAT, "eth_getTransactionReceipt: result is not an object");
    } else if ((rc = chain_json_hash(&out->tx_hash, res, "transactionHash")) ||
               (rc = chain_json_hash(&out->block_hash, res, "blockHash")) ||
               (rc = chain_json_u64(&out->block_number, res, "blockNumber")) ||
               (rc = chain_json_u64(&status, res, "status")) ||
               (rc = chain_json_u64(&out->gas_used, res, "gasUsed")) ||
               (rc = chain_json_address(&out->from, res, "from"))) {
        rc = ovt_fail_wrap(rc, "eth_getTransactionReceipt");
    } else if (status > 1) {
        rc = ovt_fail(OVT_EFORMAT, "eth_getTransactionReceipt: status %llu is not 0 or 1",
                      (unsigned long long)status);
    } else if (ca && !json_is_null(ca) && (rc = chain_json_address(&out->contract_address, res, "contractAddress"))) {
        rc = ovt_fail_wrap(rc, "eth_getTransactionReceipt");
    } else if ((rc = parse_logs(&out->logs, &out->nlogs, json_object_get(res, "logs")))) {
        rc = ovt_fail_wrap(rc, "eth_getTransactionReceipt");
    } else {
        out->status = (int)status;
        out->has_contract_address = ca && !json_is_null(ca);
        if (chain_json_u64(&out->effective_gas_price, res, "effectiveGasPrice") != 0)
            out->effective_gas_price = 0; /* optional on older nodes */
        ovt_err_clear();
        *found = 1;
    }
    if (rc)
        chain_receipt_free(out);
    json_decref(res);
    return rc;
}

/* One eth_getLogs call over [from, to]; appends to *logs. */
static int get_logs_range(chain_rpc *rpc, chain_log **logs, size_t *n, size_t *cap, const chain_log_filter *f,
                          uint64_t from, uint64_t to)
{
    char q[24], a[43], t[67];
    json_t *filter = json_object();
    json_t *topics = json_array();
    if (!filter || !topics) {
        json_decref(filter);
        json_decref(topics);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    snprintf(q, sizeof q, "0x%llx", (unsigned long long)from);
    json_object_set_new(filter, "fromBlock", json_string(q));
    snprintf(q, sizeof q, "0x%llx", (unsigned long long)to);
    json_object_set_new(filter, "toBlock", json_string(q));
    if (f->address) {
        address_hex(a, f->address);
        json_object_set_new(filter, "address", json_string(a));
    }
    for (size_t i = 0; i < f->ntopics && i < 4; i++) {
        if (!f->topics[i]) {
            json_array_append_new(topics, json_null());
            continue;
        }
        t[0] = '0';
        t[1] = 'x';
        ovt_hex_encode(t + 2, f->topics[i]->b, 32);
        json_array_append_new(topics, json_string(t));
    }
    json_object_set_new(filter, "topics", topics);
    json_t *res;
    int rc = chain_rpc_call(rpc, &res, "eth_getLogs", json_pack("[o]", filter));
    if (rc)
        return rc;
    chain_log *got;
    size_t ngot;
    rc = parse_logs(&got, &ngot, res);
    json_decref(res);
    if (rc)
        return ovt_fail_wrap(rc, "eth_getLogs");
    if (*n + ngot > *cap) {
        size_t newcap = (*n + ngot) * 2;
        chain_log *p = realloc(*logs, newcap * sizeof *p);
        if (!p) {
            chain_logs_free(got, ngot);
            return ovt_fail(OVT_ENOMEM, "out of memory for logs");
        }
        *logs = p;
        *cap = newcap;
    }
    if (ngot)
        memcpy(*logs + *n, got, ngot * sizeof *got);
    *n += ngot;
    free(got);
    return 0;
}

int chain_rpc_get_logs(chain_rpc *rpc, chain_log **logs, size_t *n, const chain_log_filter *f)
{
    *logs = NULL;
    *n = 0;
    if (f->from_block > f->to_block)
        return ovt_fail(OVT_EINVAL, "eth_getLogs: fromBlock %llu is after toBlock %llu",
                        (unsigned long long)f->from_block, (unsigned long long)f->to_block);
    if (f->ntopics > 4)
        return ovt_fail(OVT_EINVAL, "eth_getLogs: at most 4 topics");
    uint64_t chunk = f->chunk ? f->chunk : 2000;
    size_t cap = 0;
    uint64_t cursor = f->from_block;
    for (;;) {
        uint64_t end = f->to_block - cursor < chunk - 1 ? f->to_block : cursor + chunk - 1;
        int rc = get_logs_range(rpc, logs, n, &cap, f, cursor, end);
        if (rc) {
            /* A node that refuses the range (an error object) gets a smaller one. */
            if (chain_rpc_last_error(rpc)->is_node_error && rc != OVT_EREVERT && chunk > 1) {
                chunk /= 2;
                continue;
            }
            chain_logs_free(*logs, *n);
            *logs = NULL;
            *n = 0;
            return ovt_fail_wrap(rc, "logs of blocks %llu..%llu", (unsigned long long)cursor,
                                 (unsigned long long)end);
        }
        if (end == f->to_block) {
            if (f->chunk_taken)
                *f->chunk_taken = chunk;
            return 0;
        }
        cursor = end + 1;
    }
}

int chain_rpc_poll_logs(chain_rpc *rpc, chain_log **logs, size_t *n, const chain_log_filter *f, uint64_t *cursor,
                        unsigned confirmations)
{
    *logs = NULL;
    *n = 0;
    uint64_t head;
    int rc = chain_rpc_block_number(rpc, &head);
    if (rc)
        return rc;
    uint64_t depth = confirmations ? confirmations - 1 : 0;
    if (head < depth || head - depth < *cursor)
        return 0;
    chain_log_filter range = *f;
    range.from_block = *cursor;
    range.to_block = head - depth;
    rc = chain_rpc_get_logs(rpc, logs, n, &range);
    if (rc == 0)
        *cursor = range.to_block + 1;
    return rc;
}
