/* `ovt agent`: plays one run's game for one party (party_agent_play,
 * party/agent.h; docs/agent.md). */
#include <getopt.h>
#include <stdbool.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"
#include "cli/flags_policy.h"
#include "chain/parse.h"
#include "common/parse.h"
#include "common/fileio.h"
#include "party/agent.h"

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
            "  --run-id HEX         the run\n"
            "  --game HEX           play this challenge of the run instead of the run's own game (its id\n"
            "                       from ChallengeOpened; the trainer defends its root, the challenger\n"
            "                       plays --role auditor; docs/contract.md, \"Open challenges\")\n"
            "  --defend             trainer: also play every challenge of the run as it is opened, and\n"
            "                       exit only once the challenge window has closed and every\n"
            "                       challenge is settled\n" CLI_CHAIN_HELP CLI_CHAIN_CONFIRMATIONS_HELP
            "  --run DIR            this party's history (DIR/steps.bin)\n"
            "  --store URL          trainer: file://DIR, http(s)://... (PUT) or s3://BUCKET/PREFIX to\n"
            "                       publish the inputs\n"
            "                       to (default: the receipt's store)\n"
            "  --data FILE          trainer: the dataset (default: the receipt's)\n"
            "  --state-dir D        per-game state, one folder per run (default DIR/agent)\n"
            "  --poll-interval S    seconds between turns (default 2)\n"
            "  --json               log lines as JSON objects\n"
            "  --narrow ADDRESS     the OvtNarrow contract: once the game awaits the verdict on step K,\n"
            "                       re-execute step K with its trace, play the narrowing to one block\n"
            "                       and publish that block's package to --store (docs/agent.md)\n"
            "  --metrics-addr ADDR  serve /metrics (Prometheus text format) and /healthz on ADDR:\n"
            "                       PORT (on 127.0.0.1) or HOST:PORT; off unless given\n"
            "\n" CLI_POLICY_HELP
            "\n"
            "Fault injection (for devnet tests):\n"
            "  --withhold           trainer: never publish the disputed step's inputs\n"
            "  --narrow-fault-site S --narrow-fault-element E  trainer: re-execute step K for the\n"
            "                       narrowing with flip-output at site S, element E (what its run\n"
            "                       was trained with: `ovt train --inject-fault flip-output`)\n"
            "  --narrow-forge-chain trainer: at level 4 post a chunk chain forged from its middle\n"
            "                       chunk on (leaves C/2 .. C-1), which the arbiters' recomputation\n"
            "                       of that chunk refutes\n"
            "  --narrow-no-chain    trainer: at level 4 post no chunk chain (it loses by silence)\n"
            "  --narrow-chain-extra-leaf  trainer: at level 4 post a chunk chain of C + 2 leaves (its\n"
            "                       first leaf twice): the counts differ and the arbiters rule it wrong\n"
            "  --narrow-forged      trainer: re-execute step K for the narrowing following its own log\n"
            "                       where the rule rejects it (what its run was trained with:\n"
            "                       `ovt train --inject-fault forged-log`)\n"
            "  --forge-block-entries  with --narrow: its block package's log entries are not the\n"
            "                       trainer's log's (one added or removed); the arbiters must use the log's\n"
            "  -h, --help           this help\n");
}

enum { O_ROLE = 256, O_RUN_ID, O_RUN, O_STORE, O_DATA, O_STATE_DIR, O_POLL, O_JSON, O_WITHHOLD, O_METRICS, O_GAME,
       O_DEFEND, O_NARROW, O_NARROW_SITE, O_NARROW_ELEMENT, O_NARROW_FORGE, O_NARROW_NO_CHAIN, O_NARROW_EXTRA,
       O_FORGE_ENTRIES, O_NARROW_FORGED };

struct agent_args {
    party_agent_play_opts po;
    chain_session_args chain;
    cli_policy_args policy;
    const char *role;
    bool have_run_id;
    chain_address narrow;
    trn_fault fault;
    bool have_site, have_element, forged;
};

/* One flag, this command's own or of the chain and policy groups (given:
 * the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct agent_args *a = ctx;
    party_agent_opts *o = &a->po.agent;
    double seconds;
    int rv = 0;
    switch (c) {
    case O_ROLE: a->role = arg; break;
    case O_GAME: rv = chain_parse_hash(&o->game_id, flag, arg); break;
    case O_DEFEND: o->defend = true; break;
    case O_RUN_ID:
        rv = chain_parse_hash(&o->run_id, flag, arg);
        a->have_run_id = true;
        break;
    case O_RUN: o->run_dir = arg; break;
    case O_STORE: a->po.store_url = arg; break;
    case O_DATA: o->data_path = arg; break;
    case O_STATE_DIR: o->state_dir = arg; break;
    case O_POLL:
        if (!(rv = ovt_parse_seconds(&seconds, flag, arg, 0.01, 3600)))
            o->poll_ms = (long)(seconds * 1000);
        break;
    case O_JSON: o->json = true; break;
    case O_WITHHOLD: o->withhold = true; break;
    case O_FORGE_ENTRIES: o->forge_block_entries = true; break;
    case O_NARROW_FORGED: a->forged = true; break;
    case O_METRICS: a->po.metrics_addr = arg; break;
    case O_NARROW:
        if (!(rv = chain_parse_address(&a->narrow, flag, arg)))
            o->narrow = &a->narrow;
        break;
    case O_NARROW_SITE:
        rv = ovt_parse_u32(&a->fault.site, flag, arg, 0, UINT32_MAX - 1);
        a->have_site = true;
        break;
    case O_NARROW_FORGE: o->narrow_forge_chain = PARTY_CHAIN_FORGED_MIDDLE; break;
    case O_NARROW_EXTRA: o->narrow_forge_chain = PARTY_CHAIN_EXTRA_LEAF; break;
    case O_NARROW_NO_CHAIN: o->narrow_no_chain = true; break;
    case O_NARROW_ELEMENT:
        rv = ovt_parse_u64(&a->fault.element, flag, arg, 0, UINT64_MAX / 2);
        a->have_element = true;
        break;
    default:
        if (cli_chain_take(&a->chain, c, arg) || cli_policy_take(&a->policy, c, arg))
            return 0;
        return cli_arg_unknown("agent", given);
    }
    return rv ? cli_usage_fail("agent") : 0;
}

int cmd_agent(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_CHAIN_LONGOPTS,
        CLI_CHAIN_CONFIRMATIONS_LONGOPT,
        CLI_POLICY_LONGOPTS,
        {"role", required_argument, NULL, O_ROLE},          {"run-id", required_argument, NULL, O_RUN_ID},
        {"game", required_argument, NULL, O_GAME},          {"defend", no_argument, NULL, O_DEFEND},
        {"run", required_argument, NULL, O_RUN},            {"store", required_argument, NULL, O_STORE},
        {"data", required_argument, NULL, O_DATA},          {"state-dir", required_argument, NULL, O_STATE_DIR},
        {"poll-interval", required_argument, NULL, O_POLL}, {"json", no_argument, NULL, O_JSON},
        {"withhold", no_argument, NULL, O_WITHHOLD},        {"help", no_argument, NULL, 'h'},
        {"metrics-addr", required_argument, NULL, O_METRICS},
        {"narrow", required_argument, NULL, O_NARROW},
        {"narrow-fault-site", required_argument, NULL, O_NARROW_SITE},
        {"narrow-fault-element", required_argument, NULL, O_NARROW_ELEMENT},
        {"narrow-forge-chain", no_argument, NULL, O_NARROW_FORGE},
        {"narrow-no-chain", no_argument, NULL, O_NARROW_NO_CHAIN},
        {"narrow-chain-extra-leaf", no_argument, NULL, O_NARROW_EXTRA},
        {"forge-block-entries", no_argument, NULL, O_FORGE_ENTRIES},
        {"narrow-forged", no_argument, NULL, O_NARROW_FORGED},
        {NULL, 0, NULL, 0}};
    struct agent_args a;
    memset(&a, 0, sizeof a);
    cli_chain_init(&a.chain);
    cli_policy_init(&a.policy);
    party_agent_opts *o = &a.po.agent;
    o->poll_ms = 2000;
    int rv = cli_getopt(argc, argv, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("agent", argc, argv))
        return 2;
    if (!a.role || (strcmp(a.role, "trainer") && strcmp(a.role, "auditor")))
        return cli_usage_error("agent", "--role must be trainer or auditor");
    if (!a.have_run_id || !o->run_dir)
        return cli_usage_error("agent", "--run-id and --run are required");
    o->is_trainer = !strcmp(a.role, "trainer");
    if (o->withhold && !o->is_trainer)
        return cli_usage_error("agent", "--withhold is a trainer fault");
    if (a.have_site != a.have_element || ((a.have_site || a.have_element) && (!o->is_trainer || !o->narrow)))
        return cli_usage_error("agent", "--narrow-fault-site and --narrow-fault-element go together, with "
                                        "--role trainer and --narrow");
    if ((o->narrow_forge_chain || o->narrow_no_chain) && (!o->is_trainer || !o->narrow))
        return cli_usage_error("agent", "--narrow-forge-chain, --narrow-chain-extra-leaf and --narrow-no-chain go "
                                        "with --role trainer and --narrow");
    if (o->forge_block_entries && !o->narrow)
        return cli_usage_error("agent", "--forge-block-entries goes with --narrow");
    if (a.forged && (a.have_site || !o->is_trainer || !o->narrow))
        return cli_usage_error("agent", "--narrow-forged goes with --role trainer and --narrow, without "
                                        "--narrow-fault-site");
    if (a.have_site || a.forged) {
        /* its step is set when the narrowing knows K */
        a.fault.kind = a.forged ? TRN_FAULT_FORGED_LOG : TRN_FAULT_FLIP_OUTPUT;
        o->narrow_fault = &a.fault;
    }
    char state_dir[4096];
    if (!o->state_dir) {
        if (ovt_path_join(state_dir, sizeof state_dir, o->run_dir, "agent"))
            return cli_usage_fail("agent");
        o->state_dir = state_dir;
    }
    party_policy policy;
    if (cli_policy_resolve(&policy, &a.policy))
        return cli_fail("agent");
    a.po.chain = &a.chain;
    a.po.policy = &policy;
    chain_arb_outcome outcome;
    if (party_agent_play(&a.po, &outcome))
        return cli_fail("agent");
    party_print_outcome(outcome, o->json);
    return 0;
}
