/* Open challenges (issue 43), against a real anvil: any account but the
 * run's parties and arbiters disputes the trainer's root with its own root
 * and a bond equal to the auditor's, from the trainer's commit until
 * commitTimeout after it; each challenge is a game of its own between the
 * trainer and the challenger, with the run's arbiter.
 *
 * - A named auditor that colludes with a lying trainer (it commits the
 *   trainer's root: Verified) does not save the trainer: an outside
 *   challenger with the honest history wins its game (AuditorRight), gets its
 *   bond back, and the run is marked refuted (refutedBy = the challenge).
 * - Two lying challengers against an honest trainer, played in parallel:
 *   each loses its bond to the trainer; the trainer's own bond is never at
 *   stake in a challenge, and the run is not refuted.
 * - A named auditor that wins marks its run refuted too.
 * - Refusals by name: before the trainer's commit or after the window
 *   (ChallengesClosed), with the trainer's root (NothingToDispute), by a
 *   party or an arbiter (BadParty), a wrong bond, twice (RunExists), a
 *   challenge of a challenge or of a run with no auditor bond
 *   (ChallengesClosed).
 * - The gas of challenge() and of a whole challenge over 2^20 steps. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "util.h"

static fx_env env;

#define TB 1000u
#define AB 2000u

static void challenge_id(ovt_hash *out, const ovt_hash *run_id, int who)
{
    chain_arb_challenge_id(out, run_id, &env.addr[who]);
}

/* The low 64 bits of a u256 equal v. */
static bool lo64_eq(const chain_u256 *x, uint64_t v)
{
    uint64_t lo = 0;
    for (int i = 24; i < 32; i++)
        lo = lo << 8 | x->b[i];
    for (int i = 0; i < 24; i++)
        if (x->b[i])
            return false;
    return lo == v;
}

static void check_refusal(const fx_run *run, int who, const ovt_hash *root, uint64_t bond, const char *name)
{
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_challenge(&b, &run->run_id, root) == 0);
    chain_u256 value = chain_u256_from_u64(bond);
    FX_CHECK_REVERT(&env, who, &value, &b, name);
    chain_buf_free(&b);
}

static ovt_hash refuted_by(const ovt_hash *run_id)
{
    ovt_hash h;
    CHECK_MSG(chain_arb_refuted_by(&env.arb, run_id, NULL, &h) == 0, "refutedBy: %s", ovt_errmsg());
    return h;
}

static bool is_zero(const ovt_hash *h)
{
    static const ovt_hash zero;
    return !memcmp(h->b, zero.b, 32);
}

/* A run whose histories first differ at d, both committed with the
 * trainer's root (the auditor colludes, or agrees): Verified. */
static int verified_run(fx_run *run, uint64_t steps, uint64_t d)
{
    chain_arb_params p;
    fx_params(&env, &p, steps, 600, TB, AB);
    int rc = fx_open(&env, run, &p, NULL);
    if (rc == 0)
        rc = fx_histories(run, d);
    for (int who = FX_TRAINER; rc == 0 && who <= FX_AUDITOR; who++)
        rc = chain_arb_commit(&env.arb, &env.txm[who], &run->run_id, chain_merkle_root(run->trainer.tree), NULL, NULL,
                              NULL);
    CHECK(rc == 0 && fx_game(&env, run).outcome == CHAIN_ARB_VERIFIED);
    return rc;
}

static void test_colluding_auditor(void)
{
    fx_run run, c;
    /* the trainer's history is the lie (the fixture's "auditor" history is
     * the honest one here); the named auditor commits the trainer's root */
    CHECK(verified_run(&run, 1000, 377) == 0);
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(is_zero(&by)); /* Verified: nothing shows the root wrong yet */
    uint64_t gas = 0, t0 = fx_credit(&env, FX_TRAINER), o0 = fx_credit(&env, FX_OUTSIDER);
    CHECK(fx_challenge(&env, &c, &run, FX_OUTSIDER, &run.auditor, &gas) == 0);
    printf("gas: challenge (opens its game) %llu\n", (unsigned long long)gas);
    CHECK(lo64_eq(&c.params.trainer_bond, 0) && lo64_eq(&c.params.auditor_bond, AB));
    CHECK(chain_address_eq(&c.params.auditor, &env.addr[FX_OUTSIDER]));
    chain_arb_game g = fx_game(&env, &c);
    CHECK(g.phase == CHAIN_ARB_PHASE_BISECTING && g.round == 0);
    CHECK(fx_play(&env, &c, NULL, NULL) == 0);
    g = fx_game(&env, &c);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == 377, "phase %s, step %llu",
              chain_arb_phase_name(g.phase), (unsigned long long)g.index);
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &c.run_id, g.index, CHAIN_ARB_AUDITOR_RIGHT,
                            &g.auditor_node, NULL) == 0);
    g = fx_game(&env, &c);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_AUDITOR_RIGHT);
    CHECK_EQ_U64(fx_credit(&env, FX_OUTSIDER) - o0, AB); /* its bond back */
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, 0);
    by = refuted_by(&run.run_id);
    CHECK(!memcmp(by.b, c.run_id.b, 32));
    fx_run_free(&c);
    fx_run_free(&run);
}

static void test_lying_challengers(void)
{
    fx_run run, c[2];
    const int who[2] = {FX_OUTSIDER, FX_ARBITER5};
    /* an honest trainer and an auditor that agrees: the fixture's auditor
     * history is now the challengers' lie */
    CHECK(verified_run(&run, 64, 9) == 0);
    uint64_t t0 = fx_credit(&env, FX_TRAINER);
    for (int k = 0; k < 2; k++) {
        CHECK(fx_challenge(&env, &c[k], &run, who[k], &run.auditor, NULL) == 0);
    }
    /* in parallel: one round of each in turn */
    for (int guard = 0; guard < 50; guard++) {
        int busy = 0;
        for (int k = 0; k < 2; k++) {
            chain_arb_game g = fx_game(&env, &c[k]);
            if (g.phase != CHAIN_ARB_PHASE_BISECTING && g.phase != CHAIN_ARB_PHASE_REVEALING)
                continue;
            busy = 1;
            int moved;
            CHECK(fx_move(&env, &c[k], FX_TRAINER, &moved, NULL) == 0 && fx_move(&env, &c[k], who[k], &moved, NULL) == 0);
        }
        if (!busy)
            break;
    }
    for (int k = 0; k < 2; k++) {
        chain_arb_game g = fx_game(&env, &c[k]);
        CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == 9);
        CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &c[k].run_id, g.index, CHAIN_ARB_TRAINER_RIGHT,
                                &g.trainer_node, NULL) == 0);
        CHECK(fx_game(&env, &c[k]).outcome == CHAIN_ARB_TRAINER_RIGHT);
        fx_run_free(&c[k]);
    }
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, 2 * AB); /* both challengers' bonds, nothing of its own lost */
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(is_zero(&by));
    fx_run_free(&run);
}

/* The named auditor wins its dispute: the run is refuted by itself. */
static void test_auditor_refutes(void)
{
    fx_run run;
    chain_arb_params p;
    fx_params(&env, &p, 16, 600, TB, AB);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 5) == 0);
    CHECK(fx_commit_both(&env, &run, NULL) == 0 && fx_play(&env, &run, NULL, NULL) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, g.index, CHAIN_ARB_AUDITOR_RIGHT,
                            &g.auditor_node, NULL) == 0);
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(!memcmp(by.b, run.run_id.b, 32));
    fx_run_free(&run);
}

static void test_refusals(void)
{
    fx_run run;
    chain_arb_params p;
    fx_params(&env, &p, 8, 600, TB, AB);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 3) == 0);
    const ovt_hash *honest = chain_merkle_root(run.auditor.tree), *lie = chain_merkle_root(run.trainer.tree);
    check_refusal(&run, FX_OUTSIDER, honest, AB, "ChallengesClosed"); /* the trainer has not committed */
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run.run_id, lie, NULL, NULL, NULL) == 0);
    check_refusal(&run, FX_OUTSIDER, lie, AB, "NothingToDispute");
    check_refusal(&run, FX_OUTSIDER, &(ovt_hash){{0}}, AB, "ZeroRoot");
    check_refusal(&run, FX_TRAINER, honest, AB, "BadParty");
    check_refusal(&run, FX_AUDITOR, honest, AB, "BadParty");
    check_refusal(&run, FX_ARBITER, honest, AB, "BadParty");
    check_refusal(&run, FX_OUTSIDER, honest, AB - 1, "WrongBond");
    check_refusal(&run, FX_OUTSIDER, honest, AB, ""); /* while the auditor may still commit */
    fx_run c;
    CHECK(fx_challenge(&env, &c, &run, FX_OUTSIDER, &run.auditor, NULL) == 0);
    fx_run_free(&c);
    check_refusal(&run, FX_OUTSIDER, honest, AB, "RunExists");
    ovt_hash cid;
    challenge_id(&cid, &run.run_id, FX_OUTSIDER);
    c = (fx_run){.run_id = cid};
    check_refusal(&c, FX_OPENER, honest, AB, "ChallengesClosed"); /* a challenge of a challenge */
    CHECK(fx_warp(&env, 3601) == 0);
    check_refusal(&run, FX_OPENER, honest, AB, "ChallengesClosed"); /* the window has closed */
    fx_run_free(&run);
    /* no auditor bond: no challenges */
    fx_params(&env, &p, 8, 600, TB, 0);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 3) == 0);
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run.run_id, chain_merkle_root(run.trainer.tree), NULL,
                           NULL, NULL) == 0);
    check_refusal(&run, FX_OUTSIDER, chain_merkle_root(run.auditor.tree), 0, "ChallengesClosed");
    fx_run_free(&run);
}

/* The gas of a whole challenge over 2^20 steps: challenge() and both sides'
 * moves to the verdict. */
static void test_gas(void)
{
    fx_run run, c;
    CHECK(verified_run(&run, (uint64_t)1 << 20, 882590) == 0);
    uint64_t gas = 0, total = 0;
    CHECK(fx_challenge(&env, &c, &run, FX_OUTSIDER, &run.auditor, &gas) == 0);
    total += gas;
    for (int guard = 0; guard < 100; guard++) {
        chain_arb_game g = fx_game(&env, &c);
        if (g.phase != CHAIN_ARB_PHASE_BISECTING && g.phase != CHAIN_ARB_PHASE_REVEALING)
            break;
        int moved;
        uint64_t a = 0, b = 0;
        CHECK(fx_move(&env, &c, FX_TRAINER, &moved, &a) == 0 && fx_move(&env, &c, FX_OUTSIDER, &moved, &b) == 0);
        total += a + b;
    }
    chain_arb_game g = fx_game(&env, &c);
    chain_receipt r;
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &c.run_id, g.index, CHAIN_ARB_AUDITOR_RIGHT,
                            &g.auditor_node, &r) == 0);
    total += r.gas_used;
    printf("gas: verdict of a challenge (refutes the run) %llu\n", (unsigned long long)r.gas_used);
    chain_receipt_free(&r);
    printf("gas: whole challenge over 2^20 steps (challenge + 42 bisect moves + 2 reveals + verdict) %llu\n",
           (unsigned long long)total);
    fx_run_free(&c);
    fx_run_free(&run);
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    fx_seed(43);
    CHECK_RUN(test_refusals());
    CHECK_RUN(test_colluding_auditor());
    CHECK_RUN(test_lying_challengers());
    CHECK_RUN(test_auditor_refutes());
    CHECK_RUN(test_gas());
    fx_stop(&env);
    return check_done();
}
