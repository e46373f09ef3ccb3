/* The safetensors container (see safetensors.h). */
#include "modelio/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/fileio.h"

static const struct {
    const char *name;
    unsigned size;
} dtypes[] = {
    [TRN_ST_BOOL] = {"BOOL", 1}, [TRN_ST_U8] = {"U8", 1},   [TRN_ST_I8] = {"I8", 1},
    [TRN_ST_F8_E5M2] = {"F8_E5M2", 1}, [TRN_ST_F8_E4M3] = {"F8_E4M3", 1}, [TRN_ST_I16] = {"I16", 2},
    [TRN_ST_U16] = {"U16", 2}, [TRN_ST_F16] = {"F16", 2}, [TRN_ST_BF16] = {"BF16", 2},
    [TRN_ST_I32] = {"I32", 4}, [TRN_ST_U32] = {"U32", 4}, [TRN_ST_F32] = {"F32", 4},
    [TRN_ST_F64] = {"F64", 8}, [TRN_ST_I64] = {"I64", 8}, [TRN_ST_U64] = {"U64", 8},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

const char *trn_st_dtype_name(trn_st_dtype d)
{
    return (size_t)d < NDTYPES ? dtypes[d].name : "?";
}

int trn_st_sniff(const uint8_t *head, size_t n)
{
    if (n < 9)
        return 0;
    uint64_t len = ovt_get_le64(head);
    return len >= 2 && len <= TRN_ST_MAX_HEADER && head[8] == '{';
}

void trn_st_free(trn_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->ntensors; i++)
        free(f->t[i].name);
    for (size_t i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->t);
    free(f->meta);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

static int parse_metadata(trn_st_file *f, json_t *m, const char *what)
{
    if (!json_is_object(m))
        return ovt_fail(OVT_EFORMAT, "%s: \"__metadata__\" is not an object", what);
    f->meta = calloc(json_object_size(m) + 1, sizeof *f->meta);
    if (!f->meta)
        return ovt_fail(OVT_ENOMEM, "out of memory for the metadata of %s", what);
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!json_is_string(v))
            return ovt_fail(OVT_EFORMAT, "%s: metadata \"%s\" is not a string (safetensors metadata holds only "
                                         "strings)",
                            what, key);
        trn_st_meta *e = &f->meta[f->nmeta++];
        if (!(e->key = strdup(key)) || !(e->value = strdup(json_string_value(v))))
            return ovt_fail(OVT_ENOMEM, "out of memory for the metadata of %s", what);
    }
    return 0;
}

static int parse_u64(uint64_t *out, json_t *v)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* One tensor entry: exactly dtype, shape and data_offsets, all valid, with
 * a byte length equal to its size. */
static int parse_tensor(trn_st_tensor *t, const char *name, json_t *e, const char *what)
{
    if (!json_is_object(e))
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" is not an object", what, name);
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
    if (!dt || !sh || !off || json_object_size(e) != 3)
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" must have exactly \"dtype\", \"shape\" and "
                                     "\"data_offsets\"",
                        what, name);
    size_t d = 0;
    while (d < NDTYPES && !(json_is_string(dt) && strcmp(json_string_value(dt), dtypes[d].name) == 0))
        d++;
    if (d == NDTYPES)
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" has an unknown dtype %s", what, name,
                        json_is_string(dt) ? json_string_value(dt) : "(not a string)");
    t->dtype = (trn_st_dtype)d;
    if (!json_is_array(sh) || json_array_size(sh) > TRN_ST_MAX_DIMS)
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\": \"shape\" is not an array of at most %d sizes", what,
                        name, TRN_ST_MAX_DIMS);
    t->ndim = (uint32_t)json_array_size(sh);
    t->elements = 1;
    for (uint32_t k = 0; k < t->ndim; k++) {
        if (parse_u64(&t->shape[k], json_array_get(sh, k)))
            return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\": shape[%u] is not a size", what, name, k);
        if (t->shape[k] && t->elements > UINT64_MAX / 8 / t->shape[k])
            return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\": its shape overflows", what, name);
        t->elements *= t->shape[k];
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || parse_u64(&t->begin, json_array_get(off, 0)) ||
        parse_u64(&t->end, json_array_get(off, 1)) || t->end < t->begin)
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\": \"data_offsets\" is not [begin, end] with begin <= end",
                        what, name);
    if (t->end - t->begin != t->elements * dtypes[d].size)
        return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" spans %llu bytes, its shape and dtype need %llu", what,
                        name, (unsigned long long)(t->end - t->begin),
                        (unsigned long long)(t->elements * dtypes[d].size));
    return (t->name = strdup(name)) ? 0 : ovt_fail(OVT_ENOMEM, "out of memory for %s", what);
}

static int by_begin(const void *a, const void *b)
{
    const trn_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors, in data order, must tile the data section exactly: no
 * overlap, no hole, nothing past the end and nothing after the last. */
static int check_tiling(trn_st_file *f, size_t data_at, const char *what)
{
    qsort(f->t, f->ntensors, sizeof *f->t, by_begin);
    uint64_t at = 0, data_len = f->len - data_at;
    for (size_t i = 0; i < f->ntensors; i++) {
        trn_st_tensor *t = &f->t[i];
        if (t->begin < at)
            return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" (bytes %llu..%llu) overlaps \"%s\"", what, t->name,
                            (unsigned long long)t->begin, (unsigned long long)t->end, f->t[i - 1].name);
        if (t->begin > at)
            return ovt_fail(OVT_EFORMAT, "%s: bytes %llu..%llu of the data belong to no tensor", what,
                            (unsigned long long)at, (unsigned long long)t->begin);
        if (t->end > data_len)
            return ovt_fail(OVT_EFORMAT, "%s: tensor \"%s\" ends at byte %llu, past the data's %llu (truncated "
                                         "file?)",
                            what, t->name, (unsigned long long)t->end, (unsigned long long)data_len);
        t->data = f->buf + data_at + t->begin;
        at = t->end;
    }
    if (at != data_len)
        return ovt_fail(OVT_EFORMAT, "%s: %llu bytes after the last tensor's data", what,
                        (unsigned long long)(data_len - at));
    return 0;
}

static int parse_header(trn_st_file *f, json_t *h, size_t data_at, const char *what)
{
    f->t = calloc(json_object_size(h) + 1, sizeof *f->t);
    if (!f->t)
        return ovt_fail(OVT_ENOMEM, "out of memory for the header of %s", what);
    const char *key;
    json_t *v;
    int rv = 0;
    json_object_foreach(h, key, v) {
        if (strcmp(key, "__metadata__") == 0)
            rv = parse_metadata(f, v, what);
        else if (!(rv = parse_tensor(&f->t[f->ntensors], key, v, what)))
            f->ntensors++;
        if (rv)
            return rv;
    }
    return check_tiling(f, data_at, what);
}

int trn_st_parse(trn_st_file *out, uint8_t *buf, size_t len, const char *what)
{
    memset(out, 0, sizeof *out);
    out->buf = buf;
    out->len = len;
    if (len < 8) {
        trn_st_free(out);
        return ovt_fail(OVT_EFORMAT, "%s: %zu bytes, shorter than the 8-byte header length", what, len);
    }
    uint64_t n = ovt_get_le64(buf);
    if (n > TRN_ST_MAX_HEADER || n > len - 8) {
        trn_st_free(out);
        return ovt_fail(OVT_EFORMAT, "%s: header length %llu is past the file's %zu bytes or the limit of %zu",
                        what, (unsigned long long)n, len, TRN_ST_MAX_HEADER);
    }
    if (n < 2 || buf[8] != '{') {
        trn_st_free(out);
        return ovt_fail(OVT_EFORMAT, "%s: the header does not open with '{'", what);
    }
    json_error_t err;
    json_t *h = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    int rv = json_is_object(h) ? parse_header(out, h, 8 + (size_t)n, what)
                               : ovt_fail(OVT_EFORMAT, "%s: the header is not a JSON object (%s, column %d)", what,
                                          err.text, err.column);
    json_decref(h);
    if (rv)
        trn_st_free(out);
    return rv;
}

int trn_st_read(trn_st_file *out, const char *path, size_t max_len)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, max_len);
    return rv ? rv : trn_st_parse(out, buf, len, path);
}

const trn_st_tensor *trn_st_find(const trn_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->ntensors; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}

const char *trn_st_meta_get(const trn_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

static uint64_t out_bytes(const trn_st_out *t)
{
    uint64_t n = dtypes[t->dtype].size;
    for (uint32_t k = 0; k < t->ndim; k++)
        n *= t->shape[k];
    return n;
}

/* The header JSON, padded with spaces to end 8-byte aligned (with its
 * length prefix), into *head (malloc'd, the 8 length bytes first). */
static int header_encode(uint8_t **head, size_t *head_len, const trn_st_out *t, size_t n, const trn_st_meta *meta,
                         size_t nmeta)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, "__metadata__") == 0)
            return ovt_fail(OVT_EINVAL, "safetensors: a tensor cannot be called \"__metadata__\"");
    json_t *h = json_object(), *m = json_object();
    for (size_t i = 0; i < nmeta; i++)
        json_object_set_new(m, meta[i].key, json_string(meta[i].value));
    if (nmeta)
        json_object_set(h, "__metadata__", m);
    json_decref(m);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (uint32_t k = 0; k < t[i].ndim; k++)
            json_array_append_new(shape, json_integer((json_int_t)t[i].shape[k]));
        uint64_t len = out_bytes(&t[i]);
        json_object_set_new(h, t[i].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtypes[t[i].dtype].name,
                                                    "shape", shape, "data_offsets", (json_int_t)at,
                                                    (json_int_t)(at + len)));
        at += len;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t want = n + (nmeta > 0);
    int complete = json_object_size(h) == want;
    json_decref(h);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory for a safetensors header");
    if (!complete) {
        free(text);
        return ovt_fail(OVT_EINVAL, "safetensors: tensor names and metadata keys must be distinct UTF-8");
    }
    size_t len = strlen(text), padded = (len + 8 + 7) / 8 * 8 - 8;
    *head = malloc(8 + padded);
    if (!*head) {
        free(text);
        return ovt_fail(OVT_ENOMEM, "out of memory for a safetensors header");
    }
    ovt_put_le64(*head, padded);
    memcpy(*head + 8, text, len);
    memset(*head + 8 + len, ' ', padded - len);
    *head_len = 8 + padded;
    free(text);
    return 0;
}

int trn_st_write(const char *path, const trn_st_out *t, size_t n, const trn_st_meta *meta, size_t nmeta)
{
    uint8_t *head = NULL;
    size_t head_len = 0;
    int rv = header_encode(&head, &head_len, t, n, meta, nmeta);
    if (rv)
        return rv;
    ovt_span *parts = calloc(n + 1, sizeof *parts);
    if (!parts) {
        free(head);
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu tensors", n);
    }
    parts[0] = (ovt_span){head, head_len};
    for (size_t i = 0; i < n; i++)
        parts[i + 1] = (ovt_span){t[i].data, (size_t)out_bytes(&t[i])};
    rv = ovt_write_atomic_parts(path, parts, n + 1, 0644);
    free(parts);
    free(head);
    return rv;
}
