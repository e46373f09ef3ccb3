#ifndef OVT_ARBITER_DECIDE_H
#define OVT_ARBITER_DECIDE_H

/* The arbiter's decisions as a pure function of what it knows: the run and
 * its game read at one block, the wall clock, and (once it has fetched and
 * re-executed the disputed step) the evaluation. Nothing here reads the
 * chain, the store or the clock; arbiter/watch.c does, then asks arb_decide
 * what to do, and sends what it says. docs/arbiter.md explains each rule. */

#include <stdbool.h>
#include <stdint.h>

#include "chain/arbitration.h"
#include "common/bytes.h"

/* A host name as ranks.json holds it, NUL included (DP_HOST_MAX). */
#define ARB_HOST_MAX 64

/* One input of the disputed step as the arbiter found it in the store. */
typedef enum {
    ARB_INPUT_OK = 0,
    ARB_INPUT_MISSING,  /* the store does not have it (or could not be reached) */
    ARB_INPUT_MISMATCH  /* the store's object does not match the committed hash */
} arb_input;

/* The inputs, in the order they are checked and named as evidence. */
enum {
    ARB_IN_STATE = 0, /* state j-1 (checkpoint named stateHash_{j-1}); for j = 0 the run config */
    ARB_IN_DATASET,   /* the dataset the batch of step j is rebuilt from (j > 0) */
    ARB_IN_LOG,       /* the trainer's rounding log j (j > 0) */
    ARB_NINPUTS
};

typedef enum {
    ARB_EXEC_NOT_RUN = 0, /* some input is not available */
    ARB_EXEC_OK,          /* re-executed: leaf is the recomputed leaf j */
    ARB_EXEC_FRAUD,       /* the trainer's log failed the fraud check (or is not a log) */
    ARB_EXEC_FAILED       /* the step fails (a non-finite value): no valid state j exists */
} arb_exec;

/* The game fields an evaluation was made from; an evaluation is only used
 * while the game still shows exactly these (after a reorg it may not). */
typedef struct {
    uint64_t step;
    ovt_hash trainer_leaf, auditor_leaf;
    ovt_hash previous_state, trainer_batch, trainer_log;
} arb_basis;

typedef struct {
    arb_basis basis;
    arb_input input[ARB_NINPUTS];
    arb_exec exec;
    ovt_hash leaf;         /* ARB_EXEC_OK: the recomputed leaf j */
    ovt_hash state_hash;   /* ARB_EXEC_OK: the recomputed stateHash_j */
    ovt_hash batch_hash;   /* j > 0, dataset available: batchHash_j of the schedule */
    /* A sharded run (docs/arbiter.md, "Which shard"): a finding for the log,
     * never an input of arb_decide, which rules on the leaf alone. */
    uint32_t shards;       /* ARB_EXEC_OK: the run's S (1 for a step in one shard; 0 not known) */
    int64_t shard_differs; /* ARB_EXEC_OK: the first shard whose recomputed gradient hash differs from
                              the trainer's log's shard table; -1 when none does */
    bool shard_from_site;  /* shard_differs is the shard whose sites hold the narrowed site (site / P),
                              not the table's (arbiter/narrow_eval.c) */
    bool has_owner;        /* shard_differs >= 0 and the trainer's ranks.json (the manifest's "ranks")
                              named the process that computed it: a hint, not committed */
    uint32_t owner_rank;
    char owner_host[ARB_HOST_MAX];
    /* An evaluation asked to trace the step (arb_evaluate's trace): whether
     * the step ran traced, the trace's result (0, or why it failed:
     * krn_trace_error) and its root (docs/formats.md, "Step trace"). */
    bool traced;
    int trace_rc;
    ovt_hash trace_root;
} arb_eval;

/* --misbehave: faults for devnet simulations only (docs/arbiter.md). */
typedef enum {
    ARB_HONEST = 0,
    ARB_MISBEHAVE_LIE,   /* post a wrong verdict the contract still accepts (arb_lie) */
    ARB_MISBEHAVE_SILENT /* take the seat (and its bond), never seal, reveal or rule */
} arb_misbehave;

/* The ballot a committee member sealed (or is about to): what it opens with
 * revealVerdict, kept on disk from before the commitVerdict is sent. basis:
 * the game it was made for (after a reorg that changed the game, a ballot
 * never sealed on this chain is replaced). */
typedef struct {
    arb_basis basis;
    uint64_t step;
    chain_arb_outcome outcome;
    ovt_hash evidence;
    ovt_hash salt;
} arb_ballot;

/* Everything arb_decide looks at. */
typedef struct {
    const chain_address *self;     /* the arbiter's address */
    const ovt_hash *run_id;
    const chain_arb_params *run;   /* getRun */
    const chain_arb_game *game;    /* getGame at the read block */
    const chain_arb_committee *committee; /* getCommittee at the same block */
    uint64_t now;                  /* unix seconds: max(wall clock, head block's timestamp) */
    uint64_t head_time;            /* the head block's timestamp: the chain's clock, which opens reveals */
    uint64_t first_missing;        /* when inputs were first found unavailable (0: never) */
    uint32_t input_wait;           /* seconds to wait for missing inputs */
    uint32_t deadline_margin;      /* seconds before the deadline by which a verdict must be sent */
    chain_u256 max_arbiter_bond;   /* the most wei it pays to take a seat */
    uint32_t max_commit_timeout;   /* the longest commit window of a run it sits on (seconds) */
    const chain_address *known;    /* trainers whose runs it sits on before their commitment */
    size_t nknown;
    arb_misbehave misbehave;
    bool verdict_sent;             /* a verdict transaction of ours for this game is known mined or pending */
    bool accept_sent;              /* the same for accept() */
    bool ballot_sent;              /* ... commitVerdict */
    bool reveal_sent;              /* ... revealVerdict */
    const arb_ballot *ballot;      /* the ballot on disk (NULL: none) */
    const arb_eval *eval;          /* NULL: not evaluated yet */
} arb_view;

typedef enum {
    ARB_ACT_NONE = 0, /* nothing to do now (not ours, game not at the verdict, already sent) */
    ARB_ACT_DONE,     /* the game is over: stop following it */
    ARB_ACT_EVALUATE, /* fetch the inputs and re-execute the step */
    ARB_ACT_WAIT,     /* inputs are missing; look again later */
    ARB_ACT_VERDICT,  /* n = 1: send verdict(step, outcome, evidence) */
    ARB_ACT_ACCEPT,   /* send accept() with the run's arbiter bond */
    ARB_ACT_REFUSE,   /* do not sit, nothing sent: the seat's terms are outside the policy (the
                         action's decline says which), for now or for good */
    ARB_ACT_COMMIT,   /* n > 1: seal (step, outcome, evidence) with commitVerdict; the view's ballot
                         when it has one for this game, else a new one with a new salt */
    ARB_ACT_REVEAL    /* n > 1: open the view's ballot with revealVerdict */
} arb_act;

typedef struct {
    arb_act kind;
    uint64_t step;
    chain_arb_outcome outcome;
    ovt_hash evidence;
    bool lie;           /* --misbehave lie changed the honest verdict into this one */
    const char *decline; /* REFUSE: "bond" (above --max-arbiter-bond), "window" (commit timeout
                            above --max-commit-timeout), "uncommitted" (no commitment by the
                            trainer yet, and the trainer is not a --known-party) */
    const char *reason; /* a short static explanation for the log */
} arb_action;

/* The next action for one game. Pure: same view, same action. */
void arb_decide(arb_action *out, const arb_view *v);

/* The basis of game g (phase AwaitingVerdict). */
void arb_basis_of(arb_basis *out, const chain_arb_game *g);

/* The evidence posted with Neither when the step cannot be executed at all
 * (ARB_EXEC_FAILED): keccak256("ovt.arbiter.step-failed"). */
void arb_step_failed_evidence(ovt_hash *out);

/* The lie of --misbehave lie for an honest verdict: TrainerRight with the
 * trainer's leaf, or AuditorRight with the auditor's leaf when TrainerRight is
 * the honest one. Deterministic, so every liar of a committee posts the same
 * wrong verdict, and always one the contract accepts. */
void arb_lie(chain_arb_outcome *outcome, ovt_hash *evidence, const chain_arb_game *g, chain_arb_outcome honest);

/* Whether a committee's ballots may be opened: every seated arbiter has
 * sealed one, or now is past the commit deadline. */
bool arb_reveals_open(const chain_arb_committee *c, uint64_t now);

const char *arb_misbehave_name(arb_misbehave m);

const char *arb_act_name(arb_act a);
const char *arb_input_name(int which);

#endif
