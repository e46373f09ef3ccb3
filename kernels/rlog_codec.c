/* The rounding-log file (docs/formats.md, "Rounding log"):
 *
 *   offset  size  field
 *    0       8    magic "OVTRLOG\0"
 *    8       4    format version: 1, or 2 for a log with a shard table
 *   12       4    version 1: reserved, 0; version 2: the shard count S (2..1024)
 *   16       8    step
 *   24       8    number of sites with entries
 *   32       8    number of entries
 *   40       8    length of the uncompressed body
 *   48       8    length of the compressed body (the rest of the file)
 *   56     32*S  version 2 only: the shard table, S SHA-256 hashes
 *   56+32S        body, one zstd frame with its content size and a content
 *                 checksum (absent when the log is empty)
 *
 * Body, per site in increasing site order: site (varint; the first site's
 * number, then the difference to the previous site, >= 1), n (varint), entry
 * count (varint, >= 1), element indices (varints; the first index, then
 * differences >= 1), a kinds byte (0: every entry is a direction, packed one
 * bit per entry, 1 = UP; 1: some are values, two bits per entry, 0 DOWN,
 * 1 UP, 2 VALUE), the packed bits (LSB first, unused bits zero), then the
 * FP32 bits (little-endian) of each VALUE entry in order. Varints are LEB128,
 * at most 10 bytes, minimal. The encoding of a log is unique. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/bytes.h"
#include "common/fileio.h"
#include "kernels/rlog.h"

#define RLOG_MAGIC "OVTRLOG"
#define RLOG_VERSION 1        /* a log without a shard table */
#define RLOG_VERSION_SHARDS 2 /* with one */
#define RLOG_HEADER KRN_RLOG_HEADER
#define RLOG_ZSTD_LEVEL 3
/* No body may decompress to more than this, and no log may hold more
 * entries (16 bytes each in memory), so a reader never needs more than
 * about 1.5 GiB whatever a file says; memory grows with the bytes actually
 * decompressed, never with what a header claims. For scale: the published
 * figure for GPT-2 is 18-20 MB of log per step, and ours costs about 3 bytes
 * per entry, so a step should stay within a few million entries. */
#define RLOG_MAX_BODY ((uint64_t)KRN_RLOG_MAX_BODY)
_Static_assert(KRN_RLOG_MAX_FILE == RLOG_HEADER + 32 * (size_t)KRN_RLOG_MAX_SHARDS +
                                       ZSTD_COMPRESSBOUND(KRN_RLOG_MAX_BODY),
               "KRN_RLOG_MAX_FILE is the header, the largest shard table and zstd's bound on a frame of the "
               "largest body");
#define RLOG_MAX_ENTRIES (UINT64_C(1) << 26)
#define RLOG_MIN_SITE_BYTES 6 /* site, n, count, one index, kinds byte, one bits byte */

typedef struct {
    uint8_t *p;
    size_t len;
    size_t cap;
} out_buf;

static int out_reserve(out_buf *o, size_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + more)
        cap *= 2;
    uint8_t *p = realloc(o->p, cap);
    if (p == NULL)
        return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for a %zu-byte body", cap);
    o->p = p;
    o->cap = cap;
    return 0;
}

/* Callers reserve 10 bytes first. */
static void put_varint(out_buf *o, uint64_t v)
{
    while (v >= 0x80) {
        o->p[o->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o->p[o->len++] = (uint8_t)v;
}

static int encode_site(out_buf *o, const krn_rlog_site *s, uint32_t prev_site, bool first)
{
    size_t nvalues = 0;
    for (size_t k = 0; k < s->count; k++)
        nvalues += s->entries[k].dir == KRN_DIR_VALUE;
    int bits = nvalues > 0 ? 2 : 1;
    size_t packed = (s->count * (size_t)bits + 7) / 8;
    int rc = out_reserve(o, 30 + 10 * s->count + 1 + packed + 4 * nvalues);
    if (rc < 0)
        return rc;
    put_varint(o, first ? s->site : s->site - prev_site);
    put_varint(o, s->n);
    put_varint(o, s->count);
    for (size_t k = 0; k < s->count; k++)
        put_varint(o, k == 0 ? s->entries[0].index : s->entries[k].index - s->entries[k - 1].index);
    o->p[o->len++] = nvalues > 0 ? 1 : 0;
    uint8_t *pk = o->p + o->len;
    memset(pk, 0, packed);
    for (size_t k = 0; k < s->count; k++) {
        unsigned code = (unsigned)s->entries[k].dir;
        size_t bit = k * (size_t)bits;
        pk[bit / 8] |= (uint8_t)(code << (bit % 8));
    }
    o->len += packed;
    for (size_t k = 0; k < s->count; k++) {
        if (s->entries[k].dir != KRN_DIR_VALUE)
            continue;
        uint32_t u;
        memcpy(&u, &s->entries[k].value, sizeof u);
        ovt_put_le32(o->p + o->len, u);
        o->len += 4;
    }
    return 0;
}

int krn_rlog_encode(const krn_rlog *log, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    out_buf body = {0};
    uint8_t *file = NULL;
    int rc = 0;
    size_t nsites = krn_rlog_nsites(log);
    for (size_t i = 0; i < nsites; i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        rc = encode_site(&body, s, i ? krn_rlog_site_at(log, i - 1)->site : 0, i == 0);
        if (rc < 0)
            goto fail;
    }
    if (body.len > RLOG_MAX_BODY || krn_rlog_nentries(log) > RLOG_MAX_ENTRIES) {
        rc = ovt_fail(OVT_EINVAL, "rounding log: %llu entries in a %zu-byte body exceed the "
                                  "format's limits (%llu entries, %llu bytes)",
                      (unsigned long long)krn_rlog_nentries(log), body.len,
                      (unsigned long long)RLOG_MAX_ENTRIES, (unsigned long long)RLOG_MAX_BODY);
        goto fail;
    }
    size_t bound = body.len ? ZSTD_compressBound(body.len) : 0;
    uint32_t S = krn_rlog_nshards(log);
    size_t head = RLOG_HEADER + 32 * (size_t)S;
    file = malloc(head + bound);
    if (file == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "rounding log: out of memory for the file");
        goto fail;
    }
    size_t zlen = 0;
    if (body.len > 0) {
        /* One frame that states its content size and carries a checksum of
         * the content, so corruption of the compressed bytes is caught. */
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        if (cctx == NULL) {
            rc = ovt_fail(OVT_ENOMEM, "rounding log: out of memory for zstd");
            goto fail;
        }
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, RLOG_ZSTD_LEVEL);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
        zlen = ZSTD_compress2(cctx, file + head, bound, body.p, body.len);
        ZSTD_freeCCtx(cctx);
        if (ZSTD_isError(zlen)) {
            rc = ovt_fail(OVT_EIO, "rounding log: zstd: %s", ZSTD_getErrorName(zlen));
            goto fail;
        }
    }
    memcpy(file, RLOG_MAGIC, 8); /* with its NUL */
    ovt_put_le32(file + 8, S > 0 ? RLOG_VERSION_SHARDS : RLOG_VERSION);
    ovt_put_le32(file + 12, S);
    for (uint32_t j = 0; j < S; j++)
        memcpy(file + RLOG_HEADER + 32 * (size_t)j, krn_rlog_shard_hash(log, j)->b, 32);
    ovt_put_le64(file + 16, krn_rlog_step(log));
    ovt_put_le64(file + 24, nsites);
    ovt_put_le64(file + 32, krn_rlog_nentries(log));
    ovt_put_le64(file + 40, body.len);
    ovt_put_le64(file + 48, zlen);
    free(body.p);
    *buf = file;
    *len = head + zlen;
    return 0;
fail:
    free(file);
    free(body.p);
    return rc;
}

/* ---- decoding ---- */

typedef struct {
    const uint8_t *p;
    size_t len;
    size_t pos;
} reader;

static int bad(const char *what, size_t at)
{
    return ovt_fail(OVT_EFORMAT, "rounding log: %s (body offset %zu)", what, at);
}

static int get_varint(reader *r, uint64_t *v, const char *field)
{
    uint64_t x = 0;
    size_t start = r->pos;
    for (int k = 0; k < 10; k++) {
        if (r->pos >= r->len)
            return ovt_fail(OVT_EFORMAT, "rounding log: body truncated in a varint (%s) at body "
                                         "offset %zu", field, start);
        uint8_t byte = r->p[r->pos++];
        if (k == 9 && byte > 1)
            return ovt_fail(OVT_EFORMAT, "rounding log: varint overflow (%s) at body offset %zu",
                            field, start);
        x |= (uint64_t)(byte & 0x7f) << (7 * k);
        if ((byte & 0x80) == 0) {
            if (byte == 0 && k > 0)
                return ovt_fail(OVT_EFORMAT, "rounding log: non-minimal varint (%s) at body "
                                             "offset %zu", field, start);
            *v = x;
            return 0;
        }
    }
    return ovt_fail(OVT_EFORMAT, "rounding log: varint overflow (%s) at body offset %zu", field,
                    start);
}

/* Decodes one site into log; at most `allowed` entries (what the header
 * leaves). */
static int decode_site(reader *r, krn_rlog *log, uint64_t *site, bool first, uint64_t allowed)
{
    size_t start = r->pos;
    uint64_t delta, n, count;
    int rc;
    if ((rc = get_varint(r, &delta, "site")) < 0 || (rc = get_varint(r, &n, "n")) < 0 ||
        (rc = get_varint(r, &count, "entry count")) < 0)
        return rc;
    if (!first && delta == 0)
        return bad("sites out of order (a site repeats)", start);
    if (delta > UINT32_MAX || *site + delta > UINT32_MAX)
        return bad("site number beyond 2^32 - 1", start);
    *site = first ? delta : *site + delta;
    if (count == 0)
        return bad("a site with zero entries", start);
    if (count > n)
        return bad("a site with more entries than elements", start);
    if (count > r->len - r->pos)
        return bad("entry count larger than the rest of the body", start);
    if (count > allowed)
        return bad("more entries than the header states", start);

    krn_rlog_entry *entries = calloc((size_t)count, sizeof *entries);
    if (entries == NULL)
        return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for %llu entries",
                        (unsigned long long)count);
    uint64_t index = 0;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t d;
        size_t at = r->pos;
        if ((rc = get_varint(r, &d, "element index")) < 0)
            goto done;
        if (k > 0 && d == 0) {
            rc = bad("element indices out of order (an index repeats)", at);
            goto done;
        }
        if (k > 0 && d > UINT64_MAX - index) {
            rc = bad("element index beyond 2^64 - 1", at);
            goto done;
        }
        index = k == 0 ? d : index + d;
        if (index >= n) {
            rc = bad("element index not below the site's n", at);
            goto done;
        }
        entries[k].index = index;
    }
    if (r->pos >= r->len) {
        rc = bad("body truncated before the kinds byte", r->pos);
        goto done;
    }
    uint8_t kinds = r->p[r->pos++];
    if (kinds > 1) {
        rc = bad("unknown kinds byte", r->pos - 1);
        goto done;
    }
    unsigned bits = kinds ? 2 : 1;
    size_t packed = (size_t)((count * bits + 7) / 8);
    if (packed > r->len - r->pos) {
        rc = bad("body truncated in the entry kinds", r->pos);
        goto done;
    }
    const uint8_t *pk = r->p + r->pos;
    size_t nvalues = 0;
    for (uint64_t k = 0; k < count; k++) {
        size_t bit = (size_t)k * bits;
        unsigned code = (pk[bit / 8] >> (bit % 8)) & (bits == 2 ? 3u : 1u);
        if (code == 3) {
            rc = bad("unknown entry kind 3", r->pos + bit / 8);
            goto done;
        }
        entries[k].dir = (krn_dir)code;
        nvalues += code == KRN_DIR_VALUE;
    }
    size_t used = (size_t)count * bits;
    if (used % 8 != 0 && (pk[packed - 1] >> (used % 8)) != 0) {
        rc = bad("nonzero padding bits after the entry kinds", r->pos + packed - 1);
        goto done;
    }
    if (kinds == 1 && nvalues == 0) {
        rc = bad("two-bit kinds for a site without value entries", r->pos - 1);
        goto done;
    }
    r->pos += packed;
    if (nvalues > (r->len - r->pos) / 4) {
        rc = bad("body truncated in the logged values", r->pos);
        goto done;
    }
    for (uint64_t k = 0; k < count; k++) {
        if (entries[k].dir != KRN_DIR_VALUE)
            continue;
        uint32_t u = ovt_get_le32(r->p + r->pos);
        memcpy(&entries[k].value, &u, sizeof u);
        if (!isfinite(entries[k].value)) {
            rc = bad("a logged value is not finite", r->pos);
            goto done;
        }
        r->pos += 4;
    }
    rc = krn_rlog_add_site(log, (uint32_t)*site, n, entries, (size_t)count);
    if (rc < 0)
        rc = ovt_fail_wrap(OVT_EFORMAT, "rounding log");
done:
    free(entries);
    return rc;
}

/* Decompresses exactly one zstd frame of exactly body_len bytes. The output
 * buffer grows with what actually comes out. */
static int decompress(const uint8_t *z, size_t zlen, size_t body_len, uint8_t **out)
{
    *out = NULL;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    if (dctx == NULL)
        return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for zstd");
    size_t cap = body_len < (1u << 20) ? body_len : (1u << 20);
    uint8_t *buf = malloc(cap ? cap : 1);
    int rc = 0;
    if (buf == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "rounding log: out of memory");
        goto done;
    }
    ZSTD_inBuffer in = {z, zlen, 0};
    ZSTD_outBuffer ob = {buf, cap, 0};
    for (;;) {
        if (ob.pos == ob.size && ob.size < body_len) {
            size_t ncap = ob.size * 2 < body_len ? ob.size * 2 : body_len;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                rc = ovt_fail(OVT_ENOMEM, "rounding log: out of memory");
                goto done;
            }
            buf = nb;
            ob.dst = buf;
            ob.size = ncap;
        }
        /* Once body_len bytes are out, ask for one more: a frame that goes
         * on disagrees with the header. */
        bool full = ob.pos == body_len;
        uint8_t extra;
        ZSTD_outBuffer probe = {&extra, 1, 0};
        size_t ret = ZSTD_decompressStream(dctx, full ? &probe : &ob, &in);
        if (ZSTD_isError(ret)) {
            rc = ovt_fail(OVT_EFORMAT, "rounding log: corrupt compressed body: %s",
                          ZSTD_getErrorName(ret));
            goto done;
        }
        if (full && probe.pos > 0) {
            rc = ovt_fail(OVT_EFORMAT, "rounding log: the body decompresses to more than the %zu "
                                       "bytes the header states", body_len);
            goto done;
        }
        if (ret == 0)
            break; /* the frame is complete */
        if (in.pos == in.size && (full || ob.pos < ob.size)) {
            rc = ovt_fail(OVT_EFORMAT, "rounding log: the compressed body is truncated");
            goto done;
        }
    }
    if (ob.pos != body_len) {
        rc = ovt_fail(OVT_EFORMAT, "rounding log: the body decompresses to %zu bytes, the header "
                                   "states %zu", ob.pos, body_len);
        goto done;
    }
    if (in.pos != in.size) {
        rc = ovt_fail(OVT_EFORMAT, "rounding log: %zu trailing bytes after the compressed body",
                      in.size - in.pos);
        goto done;
    }
    *out = buf;
    buf = NULL;
done:
    free(buf);
    ZSTD_freeDCtx(dctx);
    return rc;
}

int krn_rlog_decode(krn_rlog *log, const uint8_t *buf, size_t len)
{
    krn_rlog_reset(log, 0);
    if (len < RLOG_HEADER)
        return ovt_fail(OVT_EFORMAT, "rounding log: file of %zu bytes is shorter than the "
                                     "%d-byte header", len, RLOG_HEADER);
    if (len > KRN_RLOG_MAX_FILE)
        return ovt_fail(OVT_EFORMAT, "rounding log: file of %zu bytes is longer than the format's limit of %zu",
                        len, (size_t)KRN_RLOG_MAX_FILE);
    if (memcmp(buf, RLOG_MAGIC, 8) != 0)
        return ovt_fail(OVT_EFORMAT, "rounding log: wrong magic (not a rounding-log file)");
    uint32_t version = ovt_get_le32(buf + 8);
    if (version != RLOG_VERSION && version != RLOG_VERSION_SHARDS)
        return ovt_fail(OVT_EFORMAT, "rounding log: format version %u, this build reads %d and %d",
                        version, RLOG_VERSION, RLOG_VERSION_SHARDS);
    uint32_t S = ovt_get_le32(buf + 12);
    if (version == RLOG_VERSION && S != 0)
        return ovt_fail(OVT_EFORMAT, "rounding log: reserved header field is not zero");
    if (version == RLOG_VERSION_SHARDS && (S < 2 || S > KRN_RLOG_MAX_SHARDS))
        return ovt_fail(OVT_EFORMAT, "rounding log: version 2 states %u shards (2..%u)", S, KRN_RLOG_MAX_SHARDS);
    size_t head = RLOG_HEADER + 32 * (size_t)S;
    if (len < head)
        return ovt_fail(OVT_EFORMAT, "rounding log: file of %zu bytes is shorter than its header and the "
                                     "table of %u shards (%zu bytes, truncated)", len, S, head);
    uint64_t step = ovt_get_le64(buf + 16);
    uint64_t nsites = ovt_get_le64(buf + 24);
    uint64_t nentries = ovt_get_le64(buf + 32);
    uint64_t body_len = ovt_get_le64(buf + 40);
    uint64_t zlen = ovt_get_le64(buf + 48);
    if (zlen != len - head)
        return ovt_fail(OVT_EFORMAT, "rounding log: header states a %llu-byte compressed body, "
                                     "the file has %zu bytes after the header%s",
                        (unsigned long long)zlen, len - head,
                        zlen > len - head ? " (truncated)" : " (trailing bytes)");
    if (body_len > RLOG_MAX_BODY)
        return ovt_fail(OVT_EFORMAT, "rounding log: header states a %llu-byte body, more than "
                                     "the limit of %llu", (unsigned long long)body_len,
                        (unsigned long long)RLOG_MAX_BODY);
    if (nentries > RLOG_MAX_ENTRIES)
        return ovt_fail(OVT_EFORMAT, "rounding log: header states %llu entries, more than the "
                                     "limit of %llu", (unsigned long long)nentries,
                        (unsigned long long)RLOG_MAX_ENTRIES);
    if ((body_len == 0) != (zlen == 0) || (body_len == 0) != (nsites == 0) ||
        nentries < nsites || nentries > body_len || nsites > body_len / RLOG_MIN_SITE_BYTES)
        return ovt_fail(OVT_EFORMAT, "rounding log: header sizes disagree (%llu sites, %llu "
                                     "entries, %llu-byte body, %llu compressed)",
                        (unsigned long long)nsites, (unsigned long long)nentries,
                        (unsigned long long)body_len, (unsigned long long)zlen);
    ovt_hash *table = NULL;
    if (S > 0) {
        if ((table = malloc(S * sizeof *table)) == NULL)
            return ovt_fail(OVT_ENOMEM, "rounding log: out of memory for a shard table");
        for (uint32_t j = 0; j < S; j++)
            memcpy(table[j].b, buf + RLOG_HEADER + 32 * (size_t)j, 32);
    }
    uint8_t *body = NULL;
    int rc = 0;
    if (nsites > 0 && (rc = decompress(buf + head, (size_t)zlen, (size_t)body_len, &body)) < 0) {
        free(table);
        return rc;
    }
    krn_rlog_reset(log, step);
    if (S > 0)
        rc = krn_rlog_set_shards(log, table, S);
    free(table);
    if (rc < 0 || nsites == 0)
        goto done;
    reader r = {body, (size_t)body_len, 0};
    uint64_t site = 0;
    for (uint64_t i = 0; i < nsites; i++) {
        if (r.pos >= r.len) {
            rc = ovt_fail(OVT_EFORMAT, "rounding log: body ends after %llu of %llu sites",
                          (unsigned long long)i, (unsigned long long)nsites);
            goto done;
        }
        rc = decode_site(&r, log, &site, i == 0, nentries - krn_rlog_nentries(log));
        if (rc < 0)
            goto done;
    }
    if (r.pos != r.len) {
        rc = ovt_fail(OVT_EFORMAT, "rounding log: %zu trailing bytes in the body after %llu sites",
                      r.len - r.pos, (unsigned long long)nsites);
        goto done;
    }
    if (krn_rlog_nentries(log) != nentries) {
        rc = ovt_fail(OVT_EFORMAT, "rounding log: header states %llu entries, the body has %llu",
                      (unsigned long long)nentries, (unsigned long long)krn_rlog_nentries(log));
        goto done;
    }
done:
    free(body);
    if (rc < 0)
        krn_rlog_reset(log, 0);
    return rc;
}

int krn_rlog_write_file(const krn_rlog *log, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rc = krn_rlog_encode(log, &buf, &len);
    if (rc < 0)
        return rc;
    rc = ovt_write_atomic(path, buf, len, 0644);
    free(buf);
    return rc;
}

/* Reads the file at path (at most limit bytes) into log; *sha256 gets the
 * SHA-256 of its bytes and *bytes their number, when not NULL. */
static int read_decoded(krn_rlog *log, const char *path, size_t limit, ovt_hash *sha256, size_t *bytes)
{
    uint8_t *buf;
    size_t len;
    int rc = ovt_read_file(path, &buf, &len, limit);
    if (rc < 0) {
        krn_rlog_reset(log, 0);
        return rc;
    }
    rc = krn_rlog_decode(log, buf, len);
    if (sha256)
        ovt_sha256(sha256, buf, len);
    if (bytes)
        *bytes = len;
    free(buf);
    if (rc < 0)
        return ovt_fail_wrap(rc, "%s", path);
    return 0;
}

int krn_rlog_read_file(krn_rlog *log, const char *path)
{
    return read_decoded(log, path, KRN_RLOG_MAX_FILE, NULL, NULL);
}

int krn_rlog_inspect_file(krn_rlog *log, krn_rlog_file_info *info, const char *path)
{
    memset(info, 0, sizeof *info);
    /* read up to 2 GiB, past KRN_RLOG_MAX_FILE, so that a longer file is
     * refused by the decoder, whose message says it is too long */
    int rc = read_decoded(log, path, (size_t)1 << 31, &info->sha256, &info->bytes);
    if (rc < 0) {
        memset(info, 0, sizeof *info);
        return rc;
    }
    for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
        const krn_rlog_site *site = krn_rlog_site_at(log, i);
        for (size_t k = 0; k < site->count; k++)
            info->values += site->entries[k].dir == KRN_DIR_VALUE;
    }
    return 0;
}
