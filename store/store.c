/* The artifact store: file:// and http(s):// (see store.h). */
#include "store/store.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/metrics.h"
#include "store/http.h"

/* The largest manifest a get accepts. */
#define STORE_MAX_MANIFEST ((size_t)1 << 16)

#define STORE_MAX_EXPECT 16

struct store_ctx {
    char *url;  /* as given, without trailing slashes */
    char *dir;  /* file://: the directory; NULL for http(s) */
    size_t max_blob;
    struct {
        ovt_hash name;
        size_t max;
    } expect[STORE_MAX_EXPECT];
    unsigned nexpect;
    double deadline; /* CLOCK_MONOTONIC seconds; 0: none */
    volatile sig_atomic_t *stop;
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void store_set_max_blob(store_ctx *s, size_t max_len)
{
    s->max_blob = max_len;
}

void store_expect(store_ctx *s, const ovt_hash *name, size_t max_len)
{
    unsigned i = 0;
    while (i < s->nexpect && memcmp(s->expect[i].name.b, name->b, 32) != 0)
        i++;
    if (i == STORE_MAX_EXPECT) /* full: the oldest gives way */
        memmove(s->expect, s->expect + 1, sizeof s->expect[0] * --i);
    else if (i == s->nexpect)
        s->nexpect++;
    s->expect[i].name = *name;
    s->expect[i].max = max_len;
}

void store_set_deadline(store_ctx *s, double seconds)
{
    s->deadline = seconds > 0 ? mono_now() + seconds : 0;
}

void store_set_stop(store_ctx *s, volatile sig_atomic_t *stop)
{
    s->stop = stop;
}

/* The cap of a get: the caller's, the name's and the store's. */
static size_t cap_of(const store_ctx *s, const char *kind, const ovt_hash *name, size_t max_len)
{
    size_t cap = max_len;
    if (!strcmp(kind, "blob") && s->max_blob < cap)
        cap = s->max_blob;
    for (unsigned i = 0; i < s->nexpect; i++)
        if (memcmp(s->expect[i].name.b, name->b, 32) == 0 && s->expect[i].max < cap)
            cap = s->expect[i].max;
    return cap;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int store_open(store_ctx **out, const char *url)
{
    *out = NULL;
    char s3_base[1024];
    if (strncmp(url, "s3://", 5) == 0 && store_s3_resolve(s3_base, sizeof s3_base, url))
        return OVT_EINVAL;
    url = strncmp(url, "s3://", 5) == 0 ? s3_base : url;
    size_t n = strlen(url);
    while (n > 1 && url[n - 1] == '/')
        n--;
    int is_file = strncmp(url, "file://", 7) == 0;
    if (!is_file && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return ovt_fail(OVT_EINVAL, "store URL '%s' must start with file://, http://, https:// or s3://", url);
    if (is_file && (n <= 7 || url[7] != '/'))
        return ovt_fail(OVT_EINVAL, "store URL '%s' needs an absolute path (file:///DIR)", url);
    store_ctx *s = calloc(1, sizeof *s);
    if (s)
        s->max_blob = STORE_MAX_BLOB_DEFAULT;
    if (!s || !(s->url = strndup(url, n)) || (is_file && !(s->dir = strndup(url + 7, n - 7)))) {
        store_close(s);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

void store_close(store_ctx *s)
{
    if (!s)
        return;
    free(s->url);
    free(s->dir);
    free(s);
}

const char *store_url_of(const store_ctx *s)
{
    return s->url;
}

static int object_path(char *out, size_t cap, const char *base, const char *kind, const ovt_hash *name,
                       const char *ext)
{
    char hex[65];
    ovt_hex_encode(hex, name->b, 32);
    int n = snprintf(out, cap, "%s/%s/%s%s", base, kind, hex, ext);
    if (n < 0 || (size_t)n >= cap)
        return ovt_fail(OVT_EINVAL, "store path under %s is too long", base);
    return 0;
}

/* http(s)://: PUT, after a HEAD unless replace (store/http.h). */
static int store_write_http(store_ctx *s, const char *kind, const ovt_hash *name, const char *ext, const void *data,
                            size_t len, int replace)
{
    char rel[128], hex[65];
    ovt_hex_encode(hex, name->b, 32);
    snprintf(rel, sizeof rel, "%s/%s%s", kind, hex, ext);
    return store_http_put(s->url, rel, data, len, replace);
}

/* Writes an object unless it is already there. */
static int store_write(store_ctx *s, const char *kind, const ovt_hash *name, const char *ext, const void *data,
                       size_t len, int replace)
{
    if (!s->dir)
        return store_write_http(s, kind, name, ext, data, len, replace);
    char path[4096];
    int rv = object_path(path, sizeof path, s->dir, kind, name, "");
    if (rv)
        return rv;
    *strrchr(path, '/') = '\0';
    if ((rv = ovt_mkdirs(path, 0755)))
        return rv;
    if ((rv = object_path(path, sizeof path, s->dir, kind, name, ext)))
        return rv;
    struct stat sb;
    if (!replace && stat(path, &sb) == 0)
        return 0;
    return ovt_write_atomic(path, data, len, 0644);
}

/* An HTTP body on its way: to an unlinked temporary file, never more than
 * max bytes. */
struct body {
    FILE *f;
    size_t len, max;
    size_t seen; /* bytes libcurl handed over, the refused ones included */
    int too_big, io_error;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    struct body *b = arg;
    size_t n = size * nmemb;
    b->seen += n;
    if (n > b->max - b->len) {
        b->too_big = 1;
        return 0;
    }
    if (fwrite(p, 1, n, b->f) != n) {
        b->io_error = 1;
        return 0;
    }
    b->len += n;
    return n;
}

/* Called by libcurl at least once a second while it waits: a stop request
 * or the deadline ends the transfer at once. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    const store_ctx *s = arg;
    return (s->stop && *s->stop) || (s->deadline > 0 && mono_now() >= s->deadline);
}

static FILE *temp_file(void)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/ovt-fetch-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    unlink(path);
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        close(fd);
    return f;
}

static int http_get(store_ctx *s, const char *url, const char *what, size_t max_len, uint8_t **data, size_t *len)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return ovt_fail(OVT_EIO, "libcurl did not initialise: %s", curl_easy_strerror(curl_init_rc));
    if (s->stop && *s->stop)
        return ovt_fail(OVT_EIO, "fetching %s from %s: stopped (SIGINT/SIGTERM)", what, s->url);
    double left = s->deadline > 0 ? s->deadline - mono_now() : 0;
    if (s->deadline > 0 && left <= 0)
        return ovt_fail(OVT_EIO, "fetching %s from %s: the fetch deadline has passed", what, s->url);
    struct body b = {.max = max_len};
    if (!(b.f = temp_file()))
        return ovt_fail_errno(OVT_EIO, "fetching %s: cannot create a temporary file (set TMPDIR)", what);
    CURL *c = curl_easy_init();
    if (!c) {
        fclose(b.f);
        return ovt_fail(OVT_ENOMEM, "libcurl: no handle");
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    if (s->deadline > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(left * 1000) + 1);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
    /* A declared Content-Length over the cap: refused before any byte. */
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                     max_len < (size_t)INT64_MAX ? (curl_off_t)max_len : (curl_off_t)INT64_MAX);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    struct store_http_get_auth *auth = NULL;
    if (store_http_get_sign(c, url, &auth)) {
        curl_easy_cleanup(c);
        fclose(b.f);
        return ovt_fail_wrap(OVT_EINVAL, "fetching %s from %s", what, s->url);
    }
    CURLcode cc = curl_easy_perform(c);
    store_http_get_done(auth);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    int rv = 0;
    if (b.too_big)
        rv = ovt_fail(OVT_EFORMAT, "%s from %s is larger than the %zu bytes it can be (refused after %zu bytes)", what,
                      s->url, b.max, b.seen);
    else if (cc == CURLE_FILESIZE_EXCEEDED)
        rv = ovt_fail(OVT_EFORMAT, "%s from %s is larger than the %zu bytes it can be (its Content-Length says so; "
                      "refused before the body)", what, s->url, b.max);
    else if (b.io_error)
        rv = ovt_fail_errno(OVT_EIO, "fetching %s: writing the temporary file failed", what);
    else if (s->stop && *s->stop)
        rv = ovt_fail(OVT_EIO, "fetching %s from %s: stopped (SIGINT/SIGTERM)", what, s->url);
    else if (cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_ABORTED_BY_CALLBACK)
        rv = ovt_fail(OVT_EIO, "fetching %s from %s: not complete by the fetch deadline (%zu bytes came)", what,
                      s->url, b.len);
    else if (cc != CURLE_OK)
        rv = ovt_fail(OVT_EIO, "fetching %s from %s: %s", what, s->url, curl_easy_strerror(cc));
    else if (status == 404 || status == 410)
        rv = ovt_fail(OVT_ENOTFOUND, "%s is not in the store %s (HTTP %ld)", what, s->url, status);
    else if (status != 200)
        rv = ovt_fail(OVT_EIO, "fetching %s from %s: the server answered HTTP %ld", what, s->url, status);
    uint8_t *buf = NULL;
    if (!rv && !(buf = malloc(b.len + 1)))
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %s (%zu bytes)", what, b.len);
    if (!rv && (fflush(b.f) != 0 || fseek(b.f, 0, SEEK_SET) != 0 || fread(buf, 1, b.len, b.f) != b.len))
        rv = ovt_fail_errno(OVT_EIO, "fetching %s: reading the temporary file back failed", what);
    fclose(b.f);
    if (rv) {
        free(buf);
        return rv;
    }
    buf[b.len] = 0;
    *data = buf;
    *len = b.len;
    return 0;
}

/* Reads an object (no hash check yet). */
static int store_read(store_ctx *s, const char *kind, const ovt_hash *name, const char *ext, size_t max_len,
                      uint8_t **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    char path[4096], what[128], hex[65];
    ovt_hex_encode(hex, name->b, 32);
    snprintf(what, sizeof what, "%s %.16s...", kind, hex);
    int rv = object_path(path, sizeof path, s->dir ? s->dir : s->url, kind, name, ext);
    if (rv)
        return rv;
    max_len = cap_of(s, kind, name, max_len);
    if (!s->dir) {
        rv = http_get(s, path, what, max_len, data, len);
        ovt_metrics_add(rv ? OVT_METRIC_STORE_FETCH_FAILURES : OVT_METRIC_STORE_FETCH_BYTES, rv ? 1 : *len);
        ovt_metrics_add(OVT_METRIC_STORE_FETCHES, rv ? 0 : 1);
        return rv;
    }
    rv = ovt_read_file(path, data, len, max_len);
    ovt_metrics_add(rv ? OVT_METRIC_STORE_FETCH_FAILURES : OVT_METRIC_STORE_FETCH_BYTES, rv ? 1 : *len);
    ovt_metrics_add(OVT_METRIC_STORE_FETCHES, rv ? 0 : 1);
    if (rv == OVT_ENOTFOUND)
        return ovt_fail(OVT_ENOTFOUND, "%s is not in the store %s", what, s->url);
    return rv ? ovt_fail_wrap(rv, "store %s", s->url) : 0;
}

int store_put(store_ctx *s, const void *data, size_t len, ovt_hash *name)
{
    ovt_hash h;
    ovt_sha256(&h, data, len);
    if (name)
        *name = h;
    return store_write(s, "blob", &h, "", data, len, 0);
}

int store_put_file(store_ctx *s, const char *path, ovt_hash *name)
{
    if (!s->dir) /* streamed: a checkpoint or dataset may be larger than memory allows */
        return store_http_put_blob_file(s->url, path, name);
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, (size_t)1 << 40);
    if (rv)
        return rv;
    rv = store_put(s, buf, len, name);
    free(buf);
    return rv;
}

int store_has(store_ctx *s, const ovt_hash *name)
{
    char path[4096];
    struct stat sb;
    if (!s->dir) {
        char rel[80], hex[65];
        int found;
        uint64_t size;
        ovt_hex_encode(hex, name->b, 32);
        snprintf(rel, sizeof rel, "blob/%s", hex);
        return store_http_head(s->url, rel, &found, &size) == 0 && found;
    }
    return s->dir && object_path(path, sizeof path, s->dir, "blob", name, "") == 0 && stat(path, &sb) == 0;
}

int store_get(store_ctx *s, const ovt_hash *name, size_t max_len, uint8_t **data, size_t *len)
{
    int rv = store_read(s, "blob", name, "", max_len, data, len);
    if (rv)
        return rv;
    ovt_hash h;
    ovt_sha256(&h, *data, *len);
    if (memcmp(h.b, name->b, 32) != 0) {
        char hex[65];
        ovt_hex_encode(hex, name->b, 32);
        free(*data);
        *data = NULL;
        *len = 0;
        return ovt_fail(OVT_ECRYPTO, "blob %s from %s does not match its hash (corrupt or forged)", hex, s->url);
    }
    return 0;
}

int store_put_state(store_ctx *s, const ovt_hash *state_hash, const void *data, size_t len)
{
    return store_write(s, "state", state_hash, "", data, len, 0);
}

int store_get_state(store_ctx *s, const ovt_hash *state_hash, size_t max_len, uint8_t **data, size_t *len)
{
    return store_read(s, "state", state_hash, "", max_len, data, len);
}

int store_put_block(store_ctx *s, const ovt_hash *claim, const void *data, size_t len)
{
    return store_write(s, "block", claim, "", data, len, 0);
}

int store_get_block(store_ctx *s, const ovt_hash *claim, size_t max_len, uint8_t **data, size_t *len)
{
    return store_read(s, "block", claim, "", max_len, data, len);
}

static void hex_field(char out[65], const ovt_hash *h)
{
    ovt_hex_encode(out, h->b, 32);
}

int store_put_manifest(store_ctx *s, const store_manifest *m)
{
    char rid[65], ch[65], dh[65], sh[65];
    hex_field(rid, &m->run_id);
    hex_field(ch, &m->config_hash);
    hex_field(dh, &m->dataset_hash);
    hex_field(sh, &m->steps_hash);
    json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I}", "version", 1, "run_id", rid, "config", ch, "dataset",
                          dh, "steps_table", sh, "steps", (json_int_t)m->steps);
    if (j && m->has_ranks) {
        char rh[65];
        hex_field(rh, &m->ranks_hash);
        json_object_set_new(j, "ranks", json_string(rh));
    }
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory for a manifest");
    int rv = store_write(s, "run", &m->run_id, ".json", text, strlen(text), 1);
    free(text);
    return rv;
}

static int json_hash(ovt_hash *out, json_t *j, const char *key)
{
    const char *v = json_string_value(json_object_get(j, key));
    if (!v || strlen(v) != 64 || ovt_hex_decode(out->b, 32, v))
        return ovt_fail(OVT_EFORMAT, "run manifest: \"%s\" is not 32 bytes of hex", key);
    return 0;
}

int store_get_manifest(store_ctx *s, const ovt_hash *run_id, store_manifest *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rv = store_read(s, "run", run_id, ".json", STORE_MAX_MANIFEST, &buf, &len);
    if (rv)
        return rv;
    json_error_t jerr;
    json_t *j = json_loadb((const char *)buf, len, 0, &jerr);
    free(buf);
    if (!j)
        return ovt_fail(OVT_EFORMAT, "run manifest from %s is not JSON: %s", s->url, jerr.text);
    json_t *steps = json_object_get(j, "steps");
    if (json_integer_value(json_object_get(j, "version")) != 1)
        rv = ovt_fail(OVT_EFORMAT, "run manifest from %s: unknown version", s->url);
    else if (!json_is_integer(steps) || json_integer_value(steps) < 1)
        rv = ovt_fail(OVT_EFORMAT, "run manifest from %s: \"steps\" must be a positive integer", s->url);
    if (!rv && !(rv = json_hash(&out->run_id, j, "run_id")) && !(rv = json_hash(&out->config_hash, j, "config")) &&
        !(rv = json_hash(&out->dataset_hash, j, "dataset")) && !(rv = json_hash(&out->steps_hash, j, "steps_table")))
        out->steps = (uint64_t)json_integer_value(steps);
    /* optional, and only a hint: a malformed one is as if absent */
    if (!rv && json_is_string(json_object_get(j, "ranks"))) {
        if (json_hash(&out->ranks_hash, j, "ranks") == 0)
            out->has_ranks = true;
        else
            ovt_err_clear();
    }
    json_decref(j);
    if (!rv && memcmp(out->run_id.b, run_id->b, 32) != 0)
        rv = ovt_fail(OVT_ECRYPTO, "run manifest from %s names another run", s->url);
    if (rv)
        memset(out, 0, sizeof *out);
    return rv;
}
