/* The devnet scenario (devnet.h): anvil, contract, training with a fault,
 * the parties as child processes, and the game followed on chain. */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "chain/keys.h"
#include "common/fileio.h"
#include "examples/devnet/children.h"
#include "examples/devnet/devnet.h"
#include "examples/devnet/node.h"
#include "trainer/data.h"

/* anvil's first four funded dev accounts (its default mnemonic); throwaway
 * keys that exist only on a local devnet. */
static const char *const dev_keys[4] = {
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
};
enum { KEY_DEPLOYER = 0, KEY_TRAINER, KEY_AUDITOR, KEY_ARBITER, NKEYS };
static const char *const party_names[NKEYS] = {"deployer", "trainer", "auditor", "arbiter"};

struct devnet {
    const devnet_opts *o;
    devnet_result *r;
    struct timespec t0;
    devnet_children kids;
    chain_rpc *rpc;
    chain_arb arb;
    chain_address addr[NKEYS];
    char exe[4096];
    char data_path[4200], run_dir[4200], store_dir[4200], store_url[4300];
    uint64_t deploy_block, next_block;
    ovt_hash run_id;
    bool have_run, settled, dispute_open, silenced, time_moved;
    unsigned round;
    double honest_moved_s, silenced_s;
    devnet_child *trainer_agent, *auditor, *arbiter;
};

static double elapsed(const struct devnet *d)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - d->t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - d->t0.tv_nsec);
}

/* A progress line: stdout, or stderr when the result goes out as JSON. */
static void progress(const struct devnet *d, const char *fmt, ...) OVT_PRINTF(2, 3);

static void progress(const struct devnet *d, const char *fmt, ...)
{
    FILE *f = d->o->json ? stderr : stdout;
    fprintf(f, "[%6.1fs] ", elapsed(d));
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

static void hex0x(char *out, const void *b, size_t n)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, b, n);
}

/* A short form of a hash for progress lines: 0x1234abcd.. */
static const char *short_hash(char buf[16], const ovt_hash *h)
{
    char full[67];
    hex0x(full, h->b, 32);
    snprintf(buf, 16, "%.10s..", full);
    return buf;
}

static const char *party_of(const struct devnet *d, const chain_address *a)
{
    for (int i = 0; i < NKEYS; i++)
        if (chain_address_eq(&d->addr[i], a))
            return party_names[i];
    return "someone";
}

/* ---- the work folder ---- */

static int make_work_dir(struct devnet *d)
{
    char *w = d->r->work_dir;
    if (d->o->keep) {
        snprintf(w, sizeof d->r->work_dir, "%s", d->o->keep);
        if (access(w, F_OK) == 0) {
            char probe[4200];
            snprintf(probe, sizeof probe, "%s/anvil.log", w);
            if (access(probe, F_OK) == 0)
                return ovt_fail(OVT_EINVAL, "--keep %s already holds a devnet run; give a new folder", w);
        }
        return ovt_mkdirs(w, 0755);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(w, sizeof d->r->work_dir, "%s/ovt-devnet.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(w))
        return ovt_fail_errno(OVT_EIO, "cannot create a temporary folder under %s", tmp && *tmp ? tmp : "/tmp");
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_work_dir(const char *dir)
{
    if (dir[0])
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void child_log_path(char *out, size_t cap, const struct devnet *d, const char *name)
{
    snprintf(out, cap, "%s/%s.log", d->r->work_dir, name);
}

/* ---- the dataset ---- */

/* GPT-2: the GPL-3 text every Debian system ships, as byte tokens; where it
 * is missing, a synthetic text of the same size. MLP: a synthetic
 * classification set in the samples format. */
static int make_dataset(struct devnet *d)
{
    int rv;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (d->o->mlp) {
        snprintf(d->data_path, sizeof d->data_path, "%s/samples.bin", d->r->work_dir);
        trn_samples s;
        if ((rv = trn_samples_synthetic(&s, 1, 1024, 128, 32, 32)))
            return rv;
        rv = trn_samples_encode(&s, &buf, &len);
        trn_samples_free(&s);
    } else {
        snprintf(d->data_path, sizeof d->data_path, "%s/text.txt", d->r->work_dir);
        rv = ovt_read_file("/usr/share/common-licenses/GPL-3", &buf, &len, (size_t)1 << 24);
        if (rv == OVT_ENOTFOUND || (rv == 0 && len < 4096)) {
            free(buf);
            static const char *const words[] = {"the", "model", "step", "state", "round", "log", "of",
                                                "a", "to", "and", "audit", "train", "chain", "proof"};
            len = 35000;
            buf = malloc(len);
            if (!buf)
                return ovt_fail(OVT_ENOMEM, "out of memory for the dataset");
            uint64_t x = 88172645463325252ULL;
            size_t n = 0;
            while (n < len) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                const char *w = words[x % (sizeof words / sizeof words[0])];
                for (size_t k = 0; w[k] && n < len; k++)
                    buf[n++] = (uint8_t)w[k];
                if (n < len)
                    buf[n++] = (uint8_t)((x >> 20) % 9 == 0 ? '\n' : ' ');
            }
            rv = 0;
        }
    }
    if (rv == 0)
        rv = ovt_write_atomic(d->data_path, buf, len, 0644);
    free(buf);
    return rv;
}

/* ---- children ---- */

/* Runs one of the parties' commands to its end, following the chain
 * meanwhile; fails with the tail of its log if it fails. */
static int follow_events(struct devnet *d);

static int run_to_end(struct devnet *d, const char *name, char *const argv[], double timeout_s)
{
    char log[4300];
    child_log_path(log, sizeof log, d, name);
    devnet_child *c;
    int rv = devnet_spawn(&d->kids, &c, name, argv, log);
    if (rv)
        return rv;
    double until = elapsed(d) + timeout_s;
    while (!c->exited) {
        devnet_reap(&d->kids);
        if (c->exited)
            break;
        if (devnet_interrupted())
            return ovt_fail(OVT_EINVAL, "interrupted");
        if (elapsed(d) > until)
            return ovt_fail(OVT_ETIMEOUT, "%s did not finish within %.0f s (log: %s)", name, timeout_s, log);
        if (d->have_run && (rv = follow_events(d)))
            return rv;
        devnet_sleep_ms(100);
    }
    if (c->status != 0) {
        devnet_print_log_tail(stderr, c, 12);
        return ovt_fail(OVT_EIO, "%s failed (exit status %d; log: %s)", name, c->status, log);
    }
    return 0;
}

static int start(struct devnet *d, devnet_child **c, const char *name, char *const argv[])
{
    char log[4300];
    child_log_path(log, sizeof log, d, name);
    return devnet_spawn(&d->kids, c, name, argv, log);
}

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
    arg(c, "%s", dev_keys[key]);
}

static void addr_arg(cmdline *c, const char *flag, const chain_address *a)
{
    char s[43];
    chain_address_to_string(s, a);
    arg(c, "%s", flag);
    arg(c, "%s", s);
}

static int run_train(struct devnet *d)
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
        [DEVNET_WITHHELD_INPUTS] = "bitflip"};
    if (train_faults[o->fault]) {
        arg(&c, "--inject-fault");
        arg(&c, "%s", train_faults[o->fault]);
        arg(&c, "--fault-step");
        arg(&c, "%llu", (unsigned long long)o->at);
    }
    progress(d, "trainer: training %s for %llu steps on the cpu backend%s%s", o->mlp ? "mlp-demo" : "gpt2-tiny",
             (unsigned long long)o->steps, train_faults[o->fault] ? ", injecting " : "",
             train_faults[o->fault] ? train_faults[o->fault] : "");
    return run_to_end(d, "train", c.argv, o->timeout_s);
}

static int run_commit(struct devnet *d)
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
    progress(d, "trainer: opening the run, publishing it to the store and committing its root");
    return run_to_end(d, "commit", c.argv, 120);
}

static int start_trainer_agent(struct devnet *d)
{
    char run_id[67], state[4300];
    hex0x(run_id, d->run_id.b, 32);
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
    if (d->o->fault == DEVNET_WITHHELD_INPUTS)
        arg(&c, "--withhold");
    progress(d, "trainer: its agent plays the game and publishes the disputed step's inputs%s",
             d->o->fault == DEVNET_WITHHELD_INPUTS ? " (no: it withholds them)" : "");
    return start(d, &d->trainer_agent, "trainer-agent", c.argv);
}

static int start_auditor(struct devnet *d)
{
    char run_id[67], state[4300], dir[4300];
    hex0x(run_id, d->run_id.b, 32);
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
    arg(&c, "--state-dir");
    arg(&c, "%s", state);
    arg(&c, "--poll-interval");
    arg(&c, "0.2");
    if (d->o->fault == DEVNET_LYING_AUDITOR) {
        arg(&c, "--lie-at");
        arg(&c, "%llu", (unsigned long long)d->o->at);
    }
    progress(d, "auditor: replaying the run on the ref backend%s, then playing the game",
             d->o->fault == DEVNET_LYING_AUDITOR ? " (and lying from the fault step on)" : "");
    return start(d, &d->auditor, "auditor", c.argv);
}

static int start_arbiter(struct devnet *d)
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
    arg(&c, "--confirmations");
    arg(&c, "1");
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
    progress(d, "arbiter: watching the contract");
    return start(d, &d->arbiter, "arbiter", c.argv);
}

/* ---- following the game on chain ---- */

static devnet_party faulty_party(const devnet_opts *o)
{
    if (o->fault == DEVNET_NONE)
        return DEVNET_PARTY_NONE;
    return o->fault == DEVNET_LYING_AUDITOR ? DEVNET_PARTY_AUDITOR : DEVNET_PARTY_TRAINER;
}

static devnet_party wrong_party(chain_arb_outcome out)
{
    switch (out) {
    case CHAIN_ARB_AUDITOR_RIGHT:
    case CHAIN_ARB_FRAUDULENT_LOG:
    case CHAIN_ARB_INPUTS_UNAVAILABLE:
    case CHAIN_ARB_TRAINER_TIMED_OUT: return DEVNET_PARTY_TRAINER;
    case CHAIN_ARB_TRAINER_RIGHT:
    case CHAIN_ARB_AUDITOR_TIMED_OUT: return DEVNET_PARTY_AUDITOR;
    default: return DEVNET_PARTY_NONE;
    }
}

static void on_event(struct devnet *d, const chain_arb_event *e)
{
    char h1[16], h2[16];
    devnet_result *r = d->r;
    switch (e->kind) {
    case CHAIN_ARB_EV_RUN_OPENED:
        progress(d, "chain: run opened, %llu steps, tree depth %u", (unsigned long long)e->u.run_opened.steps,
                 e->u.run_opened.depth);
        break;
    case CHAIN_ARB_EV_COMMITTED: {
        const char *who = party_of(d, &e->u.committed.party);
        progress(d, "chain: %s committed root %s", who, short_hash(h1, &e->u.committed.root));
        devnet_party p = chain_address_eq(&e->u.committed.party, &d->addr[KEY_TRAINER]) ? DEVNET_PARTY_TRAINER
                                                                                          : DEVNET_PARTY_AUDITOR;
        devnet_party f = faulty_party(d->o);
        /* With no fault the clock runs from the trainer's commitment. */
        if (p == f || (f == DEVNET_PARTY_NONE && p == DEVNET_PARTY_TRAINER))
            r->faulty_commit_s = elapsed(d);
        break;
    }
    case CHAIN_ARB_EV_DISPUTE_OPENED:
        d->dispute_open = true;
        d->round = 0;
        progress(d, "chain: the roots differ: dispute opened (trainer %s, auditor %s), %u rounds of bisection",
                 short_hash(h1, &e->u.dispute_opened.trainer_root), short_hash(h2, &e->u.dispute_opened.auditor_root),
                 e->u.dispute_opened.depth);
        break;
    case CHAIN_ARB_EV_CHILDREN_REVEALED:
        if (d->o->silent && !chain_address_eq(&e->u.children_revealed.party,
                                              &d->addr[d->o->silent == DEVNET_PARTY_TRAINER ? KEY_TRAINER : KEY_AUDITOR]) &&
            e->u.children_revealed.round == d->round)
            d->honest_moved_s = elapsed(d);
        progress(d, "chain: round %u: %s revealed its children", e->u.children_revealed.round,
                     party_of(d, &e->u.children_revealed.party));
        break;
    case CHAIN_ARB_EV_DESCENDED:
        d->round = e->u.descended.round;
        progress(d, "chain: descended to round %u, node %llu", e->u.descended.round,
                 (unsigned long long)e->u.descended.index);
        break;
    case CHAIN_ARB_EV_STEP_FIXED:
        r->has_step = true;
        r->step = e->u.step_fixed.step;
        progress(d, "chain: the first differing leaf is step %llu", (unsigned long long)e->u.step_fixed.step);
        break;
    case CHAIN_ARB_EV_LEAF_REVEALED:
        progress(d, "chain: %s revealed its leaf %llu", party_of(d, &e->u.leaf_revealed.party),
                 (unsigned long long)e->u.leaf_revealed.step);
        break;
    case CHAIN_ARB_EV_PREVIOUS_LEAF_REVEALED:
    case CHAIN_ARB_EV_WITHDRAWN: break;
    case CHAIN_ARB_EV_VERDICT_DUE:
        progress(d, "chain: both leaves revealed: the arbiter's verdict on step %llu is due",
                 (unsigned long long)e->u.verdict_due.step);
        break;
    case CHAIN_ARB_EV_VERDICT_GIVEN:
        r->verdict_s = elapsed(d);
        r->has_step = true;
        r->step = e->u.verdict_given.step;
        progress(d, "chain: verdict on step %llu: %s (evidence %s)", (unsigned long long)e->u.verdict_given.step,
                 chain_arb_outcome_name(e->u.verdict_given.outcome), short_hash(h1, &e->u.verdict_given.evidence));
        break;
    case CHAIN_ARB_EV_TIMED_OUT:
        r->verdict_s = elapsed(d);
        progress(d, "chain: a deadline passed (phase %s, round %u)", chain_arb_phase_name(e->u.timed_out.phase),
                 e->u.timed_out.round);
        break;
    case CHAIN_ARB_EV_SETTLED: {
        char c1[80], c2[80];
        chain_u256_to_dec(c1, &e->u.settled.trainer_credit);
        chain_u256_to_dec(c2, &e->u.settled.auditor_credit);
        d->settled = true;
        r->outcome = e->u.settled.outcome;
        if (r->verdict_s == 0)
            r->verdict_s = elapsed(d);
        progress(d, "chain: settled: %s (credited: trainer %s wei, auditor %s wei)",
                 chain_arb_outcome_name(e->u.settled.outcome), c1, c2);
        break;
    }
    case CHAIN_ARB_EV_COUNT: break;
    }
}

/* Reads the contract's new events up to the head and handles them. */
static int follow_events(struct devnet *d)
{
    uint64_t head;
    int rv = chain_rpc_block_number(d->rpc, &head);
    if (rv || head < d->next_block)
        return rv;
    chain_arb_event *ev = NULL;
    size_t n = 0;
    if ((rv = chain_arb_get_events(&d->arb, NULL, d->next_block, head, &ev, &n)))
        return rv;
    for (size_t i = 0; i < n; i++) {
        if (!d->have_run && ev[i].kind == CHAIN_ARB_EV_RUN_OPENED) {
            d->run_id = ev[i].run_id;
            d->have_run = true;
            hex0x(d->r->run_id, d->run_id.b, 32);
        }
        if (d->have_run && memcmp(ev[i].run_id.b, d->run_id.b, 32) == 0)
            on_event(d, &ev[i]);
    }
    free(ev);
    d->next_block = head + 1;
    return 0;
}

/* A party that stops answering: once the dispute is open its agent is
 * stopped; once the other party has made its move of the round (or after a
 * while), the devnet's clock jumps past the move deadline, and the other
 * party's agent claims the timeout. */
static int silence(struct devnet *d)
{
    if (!d->o->silent || !d->dispute_open)
        return 0;
    devnet_child *c = d->o->silent == DEVNET_PARTY_TRAINER ? d->trainer_agent : d->auditor;
    if (!d->silenced) {
        progress(d, "devnet: the %s stops answering (its agent, pid %d, is stopped)",
                 devnet_party_name(d->o->silent), (int)c->pid);
        devnet_stop(c, 3000);
        d->silenced = true;
        d->silenced_s = elapsed(d);
        return 0;
    }
    double now = elapsed(d);
    /* the other party's move of this round, seen a second ago, or 20 s of quiet */
    bool ready = (d->honest_moved_s > 0 && now - d->honest_moved_s > 1.0) || now - d->silenced_s > 20;
    if (!d->time_moved && ready) {
        progress(d, "devnet: moving anvil's clock %u s forward, past the move deadline", d->o->move_timeout + 1);
        int rv = devnet_advance_time(d->rpc, (uint64_t)d->o->move_timeout + 1);
        if (rv)
            return rv;
        d->time_moved = true;
    }
    return 0;
}

/* ---- the whole run ---- */

static int setup_chain(struct devnet *d)
{
    char anvil[4096], log[4300];
    int rv;
    if ((rv = devnet_find_anvil(anvil, sizeof anvil, d->o->anvil)))
        return rv;
    child_log_path(log, sizeof log, d, "anvil");
    devnet_child *c;
    if ((rv = devnet_anvil_start(&d->kids, &c, &d->rpc, d->r->rpc_url, sizeof d->r->rpc_url, anvil, log)))
        return rv;
    progress(d, "anvil %s (pid %d) at %s", anvil, (int)c->pid, d->r->rpc_url);
    chain_privkey key;
    for (int i = NKEYS - 1; i >= 0 && !rv; i--) {
        if (!(rv = chain_key_from_hex(&key, dev_keys[i])))
            rv = chain_key_address(&d->addr[i], &key);
        if (i > 0)
            ovt_wipe(&key, sizeof key);
    }
    /* key now holds the deployer's (account 0) */
    chain_txm m;
    memset(&m, 0, sizeof m);
    if (!rv)
        rv = chain_txm_init(&m, d->rpc, &key, NULL);
    ovt_wipe(&key, sizeof key);
    chain_receipt receipt;
    memset(&receipt, 0, sizeof receipt);
    if (!rv)
        rv = chain_arb_deploy(&d->arb, &m, &receipt);
    if (m.rpc)
        chain_txm_free(&m);
    if (rv)
        return ovt_fail_wrap(rv, "deploying the contract");
    chain_address_to_string(d->r->contract, &d->arb.address);
    d->deploy_block = d->next_block = receipt.block_number;
    chain_receipt_free(&receipt);
    char t[43], a[43], b[43];
    chain_address_to_string(t, &d->addr[KEY_TRAINER]);
    chain_address_to_string(a, &d->addr[KEY_AUDITOR]);
    chain_address_to_string(b, &d->addr[KEY_ARBITER]);
    progress(d, "contract deployed at %s (block %llu)", d->r->contract, (unsigned long long)d->deploy_block);
    progress(d, "parties (anvil dev accounts 1-3): trainer %s, auditor %s, arbiter %s", t, a, b);
    return 0;
}

/* The arbiter watcher's own report of the settlement: its JSON log line
 * {"event": "settled", "run_id": ..., "message": ...}; 1 once found. */
static int arbiter_saw(struct devnet *d)
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

/* Follows the game until the run settles (and the parties' agents have
 * seen it), the timeout, SIGINT or a party failing. */
static int play(struct devnet *d)
{
    int rv;
    double until = d->o->timeout_s;
    while (!d->settled) {
        if (devnet_interrupted())
            return ovt_fail(OVT_EINVAL, "interrupted");
        if (elapsed(d) > until) {
            devnet_child *parties[3] = {d->trainer_agent, d->auditor, d->arbiter};
            for (int i = 0; i < 3; i++)
                if (parties[i])
                    devnet_print_log_tail(stderr, parties[i], 6);
            return ovt_fail(OVT_ETIMEOUT, "the run did not settle within %.0f s%s", until,
                            d->o->keep ? "" : " (rerun with --keep DIR to keep every process's log)");
        }
        if ((rv = follow_events(d)) || (rv = silence(d)))
            return rv;
        devnet_reap(&d->kids);
        devnet_child *parties[3] = {d->trainer_agent, d->auditor, d->arbiter};
        for (int i = 0; i < 3; i++) {
            devnet_child *c = parties[i];
            if (!c || !c->exited || (d->silenced && c == (d->o->silent == DEVNET_PARTY_TRAINER ? d->trainer_agent
                                                                                              : d->auditor)))
                continue;
            /* a party gone before the run settled: one last look at the chain */
            if ((rv = follow_events(d)))
                return rv;
            if (d->settled)
                break;
            devnet_print_log_tail(stderr, c, 12);
            return ovt_fail(OVT_EIO, "the %s exited (status %d) before the run settled (log: %s)", c->name,
                            c->status, c->log_path);
        }
        devnet_sleep_ms(100);
    }
    /* The agents end by themselves once they see the settlement; the
     * arbiter watcher logs it. */
    for (int waited = 0; waited < 100; waited++) {
        devnet_reap(&d->kids);
        bool seen = d->r->arbiter_saw[0] || arbiter_saw(d);
        if (seen && (!d->trainer_agent || d->trainer_agent->exited) && (!d->auditor || d->auditor->exited))
            break;
        devnet_sleep_ms(100);
    }
    if (d->r->arbiter_saw[0])
        progress(d, "arbiter: its watcher logged \"%s\"", d->r->arbiter_saw);
    return 0;
}

static int scenario(struct devnet *d)
{
    int rv;
    devnet_result *r = d->r;
    if ((rv = make_work_dir(d)))
        return rv;
    progress(d, "ovt devnet: fault %s%s, %s, %llu steps; work folder %s", devnet_fault_name(d->o->fault),
             d->o->fault ? "" : " (an honest run)", d->o->mlp ? "mlp-demo" : "gpt2-tiny",
             (unsigned long long)d->o->steps, r->work_dir);
    snprintf(d->run_dir, sizeof d->run_dir, "%s/trainer", r->work_dir);
    snprintf(d->store_dir, sizeof d->store_dir, "%s/store", r->work_dir);
    snprintf(d->store_url, sizeof d->store_url, "file://%s", d->store_dir);
    if ((rv = devnet_self_exe(d->exe, sizeof d->exe)) || (rv = ovt_mkdirs(d->store_dir, 0755)) ||
        (rv = setup_chain(d)) || (rv = make_dataset(d)) || (rv = start_arbiter(d)) || (rv = run_train(d)) ||
        (rv = run_commit(d)) || (rv = follow_events(d)))
        return rv;
    if (!d->have_run)
        return ovt_fail(OVT_ENOTFOUND, "ovt commit finished but no run was opened on %s", r->contract);
    if ((rv = start_trainer_agent(d)) || (rv = start_auditor(d)) || (rv = play(d)))
        return rv;
    return 0;
}

int devnet_run(const devnet_opts *o, devnet_result *r)
{
    memset(r, 0, sizeof *r);
    struct devnet d;
    memset(&d, 0, sizeof d);
    d.o = o;
    d.r = r;
    clock_gettime(CLOCK_MONOTONIC, &d.t0);
    r->expected = devnet_expected(o);
    devnet_catch_signals();
    int rv = scenario(&d);
    if (rv == 0) {
        devnet_parties parties = {d.addr, party_names, NKEYS};
        uint64_t head = 0;
        rv = chain_rpc_block_number(d.rpc, &head);
        if (!rv)
            rv = devnet_ledger_read(&r->ledger, d.rpc, d.deploy_block, head, &parties);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rv ? ovt_errmsg() : "");
    r->wrong = wrong_party(r->outcome);
    r->total_s = elapsed(&d);
    devnet_stop_all(&d.kids);
    chain_rpc_close(d.rpc);
    if (!o->keep)
        remove_work_dir(r->work_dir);
    return rv ? ovt_fail(rv, "%s", msg) : 0;
}
