/* `ovt deploy`: sends the creation bytecode of the arbitration contract and
 * of the narrowing contract bound to it (compiled by solcjs at build time
 * and embedded in libovt) and prints their addresses; the deployment and
 * its record are chain/deploy.h's. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "chain/deploy.h"
#include "chain/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt deploy --rpc-url URL (--keystore FILE [--password-file F] | --private-key KEY)\n"
            "                  [--confirmations N] [--max-fee-per-gas F] [--priority-fee F]\n"
            "                  [--no-narrow] [--out FILE] [--json]\n"
            "\n"
            "Deploys the ovt arbitration contract (one contract serves every run) and the\n"
            "narrowing contract OvtNarrow bound to it from the given account, at its next two\n"
            "nonces, and prints their addresses (give OvtNarrow's to ovt agent and ovt arbiter\n"
            "watch as --narrow). With --out, FILE records the deployment (and, while it is\n"
            "under way, the nonces fixed and every transaction sent): run again with the same\n"
            "FILE after any failure, it finishes that deployment instead of making another.\n"
            "Use the account for nothing else meanwhile: a transaction that takes OvtNarrow's\n"
            "nonce leaves the arbitration contract unable to narrow (deploy again then).\n"
            "\n"
            "  --rpc-url URL        the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"
            "  --keystore FILE      a Web3 v3 keystore; its password comes from\n"
            "                       --password-file, else $OVT_PASSWORD, else a prompt\n"
            "  --private-key KEY    a raw hex key, for throwaway devnet accounts only (it is\n"
            "                       visible to other local users in the process list)\n"
            "  --confirmations N    blocks to wait for, including the receipt's (default 1)\n"
            CLI_CHAIN_FEE_HELP
            "  --no-narrow          deploy the arbitration contract alone, bound to no narrowing\n"
            "                       contract (its disputes end at the step level)\n"
            "  --out FILE           the deployment record (JSON as --json prints, plus the nonces)\n"
            "  --json               print {\"address\", \"chain_id\", \"deployer\", \"tx_hash\",\n"
            "                       \"block_number\", \"gas_used\", \"narrow\": {\"address\", \"tx_hash\",\n"
            "                       \"block_number\", \"gas_used\"}} (no \"narrow\" with --no-narrow)\n");
}

static void print_result(int json, const chain_deployment *d)
{
    if (json) {
        json_t *o = chain_deployment_json(d, 0);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(o);
        return;
    }
    char addr[43], from[43], tx[67];
    chain_address_to_string(addr, &d->address);
    chain_address_to_string(from, &d->deployer);
    chain_hash_hex(tx, &d->receipt.tx_hash);
    printf("contract  %s\nchain id  %llu\ndeployer  %s\ntx        %s\nblock     %llu\ngas used  %llu\n", addr,
           (unsigned long long)d->chain_id, from, tx, (unsigned long long)d->receipt.block_number,
           (unsigned long long)d->receipt.gas_used);
    if (!d->has_narrow)
        return;
    chain_address_to_string(addr, &d->narrow);
    chain_hash_hex(tx, &d->narrow_receipt.tx_hash);
    printf("narrow    %s\nnarrow tx %s\nblock     %llu\ngas used  %llu\n", addr, tx,
           (unsigned long long)d->narrow_receipt.block_number, (unsigned long long)d->narrow_receipt.gas_used);
}

struct deploy_args {
    chain_deploy_opts o;
    const char *max_fee, *tip_cap;
    int json;
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct deploy_args *a = ctx;
    switch (c) {
    case 'r': a->o.rpc_url = arg; break;
    case 'k': a->o.keystore = arg; break;
    case 'p': a->o.password_file = arg; break;
    case 'K': a->o.private_key = arg; break;
    case 'j': a->json = 1; break;
    case 'F': a->max_fee = arg; break;
    case 'T': a->tip_cap = arg; break;
    case 'o': a->o.record = arg; break;
    case 'N': a->o.alone = 1; break;
    case 'c': return ovt_parse_u32(&a->o.txm.confirmations, flag, arg, 1, 1000) ? cli_usage_fail("deploy") : 0;
    default: return cli_arg_unknown("deploy", given);
    }
    return 0;
}

int cmd_deploy(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rpc-url", required_argument, NULL, 'r'},     {"keystore", required_argument, NULL, 'k'},
        {"password-file", required_argument, NULL, 'p'}, {"private-key", required_argument, NULL, 'K'},
        {"confirmations", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"max-fee-per-gas", required_argument, NULL, 'F'}, {"priority-fee", required_argument, NULL, 'T'},
        {"out", required_argument, NULL, 'o'},           {"help", no_argument, NULL, 'h'},
        {"no-narrow", no_argument, NULL, 'N'},
        {NULL, 0, NULL, 0},
    };
    struct deploy_args a = {.o = {.rpc_url = getenv("ETH_RPC_URL")}};
    chain_txm_opts_default(&a.o.txm);
    int rv = cli_getopt(argc, argv, opts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("deploy", argc, argv))
        return 2;
    if (!a.o.rpc_url || !*a.o.rpc_url)
        return cli_usage_error("deploy", "--rpc-url is required (or set ETH_RPC_URL)");
    if (!!a.o.keystore == !!a.o.private_key)
        return cli_usage_error("deploy", "give exactly one of --keystore and --private-key");
    if (chain_session_fee_caps(&a.o.txm, a.max_fee, a.tip_cap))
        return cli_usage_fail("deploy");
    chain_deployment d;
    if (chain_deploy(&a.o, &d))
        return cli_fail("deploy");
    print_result(a.json, &d);
    chain_deployment_free(&d);
    return 0;
}
