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

#include "cli/flags_policy.h"
#include "cli/flags_chain.h"
#include "common/fileio.h"
#include "cli/args.h"
#include "party/commit.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "store/store.h"

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
            "RUNDIR/commit.json records what was begun: run again with the same flags after any\n"
            "failure, ovt commit continues (the run opened once, committed once). Once\n"
            "receipt.json is written that commit is finished: a new ovt commit opens a new run.\n"
            "\n" CLI_CHAIN_HELP CLI_CHAIN_CONFIRMATIONS_HELP
            "  --auditor ADDR       the auditor's address\n"
            "  --arbiter ADDR       the arbiter's address\n"
            "  --bond WEI           the trainer's bond (default 0)\n"
            "  --auditor-bond WEI   the auditor's bond (default: --bond)\n"
            "  --commit-timeout S   how long the second party may take to commit (default 3600)\n"
            "  --move-timeout S     per bisection round (default 600)\n"
            "  --verdict-timeout S  the arbiter's deadline (default 3600)\n"
            "  --nonce N            the open's nonce (default: random)\n"
            "  --run-id HEX         join a run already opened (its parameters must match, and its\n"
            "                       terms must be inside the policy below)\n"
            "  --store URL          where to publish the run (required to be audited): file://DIR, or\n"
            "                       http(s)://HOST/PATH (uploads by PUT; credentials from\n"
            "                       OVT_STORE_BEARER_TOKEN[_FILE] or OVT_STORE_BASIC_AUTH[_FILE]),\n"
            "                       or s3://BUCKET/PREFIX (SigV4 from AWS_ACCESS_KEY_ID,\n"
            "                       AWS_SECRET_ACCESS_KEY, AWS_REGION; AWS_ENDPOINT_URL for MinIO, R2,\n"
            "                       ...); see docs/store.md\n"
            "  --data FILE          the dataset (its SHA-256 must be the run's datasetHash)\n"
            "  --json               print the receipt as JSON\n"
            "  -h, --help           this help\n"
            "\n"
            "Joining with --run-id, the run was opened by someone else: " CLI_POLICY_HELP);
}

enum { O_AUDITOR = 256, O_ARBITER, O_BOND, O_ABOND, O_CTO, O_MTO, O_VTO, O_NONCE, O_RUN_ID, O_STORE, O_DATA, O_JSON };

struct commit_args {
    const char *dir, *store, *data;
    chain_session_args chain;
    cli_policy_args policy;
    chain_arb_params p;
    int have_auditor, have_arbiter, have_abond, have_run_id, have_nonce, json;
    ovt_hash run_id;
};

static int publish(const struct commit_args *a, const trn_step_table *t, const ovt_hash *run_id, ovt_hash *steps_blob)
{
    store_ctx *s;
    int rv = store_open(&s, a->store);
    if (rv)
        return rv;
    store_manifest m;
    rv = party_publish_run(s, a->dir, t, a->data, &a->p.dataset_hash, run_id, &m);
    if (!rv)
        *steps_blob = m.steps_hash;
    store_close(s);
    return rv;
}

/* Test-only fault injection: OVT_TEST_EXIT_AT=opened|committed ends the
 * process (status 86) at that point, as a kill would (with
 * OVT_TEST_EXIT_AFTER_SEND, chain/txm.c, for the moments after a send). */
static void trn_fault_point(const char *name)
{
    const char *at = getenv("OVT_TEST_EXIT_AT");
    if (at && strcmp(at, name) == 0) {
        fflush(NULL);
        _exit(86);
    }
}

/* Whether RUNDIR/receipt.json is that of the journal's run: that commit
 * finished, and running ovt commit again commits the directory anew. */
static bool journal_finished(const char *dir, const party_commit_journal *j)
{
    char path[4096];
    uint8_t *text;
    size_t len;
    if (trn_run_path(path, sizeof path, dir, NULL, 0, "receipt.json") || ovt_read_file(path, &text, &len, 1 << 20)) {
        ovt_err_clear();
        return false;
    }
    json_t *o = json_loadb((const char *)text, len, 0, NULL);
    free(text);
    ovt_hash rid;
    bool same = o && chain_json_hash(&rid, o, "run_id") == 0 && memcmp(rid.b, j->run_id.b, 32) == 0;
    ovt_err_clear();
    json_decref(o);
    return same;
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
    /* A run again continues what the journal says was begun. */
    party_commit_journal j;
    int resumed = 0;
    rv = party_commit_journal_load(a->dir, &j);
    if (rv == 0)
        resumed = !journal_finished(a->dir, &j); /* a finished commit is no resume point: a new run */
    else if (rv != OVT_ENOTFOUND)
        goto done;
    rv = 0;
    if (resumed && (j.chain_id != s.arb.chain_id || !chain_address_eq(&j.contract, &s.arb.address))) {
        char jc[43];
        chain_address_to_string(jc, &j.contract);
        rv = ovt_fail(OVT_EINVAL,
                      "%s/commit.json records a commit on chain %llu, contract %s: this run was committed there; "
                      "move the file away to commit it to another contract",
                      a->dir, (unsigned long long)j.chain_id, jc);
        goto done;
    }
    if (resumed && !j.joined) {
        /* The journal's run may never have been opened: its open reverted
         * (the contract refused the terms) or was never sent. Once nothing
         * this account sent is pending, a run the chain does not know is no
         * resume point, and these flags start afresh. */
        chain_arb_params jp;
        if ((rv = chain_txm_settle(&s.txm)))
            goto done;
        rv = chain_arb_get_run(&s.arb, &j.run_id, NULL, &jp);
        if (rv == OVT_EREVERT) {
            ovt_err_clear();
            resumed = 0;
        } else if (rv) {
            goto done;
        }
        rv = 0;
    }
    if (resumed && !a->have_run_id && !j.joined) {
        if (a->have_nonce && a->p.nonce != j.nonce) {
            rv = ovt_fail(OVT_EINVAL, "--nonce %llu differs from the nonce %llu of the run this directory opened",
                          (unsigned long long)a->p.nonce, (unsigned long long)j.nonce);
            goto done;
        }
        a->p.nonce = j.nonce;
    }
    if (a->have_run_id) {
        chain_arb_params on_chain;
        party_policy pol;
        run_id = a->run_id;
        if ((rv = cli_policy_resolve(&pol, &a->policy)) ||
            (rv = chain_arb_get_run(&s.arb, &run_id, NULL, &on_chain)))
            goto done;
        if (!same_params(&on_chain, &a->p)) {
            rv = ovt_fail(OVT_EINVAL, "run --run-id was opened for another trainer, config, dataset or step count");
            goto done;
        }
        if ((rv = party_policy_check(&pol, &on_chain, s.arb.chain_id, &s.arb.address, 1)) ||
            (rv = chain_arb_find_nonce(&s.arb, &run_id, &on_chain)))
            goto done;
        a->p = on_chain;
    } else {
        if (!a->have_auditor || !a->have_arbiter) {
            rv = ovt_fail(OVT_EINVAL, "--auditor and --arbiter are required to open a run");
            goto done;
        }
        chain_arb_run_id(&run_id, s.arb.chain_id, &s.arb.address, &a->p);
    }
    if (resumed && memcmp(j.run_id.b, run_id.b, 32) != 0) {
        char jr[67];
        chain_hash_hex(jr, &j.run_id);
        rv = ovt_fail(OVT_EINVAL,
                      "%s/commit.json records run %s, but these flags name another run (different terms or "
                      "--run-id): run again with the same flags, or move the file away",
                      a->dir, jr);
        goto done;
    }
    if (!resumed) {
        j = (party_commit_journal){.chain_id = s.arb.chain_id, .contract = s.arb.address, .run_id = run_id,
                                 .nonce = a->p.nonce, .joined = a->have_run_id};
        if ((rv = chain_rpc_block_number(s.rpc, &j.from_block)) || (rv = party_commit_journal_save(a->dir, &j)))
            goto done;
    } else if ((rv = chain_txm_settle(&s.txm))) {
        goto done; /* what the interrupted run sent lands before the chain is read */
    }
    if ((rv = trn_step_table_root(&root, &t, &run_id)))
        goto done;
    if (a->store && (rv = publish(a, &t, &run_id, &steps_blob)))
        goto done;
    int found = 0;
    ovt_hash tx;
    if (!a->have_run_id) {
        chain_arb_params on_chain;
        if (resumed && chain_arb_get_run(&s.arb, &run_id, NULL, &on_chain) == 0 &&
            (rv = party_commit_find_event(&s.arb, &run_id, CHAIN_ARB_EV_RUN_OPENED, NULL, j.from_block, &tx, &found)))
            goto done;
        ovt_err_clear();
        if (found)
            rv = chain_txm_wait_hash(&s.txm, &tx, &open_r); /* opened by the interrupted run */
        else
            rv = chain_arb_open(&s.arb, &s.txm, &a->p, &run_id, &open_r);
        if (rv)
            goto done;
        trn_fault_point("opened");
    }
    uint8_t sig[65];
    found = 0;
    if (resumed && (rv = party_commit_find_event(&s.arb, &run_id, CHAIN_ARB_EV_COMMITTED, &s.txm.from, j.from_block,
                                               &tx, &found)))
        goto done;
    if (found) { /* committed by the interrupted run: the same deterministic signature */
        if ((rv = chain_arb_sign_commitment(sig, &s.txm.key, s.arb.chain_id, &s.arb.address, &run_id, &root, &a->p)) ||
            (rv = chain_txm_wait_hash(&s.txm, &tx, &commit_r)))
            goto done;
    } else if ((rv = chain_arb_commit(&s.arb, &s.txm, &run_id, &root, NULL, sig, &commit_r))) {
        goto done;
    }
    trn_fault_point("committed");
    party_receipt cr = {.chain_id = s.arb.chain_id, .contract = s.arb.address, .params = a->p,
                             .run_id = run_id, .root = root, .commit_tx = commit_r.tx_hash,
                             .has_open_tx = !a->have_run_id, .open_tx = open_r.tx_hash, .store = a->store,
                             .data = a->data, .steps_blob = steps_blob};
    memcpy(cr.signature, sig, 65);
    char *text;
    if ((rv = party_receipt_json(&cr, &text)))
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
    if (chain_parse_wei(out, flag, s, 96)) {
        fprintf(stderr, "ovt commit: %s\n", ovt_errmsg());
        return -1;
    }
    return 0;
}

int cmd_commit(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_CHAIN_LONGOPTS,
        CLI_CHAIN_CONFIRMATIONS_LONGOPT,
        CLI_POLICY_LONGOPTS,
        {"auditor", required_argument, NULL, O_AUDITOR},     {"arbiter", required_argument, NULL, O_ARBITER},
        {"bond", required_argument, NULL, O_BOND},           {"auditor-bond", required_argument, NULL, O_ABOND},
        {"commit-timeout", required_argument, NULL, O_CTO},  {"move-timeout", required_argument, NULL, O_MTO},
        {"verdict-timeout", required_argument, NULL, O_VTO}, {"nonce", required_argument, NULL, O_NONCE},
        {"run-id", required_argument, NULL, O_RUN_ID},       {"store", required_argument, NULL, O_STORE},
        {"data", required_argument, NULL, O_DATA},           {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},                    {NULL, 0, NULL, 0}};
    struct commit_args a;
    memset(&a, 0, sizeof a);
    cli_chain_init(&a.chain);
    cli_policy_init(&a.policy);
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
        const char *flag = cli_arg_name(longopts, c);
        if (cli_chain_take(&a.chain, c, optarg) || cli_policy_take(&a.policy, c, optarg))
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
            if (cli_arg_u64("commit", flag, optarg, 1, UINT32_MAX, &v)) return 2;
            *(c == O_CTO ? &a.p.commit_timeout : c == O_MTO ? &a.p.move_timeout : &a.p.arbiter_timeout) = (uint32_t)v;
            break;
        case O_NONCE:
            if (cli_arg_u64("commit", flag, optarg, 0, UINT64_MAX, &a.p.nonce)) return 2;
            a.have_nonce = 1;
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
        default: return cli_arg_unknown("commit", argv[optind - 1]);
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
