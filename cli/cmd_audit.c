/* `ovt audit` (see cli.h and docs/agent.md). */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "party/agent.h"
#include "cli/commands.h"
#include "auditor/replay.h"
#include "cli/flags_chain.h"
#include "cli/flags_policy.h"
#include "common/fileio.h"
#include "common/signals.h"
#include "cli/args.h"
#include "trainer/rundata.h"

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
            "\n"
            "On chain (the auditor commits its own root for --run-id; needs a full audit and --out):\n"
            CLI_CHAIN_HELP CLI_CHAIN_CONFIRMATIONS_HELP
            "  --agent              then play the game to the end as the auditor's agent\n"
            "  --state-dir DIR      the agent's per-game state (default OUT/agent)\n"
            "  --poll-interval S    the agent's polling interval in seconds (default 2)\n"
            "\n" CLI_POLICY_HELP
            "\n"
            "Fault injection (for devnet tests, never for real audits):\n"
            "  --lie-at STEP        a lying auditor: its history carries wrong stateHashes from STEP on\n"
            "  -h, --help           this help\n");
}

enum { O_BACKEND = 256, O_THREADS, O_DATA, O_FROM, O_TO, O_OUT, O_RUN_ID, O_JSON, O_AGENT, O_STATE_DIR, O_POLL,
       O_LIE_AT, O_MAX_DATASET, O_FETCH_TIMEOUT };

struct audit_args {
    const char *source, *data, *out, *state_dir;
    krn_backend_kind backend;
    const char *backend_name;
    int threads, json, agent, have_run_id;
    uint64_t from, to, lie_at;
    long poll_ms;
    uint64_t max_dataset;
    double fetch_timeout;
    ovt_hash run_id;
    chain_session_args chain;
    cli_policy_args policy;
};

static const char *finding_name(aud_finding f)
{
    return f == AUD_VERIFIED ? "verified" : f == AUD_DIVERGED ? "divergent" : "fraud";
}

static json_t *report_json(const struct audit_args *a, const aud_report *r)
{
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:b}", "finding", finding_name(r->finding), "backend",
                          a->backend_name, "steps", (json_int_t)r->steps, "replayed", (json_int_t)r->replayed,
                          "partial", r->partial);
    if (r->finding != AUD_VERIFIED) {
        json_object_set_new(o, "step", json_integer((json_int_t)r->step));
        json_object_set_new(o, "state_differs", json_boolean(r->state_differs));
        json_object_set_new(o, "batch_differs", json_boolean(r->batch_differs));
        json_object_set_new(o, "log_differs", json_boolean(r->log_differs));
    }
    if (r->finding == AUD_FRAUD)
        json_object_set_new(o, "detail", json_string(r->detail));
    if (r->suspect_step)
        json_object_set_new(o, "suspect", json_pack("{s:I, s:s}", "step", (json_int_t)r->suspect_step, "detail",
                                                    r->suspect));
    if (r->shard_step) {
        json_t *sd = json_pack("{s:I, s:I}", "step", (json_int_t)r->shard_step, "shard", (json_int_t)r->shard);
        json_object_set_new(sd, "rank", r->shard_owner_known ? json_integer(r->shard_rank) : json_null());
        json_object_set_new(sd, "host", r->shard_owner_known ? json_string(r->shard_host) : json_null());
        json_object_set_new(o, "shard_differs", sd);
    }
    if (a->lie_at)
        json_object_set_new(o, "lie_at", json_integer((json_int_t)a->lie_at));
    return o;
}

static void print_report(const struct audit_args *a, const aud_report *r, json_t *j)
{
    if (a->json) {
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        printf("%s\n", text ? text : "{}");
        free(text);
        return;
    }
    if (r->finding == AUD_VERIFIED)
        printf("verified: %llu steps replayed on %s match the trainer's leaves\n", (unsigned long long)r->replayed,
               a->backend_name);
    else if (r->finding == AUD_DIVERGED)
        printf("divergent at step %llu:%s%s%s\n", (unsigned long long)r->step,
               r->state_differs ? " stateHash differs" : "", r->batch_differs ? " batchHash differs" : "",
               r->log_differs ? " logHash differs" : "");
    else
        printf("fraud at step %llu: %s\n", (unsigned long long)r->step, r->detail);
    if (r->suspect_step)
        printf("note: the log of step %llu breaks the arbiter's rule: %s\n", (unsigned long long)r->suspect_step,
               r->suspect);
    if (r->shard_step && r->shard_owner_known)
        printf("step %llu: shard %u's gradient differs from the trainer's shard table (computed by rank %u on host "
               "%s, per the trainer's ranks.json)\n",
               (unsigned long long)r->shard_step, r->shard, r->shard_rank, r->shard_host);
    else if (r->shard_step)
        printf("step %llu: shard %u's gradient differs from the trainer's shard table\n",
               (unsigned long long)r->shard_step, r->shard);
}

/* Reads the run's terms and checks them against this auditor's policy and
 * key, before anything is fetched or sent. */
static int check_terms(chain_session *s, const struct audit_args *a, chain_arb_params *p)
{
    party_policy pol;
    int rv = cli_policy_resolve(&pol, &a->policy);
    if (!rv)
        rv = chain_arb_get_run(&s->arb, &a->run_id, NULL, p);
    if (!rv && !chain_address_eq(&p->auditor, &s->txm.from))
        rv = ovt_fail(OVT_EINVAL, "this key is not the run's auditor");
    if (!rv)
        rv = party_policy_check(&pol, p, s->arb.chain_id, &s->arb.address, 0);
    return rv;
}

/* Commits the auditor's own root for the run, after checking the run's
 * parameters against what was replayed. *trainer_root_matches: whether the
 * trainer's committed root is the root of the step table it published (-1:
 * the trainer has not committed yet). */
static int commit_root(chain_session *s, const struct audit_args *a, const aud_report *r, ovt_hash *root_out,
                       int *trainer_root_matches)
{
    *trainer_root_matches = -1;
    chain_arb_params p;
    int rv = check_terms(s, a, &p);
    if (rv)
        return rv;
    if (memcmp(p.config_hash.b, r->own.config_hash.b, 32) != 0 || p.steps != r->steps)
        return ovt_fail(OVT_EINVAL, "the run on chain has another config or step count than the replayed run");
    if (!chain_address_eq(&p.auditor, &s->txm.from))
        return ovt_fail(OVT_EINVAL, "this key is not the run's auditor");
    party_history h;
    if ((rv = party_history_from_table(&h, &r->own, &a->run_id)))
        return rv;
    *root_out = *chain_merkle_root(h.tree);
    chain_arb_game g;
    ovt_hash published;
    if (!(rv = chain_arb_get_game(&s->arb, &a->run_id, NULL, &g)) && (g.flags & CHAIN_ARB_FLAG_TRAINER) &&
        !(rv = trn_step_table_root(&published, &r->trainer, &a->run_id))) {
        *trainer_root_matches = memcmp(published.b, g.trainer_root.b, 32) == 0;
        if (!*trainer_root_matches)
            fprintf(stderr, "ovt audit: warning: the trainer's committed root is not the root of the step table it "
                            "published; the dispute will show where they part\n");
    }
    if (!rv && (g.flags & CHAIN_ARB_FLAG_AUDITOR))
        rv = 0; /* committed before (a restart): nothing to send */
    else if (!rv)
        rv = chain_arb_commit(&s->arb, &s->txm, &a->run_id, root_out, NULL, NULL, NULL);
    party_history_free(&h);
    return rv;
}

static volatile sig_atomic_t fetch_stop;

static void on_fetch_signal(int sig)
{
    (void)sig;
    fetch_stop = 1;
}

/* Fetches the run from the store within bounds: each object capped at what
 * it can be, the whole fetch by --fetch-timeout, and SIGINT/SIGTERM end it. */
static int fetch_bounded(const struct audit_args *a, const char *dir)
{
    store_ctx *store;
    store_manifest m;
    int rv = store_open(&store, a->source);
    if (rv)
        return rv;
    ovt_on_stop_signals(on_fetch_signal);
    store_set_stop(store, &fetch_stop);
    store_set_deadline(store, a->fetch_timeout);
    store_set_max_blob(store, (size_t)a->max_dataset);
    if (!(rv = store_get_manifest(store, &a->run_id, &m))) {
        /* steps.bin: a 56-byte header and 96 bytes a step, steps 0..N. */
        store_expect(store, &m.config_hash, STORE_MAX_CONFIG);
        if (m.steps < ((uint64_t)1 << 40))
            store_expect(store, &m.steps_hash, 56 + 96 * ((size_t)m.steps + 1));
        rv = aud_fetch_run(store, &a->run_id, dir, NULL);
    }
    store_close(store);
    /* Only the fetch is ended by the flag; the replay and the commit stop
     * as before (the default action), and --agent installs its own. */
    ovt_on_stop_signals(SIG_DFL);
    if (fetch_stop && !rv)
        rv = ovt_fail(OVT_EIO, "stopped (SIGINT/SIGTERM)");
    return rv;
}

static int audit(const struct audit_args *a, int *finding)
{
    char path[4096], fetched[4096];
    const char *run_dir = a->source, *data = a->data;
    int rv;
    int from_store = strstr(a->source, "://") != NULL;
    if (chain_session_args_any(&a->chain)) {
        /* Refuse a run outside the policy before fetching anything from
         * its store (and long before any bond moves). */
        chain_session s;
        chain_arb_params p;
        if ((rv = chain_session_open(&s, &a->chain, 1)))
            return rv;
        rv = check_terms(&s, a, &p);
        chain_session_close(&s);
        if (rv)
            return rv;
    }
    if (from_store) {
        if ((rv = ovt_path_join(fetched, sizeof fetched, a->out, "trainer")) || (rv = fetch_bounded(a, fetched)))
            return rv;
        run_dir = fetched;
        if ((rv = ovt_path_join(path, sizeof path, fetched, "dataset.bin")))
            return rv;
        data = path;
    }
    aud_replay_opts ro = {.run_dir = run_dir, .data_path = data, .backend = a->backend, .threads = a->threads,
                          .from = a->from, .to = a->to, .lie_at = a->lie_at};
    aud_report r;
    if ((rv = aud_replay(&ro, &r)))
        return rv;
    *finding = (int)r.finding;
    json_t *j = report_json(a, &r);
    if (a->out) {
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
        if ((rv = ovt_mkdirs(a->out, 0755)) || (rv = ovt_path_join(path, sizeof path, a->out, "steps.bin")) ||
            (rv = trn_step_table_write(&r.own, path)) || (rv = ovt_path_join(path, sizeof path, a->out, "audit.json")))
            goto done;
        rv = text ? ovt_write_atomic(path, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
        free(text);
        if (rv)
            goto done;
    }
    if (chain_session_args_any(&a->chain)) {
        chain_session s;
        ovt_hash root;
        if (r.partial) {
            rv = ovt_fail(OVT_EINVAL, "a partial audit (--steps-from/--steps-to) cannot be committed");
            goto done;
        }
        if ((rv = chain_session_open(&s, &a->chain, 1)))
            goto done;
        int matches;
        rv = commit_root(&s, a, &r, &root, &matches);
        if (!rv) {
            char hex[67];
            chain_hash_hex(hex, &root);
            json_object_set_new(j, "root", json_string(hex));
            if (matches >= 0)
                json_object_set_new(j, "trainer_root_matches", json_boolean(matches));
        }
        if (!rv && a->agent) {
            print_report(a, &r, j);
            json_decref(j);
            j = NULL;
            char sdir[4096];
            if (!a->state_dir)
                rv = ovt_path_join(sdir, sizeof sdir, a->out, "agent");
            party_agent_opts ao = {.is_trainer = false, .run_id = a->run_id, .run_dir = a->out,
                                 .state_dir = a->state_dir ? a->state_dir : sdir, .poll_ms = a->poll_ms,
                                 .json = a->json};
            chain_arb_outcome outcome;
            party_agent_install_signals();
            if (!rv && !(rv = party_agent_run(&s, &ao, &outcome)))
                party_print_outcome(outcome, a->json);
        }
        chain_session_close(&s);
        if (rv)
            goto done;
    }
    if (j)
        print_report(a, &r, j);
done:
    json_decref(j);
    aud_report_free(&r);
    return rv;
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
        {"poll-interval", required_argument, NULL, O_POLL},  {"lie-at", required_argument, NULL, O_LIE_AT},
        {"max-dataset", required_argument, NULL, O_MAX_DATASET},
        {"fetch-timeout", required_argument, NULL, O_FETCH_TIMEOUT},
        {"help", no_argument, NULL, 'h'},                    {NULL, 0, NULL, 0}};
    struct audit_args a;
    memset(&a, 0, sizeof a);
    cli_chain_init(&a.chain);
    cli_policy_init(&a.policy);
    a.backend = KRN_BACKEND_REF;
    a.backend_name = "ref";
    a.poll_ms = 2000;
    a.max_dataset = STORE_MAX_BLOB_DEFAULT;
    a.fetch_timeout = 3600;
    uint64_t v;
    double x;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        if (cli_chain_take(&a.chain, c, optarg) || cli_policy_take(&a.policy, c, optarg))
            continue;
        switch (c) {
        case 'h': usage(stdout); return 0;
        case O_BACKEND:
            if (krn_backend_parse(&a.backend, optarg) || a.backend == KRN_BACKEND_CUDA) {
                fprintf(stderr, "ovt audit: --backend must be cpu, ref or shuffle, got '%s'\n", optarg);
                return 2;
            }
            a.backend_name = optarg;
            break;
        case O_THREADS:
            if (cli_arg_u64("audit", flag, optarg, 0, 256, &v)) return 2;
            a.threads = (int)v;
            break;
        case O_DATA: a.data = optarg; break;
        case O_FROM:
            if (cli_arg_u64("audit", flag, optarg, 1, UINT64_MAX, &a.from)) return 2;
            break;
        case O_TO:
            if (cli_arg_u64("audit", flag, optarg, 1, UINT64_MAX, &a.to)) return 2;
            break;
        case O_LIE_AT:
            if (cli_arg_u64("audit", flag, optarg, 0, UINT64_MAX, &a.lie_at)) return 2;
            break;
        case O_MAX_DATASET:
            if (cli_arg_u64("audit", flag, optarg, 1, (uint64_t)1 << 40, &a.max_dataset)) return 2;
            break;
        case O_FETCH_TIMEOUT:
            if (cli_arg_real("audit", flag, optarg, 0.1, 1e7, &a.fetch_timeout)) return 2;
            break;
        case O_OUT: a.out = optarg; break;
        case O_STATE_DIR: a.state_dir = optarg; break;
        case O_RUN_ID:
            if (chain_parse_hash(&a.run_id, flag, optarg)) {
                fprintf(stderr, "ovt audit: %s\n", ovt_errmsg());
                return 2;
            }
            a.have_run_id = 1;
            break;
        case O_JSON: a.json = 1; break;
        case O_AGENT: a.agent = 1; break;
        case O_POLL:
            if (cli_arg_real("audit", flag, optarg, 0.01, 3600, &x)) return 2;
            a.poll_ms = (long)(x * 1000);
            break;
        default: return cli_arg_unknown("audit", argv[optind - 1]);
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "ovt audit: give exactly one RUNDIR or store URL; see `ovt audit --help`\n");
        return 2;
    }
    a.source = argv[optind];
    int from_store = strstr(a.source, "://") != NULL;
    const char *problem = NULL;
    if (from_store && (!a.have_run_id || !a.out))
        problem = "a store source needs --run-id and --out";
    else if (!from_store && !a.data)
        problem = "a run directory source needs --data";
    else if (chain_session_args_any(&a.chain) && (!a.have_run_id || !a.out))
        problem = "committing needs --run-id and --out";
    else if (a.agent && !chain_session_args_any(&a.chain))
        problem = "--agent needs the chain flags";
    if (problem) {
        fprintf(stderr, "ovt audit: %s\n", problem);
        return 2;
    }
    int finding = 0;
    int rv = audit(&a, &finding);
    if (rv) {
        fprintf(stderr, "ovt audit: %s\n", ovt_errmsg());
        return 1;
    }
    return finding == AUD_VERIFIED ? 0 : 3;
}
