/* Keystore passwords from a file, the environment or the terminal (see
 * password.h). */
#include "chain/password.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "chain/keystore.h"
#include "common/bytes.h"
#include "common/fileio.h"

static int from_file(char *buf, size_t cap, size_t *len, const char *path)
{
    uint8_t *data;
    size_t n;
    int rc = ovt_read_file(path, &data, &n, CHAIN_PASSWORD_MAX);
    if (rc)
        return ovt_fail_wrap(rc, "password file");
    if (n > 0 && data[n - 1] == '\n')
        n--;
    if (n > 0 && data[n - 1] == '\r')
        n--;
    if (n >= cap) {
        ovt_wipe(data, n);
        free(data);
        return ovt_fail(OVT_EINVAL, "password file %s: password too long", path);
    }
    memcpy(buf, data, n);
    buf[n] = '\0';
    *len = n;
    ovt_wipe(data, n);
    free(data);
    return 0;
}

/* Reads one line from the terminal with echo off. */
static int prompt(char *buf, size_t cap, size_t *len, const char *question)
{
    FILE *tty = fopen("/dev/tty", "r+");
    if (!tty)
        return ovt_fail(OVT_EINVAL, "no password: use --password-file, set OVT_PASSWORD, or run on a terminal");
    struct termios old, quiet;
    int fd = fileno(tty), have_term = tcgetattr(fd, &old) == 0;
    if (have_term) {
        quiet = old;
        quiet.c_lflag &= (tcflag_t)~ECHO;
        tcsetattr(fd, TCSAFLUSH, &quiet);
    }
    fprintf(tty, "%s", question);
    fflush(tty);
    char *got = fgets(buf, (int)cap, tty);
    if (have_term)
        tcsetattr(fd, TCSAFLUSH, &old);
    fprintf(tty, "\n");
    fclose(tty);
    if (!got)
        return ovt_fail(OVT_EINVAL, "no password entered");
    size_t n = strlen(buf);
    if (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    *len = n;
    return 0;
}

int chain_password_get(char *buf, size_t cap, size_t *len, const char *password_file, int confirm)
{
    *len = 0;
    if (cap)
        buf[0] = '\0';
    if (password_file)
        return from_file(buf, cap, len, password_file);
    const char *env = getenv("OVT_PASSWORD");
    if (env) {
        size_t n = strlen(env);
        if (n >= cap)
            return ovt_fail(OVT_EINVAL, "OVT_PASSWORD is too long");
        memcpy(buf, env, n + 1);
        *len = n;
        return 0;
    }
    int rc = prompt(buf, cap, len, "Keystore password: ");
    if (rc || !confirm)
        return rc;
    char again[CHAIN_PASSWORD_MAX];
    size_t again_len;
    rc = prompt(again, sizeof again, &again_len, "Repeat password: ");
    if (rc == 0 && (again_len != *len || memcmp(again, buf, *len) != 0))
        rc = ovt_fail(OVT_EINVAL, "the passwords do not match");
    ovt_wipe(again, sizeof again);
    if (rc) {
        ovt_wipe(buf, cap);
        *len = 0;
    }
    return rc;
}

int chain_unlock_keystore(chain_privkey *key, chain_address *address, const char *keystore_path,
                          const char *password_file)
{
    char pw[CHAIN_PASSWORD_MAX];
    size_t pwlen;
    int rc = chain_password_get(pw, sizeof pw, &pwlen, password_file, 0);
    if (rc == 0)
        rc = chain_keystore_read(key, address, keystore_path, pw, pwlen);
    ovt_wipe(pw, sizeof pw);
    return rc;
}

int chain_load_key(chain_privkey *key, const char *keystore, const char *password_file, const char *private_key)
{
    if (!!keystore == !!private_key)
        return ovt_fail(OVT_EINVAL, "give exactly one of --keystore and --private-key");
    if (keystore) {
        chain_address addr;
        return chain_unlock_keystore(key, &addr, keystore, password_file);
    }
    int rc = chain_key_from_hex(key, private_key);
    return rc == 0 ? 0 : ovt_fail_wrap(rc, "--private-key");
}

/* Whether a keystore path names a directory: one that exists, or a path
 * ending in '/'. */
static int is_dir(const char *path)
{
    struct stat st;
    size_t n = strlen(path);
    return (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) || (n > 0 && path[n - 1] == '/');
}

int chain_keystore_create(char *path, size_t cap, chain_address *address, const char *keystore,
                          const char *password_file, uint64_t scrypt_n)
{
    chain_privkey key;
    int rc = chain_key_generate(&key);
    if (rc == 0)
        rc = chain_key_address(address, &key);
    if (rc == 0 && is_dir(keystore)) {
        char dir[4096], name[128];
        snprintf(dir, sizeof dir, "%s", keystore);
        for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
            dir[n - 1] = '\0';
        chain_keystore_filename(name, sizeof name, address);
        rc = ovt_mkdirs(dir, 0700);
        if (rc == 0)
            rc = ovt_path_join(path, cap, dir, name);
    } else if (rc == 0) {
        struct stat st;
        if (stat(keystore, &st) == 0)
            rc = ovt_fail(OVT_EINVAL, "%s exists; refusing to overwrite a keystore", keystore);
        else if (strlen(keystore) >= cap)
            rc = ovt_fail(OVT_EINVAL, "keystore path too long");
        else
            snprintf(path, cap, "%s", keystore);
    }
    char pw[CHAIN_PASSWORD_MAX];
    size_t pwlen = 0;
    chain_scrypt_params sp = chain_scrypt_standard;
    sp.n = scrypt_n;
    if (rc == 0)
        rc = chain_password_get(pw, sizeof pw, &pwlen, password_file, 1);
    if (rc == 0)
        rc = chain_keystore_write(path, &key, pw, pwlen, &sp);
    ovt_wipe(pw, sizeof pw);
    ovt_wipe(&key, sizeof key);
    return rc;
}
