/* `ovt audit`: replays a trainer's run on this auditor's backend and
 * compares it leaf by leaf (auditor/audit.h); with the chain flags it also
 * commits the auditor's root and can play the game (party/audit.h).
 * docs/agent.md. */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"
#include "cli/flags_policy.h"
#include "chain/parse.h"
#include "party/agent.h"
#include "party/audit.h"
#include "party/challenger.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ovt audit RUNDIR_OR_STORE [OPTIONS]\n"
            "\n"
            "Replays a trainer's run with its rounding logs (REPLAY mode) on this auditor's backend\n"
            "and compares every step's leaf (stateHash, batchHash, logHash) with the trainer's step\n"
            "table. Prints \"verified\", the first divergent step, or a fraudulent log. Exit status:\n"
            "0 verified, 3 divergent or fraudulent, 1 failure, 2 usage.\n"
            "\n"
            "The run is a directory written by `ovt train` (give --data), or a store URL\n"
            "(file://, http://, https://) with --run-id: the run published there by `ovt commit`\n"
            "is fetched into OUT/trainer, every object checked against its hash.\n"
            "\n"
            "  --backend NAME       cpu, ref (default) or shuffle\n"
            "  --threads N          cpu backend threads (default: the backend's)\n"
            "  --data FILE          the dataset (run directory source)\n"
            "  --steps-from N       first step to compare (default 1; > 1 starts from the trainer's\n"
            "                       latest checkpoint before it)\n"
            "  --steps-to N         last step to compare (default: the last)\n"
            "  --out DIR            write the auditor's history (DIR/steps.bin) and DIR/audit.json\n"
            "  --run-id HEX         the run on chain (store source, and to commit)\n"
            "  --max-dataset BYTES  the largest dataset, or any other object, fetched from the store\n"
            "                       (default 1073741824, 1 GiB; the config is capped at 4 KiB and\n"
            "                       steps.bin at its size for the manifest's N)\n"
            "  --fetch-timeout S    the whole fetch from the store ends after S seconds (default 3600)\n"
            "  --json               print the report as JSON\n"
            "  --trace-step K       also record step K's trace as the replay computes it (docs/formats.md,\n"
            "                       \"Step trace\"): its root in the report; an honest step's is the one\n"
            "                       `ovt step --trace` and the arbiter compute, on any backend\n"
            "  --trace-out FILE     with --trace-step: the trace file written to FILE (atomically)\n"
            "\n"
            "On chain (the auditor commits its own root for --run-id; needs a full audit and --out):\n"
            CLI_CHAIN_HELP CLI_CHAIN_CONFIRMATIONS_HELP
            "  --agent              then play the game to the end as the auditor's agent\n"
            "  --challenge          replay as an outside challenger, with a key that is not the run's\n"
            "                       auditor: once the trainer has committed, challenge() its root if\n"
            "                       the replay's differs (bond: the run's auditor bond); with --agent\n"
            "                       play that challenge (docs/contract.md, \"Open challenges\")\n"
            "  --state-dir DIR      the agent's per-game state (default OUT/agent)\n"
            "  --poll-interval S    the agent's polling interval in seconds (default 2)\n"
            "  --narrow ADDRESS     with --agent and a store source: the OvtNarrow contract; the agent\n"
            "                       plays the narrowing of the disputed step and publishes its block\n"
            "                       package to the store (docs/agent.md, \"Narrowing\")\n"
            "\n"
            "The challenger's daemon: ovt audit --watch STORE --state-dir DIR (chain flags, policy):\n"
            "  --watch              follow the contract: replay every run whose trainer commits (from\n"
            "                       STORE, where `ovt commit --store` published it) and whose terms\n"
            "                       are inside the policy, challenge() a root the replay does not\n"
            "                       reproduce within the run's window, and play each challenge to its\n"
            "                       end; state in DIR (a restart resumes, never challenges twice)\n"
            "  --from-block N       the first block read at the first start (default: the head)\n"
            "  --once               one pass up to the head, a move of each challenge, and exit\n"
            "\n" CLI_POLICY_HELP
            "\n"
            "Fault injection (for devnet tests, never for real audits):\n"
            "  --lie-at STEP        a lying auditor: its history carries wrong stateHashes from STEP on\n"
            "  --copy-trainer-root  a colluding (or lazy) named auditor: commit the trainer's root,\n"
            "                       whatever the replay found (the trainer must have committed)\n"
            "  --withhold-block     with --narrow: never publish the block package (the arbiters\n"
            "                       compute the block from the trainer's alone)\n"
            "  --guess-sites-from STEP  a lazy named auditor on a run with proof of replay: its site\n"
            "                       hashes are guessed from STEP on, not its replay's\n"
            "  -h, --help           this help\n");
}

enum { O_BACKEND = 256, O_THREADS, O_DATA, O_FROM, O_TO, O_OUT, O_RUN_ID, O_JSON, O_AGENT, O_STATE_DIR, O_POLL,
       O_LIE_AT, O_MAX_DATASET, O_FETCH_TIMEOUT, O_CHALLENGE, O_WATCH, O_FROM_BLOCK, O_ONCE, O_COPY_ROOT,
       O_TRACE_STEP, O_TRACE_OUT, O_GUESS_SITES, O_NARROW, O_WITHHOLD_BLOCK };

struct audit_args {
    party_audit_opts o;
    chain_session_args chain;
    cli_policy_args policy;
    bool have_run_id;
    bool watch, once, has_from_block;
    uint64_t from_block;
    chain_address narrow;
};

static void print_report(void *ctx, const aud_report *r, const json_t *j)
{
    const party_audit_opts *o = ctx;
    const char *backend = o->audit.backend_name;
    if (o->json) {
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        printf("%s\n", text ? text : "{}");
        free(text);
        return;
    }
    if (r->finding == AUD_VERIFIED)
        printf("verified: %llu steps replayed on %s match the trainer's leaves\n", (unsigned long long)r->replayed,
               backend);
    else if (r->finding == AUD_DIVERGED)
        printf("divergent at step %llu:%s%s%s\n", (unsigned long long)r->step,
               r->state_differs ? " stateHash differs" : "", r->batch_differs ? " batchHash differs" : "",
               r->log_differs ? " logHash differs" : "");
    else
        printf("fraud at step %llu: %s\n", (unsigned long long)r->step, r->detail);
    if (r->traced && r->trace_rc == 0) {
        char hex[65];
        ovt_hex_encode(hex, r->trace_root.b, 32);
        printf("trace of step %llu on %s: 0x%s\n", (unsigned long long)r->trace_step, backend, hex);
    }
    if (r->canonical_steps)
        printf("note: %llu steps re-executed canonically (the arbiter's computation, on cpu) where the replay on %s "
               "was uncertain; that view decided them\n", (unsigned long long)r->canonical_steps, backend);
    if (r->suspect_step)
        printf("note: the log of step %llu breaks the arbiter's rule: %s\n", (unsigned long long)r->suspect_step,
               r->suspect);
    if (r->shard_step && r->shard_owner_known)
        printf("step %llu: shard %u's gradient differs from the trainer's shard table (computed by rank %u on host "
               "%s, per the trainer's ranks.json%s)\n",
               (unsigned long long)r->shard_step, r->shard, r->shard_rank, r->shard_host,
               r->shard_owner_bound ? "" : ", which no ranks.json.sha256 binds: a run from before it");
    else if (r->shard_step)
        printf("step %llu: shard %u's gradient differs from the trainer's shard table (its process is not known: "
               "%s)\n",
               (unsigned long long)r->shard_step, r->shard, r->shard_owner_note);
}

/* One flag, this command's own or of the chain and policy groups (given:
 * the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct audit_args *a = ctx;
    aud_audit_opts *ao = &a->o.audit;
    double seconds;
    int rv = 0;
    switch (c) {
    case O_BACKEND:
        if (krn_backend_parse(&ao->backend, arg) || ao->backend == KRN_BACKEND_CUDA)
            return cli_usage_error("audit", "--backend must be cpu, ref or shuffle, got '%s'", arg);
        ao->backend_name = arg;
        break;
    case O_THREADS: rv = ovt_parse_int(&ao->threads, flag, arg, 0, 256); break;
    case O_DATA: ao->data = arg; break;
    case O_FROM: rv = ovt_parse_u64(&ao->from, flag, arg, 1, UINT64_MAX); break;
    case O_TO: rv = ovt_parse_u64(&ao->to, flag, arg, 1, UINT64_MAX); break;
    case O_LIE_AT: rv = ovt_parse_u64(&ao->lie_at, flag, arg, 0, UINT64_MAX); break;
    case O_TRACE_STEP: rv = ovt_parse_u64(&ao->trace_step, flag, arg, 1, UINT64_MAX); break;
    case O_TRACE_OUT: ao->trace_out = arg; break;
    case O_MAX_DATASET: rv = ovt_parse_size(&ao->max_blob, flag, arg, 1, (size_t)1 << 40); break;
    case O_FETCH_TIMEOUT: rv = ovt_parse_seconds(&ao->fetch_timeout, flag, arg, 0.1, 1e7); break;
    case O_OUT: ao->out = arg; break;
    case O_STATE_DIR: a->o.state_dir = arg; break;
    case O_RUN_ID:
        rv = chain_parse_hash(&ao->run_id, flag, arg);
        a->have_run_id = true;
        break;
    case O_JSON: a->o.json = true; break;
    case O_AGENT: a->o.agent = true; break;
    case O_CHALLENGE: a->o.challenge = true; break;
    case O_WATCH: a->watch = true; break;
    case O_COPY_ROOT: a->o.copy_trainer_root = true; break;
    case O_GUESS_SITES: rv = ovt_parse_u64(&a->o.guess_sites_from, flag, arg, 1, UINT64_MAX); break;
    case O_ONCE: a->once = true; break;
    case O_WITHHOLD_BLOCK: a->o.withhold_block = true; break;
    case O_NARROW:
        if (!(rv = chain_parse_address(&a->narrow, flag, arg)))
            a->o.narrow = &a->narrow;
        break;
    case O_FROM_BLOCK:
        rv = ovt_parse_u64(&a->from_block, flag, arg, 0, UINT64_MAX);
        a->has_from_block = true;
        break;
    case O_POLL:
        if (!(rv = ovt_parse_seconds(&seconds, flag, arg, 0.01, 3600)))
            a->o.poll_ms = (long)(seconds * 1000);
        break;
    default:
        if (cli_chain_take(&a->chain, c, arg) || cli_policy_take(&a->policy, c, arg))
            return 0;
        return cli_arg_unknown("audit", given);
    }
    return rv ? cli_usage_fail("audit") : 0;
}

/* What the flags leave unsaid or say against each other, or NULL. */
static const char *problem(const struct audit_args *a)
{
    const aud_audit_opts *ao = &a->o.audit;
    bool from_store = aud_source_is_store(ao->source), on_chain = chain_session_args_any(&a->chain);
    if (a->watch && (!from_store || !on_chain || !a->o.state_dir))
        return "--watch needs a store URL, the chain flags and --state-dir";
    if (a->watch && (a->have_run_id || ao->out || a->o.agent || a->o.challenge || ao->from > 1 || ao->to ||
                     a->o.copy_trainer_root || ao->trace_step || ao->trace_out))
        return "--watch finds its runs on chain and plays its challenges: drop --run-id, --out, --agent, "
               "--challenge, --copy-trainer-root, --trace-step/--trace-out and --steps-from/--steps-to";
    if (!a->watch && (a->once || a->has_from_block))
        return "--once and --from-block go with --watch";
    if (a->watch)
        return NULL;
    if (from_store && (!a->have_run_id || !ao->out))
        return "a store source needs --run-id and --out";
    if (!from_store && !ao->data)
        return "a run directory source needs --data";
    if (ao->trace_out && !ao->trace_step)
        return "--trace-out needs --trace-step";
    if (on_chain && (!a->have_run_id || !ao->out))
        return "committing needs --run-id and --out";
    if (a->o.agent && !on_chain)
        return "--agent needs the chain flags";
    if (a->o.challenge && !on_chain)
        return "--challenge needs the chain flags";
    if (a->o.withhold_block && !a->o.narrow)
        return "--withhold-block goes with --narrow";
    if (a->o.narrow && (!a->o.agent || !from_store))
        return "--narrow needs --agent and a store source (the block package goes to that store)";
    if ((a->o.copy_trainer_root || a->o.guess_sites_from) && (!on_chain || a->o.challenge || a->watch))
        return "--copy-trainer-root and --guess-sites-from are a named auditor's faults: they need the chain flags, "
               "not --challenge or --watch";
    return NULL;
}

int cmd_audit(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_CHAIN_LONGOPTS,
        CLI_CHAIN_CONFIRMATIONS_LONGOPT,
        CLI_POLICY_LONGOPTS,
        {"backend", required_argument, NULL, O_BACKEND},     {"threads", required_argument, NULL, O_THREADS},
        {"data", required_argument, NULL, O_DATA},           {"steps-from", required_argument, NULL, O_FROM},
        {"steps-to", required_argument, NULL, O_TO},         {"out", required_argument, NULL, O_OUT},
        {"run-id", required_argument, NULL, O_RUN_ID},       {"json", no_argument, NULL, O_JSON},
        {"agent", no_argument, NULL, O_AGENT},               {"state-dir", required_argument, NULL, O_STATE_DIR},
        {"challenge", no_argument, NULL, O_CHALLENGE},       {"watch", no_argument, NULL, O_WATCH},
        {"once", no_argument, NULL, O_ONCE},                 {"from-block", required_argument, NULL, O_FROM_BLOCK},
        {"copy-trainer-root", no_argument, NULL, O_COPY_ROOT},
        {"guess-sites-from", required_argument, NULL, O_GUESS_SITES},
        {"poll-interval", required_argument, NULL, O_POLL},  {"lie-at", required_argument, NULL, O_LIE_AT},
        {"max-dataset", required_argument, NULL, O_MAX_DATASET},
        {"fetch-timeout", required_argument, NULL, O_FETCH_TIMEOUT},
        {"trace-step", required_argument, NULL, O_TRACE_STEP}, {"trace-out", required_argument, NULL, O_TRACE_OUT},
        {"narrow", required_argument, NULL, O_NARROW},
        {"withhold-block", no_argument, NULL, O_WITHHOLD_BLOCK},
        {"help", no_argument, NULL, 'h'},                    {NULL, 0, NULL, 0}};
    struct audit_args a;
    memset(&a, 0, sizeof a);
    cli_chain_init(&a.chain);
    cli_policy_init(&a.policy);
    a.o.audit = (aud_audit_opts){.backend = KRN_BACKEND_REF, .backend_name = "ref",
                                 .max_blob = STORE_MAX_BLOB_DEFAULT, .fetch_timeout = 3600};
    a.o.poll_ms = 2000;
    int rv = cli_getopt(argc, argv, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (optind + 1 != argc)
        return cli_usage_error("audit", "give exactly one RUNDIR or store URL");
    a.o.audit.source = argv[optind];
    const char *why = problem(&a);
    if (why)
        return cli_usage_error("audit", "%s", why);
    party_policy policy;
    if (chain_session_args_any(&a.chain)) {
        if (cli_policy_resolve(&policy, &a.policy))
            return cli_fail("audit");
        a.o.chain = &a.chain;
        a.o.policy = &policy;
    }
    if (a.watch) {
        party_challenger_opts co = {.chain = &a.chain, .policy = &policy, .store_url = a.o.audit.source,
                                    .state_dir = a.o.state_dir, .audit = a.o.audit, .from_block = a.from_block,
                                    .has_from_block = a.has_from_block, .poll_ms = a.o.poll_ms, .once = a.once,
                                    .json = a.o.json};
        party_agent_install_signals();
        return party_challenger_run(&co) ? cli_fail("audit") : 0;
    }
    a.o.on_report = print_report;
    a.o.ctx = &a.o;
    party_audit_result r;
    if (party_audit(&a.o, &r))
        return cli_fail("audit");
    if (r.played)
        party_print_outcome(r.outcome, a.o.json);
    return r.finding == AUD_VERIFIED ? 0 : 3;
}
