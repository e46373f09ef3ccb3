/* `ovt keys`: create a keystore (new) or show a keystore's address (address).
 * The private key is never printed. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "chain/keystore.h"
#include "chain/password.h"
#include "cli/flags_chain.h"
#include "common/fileio.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt keys new [--keystore DIR|FILE] [--password-file F] [--scrypt-n N] [--json]\n"
            "       ovt keys address (--keystore FILE [--password-file F] | --private-key-file F |\n"
            "                         --private-key-env VAR | --private-key KEY) [--json]\n"
            "\n"
            "new       create a random key and write it as a Web3 v3 keystore (scrypt,\n"
            "          mode 0600). --keystore names a directory (one that exists or a\n"
            "          path ending in /; the file is named UTC--<time>--<address> as\n"
            "          geth does) or a new file; default\n"
            "          $HOME/.ovt/keystore/. --scrypt-n sets scrypt's N (a power of two,\n"
            "          default 262144 as geth; cast uses 8192).\n"
            "address   print the address of a key: a keystore (decrypted), a file holding a\n"
            "          raw hex key (mode 0600), an environment variable holding one (e.g.\n"
            "          ETH_PRIVATE_KEY), or a raw key on the command line (throwaway keys\n"
            "          only: other users' ps may see it before ovt overwrites it).\n"
            "\n"
            "The password comes from --password-file (one trailing newline removed), else\n"
            "the environment variable OVT_PASSWORD, else a prompt without echo.\n"
            "--json prints {\"address\": ..., \"keystore\": ...} (keystore only for one).\n");
}

static void print_result(int json, const chain_address *a, const char *path)
{
    char addr[43];
    chain_address_to_string(addr, a);
    if (json) {
        json_t *o = path ? json_pack("{s:s, s:s}", "address", addr, "keystore", path)
                         : json_pack("{s:s}", "address", addr);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(o);
    } else {
        printf("address  %s\n", addr);
        if (path)
            printf("keystore %s\n", path);
    }
}

static int is_dir(const char *path)
{
    struct stat st;
    size_t n = strlen(path);
    return (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) || (n > 0 && path[n - 1] == '/');
}

static int keys_new(const char *keystore, const char *password_file, uint64_t scrypt_n, int json)
{
    char path[4096], name[128], default_dir[4096];
    if (!keystore) {
        const char *home = getenv("HOME");
        if (!home) {
            fprintf(stderr, "ovt keys new: HOME is not set; pass --keystore\n");
            return 2;
        }
        snprintf(default_dir, sizeof default_dir, "%s/.ovt/keystore/", home);
        keystore = default_dir;
    }
    chain_privkey key;
    chain_address addr;
    if (chain_key_generate(&key) != 0 || chain_key_address(&addr, &key) != 0) {
        fprintf(stderr, "ovt keys new: %s\n", ovt_errmsg());
        return 1;
    }
    int rc = 0;
    if (is_dir(keystore)) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", keystore);
        for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
            dir[n - 1] = '\0';
        chain_keystore_filename(name, sizeof name, &addr);
        rc = ovt_mkdirs(dir, 0700);
        if (rc == 0)
            rc = ovt_path_join(path, sizeof path, dir, name);
    } else {
        struct stat st;
        if (stat(keystore, &st) == 0)
            rc = ovt_fail(OVT_EINVAL, "%s exists; refusing to overwrite a keystore", keystore);
        else if (strlen(keystore) >= sizeof path)
            rc = ovt_fail(OVT_EINVAL, "keystore path too long");
        else
            snprintf(path, sizeof path, "%s", keystore);
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
    if (rc) {
        fprintf(stderr, "ovt keys new: %s\n", ovt_errmsg());
        return 1;
    }
    print_result(json, &addr, path);
    return 0;
}

/* The address of the one key source given: a keystore (decrypted) or a raw
 * key from a file, an environment variable or the command line. */
static int keys_address(const chain_session_args *ka, int json)
{
    if (chain_session_key_sources(ka) == 0) {
        fprintf(stderr, "ovt keys address: give --keystore FILE, --private-key-file F, --private-key-env VAR or "
                        "--private-key KEY\n");
        return 2;
    }
    chain_privkey key;
    chain_address addr;
    int rc = ka->keystore && chain_session_key_sources(ka) == 1
                 ? chain_unlock_keystore(&key, &addr, ka->keystore, ka->password_file)
                 : chain_session_load_key(&key, ka);
    if (!rc && !ka->keystore)
        rc = chain_key_address(&addr, &key);
    ovt_wipe(&key, sizeof key);
    if (rc) {
        fprintf(stderr, "ovt keys address: %s\n", ovt_errmsg());
        return 1;
    }
    print_result(json, &addr, ka->keystore);
    return 0;
}

int cmd_keys(int argc, char **argv)
{
    static const struct option opts[] = {
        {"keystore", required_argument, NULL, 'k'}, {"password-file", required_argument, NULL, 'p'},
        {"scrypt-n", required_argument, NULL, 'n'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"private-key", required_argument, NULL, CLI_CHAIN_PRIVATE_KEY},
        {"private-key-file", required_argument, NULL, CLI_CHAIN_PRIVATE_KEY_FILE},
        {"private-key-env", required_argument, NULL, CLI_CHAIN_PRIVATE_KEY_ENV},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1], *keystore = NULL, *password_file = NULL;
    uint64_t scrypt_n = chain_scrypt_standard.n;
    int json = 0, c;
    chain_session_args ka; /* the key sources of `address` */
    cli_chain_init(&ka);
    optind = 0;
    while ((c = getopt_long(argc - 1, argv + 1, "h", opts, NULL)) != -1) {
        if (c == CLI_CHAIN_PRIVATE_KEY || c == CLI_CHAIN_PRIVATE_KEY_FILE || c == CLI_CHAIN_PRIVATE_KEY_ENV) {
            if (strcmp(sub, "address") != 0) {
                fprintf(stderr, "ovt keys %s: the raw key flags are for `ovt keys address`\n", sub);
                return 2;
            }
            (void)cli_chain_take(&ka, c, optarg);
            continue;
        }
        switch (c) {
        case 'k': keystore = optarg; break;
        case 'p': password_file = optarg; break;
        case 'j': json = 1; break;
        case 'n': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || *end || v < 2 || (v & (v - 1)) != 0 || v > (1u << 20)) {
                fprintf(stderr, "ovt keys: --scrypt-n must be a power of two in 2..1048576\n");
                return 2;
            }
            scrypt_n = v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ovt keys: unexpected argument '%s'\n", argv[1 + optind]);
        return 2;
    }
    if (strcmp(sub, "new") == 0)
        return keys_new(keystore, password_file, scrypt_n, json);
    if (strcmp(sub, "address") == 0)
    {
        ka.keystore = keystore;
        ka.password_file = password_file;
        return keys_address(&ka, json);
    }
    fprintf(stderr, "ovt keys: unknown subcommand '%s' (new or address)\n", sub);
    return 2;
}
