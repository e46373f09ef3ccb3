/* Tests of common/: error messages, hex, SHA-256 known answers, atomic writes. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/bytes.h"
#include "common/err.h"
#include "common/fileio.h"

static void test_sha256(void)
{
    /* FIPS 180-2 known answers. */
    ovt_hash h;
    char hex[65];
    ovt_sha256(&h, "abc", 3);
    ovt_hex_encode(hex, h.b, 32);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    ovt_sha256(&h, "", 0);
    ovt_hex_encode(hex, h.b, 32);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    ovt_sha256_ctx *c = ovt_sha256_new();
    ovt_sha256_update(c, "a", 1);
    ovt_sha256_update(c, "bc", 2);
    ovt_hash h2;
    ovt_sha256_final(c, &h2);
    ovt_sha256(&h, "abc", 3);
    CHECK_MEM(h.b, h2.b, 32);
}

static void test_hex(void)
{
    uint8_t b[4];
    CHECK(ovt_hex_decode(b, 4, "0xdeadBEEF") == 0);
    CHECK(b[0] == 0xde && b[3] == 0xef);
    CHECK(ovt_hex_decode(b, 4, "deadbee") == OVT_EFORMAT);
    CHECK(ovt_hex_decode(b, 4, "deadbeeg") == OVT_EFORMAT);
    CHECK(b[0] == 0 && b[3] == 0); /* zeroed on failure */
    CHECK(strstr(ovt_errmsg(), "invalid hex") != NULL);
    uint8_t *p;
    size_t n;
    CHECK(ovt_hex_decode_alloc(&p, &n, "0x") == 0 && n == 0);
    free(p);
    CHECK(ovt_hex_decode_alloc(&p, &n, "abc") == OVT_EFORMAT && p == NULL);
}

static void test_atomic_write(void)
{
    char dir[] = "/tmp/ovt-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    CHECK(ovt_path_join(path, sizeof path, dir, "a/b") == 0);
    char sub[256];
    snprintf(sub, sizeof sub, "%s/a", dir);
    CHECK(ovt_mkdirs(sub, 0755) == 0);
    CHECK(ovt_write_atomic(path, "secret", 6, 0600) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    uint8_t *data;
    size_t len;
    CHECK(ovt_read_file(path, &data, &len, 100) == 0 && len == 6 && memcmp(data, "secret", 6) == 0);
    free(data);
    CHECK(ovt_read_file(path, &data, &len, 5) == OVT_EFORMAT);
    snprintf(path, sizeof path, "%s/missing", dir);
    CHECK(ovt_read_file(path, &data, &len, 5) == OVT_ENOTFOUND);
    CHECK(strstr(ovt_errmsg(), "does not exist") != NULL);
    /* A write into a missing directory fails cleanly and leaves nothing. */
    snprintf(path, sizeof path, "%s/nodir/x", dir);
    CHECK(ovt_write_atomic(path, "x", 1, 0644) == OVT_EIO);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    CHECK_RUN(test_sha256());
    CHECK_RUN(test_hex());
    CHECK_RUN(test_atomic_write());
    return check_done();
}
