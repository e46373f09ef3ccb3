/* `ovt rlog`: the binary run on a log written here, its JSON read back and
 * compared with the log; the SHA-256 it prints against sha256sum; a damaged
 * file fails with status 1 and says why; a usage error is status 2. */
#include <jansson.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kernels/rlog.h"

static char ovt[512], dir[64] = "/tmp/ovt-rlogcmd-XXXXXX";

/* Runs a shell command, returns its exit status and up to cap bytes of stdout. */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (bin == NULL) {
        fprintf(stderr, "OVT_BINARY_DIR is not set (run through ctest)\n");
        return 1;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    CHECK(mkdtemp(dir) != NULL);
    char path[128], cmd[1024];
    static char out[1 << 16], sum[256];
    snprintf(path, sizeof path, "%s/step9.rlog", dir);

    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, UINT64_MAX - 1);
    CHECK(krn_rlog_add(log, 4, 100, 7, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(log, 4, 100, 90, KRN_DIR_DOWN, 0) == 0);
    CHECK(krn_rlog_add(log, 11, UINT64_MAX, UINT64_MAX - 5, KRN_DIR_VALUE, -0.375f) == 0);
    CHECK(krn_rlog_write_file(log, path) == 0);

    snprintf(cmd, sizeof cmd, "'%s' rlog --json --entries '%s'", ovt, path);
    CHECK(run(cmd, out, sizeof out) == 0);
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    CHECK_MSG(j != NULL, "not JSON: %s", out);
    if (j) {
        CHECK(strcmp(json_string_value(json_object_get(j, "step")), "18446744073709551614") == 0);
        CHECK(json_integer_value(json_object_get(j, "entries")) == 3);
        CHECK(json_integer_value(json_object_get(j, "values")) == 1);
        json_t *sites = json_object_get(j, "sites");
        CHECK(json_array_size(sites) == 2);
        json_t *s0 = json_array_get(sites, 0), *s1 = json_array_get(sites, 1);
        CHECK(json_integer_value(json_object_get(s0, "site")) == 4);
        CHECK(json_integer_value(json_object_get(s0, "n")) == 100);
        json_t *e1 = json_array_get(json_object_get(s0, "entries"), 1);
        CHECK(json_integer_value(json_object_get(e1, "index")) == 90);
        CHECK(strcmp(json_string_value(json_object_get(e1, "kind")), "down") == 0);
        json_t *v = json_array_get(json_object_get(s1, "entries"), 0);
        CHECK(strcmp(json_string_value(json_object_get(v, "index")), "18446744073709551610") == 0);
        CHECK(json_real_value(json_object_get(v, "value")) == -0.375);
        CHECK(strcmp(json_string_value(json_object_get(v, "bits")), "0xbec00000") == 0);
        /* the hash is the file's SHA-256 */
        snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
        CHECK(run(cmd, sum, sizeof sum) == 0);
        const char *h = json_string_value(json_object_get(j, "sha256"));
        CHECK(h != NULL && strlen(h) == 64 && strncmp(sum, h, 64) == 0);
        json_decref(j);
    }
    snprintf(cmd, sizeof cmd, "'%s' rlog '%s'", ovt, path);
    CHECK(run(cmd, out, sizeof out) == 0);
    CHECK(strstr(out, "entries  3 (2 directions, 1 values)") != NULL);

    /* a truncated copy */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.rlog", dir);
    snprintf(cmd, sizeof cmd, "head -c 60 '%s' > '%s' && '%s' rlog '%s' 2>&1", path, bad, ovt, bad);
    CHECK(run(cmd, out, sizeof out) == 1);
    CHECK_MSG(strstr(out, "truncated") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' rlog 2>&1", ovt);
    CHECK(run(cmd, out, sizeof out) == 2);
    snprintf(cmd, sizeof cmd, "'%s' rlog --help", ovt);
    CHECK(run(cmd, out, sizeof out) == 0 && strstr(out, "usage: ovt rlog") != NULL);

    unlink(path);
    unlink(bad);
    rmdir(dir);
    krn_rlog_free(log);
    return check_done();
}
