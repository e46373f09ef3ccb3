/* The parties' commands of the devnet (scenario.h): each one is the ovt
 * command a real party would run, with this devnet's node, contract, keys
 * and store. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "chain/keys.h"
#include "common/fileio.h"
#include "examples/devnet/node.h"
#include "examples/devnet/scenario.h"

/* ---- the parties' commands (docs/devnet.md lists them) ---- */

/* An argv under construction; strings are copied into the pool. */
typedef struct {
    char *argv[64];
    int n;
    char pool[8192];
    size_t used;
} cmdline;

static void arg(cmdline *c, const char *fmt, ...) OVT_PRINTF(2, 3);

static void arg(cmdline *c, const char *fmt, ...)
{
    if (c->n >= 63 || c->used >= sizeof c->pool)
        return;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(c->pool + c->used, sizeof c->pool - c->used, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof c->pool - c->used)
        return;
    c->argv[c->n++] = c->pool + c->used;
    c->argv[c->n] = NULL;
    c->used += (size_t)len + 1;
}

static void chain_args(cmdline *c, const struct devnet *d, int key)
{
    arg(c, "--rpc-url");
    arg(c, "%s", d->r->rpc_url);
    arg(c, "--contract");
    arg(c, "%s", d->r->contract);
    arg(c, "--private-key");
    arg(c, "%s", devnet_dev_keys[key]);
    if (d->o->confirmations) {
        arg(c, "--confirmations");
        arg(c, "%u", d->o->confirmations);
    }
}

static void addr_arg(cmdline *c, const char *flag, const chain_address *a)
{
    char s[43];
    chain_address_to_string(s, a);
    arg(c, "%s", flag);
    arg(c, "%s", s);
}

/* The arbiter bond of a committee run: each of its arbiters stakes 0.1 ETH
 * (a one-arbiter devnet keeps today's game, with none). */
#define DEVNET_ARBITER_BOND "100000000000000000"

/* A party's policy (docs/agent.md): the devnet's own arbiters, its 1 ETH
 * bonds, and its move timeout (which --move-timeout may set below the
 * default floor to keep a devnet short). */
static void policy_args(cmdline *c, const struct devnet *d)
{
    for (unsigned k = 0; k < d->o->arbiters; k++)
        addr_arg(c, "--accept-arbiter", &d->addr[KEY_ARBITER + k]);
    arg(c, "--max-bond");
    arg(c, "1000000000000000000");
    arg(c, "--min-move-timeout");
    arg(c, "%u", d->o->move_timeout);
}

/* --ranks R > 1: the trainer as R processes, `mpirun -np R` on loopback
 * with the flags tests/support/mpirun.c uses (root allowed, more ranks than
 * cores, no binding, TCP on lo only for the data and mpirun's own wiring). */
static int mpirun_prefix(cmdline *c, const devnet_opts *o)
{
    char mpirun[4096];
    int rv = devnet_find_mpirun(mpirun, sizeof mpirun);
    if (rv)
        return ovt_fail_wrap(rv, "--ranks %u", o->ranks);
    /* Open MPI refuses to run as root without both; the devnet's other
     * children inherit them too, which only Open MPI reads. */
    if (setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1) || setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1))
        return ovt_fail_errno(OVT_ENOMEM, "setenv");
    static const char *const fixed[] = {"--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                                        "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
                                        "--mca", "oob_tcp_if_include", "lo"};
    arg(c, "%s", mpirun);
    arg(c, "-np");
    arg(c, "%u", o->ranks);
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        arg(c, "%s", fixed[i]);
    return 0;
}

int devnet_run_train(struct devnet *d)
{
    const devnet_opts *o = d->o;
    cmdline c = {0};
    int rv;
    if (o->ranks > 1 && (rv = mpirun_prefix(&c, o)))
        return rv;
    arg(&c, "%s", d->exe);
    arg(&c, "train");
    arg(&c, "--model");
    arg(&c, "%s", DEVNET_MODEL(o));
    arg(&c, "--data");
    arg(&c, "%s", d->data_path);
    arg(&c, "--out");
    arg(&c, "%s", d->run_dir);
    arg(&c, "--steps");
    arg(&c, "%llu", (unsigned long long)o->steps);
    arg(&c, "--batch");
    arg(&c, "%u", o->batch);
    if (o->data == DEVNET_DATA_TEXT) {
        arg(&c, "--seq");
        arg(&c, "%u", o->seq);
    }
    arg(&c, "--backend");
    arg(&c, "cpu");
    arg(&c, "--every");
    arg(&c, "%llu", (unsigned long long)(o->steps >= 8 ? o->steps / 8 : 1));
    static const char *const train_faults[DEVNET_FAULT_COUNT] = {
        [DEVNET_BITFLIP] = "bitflip", [DEVNET_POISONED_BATCH] = "poisoned-batch",
        [DEVNET_SKIPPED_STEP] = "skipped-step", [DEVNET_FORGED_LOG] = "forged-log",
        [DEVNET_WITHHELD_INPUTS] = "bitflip", [DEVNET_OMITTED_LOG] = "omitted-log",
        [DEVNET_BITFLIP_SHARD] = "bitflip-shard", [DEVNET_HIDDEN_FLIP] = "hidden-flip",
        [DEVNET_LYING_ARBITER] = "bitflip", [DEVNET_SILENT_ARBITER] = "bitflip", [DEVNET_COLLUDING_ARBITERS] = "bitflip",
        [DEVNET_COLLUDING_AUDITOR] = "bitflip", [DEVNET_FALSE_TABLE] = "false-table",
        [DEVNET_FLIP_OUTPUT] = "flip-output", [DEVNET_FORGED_CHAIN] = "flip-output",
        [DEVNET_NO_CHAIN] = "flip-output", [DEVNET_CHAIN_COUNT] = "flip-output"};
    if (o->band_rules) {
        arg(&c, "--band-rules");
        arg(&c, "%u", o->band_rules);
    }
    if (o->shards > 1) {
        arg(&c, "--shards");
        arg(&c, "%u", o->shards);
    }
    if (train_faults[o->fault]) {
        arg(&c, "--inject-fault");
        arg(&c, "%s", train_faults[o->fault]);
        arg(&c, "--fault-step");
        arg(&c, "%llu", (unsigned long long)o->at);
    }
    if (o->fault == DEVNET_BITFLIP_SHARD || o->fault == DEVNET_FALSE_TABLE) {
        arg(&c, "--fault-shard");
        arg(&c, "%u", o->fault_shard);
    }
    if (devnet_flips_output(o)) {
        uint32_t site;
        uint64_t element;
        if (devnet_flip_site(o, &site, &element))
            return -1;
        arg(&c, "--fault-site");
        arg(&c, "%u", site);
        arg(&c, "--fault-element");
        arg(&c, "%llu", (unsigned long long)element);
    }
    if (c.n >= 63)
        return ovt_fail(OVT_EINVAL, "the trainer's command line is too long");
    char sharded[96] = "", injecting[96] = "";
    if (o->shards > 1)
        snprintf(sharded, sizeof sharded, " in %u shards on %u process%s%s", o->shards, o->ranks,
                 o->ranks == 1 ? "" : "es", o->ranks > 1 ? " (mpirun)" : "");
    if (train_faults[o->fault] && (o->fault == DEVNET_BITFLIP_SHARD || o->fault == DEVNET_FALSE_TABLE))
        snprintf(injecting, sizeof injecting, ", injecting %s (shard %u)", train_faults[o->fault], o->fault_shard);
    else if (train_faults[o->fault])
        snprintf(injecting, sizeof injecting, ", injecting %s", train_faults[o->fault]);
    devnet_progress(d, "trainer: training %s for %llu steps on the cpu backend%s%s", DEVNET_MODEL(o),
                    (unsigned long long)o->steps, sharded, injecting);
    return devnet_run_to_end(d, "train", c.argv, o->timeout_s);
}

int devnet_run_commit(struct devnet *d)
{
    cmdline c = {0};
    arg(&c, "%s", d->exe);
    arg(&c, "commit");
    arg(&c, "%s", d->run_dir);
    chain_args(&c, d, KEY_TRAINER);
    addr_arg(&c, "--auditor", &d->addr[KEY_AUDITOR]);
    for (unsigned k = 0; k < d->o->arbiters; k++)
        addr_arg(&c, "--arbiter", &d->addr[KEY_ARBITER + k]);
    if (d->o->arbiters > 1) {
        arg(&c, "--arbiter-bond");
        arg(&c, DEVNET_ARBITER_BOND);
        if (chain_u256_from_dec(&d->r->arbiter_bond, DEVNET_ARBITER_BOND))
            return ovt_fail(OVT_EINVAL, "internal: the devnet's arbiter bond");
    }
    arg(&c, "--bond");
    arg(&c, "1000000000000000000");
    arg(&c, "--move-timeout");
    arg(&c, "%u", d->o->move_timeout);
    /* with --narrow the default verdict window (3600 s) is enough: the chain moves its
     * deadline with every round of the narrowing (docs/contract.md, "Narrowing a step") */
    arg(&c, "--store");
    arg(&c, "%s", d->store_url);
    arg(&c, "--data");
    arg(&c, "%s", d->data_path);
    if (d->o->replay_proof)
        arg(&c, "--replay-proof");
    devnet_progress(d, "trainer: opening the run, publishing it to the store and committing its root%s",
                    d->o->replay_proof ? " (asking for proof of replay)" : "");
    return devnet_run_to_end(d, "commit", c.argv, 120);
}

int devnet_start_trainer_agent(struct devnet *d)
{
    char run_id[67], state[4300];
    devnet_hex0x(run_id, d->run_id.b, 32);
    snprintf(state, sizeof state, "%s/trainer-agent", d->r->work_dir);
    cmdline c = {0};
    arg(&c, "%s", d->exe);
    arg(&c, "agent");
    arg(&c, "--role");
    arg(&c, "trainer");
    chain_args(&c, d, KEY_TRAINER);
    arg(&c, "--run-id");
    arg(&c, "%s", run_id);
    arg(&c, "--run");
    arg(&c, "%s", d->run_dir);
    arg(&c, "--data");
    arg(&c, "%s", d->data_path);
    arg(&c, "--store");
    arg(&c, "%s", d->store_url);
    arg(&c, "--state-dir");
    arg(&c, "%s", state);
    arg(&c, "--poll-interval");
    arg(&c, "0.2");
    policy_args(&c, d);
    if (d->o->fault == DEVNET_WITHHELD_INPUTS)
        arg(&c, "--withhold");
    if (d->o->challengers)
        arg(&c, "--defend");
    if (d->o->narrow) {
        arg(&c, "--narrow");
        arg(&c, "%s", d->r->narrow_contract);
    }
    if (d->o->fault == DEVNET_FORGED_CHAIN)
        arg(&c, "--narrow-forge-chain");
    if (d->o->fault == DEVNET_NO_CHAIN)
        arg(&c, "--narrow-no-chain");
    if (d->o->fault == DEVNET_CHAIN_COUNT)
        arg(&c, "--narrow-chain-extra-leaf");
    if (d->o->forge_block_entries)
        arg(&c, "--forge-block-entries");
    if (d->o->narrow && d->o->fault == DEVNET_FORGED_LOG)
        arg(&c, "--narrow-forged"); /* its trace follows its forged entries, as it trained */
    if (d->o->narrow && devnet_flips_output(d->o)) {
        arg(&c, "--narrow-fault-site");
        arg(&c, "%u", d->r->fault_site);
        arg(&c, "--narrow-fault-element");
        arg(&c, "%llu", (unsigned long long)d->r->fault_element);
    }
    devnet_progress(d, "trainer: its agent plays the game%s and publishes the disputed step's inputs%s",
                    d->o->challengers ? " and every challenge of its root" : "",
                    d->o->fault == DEVNET_WITHHELD_INPUTS ? " (no: it withholds them)" : "");
    return devnet_start_child(d, &d->trainer_agent, "trainer-agent", c.argv);
}

int devnet_start_auditor(struct devnet *d)
{
    char run_id[67], state[4300], dir[4300];
    devnet_hex0x(run_id, d->run_id.b, 32);
    snprintf(state, sizeof state, "%s/auditor-agent", d->r->work_dir);
    snprintf(dir, sizeof dir, "%s/auditor", d->r->work_dir);
    cmdline c = {0};
    arg(&c, "%s", d->exe);
    arg(&c, "audit");
    arg(&c, "%s", d->store_url);
    chain_args(&c, d, KEY_AUDITOR);
    arg(&c, "--run-id");
    arg(&c, "%s", run_id);
    arg(&c, "--out");
    arg(&c, "%s", dir);
    const char *backend = d->o->auditor_backend ? d->o->auditor_backend : "ref";
    arg(&c, "--backend");
    arg(&c, "%s", backend);
    arg(&c, "--agent");
    policy_args(&c, d);
    arg(&c, "--state-dir");
    arg(&c, "%s", state);
    arg(&c, "--poll-interval");
    arg(&c, "0.2");
    if (d->o->fault == DEVNET_LYING_AUDITOR) {
        arg(&c, "--lie-at");
        arg(&c, "%llu", (unsigned long long)d->o->at);
    }
    if (d->o->fault == DEVNET_COLLUDING_AUDITOR || d->o->fault == DEVNET_LAZY_AUDITOR)
        arg(&c, "--copy-trainer-root");
    if (d->o->fault == DEVNET_LAZY_AUDITOR) {
        arg(&c, "--guess-sites-from");
        arg(&c, "%llu", (unsigned long long)d->o->at);
    }
    if (d->o->narrow) {
        arg(&c, "--narrow");
        arg(&c, "%s", d->r->narrow_contract);
    }
    if (d->o->withhold_block)
        arg(&c, "--withhold-block");
    devnet_progress(d, "auditor: replaying the run on the %s backend%s, then playing the game", backend,
                    d->o->fault == DEVNET_LYING_AUDITOR       ? " (and lying from the fault step on)"
                    : d->o->fault == DEVNET_COLLUDING_AUDITOR ? " (and committing the trainer's root, not its own)"
                    : d->o->fault == DEVNET_LAZY_AUDITOR
                        ? " (lazily: the trainer's root copied, its site hashes guessed from the fault step on)"
                    : d->o->replay_proof ? " (every step traced, for proof of replay)"
                                         : "");
    return devnet_start_child(d, &d->auditor, "auditor", c.argv);
}

/* Outside challenger k: `ovt audit --watch` with its own key (the dev
 * account after the committee's), state folder and log; the one
 * devnet_challenger_lies names replays with wrong states from the fault
 * step on. */
static int start_challenger(struct devnet *d, unsigned k)
{
    devnet_challenger *ch = &d->r->challengers[k];
    int key = KEY_ARBITER + (int)d->o->arbiters + (int)k;
    snprintf(ch->name, sizeof ch->name, "challenger-%u", k + 1);
    chain_address_to_string(ch->address, &d->addr[key]);
    ch->lies = devnet_challenger_lies(d->o, k);
    char state[4300];
    snprintf(state, sizeof state, "%s/%s", d->r->work_dir, ch->name);
    cmdline c = {0};
    arg(&c, "%s", d->exe);
    arg(&c, "audit");
    arg(&c, "--watch");
    arg(&c, "%s", d->store_url);
    chain_args(&c, d, key);
    arg(&c, "--state-dir");
    arg(&c, "%s", state);
    arg(&c, "--from-block");
    arg(&c, "%llu", (unsigned long long)d->deploy_block);
    arg(&c, "--backend");
    arg(&c, "%s", d->o->auditor_backend ? d->o->auditor_backend : "ref");
    arg(&c, "--poll-interval");
    arg(&c, "0.2");
    arg(&c, "--json");
    policy_args(&c, d);
    if (ch->lies) {
        arg(&c, "--lie-at");
        arg(&c, "%llu", (unsigned long long)d->o->at);
    }
    if (c.n >= 63)
        return ovt_fail(OVT_EINVAL, "the challenger's command line is too long");
    devnet_progress(d, "%s %s: replays every committed run and challenges a wrong root%s", ch->name, ch->address,
                    ch->lies ? " (LYING: its replay is wrong from the fault step on)" : "");
    return devnet_start_child(d, &d->challengers[k], ch->name, c.argv);
}

int devnet_start_challengers(struct devnet *d)
{
    d->r->n_challengers = d->o->challengers;
    int rv = 0;
    for (unsigned k = 0; k < d->o->challengers && !rv; k++)
        rv = start_challenger(d, k);
    return rv;
}

/* Whether challenger k's log says its replay agrees with the trainer. */
bool devnet_challenger_agreed(struct devnet *d, unsigned k)
{
    if (!d->challengers[k])
        return false;
    FILE *f = fopen(d->challengers[k]->log_path, "r");
    if (!f)
        return false;
    char line[4096];
    bool agreed = false;
    while (!agreed && fgets(line, sizeof line, f))
        agreed = strstr(line, "\"event\":\"agreed\"") != NULL;
    fclose(f);
    return agreed;
}

/* ---- the arbiter's command (--arbiter-cmd) ---- */

/* Splits --arbiter-cmd into words (devnet_opts_check has checked there are
 * 1..DEVNET_ARBITER_CMD_WORDS) and resolves the first: a word with a '/' is
 * a path (relative to the folder `ovt devnet` runs in, which the children
 * share), any other is looked up on $PATH as a shell would. Without the
 * flag the arbiter is this ovt. */
static int arbiter_words(struct devnet *d)
{
    const char *cmd = d->o->arbiter_cmd;
    d->arbiter_argc = 0;
    if (!cmd) {
        d->arbiter_argv[d->arbiter_argc++] = d->exe;
        d->arbiter_argv[d->arbiter_argc] = NULL;
        return 0;
    }
    snprintf(d->arbiter_words, sizeof d->arbiter_words, "%s", cmd);
    char *save = NULL;
    for (char *w = strtok_r(d->arbiter_words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (d->arbiter_argc == DEVNET_ARBITER_CMD_WORDS)
            return ovt_fail(OVT_EINVAL, "--arbiter-cmd '%s' has more than %d words", cmd, DEVNET_ARBITER_CMD_WORDS);
        d->arbiter_argv[d->arbiter_argc++] = w;
    }
    d->arbiter_argv[d->arbiter_argc] = NULL;
    if (d->arbiter_argc == 0)
        return ovt_fail(OVT_EINVAL, "--arbiter-cmd is empty");
    const char *first = d->arbiter_argv[0];
    bool is_path = strchr(first, '/') != NULL;
    if (is_path ? access(first, X_OK) != 0 : !devnet_find_on_path(d->arbiter_exe, sizeof d->arbiter_exe, first))
        return ovt_fail(OVT_ENOTFOUND,
                        "--arbiter-cmd '%s': cannot start %s: %s; install it (qemu-aarch64-static and "
                        "qemu-s390x-static come with Debian's qemu-user-static, which scripts/cross.sh ARCH "
                        "installs) or give its path",
                        cmd, first, is_path ? "no executable file there" : "not found on $PATH");
    /* qemu-user exits 1 without a word when the binary it is given is not
     * there: name a missing file here */
    for (int i = 1; i < d->arbiter_argc; i++) {
        const char *w = d->arbiter_argv[i];
        if (w[0] != '-' && strchr(w, '/') && access(w, F_OK) != 0)
            return ovt_fail(OVT_ENOTFOUND, "--arbiter-cmd '%s': no file %s (a cross build: scripts/cross.sh ARCH "
                                           "makes build-cross-ARCH/ovt)", cmd, w);
    }
    if (is_path)
        snprintf(d->arbiter_exe, sizeof d->arbiter_exe, "%s", first);
    d->arbiter_argv[0] = d->arbiter_exe;
    return 0;
}

/* What `CMD version` printed (its log), its lines joined by "; ". */
static int read_version(struct devnet *d, char *out, size_t cap)
{
    char log[4300];
    devnet_child_log_path(log, sizeof log, d, "arbiter-version");
    uint8_t *text = NULL;
    size_t len = 0;
    int rv = ovt_read_file(log, &text, &len, 1 << 16);
    if (rv)
        return rv;
    size_t n = 0;
    for (size_t i = 0; i < len && n + 3 < cap; i++) {
        if (text[i] != '\n')
            out[n++] = (char)text[i];
        else if (i + 1 < len)
            out[n++] = ';', out[n++] = ' ';
    }
    out[n] = '\0';
    free(text);
    return 0;
}

int devnet_probe_arbiter(struct devnet *d)
{
    int rv = arbiter_words(d);
    if (rv)
        return rv;
    const char *cmd = d->o->arbiter_cmd ? d->o->arbiter_cmd : d->exe;
    static const char hint[] = "give a command that runs an ovt binary, e.g. --arbiter-cmd "
                               "'qemu-aarch64-static build-cross-aarch64/ovt' after scripts/cross.sh aarch64";
    cmdline c = {0};
    for (int i = 0; i < d->arbiter_argc; i++)
        arg(&c, "%s", d->arbiter_argv[i]);
    arg(&c, "version");
    /* the emulated command can be slow to start: bounded only by --timeout */
    if ((rv = devnet_run_to_end(d, "arbiter-version", c.argv, d->o->timeout_s)))
        return ovt_fail_wrap(rv, "the arbiter's command '%s' failed to run `version` (%s)", cmd, hint);
    char *v = d->r->arbiter_version;
    if ((rv = read_version(d, v, sizeof d->r->arbiter_version)))
        return rv;
    if (strncmp(v, "ovt ", 4) != 0)
        return ovt_fail(OVT_EINVAL, "the arbiter's command '%s' answered `version` with '%s', not ovt's version; %s",
                        cmd, v, hint);
    devnet_progress(d, "arbiter: its command is %s (%s)", cmd, v);
    return 0;
}

/* Seat k's watcher: seat 0 runs the arbiter's command (--arbiter-cmd: on
 * another processor, under emulation), the others this ovt; each has its
 * own key and state folder; the seats devnet_misbehave names misbehave. */
static int start_seat(struct devnet *d, unsigned k)
{
    const char *name = d->r->arbiters[k].name;
    char state[4300];
    snprintf(state, sizeof state, "%s/%s", d->r->work_dir, name);
    cmdline c = {0};
    if (k == 0)
        for (int i = 0; i < d->arbiter_argc; i++)
            arg(&c, "%s", d->arbiter_argv[i]);
    else
        arg(&c, "%s", d->exe);
    arg(&c, "arbiter");
    arg(&c, "watch");
    chain_args(&c, d, KEY_ARBITER + (int)k);
    const char *misbehave = devnet_misbehave(d->o, k);
    if (misbehave) {
        arg(&c, "--misbehave");
        arg(&c, "%s", misbehave);
    }
    arg(&c, "--store");
    arg(&c, "%s", d->store_url);
    arg(&c, "--state-dir");
    arg(&c, "%s", state);
    /* --confirmations: --confirmations of the devnet, else the watcher's own
     * default (1 on an automining node, 2 with --block-time). */
    arg(&c, "--poll-interval");
    arg(&c, "0.2");
    arg(&c, "--from-block");
    arg(&c, "%llu", (unsigned long long)d->deploy_block);
    /* inputs the trainer has not published 5 s after both leaves are
     * revealed are ruled unavailable (the trainer agent publishes them
     * before it reveals its leaf) */
    arg(&c, "--input-wait");
    arg(&c, "5");
    arg(&c, "--json");
    if (d->o->narrow) {
        arg(&c, "--narrow");
        arg(&c, "%s", d->r->narrow_contract);
    }
    if (d->o->arbiter_metrics && k == 0) {
        arg(&c, "--metrics-addr");
        arg(&c, "%s", d->o->arbiter_metrics);
    }
    if (c.n >= 63)
        return ovt_fail(OVT_EINVAL, "the arbiter's command line is too long");
    devnet_progress(d, "%s: watching the contract%s%s", name, k == 0 && d->o->arbiter_cmd ? " as " : "",
                    k == 0 && d->o->arbiter_cmd ? d->o->arbiter_cmd : "");
    return devnet_start_child(d, &d->arbiters[k], name, c.argv);
}

int devnet_start_arbiter(struct devnet *d)
{
    int rv = 0;
    for (unsigned k = 0; k < d->o->arbiters && !rv; k++)
        rv = start_seat(d, k);
    return rv;
}


/* The shard the arbiter's "evaluated" line names (arbiter/watch.c:
 * {"shard", "shards", "rank", "host", ...}, rank and host null when the
 * trainer's ranks.json did not say); the last such line counts. */
static void note_shard(devnet_result *r, const json_t *sd)
{
    json_t *shard = json_object_get(sd, "shard"), *shards = json_object_get(sd, "shards");
    json_t *rank = json_object_get(sd, "rank"), *host = json_object_get(sd, "host");
    r->arbiter_named_shard = json_is_integer(shard) && json_is_integer(shards);
    r->arbiter_named_owner = false;
    if (!r->arbiter_named_shard)
        return;
    r->arbiter_shard = json_integer_value(shard);
    r->arbiter_shards = (uint32_t)json_integer_value(shards);
    if (json_is_integer(rank) && json_is_string(host)) {
        r->arbiter_named_owner = true;
        r->arbiter_rank = (uint32_t)json_integer_value(rank);
        snprintf(r->arbiter_host, sizeof r->arbiter_host, "%s", json_string_value(host));
    }
}

void devnet_arbiter_blocks(struct devnet *d)
{
    for (unsigned k = 0; k < d->o->arbiters; k++) {
        devnet_arbiter *a = &d->r->arbiters[k];
        FILE *f = d->arbiters[k] ? fopen(d->arbiters[k]->log_path, "r") : NULL;
        if (!f)
            continue;
        char line[8192];
        while (fgets(line, sizeof line, f)) {
            json_t *j = json_loads(line, 0, NULL);
            const char *ev = json_string_value(json_object_get(j, "event"));
            const char *run = json_string_value(json_object_get(j, "run_id"));
            if (ev && run && !strcmp(ev, "narrow_evaluated") && !strcasecmp(run, d->r->run_id)) {
                a->ruled_on_block = true;
                a->block_site = (uint64_t)json_integer_value(json_object_get(j, "site"));
                a->block_index = (uint64_t)json_integer_value(json_object_get(j, "block"));
                a->block_packages = (int)json_integer_value(json_object_get(j, "packages"));
                const json_t *chunk = json_object_get(j, "chunk"); /* level 4 */
                a->block_chunked = json_is_integer(chunk);
                a->block_chunk = a->block_chunked ? (uint64_t)json_integer_value(chunk) : 0;
                a->block_entries_replaced = (int)json_integer_value(json_object_get(j, "entries_replaced"));
                a->block_seconds = json_number_value(json_object_get(j, "seconds"));
                a->narrow_outcome = (int)json_integer_value(json_object_get(j, "outcome"));
            }
            json_decref(j);
        }
        fclose(f);
    }
}

/* The arbiter watcher's own report of the settlement: its JSON log line
 * {"event": "settled", "run_id": ..., "message": ...}; 1 once found. On
 * the way, the processor its "start" line says it was built for. */
int devnet_arbiter_saw(struct devnet *d)
{
    FILE *f = fopen(d->arbiters[0]->log_path, "r");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *ev = json_string_value(json_object_get(j, "event"));
        const char *run = json_string_value(json_object_get(j, "run_id"));
        const char *msg = json_string_value(json_object_get(j, "message"));
        if (ev && run && msg && strcmp(ev, "settled") == 0 && strcasecmp(run, d->r->run_id) == 0) {
            snprintf(d->r->arbiter_saw, sizeof d->r->arbiter_saw, "%s", msg);
            found = 1;
        }
        const char *built = json_string_value(json_object_get(j, "built_for"));
        if (ev && built && strcmp(ev, "start") == 0)
            snprintf(d->r->arbiter_built_for, sizeof d->r->arbiter_built_for, "%s", built);
        if (ev && run && strcmp(ev, "evaluated") == 0 && strcasecmp(run, d->r->run_id) == 0)
            note_shard(d->r, json_object_get(j, "shard_differs"));
        json_decref(j);
    }
    fclose(f);
    return found;
}
