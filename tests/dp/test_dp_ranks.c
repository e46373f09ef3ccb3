/* ranks.json (dp/ranks.h): who computed which shard, and its integrity.
 *   - the canonical text is what the writer gave before it wrote its own
 *     (jansson's JSON_INDENT(2) of the same record), and a file written by
 *     that older writer (ovt train of main before ranks.json.sha256) reads;
 *   - lookups: step k's segment, rank r of R computed shards r*S/R ..;
 *   - every malformation is OVT_EFORMAT naming ranks.json: unknown fields,
 *     wrong types, host names outside [A-Za-z0-9._-], trailing bytes,
 *     non-canonical numbers, spacing, key order, duplicates;
 *   - every bit and every byte of a real ranks.json changed one at a time:
 *     read from the run directory, each is refused by name (the binding
 *     ranks.json.sha256, or the strict parser); parsed alone, each is
 *     refused or another well-formed record, never a silent no-op;
 *   - a host edited "vm" -> "vo", the file otherwise valid, is refused with
 *     both hashes; the resume (dp_ranks_record) refuses it too;
 *   - ranks.json.sha256 is `sha256sum -c`'s format; a run directory without
 *     it (an older run) reads, unbound; a malformed one is refused by name;
 *   - the writer: resumed segments replace the old ones, a repeat is not
 *     added, another shard count is refused, odd host bytes become '_'. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/bytes.h"
#include "common/fileio.h"
#include "dp/ranks.h"

/* ranks.json as `ovt train --shards 2` of main (66b18be) wrote it on host vm */
static const char old_file[] = "{\n  \"version\": 1,\n  \"shards\": 2,\n  \"segments\": [\n    {\n"
                               "      \"from_step\": 1,\n      \"processes\": 1,\n      \"hosts\": [\n"
                               "        \"vm\"\n      ]\n    }\n  ]\n}";

static void write_text(const char *dir, const char *name, const void *p, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb"); /* not ovt_write_atomic: tens of thousands of fsyncs */
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(p, 1, n, f) == n);
        CHECK(fclose(f) == 0);
    }
}

static uint8_t *read_text(const char *dir, const char *name, size_t *n)
{
    char path[256];
    uint8_t *buf = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(ovt_read_file(path, &buf, n, 1 << 20) == 0);
    return buf;
}

static void remove_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* The old writer's text for segments (from, R, hosts...) of S shards. */
static char *jansson_text(uint32_t S, size_t nseg, const uint64_t *from, const uint32_t *R, const char *const *hosts)
{
    json_t *root = json_pack("{s:i, s:I, s:[]}", "version", 1, "shards", (json_int_t)S, "segments");
    json_t *segs = json_object_get(root, "segments");
    for (size_t k = 0, h = 0; k < nseg; k++) {
        json_t *hl = json_array();
        for (uint32_t r = 0; r < R[k]; r++)
            json_array_append_new(hl, json_string(hosts[h++]));
        json_array_append_new(segs, json_pack("{s:I, s:i, s:o}", "from_step", (json_int_t)from[k], "processes",
                                              (int)R[k], "hosts", hl));
    }
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    return text;
}

static void test_canonical_is_the_old_writers(void)
{
    static const uint64_t from[] = {1, 5, 12345678901234ULL};
    static const uint32_t R[] = {2, 4, 1};
    static const char *const hosts[] = {"a", "b", "node-1.example", "x_y", "c", "d", "vm"};
    char *want = jansson_text(4, 3, from, R, hosts);
    dp_ranks r;
    CHECK(dp_ranks_parse(&r, want, strlen(want)) == 0);
    CHECK(r.shards == 4 && r.count == 3 && r.segs[2].from_step == 12345678901234ULL);
    char *got = NULL;
    size_t len = 0;
    CHECK(dp_ranks_text(&r, &got, &len) == 0);
    CHECK_MSG(len == strlen(want) && !memcmp(got, want, len), "ours:\n%s\njansson's:\n%s", got, want);
    free(got);
    dp_ranks_free(&r);
    free(want);
    /* the older writer's file, from its own run */
    dp_shard_owner o;
    CHECK(dp_ranks_owner(&o, old_file, strlen(old_file), 2, 1) == 0 && o.rank == 0 && !strcmp(o.host, "vm"));
}

static void test_lookup(void)
{
    static const uint64_t from[] = {1, 5};
    static const uint32_t R[] = {2, 4};
    static const char *const hosts[] = {"a", "b", "a", "b", "c", "d"};
    char *good = jansson_text(4, 2, from, R, hosts);
    size_t n = strlen(good);
    dp_shard_owner o;
    CHECK(dp_ranks_owner(&o, good, n, 4, 3) == 0 && o.rank == 1 && !strcmp(o.host, "b"));
    CHECK(dp_ranks_owner(&o, good, n, 5, 3) == 0 && o.rank == 3 && !strcmp(o.host, "d"));
    CHECK(dp_ranks_owner(&o, good, n, 9, 0) == 0 && o.rank == 0 && !strcmp(o.host, "a"));
    CHECK(dp_ranks_owner(&o, good, n, 0, 0) == OVT_ENOTFOUND);
    CHECK(dp_ranks_owner(&o, good, n, 2, 4) == OVT_ENOTFOUND);
    free(good);
}

/* old_file with `from` (its first occurrence) replaced by `to` */
static char *edited(const char *from, const char *to)
{
    const char *at = strstr(old_file, from);
    CHECK(at != NULL);
    if (!at)
        return strdup("");
    size_t pre = (size_t)(at - old_file), n = strlen(old_file) - strlen(from) + strlen(to);
    char *s = malloc(n + 1);
    memcpy(s, old_file, pre);
    strcpy(s + pre, to);
    strcat(s, at + strlen(from));
    return s;
}

static void test_malformations(void)
{
    static const char *const edits[][2] = {
        {"\"vm\"", "\"v m\""},                 /* a host name outside the set */
        {"\"vm\"", "\"v\\u006d\""},            /* the same name, escaped */
        {"\"vm\"", "\"\""},                    /* empty */
        {"\"vm\"", "\"v\xc3\xa9\""},           /* non-ASCII */
        {"\"vm\"", "1"},                       /* wrong type */
        {"\"processes\": 1", "\"processes\": 1.0"},
        {"\"processes\": 1", "\"processes\": 1e0"},
        {"\"processes\": 1", "\"processes\": 01"},
        {"\"processes\": 1", "\"processes\": -1"},
        {"\"processes\": 1", "\"processes\": 2"}, /* two processes, one host */
        {"\"from_step\": 1", "\"from_step\": 0"},
        {"\"from_step\": 1", "\"from_step\": \"1\""},
        {"\"shards\": 2", "\"shards\": 1"},
        {"\"shards\": 2", "\"shards\": 3"},       /* R = 1 divides it, but the form is fine: see below */
        {"\"version\": 1", "\"version\": 2"},
        {"\"version\": 1", "\"version\": true"},
        {"\"version\": 1,", "\"version\": 1, \"extra\": 0,"},  /* an unknown field */
        {"\"processes\": 1,", "\"processes\": 1, \"note\": \"x\","},
        {"\"version\": 1,", "\"version\": 1, \"version\": 1,"}, /* a duplicate */
        {"\"version\": 1,\n  \"shards\": 2,", "\"shards\": 2,\n  \"version\": 1,"}, /* key order */
        {"\"version\": 1", "\"version\":  1"},  /* spacing */
        {"\n  ]\n}", "\n  ]\n}\n"},               /* a trailing newline */
        {"\n  ]\n}", "\n  ]\n} x"},               /* trailing garbage */
        {"\n  ]\n}", "\n  ]\n}{}"},
        {"    {\n      \"from_step\": 1,\n      \"processes\": 1,\n      \"hosts\": [\n        \"vm\"\n      ]\n    }\n",
         ""}, /* no segment */
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        char *t = edited(edits[k][0], edits[k][1]);
        dp_shard_owner o;
        int rv = dp_ranks_owner(&o, t, strlen(t), 1, 0);
        bool fine = k == 13; /* 3 shards on one process is a valid record: a different one */
        CHECK_MSG(fine ? rv == 0 : rv == OVT_EFORMAT && strstr(ovt_errmsg(), "ranks.json"), "edit %zu: %d %s", k,
                  rv, rv ? ovt_errmsg() : "(accepted)");
        ovt_err_clear();
        free(t);
    }
    /* a repeated or backwards segment: the writer never writes one */
    static const uint64_t f1[] = {1, 3}, f2[] = {3, 3};
    static const uint32_t R[] = {1, 1};
    static const char *const same[] = {"vm", "vm"}, *const other[] = {"vm", "w"};
    char *t1 = jansson_text(2, 2, f1, R, same), *t2 = jansson_text(2, 2, f2, R, other);
    dp_shard_owner o;
    CHECK(dp_ranks_owner(&o, t1, strlen(t1), 1, 0) == OVT_EFORMAT);
    CHECK(dp_ranks_owner(&o, t2, strlen(t2), 1, 0) == OVT_EFORMAT);
    ovt_err_clear();
    free(t1);
    free(t2);
}

/* Every (step, shard) -> owner of a parsed record, as text, for comparing
 * records by what they say (steps 0..maxstep). */
static char *owner_table(const char *text, size_t len, uint64_t maxstep, uint32_t S)
{
    size_t cap = (size_t)(maxstep + 1) * S * (DP_HOST_MAX + 24) + 1, at = 0;
    char *out = malloc(cap);
    out[0] = 0;
    for (uint64_t k = 0; k <= maxstep; k++)
        for (uint32_t j = 0; j < S + 1; j++) {
            dp_shard_owner o;
            int rv = dp_ranks_owner(&o, text, len, k, j);
            at += (size_t)snprintf(out + at, cap - at, "%d:%u:%s;", rv, o.rank, o.host);
        }
    ovt_err_clear();
    return out;
}

/* One changed copy of ranks.json: read from the run directory dir (unless
 * NULL) it must be refused by name; parsed alone, refused or another
 * record (counted). */
static void one_change(const char *dir, const uint8_t *orig, uint8_t *buf, size_t len, const char *base,
                       int counts[3], size_t where)
{
    dp_shard_owner o;
    int rv;
    if (dir) {
        write_text(dir, "ranks.json", buf, len);
        rv = dp_ranks_owner_in(&o, dir, 3, 1);
        CHECK_MSG(rv == OVT_ECRYPTO && strstr(ovt_errmsg(), "ranks.json") && strstr(ovt_errmsg(), "restore"),
                  "byte %zu (0x%02x -> 0x%02x): read from the run directory: %d %s", where, orig[where], buf[where],
                  rv, rv ? ovt_errmsg() : "(accepted)");
        ovt_err_clear();
    }
    dp_ranks r;
    rv = dp_ranks_parse(&r, (const char *)buf, len);
    if (rv) {
        CHECK_MSG(rv == OVT_EFORMAT && strstr(ovt_errmsg(), "ranks.json"), "byte %zu: %d %s", where, rv,
                  ovt_errmsg());
        counts[0]++;
    } else {
        dp_ranks_free(&r);
        char *t = owner_table((const char *)buf, len, 12, 4);
        counts[strcmp(t, base) == 0 ? 2 : 1]++;
        free(t);
    }
    ovt_err_clear();
}

static void test_every_bit_and_byte(void)
{
    char dir[] = "/tmp/ovt-ranks-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char h[4][DP_HOST_MAX] = {"vm", "vm", "vo", "w1"};
    CHECK(dp_ranks_record(dir, 4, 1, 2, (const char(*)[DP_HOST_MAX])h) == 0);
    CHECK(dp_ranks_record(dir, 4, 7, 4, (const char(*)[DP_HOST_MAX])h) == 0);
    size_t len;
    uint8_t *orig = read_text(dir, "ranks.json", &len), *buf = malloc(len);
    char *base = owner_table((const char *)orig, len, 12, 4);
    dp_shard_owner o;
    CHECK(dp_ranks_owner_in(&o, dir, 3, 1) == 0 && o.bound && o.rank == 0 && !strcmp(o.host, "vm"));
    int bits[3] = {0}, bytes[3] = {0}; /* refused by the parser, another record, the same record */
    for (size_t i = 0; i < len * 8; i++) {
        memcpy(buf, orig, len);
        buf[i / 8] ^= (uint8_t)(1u << (i % 8));
        one_change(dir, orig, buf, len, base, bits, i / 8);
    }
    for (size_t i = 0; i < len; i++)
        for (int v = 0; v < 256; v++) {
            if (v == orig[i])
                continue;
            memcpy(buf, orig, len);
            buf[i] = (uint8_t)v;
            one_change(NULL, orig, buf, len, base, bytes, i); /* the parser only: the bits went through the file */
        }
    /* a changed record always says something else: the canonical form
     * leaves no byte whose change the parser ignores */
    CHECK_EQ_U64((uint64_t)bits[2], 0);
    CHECK_EQ_U64((uint64_t)bytes[2], 0);
    CHECK_EQ_U64((uint64_t)(bits[0] + bits[1]), len * 8);
    CHECK_EQ_U64((uint64_t)(bytes[0] + bytes[1]), len * 255);
    printf("ranks.json of %zu bytes: of %zu flipped bits %d refused by the parser, %d another valid record "
           "(refused by ranks.json.sha256), all %zu refused from the run directory; of %zu changed bytes %d "
           "refused by the parser, %d another record\n",
           len, len * 8, bits[0], bits[1], len * 8, len * 255, bytes[0], bytes[1]);
    write_text(dir, "ranks.json", orig, len);
    CHECK(dp_ranks_owner_in(&o, dir, 3, 1) == 0 && o.bound);
    free(base);
    free(buf);
    free(orig);
    remove_dir(dir);
}

static void test_edited_host(void)
{
    char dir[] = "/tmp/ovt-ranks-XXXXXX", cmd[256];
    CHECK(mkdtemp(dir) != NULL);
    char h[1][DP_HOST_MAX] = {"vm"};
    CHECK(dp_ranks_record(dir, 2, 1, 1, (const char(*)[DP_HOST_MAX])h) == 0);
    size_t len;
    uint8_t *orig = read_text(dir, "ranks.json", &len);
    CHECK(len == strlen(old_file) && !memcmp(orig, old_file, len)); /* the same bytes as the older writer's */
    /* the binding is sha256sum's own format, checked by sha256sum itself */
    snprintf(cmd, sizeof cmd, "cd %s && sha256sum --status -c ranks.json.sha256", dir);
    CHECK(system(cmd) == 0);
    char *vo = edited("\"vm\"", "\"vo\"");
    dp_shard_owner o;
    CHECK(dp_ranks_owner(&o, vo, strlen(vo), 1, 0) == 0 && !strcmp(o.host, "vo")); /* well formed */
    write_text(dir, "ranks.json", vo, strlen(vo));
    CHECK(system(cmd) != 0);
    ovt_hash got, want;
    char gh[65], wh[65];
    ovt_sha256(&got, vo, strlen(vo));
    ovt_sha256(&want, old_file, strlen(old_file));
    ovt_hex_encode(gh, got.b, 32);
    ovt_hex_encode(wh, want.b, 32);
    int rv = dp_ranks_owner_in(&o, dir, 1, 0);
    CHECK_MSG(rv == OVT_ECRYPTO && strstr(ovt_errmsg(), "/ranks.json has SHA-256") && strstr(ovt_errmsg(), gh) &&
                  strstr(ovt_errmsg(), wh) && strstr(ovt_errmsg(), "restore"),
              "%d %s", rv, ovt_errmsg());
    CHECK(strcmp(o.host, "vo") != 0);
    /* a resume does not bless it */
    CHECK(dp_ranks_record(dir, 2, 3, 1, (const char(*)[DP_HOST_MAX])h) == OVT_ECRYPTO);
    uint8_t *buf;
    bool bound;
    CHECK(dp_ranks_load(dir, &buf, &len, &bound) == OVT_ECRYPTO);
    /* an older run's directory: no ranks.json.sha256, read unbound */
    char path[256];
    snprintf(path, sizeof path, "%s/ranks.json.sha256", dir);
    CHECK(unlink(path) == 0);
    CHECK(dp_ranks_owner_in(&o, dir, 1, 0) == 0 && !o.bound && !strcmp(o.host, "vo"));
    /* a malformed binding is refused by name, every flipped bit of it */
    write_text(dir, "ranks.json", old_file, strlen(old_file));
    CHECK(dp_ranks_record(dir, 2, 1, 1, (const char(*)[DP_HOST_MAX])h) == 0);
    uint8_t *sum = read_text(dir, "ranks.json.sha256", &len), *flip = malloc(len);
    for (size_t i = 0; i < len * 8; i++) {
        memcpy(flip, sum, len);
        flip[i / 8] ^= (uint8_t)(1u << (i % 8));
        write_text(dir, "ranks.json.sha256", flip, len);
        rv = dp_ranks_owner_in(&o, dir, 1, 0);
        CHECK_MSG((rv == OVT_EFORMAT && strstr(ovt_errmsg(), "ranks.json.sha256")) ||
                      (rv == OVT_ECRYPTO && strstr(ovt_errmsg(), "ranks.json")),
                  "bit %zu of ranks.json.sha256: %d %s", i, rv, rv ? ovt_errmsg() : "(accepted)");
        ovt_err_clear();
    }
    free(flip);
    free(sum);
    free(orig);
    free(vo);
    remove_dir(dir);
}

static void test_record(void)
{
    /* a run on 2 processes, resumed from step 3 on 4, then again from 3 on 4 */
    char dir[] = "/tmp/ovt-ranks-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char h[4][DP_HOST_MAX] = {"h0", "h1", "h2", "h3"};
    dp_shard_owner o;
    CHECK(dp_ranks_owner_in(&o, dir, 1, 0) == OVT_ENOTFOUND);
    CHECK(dp_ranks_record(dir, 4, 1, 2, (const char(*)[DP_HOST_MAX])h) == 0);
    CHECK(dp_ranks_record(dir, 4, 3, 4, (const char(*)[DP_HOST_MAX])h) == 0);
    CHECK(dp_ranks_record(dir, 4, 3, 4, (const char(*)[DP_HOST_MAX])h) == 0);
    CHECK(dp_ranks_owner_in(&o, dir, 2, 3) == 0 && o.rank == 1 && o.bound);
    CHECK(dp_ranks_owner_in(&o, dir, 3, 3) == 0 && o.rank == 3 && !strcmp(o.host, "h3"));
    size_t len;
    uint8_t *buf = read_text(dir, "ranks.json", &len);
    dp_ranks r;
    CHECK(dp_ranks_parse(&r, (const char *)buf, len) == 0);
    CHECK_EQ_U64(r.count, 2); /* the same segment again is not added twice */
    dp_ranks_free(&r);
    free(buf);
    /* another run's shard count is refused */
    CHECK(dp_ranks_record(dir, 8, 4, 2, (const char(*)[DP_HOST_MAX])h) == OVT_EFORMAT);
    /* host bytes the reader would refuse are written as '_' */
    char odd[2][DP_HOST_MAX] = {"a b\"c", ""};
    CHECK(dp_ranks_record(dir, 4, 5, 2, (const char(*)[DP_HOST_MAX])odd) == 0);
    CHECK(dp_ranks_owner_in(&o, dir, 5, 0) == 0 && !strcmp(o.host, "a_b_c"));
    CHECK(dp_ranks_owner_in(&o, dir, 5, 3) == 0 && o.rank == 1 && !strcmp(o.host, "_"));
    ovt_err_clear();
    remove_dir(dir);
}

int main(void)
{
    CHECK_RUN(test_canonical_is_the_old_writers());
    CHECK_RUN(test_lookup());
    CHECK_RUN(test_malformations());
    CHECK_RUN(test_every_bit_and_byte());
    CHECK_RUN(test_edited_host());
    CHECK_RUN(test_record());
    return check_done();
}
