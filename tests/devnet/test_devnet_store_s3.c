/* An s3:// store against s3rver (npm, pinned in package.json: a Node
 * S3-compatible server that checks AWS SigV4 signatures), started by the
 * test on 127.0.0.1 (free port, temporary directory, one bucket), reached
 * through AWS_ENDPOINT_URL (label devnet):
 *   - through store/store.h: an unknown key id is refused with a message
 *     that names the AWS variables and not the secret; with the right keys a blob
 *     and a streamed file go up signed and come back, a second put is not
 *     stored again (s3rver logs one store of it), the manifest is replaced;
 *   - a full `ovt devnet --fault bitflip` dispute with --store s3://BUCKET/PREFIX:
 *     the trainer publishes by signed PUT, the auditor and the arbiter fetch
 *     by signed GET (the arbiter rules on the bitflip only with state j-1
 *     from the store), and the verdict is auditor right.
 * s3rver checks the form of the SigV4 Authorization header and its key id
 * but does not recompute the signature: test_sigv4 does, with botocore
 * (sigv4_server.py). Not covered: virtual-hosted bucket URLs on
 * amazonaws.com; session tokens (x-amz-security-token); IAM policies; TLS.
 * Skipped (exit 77) when s3rver is not installed (npm ci). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "support/anvil.h"
#include "support/proc.h"
#include "support/servers.h"
#include "store/store.h"

#define SKIP 77
#define BUCKET "ovt-test"

static char dir[] = "/tmp/ovt-s3-XXXXXX";
static char s3_log[300];

static int log_count(const char *needle)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(s3_log, &buf, &len, 1 << 26))
        return -1;
    int n = 0;
    for (const char *p = (char *)buf; (p = strstr(p, needle)); p++)
        n++;
    free(buf);
    return n;
}

static void test_store_api(void)
{
    store_ctx *s = NULL;
    CHECK(store_open(&s, "s3://" BUCKET "/api") == 0);
    CHECK(store_open(&(store_ctx *){NULL}, "s3://Bad_Bucket/x") == OVT_EINVAL);
    if (!s)
        return;
    const char blob[] = "a blob published to S3";
    ovt_hash name;
    /* an unknown key id: refused (s3rver parses the SigV4 Authorization
     * header and looks the key id up; it does not recompute the signature) */
    setenv("AWS_ACCESS_KEY_ID", "NOTAKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-xyzzy", 1);
    CHECK(store_put(s, blob, sizeof blob, &name) == OVT_EIO);
    CHECK_MSG(strstr(ovt_errmsg(), "403") && strstr(ovt_errmsg(), "AWS_SECRET_ACCESS_KEY"), "%s", ovt_errmsg());
    CHECK(strstr(ovt_errmsg(), "xyzzy") == NULL);
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    unsetenv("AWS_SECRET_ACCESS_KEY");
    CHECK(store_put(s, blob, sizeof blob, &name) == OVT_EINVAL); /* an id without a secret */
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);

    CHECK(store_put(s, blob, sizeof blob, &name) == 0);
    char hex[65], stored[200];
    ovt_hex_encode(hex, name.b, 32);
    snprintf(stored, sizeof stored, "Stored object \"api/blob/%s\"", hex);
    CHECK_EQ_U64(log_count(stored), 1);
    CHECK(store_has(s, &name) == 1);
    CHECK(store_put(s, blob, sizeof blob, NULL) == 0);
    CHECK_EQ_U64(log_count(stored), 1); /* not sent again */
    uint8_t *got;
    size_t len;
    CHECK(store_get(s, &name, 1 << 20, &got, &len) == 0 && len == sizeof blob && memcmp(got, blob, len) == 0);
    free(got);
    ovt_hash missing = {{0x5a}};
    CHECK(store_get(s, &missing, 1 << 20, &got, &len) == OVT_ENOTFOUND);
    CHECK(store_has(s, &missing) == 0);

    size_t big = 2u << 20;
    uint8_t *data = malloc(big);
    CHECK(data != NULL);
    if (!data)
        return;
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 40503u >> 7);
    char fpath[300];
    snprintf(fpath, sizeof fpath, "%s/big.bin", dir);
    CHECK(ovt_write_atomic(fpath, data, big, 0644) == 0);
    ovt_hash fname;
    CHECK(store_put_file(s, fpath, &fname) == 0);
    CHECK(store_get(s, &fname, big, &got, &len) == 0 && len == big && memcmp(got, data, big) == 0);
    free(got);
    free(data);

    store_manifest m = {.steps = 3}, back;
    memset(m.run_id.b, 0x22, 32);
    CHECK(store_put_manifest(s, &m) == 0);
    m.steps = 5;
    CHECK(store_put_manifest(s, &m) == 0);
    CHECK(store_get_manifest(s, &m.run_id, &back) == 0);
    CHECK_EQ_U64(back.steps, 5);
    store_close(s);
}

static void test_dispute(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    char ovt[4096];
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    char *argv[] = {ovt, "devnet", "--fault", "bitflip", "--steps", "16", "--batch", "2", "--seq", "16",
                    "--store", "s3://" BUCKET "/runs", "--json", NULL};
    char *out = NULL;
    int st = tsup_run(argv, &out);
    CHECK_MSG(st == 0, "ovt devnet exited %d", st);
    CHECK_MSG(out && strstr(out, "\"outcome\": \"auditor-right\""), "%s", out ? out : "(no output)");
    free(out);
    CHECK(log_count("Stored object \"runs/run/") >= 1);
    CHECK(log_count("Stored object \"runs/state/") >= 1);
}

/* The signatures themselves, checked by botocore (the AWS SDK's signer) in
 * tests/devnet/sigv4_server.py: right keys pass for PUT, HEAD and GET, a
 * wrong secret or another region fails with 403. Skipped (with a note) when
 * Debian's python3-botocore is not installed. */
static void test_sigv4(void)
{
    const char *src = getenv("OVT_SOURCE_DIR");
    if (tsup_runl(NULL, "/usr/bin/python3", "-c", "import botocore.auth", NULL) != 0) {
        printf("note: python3-botocore not installed; SigV4 signatures not checked\n");
        return;
    }
    char script[4200], root[300], log[300], port_s[16], endpoint[64];
    snprintf(script, sizeof script, "%s/tests/devnet/sigv4_server.py", src ? src : ".");
    snprintf(root, sizeof root, "%s/sigv4", dir);
    snprintf(log, sizeof log, "%s/sigv4.log", dir);
    int port = tsup_free_port();
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    CHECK(ovt_mkdirs(root, 0755) == 0);
    char *argv[] = {"/usr/bin/python3", script, port_s, root, "AKIDSIGTEST", "sig-secret-q9", "us-west-2", NULL};
    pid_t pid = tsup_spawn(argv, log);
    int ready = 0, st;
    for (int i = 0; pid > 0 && i < 300 && !ready; i++) {
        uint8_t *buf;
        size_t len;
        if (ovt_read_file(log, &buf, &len, 1 << 20) == 0) {
            ready = strstr((char *)buf, "ready") != NULL;
            free(buf);
        }
        if (!ready && tsup_exited(pid, &st))
            break;
        if (!ready)
            tsup_sleep_ms(100);
    }
    CHECK_MSG(ready, "sigv4_server.py did not start; see %s", log);
    if (!ready) {
        tsup_stop(pid);
        return;
    }
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", "AKIDSIGTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "sig-secret-q9", 1);
    setenv("AWS_REGION", "us-west-2", 1);
    store_ctx *s = NULL;
    CHECK(store_open(&s, "s3://sigbucket/p") == 0);
    if (s) {
        const char blob[] = "signed by libcurl, checked by botocore";
        ovt_hash name;
        CHECK_MSG(store_put(s, blob, sizeof blob, &name) == 0, "%s", ovt_errmsg());
        CHECK(store_has(s, &name) == 1);
        uint8_t *got;
        size_t len;
        CHECK(store_get(s, &name, 1 << 20, &got, &len) == 0 && len == sizeof blob);
        free(got);
        char fpath[300];
        snprintf(fpath, sizeof fpath, "%s/sig.bin", dir);
        static uint8_t data[300000];
        for (size_t i = 0; i < sizeof data; i++)
            data[i] = (uint8_t)(i * 7 + 3);
        CHECK(ovt_write_atomic(fpath, data, sizeof data, 0644) == 0);
        ovt_hash fname;
        CHECK(store_put_file(s, fpath, &fname) == 0);
        CHECK(store_get(s, &fname, sizeof data, &got, &len) == 0 && len == sizeof data &&
              memcmp(got, data, len) == 0);
        free(got);
        store_manifest m = {.steps = 2};
        memset(m.run_id.b, 0x33, 32);
        CHECK(store_put_manifest(s, &m) == 0);

        const char other[] = "never stored";
        setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-q9", 1);
        CHECK(store_put(s, other, sizeof other, NULL) == OVT_EIO);
        CHECK(strstr(ovt_errmsg(), "403") != NULL && strstr(ovt_errmsg(), "wrong-secret") == NULL);
        setenv("AWS_SECRET_ACCESS_KEY", "sig-secret-q9", 1);
        setenv("AWS_REGION", "eu-central-1", 1);
        CHECK(store_get(s, &name, 1 << 20, &got, &len) != 0);
        setenv("AWS_REGION", "us-west-2", 1);
        store_close(s);
    }
    tsup_stop(pid);
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(log, &buf, &len, 1 << 20) == 0);
    if (buf) {
        CHECK(strstr((char *)buf, "PUT /sigbucket/p/blob/") && strstr((char *)buf, "GET /sigbucket/p/state/") == NULL);
        CHECK(strstr((char *)buf, "HEAD /sigbucket/p/blob/") != NULL);
        CHECK(strstr((char *)buf, " 403\n") != NULL);
        free(buf);
    }
}

int main(void)
{
    char s3rver[4200];
    const char *src = getenv("OVT_SOURCE_DIR");
    const char *env = getenv("OVT_S3RVER");
    snprintf(s3rver, sizeof s3rver, "%s", env && *env ? env : "");
    if (!s3rver[0])
        snprintf(s3rver, sizeof s3rver, "%s/node_modules/.bin/s3rver", src ? src : ".");
    if (access(s3rver, X_OK) != 0) {
        printf("SKIP: s3rver is not installed (npm ci; or set OVT_S3RVER)\n");
        return SKIP;
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int port = tsup_free_port();
    char data[300], port_s[16], endpoint[64];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(s3_log, sizeof s3_log, "%s/s3rver.log", dir);
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    CHECK(port > 0 && ovt_mkdirs(data, 0755) == 0);
    char *argv[] = {s3rver, "-d", data, "-a", "127.0.0.1", "-p", port_s, "--no-vhost-buckets", "--configure-bucket",
                    BUCKET, NULL};
    pid_t pid = tsup_spawn(argv, s3_log);
    int ready = 0, st;
    char body[4096], url[128];
    snprintf(url, sizeof url, "%s/", endpoint);
    for (int i = 0; pid > 0 && i < 300 && !ready; i++) { /* it answers (any status) once it listens */
        ready = tsup_http_get(url, body, sizeof body) > 0;
        if (!ready && tsup_exited(pid, &st))
            break;
        if (!ready)
            tsup_sleep_ms(100);
    }
    CHECK_MSG(ready, "s3rver did not start; see %s", s3_log);
    CHECK_RUN(test_sigv4());
    if (ready) {
        /* s3rver's fixed test credentials; the region is part of the signature */
        setenv("AWS_ENDPOINT_URL", endpoint, 1);
        setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
        setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
        setenv("AWS_REGION", "us-east-1", 1);
        unsetenv("AWS_ENDPOINT_URL_S3");
        unsetenv("AWS_SESSION_TOKEN");
        CHECK_RUN(test_store_api());
        CHECK_RUN(test_dispute());
    }
    tsup_stop(pid);
    int rv = tsup_finish_dir(dir, check_done());
    return rv;
}
