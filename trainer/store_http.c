/* Uploads to an http(s):// artifact store (see store_http.h). */
#include "trainer/store_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fileio.h"

#define PUT_PROGRESS_MIN ((uint64_t)64 << 20) /* progress lines for files from this size */
#define SECRET_MAX 4096

/* Reads a credential from NAME or NAME_FILE into out (NUL-terminated).
 * 1 found, 0 none, negative on error (the message names the variable, not
 * the value). */
static int secret_from_env(const char *name, char *out, size_t cap)
{
    char file_var[64];
    snprintf(file_var, sizeof file_var, "%s_FILE", name);
    const char *v = getenv(name), *path = getenv(file_var);
    if (v && *v && path && *path)
        return ovt_fail(OVT_EINVAL, "both %s and %s are set: keep one", name, file_var);
    if (v && *v) {
        if (strlen(v) >= cap)
            return ovt_fail(OVT_EINVAL, "%s is longer than %zu bytes", name, cap - 1);
        memcpy(out, v, strlen(v) + 1);
        return 1;
    }
    if (!path || !*path)
        return 0;
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, cap - 1);
    if (rv)
        return ovt_fail_wrap(rv, "%s", file_var);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    memcpy(out, buf, len);
    out[len] = '\0';
    memset(buf, 0, len);
    free(buf);
    if (len == 0)
        return ovt_fail(OVT_EINVAL, "%s names an empty file", file_var);
    return 1;
}

struct auth {
    char token[SECRET_MAX];
    char basic[SECRET_MAX];
    int has_token, has_basic;
};

static void auth_wipe(struct auth *a)
{
    volatile char *p = (volatile char *)a;
    for (size_t i = 0; i < sizeof *a; i++)
        p[i] = 0;
}

static int auth_load(struct auth *a)
{
    memset(a, 0, sizeof *a);
    int t = secret_from_env("OVT_STORE_BEARER_TOKEN", a->token, sizeof a->token);
    if (t < 0)
        return t;
    int b = secret_from_env("OVT_STORE_BASIC_AUTH", a->basic, sizeof a->basic);
    if (b < 0) {
        auth_wipe(a);
        return b;
    }
    if (t && b) {
        auth_wipe(a);
        return ovt_fail(OVT_EINVAL, "both a bearer token and basic auth are set for the store: keep one");
    }
    if (b && !strchr(a->basic, ':')) {
        auth_wipe(a);
        return ovt_fail(OVT_EINVAL, "OVT_STORE_BASIC_AUTH must be user:password");
    }
    a->has_token = t;
    a->has_basic = b;
    return 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* A handle for one request to base/rel with the credentials set; *hdrs is
 * the header list to free after the request. */
/* Reply bodies (an error page, a WebDAV status) are not ours to print. */
static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

static int handle(CURL **out, struct curl_slist **hdrs, const char *base, const char *rel, const struct auth *a)
{
    *out = NULL;
    *hdrs = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return ovt_fail(OVT_EIO, "libcurl did not initialise: %s", curl_easy_strerror(curl_init_rc));
    CURL *c = curl_easy_init();
    if (!c)
        return ovt_fail(OVT_ENOMEM, "libcurl: no handle");
    char url[4096];
    int n = snprintf(url, sizeof url, "%s/%s", base, rel);
    if (n < 0 || (size_t)n >= sizeof url) {
        curl_easy_cleanup(c);
        return ovt_fail(OVT_EINVAL, "store URL %s/%s is too long", base, rel);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    if (a->has_token) {
        char h[SECRET_MAX + 32];
        snprintf(h, sizeof h, "Authorization: Bearer %s", a->token);
        *hdrs = curl_slist_append(NULL, h);
        memset(h, 0, sizeof h);
        if (!*hdrs) {
            curl_easy_cleanup(c);
            return ovt_fail(OVT_ENOMEM, "out of memory");
        }
    } else if (a->has_basic) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, a->basic);
    }
    if (*hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    *out = c;
    return 0;
}

static void handle_free(CURL *c, struct curl_slist *hdrs)
{
    /* curl_slist_free_all frees without wiping; the token is in the list's
     * strings, so overwrite them first */
    for (struct curl_slist *h = hdrs; h; h = h->next)
        memset(h->data, 0, strlen(h->data));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
}

static int status_error(long status, const char *what, const char *base)
{
    if (status == 401 || status == 403)
        return ovt_fail(OVT_EIO, "%s on %s: the server refused the credentials (HTTP %ld); set "
                        "OVT_STORE_BEARER_TOKEN(_FILE) or OVT_STORE_BASIC_AUTH(_FILE) to ones it accepts", what,
                        base, status);
    if (status == 405 || status == 501)
        return ovt_fail(OVT_EIO, "%s on %s: the server does not accept uploads (HTTP %ld); it needs PUT "
                        "enabled (e.g. nginx's dav_methods PUT)", what, base, status);
    return ovt_fail(OVT_EIO, "%s on %s: the server answered HTTP %ld", what, base, status);
}

static int head_with(const char *base, const char *rel, const struct auth *a, int *found, uint64_t *size)
{
    *found = 0;
    *size = UINT64_MAX;
    CURL *c;
    struct curl_slist *hdrs;
    int rv = handle(&c, &hdrs, base, rel, a);
    if (rv)
        return rv;
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_off_t cl = -1;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    handle_free(c, hdrs);
    char what[600];
    snprintf(what, sizeof what, "checking %s", rel);
    if (cc != CURLE_OK)
        return ovt_fail(OVT_EIO, "%s on %s: %s", what, base, curl_easy_strerror(cc));
    if (status == 404 || status == 410)
        return 0;
    if (status != 200)
        return status_error(status, what, base);
    *found = 1;
    if (cl >= 0)
        *size = (uint64_t)cl;
    return 0;
}

int trn_store_http_head(const char *base, const char *rel, int *found, uint64_t *size)
{
    struct auth a;
    int rv = auth_load(&a);
    if (rv)
        return rv;
    rv = head_with(base, rel, &a, found, size);
    auth_wipe(&a);
    return rv;
}

/* The body of a PUT: from memory, or from a file. */
struct source {
    const uint8_t *data;
    FILE *f;
    uint64_t size, sent;
    const char *rel;
    int progress;
    uint64_t next_report;
    int read_error;
};

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    struct source *s = arg;
    size_t want = size * n;
    if (want > s->size - s->sent)
        want = (size_t)(s->size - s->sent);
    size_t got;
    if (s->data) {
        memcpy(buf, s->data + s->sent, want);
        got = want;
    } else {
        got = fread(buf, 1, want, s->f);
        if (got < want && ferror(s->f)) {
            s->read_error = errno ? errno : EIO;
            return CURL_READFUNC_ABORT;
        }
        if (got == 0 && want > 0) {
            s->read_error = -1; /* the file shrank under us */
            return CURL_READFUNC_ABORT;
        }
    }
    s->sent += got;
    if (s->progress && s->sent >= s->next_report) {
        fprintf(stderr, "  uploading %s: %llu of %llu MiB\n", s->rel, (unsigned long long)(s->sent >> 20),
                (unsigned long long)(s->size >> 20));
        s->next_report += s->size / 8 > (1u << 20) ? s->size / 8 : (1u << 20);
    }
    return got;
}

static int put_source(const char *base, const char *rel, struct source *src, int replace)
{
    struct auth a;
    int rv = auth_load(&a);
    if (rv)
        return rv;
    if (!replace) {
        int found;
        uint64_t size;
        if ((rv = head_with(base, rel, &a, &found, &size))) {
            auth_wipe(&a);
            return rv;
        }
        if (found && size == src->size) {
            auth_wipe(&a);
            return 0; /* already there: its name fixes its bytes */
        }
    }
    CURL *c;
    struct curl_slist *hdrs;
    if ((rv = handle(&c, &hdrs, base, rel, &a))) {
        auth_wipe(&a);
        return rv;
    }
    src->progress = src->size >= PUT_PROGRESS_MIN;
    src->next_report = src->size / 8;
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, src);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)src->size);
    /* no redirects for a PUT: credentials must not follow to another host */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    struct curl_slist *more = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
    if (more) {
        hdrs = more;
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    }
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    handle_free(c, hdrs);
    auth_wipe(&a);
    char what[600];
    snprintf(what, sizeof what, "uploading %s", rel);
    if (src->read_error)
        return ovt_fail(OVT_EIO, "%s: reading the file failed (%s)", what,
                        src->read_error > 0 ? strerror(src->read_error) : "it became shorter while it was sent");
    if (cc != CURLE_OK)
        return ovt_fail(OVT_EIO, "%s to %s: %s (run the command again: objects already there are not re-sent)",
                        what, base, curl_easy_strerror(cc));
    if (status != 200 && status != 201 && status != 204)
        return status_error(status, what, base);
    return 0;
}

int trn_store_http_put(const char *base, const char *rel, const void *data, size_t len, int replace)
{
    struct source src = {.data = data ? data : (const uint8_t *)"", .size = len, .rel = rel};
    return put_source(base, rel, &src, replace);
}

int trn_store_http_put_file(const char *base, const char *rel, const char *path, uint64_t size, int replace)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ovt_fail_errno(OVT_EIO, "opening %s to upload it", path);
    struct source src = {.f = f, .size = size, .rel = rel};
    int rv = put_source(base, rel, &src, replace);
    fclose(f);
    return rv;
}

int trn_store_http_put_blob_file(const char *base, const char *path, ovt_hash *name)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ovt_fail_errno(OVT_EIO, "opening %s to publish it", path);
    ovt_sha256_ctx *h = ovt_sha256_new();
    if (!h) {
        fclose(f);
        return ovt_fail(OVT_ENOMEM, "out of memory for a digest");
    }
    enum { CHUNK = 1 << 20 };
    uint8_t *chunk = malloc(CHUNK);
    uint64_t size = 0;
    size_t n;
    while (chunk && (n = fread(chunk, 1, CHUNK, f)) > 0) {
        ovt_sha256_update(h, chunk, n);
        size += n;
    }
    int bad = !chunk || ferror(f);
    free(chunk);
    fclose(f);
    ovt_hash hash;
    ovt_sha256_final(h, &hash);
    if (bad)
        return ovt_fail(OVT_EIO, "reading %s to publish it failed", path);
    if (name)
        *name = hash;
    char rel[80], hex[65];
    ovt_hex_encode(hex, hash.b, 32);
    snprintf(rel, sizeof rel, "blob/%s", hex);
    return trn_store_http_put_file(base, rel, path, size, 0);
}
