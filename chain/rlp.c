/* RLP encoder and strict decoder (see rlp.h). */
#include "chain/rlp.h"

#include <string.h>

#define RLP_MAX_DEPTH 64

/* Writes the header for a payload of len bytes with base 0x80 (string) or
 * 0xc0 (list) into hdr; returns its length (1..9). */
static size_t rlp_header(uint8_t hdr[9], uint8_t base, size_t len)
{
    if (len < 56) {
        hdr[0] = (uint8_t)(base + len);
        return 1;
    }
    uint8_t be[8];
    size_t n = 0;
    for (uint64_t v = len; v; v >>= 8)
        n++;
    ovt_put_be64(be, (uint64_t)len);
    hdr[0] = (uint8_t)(base + 55 + n);
    memcpy(hdr + 1, be + 8 - n, n);
    return 1 + n;
}

void chain_rlp_put_bytes(chain_buf *buf, const void *data, size_t len)
{
    const uint8_t *p = data;
    if (len == 1 && p[0] < 0x80) {
        chain_buf_push(buf, p[0]);
        return;
    }
    uint8_t hdr[9];
    chain_buf_append(buf, hdr, rlp_header(hdr, 0x80, len));
    chain_buf_append(buf, data, len);
}

/* Big-endian bytes without leading zeros. */
static void put_be_minimal(chain_buf *buf, const uint8_t *be, size_t n)
{
    size_t skip = 0;
    while (skip < n && be[skip] == 0)
        skip++;
    chain_rlp_put_bytes(buf, be + skip, n - skip);
}

void chain_rlp_put_uint(chain_buf *buf, uint64_t v)
{
    uint8_t be[8];
    ovt_put_be64(be, v);
    put_be_minimal(buf, be, 8);
}

void chain_rlp_put_u256(chain_buf *buf, const chain_u256 *v)
{
    put_be_minimal(buf, v->b, 32);
}

size_t chain_rlp_list_begin(const chain_buf *buf)
{
    return buf->len;
}

void chain_rlp_list_end(chain_buf *buf, size_t start)
{
    if (buf->failed || start > buf->len)
        return;
    uint8_t hdr[9];
    size_t n = rlp_header(hdr, 0xc0, buf->len - start);
    chain_buf_insert(buf, start, hdr, n);
}

/* Reads an n-byte big-endian length (1..8 bytes) that must not start with 0. */
static int read_long_length(size_t *out, const uint8_t *p, size_t n)
{
    if (p[0] == 0)
        return ovt_fail(OVT_EFORMAT, "RLP: length has a leading zero byte");
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    if (v < 56)
        return ovt_fail(OVT_EFORMAT, "RLP: long form used for a payload of %llu bytes (< 56)",
                        (unsigned long long)v);
    if (v > SIZE_MAX)
        return ovt_fail(OVT_EFORMAT, "RLP: length too large");
    *out = (size_t)v;
    return 0;
}

int chain_rlp_decode_item(chain_rlp_item *out, size_t *used, const uint8_t *data, size_t len)
{
    memset(out, 0, sizeof *out);
    *used = 0;
    if (len == 0)
        return ovt_fail(OVT_EFORMAT, "RLP: unexpected end of input");
    uint8_t b = data[0];
    size_t hdr = 1, plen = 0;
    int is_list = b >= 0xc0;
    if (b < 0x80) {
        out->payload = data;
        out->len = 1;
        *used = 1;
        return 0;
    } else if (b <= 0xb7 || (b >= 0xc0 && b <= 0xf7)) {
        plen = (size_t)(b - (is_list ? 0xc0 : 0x80));
    } else {
        size_t n = (size_t)(b - (is_list ? 0xf7 : 0xb7));
        if (len < 1 + n)
            return ovt_fail(OVT_EFORMAT, "RLP: truncated length");
        int rc = read_long_length(&plen, data + 1, n);
        if (rc)
            return rc;
        hdr = 1 + n;
    }
    if (plen > len - hdr)
        return ovt_fail(OVT_EFORMAT, "RLP: payload of %zu bytes overruns the input (%zu left)", plen,
                        len - hdr);
    if (!is_list && plen == 1 && data[hdr] < 0x80)
        return ovt_fail(OVT_EFORMAT, "RLP: single byte 0x%02x below 0x80 encoded as a string",
                        data[hdr]);
    out->payload = data + hdr;
    out->len = plen;
    out->is_list = is_list;
    *used = hdr + plen;
    return 0;
}

int chain_rlp_list_next(const chain_rlp_item *list, size_t *pos, chain_rlp_item *item)
{
    if (!list->is_list)
        return ovt_fail(OVT_EFORMAT, "RLP: expected a list, found a string");
    if (*pos >= list->len)
        return 0;
    size_t used;
    int rc = chain_rlp_decode_item(item, &used, list->payload + *pos, list->len - *pos);
    if (rc)
        return rc;
    *pos += used;
    return 1;
}

static int check_nested(const chain_rlp_item *item, int depth)
{
    if (!item->is_list)
        return 0;
    if (depth >= RLP_MAX_DEPTH)
        return ovt_fail(OVT_EFORMAT, "RLP: nested deeper than %d lists", RLP_MAX_DEPTH);
    size_t pos = 0;
    chain_rlp_item child;
    int rc;
    while ((rc = chain_rlp_list_next(item, &pos, &child)) == 1) {
        rc = check_nested(&child, depth + 1);
        if (rc)
            return rc;
    }
    return rc;
}

int chain_rlp_decode_whole(chain_rlp_item *out, const uint8_t *data, size_t len)
{
    size_t used;
    int rc = chain_rlp_decode_item(out, &used, data, len);
    if (rc)
        return rc;
    if (used != len) {
        memset(out, 0, sizeof *out);
        return ovt_fail(OVT_EFORMAT, "RLP: %zu trailing bytes after the item", len - used);
    }
    rc = check_nested(out, 0);
    if (rc)
        memset(out, 0, sizeof *out);
    return rc;
}

static int get_be_int(uint8_t *out, size_t width, const chain_rlp_item *item)
{
    memset(out, 0, width);
    if (item->is_list)
        return ovt_fail(OVT_EFORMAT, "RLP: expected an integer, found a list");
    if (item->len > width)
        return ovt_fail(OVT_EFORMAT, "RLP: integer of %zu bytes exceeds %zu", item->len, width);
    if (item->len > 0 && item->payload[0] == 0)
        return ovt_fail(OVT_EFORMAT, "RLP: integer with a leading zero byte");
    memcpy(out + width - item->len, item->payload, item->len);
    return 0;
}

int chain_rlp_get_uint(uint64_t *out, const chain_rlp_item *item)
{
    uint8_t be[8];
    *out = 0;
    int rc = get_be_int(be, 8, item);
    if (rc)
        return rc;
    for (int i = 0; i < 8; i++)
        *out = *out << 8 | be[i];
    return 0;
}

int chain_rlp_get_u256(chain_u256 *out, const chain_rlp_item *item)
{
    return get_be_int(out->b, 32, item);
}
