/* `ovt deploy`: sends the arbitration contract's creation bytecode (compiled
 * by solcjs at build time and embedded in libovt) and prints the address. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/arbitration.h"
#include "chain/arbitration_cli.h"
#include "chain/password.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt deploy --rpc-url URL (--keystore FILE [--password-file F] | --private-key KEY)\n"
            "                  [--confirmations N] [--json]\n"
            "\n"
            "Deploys the ovt arbitration contract (one contract serves every run) from the\n"
            "given account and prints its address.\n"
            "\n"
            "  --rpc-url URL        the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"
            "  --keystore FILE      a Web3 v3 keystore; its password comes from\n"
            "                       --password-file, else $OVT_PASSWORD, else a prompt\n"
            "  --private-key KEY    a raw hex key, for throwaway devnet accounts only (it is\n"
            "                       visible to other local users in the process list)\n"
            "  --confirmations N    blocks to wait for, including the receipt's (default 1)\n"
            "  --json               print {\"address\", \"chain_id\", \"deployer\", \"tx_hash\",\n"
            "                       \"block_number\", \"gas_used\"}\n");
}

static void print_result(int json, const chain_arb *arb, const chain_address *deployer, const chain_receipt *r)
{
    char addr[43], from[43], tx[67];
    chain_address_to_string(addr, &arb->address);
    chain_address_to_string(from, deployer);
    tx[0] = '0';
    tx[1] = 'x';
    ovt_hex_encode(tx + 2, r->tx_hash.b, 32);
    if (json) {
        json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:I, s:I}", "address", addr, "chain_id",
                              (json_int_t)arb->chain_id, "deployer", from, "tx_hash", tx, "block_number",
                              (json_int_t)r->block_number, "gas_used", (json_int_t)r->gas_used);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(o);
    } else {
        printf("contract  %s\nchain id  %llu\ndeployer  %s\ntx        %s\nblock     %llu\ngas used  %llu\n", addr,
               (unsigned long long)arb->chain_id, from, tx, (unsigned long long)r->block_number,
               (unsigned long long)r->gas_used);
    }
}

int chain_cmd_deploy(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rpc-url", required_argument, NULL, 'r'},     {"keystore", required_argument, NULL, 'k'},
        {"password-file", required_argument, NULL, 'p'}, {"private-key", required_argument, NULL, 'K'},
        {"confirmations", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0},
    };
    const char *rpc_url = getenv("ETH_RPC_URL"), *keystore = NULL, *password_file = NULL, *private_key = NULL;
    unsigned confirmations = 1;
    int json = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': rpc_url = optarg; break;
        case 'k': keystore = optarg; break;
        case 'p': password_file = optarg; break;
        case 'K': private_key = optarg; break;
        case 'j': json = 1; break;
        case 'c': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || *end || v < 1 || v > 1000) {
                fprintf(stderr, "ovt deploy: --confirmations must be a number in 1..1000\n");
                return 2;
            }
            confirmations = (unsigned)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ovt deploy: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!rpc_url || !*rpc_url) {
        fprintf(stderr, "ovt deploy: --rpc-url is required (or set ETH_RPC_URL)\n");
        return 2;
    }
    if (!!keystore == !!private_key) {
        fprintf(stderr, "ovt deploy: give exactly one of --keystore and --private-key\n");
        return 2;
    }

    chain_privkey key;
    chain_rpc *rpc = NULL;
    chain_txm m;
    memset(&m, 0, sizeof m);
    chain_arb arb;
    chain_receipt receipt;
    memset(&receipt, 0, sizeof receipt);
    int rc = chain_load_key(&key, keystore, password_file, private_key);
    if (rc == 0) {
        chain_rpc_opts ro;
        chain_rpc_opts_default(&ro);
        ro.custom_errors = chain_arb_errors;
        rc = chain_rpc_open(&rpc, rpc_url, &ro);
    }
    if (rc == 0) {
        chain_txm_opts to;
        chain_txm_opts_default(&to);
        to.confirmations = confirmations;
        rc = chain_txm_init(&m, rpc, &key, &to);
    }
    ovt_wipe(&key, sizeof key);
    if (rc == 0)
        rc = chain_arb_deploy(&arb, &m, &receipt);
    if (rc == 0) {
        chain_arb check;
        rc = chain_arb_attach(&check, rpc, &arb.address);
    }
    if (rc == 0)
        print_result(json, &arb, &m.from, &receipt);
    else
        fprintf(stderr, "ovt deploy: %s\n", ovt_errmsg());
    chain_receipt_free(&receipt);
    if (m.rpc)
        chain_txm_free(&m);
    chain_rpc_close(rpc);
    return rc == 0 ? 0 : 1;
}
