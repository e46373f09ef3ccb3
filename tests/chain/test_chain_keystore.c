/* Web3 v3 keystores: the spec's pbkdf2 example, a keystore `cast wallet new`
 * writes, ours read back by `cast wallet address`, geth's standard scrypt
 * parameters (beyond OpenSSL's default memory cap), wrong passwords,
 * corrupted and hostile files, and the `ovt keys` command. */
#include <jansson.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain/keystore.h"
#include "check.h"
#include "common/fileio.h"
#include "support/proc.h"

static char dir[256];
static const char *cast;

/* The PBKDF2-SHA-256 example of the Web3 Secret Storage definition. */
static const char spec_pbkdf2[] =
    "{\"crypto\":{\"cipher\":\"aes-128-ctr\",\"cipherparams\":{\"iv\":\"6087dab2f9fdbbfaddc31a909735c1e6\"},"
    "\"ciphertext\":\"5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46\",\"kdf\":\"pbkdf2\","
    "\"kdfparams\":{\"c\":262144,\"dklen\":32,\"prf\":\"hmac-sha256\","
    "\"salt\":\"ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd\"},"
    "\"mac\":\"517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2\"},"
    "\"id\":\"3198bc9c-6672-5ab3-d995-4942343ae5b6\",\"version\":3}";

static void test_spec_pbkdf2(void)
{
    chain_privkey k;
    chain_address a;
    int rc = chain_keystore_decrypt(&k, &a, spec_pbkdf2, strlen(spec_pbkdf2), "testpassword", 12);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    char hex[65];
    ovt_hex_encode(hex, k.b, 32);
    CHECK(strcmp(hex, "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d") == 0);
    rc = chain_keystore_decrypt(&k, &a, spec_pbkdf2, strlen(spec_pbkdf2), "testpassworD", 12);
    CHECK(rc == OVT_ECRYPTO && strstr(ovt_errmsg(), "MAC mismatch") != NULL);
    CHECK(strstr(ovt_errmsg(), "testpassworD") == NULL);
    /* The key is zeroed on failure. */
    static const uint8_t zero[32];
    CHECK_MEM(k.b, zero, 32);
}

static void test_cast_written(void)
{
    char kdir[300], *out = NULL;
    snprintf(kdir, sizeof kdir, "%s/cast", dir);
    CHECK(ovt_mkdirs(kdir, 0700) == 0);
    CHECK(tsup_runl(&out, cast, "wallet", "new", kdir, "--unsafe-password", "cast pw", NULL) == 0);
    /* "Created new encrypted keystore file: PATH\nAddress:    0x..." */
    char *file = out ? strstr(out, "file: ") : NULL, *addr = out ? strstr(out, "Address:") : NULL;
    CHECK(file && addr);
    if (!file || !addr) {
        free(out);
        return;
    }
    file += 6;
    *strchr(file, '\n') = '\0';
    addr += 8;
    while (*addr == ' ')
        addr++;
    chain_privkey k;
    chain_address a, want;
    CHECK(chain_address_from_string(&want, addr) == 0);
    int rc = chain_keystore_read(&k, &a, file, "cast pw", 7);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(chain_address_eq(&a, &want));
    CHECK(chain_keystore_read(&k, &a, file, "cast pw ", 8) == OVT_ECRYPTO);
    free(out);
}

static void test_ours_read_by_cast(void)
{
    chain_privkey k;
    chain_address a;
    char path[300], addr[43], *out = NULL;
    CHECK(chain_key_generate(&k) == 0 && chain_key_address(&a, &k) == 0);
    snprintf(path, sizeof path, "%s/ours.json", dir);
    chain_scrypt_params sp = {8192, 8, 1};
    CHECK(chain_keystore_write(path, &k, "p\xc3\xa4ss word", 10, &sp) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(tsup_runl(&out, cast, "wallet", "address", "--keystore", path, "--password", "p\xc3\xa4ss word", NULL) == 0);
    chain_address_to_string(addr, &a);
    CHECK_MSG(out && strcmp(out, addr) == 0, "cast %s ours %s", out, addr);
    free(out);
    /* Our reader agrees, and the file's address field is checked. */
    chain_privkey back;
    chain_address ba;
    CHECK(chain_keystore_read(&back, &ba, path, "p\xc3\xa4ss word", 10) == 0);
    CHECK(memcmp(back.b, k.b, 32) == 0 && chain_address_eq(&ba, &a));

    /* geth's standard parameters need 256 MiB: above OpenSSL's default cap. */
    snprintf(path, sizeof path, "%s/standard.json", dir);
    CHECK(chain_keystore_write(path, &k, "x", 1, NULL) == 0);
    int rc = chain_keystore_read(&back, &ba, path, "x", 1);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(memcmp(back.b, k.b, 32) == 0);
    ovt_wipe(&k, sizeof k);
    ovt_wipe(&back, sizeof back);
}

/* Replaces the first occurrence of from with to in a copy of s. */
static char *replaced(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    if (!at)
        return NULL;
    size_t n = strlen(s) - strlen(from) + strlen(to);
    char *r = malloc(n + 1);
    size_t head = (size_t)(at - s);
    memcpy(r, s, head);
    strcpy(r + head, to);
    strcat(r, at + strlen(from));
    return r;
}

static void test_bad_files(void)
{
    chain_privkey k;
    chain_address a;
    struct {
        const char *from, *to;
        int code;
        const char *msg;
    } cases[] = {
        {"5318b4d5", "5318b4d6", OVT_ECRYPTO, "MAC mismatch"},
        {"\"c\":262144", "\"c\":999999999", OVT_EFORMAT, "pbkdf2 c="},
        {"\"kdf\":\"pbkdf2\"", "\"kdf\":\"argon2\"", OVT_EFORMAT, "unsupported kdf"},
        {"\"version\":3", "\"version\":4", OVT_EFORMAT, "version 3"},
        {"aes-128-ctr", "aes-128-cbc", OVT_EFORMAT, "aes-128-ctr"},
        {"\"dklen\":32", "\"dklen\":16", OVT_EFORMAT, "dklen"},
        {"6087dab2f9fdbbfaddc31a909735c1e6", "6087", OVT_EFORMAT, "iv"},
        {"\"prf\":\"hmac-sha256\"", "\"prf\":\"hmac-sha1\"", OVT_EFORMAT, "prf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *json = replaced(spec_pbkdf2, cases[i].from, cases[i].to);
        CHECK(json != NULL);
        if (!json)
            continue;
        int rc = chain_keystore_decrypt(&k, &a, json, strlen(json), "testpassword", 12);
        CHECK_MSG(rc == cases[i].code && strstr(ovt_errmsg(), cases[i].msg) != NULL, "case %zu: %d %s", i, rc,
                  ovt_errmsg());
        free(json);
    }
    /* Truncated JSON. */
    CHECK(chain_keystore_decrypt(&k, &a, spec_pbkdf2, 100, "testpassword", 12) == OVT_EFORMAT);
    /* Hostile scrypt parameters are refused before any work. */
    const char *hostile =
        "{\"crypto\":{\"cipher\":\"aes-128-ctr\",\"cipherparams\":{\"iv\":\"00000000000000000000000000000000\"},"
        "\"ciphertext\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"kdf\":\"scrypt\","
        "\"kdfparams\":{\"dklen\":32,\"n\":1099511627776,\"r\":8,\"p\":1,\"salt\":\"00\"},"
        "\"mac\":\"0000000000000000000000000000000000000000000000000000000000000000\"},\"version\":3}";
    CHECK(chain_keystore_decrypt(&k, &a, hostile, strlen(hostile), "x", 1) == OVT_EFORMAT);
    char *odd = replaced(hostile, "1099511627776", "1000");
    CHECK(chain_keystore_decrypt(&k, &a, odd, strlen(odd), "x", 1) == OVT_EFORMAT);
    free(odd);
    /* A missing file. */
    CHECK(chain_keystore_read(&k, &a, "/nonexistent/keystore.json", "x", 1) != 0);
}

/* Reads what the child writes to the terminal until `want` shows up (or 10 s
 * pass); the text read is appended to buf. */
static int read_until(int fd, char *buf, size_t cap, const char *want)
{
    size_t len = strlen(buf);
    for (int waited = 0; waited < 10000 && !strstr(buf, want); waited += 50) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) > 0) {
            ssize_t n = read(fd, buf + len, cap - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            buf[len] = '\0';
        }
    }
    return strstr(buf, want) != NULL;
}

/* The prompt on a terminal: `ovt keys new` asks twice without echo, and
 * `ovt keys address` asks once; the password never appears on the terminal. */
static void test_prompt(const char *ovt)
{
    char path[320];
    snprintf(path, sizeof path, "%s/prompted.json", dir);
    const char *const commands[2][8] = {
        {ovt, "keys", "new", "--keystore", path, "--scrypt-n", "1024", NULL},
        {ovt, "keys", "address", "--keystore", path, NULL},
    };
    for (int c = 0; c < 2; c++) {
        int master;
        pid_t pid = forkpty(&master, NULL, NULL, NULL);
        if (pid == 0) {
            unsetenv("OVT_PASSWORD");
            execv(ovt, (char *const *)commands[c]);
            _exit(127);
        }
        CHECK(pid > 0);
        if (pid < 0)
            return;
        char seen[8192] = "";
        CHECK(read_until(master, seen, sizeof seen, "Keystore password: "));
        CHECK(write(master, "typed secret\n", 13) == 13);
        if (c == 0) {
            CHECK(read_until(master, seen, sizeof seen, "Repeat password: "));
            CHECK(write(master, "typed secret\n", 13) == 13);
        }
        CHECK(read_until(master, seen, sizeof seen, "address"));
        int status = -1;
        for (int waited = 0; waited < 10000 && waitpid(pid, &status, WNOHANG) == 0; waited += 50) {
            char more[1024];
            struct pollfd pfd = {master, POLLIN, 0};
            if (poll(&pfd, 1, 50) > 0 && read(master, more, sizeof more) <= 0)
                continue;
        }
        if (status == -1) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        close(master);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %d", commands[c][2], status);
        CHECK_MSG(strstr(seen, "typed secret") == NULL, "the password was echoed: %s", seen);
    }
    chain_privkey k;
    chain_address a;
    CHECK(chain_keystore_read(&k, &a, path, "typed secret", 12) == 0);
    ovt_wipe(&k, sizeof k);
}

static void test_cli(void)
{
    char ovt[512], kdir[300], pwfile[300], *out = NULL;
    snprintf(ovt, sizeof ovt, "%s/ovt", getenv("OVT_BINARY_DIR"));
    snprintf(kdir, sizeof kdir, "%s/cli", dir);
    snprintf(pwfile, sizeof pwfile, "%s/pw.txt", dir);
    CHECK(ovt_write_atomic(pwfile, "cli secret\n", 11, 0600) == 0);
    CHECK(tsup_runl(&out, ovt, "keys", "new", "--keystore", kdir, "--password-file", pwfile, "--scrypt-n", "4096",
                    "--json", NULL) == 0);
    json_error_t e;
    json_t *j = out ? json_loads(out, 0, &e) : NULL;
    const char *addr = json_string_value(json_object_get(j, "address"));
    const char *path = json_string_value(json_object_get(j, "keystore"));
    CHECK(addr && path && strncmp(path, kdir, strlen(kdir)) == 0);
    if (addr && path) {
        /* The file decrypts (trailing newline of the password file removed) to
         * the printed address, and the key itself was not printed. */
        chain_privkey k;
        chain_address a, want;
        char hex[65];
        CHECK(chain_keystore_read(&k, &a, path, "cli secret", 10) == 0);
        CHECK(chain_address_from_string(&want, addr) == 0 && chain_address_eq(&a, &want));
        ovt_hex_encode(hex, k.b, 32);
        CHECK(strstr(out, hex) == NULL);
        char *out2 = NULL;
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--keystore", path, "--password-file", pwfile, NULL) == 0);
        CHECK(out2 && strstr(out2, addr) != NULL && strstr(out2, hex) == NULL);
        free(out2);
        /* OVT_PASSWORD, right and wrong. */
        setenv("OVT_PASSWORD", "cli secret", 1);
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--keystore", path, "--json", NULL) == 0);
        CHECK(out2 && strstr(out2, addr) != NULL);
        free(out2);
        setenv("OVT_PASSWORD", "wrong", 1);
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--keystore", path, NULL) == 1);
        free(out2);
        unsetenv("OVT_PASSWORD");
        /* cast reads what `ovt keys new` wrote. */
        CHECK(tsup_runl(&out2, cast, "wallet", "address", "--keystore", path, "--password", "cli secret", NULL) == 0);
        CHECK(out2 && strcmp(out2, addr) == 0);
        free(out2);
        /* The raw key sources of `ovt keys address` name the address cast
         * derives from the same key, and never print the key. */
        char keyfile[300], hex0x[70];
        snprintf(hex0x, sizeof hex0x, "0x%s", hex);
        CHECK(tsup_runl(&out2, cast, "wallet", "address", "--private-key", hex0x, NULL) == 0);
        CHECK(out2 && strcmp(out2, addr) == 0);
        free(out2);
        setenv("OVT_TEST_KEY", hex0x, 1);
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--private-key-env", "OVT_TEST_KEY", "--json", NULL) == 0);
        CHECK(out2 && strstr(out2, addr) != NULL && strstr(out2, hex) == NULL && strstr(out2, "keystore") == NULL);
        free(out2);
        snprintf(keyfile, sizeof keyfile, "%s/key.hex", dir);
        CHECK(ovt_write_atomic(keyfile, hex0x, strlen(hex0x), 0600) == 0);
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--private-key-file", keyfile, NULL) == 0);
        CHECK(out2 && strstr(out2, addr) != NULL && strstr(out2, hex) == NULL);
        free(out2);
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--private-key", hex0x, NULL) == 0);
        CHECK(out2 && strstr(out2, addr) != NULL);
        free(out2);
        /* A key file other users can read, two sources, an unset variable:
         * errors that name the problem and not the key. */
        CHECK(chmod(keyfile, 0644) == 0);
        CHECK(tsup_runl(&out2, "/bin/sh", "-c", "\"$0\" keys address --private-key-file \"$1\" 2>&1", ovt, keyfile,
                        NULL) == 1);
        CHECK(out2 && strstr(out2, "chmod 600") != NULL && strstr(out2, hex) == NULL);
        free(out2);
        CHECK(tsup_runl(&out2, "/bin/sh", "-c", "\"$0\" keys address --private-key-env OVT_TEST_KEY --keystore \"$1\" 2>&1",
                        ovt, path, NULL) == 1);
        CHECK(out2 && strstr(out2, "exactly one") != NULL && strstr(out2, hex) == NULL);
        free(out2);
        unsetenv("OVT_TEST_KEY");
        CHECK(tsup_runl(&out2, ovt, "keys", "address", "--private-key-env", "OVT_TEST_KEY", NULL) == 1);
        free(out2);
        CHECK(tsup_runl(&out2, ovt, "keys", "new", "--private-key-env", "OVT_TEST_KEY", NULL) == 2);
        free(out2);
        /* Refuses to overwrite an existing file; usage errors exit 2. */
        CHECK(tsup_runl(&out2, ovt, "keys", "new", "--keystore", path, "--password-file", pwfile, NULL) == 1);
        free(out2);
        CHECK(tsup_runl(&out2, ovt, "keys", "address", NULL) == 2);
        free(out2);
        CHECK(tsup_runl(&out2, ovt, "keys", "frobnicate", NULL) == 2);
        free(out2);
        CHECK(tsup_runl(&out2, ovt, "keys", "--help", NULL) == 0 && out2 && strstr(out2, "OVT_PASSWORD"));
        free(out2);
        /* Without --keystore: a new directory $HOME/.ovt/keystore/, mode 0700. */
        char home[320], kd[360];
        const char *old_home = getenv("HOME");
        char *saved = old_home ? strdup(old_home) : NULL;
        snprintf(home, sizeof home, "%s/home", dir);
        CHECK(ovt_mkdirs(home, 0700) == 0);
        setenv("HOME", home, 1);
        CHECK(tsup_runl(&out2, ovt, "keys", "new", "--password-file", pwfile, "--scrypt-n", "1024", NULL) == 0);
        snprintf(kd, sizeof kd, "%s/.ovt/keystore/", home);
        CHECK(out2 && strstr(out2, kd) != NULL);
        struct stat st;
        CHECK(stat(kd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
        free(out2);
        if (saved)
            setenv("HOME", saved, 1);
        free(saved);
        ovt_wipe(&k, sizeof k);
    }
    json_decref(j);
    free(out);
    test_prompt(ovt);
}

int main(void)
{
    cast = getenv("OVT_CAST");
    if (!cast || !getenv("OVT_BINARY_DIR")) {
        fprintf(stderr, "OVT_CAST / OVT_BINARY_DIR not set\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/test_chain_keystore.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    unsetenv("OVT_PASSWORD");
    CHECK_RUN(test_spec_pbkdf2());
    CHECK_RUN(test_cast_written());
    CHECK_RUN(test_ours_read_by_cast());
    CHECK_RUN(test_bad_files());
    CHECK_RUN(test_cli());
    char *out = NULL;
    tsup_runl(&out, "/bin/rm", "-rf", dir, NULL);
    free(out);
    return check_done();
}
