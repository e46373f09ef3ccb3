/* The bisection game against a real anvil, both parties driven by the C
 * Merkle helper: equal roots settle as verified; for random histories of N
 * steps (N in 1, 2, 3, 7, 8, 1000, 65541) whose first difference is at 0,
 * at N and at a random step, the game ends on exactly that step (known here
 * from where the histories were made to differ, not from the contract);
 * forged padding leaves are decided on chain; the contract's own leafHash,
 * nodeHash, computeRunId and commitmentDigest equal the C ones; the gas of
 * every call of a full dispute over 2^20 steps is measured from receipts
 * and must stay under 3,000,000 in all; every round played as a race (each
 * party's call priced while it would be first, mined second) succeeds with
 * the bindings' CHAIN_ARB_RACE_GAS and would not with the margin alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "util.h"

static fx_env env;

/* eth_call of a view returning one word. */
static int call_word(const chain_buf *calldata, uint8_t out[32])
{
    chain_buf ret;
    chain_buf_init(&ret);
    chain_call_msg msg = {.to = &env.arb.address, .data = calldata->data, .data_len = calldata->len};
    int rc = chain_rpc_eth_call(env.rpc, &ret, &msg, NULL);
    if (rc == 0)
        rc = chain_arb_decode_word(out, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

static void test_views_match_c(void)
{
    ovt_hash run_id, l, r, mine;
    uint8_t theirs[32];
    chain_merkle_preimage pre;
    tc_rnd_hash(&run_id);
    tc_rnd_hash(&l);
    tc_rnd_hash(&r);
    tc_rnd_hash(&pre.state_hash);
    tc_rnd_hash(&pre.batch_hash);
    tc_rnd_hash(&pre.log_hash);
    chain_buf data;

    chain_buf_init(&data);
    CHECK(chain_arb_encode_leaf_hash(&data, &run_id, 65541, &pre) == 0);
    CHECK(call_word(&data, theirs) == 0);
    chain_merkle_leaf_hash(&mine, &run_id, 65541, &pre);
    CHECK_MEM(mine.b, theirs, 32);
    chain_buf_free(&data);

    chain_buf_init(&data);
    CHECK(chain_arb_encode_node_hash(&data, &l, &r) == 0);
    CHECK(call_word(&data, theirs) == 0);
    chain_merkle_node_hash(&mine, &l, &r);
    CHECK_MEM(mine.b, theirs, 32);
    chain_buf_free(&data);

    chain_arb_params p;
    fx_params(&env, &p, 12345, 600, 7, 9);
    chain_buf_init(&data);
    CHECK(chain_arb_encode_compute_run_id(&data, &p) == 0);
    CHECK(call_word(&data, theirs) == 0);
    chain_arb_run_id(&mine, env.arb.chain_id, &env.arb.address, &p);
    CHECK_MEM(mine.b, theirs, 32);
    chain_buf_free(&data);

    /* commitmentDigest needs an open run */
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    CHECK_MEM(run.run_id.b, mine.b, 32);
    chain_buf_init(&data);
    CHECK(chain_arb_encode_commitment_digest(&data, &run.run_id, &l) == 0);
    CHECK(call_word(&data, theirs) == 0);
    chain_arb_commitment_digest(&mine, env.arb.chain_id, &env.arb.address, &run.run_id, &l, &p);
    CHECK_MEM(mine.b, theirs, 32);
    chain_buf_free(&data);

    /* getRun reads back what open was given */
    chain_arb_params back;
    CHECK(chain_arb_get_run(&env.arb, &run.run_id, NULL, &back) == 0);
    back.nonce = p.nonce;
    CHECK(back.threshold == 1); /* a majority of one, filled in by the encoder */
    p.threshold = 1;
    CHECK(memcmp(&back, &p, sizeof p) == 0);
    /* opening the same params again is refused */
    chain_buf_init(&data);
    CHECK(chain_arb_encode_open(&data, &p) == 0);
    CHECK(strcmp(fx_revert_name(&env, FX_OPENER, NULL, &data), "RunExists") == 0);
    chain_buf_free(&data);
}

static void test_verified(void)
{
    chain_arb_params p;
    fx_params(&env, &p, 7, 600, 1000, 2000);
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    CHECK(fx_histories(&run, p.steps + 1) == 0); /* identical */
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(fx_commit_both(&env, &run, NULL) == 0);
    chain_arb_game g;
    CHECK(chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_VERIFIED);
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, 1000);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, 2000);
    chain_arb_event *ev;
    size_t n;
    uint64_t head = 0;
    CHECK(chain_rpc_block_number(env.rpc, &head) == 0);
    CHECK(chain_arb_get_events(&env.arb, &run.run_id, 0, head, &ev, &n) == 0);
    CHECK_EQ_U64(n, 4);
    if (n == 4) {
        CHECK(ev[0].kind == CHAIN_ARB_EV_RUN_OPENED && ev[1].kind == CHAIN_ARB_EV_COMMITTED &&
              ev[2].kind == CHAIN_ARB_EV_COMMITTED && ev[3].kind == CHAIN_ARB_EV_SETTLED);
        CHECK(ev[3].u.settled.outcome == CHAIN_ARB_VERIFIED);
        CHECK(ev[0].u.run_opened.steps == 7 && ev[0].u.run_opened.depth == 3);
    }
    free(ev);
    fx_run_free(&run);
}

/* Plays one dispute whose histories first differ at d; the side whose leaf
 * the arbiter recomputes is chosen at random. */
static void play_dispute(uint64_t steps, uint64_t d)
{
    chain_arb_params p;
    fx_params(&env, &p, steps, 600, 1000 + steps, 3000);
    fx_run run;
    int ok = fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, d) == 0;
    CHECK_MSG(ok, "N=%llu: %s", (unsigned long long)steps, ovt_errmsg());
    if (!ok)
        return;
    unsigned depth = chain_merkle_depth(steps);
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    int rc = fx_commit_both(&env, &run, NULL);
    if (rc == 0)
        rc = fx_play(&env, &run, NULL, NULL);
    CHECK_MSG(rc == 0, "N=%llu d=%llu: %s", (unsigned long long)steps, (unsigned long long)d, ovt_errmsg());
    chain_arb_game g;
    CHECK(chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == d,
              "N=%llu: expected step %llu, game in phase %s at index %llu", (unsigned long long)steps,
              (unsigned long long)d, chain_arb_phase_name(g.phase), (unsigned long long)g.index);
    CHECK(g.depth == depth);
    CHECK_MEM(g.trainer_node.b, run.trainer.leaves[d].b, 32);
    CHECK_MEM(g.auditor_node.b, run.auditor.leaves[d].b, 32);
    if (d > 0)
        CHECK_MEM(g.previous_state.b, run.trainer.pre[d - 1].state_hash.b, 32);

    int trainer_right = (int)(tc_rnd() & 1);
    const ovt_hash *evidence = trainer_right ? &run.trainer.leaves[d] : &run.auditor.leaves[d];
    rc = chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, d,
                           trainer_right ? CHAIN_ARB_TRAINER_RIGHT : CHAIN_ARB_AUDITOR_RIGHT, evidence, NULL);
    CHECK_MSG(rc == 0, "verdict: %s", ovt_errmsg());
    uint64_t pot = 1000 + steps + 3000;
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, trainer_right ? pot : 0);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, trainer_right ? 0 : pot);

    /* the events tell the same story */
    chain_arb_event *ev;
    size_t n;
    uint64_t head = 0;
    CHECK(chain_rpc_block_number(env.rpc, &head) == 0);
    CHECK(chain_arb_get_events(&env.arb, &run.run_id, 0, head, &ev, &n) == 0);
    size_t children = 0, descended = 0, fixed = 0, leaves = 0, previous = 0, settled = 0;
    for (size_t i = 0; i < n; i++) {
        switch (ev[i].kind) {
        case CHAIN_ARB_EV_CHILDREN_REVEALED: children++; break;
        case CHAIN_ARB_EV_DESCENDED: descended++; break;
        case CHAIN_ARB_EV_STEP_FIXED:
            fixed++;
            CHECK_EQ_U64(ev[i].u.step_fixed.step, d);
            break;
        case CHAIN_ARB_EV_LEAF_REVEALED: leaves++; break;
        case CHAIN_ARB_EV_PREVIOUS_LEAF_REVEALED:
            previous++;
            CHECK_EQ_U64(ev[i].u.previous_leaf_revealed.step, d - 1);
            break;
        case CHAIN_ARB_EV_SETTLED:
            settled++;
            CHECK(ev[i].u.settled.outcome == (trainer_right ? CHAIN_ARB_TRAINER_RIGHT : CHAIN_ARB_AUDITOR_RIGHT));
            break;
        default: break;
        }
    }
    CHECK_EQ_U64(children, 2 * depth);
    CHECK_EQ_U64(descended, depth - 1);
    CHECK(fixed == 1 && leaves == 2 && settled == 1 && previous == (d > 0));
    free(ev);
    fx_run_free(&run);
}

static void test_random_games(void)
{
    static const uint64_t sizes[] = {1, 2, 3, 7, 8, 1000, 65541};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t n = sizes[k];
        uint64_t positions[3] = {0, n, n > 1 ? 1 + tc_rnd() % (n - 1) : 1};
        for (int i = 0; i < 3; i++) {
            play_dispute(n, positions[i]);
            printf("N=%llu: dispute at step %llu fixed\n", (unsigned long long)n, (unsigned long long)positions[i]);
        }
    }
}

/* A party that puts a non-zero value in a padding leaf loses at once. */
static void padding_case(uint64_t steps, int trainer_forges, int auditor_forges, chain_arb_outcome want)
{
    chain_arb_params p;
    fx_params(&env, &p, steps, 600, 10, 20);
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    CHECK(fx_histories(&run, steps + 1) == 0);
    CHECK_MSG(chain_merkle_depth(steps + 1) == chain_merkle_depth(steps), "N+2 leaves must fit the same depth");
    if (trainer_forges) {
        tc_rnd_hash(&run.trainer.leaves[steps + 1]);
        CHECK(fx_build_tree(&run.trainer, steps + 2) == 0);
    }
    if (auditor_forges) {
        tc_rnd_hash(&run.auditor.leaves[steps + 1]);
        CHECK(fx_build_tree(&run.auditor, steps + 2) == 0);
    }
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    int rc = fx_commit_both(&env, &run, NULL);
    if (rc == 0)
        rc = fx_play(&env, &run, NULL, NULL);
    CHECK_MSG(rc == 0, "padding game: %s", ovt_errmsg());
    chain_arb_game g;
    CHECK(chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == want && g.index == steps + 1,
              "padding: phase %s outcome %s index %llu", chain_arb_phase_name(g.phase),
              chain_arb_outcome_name(g.outcome), (unsigned long long)g.index);
    uint64_t dt = fx_credit(&env, FX_TRAINER) - t0, da = fx_credit(&env, FX_AUDITOR) - a0;
    if (want == CHAIN_ARB_TRAINER_RIGHT)
        CHECK(dt == 30 && da == 0);
    else if (want == CHAIN_ARB_AUDITOR_RIGHT)
        CHECK(dt == 0 && da == 30);
    else
        CHECK(dt == 10 && da == 20);
    fx_run_free(&run);
}

static void test_padding(void)
{
    padding_case(1000, 1, 0, CHAIN_ARB_AUDITOR_RIGHT);
    padding_case(2, 0, 1, CHAIN_ARB_TRAINER_RIGHT);
    padding_case(5, 1, 1, CHAIN_ARB_NEITHER);
}

/* Gas of one full dispute over 2^20 steps. */
typedef struct {
    uint64_t bisect_first_max, bisect_second_max, bisect_first_sum, bisect_second_sum;
    unsigned nbisect;
    uint64_t reveal[2];
    uint64_t total;
} gas_table;

static void log_gas(void *ctx, const chain_arb_move *move, int first_in_round, uint64_t gas)
{
    gas_table *t = ctx;
    t->total += gas;
    if (move->kind == CHAIN_ARB_MOVE_REVEAL) {
        t->reveal[first_in_round ? 0 : 1] = gas;
        return;
    }
    if (first_in_round) {
        t->bisect_first_sum += gas;
        if (gas > t->bisect_first_max)
            t->bisect_first_max = gas;
        t->nbisect++;
    } else {
        t->bisect_second_sum += gas;
        if (gas > t->bisect_second_max)
            t->bisect_second_max = gas;
    }
}

static void test_gas_2p20(void)
{
    uint64_t steps = UINT64_C(1) << 20;
    chain_arb_params p;
    fx_params(&env, &p, steps, 3600, 1000000000000000000ULL, 1000000000000000000ULL);
    fx_run run;
    gas_table t;
    memset(&t, 0, sizeof t);
    uint64_t open_gas = 0, commit_gas[2] = {0, 0}, verdict_gas = 0;
    uint64_t d = 1 + tc_rnd() % steps;
    int rc = fx_open(&env, &run, &p, &open_gas);
    if (rc == 0)
        rc = fx_histories(&run, d);
    if (rc == 0)
        rc = fx_commit_both(&env, &run, commit_gas);
    if (rc == 0)
        rc = fx_play(&env, &run, log_gas, &t);
    chain_receipt r;
    if (rc == 0) {
        rc = chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, d, CHAIN_ARB_AUDITOR_RIGHT,
                               &run.auditor.leaves[d], &r);
        if (rc == 0) {
            verdict_gas = r.gas_used;
            chain_receipt_free(&r);
        }
    }
    CHECK_MSG(rc == 0, "2^20 dispute: %s", ovt_errmsg());
    uint64_t total = open_gas + commit_gas[0] + commit_gas[1] + t.total + verdict_gas;
    unsigned depth = chain_merkle_depth(steps);
    CHECK_EQ_U64(t.nbisect, depth);
    printf("gas, one dispute over N = 2^20 steps (depth %u, disputed step %llu):\n", depth, (unsigned long long)d);
    printf("  open                         %8llu\n", (unsigned long long)open_gas);
    printf("  commit (first)               %8llu\n", (unsigned long long)commit_gas[0]);
    printf("  commit (second, opens game)  %8llu\n", (unsigned long long)commit_gas[1]);
    printf("  bisect, first mover          %8llu avg  %8llu max\n",
           (unsigned long long)(t.bisect_first_sum / (t.nbisect ? t.nbisect : 1)),
           (unsigned long long)t.bisect_first_max);
    printf("  bisect, second mover         %8llu avg  %8llu max\n",
           (unsigned long long)(t.bisect_second_sum / (t.nbisect ? t.nbisect : 1)),
           (unsigned long long)t.bisect_second_max);
    printf("  revealLeaf (with proof)      %8llu\n", (unsigned long long)t.reveal[0]);
    printf("  revealLeaf (second)          %8llu\n", (unsigned long long)t.reveal[1]);
    printf("  verdict                      %8llu\n", (unsigned long long)verdict_gas);
    printf("  total                        %8llu\n", (unsigned long long)total);
    CHECK_MSG(total < 3000000, "a full dispute over 2^20 steps costs %llu gas", (unsigned long long)total);
    fx_run_free(&run);
}

/* --- races: a call priced while it would be the first of its round, mined
 * after the other party's call of the same round */

static void encode_move(chain_buf *out, const fx_run *run, const chain_arb_move *mv)
{
    chain_buf_init(out);
    int rc = mv->kind == CHAIN_ARB_MOVE_BISECT
                 ? chain_arb_encode_bisect(out, &run->run_id, mv->round, &mv->left, &mv->right)
                 : chain_arb_encode_reveal_leaf(out, &run->run_id, mv->round, &mv->leaf,
                                                mv->nproof ? &mv->previous : NULL, mv->proof, mv->nproof);
    CHECK(rc == 0);
}

static uint64_t estimate(int party, const chain_u256 *value, const chain_buf *data)
{
    chain_call_msg msg = {.from = &env.addr[party], .to = &env.arb.address, .value = value, .data = data->data,
                          .data_len = data->len};
    uint64_t gas = 0;
    CHECK_MSG(chain_rpc_estimate_gas(env.rpc, &gas, &msg) == 0, "estimate: %s", ovt_errmsg());
    return gas;
}

/* The gas limit the bindings give a call estimated at gas: the txm margin
 * (the same formula as chain_txm_prepare) plus CHAIN_ARB_RACE_GAS. */
static uint64_t bindings_limit(int party, uint64_t gas, int with_race)
{
    unsigned pct = env.txm[party].opts.gas_margin_pct;
    uint64_t margin = gas + gas / 100 * pct + (gas % 100) * pct / 100;
    return margin + (with_race ? CHAIN_ARB_RACE_GAS : 0);
}

/* Sends data from party with the gas limit it was given earlier (the race's
 * stale estimate); returns the gas used, 0 when it failed. */
static uint64_t send_stale(int party, const chain_u256 *value, const chain_buf *data, uint64_t limit)
{
    chain_txm_pending p;
    chain_receipt r;
    memset(&r, 0, sizeof r);
    int rc = chain_txm_prepare(&env.txm[party], &p, &env.arb.address, value, data->data, data->len);
    if (rc == 0) {
        p.tx.gas_limit = limit;
        rc = chain_txm_submit(&env.txm[party], &p);
        if (rc == 0)
            rc = chain_txm_wait(&env.txm[party], &p, &r);
        chain_txm_pending_free(&p);
    }
    uint64_t used = rc == 0 ? r.gas_used : 0;
    CHECK_MSG(rc == 0, "the second call of the race failed with gas limit %llu: %s", (unsigned long long)limit,
              ovt_errmsg());
    chain_receipt_free(&r);
    return used;
}

static void test_race_gas(void)
{
    chain_arb_params p;
    uint64_t steps = 1000, d = 1 + tc_rnd() % (steps - 1);
    fx_params(&env, &p, steps, 600, 1000, 3000);
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, d) == 0);
    /* Commits: the auditor's is priced before the trainer's lands. */
    const ovt_hash *roots[2] = {chain_merkle_root(run.trainer.tree), chain_merkle_root(run.auditor.tree)};
    chain_buf commit[2];
    chain_u256 bond[2] = {p.trainer_bond, p.auditor_bond};
    for (int k = 0; k < 2; k++) {
        uint8_t sig[65];
        int party = k == 0 ? FX_TRAINER : FX_AUDITOR;
        chain_buf_init(&commit[k]);
        CHECK(chain_arb_sign_commitment(sig, &env.key[party], env.arb.chain_id, &env.arb.address, &run.run_id,
                                        roots[k], &p) == 0);
        CHECK(chain_arb_encode_commit(&commit[k], &run.run_id, roots[k], sig) == 0);
    }
    uint64_t est = estimate(FX_AUDITOR, &bond[1], &commit[1]);
    uint64_t races = 0, beyond_margin = 0;
    CHECK(chain_arb_send(&env.arb, &env.txm[FX_TRAINER], &bond[0], &commit[0], NULL) == 0);
    uint64_t used = send_stale(FX_AUDITOR, &bond[1], &commit[1], bindings_limit(FX_AUDITOR, est, 1));
    races++;
    beyond_margin += used > bindings_limit(FX_AUDITOR, est, 0);
    chain_buf_free(&commit[0]);
    chain_buf_free(&commit[1]);
    /* Every round: both moves planned and the second priced before the
     * first is sent. */
    for (;;) {
        chain_arb_game g;
        CHECK(chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0);
        if (g.phase != CHAIN_ARB_PHASE_BISECTING && g.phase != CHAIN_ARB_PHASE_REVEALING)
            break;
        int first = (tc_rnd() & 1) ? FX_TRAINER : FX_AUDITOR, second = first == FX_TRAINER ? FX_AUDITOR : FX_TRAINER;
        chain_arb_move m1, m2;
        CHECK(fx_plan(&env, &run, first, &m1) == 0 && fx_plan(&env, &run, second, &m2) == 0);
        if (m1.kind == CHAIN_ARB_MOVE_NONE || m2.kind == CHAIN_ARB_MOVE_NONE)
            break;
        chain_buf b1, b2;
        encode_move(&b1, &run, &m1);
        encode_move(&b2, &run, &m2);
        est = estimate(second, NULL, &b2);
        CHECK(chain_arb_send(&env.arb, &env.txm[first], NULL, &b1, NULL) == 0);
        used = send_stale(second, NULL, &b2, bindings_limit(second, est, 1));
        races++;
        beyond_margin += used > bindings_limit(second, est, 0);
        chain_buf_free(&b1);
        chain_buf_free(&b2);
        if (!used)
            break;
    }
    chain_arb_game g;
    CHECK(chain_arb_get_game(&env.arb, &run.run_id, NULL, &g) == 0);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == d, "phase %s index %llu, want step %llu",
              chain_arb_phase_name(g.phase), (unsigned long long)g.index, (unsigned long long)d);
    /* depth 10: a commit race, 10 bisect races, a reveal race; and the margin
     * alone would have been short in at least one of them */
    CHECK_EQ_U64(races, 1 + chain_merkle_depth(steps) + 1);
    CHECK_MSG(beyond_margin > 0, "no race needed more than the 25%% margin (%llu races)", (unsigned long long)races);
    printf("races: %llu, %llu of them beyond the 25%% margin alone\n", (unsigned long long)races,
           (unsigned long long)beyond_margin);
    fx_run_free(&run);
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    CHECK_RUN(test_views_match_c());
    CHECK_RUN(test_verified());
    CHECK_RUN(test_padding());
    CHECK_RUN(test_random_games());
    CHECK_RUN(test_race_gas());
    CHECK_RUN(test_gas_2p20());
    fx_stop(&env);
    return check_done();
}
