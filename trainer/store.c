#include "trainer/store.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

struct trn_store {
    char *base; /* the URL without a trailing slash */
    char *dir;  /* file:// only: the local folder */
};

int trn_store_open(trn_store **out, const char *url)
{
    *out = NULL;
    int is_file = strncmp(url, "file://", 7) == 0;
    if (!is_file && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return ovt_fail(OVT_EINVAL, "store URL must start with file://, http:// or https://");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return ovt_fail(OVT_EIO, "libcurl initialisation failed");
    trn_store *s = calloc(1, sizeof *s);
    if (!s || !(s->base = strdup(url))) {
        free(s);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    size_t n = strlen(s->base);
    while (n > 8 && s->base[n - 1] == '/')
        s->base[--n] = 0;
    if (is_file && !(s->dir = strdup(s->base + 7))) {
        trn_store_close(s);
        return ovt_fail(OVT_ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

void trn_store_close(trn_store *s)
{
    if (!s)
        return;
    free(s->base);
    free(s->dir);
    free(s);
}

struct sink {
    uint8_t *data;
    size_t len, cap, max;
    int too_big;
};

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    struct sink *k = ctx;
    size_t add = size * n;
    if (add > k->max - k->len) {
        k->too_big = 1;
        return 0;
    }
    if (k->len + add + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->len + add + 1)
            cap *= 2;
        uint8_t *d = realloc(k->data, cap);
        if (!d)
            return 0;
        k->data = d;
        k->cap = cap;
    }
    memcpy(k->data + k->len, p, add);
    k->len += add;
    k->data[k->len] = 0;
    return add;
}

/* BASE/<hex of name>. */
static int object_url(char *out, size_t cap, const char *base, const ovt_hash *name)
{
    char hex[65];
    ovt_hex_encode(hex, name->b, 32);
    int n = snprintf(out, cap, "%s/%s", base, hex);
    return n > 0 && (size_t)n < cap ? 0 : ovt_fail(OVT_EINVAL, "store URL is too long");
}

int trn_store_get(trn_store *s, const ovt_hash *name, uint8_t **data, size_t *len, size_t max_len)
{
    *data = NULL;
    *len = 0;
    char url[4200], hex[65];
    int rv = object_url(url, sizeof url, s->base, name);
    if (rv)
        return rv;
    ovt_hex_encode(hex, name->b, 32);
    CURL *c = curl_easy_init();
    if (!c)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    struct sink k = {.max = max_len};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 600000L);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (cc == CURLE_FILE_COULDNT_READ_FILE || status == 404 || status == 410)
        rv = ovt_fail(OVT_ENOTFOUND, "the store has no object %s", hex);
    else if (k.too_big)
        rv = ovt_fail(OVT_EFORMAT, "store object %s is larger than %zu bytes", hex, max_len);
    else if (cc != CURLE_OK)
        rv = ovt_fail(OVT_EIO, "fetching store object %s: %s", hex, curl_easy_strerror(cc));
    else if (strncmp(url, "file://", 7) != 0 && status != 200)
        rv = ovt_fail(OVT_EIO, "fetching store object %s: HTTP status %ld", hex, status);
    if (rv) {
        free(k.data);
        return rv;
    }
    if (!k.data && !(k.data = calloc(1, 1)))
        return ovt_fail(OVT_ENOMEM, "out of memory");
    *data = k.data;
    *len = k.len;
    return 0;
}

struct source {
    const uint8_t *p;
    size_t left;
};

static size_t on_read(char *out, size_t size, size_t n, void *ctx)
{
    struct source *src = ctx;
    size_t take = size * n < src->left ? size * n : src->left;
    memcpy(out, src->p, take);
    src->p += take;
    src->left -= take;
    return take;
}

int trn_store_put(trn_store *s, const ovt_hash *name, const void *data, size_t len)
{
    char url[4200];
    int rv;
    if (s->dir) {
        if ((rv = ovt_mkdirs(s->dir, 0755)) || (rv = object_url(url, sizeof url, s->dir, name)))
            return rv;
        return ovt_write_atomic(url, data, len, 0644);
    }
    if ((rv = object_url(url, sizeof url, s->base, name)))
        return rv;
    CURL *c = curl_easy_init();
    if (!c)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    struct source src = {data, len};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &src);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (cc != CURLE_OK)
        return ovt_fail(OVT_EIO, "storing an object: %s", curl_easy_strerror(cc));
    if (status < 200 || status >= 300)
        return ovt_fail(OVT_EIO, "storing an object: HTTP status %ld", status);
    return 0;
}
