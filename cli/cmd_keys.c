/* `ovt keys`: create a keystore (new) or show a keystore's address (address).
 * The private key is never printed. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/keystore.h"
#include "chain/password.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"

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

static int keys_new(const char *keystore, const char *password_file, uint64_t scrypt_n, int json)
{
    char path[4096], default_dir[4096];
    if (!keystore) {
        const char *home = getenv("HOME");
        if (!home)
            return cli_usage_error("keys new", "HOME is not set; pass --keystore");
        snprintf(default_dir, sizeof default_dir, "%s/.ovt/keystore/", home);
        keystore = default_dir;
    }
    chain_address addr;
    if (chain_keystore_create(path, sizeof path, &addr, keystore, password_file, scrypt_n))
        return cli_fail("keys new");
    print_result(json, &addr, path);
    return 0;
}

static int keys_address(const chain_session_args *ka, int json)
{
    if (chain_session_key_sources(ka) == 0)
        return cli_usage_error("keys address", "give --keystore FILE, --private-key-file F, --private-key-env VAR or "
                                               "--private-key KEY");
    chain_address addr;
    if (chain_session_key_address(&addr, ka))
        return cli_fail("keys address");
    print_result(json, &addr, ka->keystore);
    return 0;
}

struct keys_args {
    const char *sub; /* new or address */
    char sub_cmd[64]; /* "keys new", for its messages */
    const char *keystore, *password_file;
    uint64_t scrypt_n;
    int json;
    chain_session_args ka; /* the key sources of `address` */
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct keys_args *a = ctx;
    switch (c) {
    case 'k': a->keystore = arg; break;
    case 'p': a->password_file = arg; break;
    case 'j': a->json = 1; break;
    case 'n':
        if (ovt_parse_u64(&a->scrypt_n, flag, arg, 2, 1u << 20))
            return cli_usage_fail("keys");
        if (a->scrypt_n & (a->scrypt_n - 1))
            return cli_usage_error("keys", "--scrypt-n must be a power of two, got '%s'", arg);
        break;
    case CLI_CHAIN_PRIVATE_KEY:
    case CLI_CHAIN_PRIVATE_KEY_FILE:
    case CLI_CHAIN_PRIVATE_KEY_ENV:
        if (strcmp(a->sub, "address") != 0)
            return cli_usage_error(a->sub_cmd, "the raw key flags are for `ovt keys address`");
        (void)cli_chain_take(&a->ka, c, arg);
        break;
    default: return cli_arg_unknown("keys", given);
    }
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
    struct keys_args a;
    memset(&a, 0, sizeof a);
    a.sub = argv[1];
    snprintf(a.sub_cmd, sizeof a.sub_cmd, "keys %s", a.sub);
    a.scrypt_n = chain_scrypt_standard.n;
    cli_chain_init(&a.ka);
    int rv = cli_getopt(argc - 1, argv + 1, opts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("keys", argc - 1, argv + 1))
        return 2;
    if (strcmp(a.sub, "new") == 0)
        return keys_new(a.keystore, a.password_file, a.scrypt_n, a.json);
    if (strcmp(a.sub, "address") == 0) {
        a.ka.keystore = a.keystore;
        a.ka.password_file = a.password_file;
        return keys_address(&a.ka, a.json);
    }
    return cli_usage_error("keys", "unknown subcommand '%s' (new or address)", a.sub);
}
