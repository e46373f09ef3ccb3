/* `ovt commit`: the trainer opens its run on the arbitration contract (or
 * joins one), publishes what an auditor needs to the artifact store, commits
 * the step Merkle root with its EIP-712 signature, and writes the receipt. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain/session.h"
#include "common/fileio.h"
#include "trainer/cliargs.h"
#include "trainer/commit.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/store.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ovt commit RUNDIR --rpc-url URL --contract ADDR (--keystore F [--password-file P] |\n"
            "                  --private-key K) --auditor ADDR --arbiter ADDR [OPTIONS]\n"
            "\n"
            "Opens the run in RUNDIR (written by `ovt train`) on the arbitration contract, or joins\n"
            "the run --run-id, computes the leaves with the runId and the step Merkle root from\n"
            "RUNDIR/steps.bin, publishes the run (config, dataset, every step's rounding log, the\n"
            "step table and a manifest) to --store, signs the EIP-712 commitment and commits it with\n"
            "the trainer's bond. Writes RUNDIR/receipt.json (docs/agent.md).\n"
            "\n" CHAIN_SESSION_HELP CHAIN_SESSION_CONFIRMATIONS_HELP
            "  --auditor ADDR       the auditor's address\n"
            "  --arbiter ADDR       the arbiter's address\n"
            "  --bond WEI           the trainer's bond (default 0)\n"
            "  --auditor-bond WEI   the auditor's bond (default: --bond)\n"
            "  --commit-timeout S   how long the second party may take to commit (default 3600)\n"
            "  --move-timeout S     per bisection round (default 600)\n"
            "  --verdict-timeout S  the arbiter's deadline (default 3600)\n"
            "  --nonce N            the open's nonce (default: random)\n"
            "  --run-id HEX         join a run already opened (its parameters must match)\n"
            "  --store URL          where to publish the run (required to be audited): file://DIR, or\n"
            "                       http(s)://HOST/PATH (uploads by PUT; credentials from\n"
            "                       OVT_STORE_BEARER_TOKEN[_FILE] or OVT_STORE_BASIC_AUTH[_FILE]),\n"
            "                       or s3://BUCKET/PREFIX (SigV4 from AWS_ACCESS_KEY_ID,\n"
            "                       AWS_SECRET_ACCESS_KEY, AWS_REGION; AWS_ENDPOINT_URL for MinIO, R2,\n"
            "                       ...); see docs/store.md\n"
            "  --data FILE          the dataset (its SHA-256 must be the run's datasetHash)\n"
            "  --json               print the receipt as JSON\n"
            "  -h, --help           this help\n");
}

enum { O_AUDITOR = 256, O_ARBITER, O_BOND, O_ABOND, O_CTO, O_MTO, O_VTO, O_NONCE, O_RUN_ID, O_STORE, O_DATA, O_JSON };

struct commit_args {
    const char *dir, *store, *data;
    chain_session_args chain;
    chain_arb_params p;
    int have_auditor, have_arbiter, have_abond, have_run_id, json;
    ovt_hash run_id;
};

static int publish(const struct commit_args *a, const trn_step_table *t, const ovt_hash *run_id, ovt_hash *steps_blob)
{
    trn_store *s;
    int rv = trn_store_open(&s, a->store);
    if (rv)
        return rv;
    trn_store_manifest m;
    rv = trn_publish_run(s, a->dir, t, a->data, &a->p.dataset_hash, run_id, &m);
    if (!rv)
        *steps_blob = m.steps_hash;
    trn_store_close(s);
    return rv;
}

static int same_params(const chain_arb_params *on_chain, const chain_arb_params *mine)
{
    return chain_address_eq(&on_chain->trainer, &mine->trainer) &&
           memcmp(on_chain->config_hash.b, mine->config_hash.b, 32) == 0 &&
           memcmp(on_chain->dataset_hash.b, mine->dataset_hash.b, 32) == 0 && on_chain->steps == mine->steps;
}

static int commit_run(struct commit_args *a)
{
    char path[4096];
    trn_step_table t = {0};
    trn_run_config rc;
    chain_session s;
    chain_receipt open_r, commit_r;
    memset(&s, 0, sizeof s);
    memset(&open_r, 0, sizeof open_r);
    memset(&commit_r, 0, sizeof commit_r);
    int rv = trn_run_load_config(a->dir, &rc, &a->p.config_hash);
    if (rv || (rv = trn_run_path(path, sizeof path, a->dir, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&t, path)))
        return rv;
    if (memcmp(t.config_hash.b, a->p.config_hash.b, 32) != 0 || t.count < 2) {
        trn_step_table_free(&t);
        return ovt_fail(OVT_EFORMAT, "%s does not belong to %s/config.bin or holds no steps", path, a->dir);
    }
    a->p.dataset_hash = rc.dataset_hash;
    a->p.steps = t.count - 1;
    if ((rv = chain_session_open(&s, &a->chain, 1)))
        goto done;
    a->p.trainer = s.txm.from;
    ovt_hash run_id, root, steps_blob = {{0}};
    if (a->have_run_id) {
        chain_arb_params on_chain;
        run_id = a->run_id;
        if ((rv = chain_arb_get_run(&s.arb, &run_id, NULL, &on_chain)))
            goto done;
        if (!same_params(&on_chain, &a->p)) {
            rv = ovt_fail(OVT_EINVAL, "run --run-id was opened for another trainer, config, dataset or step count");
            goto done;
        }
        a->p = on_chain;
    } else {
        if (!a->have_auditor || !a->have_arbiter) {
            rv = ovt_fail(OVT_EINVAL, "--auditor and --arbiter are required to open a run");
            goto done;
        }
        chain_arb_run_id(&run_id, s.arb.chain_id, &s.arb.address, &a->p);
    }
    if ((rv = trn_step_table_root(&root, &t, &run_id)))
        goto done;
    if (a->store && (rv = publish(a, &t, &run_id, &steps_blob)))
        goto done;
    if (!a->have_run_id && (rv = chain_arb_open(&s.arb, &s.txm, &a->p, &run_id, &open_r)))
        goto done;
    uint8_t sig[65];
    if ((rv = chain_arb_commit(&s.arb, &s.txm, &run_id, &root, NULL, sig, &commit_r)))
        goto done;
    trn_commit_receipt cr = {.chain_id = s.arb.chain_id, .contract = s.arb.address, .params = a->p,
                             .run_id = run_id, .root = root, .commit_tx = commit_r.tx_hash,
                             .has_open_tx = !a->have_run_id, .open_tx = open_r.tx_hash, .store = a->store,
                             .data = a->data, .steps_blob = steps_blob};
    memcpy(cr.signature, sig, 65);
    char *text;
    if ((rv = trn_commit_receipt_json(&cr, &text)))
        goto done;
    if (!(rv = trn_run_path(path, sizeof path, a->dir, NULL, 0, "receipt.json")))
        rv = ovt_write_atomic(path, text, strlen(text), 0644);
    if (!rv && a->json) {
        printf("%s\n", text);
    } else if (!rv) {
        char rid[67], rh[67];
        chain_hash_hex(rid, &run_id);
        chain_hash_hex(rh, &root);
        printf("run id   %s\nroot     %s\nsteps    %llu\nreceipt  %s\n", rid, rh, (unsigned long long)a->p.steps,
               path);
    }
    free(text);
done:
    chain_receipt_free(&open_r);
    chain_receipt_free(&commit_r);
    chain_session_close(&s);
    trn_step_table_free(&t);
    return rv;
}

static int parse_wei(chain_u256 *out, const char *flag, const char *s)
{
    chain_u256 v;
    uint64_t lo;
    if (chain_u256_from_dec(&v, s) || (chain_u256_to_u64(&lo, &v) && !chain_u256_is_zero(&v))) {
        fprintf(stderr, "ovt commit: %s expects a number of wei below 2^64, got '%s'\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

int trn_cmd_commit(int argc, char **argv)
{
    static const struct option longopts[] = {
        CHAIN_SESSION_LONGOPTS,
        CHAIN_SESSION_CONFIRMATIONS_LONGOPT,
        {"auditor", required_argument, NULL, O_AUDITOR},     {"arbiter", required_argument, NULL, O_ARBITER},
        {"bond", required_argument, NULL, O_BOND},           {"auditor-bond", required_argument, NULL, O_ABOND},
        {"commit-timeout", required_argument, NULL, O_CTO},  {"move-timeout", required_argument, NULL, O_MTO},
        {"verdict-timeout", required_argument, NULL, O_VTO}, {"nonce", required_argument, NULL, O_NONCE},
        {"run-id", required_argument, NULL, O_RUN_ID},       {"store", required_argument, NULL, O_STORE},
        {"data", required_argument, NULL, O_DATA},           {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},                    {NULL, 0, NULL, 0}};
    struct commit_args a;
    memset(&a, 0, sizeof a);
    chain_session_args_init(&a.chain);
    a.p.commit_timeout = 3600;
    a.p.move_timeout = 600;
    a.p.arbiter_timeout = 3600;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    a.p.nonce = ((uint64_t)now.tv_sec << 20) ^ (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 40);
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = trn_arg_name(longopts, c);
        if (chain_session_take(&a.chain, c, optarg))
            continue;
        switch (c) {
        case 'h': usage(stdout); return 0;
        case O_AUDITOR:
        case O_ARBITER:
            if (chain_address_from_string(c == O_AUDITOR ? &a.p.auditor : &a.p.arbiter, optarg)) {
                fprintf(stderr, "ovt commit: %s expects an address, got '%s'\n", flag, optarg);
                return 2;
            }
            *(c == O_AUDITOR ? &a.have_auditor : &a.have_arbiter) = 1;
            break;
        case O_BOND:
            if (parse_wei(&a.p.trainer_bond, flag, optarg)) return 2;
            break;
        case O_ABOND:
            if (parse_wei(&a.p.auditor_bond, flag, optarg)) return 2;
            a.have_abond = 1;
            break;
        case O_CTO:
        case O_MTO:
        case O_VTO:
            if (trn_arg_u64("commit", flag, optarg, 1, UINT32_MAX, &v)) return 2;
            *(c == O_CTO ? &a.p.commit_timeout : c == O_MTO ? &a.p.move_timeout : &a.p.arbiter_timeout) = (uint32_t)v;
            break;
        case O_NONCE:
            if (trn_arg_u64("commit", flag, optarg, 0, UINT64_MAX, &a.p.nonce)) return 2;
            break;
        case O_RUN_ID:
            if (chain_parse_hash(&a.run_id, flag, optarg)) {
                fprintf(stderr, "ovt commit: %s\n", ovt_errmsg());
                return 2;
            }
            a.have_run_id = 1;
            break;
        case O_STORE: a.store = optarg; break;
        case O_DATA: a.data = optarg; break;
        case O_JSON: a.json = 1; break;
        default: return trn_arg_unknown("commit", argv[optind - 1]);
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "ovt commit: give exactly one RUNDIR; see `ovt commit --help`\n");
        return 2;
    }
    a.dir = argv[optind];
    if (!a.have_abond)
        a.p.auditor_bond = a.p.trainer_bond;
    if (!!a.store != !!a.data) {
        fprintf(stderr, "ovt commit: --store and --data go together (the dataset is published with the run)\n");
        return 2;
    }
    char data_abs[PATH_MAX];
    if (a.data && realpath(a.data, data_abs))
        a.data = data_abs;
    int rv = commit_run(&a);
    if (rv) {
        fprintf(stderr, "ovt commit: %s\n", ovt_errmsg());
        return 1;
    }
    return 0;
}
