/* ABI encoder/decoder (see abi.h). */
#include "chain/abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/keccak.h"

void chain_abi_selector(uint8_t out[4], const char *signature)
{
    ovt_hash h;
    chain_keccak256(&h, signature, strlen(signature));
    memcpy(out, h.b, 4);
}

void chain_abi_event_topic(ovt_hash *out, const char *signature)
{
    chain_keccak256(out, signature, strlen(signature));
}

void chain_abi_enc_init(chain_abi_enc *enc)
{
    memset(enc, 0, sizeof *enc);
}

void chain_abi_enc_free(chain_abi_enc *enc)
{
    chain_buf_free(&enc->head);
    chain_buf_free(&enc->tail);
    free(enc->dyn);
    memset(enc, 0, sizeof *enc);
}

void chain_abi_put_word(chain_abi_enc *enc, const uint8_t word[32])
{
    chain_buf_append(&enc->head, word, 32);
}

void chain_abi_put_uint(chain_abi_enc *enc, uint64_t v)
{
    chain_u256 w = chain_u256_from_u64(v);
    chain_abi_put_word(enc, w.b);
}

void chain_abi_put_u256(chain_abi_enc *enc, const chain_u256 *v)
{
    chain_abi_put_word(enc, v->b);
}

void chain_abi_put_int(chain_abi_enc *enc, int64_t v)
{
    uint8_t w[32];
    memset(w, v < 0 ? 0xff : 0, 24);
    ovt_put_be64(w + 24, (uint64_t)v);
    chain_abi_put_word(enc, w);
}

void chain_abi_put_address(chain_abi_enc *enc, const chain_address *a)
{
    uint8_t w[32] = {0};
    memcpy(w + 12, a->b, 20);
    chain_abi_put_word(enc, w);
}

void chain_abi_put_bool(chain_abi_enc *enc, int v)
{
    chain_abi_put_uint(enc, v ? 1 : 0);
}

void chain_abi_put_bytes32(chain_abi_enc *enc, const ovt_hash *h)
{
    chain_abi_put_word(enc, h->b);
}

/* Appends a head word holding the current tail offset (made absolute at
 * finish) and remembers its index. */
static void put_tail_offset(chain_abi_enc *enc)
{
    if (enc->ndyn == enc->capdyn) {
        size_t cap = enc->capdyn ? enc->capdyn * 2 : 4;
        size_t *p = realloc(enc->dyn, cap * sizeof *p);
        if (!p) {
            enc->failed = 1;
            return;
        }
        enc->dyn = p;
        enc->capdyn = cap;
    }
    enc->dyn[enc->ndyn++] = enc->head.len / 32;
    chain_abi_put_uint(enc, (uint64_t)enc->tail.len);
}

static void tail_put_uint(chain_abi_enc *enc, uint64_t v)
{
    chain_u256 w = chain_u256_from_u64(v);
    chain_buf_append(&enc->tail, w.b, 32);
}

void chain_abi_put_bytes(chain_abi_enc *enc, const void *data, size_t len)
{
    static const uint8_t zeros[32];
    put_tail_offset(enc);
    tail_put_uint(enc, len);
    chain_buf_append(&enc->tail, data, len);
    chain_buf_append(&enc->tail, zeros, (32 - len % 32) % 32);
}

void chain_abi_put_bytes32_array(chain_abi_enc *enc, const ovt_hash *items, size_t n)
{
    put_tail_offset(enc);
    tail_put_uint(enc, n);
    for (size_t i = 0; i < n; i++)
        chain_buf_append(&enc->tail, items[i].b, 32);
}

int chain_abi_enc_finish(chain_abi_enc *enc, chain_buf *out, const uint8_t *selector)
{
    if (enc->failed || enc->head.failed || enc->tail.failed)
        return ovt_fail(OVT_ENOMEM, "out of memory while ABI-encoding");
    uint64_t head_len = enc->head.len;
    for (size_t i = 0; i < enc->ndyn; i++) {
        uint8_t *w = enc->head.data + 32 * enc->dyn[i];
        uint64_t rel = 0;
        for (int k = 24; k < 32; k++)
            rel = rel << 8 | w[k];
        ovt_put_be64(w + 24, rel + head_len);
    }
    enc->ndyn = 0; /* offsets are absolute now: finishing twice must not add again */
    if (selector)
        chain_buf_append(out, selector, 4);
    chain_buf_append(out, enc->head.data, enc->head.len);
    chain_buf_append(out, enc->tail.data, enc->tail.len);
    return chain_buf_check(out);
}

void chain_abi_dec_init(chain_abi_dec *dec, const void *data, size_t len)
{
    dec->data = data;
    dec->len = len;
}

int chain_abi_get_word(const chain_abi_dec *dec, size_t index, uint8_t out[32])
{
    memset(out, 0, 32);
    if (index >= dec->len / 32)
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu is past the end of %zu bytes of data", index,
                        dec->len);
    memcpy(out, dec->data + 32 * index, 32);
    return 0;
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

int chain_abi_get_uint(const chain_abi_dec *dec, size_t index, uint64_t *out)
{
    chain_u256 w;
    *out = 0;
    int rc = chain_abi_get_u256(dec, index, &w);
    if (rc)
        return rc;
    if (chain_u256_to_u64(out, &w))
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu does not fit in uint64", index);
    return 0;
}

int chain_abi_get_u256(const chain_abi_dec *dec, size_t index, chain_u256 *out)
{
    return chain_abi_get_word(dec, index, out->b);
}

int chain_abi_get_int(const chain_abi_dec *dec, size_t index, int64_t *out)
{
    uint8_t w[32];
    *out = 0;
    int rc = chain_abi_get_word(dec, index, w);
    if (rc)
        return rc;
    uint8_t ext = (w[24] & 0x80) ? 0xff : 0x00;
    if (!all_bytes(w, 24, ext))
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu does not fit in int64", index);
    uint64_t v = 0;
    for (int k = 24; k < 32; k++)
        v = v << 8 | w[k];
    *out = (int64_t)v;
    return 0;
}

int chain_abi_get_address(const chain_abi_dec *dec, size_t index, chain_address *out)
{
    uint8_t w[32];
    memset(out, 0, sizeof *out);
    int rc = chain_abi_get_word(dec, index, w);
    if (rc)
        return rc;
    if (!all_bytes(w, 12, 0))
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu is not an address (high bytes set)", index);
    memcpy(out->b, w + 12, 20);
    return 0;
}

int chain_abi_get_bool(const chain_abi_dec *dec, size_t index, int *out)
{
    uint64_t v;
    *out = 0;
    int rc = chain_abi_get_uint(dec, index, &v);
    if (rc)
        return rc;
    if (v > 1)
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu is not a bool", index);
    *out = (int)v;
    return 0;
}

int chain_abi_get_bytes32(const chain_abi_dec *dec, size_t index, ovt_hash *out)
{
    return chain_abi_get_word(dec, index, out->b);
}

/* Follows the offset in head word `index` to a length word; returns the
 * position just after it and the length. */
static int get_dynamic(const chain_abi_dec *dec, size_t index, size_t *pos, uint64_t *count)
{
    uint64_t off;
    *pos = 0;
    *count = 0;
    int rc = chain_abi_get_uint(dec, index, &off);
    if (rc)
        return rc;
    if (off > dec->len || dec->len - off < 32)
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu has offset %llu outside %zu bytes of data",
                        index, (unsigned long long)off, dec->len);
    chain_abi_dec at;
    chain_abi_dec_init(&at, dec->data + off, 32);
    rc = chain_abi_get_uint(&at, 0, count);
    if (rc)
        return ovt_fail_wrap(rc, "ABI: length of argument %zu", index);
    *pos = (size_t)off + 32;
    return 0;
}

int chain_abi_get_bytes(const chain_abi_dec *dec, size_t index, const uint8_t **data, size_t *len)
{
    size_t pos;
    uint64_t n;
    *data = NULL;
    *len = 0;
    int rc = get_dynamic(dec, index, &pos, &n);
    if (rc)
        return rc;
    if (n > dec->len - pos)
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu claims %llu bytes, only %zu present", index,
                        (unsigned long long)n, dec->len - pos);
    *data = dec->data + pos;
    *len = (size_t)n;
    return 0;
}

int chain_abi_get_bytes32_array(const chain_abi_dec *dec, size_t index, const uint8_t **items, size_t *n)
{
    size_t pos;
    uint64_t count;
    *items = NULL;
    *n = 0;
    int rc = get_dynamic(dec, index, &pos, &count);
    if (rc)
        return rc;
    if (count > (dec->len - pos) / 32)
        return ovt_fail(OVT_EFORMAT, "ABI: argument %zu claims %llu words, only %zu bytes present",
                        index, (unsigned long long)count, dec->len - pos);
    *items = dec->data + pos;
    *n = (size_t)count;
    return 0;
}

void chain_log_free(chain_log *log)
{
    if (!log)
        return;
    free(log->data);
    memset(log, 0, sizeof *log);
}

void chain_logs_free(chain_log *logs, size_t n)
{
    if (!logs)
        return;
    for (size_t i = 0; i < n; i++)
        chain_log_free(&logs[i]);
    free(logs);
}

int chain_abi_decode_log(chain_abi_dec *dec, const chain_log *log, const char *signature, size_t nindexed)
{
    ovt_hash topic;
    chain_abi_dec_init(dec, NULL, 0);
    chain_abi_event_topic(&topic, signature);
    if (log->ntopics == 0 || memcmp(log->topics[0].b, topic.b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "log is not the event %s", signature);
    if (log->ntopics != nindexed + 1)
        return ovt_fail(OVT_EFORMAT, "event %s: %zu topics, expected %zu", signature, log->ntopics,
                        nindexed + 1);
    chain_abi_dec_init(dec, log->data, log->data_len);
    return 0;
}

/* Copies a reason text, replacing anything but printable ASCII with '?'. */
static void copy_printable(char *out, size_t cap, const uint8_t *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        out[k++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    out[k] = '\0';
}

static const char *panic_reason(uint64_t code)
{
    switch (code) {
    case 0x01: return "assertion failed";
    case 0x11: return "arithmetic overflow or underflow";
    case 0x12: return "division or modulo by zero";
    case 0x21: return "invalid enum value";
    case 0x22: return "invalid storage byte array";
    case 0x31: return "pop on an empty array";
    case 0x32: return "array index out of bounds";
    case 0x41: return "out of memory";
    case 0x51: return "call to an uninitialized function";
    default: return "unknown panic";
    }
}

void chain_abi_decode_revert(char *out, size_t cap, const uint8_t *data, size_t len,
                             const char *const *custom_errors)
{
    if (cap == 0)
        return;
    out[0] = '\0';
    if (len == 0) {
        snprintf(out, cap, "reverted without a reason");
        return;
    }
    if (len < 4) {
        snprintf(out, cap, "reverted with %zu bytes of malformed revert data", len);
        return;
    }
    uint8_t want[4];
    chain_abi_dec args;
    chain_abi_dec_init(&args, data + 4, len - 4);
    chain_abi_selector(want, "Error(string)");
    if (memcmp(data, want, 4) == 0) {
        const uint8_t *text;
        size_t n;
        if (chain_abi_get_bytes(&args, 0, &text, &n) != 0) {
            snprintf(out, cap, "reverted with a malformed Error(string)");
            return;
        }
        char reason[256];
        copy_printable(reason, sizeof reason, text, n);
        snprintf(out, cap, "reverted: %s", reason);
        return;
    }
    chain_abi_selector(want, "Panic(uint256)");
    if (memcmp(data, want, 4) == 0) {
        uint64_t code;
        if (chain_abi_get_uint(&args, 0, &code) != 0)
            snprintf(out, cap, "panicked with a malformed code");
        else
            snprintf(out, cap, "panicked: %s (0x%llx)", panic_reason(code), (unsigned long long)code);
        return;
    }
    const char *name = NULL;
    for (size_t i = 0; custom_errors && custom_errors[i]; i++) {
        chain_abi_selector(want, custom_errors[i]);
        if (memcmp(data, want, 4) == 0) {
            name = custom_errors[i];
            break;
        }
    }
    char sel[9];
    ovt_hex_encode(sel, data, 4);
    int n = name ? snprintf(out, cap, "reverted with custom error %s", name)
                 : snprintf(out, cap, "reverted with custom error 0x%s", sel);
    size_t k = n < 0 ? 0 : (size_t)n;
    /* Argument words, as hex, while they fit. */
    for (size_t w = 0; w < (len - 4) / 32 && k + 68 < cap; w++) {
        char hex[65];
        ovt_hex_encode(hex, data + 4 + 32 * w, 32);
        n = snprintf(out + k, cap - k, "%s0x%s", w == 0 ? " args " : ",", hex);
        k += n < 0 ? 0 : (size_t)n;
    }
}

void chain_abi_revert_name(char *out, size_t cap, const uint8_t *data, size_t len, const char *const *custom_errors)
{
    if (cap == 0)
        return;
    out[0] = '\0';
    if (len < 4 || !custom_errors)
        return;
    for (const char *const *e = custom_errors; *e; e++) {
        uint8_t selector[4];
        chain_abi_selector(selector, *e);
        if (memcmp(selector, data, 4) == 0) {
            size_t n = (size_t)(strchr(*e, '(') - *e);
            snprintf(out, cap, "%.*s", (int)n, *e);
            return;
        }
    }
}

int chain_abi_enc_call(chain_abi_enc *enc, chain_buf *out, const char *signature)
{
    uint8_t selector[4];
    chain_abi_selector(selector, signature);
    int rc = chain_abi_enc_finish(enc, out, selector);
    chain_abi_enc_free(enc);
    return rc;
}

int chain_abi_call_bytes32(chain_buf *out, const char *signature, const ovt_hash *arg)
{
    chain_abi_enc enc;
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, arg);
    return chain_abi_enc_call(&enc, out, signature);
}
