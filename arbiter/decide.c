#include "arbiter/decide.h"

#include <string.h>

#include "chain/keccak.h"

static bool hash_eq(const ovt_hash *a, const ovt_hash *b)
{
    return memcmp(a->b, b->b, 32) == 0;
}

static bool hash_zero(const ovt_hash *a)
{
    static const ovt_hash zero;
    return hash_eq(a, &zero);
}

void arb_basis_of(arb_basis *out, const chain_arb_game *g)
{
    memset(out, 0, sizeof *out);
    out->step = g->index;
    out->trainer_leaf = g->trainer_node;
    out->auditor_leaf = g->auditor_node;
    out->previous_state = g->previous_state;
    out->trainer_batch = g->trainer_batch;
    out->trainer_log = g->trainer_log;
}

void arb_step_failed_evidence(ovt_hash *out)
{
    static const char tag[] = "ovt.arbiter.step-failed";
    chain_keccak256(out, tag, sizeof tag - 1);
}

const char *arb_act_name(arb_act a)
{
    switch (a) {
    case ARB_ACT_NONE: return "none";
    case ARB_ACT_DONE: return "done";
    case ARB_ACT_EVALUATE: return "evaluate";
    case ARB_ACT_WAIT: return "wait";
    case ARB_ACT_VERDICT: return "verdict";
    case ARB_ACT_ACCEPT: return "accept";
    case ARB_ACT_REFUSE: return "refuse";
    case ARB_ACT_COMMIT: return "commit";
    case ARB_ACT_REVEAL: return "reveal";
    }
    return "?";
}

const char *arb_misbehave_name(arb_misbehave m)
{
    switch (m) {
    case ARB_HONEST: return "none";
    case ARB_MISBEHAVE_LIE: return "lie";
    case ARB_MISBEHAVE_SILENT: return "silent";
    }
    return "?";
}

const char *arb_input_name(int which)
{
    switch (which) {
    case ARB_IN_STATE: return "previous state";
    case ARB_IN_DATASET: return "dataset";
    case ARB_IN_LOG: return "rounding log";
    }
    return "?";
}

static void set(arb_action *out, arb_act kind, const char *reason)
{
    out->kind = kind;
    out->reason = reason;
}

static void verdict(arb_action *out, chain_arb_outcome outcome, const ovt_hash *evidence, const char *reason)
{
    set(out, ARB_ACT_VERDICT, reason);
    out->outcome = outcome;
    out->evidence = *evidence;
}

/* The committed hash that names input `which` (the contract accepts each as
 * InputsUnavailable evidence). Step 0's only input is the run config, which
 * the contract cannot name; the run's datasetHash stands for it. */
static const ovt_hash *input_hash(const arb_view *v, int which)
{
    const chain_arb_game *g = v->game;
    if (which == ARB_IN_STATE)
        return g->index == 0 ? &v->run->dataset_hash : &g->previous_state;
    if (which == ARB_IN_DATASET)
        return &v->run->dataset_hash;
    return &g->trainer_log;
}

/* The honest verdict on the step from the evaluation: VERDICT with the
 * outcome and evidence, or EVALUATE, WAIT or NONE. deadline: the last moment
 * the verdict (n = 1) or the ballot (n > 1) can be sent; within the margin
 * before it no input is waited for. */
static void rule(arb_action *out, const arb_view *v, uint64_t deadline)
{
    const chain_arb_game *g = v->game;
    arb_basis b;
    arb_basis_of(&b, g);
    const arb_eval *e = v->eval;
    if (!e || memcmp(&e->basis, &b, sizeof b) != 0)
        return set(out, ARB_ACT_EVALUATE, "re-execute the disputed step");

    for (int k = 0; k < ARB_NINPUTS; k++) {
        if (e->input[k] == ARB_INPUT_OK)
            continue;
        bool last_call = v->now + v->deadline_margin >= deadline;
        bool waited = v->first_missing && v->now >= v->first_missing + v->input_wait;
        if (!last_call && !waited)
            return set(out, ARB_ACT_WAIT, e->input[k] == ARB_INPUT_MISSING ? "an input is missing from the store"
                                                                          : "an input does not match its hash");
        const ovt_hash *h = input_hash(v, k);
        if (hash_zero(h))
            return set(out, ARB_ACT_NONE, "an input is unavailable but its hash is zero");
        verdict(out, CHAIN_ARB_INPUTS_UNAVAILABLE, h, "inputs not made available");
        return;
    }
    switch (e->exec) {
    case ARB_EXEC_FRAUD:
        if (g->index == 0 || hash_zero(&g->trainer_log))
            return set(out, ARB_ACT_NONE, "a fraud finding without a log");
        verdict(out, CHAIN_ARB_FRAUDULENT_LOG, &g->trainer_log, "the rounding log fails the fraud check");
        return;
    case ARB_EXEC_FAILED: {
        ovt_hash ev;
        arb_step_failed_evidence(&ev);
        if (hash_eq(&ev, &g->trainer_node) || hash_eq(&ev, &g->auditor_node))
            return set(out, ARB_ACT_NONE, "no evidence distinct from the leaves");
        verdict(out, CHAIN_ARB_NEITHER, &ev, "the step cannot be executed: both leaves are wrong");
        return;
    }
    case ARB_EXEC_OK:
        if (hash_eq(&e->leaf, &g->trainer_node))
            verdict(out, CHAIN_ARB_TRAINER_RIGHT, &e->leaf, "the recomputed leaf is the trainer's");
        else if (hash_eq(&e->leaf, &g->auditor_node))
            verdict(out, CHAIN_ARB_AUDITOR_RIGHT, &e->leaf, "the recomputed leaf is the auditor's");
        else if (!hash_zero(&e->leaf))
            verdict(out, CHAIN_ARB_NEITHER, &e->leaf, "the recomputed leaf is neither party's");
        else
            set(out, ARB_ACT_NONE, "a zero recomputed leaf");
        return;
    case ARB_EXEC_NOT_RUN:
        break;
    }
    set(out, ARB_ACT_EVALUATE, "evaluation incomplete");
}

void arb_lie(chain_arb_outcome *outcome, ovt_hash *evidence, const chain_arb_game *g, chain_arb_outcome honest)
{
    if (honest != CHAIN_ARB_TRAINER_RIGHT) {
        *outcome = CHAIN_ARB_TRAINER_RIGHT;
        *evidence = g->trainer_node;
    } else {
        *outcome = CHAIN_ARB_AUDITOR_RIGHT;
        *evidence = g->auditor_node;
    }
}

/* rule(), then the lie of --misbehave lie. */
static void rule_as_told(arb_action *out, const arb_view *v, uint64_t deadline)
{
    rule(out, v, deadline);
    if (out->kind != ARB_ACT_VERDICT || v->misbehave != ARB_MISBEHAVE_LIE)
        return;
    arb_lie(&out->outcome, &out->evidence, v->game, out->outcome);
    out->lie = true;
    out->reason = "--misbehave lie: a wrong verdict the contract accepts";
}

bool arb_reveals_open(const chain_arb_committee *c, uint64_t now)
{
    return c->committed == c->seated || now > c->commit_deadline;
}

/* n > 1: seal a ballot before the commit deadline, open it once reveals
 * are open and before the game's deadline. */
static void decide_committee(arb_action *out, const arb_view *v, int seat)
{
    const chain_arb_game *g = v->game;
    const chain_arb_committee *c = v->committee;
    const arb_ballot *b = v->ballot;
    unsigned bit = 1u << seat;
    if (c->revealed & bit)
        return set(out, ARB_ACT_NONE, "ballot revealed: waiting for the committee to settle");
    if (c->committed & bit) {
        if (v->now > g->deadline)
            return set(out, ARB_ACT_NONE, "the reveal deadline has passed");
        if (!arb_reveals_open(c, v->head_time))
            return set(out, ARB_ACT_NONE, "ballot sealed: waiting for the other ballots or the commit deadline");
        if (v->reveal_sent)
            return set(out, ARB_ACT_NONE, "reveal already sent");
        if (!b || b->step != g->index)
            return set(out, ARB_ACT_NONE, "a ballot is sealed but none for this step is on disk: cannot reveal");
        ovt_hash h;
        chain_arb_ballot_hash(&h, v->run_id, v->self, b->step, b->outcome, &b->evidence, &b->salt);
        if (!hash_eq(&h, &c->ballots[seat]))
            return set(out, ARB_ACT_NONE, "the ballot sealed on chain is not the one on disk: cannot reveal");
        verdict(out, b->outcome, &b->evidence, "reveals are open: open the sealed ballot");
        out->kind = ARB_ACT_REVEAL;
        out->lie = v->misbehave == ARB_MISBEHAVE_LIE;
        return;
    }
    if (v->now > c->commit_deadline)
        return set(out, ARB_ACT_NONE, "the commit deadline has passed without our ballot");
    if (v->ballot_sent)
        return set(out, ARB_ACT_NONE, "ballot sent: waiting for it to be mined");
    arb_basis basis;
    arb_basis_of(&basis, g);
    if (b && b->step == g->index && !memcmp(&b->basis, &basis, sizeof basis)) {
        verdict(out, b->outcome, &b->evidence, "seal the ballot on disk (its transaction is gone: sent again)");
        out->kind = ARB_ACT_COMMIT;
        out->lie = v->misbehave == ARB_MISBEHAVE_LIE;
        return;
    }
    rule_as_told(out, v, c->commit_deadline);
    if (out->kind == ARB_ACT_VERDICT)
        out->kind = ARB_ACT_COMMIT;
}

static void refuse(arb_action *out, const char *decline, const char *reason)
{
    set(out, ARB_ACT_REFUSE, reason);
    out->decline = decline;
}

static bool known_trainer(const arb_view *v)
{
    for (size_t k = 0; k < v->nknown; k++)
        if (!memcmp(v->known[k].b, v->run->trainer.b, sizeof v->run->trainer.b))
            return true;
    return false;
}

/* Before the verdict is due: take the seat when the run asks a bond, and
 * only once the seat cannot hold the bond longer than the policy allows.
 * Anyone may open a run naming this arbiter; until the trainer commits,
 * nothing says it ever will, and the bond would wait out the run's commit
 * window (the contract then returns it as Cancelled). So: a bounded bond, a
 * bounded window, and the trainer's commitment first unless the trainer is a
 * --known-party. */
static void decide_seat(arb_action *out, const arb_view *v, bool seated)
{
    const chain_arb_game *g = v->game;
    if (seated || chain_u256_is_zero(&v->run->arbiter_bond) || g->phase == CHAIN_ARB_PHASE_NONE)
        return set(out, ARB_ACT_NONE, "no verdict due yet");
    if (v->accept_sent)
        return set(out, ARB_ACT_NONE, "accept sent: waiting for it to be mined");
    if (chain_u256_cmp(&v->run->arbiter_bond, &v->max_arbiter_bond) > 0)
        return refuse(out, "bond", "the run's arbiter bond is above --max-arbiter-bond: not taking the seat");
    if (v->run->commit_timeout > v->max_commit_timeout)
        return refuse(out, "window", "the run's commit timeout is above --max-commit-timeout: not taking the seat");
    if (g->phase == CHAIN_ARB_PHASE_COMMITTING && !(g->flags & CHAIN_ARB_FLAG_TRAINER) && !known_trainer(v))
        return refuse(out, "uncommitted", "the trainer has not committed and is not a --known-party: "
                                          "not taking the seat until it commits");
    set(out, ARB_ACT_ACCEPT, "take the seat: the run asks an arbiter bond");
}

void arb_decide(arb_action *out, const arb_view *v)
{
    memset(out, 0, sizeof *out);
    const chain_arb_game *g = v->game;
    out->step = g->index;
    int seat = chain_arb_seat(v->run, v->self);
    if (seat < 0)
        return set(out, ARB_ACT_DONE, "another arbiter's run");
    if (g->phase == CHAIN_ARB_PHASE_SETTLED)
        return set(out, ARB_ACT_DONE, "settled");
    unsigned n = chain_arb_arbiter_count(v->run);
    const chain_arb_committee *c = v->committee;
    bool seated = chain_u256_is_zero(&v->run->arbiter_bond) || (c && (c->seated & (1u << seat)));
    if (g->phase != CHAIN_ARB_PHASE_AWAITING_VERDICT)
        return decide_seat(out, v, seated);
    if (!seated)
        return set(out, ARB_ACT_DONE, "not seated: the verdict came due before this arbiter accepted");
    if (v->misbehave == ARB_MISBEHAVE_SILENT)
        return set(out, ARB_ACT_NONE, "--misbehave silent: no ballot, no verdict");
    if (n > 1) {
        if (!c)
            return set(out, ARB_ACT_NONE, "the committee was not read");
        return decide_committee(out, v, seat);
    }
    if (v->now > g->deadline)
        return set(out, ARB_ACT_NONE, "the verdict deadline has passed");
    if (v->verdict_sent)
        return set(out, ARB_ACT_NONE, "verdict already sent");
    rule_as_told(out, v, g->deadline);
}
