/* The parties' commands of the devnet (scenario.h): each one is the ovt
 * command a real party would run, with this devnet's node, contract, keys
 * and store. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chain/keys.h"
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

/* A party's policy (docs/agent.md): the devnet's own arbiter, its 1 ETH
 * bonds, and its move timeout (which --move-timeout may set below the
 * default floor to keep a devnet short). */
static void policy_args(cmdline *c, const struct devnet *d)
{
    addr_arg(c, "--accept-arbiter", &d->addr[KEY_ARBITER]);
    arg(c, "--max-bond");
    arg(c, "1000000000000000000");
    arg(c, "--min-move-timeout");
    arg(c, "%u", d->o->move_timeout);
}

int devnet_run_train(struct devnet *d)
{
    const devnet_opts *o = d->o;
    cmdline c = {0};
    arg(&c, "%s", d->exe);
    arg(&c, "train");
    arg(&c, "--model");
    arg(&c, "%s", o->mlp ? "mlp-demo" : "gpt2-tiny");
    arg(&c, "--data");
    arg(&c, "%s", d->data_path);
    arg(&c, "--out");
    arg(&c, "%s", d->run_dir);
    arg(&c, "--steps");
    arg(&c, "%llu", (unsigned long long)o->steps);
    arg(&c, "--batch");
    arg(&c, "%u", o->batch);
    if (!o->mlp) {
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
        [DEVNET_WITHHELD_INPUTS] = "bitflip", [DEVNET_OMITTED_LOG] = "omitted-log"};
    if (train_faults[o->fault]) {
        arg(&c, "--inject-fault");
        arg(&c, "%s", train_faults[o->fault]);
        arg(&c, "--fault-step");
        arg(&c, "%llu", (unsigned long long)o->at);
    }
    devnet_progress(d, "trainer: training %s for %llu steps on the cpu backend%s%s", o->mlp ? "mlp-demo" : "gpt2-tiny",
             (unsigned long long)o->steps, train_faults[o->fault] ? ", injecting " : "",
             train_faults[o->fault] ? train_faults[o->fault] : "");
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
    addr_arg(&c, "--arbiter", &d->addr[KEY_ARBITER]);
    arg(&c, "--bond");
    arg(&c, "1000000000000000000");
    arg(&c, "--move-timeout");
    arg(&c, "%u", d->o->move_timeout);
    arg(&c, "--store");
    arg(&c, "%s", d->store_url);
    arg(&c, "--data");
    arg(&c, "%s", d->data_path);
    devnet_progress(d, "trainer: opening the run, publishing it to the store and committing its root");
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
    devnet_progress(d, "trainer: its agent plays the game and publishes the disputed step's inputs%s",
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
    arg(&c, "--backend");
    arg(&c, "ref");
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
    devnet_progress(d, "auditor: replaying the run on the ref backend%s, then playing the game",
             d->o->fault == DEVNET_LYING_AUDITOR ? " (and lying from the fault step on)" : "");
    return devnet_start_child(d, &d->auditor, "auditor", c.argv);
}

int devnet_start_arbiter(struct devnet *d)
{
    char state[4300];
    snprintf(state, sizeof state, "%s/arbiter", d->r->work_dir);
    cmdline c = {0};
    arg(&c, "%s", d->exe);
    arg(&c, "arbiter");
    arg(&c, "watch");
    chain_args(&c, d, KEY_ARBITER);
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
    if (d->o->arbiter_metrics) {
        arg(&c, "--metrics-addr");
        arg(&c, "%s", d->o->arbiter_metrics);
    }
    devnet_progress(d, "arbiter: watching the contract");
    return devnet_start_child(d, &d->arbiter, "arbiter", c.argv);
}


/* The arbiter watcher's own report of the settlement: its JSON log line
 * {"event": "settled", "run_id": ..., "message": ...}; 1 once found. */
int devnet_arbiter_saw(struct devnet *d)
{
    FILE *f = fopen(d->arbiter->log_path, "r");
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
        json_decref(j);
    }
    fclose(f);
    return found;
}
