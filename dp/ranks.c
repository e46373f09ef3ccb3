/* ranks.json: which process computed which shard (dp/ranks.h). */
#include "dp/ranks.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/fileio.h"
#include "kernels/rlog.h"

#define SUM_NAME "ranks.json.sha256"
#define SUM_LINE_LEN (64 + 2 + 10 + 1) /* "<hex>  ranks.json\n", as sha256sum writes it */

static int ranks_path(char *out, size_t cap, const char *dir, const char *name)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
        return ovt_fail(OVT_EINVAL, "run directory path too long: %s", dir);
    return 0;
}

void dp_ranks_free(dp_ranks *r)
{
    for (size_t k = 0; r->segs && k < r->count; k++)
        free(r->segs[k].hosts);
    free(r->segs);
    memset(r, 0, sizeof *r);
}

/* A host name as the writer writes it: 1..DP_HOST_MAX-1 bytes of
 * [A-Za-z0-9._-], so that it needs no escape and a flipped bit that makes
 * a control byte, a quote or a non-ASCII byte of it is refused. */
static bool host_ok(const char *h, size_t n)
{
    if (n == 0 || n >= DP_HOST_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9') ||
              h[i] == '.' || h[i] == '_' || h[i] == '-'))
            return false;
    return true;
}

static bool same_segment(const dp_ranks_segment *a, const dp_ranks_segment *b)
{
    if (a->processes != b->processes)
        return false;
    for (uint32_t r = 0; r < a->processes; r++)
        if (strcmp(a->hosts[r], b->hosts[r]) != 0)
            return false;
    return true;
}

/* One segment object into *g (its hosts malloc'd); S the run's shards. */
static int parse_segment(dp_ranks_segment *g, json_t *o, uint32_t S, size_t k)
{
    json_t *f = json_object_get(o, "from_step"), *r = json_object_get(o, "processes"),
           *h = json_object_get(o, "hosts");
    if (!json_is_object(o) || json_object_size(o) != 3 || !json_is_integer(f) || json_integer_value(f) < 1 ||
        !json_is_integer(r) || json_integer_value(r) < 1 || json_integer_value(r) > S ||
        S % (uint32_t)json_integer_value(r) != 0 || !json_is_array(h) ||
        json_array_size(h) != (size_t)json_integer_value(r))
        return ovt_fail(OVT_EFORMAT, "ranks.json: segment %zu must be exactly {from_step >= 1, processes dividing "
                                     "%u, hosts: one per process}", k, S);
    g->from_step = (uint64_t)json_integer_value(f);
    g->processes = (uint32_t)json_integer_value(r);
    if (!(g->hosts = calloc(g->processes, sizeof *g->hosts)))
        return ovt_fail(OVT_ENOMEM, "out of memory for %u host names", g->processes);
    for (uint32_t i = 0; i < g->processes; i++) {
        json_t *s = json_array_get(h, i);
        if (!json_is_string(s) || !host_ok(json_string_value(s), json_string_length(s)))
            return ovt_fail(OVT_EFORMAT, "ranks.json: segment %zu, host %u is not a name of 1..%d characters "
                                         "[A-Za-z0-9._-]", k, i, DP_HOST_MAX - 1);
        memcpy(g->hosts[i], json_string_value(s), json_string_length(s));
    }
    return 0;
}

/* The record's fields from the JSON tree (any form; the caller compares
 * the text with the canonical one). */
static int parse_tree(dp_ranks *out, json_t *root)
{
    json_t *v = json_object_get(root, "version"), *s = json_object_get(root, "shards"),
           *segs = json_object_get(root, "segments");
    if (!json_is_object(root) || json_object_size(root) != 3 || !json_is_integer(v) || json_integer_value(v) != 1 ||
        !json_is_integer(s) || json_integer_value(s) < 2 || json_integer_value(s) > KRN_RLOG_MAX_SHARDS ||
        !json_is_array(segs) || json_array_size(segs) == 0)
        return ovt_fail(OVT_EFORMAT, "ranks.json: expected exactly {version 1, shards 2..%u, a non-empty segments "
                                     "array}", KRN_RLOG_MAX_SHARDS);
    out->shards = (uint32_t)json_integer_value(s);
    if (!(out->segs = calloc(json_array_size(segs), sizeof *out->segs)))
        return ovt_fail(OVT_ENOMEM, "out of memory for ranks.json");
    for (size_t k = 0; k < json_array_size(segs); k++) {
        int rv = parse_segment(&out->segs[k], json_array_get(segs, k), out->shards, k);
        out->count = k + 1;
        if (rv)
            return rv;
        /* the writer drops segments from a resumed step on and merges a repeat */
        if (k && (out->segs[k].from_step <= out->segs[k - 1].from_step || same_segment(&out->segs[k],
                                                                                      &out->segs[k - 1])))
            return ovt_fail(OVT_EFORMAT, "ranks.json: segment %zu does not start after segment %zu or repeats it",
                            k, k - 1);
    }
    return 0;
}

int dp_ranks_parse(dp_ranks *out, const char *text, size_t len)
{
    memset(out, 0, sizeof *out);
    json_error_t e;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!root)
        return ovt_fail(OVT_EFORMAT, "ranks.json: not JSON (line %d: %s)", e.line, e.text);
    int rv = parse_tree(out, root);
    json_decref(root);
    char *canon = NULL;
    size_t clen = 0;
    if (!rv && !(rv = dp_ranks_text(out, &canon, &clen)) && (clen != len || memcmp(canon, text, len) != 0)) {
        size_t at = 0;
        while (at < len && at < clen && canon[at] == text[at])
            at++;
        rv = ovt_fail(OVT_EFORMAT, "ranks.json: byte %zu is not what `ovt train` writes (its form is fixed: "
                                   "spacing, key order, number digits, nothing after the closing brace)", at);
    }
    free(canon);
    if (rv)
        dp_ranks_free(out);
    return rv;
}

/* Appends to a growing buffer (b->err set on failure). */
typedef struct {
    char *p;
    size_t len, cap;
    bool err;
} buf_t;

static void put(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (int tries = 0; !b->err && tries < 2; tries++) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->err = true;
        } else if (b->p && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        } else {
            size_t cap = (b->cap + (size_t)n + 1) * 2;
            char *q = realloc(b->p, cap);
            if (!q)
                b->err = true;
            else
                b->p = q, b->cap = cap;
        }
    }
}

/* The text json_dumps(JSON_INDENT(2)) gives the record built in this
 * order, which is what the writer used before it wrote its own: files of
 * older runs read the same. */
int dp_ranks_text(const dp_ranks *r, char **text, size_t *len)
{
    buf_t b = {0};
    put(&b, "{\n  \"version\": 1,\n  \"shards\": %u,\n  \"segments\": [", r->shards);
    for (size_t k = 0; k < r->count; k++) {
        const dp_ranks_segment *g = &r->segs[k];
        put(&b, "%s\n    {\n      \"from_step\": %llu,\n      \"processes\": %u,\n      \"hosts\": [", k ? "," : "",
            (unsigned long long)g->from_step, g->processes);
        for (uint32_t i = 0; i < g->processes; i++)
            put(&b, "%s\n        \"%s\"", i ? "," : "", g->hosts[i]);
        put(&b, "%s]\n    }", g->processes ? "\n      " : "");
    }
    put(&b, "%s]\n}", r->count ? "\n  " : "");
    if (b.err) {
        free(b.p);
        return ovt_fail(OVT_ENOMEM, "out of memory for ranks.json");
    }
    *text = b.p;
    *len = b.len;
    return 0;
}

int dp_ranks_lookup(dp_shard_owner *out, const dp_ranks *r, uint64_t step, uint32_t shard)
{
    memset(out, 0, sizeof *out);
    const dp_ranks_segment *best = NULL;
    for (size_t k = 0; k < r->count; k++)
        if (r->segs[k].from_step <= step)
            best = &r->segs[k];
    if (!best || shard >= r->shards)
        return ovt_fail(OVT_ENOTFOUND, "ranks.json: no record of shard %u at step %llu", shard,
                        (unsigned long long)step);
    out->rank = shard / (r->shards / best->processes);
    snprintf(out->host, sizeof out->host, "%s", best->hosts[out->rank]);
    return 0;
}

int dp_ranks_owner(dp_shard_owner *out, const char *json, size_t len, uint64_t step, uint32_t shard)
{
    memset(out, 0, sizeof *out);
    dp_ranks r;
    int rv = dp_ranks_parse(&r, json, len);
    if (rv)
        return rv;
    rv = dp_ranks_lookup(out, &r, step, shard);
    dp_ranks_free(&r);
    return rv;
}

/* DIR/ranks.json.sha256's hash into *want: OVT_ENOTFOUND when absent. */
static int read_sum(const char *dir, ovt_hash *want)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    int rv = ranks_path(path, sizeof path, dir, SUM_NAME);
    if (rv || (rv = ovt_read_file(path, &buf, &len, 4096)))
        return rv;
    char hex[65] = "";
    if (len == SUM_LINE_LEN && !memcmp(buf + 64, "  ranks.json\n", 13)) {
        memcpy(hex, buf, 64);
        /* lowercase only: the one form written, so no flip reads as the same hash */
        for (int i = 0; i < 64; i++)
            if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
                hex[0] = 0;
    }
    free(buf);
    if (!hex[0] || ovt_hex_decode(want->b, 32, hex))
        return ovt_fail(OVT_EFORMAT, "%s is not one line \"<SHA-256 in lowercase hex>  ranks.json\" (as "
                                     "`ovt train` writes it): restore the trainer's copy", path);
    return 0;
}

int dp_ranks_load(const char *dir, uint8_t **text, size_t *len, bool *bound)
{
    *text = NULL;
    *len = 0;
    *bound = false;
    char path[4096];
    ovt_hash want, got;
    uint8_t *buf;
    size_t n;
    int rv = ranks_path(path, sizeof path, dir, "ranks.json");
    if (rv || (rv = ovt_read_file(path, &buf, &n, DP_RANKS_MAX_FILE)))
        return rv;
    rv = read_sum(dir, &want);
    if (rv == OVT_ENOTFOUND) {
        ovt_err_clear(); /* a run directory from before ranks.json.sha256 */
        rv = 0;
    } else if (rv == 0) {
        *bound = true;
        ovt_sha256(&got, buf, n);
        if (memcmp(got.b, want.b, 32) != 0) {
            char gh[65], wh[65];
            ovt_hex_encode(gh, got.b, 32);
            ovt_hex_encode(wh, want.b, 32);
            rv = ovt_fail(OVT_ECRYPTO, "%s has SHA-256 %s, but %s/" SUM_NAME " binds the run to %s: the file "
                                       "changed after `ovt train` wrote it (corrupted or edited), so no rank or "
                                       "host is taken from it; restore the trainer's copy (the store's blob the "
                                       "run manifest names as \"ranks\")", path, gh, dir, wh);
        }
    }
    dp_ranks r;
    if (!rv && (rv = dp_ranks_parse(&r, (const char *)buf, n)) != 0)
        rv = ovt_fail_wrap(rv, "%s", path);
    else if (!rv)
        dp_ranks_free(&r);
    if (rv) {
        free(buf);
        return rv;
    }
    *text = buf;
    *len = n;
    return 0;
}

int dp_ranks_owner_in(dp_shard_owner *out, const char *dir, uint64_t step, uint32_t shard)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    bool bound;
    int rv = dp_ranks_load(dir, &buf, &len, &bound);
    if (rv)
        return rv;
    rv = dp_ranks_owner(out, (const char *)buf, len, step, shard);
    out->bound = bound;
    free(buf);
    return rv;
}

/* The existing record of DIR (checked), or an empty one for S shards. */
static int record_start(dp_ranks *r, const char *dir, uint32_t S)
{
    memset(r, 0, sizeof *r);
    uint8_t *buf;
    size_t len;
    bool bound;
    int rv = dp_ranks_load(dir, &buf, &len, &bound);
    if (rv == OVT_ENOTFOUND) {
        ovt_err_clear();
        r->shards = S;
        return 0;
    }
    if (rv)
        return ovt_fail_wrap(rv, "the run's record of its processes (or remove ranks.json and " SUM_NAME
                                 " to start a new one from this session's first step)");
    rv = dp_ranks_parse(r, (const char *)buf, len);
    free(buf);
    if (!rv && r->shards != S) {
        dp_ranks_free(r);
        rv = ovt_fail(OVT_EFORMAT, "%s/ranks.json records %u shards, the run has %u", dir, r->shards, S);
    }
    return rv;
}

/* Appends the segment (from, R, hosts) to *r unless its last one says the
 * same (the hosts made writable: dp_ranks.h). */
static int record_add(dp_ranks *r, uint64_t from, int R, const char (*hosts)[DP_HOST_MAX])
{
    dp_ranks_segment g = {.from_step = from, .processes = (uint32_t)R, .hosts = calloc((size_t)R, DP_HOST_MAX)};
    dp_ranks_segment *segs = realloc(r->segs, (r->count + 1) * sizeof *segs);
    if (!g.hosts || !segs) {
        free(g.hosts);
        if (segs)
            r->segs = segs;
        return ovt_fail(OVT_ENOMEM, "out of memory for ranks.json");
    }
    r->segs = segs;
    for (int i = 0; i < R; i++) {
        size_t n = strnlen(hosts[i], DP_HOST_MAX - 1);
        for (size_t c = 0; c < n; c++)
            g.hosts[i][c] = host_ok(&hosts[i][c], 1) ? hosts[i][c] : '_';
        if (n == 0)
            g.hosts[i][0] = '_';
    }
    if (r->count && same_segment(&r->segs[r->count - 1], &g))
        free(g.hosts);
    else
        r->segs[r->count++] = g;
    return 0;
}

int dp_ranks_record(const char *dir, uint32_t S, uint64_t from_step, int R, const char (*hosts)[DP_HOST_MAX])
{
    if (R < 1 || S % (uint32_t)R != 0 || from_step < 1)
        return ovt_fail(OVT_EINVAL, "ranks.json: %d processes for %u shards from step %llu", R, S,
                        (unsigned long long)from_step);
    char path[4096], sum[SUM_LINE_LEN + 1];
    dp_ranks r;
    int rv = ranks_path(path, sizeof path, dir, "ranks.json");
    if (rv || (rv = record_start(&r, dir, S)))
        return rv;
    /* drop what this run does again */
    while (r.count && r.segs[r.count - 1].from_step >= from_step)
        free(r.segs[--r.count].hosts);
    char *text = NULL;
    size_t len = 0;
    if (!(rv = record_add(&r, from_step, R, hosts)) && !(rv = dp_ranks_text(&r, &text, &len)))
        rv = ovt_write_atomic(path, text, len, 0644);
    dp_ranks_free(&r);
    if (!rv) {
        /* after ranks.json: a crash between the two leaves a mismatch, refused
         * by name, never a stale file that reads as bound */
        ovt_hash h;
        ovt_sha256(&h, text, len);
        ovt_hex_encode(sum, h.b, 32);
        memcpy(sum + 64, "  ranks.json\n", 14);
        if (!(rv = ranks_path(path, sizeof path, dir, SUM_NAME)))
            rv = ovt_write_atomic(path, sum, SUM_LINE_LEN, 0644);
    }
    free(text);
    return rv;
}
