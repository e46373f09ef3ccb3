/* `ovt arbiter watch`: the arbiter daemon (arbiter/watch.h). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/watch.h"
#include "cli/flags_chain.h"
#include "common/metrics.h"
#include "common/signals.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt arbiter watch --rpc-url URL --contract ADDR\n"
            "                         (--keystore FILE [--password-file F] | --private-key-file F |\n"
            "                          --private-key-env VAR | --private-key KEY)\n"
            "                         --store URL --state-dir DIR [OPTIONS]\n"
            "\n"
            "Follows the arbitration contract for runs that name this account as arbiter. When\n"
            "a dispute reaches AwaitingVerdict it fetches the disputed step's inputs from the\n"
            "artifact store (state j-1, the dataset, the trainer's rounding log j), checks them\n"
            "against the hashes revealed on chain, re-executes step j on the CPU with the\n"
            "trainer's log (fraud check included) and posts the verdict: trainer right, auditor\n"
            "right, neither, fraudulent rounding log, or inputs not made available.\n"
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
            "  --once                process up to the current head and exit\n"
            "  --json                one JSON object per log line\n"
            "  --metrics-addr ADDR   serve /metrics (Prometheus text format) and /healthz on ADDR:\n"
            "                        PORT (on 127.0.0.1) or HOST:PORT; off unless given\n"
            "                        (docs/arbiter.md, \"Operating a watcher\")\n"
            "  -h, --help            this help\n");
}

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int parse_num(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "ovt arbiter watch: %s expects a number in %g..%g, got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

enum { O_STORE = 256, O_STATE, O_CONF, O_POLL, O_FROM, O_RANGE,
       O_WAIT, O_MARGIN, O_THREADS, O_ONCE, O_JSON, O_MAX_DATASET, O_METRICS };

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
        {"help", no_argument, NULL, 'h'},                  {NULL, 0, NULL, 0},
    };
    arb_watch_opts o;
    arb_watch_opts_default(&o);
    chain_session_args sa;
    cli_chain_init(&sa);
    const char *store_url = NULL, *metrics_addr = NULL;
    double x, max_dataset = (double)STORE_MAX_BLOB_DEFAULT;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_chain_take(&sa, c, optarg))
            continue;
        switch (c) {
        case O_STORE: store_url = optarg; break;
        case O_STATE: o.state_dir = optarg; break;
        case O_CONF:
            if (parse_num("--confirmations", optarg, 1, 1000, &x)) return 2;
            o.confirmations = (unsigned)x;
            break;
        case O_POLL:
            if (parse_num("--poll-interval", optarg, 0.01, 86400, &x)) return 2;
            o.poll_ms = (long)(x * 1000);
            break;
        case O_FROM:
            if (parse_num("--from-block", optarg, 0, 1e15, &x)) return 2;
            o.from_block = (uint64_t)x;
            o.has_from_block = true;
            break;
        case O_RANGE:
            if (parse_num("--log-range", optarg, 1, 1e6, &x)) return 2;
            o.log_range = (uint64_t)x;
            break;
        case O_WAIT:
            if (parse_num("--input-wait", optarg, 0, 1e9, &x)) return 2;
            o.input_wait = (uint32_t)x;
            break;
        case O_MARGIN:
            if (parse_num("--deadline-margin", optarg, 0, 1e9, &x)) return 2;
            o.deadline_margin = (uint32_t)x;
            break;
        case O_THREADS:
            if (parse_num("--threads", optarg, 0, 256, &x)) return 2;
            o.threads = (int)x;
            break;
        case O_MAX_DATASET:
            if (parse_num("--max-dataset", optarg, 1, 1e15, &max_dataset)) return 2;
            break;
        case O_ONCE: o.once = true; break;
        case O_JSON: o.json = true; break;
        case O_METRICS: metrics_addr = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "ovt arbiter watch: unknown option '%s'; see `ovt arbiter watch --help`\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ovt arbiter watch: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    const char *missing = !sa.rpc_url || !*sa.rpc_url ? "--rpc-url (or ETH_RPC_URL)"
                          : !sa.contract              ? "--contract"
                          : !store_url          ? "--store"
                          : !o.state_dir        ? "--state-dir"
                                                : NULL;
    if (missing) {
        fprintf(stderr, "ovt arbiter watch: %s is required; see `ovt arbiter watch --help`\n", missing);
        return 2;
    }
    if (chain_session_key_sources(&sa) != 1) {
        fprintf(stderr, "ovt arbiter watch: give exactly one of --keystore, --private-key-file, --private-key-env "
                        "and --private-key\n");
        return 2;
    }
    chain_address addr;
    if (chain_address_from_string(&addr, sa.contract)) {
        fprintf(stderr, "ovt arbiter watch: --contract: %s\n", ovt_errmsg());
        return 2;
    }

    ovt_on_stop_signals(on_signal);

    /* /healthz fails once no tick has completed for 10 polls (and a minute). */
    ovt_httpserve *metrics = NULL;
    ovt_metrics_configure("arbiter", o.poll_ms * 10 > 60000 ? o.poll_ms * 10 : 60000);
    if (metrics_addr && ovt_metrics_serve(&metrics, metrics_addr)) {
        fprintf(stderr, "ovt arbiter watch: %s\n", ovt_errmsg());
        return 1;
    }
    chain_session ses;
    store_ctx *store = NULL;
    int rc = chain_session_open(&ses, &sa, 1);
    if (rc == 0 && o.confirmations == 0) {
        const char *why;
        rc = arb_watch_confirmations(ses.rpc, &o.confirmations, &why);
    }
    if (rc == 0) {
        ses.txm.opts.confirmations = o.confirmations;
        ses.txm.opts.poll_ms = o.poll_ms < 250 ? o.poll_ms : 250;
        rc = store_open(&store, store_url);
    }
    if (rc == 0) {
        store_set_max_blob(store, (size_t)max_dataset);
        store_set_stop(store, &stop_requested);
    }
    if (rc == 0)
        rc = arb_watch(&o, &ses.arb, &ses.txm, store, &stop_requested);
    if (rc)
        fprintf(stderr, "ovt arbiter watch: %s\n", ovt_errmsg());
    store_close(store);
    chain_session_close(&ses);
    ovt_httpserve_stop(metrics);
    return rc ? 1 : 0;
}

int cmd_arbiter(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "watch"))
        return watch_main(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "ovt arbiter: expected the subcommand 'watch'; see `ovt arbiter --help`\n");
    return 2;
}
