/* The arbiter's decision function (arbiter/decide.h), offline: every
 * outcome, the waits for missing inputs, the deadline, a stale evaluation,
 * a verdict already sent, and that each verdict's evidence satisfies the
 * contract's rule for its outcome (docs/contract.md, "Verdict rules").
 * Committees: taking a seat (accept, --max-arbiter-bond), sealing before the
 * commit deadline, waiting for the reveals, opening the ballot on disk, and
 * --misbehave lie|silent. */
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

/* --- committees: self in seat 1 of {other, self, third}, m = 2, the
 * commit deadline 3600 s before the game's (10000). */
static chain_address third;
static chain_arb_committee com;
static ovt_hash run_id;
static arb_ballot ballot;

static void setup_committee(void)
{
    setup();
    memset(&third, 0, sizeof third);
    third.b[19] = 0xc3;
    run.arbiters[0] = other;
    run.arbiters[1] = self;
    run.arbiters[2] = third;
    run.threshold = 2;
    memset(&com, 0, sizeof com);
    com.count = 3;
    com.threshold = 2;
    com.seated = 7;
    com.commit_deadline = 6400;
    fill(&run_id, 11);
    memset(&ballot, 0, sizeof ballot);
}

/* The ballot on disk: made for the current game. */
static void set_ballot(chain_arb_outcome outcome, const ovt_hash *evidence, uint8_t salt_seed)
{
    arb_basis_of(&ballot.basis, &game);
    ballot.step = game.index;
    ballot.outcome = outcome;
    ballot.evidence = *evidence;
    fill(&ballot.salt, salt_seed);
}

typedef struct {
    uint64_t now, head_time, first_missing;
    bool accept_sent, ballot_sent, reveal_sent;
    const arb_ballot *ballot;
    const arb_eval *eval;
    arb_misbehave misbehave;
    uint64_t max_bond;
    uint32_t max_window;          /* --max-commit-timeout; 0: 3600 */
    const chain_address *known;   /* one --known-party, or NULL */
} cview;

static arb_action decide_c(const cview *c)
{
    arb_view v = {.self = &self, .run_id = &run_id, .run = &run, .game = &game, .committee = &com,
                  .now = c->now, .head_time = c->head_time ? c->head_time : c->now,
                  .first_missing = c->first_missing, .input_wait = 100, .deadline_margin = 50,
                  .max_arbiter_bond = chain_u256_from_u64(c->max_bond ? c->max_bond : 5000),
                  .max_commit_timeout = c->max_window ? c->max_window : 3600, .known = c->known,
                  .nknown = c->known ? 1 : 0,
                  .misbehave = c->misbehave, .accept_sent = c->accept_sent, .ballot_sent = c->ballot_sent,
                  .reveal_sent = c->reveal_sent, .ballot = c->ballot, .eval = c->eval};
    arb_action a, b;
    arb_decide(&a, &v);
    arb_decide(&b, &v);
    CHECK_MSG(memcmp(&a, &b, sizeof a) == 0, "the same view gave two actions");
    return a;
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

/* Seals what the evaluation says, before the commit deadline; inputs are
 * waited for only until the commit deadline less the margin. */
static void test_committee_commit(void)
{
    setup_committee();
    ev.leaf = game.auditor_node;
    arb_action a = decide_c(&(cview){.now = 1000, .eval = &ev});
    CHECK(a.kind == ARB_ACT_COMMIT && a.outcome == CHAIN_ARB_AUDITOR_RIGHT && contract_accepts(&a) && !a.lie);
    CHECK(decide_c(&(cview){.now = 1000}).kind == ARB_ACT_EVALUATE);
    CHECK(decide_c(&(cview){.now = 6400, .eval = &ev}).kind == ARB_ACT_COMMIT); /* at the deadline: in time */
    CHECK(decide_c(&(cview){.now = 6401, .eval = &ev}).kind == ARB_ACT_NONE);   /* after it: none */
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev, .ballot_sent = true}).kind == ARB_ACT_NONE);
    /* the margin counts from the commit deadline, not the game's */
    ev.exec = ARB_EXEC_NOT_RUN;
    ev.input[ARB_IN_LOG] = ARB_INPUT_MISSING;
    CHECK(decide_c(&(cview){.now = 6349, .first_missing = 6349, .eval = &ev}).kind == ARB_ACT_WAIT);
    a = decide_c(&(cview){.now = 6350, .first_missing = 6349, .eval = &ev});
    CHECK(a.kind == ARB_ACT_COMMIT && a.outcome == CHAIN_ARB_INPUTS_UNAVAILABLE && eq(&a.evidence, &game.trainer_log));

    /* a ballot on disk for this game is sealed again as it is, without an
     * evaluation; one for another game state is not */
    setup_committee();
    set_ballot(CHAIN_ARB_TRAINER_RIGHT, &game.trainer_node, 12);
    ev.leaf = game.auditor_node; /* the evaluation now says otherwise: the ballot wins */
    a = decide_c(&(cview){.now = 1000, .ballot = &ballot, .eval = &ev});
    CHECK(a.kind == ARB_ACT_COMMIT && a.outcome == CHAIN_ARB_TRAINER_RIGHT && eq(&a.evidence, &game.trainer_node));
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot}).kind == ARB_ACT_COMMIT);
    ballot.basis.auditor_leaf.b[3] ^= 1;
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot}).kind == ARB_ACT_EVALUATE);
    a = decide_c(&(cview){.now = 1000, .ballot = &ballot, .eval = &ev});
    CHECK(a.kind == ARB_ACT_COMMIT && a.outcome == CHAIN_ARB_AUDITOR_RIGHT);

    /* self in the last seat of five, and in none */
    setup_committee();
    run.arbiters[1] = third;
    run.arbiters[2] = other;
    run.arbiters[3].b[0] = 9;
    run.arbiters[4] = self;
    com.count = 5;
    com.seated = 31;
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev}).kind == ARB_ACT_COMMIT);
    run.arbiters[4].b[0] = 8;
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev}).kind == ARB_ACT_DONE);
}

/* Opens the ballot on disk once every seated arbiter sealed one or the
 * chain's clock is past the commit deadline, and before the game's. */
static void test_committee_reveal(void)
{
    setup_committee();
    set_ballot(CHAIN_ARB_AUDITOR_RIGHT, &game.auditor_node, 13);
    /* ballotHash = keccak256(abi.encode(runId, arbiter, step, outcome, evidence, salt)), by hand */
    uint8_t enc[6 * 32] = {0};
    memcpy(enc, run_id.b, 32);
    memcpy(enc + 32 + 12, self.b, 20);
    enc[64 + 31] = (uint8_t)game.index;
    enc[96 + 31] = CHAIN_ARB_AUDITOR_RIGHT;
    memcpy(enc + 128, ballot.evidence.b, 32);
    memcpy(enc + 160, ballot.salt.b, 32);
    chain_keccak256(&com.ballots[1], enc, sizeof enc);
    com.committed = 2; /* only ours */
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot, .eval = &ev}).kind == ARB_ACT_NONE);
    /* the wall clock past the commit deadline, the chain not yet: still closed */
    CHECK(decide_c(&(cview){.now = 6500, .head_time = 6400, .ballot = &ballot}).kind == ARB_ACT_NONE);
    arb_action a = decide_c(&(cview){.now = 6401, .ballot = &ballot});
    CHECK(a.kind == ARB_ACT_REVEAL && a.outcome == CHAIN_ARB_AUDITOR_RIGHT && eq(&a.evidence, &game.auditor_node));
    com.committed = 7; /* everyone sealed: open before the commit deadline */
    a = decide_c(&(cview){.now = 1000, .ballot = &ballot});
    CHECK(a.kind == ARB_ACT_REVEAL && contract_accepts(&a));
    com.seated = 3; /* seat 2 never accepted: two ballots are all */
    com.committed = 3;
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot}).kind == ARB_ACT_REVEAL);
    CHECK(decide_c(&(cview){.now = 10000, .ballot = &ballot}).kind == ARB_ACT_REVEAL); /* at the deadline */
    CHECK(decide_c(&(cview){.now = 10001, .ballot = &ballot}).kind == ARB_ACT_NONE);
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot, .reveal_sent = true}).kind == ARB_ACT_NONE);
    CHECK(decide_c(&(cview){.now = 1000}).kind == ARB_ACT_NONE); /* no ballot on disk */
    arb_ballot other_salt = ballot;
    other_salt.salt.b[0] ^= 1;
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &other_salt}).kind == ARB_ACT_NONE);
    com.revealed = 2;
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot}).kind == ARB_ACT_NONE);
    game.phase = CHAIN_ARB_PHASE_SETTLED;
    CHECK(decide_c(&(cview){.now = 1000, .ballot = &ballot}).kind == ARB_ACT_DONE);
}

/* accept() before the verdict is due, bounded by --max-arbiter-bond and
 * --max-commit-timeout, and before the trainer's commitment only for a
 * --known-party trainer (issue 43). */
static void test_seat(void)
{
    setup_committee();
    run.arbiter_bond = chain_u256_from_u64(3000);
    run.commit_timeout = 3600;
    run.trainer.b[19] = 0xd4;
    run.auditor.b[19] = 0xe5;
    com.seated = 1; /* seat 0 accepted, we did not */
    for (int ph = CHAIN_ARB_PHASE_COMMITTING; ph <= CHAIN_ARB_PHASE_REVEALING; ph++) {
        game.phase = (chain_arb_phase)ph;
        game.flags = ph == CHAIN_ARB_PHASE_COMMITTING ? CHAIN_ARB_FLAG_TRAINER : 0;
        CHECK(decide_c(&(cview){.now = 1000}).kind == ARB_ACT_ACCEPT);
        CHECK(decide_c(&(cview){.now = 1000, .misbehave = ARB_MISBEHAVE_SILENT}).kind == ARB_ACT_ACCEPT);
        CHECK(decide_c(&(cview){.now = 1000, .max_bond = 3000}).kind == ARB_ACT_ACCEPT);
        CHECK(decide_c(&(cview){.now = 1000, .max_bond = 2999}).kind == ARB_ACT_REFUSE);
        CHECK(decide_c(&(cview){.now = 1000, .accept_sent = true}).kind == ARB_ACT_NONE);
    }
    arb_action d = decide_c(&(cview){.now = 1000, .max_bond = 2999});
    CHECK(d.kind == ARB_ACT_REFUSE && d.decline && !strcmp(d.decline, "bond"));
    /* a run anyone may have opened: no commitment yet, an unknown trainer */
    game.phase = CHAIN_ARB_PHASE_COMMITTING;
    for (unsigned flags = 0; flags <= CHAIN_ARB_FLAG_AUDITOR; flags += CHAIN_ARB_FLAG_AUDITOR) {
        game.flags = flags;
        d = decide_c(&(cview){.now = 1000});
        CHECK(d.kind == ARB_ACT_REFUSE && d.decline && !strcmp(d.decline, "uncommitted"));
        CHECK(decide_c(&(cview){.now = 1000, .known = &run.trainer}).kind == ARB_ACT_ACCEPT);
        CHECK(decide_c(&(cview){.now = 1000, .known = &run.auditor}).kind == ARB_ACT_REFUSE);
    }
    /* a window above --max-commit-timeout: refused even once committed */
    game.flags = CHAIN_ARB_FLAG_TRAINER;
    run.commit_timeout = 3601;
    d = decide_c(&(cview){.now = 1000, .known = &run.trainer});
    CHECK(d.kind == ARB_ACT_REFUSE && d.decline && !strcmp(d.decline, "window"));
    CHECK(decide_c(&(cview){.now = 1000, .max_window = 3601}).kind == ARB_ACT_ACCEPT);
    run.commit_timeout = 3600;
    game.phase = CHAIN_ARB_PHASE_BISECTING;
    game.flags = 0;
    com.seated = 3;
    CHECK(decide_c(&(cview){.now = 1000}).kind == ARB_ACT_NONE);
    /* the verdict came due before we sat: nothing we may do */
    com.seated = 1;
    game.phase = CHAIN_ARB_PHASE_AWAITING_VERDICT;
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev}).kind == ARB_ACT_DONE);
    /* no bond: seated from the start, nothing to accept */
    setup_committee();
    com.seated = 7;
    game.phase = CHAIN_ARB_PHASE_BISECTING;
    CHECK(decide_c(&(cview){.now = 1000}).kind == ARB_ACT_NONE);

    /* one arbiter with a bond: it must accept, then rules with verdict() */
    setup();
    run.arbiter_bond = chain_u256_from_u64(3000);
    memset(&com, 0, sizeof com);
    com.count = 1;
    com.threshold = 1;
    game.phase = CHAIN_ARB_PHASE_REVEALING;
    CHECK(decide_c(&(cview){.now = 1000}).kind == ARB_ACT_ACCEPT);
    game.phase = CHAIN_ARB_PHASE_AWAITING_VERDICT;
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev}).kind == ARB_ACT_DONE);
    com.seated = 1;
    ev.leaf = game.trainer_node;
    arb_action a = decide_c(&(cview){.now = 1000, .eval = &ev});
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_TRAINER_RIGHT);
}

/* --misbehave: silent never seals or rules; lie posts the deterministic
 * wrong verdict, one the contract accepts, the same for every liar. */
static void test_misbehave(void)
{
    setup_committee();
    ev.leaf = game.trainer_node;
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev, .misbehave = ARB_MISBEHAVE_SILENT}).kind == ARB_ACT_NONE);
    com.committed = 7;
    CHECK(decide_c(&(cview){.now = 1000, .eval = &ev, .misbehave = ARB_MISBEHAVE_SILENT}).kind == ARB_ACT_NONE);
    setup();
    CHECK(decide_at(1000, 0, false, &ev).kind == ARB_ACT_VERDICT);
    arb_view v = {.self = &self, .run = &run, .game = &game, .now = 1000, .eval = &ev,
                  .misbehave = ARB_MISBEHAVE_SILENT};
    arb_action a;
    arb_decide(&a, &v);
    CHECK(a.kind == ARB_ACT_NONE);

    /* honest verdict -> the lie, by the table */
    struct {
        arb_exec exec;
        int leaf; /* 0 trainer's, 1 auditor's, 2 neither */
        chain_arb_outcome honest, lie;
    } cases[] = {
        {ARB_EXEC_OK, 0, CHAIN_ARB_TRAINER_RIGHT, CHAIN_ARB_AUDITOR_RIGHT},
        {ARB_EXEC_OK, 1, CHAIN_ARB_AUDITOR_RIGHT, CHAIN_ARB_TRAINER_RIGHT},
        {ARB_EXEC_OK, 2, CHAIN_ARB_NEITHER, CHAIN_ARB_TRAINER_RIGHT},
        {ARB_EXEC_FRAUD, 2, CHAIN_ARB_FRAUDULENT_LOG, CHAIN_ARB_TRAINER_RIGHT},
        {ARB_EXEC_FAILED, 2, CHAIN_ARB_NEITHER, CHAIN_ARB_TRAINER_RIGHT},
        {ARB_EXEC_NOT_RUN, 2, CHAIN_ARB_INPUTS_UNAVAILABLE, CHAIN_ARB_TRAINER_RIGHT},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        setup_committee();
        ev.exec = cases[k].exec;
        if (ev.exec == ARB_EXEC_NOT_RUN)
            ev.input[ARB_IN_DATASET] = ARB_INPUT_MISSING;
        ev.leaf = cases[k].leaf == 0 ? game.trainer_node : cases[k].leaf == 1 ? game.auditor_node : ev.leaf;
        arb_action honest = decide_c(&(cview){.now = 6390, .first_missing = 1, .eval = &ev});
        arb_action lie = decide_c(&(cview){.now = 6390, .first_missing = 1, .eval = &ev,
                                           .misbehave = ARB_MISBEHAVE_LIE});
        const ovt_hash *want = cases[k].lie == CHAIN_ARB_TRAINER_RIGHT ? &game.trainer_node : &game.auditor_node;
        CHECK_MSG(honest.kind == ARB_ACT_COMMIT && honest.outcome == cases[k].honest && !honest.lie, "case %zu", k);
        CHECK_MSG(lie.kind == ARB_ACT_COMMIT && lie.outcome == cases[k].lie && eq(&lie.evidence, want) && lie.lie &&
                      contract_accepts(&lie),
                  "case %zu: lie %s", k, chain_arb_outcome_name(lie.outcome));
        /* another liar in another seat lies the same */
        run.arbiters[0] = self;
        run.arbiters[1] = other;
        arb_action lie0 = decide_c(&(cview){.now = 6390, .first_missing = 1, .eval = &ev,
                                            .misbehave = ARB_MISBEHAVE_LIE});
        CHECK(lie0.outcome == lie.outcome && eq(&lie0.evidence, &lie.evidence));
    }
    /* one arbiter lies with verdict() */
    setup();
    ev.leaf = game.auditor_node;
    arb_view v1 = {.self = &self, .run = &run, .game = &game, .now = 1000, .eval = &ev,
                   .misbehave = ARB_MISBEHAVE_LIE};
    arb_decide(&a, &v1);
    CHECK(a.kind == ARB_ACT_VERDICT && a.outcome == CHAIN_ARB_TRAINER_RIGHT && contract_accepts(&a));
}

int main(void)
{
    CHECK_RUN(test_committee_commit());
    CHECK_RUN(test_committee_reveal());
    CHECK_RUN(test_seat());
    CHECK_RUN(test_misbehave());
    CHECK_RUN(test_outcomes());
    CHECK_RUN(test_inputs());
    CHECK_RUN(test_when_not_to_act());
    return check_done();
}
