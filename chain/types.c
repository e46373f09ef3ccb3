/* chain_u256 arithmetic that the client needs (conversions only) and the
 * growable buffer the encoders share. */
#include "chain/types.h"

#include <stdlib.h>
#include <string.h>

chain_u256 chain_u256_from_u64(uint64_t v)
{
    chain_u256 out;
    memset(&out, 0, sizeof out);
    ovt_put_be64(out.b + 24, v);
    return out;
}

int chain_u256_to_u64(uint64_t *out, const chain_u256 *v)
{
    *out = 0;
    for (int i = 0; i < 24; i++)
        if (v->b[i])
            return ovt_fail(OVT_EINVAL, "value does not fit in 64 bits");
    uint64_t r = 0;
    for (int i = 24; i < 32; i++)
        r = r << 8 | v->b[i];
    *out = r;
    return 0;
}

int chain_u256_cmp(const chain_u256 *a, const chain_u256 *b)
{
    int c = memcmp(a->b, b->b, 32);
    return (c > 0) - (c < 0);
}

int chain_u256_is_zero(const chain_u256 *v)
{
    for (int i = 0; i < 32; i++)
        if (v->b[i])
            return 0;
    return 1;
}

int chain_u256_from_dec(chain_u256 *out, const char *s)
{
    memset(out, 0, sizeof *out);
    size_t n = strlen(s);
    if (n == 0 || n > 78)
        return ovt_fail(OVT_EINVAL, "not a decimal 256-bit integer: '%.80s'", s);
    chain_u256 acc;
    memset(&acc, 0, sizeof acc);
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return ovt_fail(OVT_EINVAL, "not a decimal 256-bit integer: '%.80s'", s);
        /* acc = acc * 10 + digit, with the carry out of the top byte an overflow. */
        unsigned carry = (unsigned)(s[i] - '0');
        for (int j = 31; j >= 0; j--) {
            unsigned t = acc.b[j] * 10u + carry;
            acc.b[j] = (uint8_t)t;
            carry = t >> 8;
        }
        if (carry)
            return ovt_fail(OVT_EINVAL, "decimal integer does not fit in 256 bits: '%.80s'", s);
    }
    *out = acc;
    return 0;
}

void chain_u256_to_dec(char *out, const chain_u256 *v)
{
    chain_u256 t = *v;
    char digits[80];
    size_t n = 0;
    do {
        /* t /= 10, collecting the remainder. */
        unsigned rem = 0;
        for (int j = 0; j < 32; j++) {
            unsigned cur = rem << 8 | t.b[j];
            t.b[j] = (uint8_t)(cur / 10);
            rem = cur % 10;
        }
        digits[n++] = (char)('0' + rem);
    } while (!chain_u256_is_zero(&t));
    for (size_t i = 0; i < n; i++)
        out[i] = digits[n - 1 - i];
    out[n] = '\0';
}

void chain_buf_init(chain_buf *buf)
{
    memset(buf, 0, sizeof *buf);
}

void chain_buf_free(chain_buf *buf)
{
    free(buf->data);
    memset(buf, 0, sizeof *buf);
}

int chain_buf_reserve(chain_buf *buf, size_t len)
{
    if (buf->failed)
        return OVT_ENOMEM;
    if (len <= buf->cap - buf->len)
        return 0;
    size_t need = buf->len + len;
    if (need < buf->len) {
        buf->failed = 1;
        return OVT_ENOMEM;
    }
    size_t cap = buf->cap ? buf->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(buf->data, cap);
    if (!p) {
        buf->failed = 1;
        return OVT_ENOMEM;
    }
    buf->data = p;
    buf->cap = cap;
    return 0;
}

void chain_buf_append(chain_buf *buf, const void *data, size_t len)
{
    if (len == 0 || chain_buf_reserve(buf, len) != 0)
        return;
    memcpy(buf->data + buf->len, data, len);
    buf->len += len;
}

void chain_buf_push(chain_buf *buf, uint8_t byte)
{
    chain_buf_append(buf, &byte, 1);
}

void chain_buf_insert(chain_buf *buf, size_t pos, const void *data, size_t len)
{
    if (len == 0 || pos > buf->len || chain_buf_reserve(buf, len) != 0)
        return;
    memmove(buf->data + pos + len, buf->data + pos, buf->len - pos);
    memcpy(buf->data + pos, data, len);
    buf->len += len;
}

int chain_buf_check(const chain_buf *buf)
{
    if (buf->failed)
        return ovt_fail(OVT_ENOMEM, "out of memory while encoding");
    return 0;
}
