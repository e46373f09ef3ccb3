/* `ovt agent` (see agent.h and docs/agent.md). */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "party/agent.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"
#include "cli/flags_policy.h"
#include "common/fileio.h"
#include "common/metrics.h"
#include "cli/args.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ovt agent --role trainer|auditor --run-id ID --rpc-url URL --contract ADDR\n"
            "                 (--keystore F [--password-file P] | --private-key K) --run DIR [OPTIONS]\n"
            "\n"
            "Plays one run's dispute game for one party until the run is settled, then prints the\n"
            "outcome (exit 0). Each turn reads getGame at a fixed block, plans the party's move from\n"
            "its own history (DIR/steps.bin: the trainer's run directory, or the auditor's --out of\n"
            "`ovt audit`), sends it, and claims a timeout when the other side is late. The trainer\n"
            "publishes the disputed step's inputs (state j-1, log j, config, dataset) to --store.\n"
            "A node that goes away is retried with backoff; SIGINT/SIGTERM stop it cleanly (exit 1).\n"
            "\n"
            "  --role R             trainer or auditor\n"
            "  --run-id HEX         the run\n" CLI_CHAIN_HELP CLI_CHAIN_CONFIRMATIONS_HELP
            "  --run DIR            this party's history (DIR/steps.bin)\n"
            "  --store URL          trainer: file://DIR, http(s)://... (PUT) or s3://BUCKET/PREFIX to\n"
            "                       publish the inputs\n"
            "                       to (default: the receipt's store)\n"
            "  --data FILE          trainer: the dataset (default: the receipt's)\n"
            "  --state-dir D        per-game state, one folder per run (default DIR/agent)\n"
            "  --poll-interval S    seconds between turns (default 2)\n"
            "  --json               log lines as JSON objects\n"
            "  --metrics-addr ADDR  serve /metrics (Prometheus text format) and /healthz on ADDR:\n"
            "                       PORT (on 127.0.0.1) or HOST:PORT; off unless given\n"
            "\n" CLI_POLICY_HELP
            "\n"
            "Fault injection (for devnet tests):\n"
            "  --withhold           trainer: never publish the disputed step's inputs\n"
            "  -h, --help           this help\n");
}

enum { O_ROLE = 256, O_RUN_ID, O_RUN, O_STORE, O_DATA, O_STATE_DIR, O_POLL, O_JSON, O_WITHHOLD, O_METRICS };

/* The store and dataset the trainer named in its receipt (if any). */
static void receipt_defaults(const char *dir, char *store, char *data, size_t cap)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    if (ovt_path_join(path, sizeof path, dir, "receipt.json") || ovt_read_file(path, &buf, &len, 1 << 20))
        return;
    json_t *j = json_loadb((const char *)buf, len, 0, NULL);
    free(buf);
    const char *s = json_string_value(json_object_get(j, "store"));
    const char *d = json_string_value(json_object_get(j, "data"));
    if (s && strlen(s) < cap)
        strcpy(store, s);
    if (d && strlen(d) < cap)
        strcpy(data, d);
    json_decref(j);
}

int cmd_agent(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_CHAIN_LONGOPTS,
        CLI_CHAIN_CONFIRMATIONS_LONGOPT,
        CLI_POLICY_LONGOPTS,
        {"role", required_argument, NULL, O_ROLE},          {"run-id", required_argument, NULL, O_RUN_ID},
        {"run", required_argument, NULL, O_RUN},            {"store", required_argument, NULL, O_STORE},
        {"data", required_argument, NULL, O_DATA},          {"state-dir", required_argument, NULL, O_STATE_DIR},
        {"poll-interval", required_argument, NULL, O_POLL}, {"json", no_argument, NULL, O_JSON},
        {"withhold", no_argument, NULL, O_WITHHOLD},        {"help", no_argument, NULL, 'h'},
        {"metrics-addr", required_argument, NULL, O_METRICS},
        {NULL, 0, NULL, 0}};
    chain_session_args chain;
    cli_chain_init(&chain);
    cli_policy_args policy_args;
    cli_policy_init(&policy_args);
    party_policy policy;
    party_agent_opts o;
    memset(&o, 0, sizeof o);
    o.poll_ms = 2000;
    const char *role = NULL, *store_url = NULL, *metrics_addr = NULL;
    int have_run_id = 0, c;
    double x;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        if (cli_chain_take(&chain, c, optarg) || cli_policy_take(&policy_args, c, optarg))
            continue;
        switch (c) {
        case 'h': usage(stdout); return 0;
        case O_ROLE: role = optarg; break;
        case O_RUN_ID:
            if (chain_parse_hash(&o.run_id, flag, optarg)) {
                fprintf(stderr, "ovt agent: %s\n", ovt_errmsg());
                return 2;
            }
            have_run_id = 1;
            break;
        case O_RUN: o.run_dir = optarg; break;
        case O_STORE: store_url = optarg; break;
        case O_DATA: o.data_path = optarg; break;
        case O_STATE_DIR: o.state_dir = optarg; break;
        case O_POLL:
            if (cli_arg_real("agent", flag, optarg, 0.01, 3600, &x)) return 2;
            o.poll_ms = (long)(x * 1000);
            break;
        case O_JSON: o.json = true; break;
        case O_WITHHOLD: o.withhold = true; break;
        case O_METRICS: metrics_addr = optarg; break;
        default: return cli_arg_unknown("agent", argv[optind - 1]);
        }
    }
    if (cli_arg_none_left("agent", argc, argv))
        return 2;
    if (!role || (strcmp(role, "trainer") && strcmp(role, "auditor"))) {
        fprintf(stderr, "ovt agent: --role must be trainer or auditor\n");
        return 2;
    }
    if (!have_run_id || !o.run_dir) {
        fprintf(stderr, "ovt agent: --run-id and --run are required; see `ovt agent --help`\n");
        return 2;
    }
    o.is_trainer = !strcmp(role, "trainer");
    if (o.withhold && !o.is_trainer) {
        fprintf(stderr, "ovt agent: --withhold is a trainer fault\n");
        return 2;
    }
    char state_dir[4096], rstore[4096] = "", rdata[4096] = "";
    if (o.is_trainer) {
        receipt_defaults(o.run_dir, rstore, rdata, sizeof rstore);
        if (!store_url && rstore[0])
            store_url = rstore;
        if (!o.data_path && rdata[0])
            o.data_path = rdata;
    }
    if (!o.state_dir) {
        if (ovt_path_join(state_dir, sizeof state_dir, o.run_dir, "agent")) {
            fprintf(stderr, "ovt agent: %s\n", ovt_errmsg());
            return 2;
        }
        o.state_dir = state_dir;
    }
    store_ctx *store = NULL;
    chain_session s;
    chain_arb_outcome outcome;
    chain_arb_params terms;
    ovt_httpserve *metrics = NULL;
    ovt_metrics_configure(o.is_trainer ? "trainer" : "auditor", o.poll_ms * 10 > 60000 ? o.poll_ms * 10 : 60000);
    int rv = cli_policy_resolve(&policy, &policy_args);
    if (!rv && metrics_addr)
        rv = ovt_metrics_serve(&metrics, metrics_addr);
    if (!rv && store_url)
        rv = store_open(&store, store_url);
    o.store = store;
    if (!rv && !(rv = chain_session_open(&s, &chain, 1))) {
        party_agent_install_signals();
        /* The run's terms against this party's policy before any move. */
        if (!(rv = chain_arb_get_run(&s.arb, &o.run_id, NULL, &terms)))
            rv = party_policy_check(&policy, &terms, s.arb.chain_id, &s.arb.address, o.is_trainer);
        if (!rv)
            rv = party_agent_run(&s, &o, &outcome);
        chain_session_close(&s);
    }
    store_close(store);
    ovt_httpserve_stop(metrics);
    if (rv) {
        fprintf(stderr, "ovt agent: %s\n", ovt_errmsg());
        return 1;
    }
    party_print_outcome(outcome, o.json);
    return 0;
}
