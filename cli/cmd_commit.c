/* `ovt commit`: the trainer opens its run on the arbitration contract (or
 * joins one), publishes what an auditor needs to the artifact store, commits
 * the step Merkle root with its EIP-712 signature, and writes the receipt
 * (party_commit_run, party/commit.h). */
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"
#include "cli/flags_policy.h"
#include "party/commit.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ovt commit RUNDIR --rpc-url URL --contract ADDR (--keystore F [--password-file P] |\n"
            "                  --private-key K) --auditor ADDR --arbiter ADDR... [OPTIONS]\n"
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
            "  --arbiter ADDR       an arbiter's address; repeat for a committee of up to 5\n"
            "                       (docs/contract.md): --threshold of them matching settle a dispute\n"
            "  --threshold M        matching verdicts that settle (default: a majority, n/2+1)\n"
            "  --arbiter-bond WEI   what each arbiter pays to take its seat and loses if its verdict\n"
            "                       is not the settled one or it gives none (default 0)\n"
            "  --bond WEI           the trainer's bond (default 0)\n"
            "  --auditor-bond WEI   the auditor's bond (default: --bond)\n"
            "  --commit-timeout S   how long the first commitment may take after the open, and the\n"
            "                       second after the first (default 3600); a run nobody commits to\n"
            "                       in time ends Cancelled\n"
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
            "  --replay-proof       ask for proof of replay (commitReplay): the auditor must commit,\n"
            "                       with its root, the hashes of a beacon-chosen site of every step of\n"
            "                       its replay; the trainer's agent (ovt agent) must answer with its\n"
            "                       own within --commit-timeout or the trainer loses its bond; a lazy\n"
            "                       auditor loses its own (docs/contract.md, \"Proof of replay\")\n"
            "  --json               print the receipt as JSON\n"
            "  -h, --help           this help\n"
            "\n"
            "Joining with --run-id, the run was opened by someone else: " CLI_POLICY_HELP);
}

enum { O_AUDITOR = 256, O_ARBITER, O_THRESHOLD, O_ARBITER_BOND, O_BOND, O_ABOND, O_CTO, O_MTO, O_VTO, O_NONCE, O_RUN_ID, O_STORE, O_DATA, O_JSON, O_REPLAY };

struct commit_args {
    party_commit_opts o;
    chain_session_args chain;
    cli_policy_args policy;
    unsigned n_arbiters;
    uint32_t threshold;
    bool have_auditor, have_abond, json;
};

/* One flag, this command's own or of the chain and policy groups (given:
 * the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct commit_args *a = ctx;
    chain_arb_params *p = &a->o.terms;
    int rv = 0;
    switch (c) {
    case O_AUDITOR:
        rv = chain_parse_address(&p->auditor, flag, arg);
        a->have_auditor = true;
        break;
    case O_ARBITER:
        if (a->n_arbiters == CHAIN_ARB_MAX_ARBITERS)
            return cli_usage_error("commit", "at most %d --arbiter flags (the contract's MAX_ARBITERS)",
                                   CHAIN_ARB_MAX_ARBITERS);
        rv = chain_parse_address(&p->arbiters[a->n_arbiters++], flag, arg);
        break;
    case O_THRESHOLD: rv = ovt_parse_u32(&a->threshold, flag, arg, 1, CHAIN_ARB_MAX_ARBITERS); break;
    case O_ARBITER_BOND: rv = chain_parse_wei(&p->arbiter_bond, flag, arg, 96); break;
    case O_BOND: rv = chain_parse_wei(&p->trainer_bond, flag, arg, 96); break;
    case O_ABOND:
        rv = chain_parse_wei(&p->auditor_bond, flag, arg, 96);
        a->have_abond = true;
        break;
    case O_CTO: rv = ovt_parse_u32(&p->commit_timeout, flag, arg, 1, UINT32_MAX); break;
    case O_MTO: rv = ovt_parse_u32(&p->move_timeout, flag, arg, 1, UINT32_MAX); break;
    case O_VTO: rv = ovt_parse_u32(&p->arbiter_timeout, flag, arg, 1, UINT32_MAX); break;
    case O_NONCE:
        rv = ovt_parse_u64(&p->nonce, flag, arg, 0, UINT64_MAX);
        a->o.have_nonce = true;
        break;
    case O_RUN_ID:
        rv = chain_parse_hash(&a->o.run_id, flag, arg);
        a->o.have_run_id = true;
        break;
    case O_STORE: a->o.store = arg; break;
    case O_DATA: a->o.data = arg; break;
    case O_JSON: a->json = true; break;
    case O_REPLAY: a->o.replay = true; break;
    default:
        if (cli_chain_take(&a->chain, c, arg) || cli_policy_take(&a->policy, c, arg))
            return 0;
        return cli_arg_unknown("commit", given);
    }
    return rv ? cli_usage_fail("commit") : 0;
}

static void print_receipt(const party_commit_result *r, bool json)
{
    if (json) {
        printf("%s\n", r->json);
        return;
    }
    char rid[67], rh[67];
    chain_hash_hex(rid, &r->receipt.run_id);
    chain_hash_hex(rh, &r->receipt.root);
    printf("run id   %s\nroot     %s\nsteps    %llu\nreceipt  %s\n", rid, rh,
           (unsigned long long)r->receipt.params.steps, r->path);
}

int cmd_commit(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_CHAIN_LONGOPTS,
        CLI_CHAIN_CONFIRMATIONS_LONGOPT,
        CLI_POLICY_LONGOPTS,
        {"auditor", required_argument, NULL, O_AUDITOR},     {"arbiter", required_argument, NULL, O_ARBITER},
        {"threshold", required_argument, NULL, O_THRESHOLD}, {"arbiter-bond", required_argument, NULL, O_ARBITER_BOND},
        {"bond", required_argument, NULL, O_BOND},           {"auditor-bond", required_argument, NULL, O_ABOND},
        {"commit-timeout", required_argument, NULL, O_CTO},  {"move-timeout", required_argument, NULL, O_MTO},
        {"verdict-timeout", required_argument, NULL, O_VTO}, {"nonce", required_argument, NULL, O_NONCE},
        {"run-id", required_argument, NULL, O_RUN_ID},       {"store", required_argument, NULL, O_STORE},
        {"data", required_argument, NULL, O_DATA},           {"json", no_argument, NULL, O_JSON},
        {"replay-proof", no_argument, NULL, O_REPLAY},
        {"help", no_argument, NULL, 'h'},                    {NULL, 0, NULL, 0}};
    struct commit_args a;
    memset(&a, 0, sizeof a);
    cli_chain_init(&a.chain);
    cli_policy_init(&a.policy);
    chain_arb_params *p = &a.o.terms;
    p->commit_timeout = 3600;
    p->move_timeout = 600;
    p->arbiter_timeout = 3600;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    p->nonce = ((uint64_t)now.tv_sec << 20) ^ (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 40);
    int rv = cli_getopt(argc, argv, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (optind + 1 != argc)
        return cli_usage_error("commit", "give exactly one RUNDIR");
    a.o.dir = argv[optind];
    a.o.chain = &a.chain;
    a.o.have_parties = a.have_auditor && a.n_arbiters > 0;
    if (a.threshold && (2 * a.threshold <= a.n_arbiters || a.threshold > a.n_arbiters))
        return cli_usage_error("commit", "--threshold must be more than half of the --arbiter flags and at most their "
                                         "number (the contract refuses anything else)");
    p->threshold = a.threshold;
    if (!a.have_abond)
        p->auditor_bond = p->trainer_bond;
    if (!!a.o.store != !!a.o.data)
        return cli_usage_error("commit", "--store and --data go together (the dataset is published with the run)");
    char data_abs[PATH_MAX];
    if (a.o.data && realpath(a.o.data, data_abs))
        a.o.data = data_abs;
    party_policy policy;
    if (a.o.have_run_id && cli_policy_resolve(&policy, &a.policy))
        return cli_fail("commit");
    a.o.policy = a.o.have_run_id ? &policy : NULL;
    party_commit_result r;
    if (party_commit_run(&a.o, &r))
        return cli_fail("commit");
    print_receipt(&r, a.json);
    party_commit_result_free(&r);
    return 0;
}
