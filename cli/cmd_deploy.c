/* `ovt deploy`: sends the arbitration contract's creation bytecode (compiled
 * by solcjs at build time and embedded in libovt) and prints the address. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "cli/commands.h"
#include "chain/password.h"
#include "cli/flags_chain.h"
#include "common/fileio.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt deploy --rpc-url URL (--keystore FILE [--password-file F] | --private-key KEY)\n"
            "                  [--confirmations N] [--max-fee-per-gas F] [--priority-fee F]\n"
            "                  [--out FILE] [--json]\n"
            "\n"
            "Deploys the ovt arbitration contract (one contract serves every run) from the\n"
            "given account and prints its address. With --out, FILE records the deployment\n"
            "(and, while it is under way, every transaction sent for it): run again with the\n"
            "same FILE after any failure, it finishes that deployment instead of making another.\n"
            "\n"
            "  --rpc-url URL        the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"
            "  --keystore FILE      a Web3 v3 keystore; its password comes from\n"
            "                       --password-file, else $OVT_PASSWORD, else a prompt\n"
            "  --private-key KEY    a raw hex key, for throwaway devnet accounts only (it is\n"
            "                       visible to other local users in the process list)\n"
            "  --confirmations N    blocks to wait for, including the receipt's (default 1)\n"
            CLI_CHAIN_FEE_HELP
            "  --out FILE           the deployment record (JSON as --json prints, plus the nonce)\n"
            "  --json               print {\"address\", \"chain_id\", \"deployer\", \"tx_hash\",\n"
            "                       \"block_number\", \"gas_used\"}\n");
}

/* The journal of a deployment under way: what was sent, for a run again. */
struct deploy_journal {
    const char *path; /* NULL: none */
    uint64_t chain_id;
    chain_address deployer;
    uint64_t nonce;
    ovt_hash hashes[CHAIN_TXM_MAX_VERSIONS];
    size_t n;
    int write_failed;
};

static int journal_write(struct deploy_journal *j)
{
    char from[43], h[67];
    chain_address_to_string(from, &j->deployer);
    json_t *hs = json_array();
    for (size_t i = 0; i < j->n; i++) {
        chain_hash_hex(h, &j->hashes[i]);
        json_array_append_new(hs, json_string(h));
    }
    json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:o}", "status", "sent", "chain_id", (json_int_t)j->chain_id,
                          "deployer", from, "nonce", (json_int_t)j->nonce, "tx_hashes", hs);
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    int rc = text ? ovt_write_atomic(j->path, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
    free(text);
    json_decref(o);
    return rc;
}

/* txm's hook: every version is in the journal before the node sees it. */
static void journal_on_send(void *ctx, const chain_tx *tx, const ovt_hash *hash)
{
    struct deploy_journal *j = ctx;
    if (j->n && j->nonce != tx->nonce)
        j->n = 0; /* a new nonce: the earlier hashes were never accepted */
    j->nonce = tx->nonce;
    if (j->n < CHAIN_TXM_MAX_VERSIONS)
        j->hashes[j->n++] = *hash;
    if (journal_write(j))
        j->write_failed = 1;
}

static json_t *result_json(const chain_arb *arb, const chain_address *deployer, const chain_receipt *r, uint64_t nonce)
{
    char addr[43], from[43], tx[67];
    chain_address_to_string(addr, &arb->address);
    chain_address_to_string(from, deployer);
    chain_hash_hex(tx, &r->tx_hash);
    return json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I}", "address", addr, "chain_id", (json_int_t)arb->chain_id,
                     "deployer", from, "tx_hash", tx, "block_number", (json_int_t)r->block_number, "gas_used",
                     (json_int_t)r->gas_used, "nonce", (json_int_t)nonce);
}

static void print_result(int json, const chain_arb *arb, const chain_address *deployer, const chain_receipt *r)
{
    char addr[43], from[43], tx[67];
    chain_address_to_string(addr, &arb->address);
    chain_address_to_string(from, deployer);
    chain_hash_hex(tx, &r->tx_hash);
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

/* A run again with --out FILE: FILE exists. A finished deployment whose code
 * is still there is reported again (*done); one under way is finished when
 * one of its transactions was mined (*done), else a fresh one is made. */
static int resume(struct deploy_journal *j, chain_txm *m, chain_arb *arb, chain_receipt *r, int *done)
{
    *done = 0;
    uint8_t *text;
    size_t len;
    int rc = ovt_read_file(j->path, &text, &len, 1 << 20);
    if (rc)
        return rc;
    json_error_t e;
    json_t *o = json_loadb((const char *)text, len, 0, &e);
    free(text);
    json_t *cid = json_object_get(o, "chain_id"), *jn = json_object_get(o, "nonce");
    uint64_t chain_id = (uint64_t)json_integer_value(cid), nonce = (uint64_t)json_integer_value(jn);
    chain_address from;
    if (!o || !json_is_integer(cid) || !json_is_integer(jn) || json_integer_value(cid) < 0 ||
        json_integer_value(jn) < 0 || chain_json_address(&from, o, "deployer")) {
        json_decref(o);
        ovt_err_clear();
        return ovt_fail(OVT_EFORMAT, "%s is not a deployment record of ovt deploy (move it away to deploy anew)",
                        j->path);
    }
    if (chain_id != m->chain_id || !chain_address_eq(&from, &m->from)) {
        json_decref(o);
        return ovt_fail(OVT_EINVAL,
                        "%s records a deployment on chain %llu by another account or chain; give another --out",
                        j->path, (unsigned long long)chain_id);
    }
    /* What the interrupted run sent lands first, then the chain is read. */
    if ((rc = chain_txm_settle(m))) {
        json_decref(o);
        return rc;
    }
    json_t *hs = json_object_get(o, "tx_hashes");
    ovt_hash h;
    if (!hs && json_object_get(o, "tx_hash")) /* a finished record */
        hs = json_pack("[O]", json_object_get(o, "tx_hash"));
    else
        json_incref(hs);
    size_t i;
    json_t *v;
    json_array_foreach(hs, i, v)
    {
        if (!json_is_string(v) || chain_parse_hash(&h, "tx_hashes", json_string_value(v))) {
            rc = ovt_fail(OVT_EFORMAT, "%s: a transaction hash is malformed", j->path);
            break;
        }
        chain_receipt_free(r);
        int found;
        if ((rc = chain_rpc_receipt(m->rpc, r, &found, &h)))
            break;
        if (!found)
            continue;
        chain_receipt_free(r);
        if ((rc = chain_txm_wait_hash(m, &h, r)))
            break;
        if (!r->has_contract_address) {
            rc = ovt_fail(OVT_EFORMAT, "transaction in %s created no contract", j->path);
            break;
        }
        arb->rpc = m->rpc;
        arb->address = r->contract_address;
        arb->chain_id = m->chain_id;
        j->nonce = nonce;
        *done = 1;
        break;
    }
    json_decref(hs);
    json_decref(o);
    return rc;
}

int cmd_deploy(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rpc-url", required_argument, NULL, 'r'},     {"keystore", required_argument, NULL, 'k'},
        {"password-file", required_argument, NULL, 'p'}, {"private-key", required_argument, NULL, 'K'},
        {"confirmations", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"max-fee-per-gas", required_argument, NULL, 'F'}, {"priority-fee", required_argument, NULL, 'T'},
        {"out", required_argument, NULL, 'o'},           {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *rpc_url = getenv("ETH_RPC_URL"), *keystore = NULL, *password_file = NULL, *private_key = NULL;
    const char *max_fee = NULL, *tip_cap = NULL, *out_path = NULL;
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
        case 'F': max_fee = optarg; break;
        case 'T': tip_cap = optarg; break;
        case 'o': out_path = optarg; break;
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

    chain_txm_opts to;
    chain_txm_opts_default(&to);
    to.confirmations = confirmations;
    if (chain_session_fee_caps(&to, max_fee, tip_cap)) {
        fprintf(stderr, "ovt deploy: %s\n", ovt_errmsg());
        return 2;
    }
    chain_privkey key;
    chain_rpc *rpc = NULL;
    struct deploy_journal j;
    memset(&j, 0, sizeof j);
    j.path = out_path;
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
    if (rc == 0)
        rc = chain_txm_init(&m, rpc, &key, &to);
    ovt_wipe(&key, sizeof key);
    int done = 0;
    if (rc == 0 && out_path) {
        j.chain_id = m.chain_id;
        j.deployer = m.from;
        if (access(out_path, F_OK) == 0)
            rc = resume(&j, &m, &arb, &receipt, &done);
        m.on_send = journal_on_send;
        m.on_send_ctx = &j;
    }
    if (rc == 0 && !done) {
        rc = chain_arb_deploy(&arb, &m, &receipt);
        if (rc == 0 && j.write_failed)
            rc = ovt_fail(OVT_EIO, "the contract is deployed but %s could not be written", out_path);
    }
    if (rc == 0) {
        chain_arb check;
        rc = chain_arb_attach(&check, rpc, &arb.address);
    }
    if (rc == 0 && out_path) {
        json_t *o = result_json(&arb, &m.from, &receipt, j.nonce);
        char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        rc = text ? ovt_write_atomic(out_path, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
        free(text);
        json_decref(o);
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
