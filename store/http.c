/* Uploads to an http(s):// artifact store (see store_http.h). */
#include "store/http.h"

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
    char basic[SECRET_MAX];   /* user:password, or for S3 key id:secret */
    char session[SECRET_MAX]; /* S3: AWS_SESSION_TOKEN */
    char sigv4[128];          /* S3: "aws:amz:REGION:s3" */
    int has_token, has_basic, has_session, s3;
};

static void auth_wipe(struct auth *a)
{
    volatile char *p = (volatile char *)a;
    for (size_t i = 0; i < sizeof *a; i++)
        p[i] = 0;
}

/* S3 (s3:// stores): AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
 * AWS_SESSION_TOKEN), signed with SigV4 by libcurl for the region of
 * AWS_REGION / AWS_DEFAULT_REGION (us-east-1 if neither). Without keys the
 * requests go unsigned (reads of a public bucket). */
static int auth_load_s3(struct auth *a)
{
    memset(a, 0, sizeof *a);
    a->s3 = 1;
    const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
    const char *session = getenv("AWS_SESSION_TOKEN");
    snprintf(a->sigv4, sizeof a->sigv4, "aws:amz:%s:s3", store_s3_region());
    if ((id && *id) != (secret && *secret))
        return ovt_fail(OVT_EINVAL, "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for an s3:// store, or "
                        "neither (unsigned reads of a public bucket)");
    if (!id || !*id)
        return 0;
    if (strlen(id) + strlen(secret) + 2 > sizeof a->basic || (session && strlen(session) >= sizeof a->session))
        return ovt_fail(OVT_EINVAL, "the AWS credentials in the environment are too long");
    size_t il = strlen(id), sl = strlen(secret);
    memcpy(a->basic, id, il);
    a->basic[il] = ':';
    memcpy(a->basic + il + 1, secret, sl + 1);
    a->has_basic = 1;
    if (session && *session) {
        memcpy(a->session, session, strlen(session) + 1);
        a->has_session = 1;
    }
    return 0;
}

static int auth_load(struct auth *a, int s3)
{
    if (s3)
        return auth_load_s3(a);
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
    if (a->s3) {
        /* the payload is not hashed into the signature (it may be a
         * gigabyte streamed from disk); the object's name is its hash */
        *hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (*hdrs && a->has_session) {
            char h[SECRET_MAX + 32];
            snprintf(h, sizeof h, "x-amz-security-token: %s", a->session);
            struct curl_slist *more = curl_slist_append(*hdrs, h);
            memset(h, 0, sizeof h);
            if (more)
                *hdrs = more;
        }
        if (a->has_basic) {
            curl_easy_setopt(c, CURLOPT_AWS_SIGV4, a->sigv4);
            curl_easy_setopt(c, CURLOPT_USERPWD, a->basic);
        }
    } else if (a->has_token) {
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
    if ((status == 401 || status == 403) && strstr(base, "://") && store_s3_is(base))
        return ovt_fail(OVT_EIO, "%s on %s: the server refused the request (HTTP %ld); check AWS_ACCESS_KEY_ID, "
                        "AWS_SECRET_ACCESS_KEY, AWS_REGION and the bucket's permissions", what, base, status);
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
    /* S3 answers a missing key with 403 to a caller without s3:ListBucket:
     * not found, as far as we can tell; a PUT with bad keys fails on its own */
    if (status == 403 && a->s3)
        return 0;
    if (status != 200)
        return status_error(status, what, base);
    *found = 1;
    if (cl >= 0)
        *size = (uint64_t)cl;
    return 0;
}

int store_http_head(const char *base, const char *rel, int *found, uint64_t *size)
{
    struct auth a;
    int rv = auth_load(&a, store_s3_is(base));
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
    int rv = auth_load(&a, store_s3_is(base));
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

int store_http_put(const char *base, const char *rel, const void *data, size_t len, int replace)
{
    struct source src = {.data = data ? data : (const uint8_t *)"", .size = len, .rel = rel};
    return put_source(base, rel, &src, replace);
}

int store_http_put_file(const char *base, const char *rel, const char *path, uint64_t size, int replace)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ovt_fail_errno(OVT_EIO, "opening %s to upload it", path);
    struct source src = {.f = f, .size = size, .rel = rel};
    int rv = put_source(base, rel, &src, replace);
    fclose(f);
    return rv;
}

int store_http_put_blob_file(const char *base, const char *path, ovt_hash *name)
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
    return store_http_put_file(base, rel, path, size, 0);
}

/* --- s3:// stores */

/* The https (or endpoint) URLs that s3:// stores resolved to, so that the
 * functions above, given a base URL, know to sign (a store opened as s3://
 * registers its base here; at most a few per process). */
static pthread_mutex_t s3_lock = PTHREAD_MUTEX_INITIALIZER;
static char s3_bases[8][1024];
static int s3_nbases;

int store_s3_is(const char *base)
{
    pthread_mutex_lock(&s3_lock);
    int found = 0;
    for (int i = 0; i < s3_nbases && !found; i++)
        found = strncmp(base, s3_bases[i], strlen(s3_bases[i])) == 0;
    pthread_mutex_unlock(&s3_lock);
    return found;
}

const char *store_s3_region(void)
{
    const char *r = getenv("AWS_REGION");
    if (!r || !*r)
        r = getenv("AWS_DEFAULT_REGION");
    return r && *r ? r : "us-east-1";
}

int store_s3_resolve(char *out, size_t cap, const char *url)
{
    const char *rest = url + 5; /* after s3:// */
    size_t blen = strcspn(rest, "/");
    if (strncmp(url, "s3://", 5) != 0 || blen == 0 || blen > 63)
        return ovt_fail(OVT_EINVAL, "store URL '%s' must be s3://BUCKET[/PREFIX]", url);
    for (size_t i = 0; i < blen; i++) {
        char ch = rest[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
            return ovt_fail(OVT_EINVAL, "'%.*s' is not an S3 bucket name (lower-case letters, digits, '-', '.')",
                            (int)blen, rest);
    }
    const char *prefix = rest + blen; /* "" or "/..." */
    const char *ep = getenv("AWS_ENDPOINT_URL_S3");
    if (!ep || !*ep)
        ep = getenv("AWS_ENDPOINT_URL");
    int n;
    if (ep && *ep) {
        if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
            return ovt_fail(OVT_EINVAL, "AWS_ENDPOINT_URL '%s' must start with http:// or https://", ep);
        size_t elen = strlen(ep);
        while (elen > 0 && ep[elen - 1] == '/')
            elen--;
        n = snprintf(out, cap, "%.*s/%.*s%s", (int)elen, ep, (int)blen, rest, prefix); /* path style */
    } else {
        n = snprintf(out, cap, "https://%.*s.s3.%s.amazonaws.com%s", (int)blen, rest, store_s3_region(), prefix);
    }
    if (n < 0 || (size_t)n >= cap)
        return ovt_fail(OVT_EINVAL, "store URL '%s' is too long", url);
    size_t len = strlen(out);
    while (len > 0 && out[len - 1] == '/')
        out[--len] = '\0';
    pthread_mutex_lock(&s3_lock);
    int known = 0;
    for (int i = 0; i < s3_nbases && !known; i++)
        known = strcmp(s3_bases[i], out) == 0;
    if (!known && s3_nbases < 8 && len < sizeof s3_bases[0])
        snprintf(s3_bases[s3_nbases++], sizeof s3_bases[0], "%s", out);
    pthread_mutex_unlock(&s3_lock);
    return 0;
}

struct store_http_get_auth {
    struct auth a;
    struct curl_slist *hdrs;
};

int store_http_get_sign(void *curl, const char *url, struct store_http_get_auth **out)
{
    *out = NULL;
    if (!store_s3_is(url))
        return 0; /* plain http(s) reads stay anonymous */
    struct store_http_get_auth *g = calloc(1, sizeof *g);
    if (!g)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int rv = auth_load(&g->a, 1);
    if (rv) {
        free(g);
        return rv;
    }
    CURL *c = curl;
    g->hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (g->hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, g->hdrs);
    if (g->a.has_basic) {
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, g->a.sigv4);
        curl_easy_setopt(c, CURLOPT_USERPWD, g->a.basic);
    }
    *out = g;
    return 0;
}

void store_http_get_done(struct store_http_get_auth *g)
{
    if (!g)
        return;
    curl_slist_free_all(g->hdrs);
    auth_wipe(&g->a);
    free(g);
}
