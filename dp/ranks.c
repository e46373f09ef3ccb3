/* ranks.json: which process computed which shard (dp/ranks.h). */
#include "dp/ranks.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/rlog.h"

static int ranks_path(char *out, size_t cap, const char *dir)
{
    if ((size_t)snprintf(out, cap, "%s/ranks.json", dir) >= cap)
        return ovt_fail(OVT_EINVAL, "run directory path too long: %s", dir);
    return 0;
}

/* Parses ranks.json; *segs is its "segments" array (borrowed from *root). */
static int ranks_parse(json_t **root, json_t **segs, uint32_t *S, const char *json, size_t len)
{
    json_error_t e;
    *root = json_loadb(json, len, 0, &e);
    if (!*root)
        return ovt_fail(OVT_EFORMAT, "ranks.json: not JSON (line %d: %s)", e.line, e.text);
    json_t *v = json_object_get(*root, "version"), *s = json_object_get(*root, "shards");
    *segs = json_object_get(*root, "segments");
    if (!json_is_integer(v) || json_integer_value(v) != 1 || !json_is_integer(s) || json_integer_value(s) < 2 ||
        json_integer_value(s) > KRN_RLOG_MAX_SHARDS || !json_is_array(*segs)) {
        json_decref(*root);
        *root = NULL;
        return ovt_fail(OVT_EFORMAT, "ranks.json: expected version 1, shards 2..%u and a segments array",
                        KRN_RLOG_MAX_SHARDS);
    }
    *S = (uint32_t)json_integer_value(s);
    for (size_t k = 0; k < json_array_size(*segs); k++) {
        json_t *g = json_array_get(*segs, k), *f = json_object_get(g, "from_step");
        json_t *r = json_object_get(g, "processes"), *h = json_object_get(g, "hosts");
        if (!json_is_integer(f) || json_integer_value(f) < 1 || !json_is_integer(r) || json_integer_value(r) < 1 ||
            *S % (uint32_t)json_integer_value(r) != 0 || !json_is_array(h) ||
            json_array_size(h) != (size_t)json_integer_value(r)) {
            json_decref(*root);
            *root = NULL;
            return ovt_fail(OVT_EFORMAT, "ranks.json: segment %zu needs from_step >= 1, processes dividing %u and "
                                         "one host per process", k, *S);
        }
    }
    return 0;
}

int dp_ranks_owner(dp_shard_owner *out, const char *json, size_t len, uint64_t step, uint32_t shard)
{
    memset(out, 0, sizeof *out);
    json_t *root, *segs;
    uint32_t S;
    int rv = ranks_parse(&root, &segs, &S, json, len);
    if (rv)
        return rv;
    json_t *best = NULL;
    for (size_t k = 0; k < json_array_size(segs); k++) {
        json_t *g = json_array_get(segs, k);
        if ((uint64_t)json_integer_value(json_object_get(g, "from_step")) <= step)
            best = g;
    }
    if (!best || shard >= S) {
        json_decref(root);
        return ovt_fail(OVT_ENOTFOUND, "ranks.json: no record of shard %u at step %llu", shard,
                        (unsigned long long)step);
    }
    uint32_t R = (uint32_t)json_integer_value(json_object_get(best, "processes"));
    out->rank = shard / (S / R);
    const char *host = json_string_value(json_array_get(json_object_get(best, "hosts"), out->rank));
    snprintf(out->host, sizeof out->host, "%s", host ? host : "?");
    json_decref(root);
    return 0;
}

int dp_ranks_owner_in(dp_shard_owner *out, const char *dir, uint64_t step, uint32_t shard)
{
    memset(out, 0, sizeof *out);
    char path[4096];
    uint8_t *buf;
    size_t len;
    int rv = ranks_path(path, sizeof path, dir);
    if (rv || (rv = ovt_read_file(path, &buf, &len, DP_RANKS_MAX_FILE)))
        return rv;
    rv = dp_ranks_owner(out, (const char *)buf, len, step, shard);
    free(buf);
    return rv;
}

int dp_ranks_record(const char *dir, uint32_t S, uint64_t from_step, int R,
                     const char (*hosts)[DP_HOST_MAX])
{
    char path[4096];
    int rv = ranks_path(path, sizeof path, dir);
    if (rv)
        return rv;
    json_t *root = NULL, *segs = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    rv = ovt_read_file(path, &buf, &len, DP_RANKS_MAX_FILE);
    if (rv == 0) {
        uint32_t S0 = 0;
        rv = ranks_parse(&root, &segs, &S0, (const char *)buf, len);
        free(buf);
        if (rv == 0 && S0 != S) {
            json_decref(root);
            return ovt_fail(OVT_EFORMAT, "%s records %u shards, the run has %u", path, S0, S);
        }
        if (rv)
            return ovt_fail_wrap(rv, "%s", path);
    } else if (rv != OVT_ENOTFOUND) {
        return rv;
    } else {
        root = json_pack("{s:i, s:I, s:[]}", "version", 1, "shards", (json_int_t)S, "segments");
        segs = json_object_get(root, "segments");
    }
    /* drop what this run does again */
    for (size_t k = json_array_size(segs); k-- > 0;)
        if ((uint64_t)json_integer_value(json_object_get(json_array_get(segs, k), "from_step")) >= from_step)
            json_array_remove(segs, k);
    json_t *hl = json_array();
    for (int r = 0; r < R; r++)
        json_array_append_new(hl, json_string(hosts[r]));
    size_t n = json_array_size(segs);
    json_t *last = n ? json_array_get(segs, n - 1) : NULL;
    if (last && json_integer_value(json_object_get(last, "processes")) == R &&
        json_equal(json_object_get(last, "hosts"), hl)) {
        json_decref(hl);
    } else {
        json_array_append_new(segs, json_pack("{s:I, s:i, s:o}", "from_step", (json_int_t)from_step, "processes", R,
                                              "hosts", hl));
    }
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory for ranks.json");
    rv = ovt_write_atomic(path, text, strlen(text), 0644);
    free(text);
    return rv;
}
