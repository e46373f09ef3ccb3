/* The rounding log: the in-memory rules, a known-answer body written from
 * the format description (docs/formats.md), round trips of random and
 * extreme logs, and every malformation rejected with OVT_EFORMAT and a
 * message that says which. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "common/bytes.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"

#define HEADER 56

static uint64_t rnd(uint64_t k)
{
    return krn_rng_u64(7, 0, KRN_RNG_TEST, k);
}

static bool same_log(const krn_rlog *a, const krn_rlog *b)
{
    if (krn_rlog_step(a) != krn_rlog_step(b) || krn_rlog_nsites(a) != krn_rlog_nsites(b) ||
        krn_rlog_nentries(a) != krn_rlog_nentries(b))
        return false;
    for (size_t i = 0; i < krn_rlog_nsites(a); i++) {
        const krn_rlog_site *x = krn_rlog_site_at(a, i), *y = krn_rlog_site_at(b, i);
        if (x->site != y->site || x->n != y->n || x->count != y->count)
            return false;
        for (size_t k = 0; k < x->count; k++) {
            const krn_rlog_entry *e = &x->entries[k], *f = &y->entries[k];
            if (e->index != f->index || e->dir != f->dir || memcmp(&e->value, &f->value, 4) != 0)
                return false;
        }
    }
    return true;
}

/* A file with the given header fields around a raw body (compressed here
 * with zstd directly, so bodies the encoder would never write can be made). */
static uint8_t *make_file(size_t *len, uint64_t step, uint64_t nsites, uint64_t nentries,
                          const uint8_t *body, size_t body_len)
{
    size_t bound = ZSTD_compressBound(body_len);
    uint8_t *f = malloc(HEADER + bound);
    size_t zlen = body_len ? ZSTD_compress(f + HEADER, bound, body, body_len, 3) : 0;
    memcpy(f, "OVTRLOG", 8);
    ovt_put_le32(f + 8, 1);
    ovt_put_le32(f + 12, 0);
    ovt_put_le64(f + 16, step);
    ovt_put_le64(f + 24, nsites);
    ovt_put_le64(f + 32, nentries);
    ovt_put_le64(f + 40, body_len);
    ovt_put_le64(f + 48, zlen);
    *len = HEADER + zlen;
    return f;
}

/* Decodes a file made from a raw body and checks the error and message. */
static void expect_body_error(const char *why, uint64_t nsites, uint64_t nentries,
                              const uint8_t *body, size_t body_len, const char *msg)
{
    size_t len;
    uint8_t *f = make_file(&len, 1, nsites, nentries, body, body_len);
    krn_rlog *log = krn_rlog_new();
    int rc = krn_rlog_decode(log, f, len);
    CHECK_MSG(rc == OVT_EFORMAT, "%s: rc %d", why, rc);
    CHECK_MSG(strstr(ovt_errmsg(), msg) != NULL, "%s: message \"%s\" lacks \"%s\"", why,
              ovt_errmsg(), msg);
    CHECK(krn_rlog_nsites(log) == 0 && krn_rlog_nentries(log) == 0);
    krn_rlog_free(log);
    free(f);
}

static void test_memory_rules(void)
{
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 3);
    CHECK(krn_rlog_step(log) == 3);
    CHECK(krn_rlog_add(log, 2, 10, 4, KRN_DIR_UP, 9.0f) == 0);
    CHECK(krn_rlog_site_at(log, 0)->entries[0].value == 0.0f); /* directions carry no value */
    CHECK(krn_rlog_add(log, 2, 10, 4, KRN_DIR_UP, 0) == OVT_EINVAL);   /* index repeats */
    CHECK(krn_rlog_add(log, 2, 10, 3, KRN_DIR_UP, 0) == OVT_EINVAL);   /* index goes back */
    CHECK(krn_rlog_add(log, 2, 11, 5, KRN_DIR_UP, 0) == OVT_EINVAL);   /* n changes */
    CHECK(krn_rlog_add(log, 1, 10, 5, KRN_DIR_UP, 0) == OVT_EINVAL);   /* site goes back */
    CHECK(krn_rlog_add(log, 4, 10, 10, KRN_DIR_UP, 0) == OVT_EINVAL);  /* index >= n */
    CHECK(krn_rlog_add(log, 4, 10, 1, (krn_dir)3, 0) == OVT_EINVAL);   /* unknown kind */
    CHECK(krn_rlog_add(log, 4, 10, 1, KRN_DIR_VALUE, NAN) == OVT_EINVAL);
    CHECK(krn_rlog_nsites(log) == 1 && krn_rlog_nentries(log) == 1); /* nothing half-added */
    CHECK(krn_rlog_add(log, 4, 10, 9, KRN_DIR_VALUE, -2.5f) == 0);
    CHECK(krn_rlog_find(log, 4) != NULL && krn_rlog_find(log, 4)->entries[0].value == -2.5f);
    CHECK(krn_rlog_find(log, 3) == NULL);
    krn_rlog_reset(log, 8);
    CHECK(krn_rlog_nsites(log) == 0 && krn_rlog_nentries(log) == 0 && krn_rlog_step(log) == 8);
    krn_rlog_free(log);
}

/* The body bytes of a small log, written by hand from docs/formats.md. */
static void test_known_body(void)
{
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 0x0102030405060708u);
    CHECK(krn_rlog_add(log, 2, 10, 3, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(log, 2, 10, 7, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(log, 300, 1000, 0, KRN_DIR_VALUE, 1.0f) == 0);
    CHECK(krn_rlog_add(log, 300, 1000, 200, KRN_DIR_UP, 0) == 0);
    const uint8_t want[] = {
        0x02, 0x0a, 0x02, 0x03, 0x04, /* site 2, n 10, 2 entries, indices 3, 3+4 */
        0x00, 0x02,                   /* one bit each: DOWN, UP */
        0xaa, 0x02, 0xe8, 0x07, 0x02, /* site 2+298, n 1000, 2 entries */
        0x00, 0xc8, 0x01,             /* indices 0, 0+200 */
        0x01, 0x06,                   /* two bits each: VALUE (2), UP (1) */
        0x00, 0x00, 0x80, 0x3f,       /* 1.0f */
    };
    uint8_t *buf;
    size_t len;
    CHECK(krn_rlog_encode(log, &buf, &len) == 0);
    CHECK(len > HEADER && memcmp(buf, "OVTRLOG\0", 8) == 0);
    CHECK(ovt_get_le32(buf + 8) == 1 && ovt_get_le64(buf + 16) == 0x0102030405060708u);
    CHECK(ovt_get_le64(buf + 24) == 2 && ovt_get_le64(buf + 32) == 4);
    CHECK(ovt_get_le64(buf + 40) == sizeof want && ovt_get_le64(buf + 48) == len - HEADER);
    uint8_t body[64];
    size_t blen = ZSTD_decompress(body, sizeof body, buf + HEADER, len - HEADER);
    CHECK(!ZSTD_isError(blen) && blen == sizeof want);
    CHECK_MEM(body, want, sizeof want);
    /* and the hand-made file decodes to the same log */
    size_t flen;
    uint8_t *f = make_file(&flen, 0x0102030405060708u, 2, 4, want, sizeof want);
    krn_rlog *back = krn_rlog_new();
    CHECK(krn_rlog_decode(back, f, flen) == 0);
    CHECK(same_log(log, back));
    free(f);
    free(buf);
    krn_rlog_free(back);
    krn_rlog_free(log);
}

static float random_value(uint64_t r)
{
    uint32_t u = (uint32_t)r;
    if ((u & 0x7f800000u) == 0x7f800000u)
        u &= 0xbfffffffu; /* keep it finite */
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static void round_trip(const krn_rlog *log, const char *what)
{
    uint8_t *buf, *buf2;
    size_t len, len2;
    CHECK(krn_rlog_encode(log, &buf, &len) == 0);
    krn_rlog *back = krn_rlog_new();
    int rc = krn_rlog_decode(back, buf, len);
    CHECK_MSG(rc == 0, "%s: %s", what, ovt_errmsg());
    CHECK_MSG(same_log(log, back), "%s: decoded log differs", what);
    CHECK(krn_rlog_encode(back, &buf2, &len2) == 0);
    CHECK(len == len2 && memcmp(buf, buf2, len) == 0);
    free(buf);
    free(buf2);
    krn_rlog_free(back);
}

static void test_round_trips(void)
{
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 0);
    round_trip(log, "empty");
    krn_rlog_reset(log, UINT64_MAX);
    round_trip(log, "empty, last step");
    uint8_t *buf;
    size_t len;
    CHECK(krn_rlog_encode(log, &buf, &len) == 0 && len == HEADER);
    free(buf);

    /* huge indices and n, the largest site number */
    CHECK(krn_rlog_add(log, 0, UINT64_MAX, 0, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(log, 0, UINT64_MAX, UINT64_MAX - 1, KRN_DIR_VALUE, -0.0f) == 0);
    CHECK(krn_rlog_add(log, UINT32_MAX, 1, 0, KRN_DIR_DOWN, 0) == 0);
    round_trip(log, "extremes");

    uint64_t k = 0;
    for (int t = 0; t < 300; t++) {
        krn_rlog_reset(log, rnd(k++));
        uint32_t site = (uint32_t)(rnd(k++) % 5);
        int nsites = (int)(rnd(k++) % 12);
        for (int s = 0; s < nsites; s++) {
            uint64_t n = 1 + rnd(k++) % (t % 3 == 0 ? UINT64_MAX - 1 : 100000);
            uint64_t count = 1 + rnd(k++) % (n < 200 ? n : 200);
            bool values = rnd(k++) % 3 == 0;
            uint64_t idx = rnd(k++) % (n - count + 1) / 2;
            for (uint64_t e = 0; e < count && idx < n; e++) {
                krn_dir dir = (krn_dir)(rnd(k++) % (values ? 3 : 2));
                CHECK(krn_rlog_add(log, site, n, idx, dir, random_value(rnd(k++))) == 0);
                uint64_t room = (n - idx) / (count - e + 1);
                idx += 1 + (room > 1 ? rnd(k++) % room : 0);
            }
            site += 1 + (uint32_t)(rnd(k++) % (t % 2 ? 3 : 100000));
        }
        round_trip(log, "random");
    }

    /* a large log through a file */
    krn_rlog_reset(log, 42);
    for (uint64_t i = 0; i < 200000; i++)
        CHECK(krn_rlog_add(log, (uint32_t)(i / 1000), 1u << 20, (i % 1000) * 997 + rnd(i) % 997,
                           rnd(i) & 1 ? KRN_DIR_UP : KRN_DIR_DOWN, 0) == 0);
    char dir[] = "/tmp/ovt-rlog-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/step42.rlog", dir);
    CHECK(krn_rlog_write_file(log, path) == 0);
    krn_rlog *back = krn_rlog_new();
    CHECK(krn_rlog_read_file(back, path) == 0);
    CHECK(same_log(log, back));
    snprintf(path, sizeof path, "%s/missing.rlog", dir);
    CHECK(krn_rlog_read_file(back, path) < 0);
    CHECK(krn_rlog_nentries(back) == 0);
    snprintf(path, sizeof path, "%s/step42.rlog", dir);
    unlink(path);
    rmdir(dir);
    krn_rlog_free(back);
    krn_rlog_free(log);
}

/* Every truncation, and every byte flipped (several ways), of a small file
 * is rejected, except in the step field (any step is valid) and in bits
 * zstd ignores (the unused bit of its frame header), where the file must
 * decode to exactly the original entries. */
static void test_truncate_and_flip(void)
{
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 77);
    CHECK(krn_rlog_add(log, 1, 50, 3, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(log, 1, 50, 40, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(log, 4, 9, 8, KRN_DIR_VALUE, 0.375f) == 0);
    uint8_t *buf;
    size_t len;
    CHECK(krn_rlog_encode(log, &buf, &len) == 0);
    krn_rlog *back = krn_rlog_new();
    for (size_t cut = 0; cut < len; cut++) {
        int rc = krn_rlog_decode(back, buf, cut);
        CHECK_MSG(rc == OVT_EFORMAT, "truncated to %zu of %zu: rc %d", cut, len, rc);
        CHECK(krn_rlog_nentries(back) == 0);
    }
    CHECK(krn_rlog_decode(back, buf, HEADER - 1) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "shorter than the 56-byte header") != NULL);
    CHECK(krn_rlog_decode(back, buf, len - 1) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "truncated") != NULL);

    uint8_t *mod = malloc(len + 1);
    const uint8_t masks[] = {0x01, 0x80, 0xff, 0x10};
    size_t accepted = 0, ignored = 0;
    for (size_t i = 0; i < len; i++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(mod, buf, len);
            mod[i] ^= masks[m];
            int rc = krn_rlog_decode(back, mod, len);
            if (i >= 16 && i < 24) {
                CHECK(rc == 0 && krn_rlog_step(back) == (77 ^ ((uint64_t)masks[m] << (8 * (i - 16)))));
                accepted++;
            } else if (rc == 0) {
                CHECK_MSG(same_log(log, back), "byte %zu ^ 0x%02x changed the log", i, masks[m]);
                ignored++;
            } else {
                CHECK_MSG(rc == OVT_EFORMAT, "byte %zu ^ 0x%02x: rc %d", i, masks[m], rc);
            }
        }
    }
    CHECK(accepted == 8 * sizeof masks);
    CHECK_MSG(ignored <= 2, "%zu flips were ignored", ignored);
    /* a trailing byte */
    memcpy(mod, buf, len);
    mod[len] = 0;
    CHECK(krn_rlog_decode(back, mod, len + 1) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "trailing") != NULL);
    /* wrong magic, wrong version, reserved field */
    memcpy(mod, buf, len);
    mod[0] = 'X';
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "magic"));
    memcpy(mod, buf, len);
    ovt_put_le32(mod + 8, 2);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "version 2"));
    /* sizes that disagree */
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 24, 3);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT);
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 32, 4);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "entries"));
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 40, ovt_get_le64(buf + 40) + 1);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "decompresses"));
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 40, ovt_get_le64(buf + 40) - 1);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "more than"));
    /* a hostile header: a huge body is refused before anything is allocated */
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 40, UINT64_C(1) << 40);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "limit"));
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 40, (UINT64_C(1) << 29) - 1);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "decompresses"));
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 40, (UINT64_C(1) << 29) + 1);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "limit"));
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 32, (UINT64_C(1) << 26) + 1);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "limit"));
    memcpy(mod, buf, len);
    ovt_put_le64(mod + 48, UINT64_MAX);
    CHECK(krn_rlog_decode(back, mod, len) == OVT_EFORMAT && strstr(ovt_errmsg(), "truncated"));
    /* an empty log whose header claims entries */
    krn_rlog *empty = krn_rlog_new();
    uint8_t *ebuf;
    size_t elen;
    CHECK(krn_rlog_encode(empty, &ebuf, &elen) == 0);
    ovt_put_le64(ebuf + 32, 1);
    CHECK(krn_rlog_decode(back, ebuf, elen) == OVT_EFORMAT && strstr(ovt_errmsg(), "disagree"));
    free(ebuf);
    krn_rlog_free(empty);
    free(mod);
    free(buf);
    krn_rlog_free(back);
    krn_rlog_free(log);
}

static void test_body_errors(void)
{
    /* corrupt zstd */
    {
        uint8_t f[HEADER + 8];
        memcpy(f, "OVTRLOG", 8);
        ovt_put_le32(f + 8, 1);
        ovt_put_le32(f + 12, 0);
        ovt_put_le64(f + 16, 1);
        ovt_put_le64(f + 24, 1);
        ovt_put_le64(f + 32, 1);
        ovt_put_le64(f + 40, 7);
        ovt_put_le64(f + 48, 8);
        memset(f + HEADER, 0x5a, 8);
        krn_rlog *log = krn_rlog_new();
        CHECK(krn_rlog_decode(log, f, sizeof f) == OVT_EFORMAT && strstr(ovt_errmsg(), "corrupt"));
        krn_rlog_free(log);
    }
    /* two zstd frames: the second is trailing */
    {
        const uint8_t body[] = {0x00, 0x01, 0x01, 0x00, 0x00, 0x01};
        size_t len;
        uint8_t *f = make_file(&len, 1, 1, 1, body, sizeof body);
        size_t zlen = len - HEADER;
        f = realloc(f, len + zlen);
        memcpy(f + len, f + HEADER, zlen);
        ovt_put_le64(f + 48, 2 * zlen);
        krn_rlog *log = krn_rlog_new();
        CHECK(krn_rlog_decode(log, f, len + zlen) == OVT_EFORMAT);
        CHECK(strstr(ovt_errmsg(), "trailing bytes after the compressed body") != NULL);
        krn_rlog_free(log);
        free(f);
    }
    /* a good body, for reference */
    const uint8_t good[] = {0x00, 0x05, 0x01, 0x02, 0x00, 0x01};
    size_t len;
    uint8_t *f = make_file(&len, 1, 1, 1, good, sizeof good);
    krn_rlog *log = krn_rlog_new();
    CHECK(krn_rlog_decode(log, f, len) == 0 && krn_rlog_nentries(log) == 1);
    free(f);
    krn_rlog_free(log);

    const uint8_t trailing[] = {0x00, 0x05, 0x01, 0x02, 0x00, 0x01, 0x00};
    expect_body_error("trailing body byte", 1, 1, trailing, sizeof trailing, "trailing bytes in the body");
    const uint8_t overflow[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
                                0x05, 0x01, 0x02, 0x00, 0x01};
    expect_body_error("varint overflow", 1, 1, overflow, sizeof overflow, "varint overflow");
    const uint8_t long_varint[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                   0x01, 0x05, 0x01, 0x02, 0x00, 0x01};
    expect_body_error("11-byte varint", 1, 1, long_varint, sizeof long_varint, "varint overflow");
    const uint8_t nonmin[] = {0x80, 0x00, 0x05, 0x01, 0x02, 0x00, 0x01};
    expect_body_error("non-minimal varint", 1, 1, nonmin, sizeof nonmin, "non-minimal varint");
    const uint8_t cut_varint[] = {0x00, 0x05, 0x81, 0x82, 0x83, 0x84};
    expect_body_error("varint cut", 1, 1, cut_varint, sizeof cut_varint, "truncated in a varint");
    const uint8_t order[] = {0x00, 0x05, 0x02, 0x02, 0x00, 0x00, 0x01};
    expect_body_error("index repeats", 1, 2, order, sizeof order, "indices out of order");
    const uint8_t beyond[] = {0x00, 0x05, 0x01, 0x05, 0x00, 0x01};
    expect_body_error("index >= n", 1, 1, beyond, sizeof beyond, "not below the site's n");
    const uint8_t sites[] = {0x03, 0x05, 0x01, 0x02, 0x00, 0x01, 0x00, 0x05, 0x01, 0x02, 0x00, 0x01};
    expect_body_error("site repeats", 2, 2, sites, sizeof sites, "sites out of order");
    const uint8_t big_site[] = {0xff, 0xff, 0xff, 0xff, 0x10, 0x05, 0x01, 0x02, 0x00, 0x01};
    expect_body_error("site >= 2^32", 1, 1, big_site, sizeof big_site, "beyond 2^32");
    const uint8_t zero[] = {0x00, 0x05, 0x00, 0x02, 0x00, 0x01, 0x00};
    expect_body_error("zero entries", 1, 1, zero, sizeof zero, "zero entries");
    const uint8_t many[] = {0x00, 0x05, 0x06, 0x02, 0x00, 0x01};
    expect_body_error("count > n", 1, 6, many, sizeof many, "more entries than elements");
    const uint8_t kinds[] = {0x00, 0x05, 0x01, 0x02, 0x02, 0x01};
    expect_body_error("kinds byte", 1, 1, kinds, sizeof kinds, "unknown kinds byte");
    const uint8_t pad[] = {0x00, 0x05, 0x01, 0x02, 0x00, 0x03};
    expect_body_error("padding", 1, 1, pad, sizeof pad, "padding bits");
    const uint8_t kind3[] = {0x00, 0x05, 0x01, 0x02, 0x01, 0x03};
    expect_body_error("kind 3", 1, 1, kind3, sizeof kind3, "unknown entry kind 3");
    const uint8_t novalue[] = {0x00, 0x05, 0x01, 0x02, 0x01, 0x01};
    expect_body_error("2-bit kinds, no value", 1, 1, novalue, sizeof novalue, "without value entries");
    const uint8_t cut_value[] = {0x00, 0x05, 0x01, 0x02, 0x01, 0x02, 0x00, 0x00, 0x80};
    expect_body_error("value cut", 1, 1, cut_value, sizeof cut_value, "truncated in the logged values");
    const uint8_t inf_value[] = {0x00, 0x05, 0x01, 0x02, 0x01, 0x02, 0x00, 0x00, 0x80, 0x7f};
    expect_body_error("inf value", 1, 1, inf_value, sizeof inf_value, "not finite");
    const uint8_t no_kinds[] = {0x00, 0xac, 0x02, 0x01, 0x81, 0x01};
    expect_body_error("no kinds byte", 1, 1, no_kinds, sizeof no_kinds, "before the kinds byte");
    const uint8_t no_bits[] = {0x00, 0xac, 0x02, 0x01, 0x05, 0x00};
    expect_body_error("no bits", 1, 1, no_bits, sizeof no_bits, "truncated in the entry kinds");
    expect_body_error("fewer sites than stated", 2, 2, good, sizeof good, "disagree");
    const uint8_t two[] = {0x00, 0x05, 0x01, 0x02, 0x00, 0x01, 0x01, 0x05, 0x01, 0x02, 0x00, 0x01};
    expect_body_error("sites stated too few", 1, 2, two, sizeof two, "trailing bytes in the body");
    expect_body_error("entries stated wrong", 2, 3, two, sizeof two, "header states 3 entries");
    const uint8_t two_in_one[] = {0x00, 0x05, 0x02, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00};
    expect_body_error("entries beyond the header's", 1, 1, two_in_one, sizeof two_in_one,
                      "more entries than the header states");
    expect_body_error("body ends early", 3, 3, two, sizeof two, "disagree");
}

/* krn_rlog_merge: a site split over three logs comes out in element order
 * (the expected log written here entry by entry, not by a merge), a site in
 * one log only is copied, the destination may be a source, and two logs of
 * one element, disagreeing n or different steps are refused with dst as it
 * was. */
static void test_merge(void)
{
    krn_rlog *a = krn_rlog_new(), *b = krn_rlog_new(), *c = krn_rlog_new(), *want = krn_rlog_new();
    krn_rlog_reset(a, 9), krn_rlog_reset(b, 9), krn_rlog_reset(c, 9), krn_rlog_reset(want, 9);
    /* site 2 in a only; site 5 (n = 30) split: a 0..9, b 10..19, c 20..29 but
     * (the order of the sources does not matter); site 7 in c only */
    CHECK(krn_rlog_add(a, 2, 4, 1, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(a, 5, 30, 3, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(a, 5, 30, 9, KRN_DIR_VALUE, 1.5f) == 0);
    CHECK(krn_rlog_add(b, 5, 30, 10, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(b, 5, 30, 17, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(c, 5, 30, 20, KRN_DIR_VALUE, -2.0f) == 0);
    CHECK(krn_rlog_add(c, 5, 30, 29, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(c, 7, 2, 0, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(want, 2, 4, 1, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(want, 5, 30, 3, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(want, 5, 30, 9, KRN_DIR_VALUE, 1.5f) == 0);
    CHECK(krn_rlog_add(want, 5, 30, 10, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(want, 5, 30, 17, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(want, 5, 30, 20, KRN_DIR_VALUE, -2.0f) == 0);
    CHECK(krn_rlog_add(want, 5, 30, 29, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(want, 7, 2, 0, KRN_DIR_DOWN, 0) == 0);

    /* the sources in any order give the same log; dst = a source works */
    const krn_rlog *order1[] = {c, a, b};
    krn_rlog *m = krn_rlog_new();
    CHECK(krn_rlog_merge(m, order1, 3) == 0);
    CHECK(same_log(m, want));
    const krn_rlog *order2[] = {a, b, c};
    CHECK(krn_rlog_merge(a, order2, 3) == 0);
    CHECK(same_log(a, want));

    /* refusals leave dst unchanged */
    krn_rlog *dup = krn_rlog_new(), *badn = krn_rlog_new(), *other = krn_rlog_new();
    krn_rlog_reset(dup, 9), krn_rlog_reset(badn, 9), krn_rlog_reset(other, 10);
    CHECK(krn_rlog_add(dup, 5, 30, 17, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(badn, 5, 31, 25, KRN_DIR_UP, 0) == 0);
    const krn_rlog *s_dup[] = {b, dup}, *s_n[] = {b, badn}, *s_step[] = {b, other};
    CHECK(krn_rlog_merge(m, s_dup, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "element 17 is logged by two") != NULL);
    CHECK(krn_rlog_merge(m, s_n, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "n = 31") != NULL);
    CHECK(krn_rlog_merge(m, s_step, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "step 10") != NULL);
    CHECK(same_log(m, want));
    krn_rlog_free(dup), krn_rlog_free(badn), krn_rlog_free(other), krn_rlog_free(m);
    krn_rlog_free(a), krn_rlog_free(b), krn_rlog_free(c), krn_rlog_free(want);
}

/* Format version 2: the shard table, written after the header and read
 * back; its header and length checked; merge keeps src[0]'s table; the
 * site edits a rank's log needs (shift, drop from). */
static void test_shard_table(void)
{
    krn_rlog *log = krn_rlog_new(), *back = krn_rlog_new();
    krn_rlog_reset(log, 9);
    CHECK(krn_rlog_add(log, 2, 10, 3, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(log, 7, 10, 1, KRN_DIR_DOWN, 0) == 0);
    ovt_hash h[4];
    for (int j = 0; j < 4; j++)
        for (int b = 0; b < 32; b++)
            h[j].b[b] = (uint8_t)(j * 32 + b);
    CHECK(krn_rlog_set_shards(log, h, 1) == OVT_EINVAL);
    CHECK(krn_rlog_set_shards(log, h, KRN_RLOG_MAX_SHARDS + 1) == OVT_EINVAL);
    CHECK(krn_rlog_set_shards(log, h, 4) == 0);
    uint8_t *buf;
    size_t len;
    CHECK(krn_rlog_encode(log, &buf, &len) == 0);
    CHECK_EQ_U64(ovt_get_le32(buf + 8), 2);
    CHECK_EQ_U64(ovt_get_le32(buf + 12), 4);
    CHECK_MEM(buf + HEADER, h[0].b, 32);
    CHECK_MEM(buf + HEADER + 96, h[3].b, 32);
    CHECK_EQ_U64(ovt_get_le64(buf + 48), len - HEADER - 128);
    CHECK(krn_rlog_decode(back, buf, len) == 0 && same_log(log, back));
    CHECK(krn_rlog_nshards(back) == 4 && !memcmp(krn_rlog_shard_hash(back, 2)->b, h[2].b, 32));
    CHECK(krn_rlog_shard_hash(back, 4) == NULL);
    /* cut inside the table, a count of 1, a version 1 header with a count */
    CHECK(krn_rlog_decode(back, buf, HEADER + 100) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "truncated") != NULL && krn_rlog_nshards(back) == 0);
    ovt_put_le32(buf + 12, 1);
    CHECK(krn_rlog_decode(back, buf, len) == OVT_EFORMAT);
    ovt_put_le32(buf + 12, 5); /* claims one hash more: the body is then 32 bytes short */
    CHECK(krn_rlog_decode(back, buf, len) == OVT_EFORMAT);
    ovt_put_le32(buf + 12, 4);
    ovt_put_le32(buf + 8, 1);
    CHECK(krn_rlog_decode(back, buf, len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "reserved") != NULL);
    free(buf);
    /* an empty sharded log is the header and the table */
    krn_rlog_reset(back, 3);
    CHECK(krn_rlog_set_shards(back, h, 2) == 0);
    CHECK(krn_rlog_encode(back, &buf, &len) == 0);
    CHECK_EQ_U64(len, HEADER + 64);
    CHECK(krn_rlog_decode(back, buf, len) == 0 && krn_rlog_nshards(back) == 2 && krn_rlog_nentries(back) == 0);
    free(buf);
    /* reset clears the table; a log without one is version 1 */
    krn_rlog_reset(back, 3);
    CHECK(krn_rlog_nshards(back) == 0);
    CHECK(krn_rlog_encode(back, &buf, &len) == 0);
    CHECK_EQ_U64(ovt_get_le32(buf + 8), 1);
    free(buf);
    /* a rank's log: shifted to its shards' sites, cut before the common ones */
    krn_rlog *rank1 = krn_rlog_new();
    krn_rlog_reset(rank1, 9);
    CHECK(krn_rlog_add(rank1, 0, 10, 4, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(rank1, 1, 10, 5, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(rank1, 7, 10, 1, KRN_DIR_DOWN, 0) == 0);
    krn_rlog_drop_sites_from(rank1, 7);
    CHECK(krn_rlog_nsites(rank1) == 2 && krn_rlog_nentries(rank1) == 2);
    CHECK(krn_rlog_shift_sites(rank1, 3) == 0);
    CHECK(krn_rlog_site_at(rank1, 0)->site == 3 && krn_rlog_site_at(rank1, 1)->site == 4);
    CHECK(krn_rlog_shift_sites(rank1, UINT32_MAX) == OVT_EINVAL);
    const krn_rlog *src[2] = {log, rank1};
    CHECK(krn_rlog_merge(back, src, 2) == 0);
    CHECK(krn_rlog_nsites(back) == 4 && krn_rlog_nentries(back) == 4 && krn_rlog_nshards(back) == 4);
    CHECK(krn_rlog_site_at(back, 1)->site == 3 && krn_rlog_site_at(back, 3)->site == 7);
    krn_rlog_free(rank1);
    krn_rlog_free(log);
    krn_rlog_free(back);
}

int main(void)
{
    CHECK_RUN(test_memory_rules());
    CHECK_RUN(test_known_body());
    CHECK_RUN(test_round_trips());
    CHECK_RUN(test_truncate_and_flip());
    CHECK_RUN(test_body_errors());
    CHECK_RUN(test_merge());
    CHECK_RUN(test_shard_table());
    return check_done();
}
