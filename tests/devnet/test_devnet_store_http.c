/* Publishing to an http:// store over PUT, against Debian's nginx with its
 * WebDAV module (label devnet): the test starts nginx on 127.0.0.1 (free
 * port, temporary root, PUT allowed only with a bearer token, GET open) and
 *   - through store/store.h: an upload without the token is refused with
 *     a message that says which variable to set; with the token from a file
 *     a blob lands under its content address, a second put is not sent again
 *     (one PUT in nginx's log), a file is streamed and read back, an object
 *     of the wrong size on the server is sent again, the manifest is
 *     replaced, and no message ever holds the token;
 *   - a full `ovt devnet --fault bitflip` dispute with `--store` on nginx:
 *     the trainer publishes the run and the disputed step's inputs by PUT,
 *     the auditor and the arbiter fetch them by GET, and the verdict is
 *     auditor right.
 * Skipped (exit 77) when nginx or its WebDAV module is not installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "support/anvil.h"
#include "support/proc.h"
#include "support/servers.h"
#include "store/store.h"

#define SKIP 77
#define TOKEN "s3cr3t-t0ken-for-the-test-only"

static char dir[] = "/tmp/ovt-nginx-XXXXXX";
static char base_url[128], access_log[300];

/* Lines of nginx's access log that contain all of the needles. */
static int log_count(const char *a, const char *b)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(access_log, &buf, &len, 1 << 26))
        return -1;
    int n = 0;
    for (char *line = (char *)buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        n += strstr(line, a) && (!b || strstr(line, b));
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    return n;
}

/* log_count once it reaches `want`: nginx writes a request's line after it
 * has sent the response, so a client that has its answer may look before
 * the line is there. Waits for the line (up to 20 s, a loaded machine's
 * worst), then counts; more than `want` still shows. */
static int log_count_wait(const char *a, const char *b, int want)
{
    int n = log_count(a, b);
    for (int k = 0; k < 200 && n >= 0 && n < want; k++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        n = log_count(a, b);
    }
    return n;
}

static pid_t start_nginx(const char *nginx, int port)
{
    char conf[8192], path[300], www[300];
    snprintf(www, sizeof www, "%s/www", dir);
    snprintf(path, sizeof path, "%s/tmp", dir);
    if (ovt_mkdirs(www, 0755) || ovt_mkdirs(path, 0755))
        return -1;
    snprintf(access_log, sizeof access_log, "%s/access.log", dir);
    int n = snprintf(conf, sizeof conf,
                     "%s"
                     "worker_processes 1;\n"
                     "daemon off;\n"
                     "pid %s/nginx.pid;\n"
                     "error_log %s/error.log;\n"
                     "events { worker_connections 64; }\n"
                     "http {\n"
                     "  access_log %s;\n"
                     "  client_body_temp_path %s/tmp;\n"
                     "  proxy_temp_path %s/tmp;\n"
                     "  fastcgi_temp_path %s/tmp;\n"
                     "  uwsgi_temp_path %s/tmp;\n"
                     "  scgi_temp_path %s/tmp;\n"
                     "  client_max_body_size 0;\n"
                     "  map $http_authorization $token_ok { default 0; \"Bearer " TOKEN "\" 1; }\n"
                     "  map \"$request_method:$token_ok\" $deny { default 0; \"PUT:0\" 1; \"DELETE:0\" 1; }\n"
                     "  server {\n"
                     "    listen 127.0.0.1:%d;\n"
                     "    root %s;\n"
                     "    location / {\n"
                     "      if ($deny) { return 401; }\n"
                     "      dav_methods PUT;\n"
                     "      create_full_put_path on;\n"
                     "      dav_access user:rw group:r all:r;\n"
                     "    }\n"
                     "  }\n"
                     "}\n",
                     geteuid() == 0 ? "user root;\n" : "", dir, dir, access_log, dir, dir, dir, dir, dir, port, www);
    snprintf(path, sizeof path, "%s/nginx.conf", dir);
    if (ovt_write_atomic(path, conf, (size_t)n, 0644))
        return -1;
    char elog[300], prefix[300];
    snprintf(elog, sizeof elog, "%s/error.log", dir);
    snprintf(prefix, sizeof prefix, "%s/", dir);
    char *argv[] = {(char *)nginx, "-p", prefix, "-e", elog, "-c", path, NULL};
    char log[300];
    snprintf(log, sizeof log, "%s/nginx.out", dir);
    pid_t pid = tsup_spawn(argv, log);
    if (pid <= 0)
        return -1;
    char url[128], body[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    int st;
    for (int i = 0; i < 300; i++) { /* until it answers (any status), or exits */
        if (tsup_http_get(url, body, sizeof body) > 0)
            return pid;
        if (tsup_exited(pid, &st))
            return -1;
        tsup_sleep_ms(100);
    }
    tsup_stop(pid);
    return -1;
}

static int no_token_in(const char *msg)
{
    return strstr(msg, TOKEN) == NULL;
}

static void test_store_api(void)
{
    store_ctx *s = NULL;
    CHECK(store_open(&s, base_url) == 0);
    if (!s)
        return;
    unsetenv("OVT_STORE_BEARER_TOKEN");
    unsetenv("OVT_STORE_BEARER_TOKEN_FILE");
    const char blob[] = "a blob published over PUT";
    ovt_hash name;
    int rv = store_put(s, blob, sizeof blob, &name);
    CHECK(rv == OVT_EIO);
    CHECK_MSG(strstr(ovt_errmsg(), "401") && strstr(ovt_errmsg(), "OVT_STORE_BEARER_TOKEN"), "%s", ovt_errmsg());

    /* a wrong token: refused, and the message does not echo it */
    setenv("OVT_STORE_BEARER_TOKEN", "wrong-" TOKEN, 1);
    CHECK(store_put(s, blob, sizeof blob, &name) == OVT_EIO);
    CHECK(no_token_in(ovt_errmsg()));
    /* both sources at once: a clear error */
    char tok_path[300];
    snprintf(tok_path, sizeof tok_path, "%s/token", dir);
    CHECK(ovt_write_atomic(tok_path, TOKEN "\n", strlen(TOKEN) + 1, 0600) == 0);
    setenv("OVT_STORE_BEARER_TOKEN_FILE", tok_path, 1);
    CHECK(store_put(s, blob, sizeof blob, &name) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "keep one") != NULL);
    unsetenv("OVT_STORE_BEARER_TOKEN");

    /* the token from a file: the blob lands under its name */
    CHECK(store_put(s, blob, sizeof blob, &name) == 0);
    char hex[65], path[400], rel[100];
    ovt_hex_encode(hex, name.b, 32);
    snprintf(rel, sizeof rel, "/ovt/blob/%s", hex);
    snprintf(path, sizeof path, "%s/www%s", dir, rel);
    uint8_t *got;
    size_t len;
    CHECK(ovt_read_file(path, &got, &len, 1 << 20) == 0 && len == sizeof blob && memcmp(got, blob, len) == 0);
    free(got);
    CHECK(store_has(s, &name) == 1);
    /* again: a HEAD, no second PUT */
    CHECK(store_put(s, blob, sizeof blob, NULL) == 0);
    CHECK_EQ_U64(log_count_wait("\"PUT ", rel, 3), 3); /* the two refused above and one accepted */
    CHECK_EQ_U64(log_count_wait(rel, "\" 201 ", 1), 1);
    CHECK(log_count_wait("\"HEAD ", rel, 2) >= 2);
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == 0 && len == sizeof blob);
    free(got);

    /* a file, streamed, read back through the store */
    size_t big = 3u << 20;
    uint8_t *data = malloc(big);
    CHECK(data != NULL);
    if (!data)
        return;
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    char fpath[300];
    snprintf(fpath, sizeof fpath, "%s/big.bin", dir);
    CHECK(ovt_write_atomic(fpath, data, big, 0644) == 0);
    ovt_hash fname, expect;
    ovt_sha256(&expect, data, big);
    CHECK(store_put_file(s, fpath, &fname) == 0);
    CHECK_MEM(fname.b, expect.b, 32);
    CHECK(store_get(s, &fname, big, &got, &len) == 0 && len == big && memcmp(got, data, big) == 0);
    free(got);

    /* the server holds a truncated copy (an upload cut short elsewhere): sent again */
    ovt_hex_encode(hex, fname.b, 32);
    snprintf(rel, sizeof rel, "/ovt/blob/%s", hex);
    snprintf(path, sizeof path, "%s/www%s", dir, rel);
    CHECK(ovt_write_atomic(path, data, big / 2, 0644) == 0);
    CHECK(store_put_file(s, fpath, NULL) == 0);
    CHECK(ovt_read_file(path, &got, &len, big + 1) == 0 && len == big);
    free(got);
    CHECK_EQ_U64(log_count_wait("\"PUT ", rel, 2), 2);
    free(data);

    /* a large file: streamed with progress lines on stderr (captured here) */
    size_t large = (size_t)64 << 20;
    snprintf(fpath, sizeof fpath, "%s/large.bin", dir);
    FILE *lf = fopen(fpath, "wb");
    CHECK(lf != NULL);
    if (lf) {
        uint8_t block[4096];
        for (size_t off = 0; off < large; off += sizeof block) {
            for (size_t i = 0; i < sizeof block; i++)
                block[i] = (uint8_t)((off + i) * 2246822519u >> 11);
            fwrite(block, 1, sizeof block, lf);
        }
        CHECK(fclose(lf) == 0);
        char errp[300];
        snprintf(errp, sizeof errp, "%s/progress.txt", dir);
        fflush(stderr);
        int saved = dup(2);
        FILE *ef = fopen(errp, "w");
        if (ef && saved >= 0)
            dup2(fileno(ef), 2);
        ovt_hash lname;
        int prv = store_put_file(s, fpath, &lname);
        fflush(stderr);
        if (saved >= 0) {
            dup2(saved, 2);
            close(saved);
        }
        if (ef)
            fclose(ef);
        CHECK(prv == 0);
        uint8_t *progress;
        size_t plen;
        CHECK(ovt_read_file(errp, &progress, &plen, 1 << 20) == 0);
        if (progress) {
            CHECK_MSG(strstr((char *)progress, "uploading blob/") && strstr((char *)progress, "64 of 64 MiB"), "%s",
                      (char *)progress);
            free(progress);
        }
        ovt_hex_encode(hex, lname.b, 32);
        snprintf(path, sizeof path, "%s/www/ovt/blob/%s", dir, hex);
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && (size_t)sb.st_size == large);
    }

    /* the manifest is replaced each time */
    store_manifest m = {.steps = 3}, back;
    memset(m.run_id.b, 0x11, 32);
    CHECK(store_put_manifest(s, &m) == 0);
    m.steps = 4;
    CHECK(store_put_manifest(s, &m) == 0);
    CHECK(store_get_manifest(s, &m.run_id, &back) == 0);
    CHECK_EQ_U64(back.steps, 4);
    CHECK(no_token_in(ovt_errmsg()));
    store_close(s);
}

static void test_dispute(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    char ovt[4096], out_path[300];
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    snprintf(out_path, sizeof out_path, "%s/devnet.out", dir);
    int puts_before = log_count("\"PUT ", NULL), gets_before = log_count("\"GET /ovt/state/", NULL);
    char *argv[] = {ovt, "devnet", "--fault", "bitflip", "--steps", "16", "--batch", "2", "--seq", "16",
                    "--store", base_url, "--json", NULL};
    char *out = NULL;
    int st = tsup_run(argv, &out);
    CHECK_MSG(st == 0, "ovt devnet exited %d", st);
    CHECK_MSG(out && strstr(out, "\"outcome\": \"auditor-right\""), "%s", out ? out : "(no output)");
    CHECK(out && no_token_in(out));
    free(out);
    /* the trainer published by PUT; the arbiter read state j-1 by GET */
    CHECK(log_count_wait("\"PUT /ovt/run/", NULL, 1) >= 1);
    CHECK(log_count_wait("\"PUT /ovt/state/", NULL, 1) >= 1);
    CHECK(log_count_wait("\"PUT ", NULL, puts_before + 4) > puts_before + 3);
    CHECK(log_count_wait("\"GET /ovt/state/", " 200 ", gets_before + 1) > gets_before);
    CHECK(log_count_wait("\"GET /ovt/run/", " 200 ", 1) >= 1);
    CHECK_EQ_U64(log_count_wait("\"PUT ", "\" 401 ", 2), 2); /* only the two refusals of test_store_api */
}

int main(void)
{
    static const char *const nginxes[] = {"/usr/sbin/nginx", "/usr/local/sbin/nginx", NULL};
    const char *nginx = tsup_find_exe(nginxes);
    char *v = NULL;
    if (nginx)
        (void)tsup_runl(&v, "/bin/sh", "-c", "nginx -V 2>&1", NULL);
    if (!nginx || !v || !strstr(v, "http_dav_module")) {
        printf("SKIP: nginx with its WebDAV module is not installed (apt-get install nginx-light)\n");
        free(v);
        return SKIP;
    }
    free(v);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int port = tsup_free_port();
    pid_t pid = port > 0 ? start_nginx(nginx, port) : -1;
    CHECK_MSG(pid > 0, "nginx did not start; see %s/error.log", dir);
    if (pid > 0) {
        snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d/ovt", port);
        CHECK_RUN(test_store_api());
        CHECK_RUN(test_dispute());
        tsup_stop(pid);
    }
    int rv = tsup_finish_dir(dir, check_done());
    return rv;
}
