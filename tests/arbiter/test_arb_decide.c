/* The arbiter's decision function (arbiter/decide.h), offline: every
 * outcome, the waits for missing inputs, the deadline, a stale evaluation,
 * a verdict already sent, and that each verdict's evidence satisfies the
 * contract's rule for its outcome (docs/contract.md, "Verdict rules"). */
#include <stdlib.h>
#include <string.h>

#include "arbiter/decide.h"
#include "chain/keccak.h"
#include "check.h"

static chain_address self, other;
static chain_arb_params run;
static chain_arb_game game;
static arb_eval ev;

static void fill(ovt_hash *h, uint8_t seed)
{
    for (int i = 0; i < 32; i++)
        h->b[i] = (uint8_t)(seed * 31 + i * 7 + 1);
}

/* A game at AwaitingVerdict on step 3 with distinct hashes everywhere and
 * an evaluation made from it whose inputs are all available. */
static void setup(void)
{
    memset(&self, 0, sizeof self);
    memset(&other, 0, sizeof other);
    self.b[19] = 0xa1;
    other.b[19] = 0xb2;
    memset(&run, 0, sizeof run);
    run.arbiters[0] = self;
    fill(&run.config_hash, 1);
    fill(&run.dataset_hash, 2);
    memset(&game, 0, sizeof game);
    game.phase = CHAIN_ARB_PHASE_AWAITING_VERDICT;
    game.index = 3;
    game.deadline = 10000;
    fill(&game.trainer_node, 3);
    fill(&game.auditor_node, 4);
    fill(&game.previous_state, 5);
    fill(&game.trainer_batch, 6);
    fill(&game.trainer_log, 7);
    memset(&ev, 0, sizeof ev);
    arb_basis_of(&ev.basis, &game);
    ev.exec = ARB_EXEC_OK;
    fill(&ev.leaf, 8);
}

static arb_action decide_at(uint64_t now, uint64_t first_missing, bool sent, const arb_eval *e)
{
    arb_view v = {.self = &self, .run = &run, .game = &game, .now = now, .first_missing = first_missing,
                  .input_wait = 100, .deadline_margin = 50, .verdict_sent = sent, .eval = e};
    arb_action a, b;
    arb_decide(&a, &v);
    arb_decide(&b, &v);
    CHECK_MSG(memcmp(&a, &b, sizeof a) == 0, "the same view gave two actions");
    return a;
}

static bool eq(const ovt_hash *a, const ovt_hash *b)
{
    return memcmp(a->b, b->b, 32) == 0;
}

/* The contract's check of a verdict (docs/contract.md), written from the
 * table, not from arb_decide. */
static bool contract_accepts(const arb_action *a)
{
    static const ovt_hash zero;
    const ovt_hash *e = &a->evidence;
    if (a->step != game.index)
        return false;
    switch (a->outcome) {
    case CHAIN_ARB_TRAINER_RIGHT: return eq(e, &game.trainer_node);
    case CHAIN_ARB_AUDITOR_RIGHT: return eq(e, &game.auditor_node);
    case CHAIN_ARB_NEITHER: return !eq(e, &zero) && !eq(e, &game.trainer_node) && !eq(e, &game.auditor_node);
    case CHAIN_ARB_FRAUDULENT_LOG: return !eq(e, &zero) && eq(e, &game.trainer_log);
    case CHAIN_ARB_INPUTS_UNAVAILABLE:
        return !eq(e, &zero) && (eq(e, &game.trainer_batch) || eq(e, &game.trainer_log) ||
                                 (game.index > 0 && eq(e, &game.previous_state)) || eq(e, &run.dataset_hash));
    default: return false;
    }
}

static void test_outcomes(void)
{
    setup();
    ev.leaf = game.trainer_node;
    arb_action a = decide_at(1000, 0, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_TRAINER_RIGHT && contract_accepts(&a));

    ev.leaf = game.auditor_node;
    a = decide_at(1000, 0, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_AUDITOR_RIGHT && contract_accepts(&a));

    fill(&ev.leaf, 9);
    a = decide_at(1000, 0, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_NEITHER && eq(&a.evidence, &ev.leaf) &&
          contract_accepts(&a));

    ev.exec = ARB_EXEC_FRAUD;
    a = decide_at(1000, 0, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_FRAUDULENT_LOG && contract_accepts(&a));

    ev.exec = ARB_EXEC_FAILED;
    a = decide_at(1000, 0, false, &ev);
    ovt_hash tag;
    chain_keccak256(&tag, "ovt.arbiter.step-failed", 23);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_NEITHER && eq(&a.evidence, &tag) &&
          contract_accepts(&a));

    /* a fraud finding is never a verdict without a log to name (step 0) */
    ev.exec = ARB_EXEC_FRAUD;
    game.index = 0;
    memset(&game.trainer_log, 0, 32);
    memset(&game.trainer_batch, 0, 32);
    arb_basis_of(&ev.basis, &game);
    a = decide_at(1000, 0, false, &ev);
    CHECK(a.kind == ARB_ACT_NONE);
    /* step 0 with the recomputed initial state */
    ev.exec = ARB_EXEC_OK;
    ev.leaf = game.trainer_node;
    a = decide_at(1000, 0, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && a.step == 0 && a.outcome == CHAIN_ARB_TRAINER_RIGHT && contract_accepts(&a));
}

static void test_inputs(void)
{
    /* each missing input waits, then is named as the evidence */
    const ovt_hash *expect[ARB_NINPUTS] = {&game.previous_state, &run.dataset_hash, &game.trainer_log};
    for (int k = 0; k < ARB_NINPUTS; k++) {
        for (int kind = ARB_INPUT_MISSING; kind <= ARB_INPUT_MISMATCH; kind++) {
            setup();
            ev.exec = ARB_EXEC_NOT_RUN;
            ev.input[k] = (arb_input)kind;
            arb_action a = decide_at(1000, 1000, false, &ev);
            CHECK_MSG(a.kind == ARB_ACT_WAIT, "input %d: %s", k, arb_act_name(a.kind));
            a = decide_at(1099, 1000, false, &ev);
            CHECK(a.kind == ARB_ACT_WAIT);
            a = decide_at(1100, 1000, false, &ev);
            CHECK_MSG(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_INPUTS_UNAVAILABLE &&
                          eq(&a.evidence, expect[k]) && contract_accepts(&a),
                      "input %d", k);
            /* near the deadline there is no more waiting, even the first time */
            a = decide_at(game.deadline - 50, 0, false, &ev);
            CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_INPUTS_UNAVAILABLE);
            a = decide_at(game.deadline - 51, game.deadline - 51, false, &ev);
            CHECK(a.kind == ARB_ACT_WAIT);
        }
    }
    /* the first unavailable input in order is named */
    setup();
    ev.exec = ARB_EXEC_NOT_RUN;
    ev.input[ARB_IN_LOG] = ARB_INPUT_MISSING;
    ev.input[ARB_IN_STATE] = ARB_INPUT_MISMATCH;
    arb_action a = decide_at(5000, 1, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && eq(&a.evidence, &game.previous_state));
    /* step 0: the run config stands for the state; the contract takes the datasetHash */
    game.index = 0;
    memset(&game.previous_state, 0, 32);
    memset(&game.trainer_log, 0, 32);
    memset(&game.trainer_batch, 0, 32);
    arb_basis_of(&ev.basis, &game);
    a = decide_at(5000, 1, false, &ev);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_INPUTS_UNAVAILABLE &&
          eq(&a.evidence, &run.dataset_hash) && contract_accepts(&a));
}

static void test_when_not_to_act(void)
{
    setup();
    arb_action a = decide_at(1000, 0, false, NULL);
    CHECK(a.kind == ARB_ACT_EVALUATE);

    /* an evaluation of another game state (a reorg moved the game) is not used */
    arb_eval stale = ev;
    stale.basis.trainer_leaf.b[0] ^= 1;
    CHECK(decide_at(1000, 0, false, &stale).kind == ARB_ACT_EVALUATE);
    stale = ev;
    stale.basis.step = 2;
    CHECK(decide_at(1000, 0, false, &stale).kind == ARB_ACT_EVALUATE);

    CHECK(decide_at(1000, 0, true, &ev).kind == ARB_ACT_NONE);         /* already sent */
    CHECK(decide_at(game.deadline + 1, 0, false, &ev).kind == ARB_ACT_NONE); /* too late */
    CHECK(decide_at(game.deadline, 0, false, &ev).kind == ARB_ACT_VERDICT); /* at the deadline: in time */

    for (int ph = CHAIN_ARB_PHASE_NONE; ph <= CHAIN_ARB_PHASE_REVEALING; ph++) {
        game.phase = (chain_arb_phase)ph;
        CHECK(decide_at(1000, 0, false, &ev).kind == ARB_ACT_NONE);
    }
    game.phase = CHAIN_ARB_PHASE_SETTLED;
    CHECK(decide_at(1000, 0, false, &ev).kind == ARB_ACT_DONE);

    setup();
    run.arbiters[0] = other;
    CHECK(decide_at(1000, 0, false, &ev).kind == ARB_ACT_DONE);
}

int main(void)
{
    CHECK_RUN(test_outcomes());
    CHECK_RUN(test_inputs());
    CHECK_RUN(test_when_not_to_act());
    return check_done();
}
