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

void arb_decide(arb_action *out, const arb_view *v)
{
    memset(out, 0, sizeof *out);
    const chain_arb_game *g = v->game;
    out->step = g->index;
    if (!chain_address_eq(&v->run->arbiters[0], v->self))
        return set(out, ARB_ACT_DONE, "another arbiter's run");
    if (g->phase == CHAIN_ARB_PHASE_SETTLED)
        return set(out, ARB_ACT_DONE, "settled");
    if (g->phase != CHAIN_ARB_PHASE_AWAITING_VERDICT)
        return set(out, ARB_ACT_NONE, "no verdict due yet");
    if (v->now > g->deadline)
        return set(out, ARB_ACT_NONE, "the verdict deadline has passed");
    if (v->verdict_sent)
        return set(out, ARB_ACT_NONE, "verdict already sent");
    arb_basis b;
    arb_basis_of(&b, g);
    const arb_eval *e = v->eval;
    if (!e || memcmp(&e->basis, &b, sizeof b) != 0)
        return set(out, ARB_ACT_EVALUATE, "re-execute the disputed step");

    for (int k = 0; k < ARB_NINPUTS; k++) {
        if (e->input[k] == ARB_INPUT_OK)
            continue;
        bool last_call = v->now + v->deadline_margin >= g->deadline;
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
