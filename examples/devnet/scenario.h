#ifndef OVT_EXAMPLES_DEVNET_SCENARIO_H
#define OVT_EXAMPLES_DEVNET_SCENARIO_H

/* Inside the devnet scenario (devnet.h), shared by scenario.c (the work
 * folder, the dataset, the chain, the whole run), parties.c (the parties'
 * command lines) and follow.c (the game followed through the contract's
 * events). Not a public API. */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "examples/devnet/children.h"
#include "examples/devnet/devnet.h"

/* anvil's dev accounts 0-7 and what the devnet calls them: arbiter seat k
 * is account KEY_ARBITER + k. */
enum { KEY_DEPLOYER = 0, KEY_TRAINER, KEY_AUDITOR, KEY_ARBITER, NKEYS = KEY_ARBITER + CHAIN_ARB_MAX_ARBITERS };
extern const char *const devnet_dev_keys[NKEYS];
extern const char *const devnet_party_names[NKEYS];

struct devnet {
    const devnet_opts *o;
    devnet_result *r;
    struct timespec t0;
    devnet_children kids;
    chain_rpc *rpc;
    chain_arb arb;
    chain_narrow narrow; /* --narrow: OvtNarrow, bound to arb */
    chain_address addr[NKEYS];
    char exe[4096];
    char data_path[4200], run_dir[4200], store_dir[4200], store_url[4300];
    uint64_t deploy_block, next_block;
    ovt_hash run_id;
    bool have_run, settled, dispute_open, silenced, time_moved;
    unsigned round;
    double honest_moved_s;
    devnet_child *trainer_agent, *auditor;
    devnet_child *arbiters[CHAIN_ARB_MAX_ARBITERS]; /* the committee's watchers, seat 0 first */
    devnet_child *challengers[DEVNET_MAX_CHALLENGERS]; /* the outside challengers' daemons */
    bool window_closed;       /* the clock was moved past the challenge window */
    unsigned sealed;          /* VerdictCommitted events seen */
    bool verdict_due, clock_past_ballots;
    bool narrow_stuck;            /* --narrow: a party's agent logged narrow_unplayable */
    uint64_t narrow_clock_deadline; /* the narrowing deadline the clock was last moved past */
    /* the words that start the arbiter's ovt: this ovt, or --arbiter-cmd's
     * (the first resolved to a path); set by devnet_probe_arbiter */
    char *arbiter_argv[DEVNET_ARBITER_CMD_WORDS + 1];
    int arbiter_argc;
    char arbiter_words[4096], arbiter_exe[4096];
};

/* Seconds since the start; a progress line (stdout, or stderr with --json). */
double devnet_elapsed(const struct devnet *d);
void devnet_progress(const struct devnet *d, const char *fmt, ...) OVT_PRINTF(2, 3);
/* "0x" and the hex of n bytes. */
void devnet_hex0x(char *out, const void *b, size_t n);
/* The party an address belongs to ("someone" if none). */
const char *devnet_party_of(const struct devnet *d, const chain_address *a);
/* WORKDIR/NAME.log */
void devnet_child_log_path(char *out, size_t cap, const struct devnet *d, const char *name);

/* Runs a command to its end (following the chain meanwhile), or starts it. */
int devnet_run_to_end(struct devnet *d, const char *name, char *const argv[], double timeout_s) OVT_MUST_USE;
int devnet_start_child(struct devnet *d, devnet_child **c, const char *name, char *const argv[]) OVT_MUST_USE;

/* parties.c: the parties' commands. */
int devnet_run_train(struct devnet *d) OVT_MUST_USE;
int devnet_run_commit(struct devnet *d) OVT_MUST_USE;
int devnet_start_trainer_agent(struct devnet *d) OVT_MUST_USE;
int devnet_start_auditor(struct devnet *d) OVT_MUST_USE;
/* Resolves the arbiter's command and runs `CMD version` to its end: an
 * error naming the command and what to give instead when it cannot start
 * or is not an ovt. Before devnet_start_arbiter. */
int devnet_probe_arbiter(struct devnet *d) OVT_MUST_USE;
int devnet_start_arbiter(struct devnet *d) OVT_MUST_USE;
/* The outside challengers (--challengers), and whether challenger k's log
 * says its replay agrees with the trainer's root. */
int devnet_start_challengers(struct devnet *d) OVT_MUST_USE;
bool devnet_challenger_agreed(struct devnet *d, unsigned k);
/* --narrow: each seat's "narrow_evaluated" line, into r->arbiters. */
void devnet_arbiter_blocks(struct devnet *d);
/* 1 once the arbiter watcher's log (seat 0's) has its line on the settlement. */
int devnet_arbiter_saw(struct devnet *d);

/* follow.c: reads the contract's new events and reports them; makes the
 * --silent party stop answering; the party an outcome names as wrong. */
int devnet_follow_events(struct devnet *d) OVT_MUST_USE;
int devnet_silence(struct devnet *d) OVT_MUST_USE;
/* --fault silent-arbiter: once every other seat has sealed its ballot, the
 * clock jumps past the commit deadline so the reveals open without it. */
int devnet_skip_silent_arbiter(struct devnet *d) OVT_MUST_USE;
devnet_party devnet_wrong_party(chain_arb_outcome out);
/* --narrow: once a party's agent has logged that it cannot play the
 * narrowing (its committed state is not what its step re-executes to, as
 * after bitflip or lying-auditor), anvil's clock moves past each narrowing
 * deadline, so that the other party claims the timeout and the narrowing
 * ends with the silent party lost, as on a chain after moveTimeout. */
int devnet_narrow_clock(struct devnet *d) OVT_MUST_USE;

#endif
