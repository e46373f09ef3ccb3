#ifndef OVT_TESTS_SUPPORT_OVT_FIXTURE_H
#define OVT_TESTS_SUPPORT_OVT_FIXTURE_H

/* Shared by the suites that run parties (auditor, store, party): a scratch directory, the built `ovt` run as a
 * child process, and a small gpt2-tiny run trained by it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "support/httpd.h"
#include "support/proc.h"

static char af_ovt[512];
static char af_dir[256];
static char af_text[512]; /* the dataset */

/* Creates the scratch directory and the dataset. 0 or -1. */
static inline int af_init(const char *name)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    snprintf(af_ovt, sizeof af_ovt, "%s/ovt", bin ? bin : ".");
    snprintf(af_dir, sizeof af_dir, "/tmp/ovt-%s-XXXXXX", name);
    if (!mkdtemp(af_dir))
        return -1;
    snprintf(af_text, sizeof af_text, "%s/text.txt", af_dir);
    char text[4096];
    size_t n = 0;
    static const char *words[] = {"the ", "grid ", "value ", "step ", "log ", "replay ", "round ", "midpoint "};
    uint64_t x = 7;
    while (n + 10 < sizeof text) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *w = words[(x >> 33) % 8];
        memcpy(text + n, w, strlen(w));
        n += strlen(w);
    }
    return ovt_write_atomic(af_text, text, n, 0644) == 0 ? 0 : -1;
}

/* Runs `ovt ARGS...` (NULL-terminated); *out (may be NULL) gets stdout. */
static inline int af_ovt_run(char **out, ...)
{
    char *argv[64];
    int n = 0;
    argv[n++] = af_ovt;
    va_list ap;
    va_start(ap, out);
    for (char *a; n < 63 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return tsup_run(argv, out);
}

/* Trains a gpt2-tiny run of `steps` steps into af_dir/NAME (checkpoints
 * every 8 steps). 0 or the exit status. */
static inline int af_train(const char *name, int steps, char *run_dir, size_t cap)
{
    snprintf(run_dir, cap, "%s/%s", af_dir, name);
    char s[16];
    snprintf(s, sizeof s, "%d", steps);
    char *out = NULL;
    int rv = af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", run_dir, "--steps", s,
                      "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--json", NULL);
    free(out);
    return rv;
}

/* A static file server for tsup_httpd: GET /s/PATH answers ROOT/PATH (404
 * if absent), any path containing /boom/ answers 500, corrupt flips a byte of
 * every body. Bodies are limited to tsup_http_reply's 64 KiB. */
typedef struct {
    tsup_httpd httpd;
    const char *root;
    int corrupt;
} af_server;

static inline void af_serve(void *ctx, const char *body, tsup_http_reply *reply)
{
    (void)body;
    af_server *srv = ctx;
    char path[1024], file[2048];
    if (sscanf(srv->httpd.request_line, "GET %1000s", path) != 1) {
        reply->status = 400;
        return;
    }
    if (strstr(path, "/boom/")) {
        reply->status = 500;
        snprintf(reply->body, sizeof reply->body, "internal error");
        return;
    }
    const char *rel = strstr(path, "/s/");
    snprintf(file, sizeof file, "%s/%s", srv->root, rel ? rel + 3 : "");
    uint8_t *buf;
    size_t len;
    if (!rel || ovt_read_file(file, &buf, &len, sizeof reply->body) != 0) {
        reply->status = 404;
        return;
    }
    memcpy(reply->body, buf, len);
    reply->body_len = len;
    if (srv->corrupt && len)
        reply->body[len / 2] ^= 1;
    free(buf);
}

static inline void af_cleanup(void)
{
    if (!getenv("OVT_KEEP_TMP"))
        (void)!tsup_runl(NULL, "/bin/rm", "-rf", af_dir, NULL);
}

#endif
