/* `ovt arbiter watch`: the arbiter daemon (arb_daemon_run, arbiter/daemon.h;
 * docs/arbiter.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "arbiter/daemon.h"
#include "chain/parse.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt arbiter watch --rpc-url URL --contract ADDR\n"
            "                         (--keystore FILE [--password-file F] | --private-key-file F |\n"
            "                          --private-key-env VAR | --private-key KEY)\n"
            "                         --store URL --state-dir DIR [OPTIONS]\n"
            "\n"
            "Follows the arbitration contract for runs that name this account as arbiter, in any\n"
            "seat of the run's committee (taking the seat with accept() when the run asks an\n"
            "arbiter bond). When a dispute reaches AwaitingVerdict it fetches the disputed step's\n"
            "inputs from the artifact store (state j-1, the dataset, the trainer's rounding log j),\n"
            "checks them against the hashes revealed on chain, re-executes step j on the CPU with\n"
            "the trainer's log (fraud check included) and posts the verdict: trainer right, auditor\n"
            "right, neither, fraudulent rounding log, or inputs not made available. On a committee\n"
            "it seals that verdict (commitVerdict; its salt is kept in --state-dir) and opens it\n"
            "(revealVerdict) once the reveals are open.\n"
            "Its cursor and one folder per game live in --state-dir, so a restart resumes.\n"
            "SIGINT/SIGTERM stop it cleanly.\n"
            "\n"
            "  --rpc-url URL         the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"
            "  --contract ADDR       the arbitration contract\n"
            "  --keystore FILE       the arbiter's Web3 v3 keystore; password from\n"
            "                        --password-file, else $OVT_PASSWORD, else a prompt\n"
            "  --private-key-file F  a file holding a raw hex key (mode 0600)\n"
            "  --private-key-env V   the environment variable V holds a raw hex key\n"
            "  --private-key KEY     a raw hex key (throwaway devnet accounts only; overwritten in\n"
            "                        argv at once, but ps may see it before)\n"
            "  --store URL           the artifact store: file://DIR, http://..., https://...,\n"
            "                        s3://BUCKET/PREFIX (docs/store.md)\n"
            "  --state-dir DIR       where the cursor and the games are kept (created)\n"
            "  --confirmations N     act on blocks this deep, the head counting as 1 (default: 1\n"
            "                        on an automining devnet, else 2; docs/arbiter.md)\n"
            "  --poll-interval S     seconds between polls (default 4; fractions allowed)\n"
            "  --from-block B        first block to read when DIR has no cursor (default: the\n"
            "                        contract's deployment block, found with eth_getCode)\n"
            "  --log-range N         blocks per eth_getLogs range (default 2000)\n"
            "  --input-wait S        seconds to wait for missing inputs before ruling them\n"
            "                        unavailable (default 600; always ruled before the deadline)\n"
            "  --deadline-margin S   seconds before the verdict deadline that end any wait (default 120)\n"
            "  --max-dataset BYTES   the largest dataset (and any blob without a tighter cap) it\n"
            "                        fetches (default 1073741824, 1 GiB); a checkpoint is capped at\n"
            "                        its model's size, a log at the format's 515 MiB, a config at 4 KiB\n"
            "  --threads N           CPU threads for re-execution (default: all)\n"
            "  --max-arbiter-bond W  the most it pays with accept() to take a seat on a run that asks an\n"
            "                        arbiter bond: wei, or with gwei/ether (default 1ether); above it\n"
            "                        it logs seat_refused and does not sit\n"
            "  --max-commit-timeout S  the longest commit window (the run's commit timeout) of a run it\n"
            "                        sits on (default 604800, 7 days): a run nobody commits to returns\n"
            "                        the bond only after it\n"
            "  --known-party ADDR    a trainer whose runs it sits on before the trainer's commitment\n"
            "                        (repeatable, up to 16); any other run's seat is taken only once its\n"
            "                        trainer has committed (until then: seat_refused, decline\n"
            "                        \"uncommitted\")\n"
            "  --narrow ADDRESS      the OvtNarrow contract: on a run with the tree stateHash, rule from\n"
            "                        the narrowing's end (one block re-executed from the parties'\n"
            "                        block packages in the store) and fall back to the whole step\n"
            "                        when it ends without a block (docs/arbiter.md)\n"
            "  --misbehave lie|silent  for devnet simulations only: lie = seal and reveal (or give) a\n"
            "                        wrong verdict the contract accepts (the same one from every liar);\n"
            "                        silent = take the seat (and pay its bond), never seal, reveal or rule\n"
            "  --once                process up to the current head and exit\n"
            "  --json                one JSON object per log line\n"
            "  --metrics-addr ADDR   serve /metrics (Prometheus text format), /healthz and the status\n"
            "                        page (/status: HTML for a browser, /status.json) on ADDR:\n"
            "                        PORT (on 127.0.0.1) or HOST:PORT; off unless given\n"
            "                        (docs/arbiter.md, \"Operating a watcher\")\n"
            "  -h, --help            this help\n");
}

enum { O_STORE = 256, O_STATE, O_CONF, O_POLL, O_FROM, O_RANGE,
       O_WAIT, O_MARGIN, O_THREADS, O_ONCE, O_JSON, O_MAX_DATASET, O_METRICS, O_MAX_BOND, O_MISBEHAVE,
       O_MAX_COMMIT_TIMEOUT, O_KNOWN, O_NARROW };

struct watch_args {
    arb_daemon_opts d;
    chain_session_args chain;
};

/* One flag, the watcher's own or of the chain group (given: the argument
 * as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct watch_args *a = ctx;
    arb_daemon_opts *d = &a->d;
    arb_watch_opts *o = &d->watch;
    double seconds;
    int rv = 0;
    switch (c) {
    case O_STORE: d->store_url = arg; break;
    case O_STATE: o->state_dir = arg; break;
    case O_CONF: rv = ovt_parse_u32(&o->confirmations, flag, arg, 1, 1000); break;
    case O_POLL:
        if (!(rv = ovt_parse_seconds(&seconds, flag, arg, 0.01, 86400)))
            o->poll_ms = (long)(seconds * 1000);
        break;
    case O_FROM:
        rv = ovt_parse_u64(&o->from_block, flag, arg, 0, 1000000000000000ULL);
        o->has_from_block = true;
        break;
    case O_RANGE: rv = ovt_parse_u64(&o->log_range, flag, arg, 1, 1000000); break;
    case O_WAIT:
        if (!(rv = ovt_parse_seconds(&seconds, flag, arg, 0, 1e9)))
            o->input_wait = (uint32_t)seconds;
        break;
    case O_MARGIN:
        if (!(rv = ovt_parse_seconds(&seconds, flag, arg, 0, 1e9)))
            o->deadline_margin = (uint32_t)seconds;
        break;
    case O_THREADS: rv = ovt_parse_int(&o->threads, flag, arg, 0, 256); break;
    case O_MAX_DATASET: rv = ovt_parse_size(&d->max_blob, flag, arg, 1, 1000000000000000ULL); break;
    case O_ONCE: o->once = true; break;
    case O_JSON: o->json = true; break;
    case O_METRICS: d->metrics_addr = arg; break;
    case O_MAX_BOND: rv = chain_parse_wei(&o->max_arbiter_bond, flag, arg, 256); break;
    case O_MAX_COMMIT_TIMEOUT: rv = ovt_parse_u32(&o->max_commit_timeout, flag, arg, 1, UINT32_MAX); break;
    case O_KNOWN:
        if (o->nknown == ARB_MAX_KNOWN)
            rv = ovt_fail(OVT_EINVAL, "%s: at most %d addresses", flag, ARB_MAX_KNOWN);
        else if (!(rv = chain_parse_address(&o->known[o->nknown], flag, arg)))
            o->nknown++;
        break;
    case O_NARROW:
        if (!(rv = chain_parse_address(&o->narrow, flag, arg)))
            o->has_narrow = true;
        break;
    case O_MISBEHAVE:
        if (!strcmp(arg, "lie"))
            o->misbehave = ARB_MISBEHAVE_LIE;
        else if (!strcmp(arg, "silent"))
            o->misbehave = ARB_MISBEHAVE_SILENT;
        else
            rv = ovt_fail(OVT_EINVAL, "%s: expected lie or silent (for devnet simulations only), not '%s'", flag, arg);
        break;
    default: return cli_chain_take(&a->chain, c, arg) ? 0 : cli_arg_unknown("arbiter watch", given);
    }
    return rv ? cli_usage_fail("arbiter watch") : 0;
}

static int watch_main(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_CHAIN_LONGOPTS,                            {"store", required_argument, NULL, O_STORE},
        {"state-dir", required_argument, NULL, O_STATE},   {"confirmations", required_argument, NULL, O_CONF},
        {"poll-interval", required_argument, NULL, O_POLL}, {"from-block", required_argument, NULL, O_FROM},
        {"log-range", required_argument, NULL, O_RANGE},   {"input-wait", required_argument, NULL, O_WAIT},
        {"deadline-margin", required_argument, NULL, O_MARGIN}, {"threads", required_argument, NULL, O_THREADS},
        {"max-dataset", required_argument, NULL, O_MAX_DATASET},
        {"once", no_argument, NULL, O_ONCE},               {"json", no_argument, NULL, O_JSON},
        {"metrics-addr", required_argument, NULL, O_METRICS},
        {"max-arbiter-bond", required_argument, NULL, O_MAX_BOND},
        {"misbehave", required_argument, NULL, O_MISBEHAVE},
        {"narrow", required_argument, NULL, O_NARROW},
        {"max-commit-timeout", required_argument, NULL, O_MAX_COMMIT_TIMEOUT},
        {"known-party", required_argument, NULL, O_KNOWN},
        {"help", no_argument, NULL, 'h'},                  {NULL, 0, NULL, 0},
    };
    struct watch_args a = {.d = {.max_blob = STORE_MAX_BLOB_DEFAULT}};
    cli_chain_init(&a.chain);
    arb_watch_opts_default(&a.d.watch);
    int rv = cli_getopt(argc, argv, opts, usage, take, &a);
    if (rv >= 0)
        return rv;
    const chain_session_args *sa = &a.chain;
    arb_daemon_opts *d = &a.d;
    d->chain = sa;
    if (cli_arg_none_left("arbiter watch", argc, argv))
        return 2;
    const char *missing = !sa->rpc_url || !*sa->rpc_url ? "--rpc-url (or ETH_RPC_URL)"
                          : !sa->contract               ? "--contract"
                          : !d->store_url               ? "--store"
                          : !d->watch.state_dir         ? "--state-dir"
                                                        : NULL;
    if (missing)
        return cli_usage_error("arbiter watch", "%s is required", missing);
    if (chain_session_key_sources(sa) != 1)
        return cli_usage_error("arbiter watch", "give exactly one of --keystore, --private-key-file, "
                                                "--private-key-env and --private-key");
    chain_address addr;
    if (chain_parse_address(&addr, "--contract", sa->contract))
        return cli_usage_fail("arbiter watch");
    return arb_daemon_run(d) ? cli_fail("arbiter watch") : 0;
}

int cmd_arbiter(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "watch"))
        return watch_main(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        usage(stdout);
        return 0;
    }
    return cli_usage_error("arbiter", "expected the subcommand 'watch'");
}
