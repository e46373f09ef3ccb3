/* What the contract refuses, and every deadline, against a real anvil.
 * Refusals are read back by the custom error's name with eth_call from the
 * account in question (and one stale move is mined to show it reverts on
 * chain): bad run parameters; a commitment signed by someone other than the
 * party, a wrong bond, a second commit; a wrong child pair, a move by a
 * non-party, a second move in a round, an early and a stale round; a wrong
 * leaf preimage, a bad proof; a verdict by a non-arbiter, for another step,
 * with a non-verdict outcome or contradicting the leaves; anything after
 * settlement; a withdrawal of someone else's bond. Deadlines with
 * evm_increaseTime + evm_mine: trainer late, auditor late, both late,
 * arbiter late, and the two commit timeouts. A move carried into a chain
 * reorganised with anvil_reorg reverts (WrongRound) and the game goes on.
 * Bonds are checked after each outcome, and a withdrawal moves exactly the
 * credit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/clock.h"
#include "chain/keccak.h"
#include "check.h"
#include "fixture.h"
#include "util.h"

static fx_env env;

#define CHECK_REVERT(who, value, buf, name) FX_CHECK_REVERT(&env, (who), (value), (buf), (name))

static chain_arb_game game(const fx_run *run)
{
    return fx_game(&env, run);
}

/* A run of `steps` steps opened and committed (histories first differ at d). */
static int disputed_run(fx_run *run, uint64_t steps, uint64_t d, uint32_t move_timeout)
{
    chain_arb_params p;
    fx_params(&env, &p, steps, move_timeout, 1000, 2000);
    int rc = fx_open(&env, run, &p, NULL);
    if (rc == 0)
        rc = fx_histories(run, d);
    if (rc == 0)
        rc = fx_commit_both(&env, run, NULL);
    if (rc != 0)
        fprintf(stderr, "disputed_run: %s\n", ovt_errmsg());
    return rc;
}

/* Moves both parties until the game leaves phase `phase`. */
static int play_through(fx_run *run, chain_arb_phase phase)
{
    while (game(run).phase == phase) {
        int moved;
        int rc = fx_move(&env, run, FX_TRAINER, &moved, NULL);
        if (rc == 0)
            rc = fx_move(&env, run, FX_AUDITOR, &moved, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Signs calldata to the contract from account `who` with the next nonce and
 * a fixed gas limit, skipping the eth_call check (raw: the signed bytes). */
static int sign_raw(chain_buf *raw, ovt_hash *txh, int who, const chain_buf *calldata)
{
    chain_buf_init(raw);
    uint64_t nonce = 0;
    int rc = chain_rpc_nonce(env.rpc, &nonce, &env.addr[who], "pending");
    if (rc != 0)
        return rc;
    chain_tx tx = {.type = CHAIN_TX_EIP1559, .chain_id = env.arb.chain_id, .nonce = nonce,
                   .max_priority_fee_per_gas = 1000000000, .max_fee_per_gas = 20000000000ULL, .gas_limit = 300000,
                   .has_to = 1, .to = env.arb.address, .data = calldata->data, .data_len = calldata->len};
    return chain_tx_sign(raw, txh, &tx, &env.key[who]);
}

/* Sends raw (unless already sent) and returns the mined status (0 or 1), or -1. */
static int mined_status_of(const ovt_hash *txh)
{
    for (int tries = 0; tries < 400; tries++) {
        chain_receipt rec;
        int found = 0;
        if (chain_rpc_receipt(env.rpc, &rec, &found, txh) != 0)
            return -1;
        if (found) {
            int status = rec.status;
            chain_receipt_free(&rec);
            return status;
        }
        chain_sleep_ms(5);
    }
    return -1;
}

static int mined_status(const chain_buf *raw, const ovt_hash *txh)
{
    ovt_hash sent;
    if (chain_rpc_send_raw(env.rpc, &sent, raw->data, raw->len) != 0)
        return -1;
    return mined_status_of(txh);
}

static void test_open_rejections(void)
{
    chain_arb_params p;
    chain_buf b;
    fx_params(&env, &p, 8, 600, 1, 1);
    p.auditor = p.trainer;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_open(&b, &p) == 0);
    CHECK_REVERT(FX_OPENER, NULL, &b, "BadParty");
    chain_buf_free(&b);

    fx_params(&env, &p, 0, 600, 1, 1);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_open(&b, &p) == 0);
    CHECK_REVERT(FX_OPENER, NULL, &b, "BadSteps");
    chain_buf_free(&b);

    fx_params(&env, &p, 8, 0, 1, 1);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_open(&b, &p) == 0);
    CHECK_REVERT(FX_OPENER, NULL, &b, "BadTimeout");
    chain_buf_free(&b);

    ovt_hash unknown;
    tc_rnd_hash(&unknown);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_get_game(&b, &unknown) == 0);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "UnknownRun");
    chain_buf_free(&b);
}

static void commit_call(chain_buf *b, const fx_run *run, const ovt_hash *root, int signer)
{
    uint8_t sig[65];
    chain_buf_init(b);
    if (chain_arb_sign_commitment(sig, &env.key[signer], env.arb.chain_id, &env.arb.address, &run->run_id, root,
                                  &run->params) != 0 ||
        chain_arb_encode_commit(b, &run->run_id, root, sig) != 0)
        fprintf(stderr, "commit_call: %s\n", ovt_errmsg());
}

/* Commit refusals, then the full game on the same run with every move
 * refusal tried at its moment, ending in a FraudulentLog verdict. */
static void test_game_rejections(void)
{
    chain_arb_params p;
    fx_params(&env, &p, 7, 600, 1000, 2000);
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    uint64_t d = 5;
    CHECK(fx_histories(&run, d) == 0);
    const ovt_hash *troot = chain_merkle_root(run.trainer.tree), *aroot = chain_merkle_root(run.auditor.tree);
    chain_u256 tbond = chain_u256_from_u64(1000), abond = chain_u256_from_u64(2000), wrong = chain_u256_from_u64(999);
    chain_buf b;

    /* --- commit */
    commit_call(&b, &run, troot, FX_OUTSIDER);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotParty");
    chain_buf_free(&b);
    commit_call(&b, &run, aroot, FX_TRAINER); /* the trainer's signature sent by the auditor */
    CHECK_REVERT(FX_AUDITOR, &abond, &b, "BadSignature");
    chain_buf_free(&b);
    commit_call(&b, &run, aroot, FX_OUTSIDER);
    CHECK_REVERT(FX_AUDITOR, &abond, &b, "BadSignature");
    chain_buf_free(&b);
    commit_call(&b, &run, troot, FX_TRAINER);
    b.data[4 + 32 + 5] ^= 1; /* the root no longer matches the signed one */
    CHECK_REVERT(FX_TRAINER, &tbond, &b, "BadSignature");
    chain_buf_free(&b);
    commit_call(&b, &run, troot, FX_TRAINER);
    CHECK_REVERT(FX_TRAINER, &wrong, &b, "WrongBond");
    CHECK_REVERT(FX_TRAINER, &tbond, &b, ""); /* the same call with the right bond passes */
    chain_buf_free(&b);
    ovt_hash zero = {{0}};
    commit_call(&b, &run, &zero, FX_TRAINER);
    CHECK_REVERT(FX_TRAINER, &tbond, &b, "ZeroRoot");
    chain_buf_free(&b);

    uint8_t tsig[65];
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run.run_id, troot, NULL, tsig, NULL) == 0);
    /* the signature the trainer keeps for its receipt recovers to it */
    ovt_hash digest;
    chain_sig s;
    chain_address signer;
    chain_arb_commitment_digest(&digest, env.arb.chain_id, &env.arb.address, &run.run_id, troot, &p);
    CHECK(chain_sig_from_rsv(&s, tsig) == 0 && chain_recover_address(&signer, &s, &digest) == 0);
    CHECK(chain_address_eq(&signer, &env.addr[FX_TRAINER]));
    commit_call(&b, &run, troot, FX_TRAINER);
    CHECK_REVERT(FX_TRAINER, &tbond, &b, "AlreadyMoved");
    chain_buf_free(&b);
    /* a bisection move before the dispute exists */
    chain_buf_init(&b);
    CHECK(chain_arb_encode_bisect(&b, &run.run_id, 0, troot, troot) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "WrongPhase");
    chain_buf_free(&b);
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_AUDITOR], &run.run_id, aroot, NULL, NULL, NULL) == 0);
    chain_arb_game g = game(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_BISECTING && g.round == 0 && g.depth == 3);

    /* --- bisection, round 0 */
    ovt_hash l, r;
    CHECK(chain_merkle_children(run.trainer.tree, &l, &r, 0, 0) == 0);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_bisect(&b, &run.run_id, 0, &r, &l) == 0); /* swapped: a wrong pair */
    CHECK_REVERT(FX_TRAINER, NULL, &b, "BadChildren");
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_bisect(&b, &run.run_id, 0, &l, &r) == 0);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotParty");
    CHECK_REVERT(FX_ARBITER, NULL, &b, "NotParty");
    CHECK_REVERT(FX_AUDITOR, NULL, &b, "BadChildren"); /* the trainer's pair is not the auditor's */
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_bisect(&b, &run.run_id, 1, &l, &r) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "WrongRound"); /* early */
    chain_buf_free(&b);
    chain_buf stale;
    chain_buf_init(&stale);
    CHECK(chain_arb_encode_bisect(&stale, &run.run_id, 0, &l, &r) == 0);
    CHECK(chain_arb_bisect(&env.arb, &env.txm[FX_TRAINER], &run.run_id, 0, &l, &r, NULL) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &stale, "AlreadyMoved");
    int moved;
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    g = game(&run);
    CHECK(g.round == 1 && g.flags == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &stale, "WrongRound");

    /* the same stale move mined anyway (as after a reorg): it reverts on chain */
    chain_buf raw;
    ovt_hash txh;
    CHECK(sign_raw(&raw, &txh, FX_TRAINER, &stale) == 0);
    CHECK(mined_status(&raw, &txh) == 0);
    chain_buf_free(&raw);
    chain_buf_free(&stale);
    CHECK(game(&run).round == 1);

    /* --- on to the reveal at step 5 */
    CHECK(play_through(&run, CHAIN_ARB_PHASE_BISECTING) == 0);
    g = game(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_REVEALING && g.index == d && g.round == 3);
    chain_merkle_preimage leaf = run.trainer.pre[d], prev = run.trainer.pre[d - 1];
    ovt_hash proof[3];
    CHECK(chain_merkle_proof(run.trainer.tree, proof, d - 1) == 0);
    chain_merkle_preimage bad = leaf;
    bad.log_hash.b[0] ^= 1;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, 3, &bad, &prev, proof, 3) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "BadLeaf");
    chain_buf_free(&b);
    proof[1].b[9] ^= 1;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, 3, &leaf, &prev, proof, 3) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "BadProof");
    chain_buf_free(&b);
    proof[1].b[9] ^= 1;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, 3, &leaf, &prev, proof, 2) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "BadProof"); /* too short */
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, 2, &leaf, &prev, proof, 3) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "WrongRound");
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "WrongRound");
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, 3, &leaf, &prev, proof, 3) == 0);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotParty");
    CHECK_REVERT(FX_TRAINER, NULL, &b, "");
    chain_buf_free(&b);
    CHECK(play_through(&run, CHAIN_ARB_PHASE_REVEALING) == 0);
    g = game(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && (g.flags & CHAIN_ARB_FLAG_PREVIOUS));
    CHECK_MEM(g.trainer_log.b, leaf.log_hash.b, 32);
    CHECK_MEM(g.trainer_batch.b, leaf.batch_hash.b, 32);

    /* --- verdict */
    const ovt_hash *tleaf = &run.trainer.leaves[d], *aleaf = &run.auditor.leaves[d];
    struct {
        int who;
        uint64_t step;
        unsigned outcome;
        const ovt_hash *evidence;
        const char *error;
    } cases[] = {
        {FX_OUTSIDER, d, CHAIN_ARB_TRAINER_RIGHT, tleaf, "NotArbiter"},
        {FX_TRAINER, d, CHAIN_ARB_TRAINER_RIGHT, tleaf, "NotArbiter"},
        {FX_ARBITER, d - 1, CHAIN_ARB_TRAINER_RIGHT, tleaf, "WrongStep"},
        {FX_ARBITER, d, CHAIN_ARB_TRAINER_RIGHT, aleaf, "VerdictContradictsLeaves"},
        {FX_ARBITER, d, CHAIN_ARB_AUDITOR_RIGHT, tleaf, "VerdictContradictsLeaves"},
        {FX_ARBITER, d, CHAIN_ARB_NEITHER, tleaf, "VerdictContradictsLeaves"},
        {FX_ARBITER, d, CHAIN_ARB_NEITHER, &zero, "VerdictContradictsLeaves"},
        {FX_ARBITER, d, CHAIN_ARB_FRAUDULENT_LOG, &leaf.batch_hash, "VerdictContradictsLeaves"},
        {FX_ARBITER, d, CHAIN_ARB_INPUTS_UNAVAILABLE, tleaf, "VerdictContradictsLeaves"},
        {FX_ARBITER, d, CHAIN_ARB_TRAINER_TIMED_OUT, tleaf, "BadOutcome"},
        {FX_ARBITER, d, CHAIN_ARB_VERIFIED, tleaf, "BadOutcome"},
        /* outside the enum: the contract's own error, not the ABI decoder's
         * revert with empty data */
        {FX_ARBITER, d, 13, tleaf, "BadOutcome"},
        {FX_ARBITER, d, 255, tleaf, "BadOutcome"},
        {FX_ARBITER, d, CHAIN_ARB_TRAINER_RIGHT, tleaf, ""},
        {FX_ARBITER, d, CHAIN_ARB_AUDITOR_RIGHT, aleaf, ""},
        {FX_ARBITER, d, CHAIN_ARB_INPUTS_UNAVAILABLE, &prev.state_hash, ""},
        {FX_ARBITER, d, CHAIN_ARB_INPUTS_UNAVAILABLE, &p.dataset_hash, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chain_buf_init(&b);
        CHECK(chain_arb_encode_verdict(&b, &run.run_id, cases[i].step, (chain_arb_outcome)cases[i].outcome,
                                       cases[i].evidence) == 0);
        const char *got = fx_revert_name(&env, cases[i].who, NULL, &b);
        CHECK_MSG(strcmp(got, cases[i].error) == 0, "verdict case %zu: expected '%s', got '%s'", i,
                  cases[i].error, got);
        chain_buf_free(&b);
    }
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, d, CHAIN_ARB_FRAUDULENT_LOG,
                            &leaf.log_hash, NULL) == 0);
    g = game(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_FRAUDULENT_LOG);
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, 0);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, 3000);

    /* --- after settlement: one verdict, final */
    chain_buf_init(&b);
    CHECK(chain_arb_encode_verdict(&b, &run.run_id, d, CHAIN_ARB_TRAINER_RIGHT, tleaf) == 0);
    CHECK_REVERT(FX_ARBITER, NULL, &b, "WrongPhase");
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_timeout(&b, &run.run_id) == 0);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotExpired");
    chain_buf_free(&b);
    fx_run_free(&run);
}

/* Withdrawals move exactly the credit, once, and only to its owner. */
static void test_withdraw(void)
{
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_withdraw(&b) == 0);
    CHECK(fx_credit(&env, FX_OUTSIDER) == 0);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NothingToWithdraw");
    CHECK_REVERT(FX_ARBITER, NULL, &b, "NothingToWithdraw");
    /* the trainer lost its bond to the auditor (FraudulentLog): it cannot take it back */
    CHECK(fx_credit(&env, FX_TRAINER) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "NothingToWithdraw");
    uint64_t credit = fx_credit(&env, FX_AUDITOR);
    CHECK(credit > 0);
    chain_u256 before, after;
    CHECK(chain_rpc_balance(env.rpc, &before, &env.addr[FX_AUDITOR], NULL) == 0);
    chain_receipt r;
    CHECK(chain_arb_withdraw(&env.arb, &env.txm[FX_AUDITOR], &r) == 0);
    CHECK(chain_rpc_balance(env.rpc, &after, &env.addr[FX_AUDITOR], NULL) == 0);
    /* after = before + credit - gas * price, on the low 64 bits (balances are ~1e22 wei) */
    uint64_t lo_b = 0, lo_a = 0;
    for (int i = 24; i < 32; i++) {
        lo_b = lo_b << 8 | before.b[i];
        lo_a = lo_a << 8 | after.b[i];
    }
    CHECK_EQ_U64(lo_a, lo_b + credit - r.gas_used * r.effective_gas_price);
    chain_arb_event *ev;
    size_t n;
    CHECK(chain_arb_receipt_events(&env.arb, &r, &ev, &n) == 0);
    uint64_t amount = 0;
    CHECK(n == 1 && ev[0].kind == CHAIN_ARB_EV_WITHDRAWN && chain_address_eq(&ev[0].u.withdrawn.account,
                                                                              &env.addr[FX_AUDITOR]) &&
          chain_u256_to_u64(&amount, &ev[0].u.withdrawn.amount) == 0 && amount == credit);
    free(ev);
    chain_receipt_free(&r);
    CHECK(fx_credit(&env, FX_AUDITOR) == 0);
    CHECK_REVERT(FX_AUDITOR, NULL, &b, "NothingToWithdraw");
    chain_buf_free(&b);
}

/* Verdicts of the other kinds, each on its own run. */
static void test_verdict_kinds(void)
{
    struct {
        uint64_t steps, d;
        chain_arb_outcome outcome;
        int evidence; /* 0 trainer leaf, 1 auditor leaf, 2 random, 3 previous state, 4 trainer batch, 5 dataset */
        uint64_t to_trainer, to_auditor;
    } cases[] = {
        {3, 2, CHAIN_ARB_NEITHER, 2, 1000, 2000},
        {3, 3, CHAIN_ARB_INPUTS_UNAVAILABLE, 4, 0, 3000},
        {8, 0, CHAIN_ARB_INPUTS_UNAVAILABLE, 5, 0, 3000},
        {8, 0, CHAIN_ARB_TRAINER_RIGHT, 0, 3000, 0},
        {1, 1, CHAIN_ARB_INPUTS_UNAVAILABLE, 3, 0, 3000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx_run run;
        if (disputed_run(&run, cases[i].steps, cases[i].d, 600) != 0 ||
            play_through(&run, CHAIN_ARB_PHASE_BISECTING) != 0 || play_through(&run, CHAIN_ARB_PHASE_REVEALING) != 0) {
            CHECK_MSG(0, "case %zu: %s", i, ovt_errmsg());
            continue;
        }
        uint64_t d = cases[i].d;
        ovt_hash random, *evidence = NULL;
        tc_rnd_hash(&random);
        switch (cases[i].evidence) {
        case 0: evidence = &run.trainer.leaves[d]; break;
        case 1: evidence = &run.auditor.leaves[d]; break;
        case 2: evidence = &random; break;
        case 3: evidence = &run.trainer.pre[d - 1].state_hash; break;
        case 4: evidence = &run.trainer.pre[d].batch_hash; break;
        default: evidence = &run.params.dataset_hash; break;
        }
        uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
        int rc = chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, d, cases[i].outcome, evidence,
                                   NULL);
        CHECK_MSG(rc == 0, "case %zu: %s", i, ovt_errmsg());
        chain_arb_game g = game(&run);
        CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == cases[i].outcome);
        CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, cases[i].to_trainer);
        CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, cases[i].to_auditor);
        fx_run_free(&run);
    }
}

/* A trainer whose leaf 0 carries a batch hash cannot reveal it (step 0 has
 * no batch), and loses when its reveal deadline passes. */
static void test_step_zero_rules(void)
{
    chain_arb_params p;
    fx_params(&env, &p, 4, 100, 1000, 2000);
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    CHECK(fx_histories(&run, 5) == 0);
    tc_rnd_hash(&run.trainer.pre[0].batch_hash);
    chain_merkle_leaf_hash(&run.trainer.leaves[0], &run.run_id, 0, &run.trainer.pre[0]);
    CHECK(fx_build_tree(&run.trainer, 5) == 0);
    CHECK(fx_commit_both(&env, &run, NULL) == 0);
    CHECK(play_through(&run, CHAIN_ARB_PHASE_BISECTING) == 0);
    chain_arb_game g = game(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_REVEALING && g.index == 0);
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, g.round, &run.trainer.pre[0], NULL, NULL, 0) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "BadStepZero");
    chain_buf_free(&b);
    int moved;
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(fx_warp(&env, 101) == 0);
    CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    g = game(&run);
    CHECK(g.outcome == CHAIN_ARB_TRAINER_TIMED_OUT);
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, 0);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, 3000);
    fx_run_free(&run);
}

/* --- deadlines */

static void expect_timeout(fx_run *run, chain_arb_outcome want, uint64_t to_trainer, uint64_t to_auditor)
{
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_timeout(&b, &run->run_id) == 0);
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    chain_receipt r;
    int rc = chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run->run_id, &r);
    CHECK_MSG(rc == 0, "timeout: %s", ovt_errmsg());
    chain_arb_game g = game(run);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == want, "outcome %s, expected %s",
              chain_arb_outcome_name(g.outcome), chain_arb_outcome_name(want));
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, to_trainer);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, to_auditor);
    if (rc == 0) {
        chain_arb_event *ev;
        size_t n;
        CHECK(chain_arb_receipt_events(&env.arb, &r, &ev, &n) == 0);
        /* a trainer that timed out in the game has its root refuted (issue 43) */
        size_t refuted = want == CHAIN_ARB_TRAINER_TIMED_OUT;
        CHECK(n == 2 + refuted && ev[0].kind == CHAIN_ARB_EV_TIMED_OUT && ev[n - 1].kind == CHAIN_ARB_EV_SETTLED &&
              ev[n - 1].u.settled.outcome == want);
        if (refuted && n == 3)
            CHECK(ev[1].kind == CHAIN_ARB_EV_REFUTED && !memcmp(ev[1].u.refuted.game_id.b, run->run_id.b, 32) &&
                  ev[1].u.refuted.outcome == want);
        free(ev);
        chain_receipt_free(&r);
    }
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotExpired"); /* once */
    chain_buf_free(&b);
}

static void test_deadlines(void)
{
    fx_run run;
    chain_buf b;
    int moved;

    /* trainer late in a bisection round */
    CHECK(disputed_run(&run, 1000, 600, 100) == 0);
    CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0);
    CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved); /* round 1: only the auditor */
    chain_buf_init(&b);
    CHECK(chain_arb_encode_timeout(&b, &run.run_id) == 0);
    CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotExpired");
    chain_buf_free(&b);
    CHECK(fx_warp(&env, 101) == 0);
    chain_arb_game g = game(&run);
    ovt_hash l, r;
    CHECK(chain_merkle_children(run.trainer.tree, &l, &r, g.round, g.index) == 0);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_bisect(&b, &run.run_id, g.round, &l, &r) == 0);
    CHECK_REVERT(FX_TRAINER, NULL, &b, "DeadlinePassed");
    chain_buf_free(&b);
    expect_timeout(&run, CHAIN_ARB_TRAINER_TIMED_OUT, 0, 3000);
    fx_run_free(&run);

    /* auditor late with its leaf */
    CHECK(disputed_run(&run, 7, 4, 100) == 0);
    CHECK(play_through(&run, CHAIN_ARB_PHASE_BISECTING) == 0);
    CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && moved);
    CHECK(fx_warp(&env, 101) == 0);
    expect_timeout(&run, CHAIN_ARB_AUDITOR_TIMED_OUT, 3000, 0);
    fx_run_free(&run);

    /* neither moves: both refunded */
    CHECK(disputed_run(&run, 8, 8, 100) == 0);
    CHECK(fx_warp(&env, 101) == 0);
    expect_timeout(&run, CHAIN_ARB_BOTH_TIMED_OUT, 1000, 2000);
    fx_run_free(&run);

    /* arbiter late: both refunded, and its late verdict is refused */
    CHECK(disputed_run(&run, 3, 1, 100) == 0);
    CHECK(play_through(&run, CHAIN_ARB_PHASE_BISECTING) == 0 && play_through(&run, CHAIN_ARB_PHASE_REVEALING) == 0);
    CHECK(game(&run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT);
    CHECK(fx_warp(&env, 7201) == 0);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_verdict(&b, &run.run_id, 1, CHAIN_ARB_TRAINER_RIGHT, &run.trainer.leaves[1]) == 0);
    CHECK_REVERT(FX_ARBITER, NULL, &b, "DeadlinePassed");
    chain_buf_free(&b);
    expect_timeout(&run, CHAIN_ARB_ARBITER_TIMED_OUT, 1000, 2000);
    fx_run_free(&run);

    /* commit timeouts: the auditor never commits, then the trainer never does */
    for (int who = FX_TRAINER; who <= FX_AUDITOR; who++) {
        chain_arb_params p;
        fx_params(&env, &p, 2, 100, 1000, 2000);
        CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 3) == 0);
        fx_history *h = who == FX_TRAINER ? &run.trainer : &run.auditor;
        chain_buf_init(&b);
        CHECK(chain_arb_encode_timeout(&b, &run.run_id) == 0);
        CHECK_REVERT(FX_OUTSIDER, NULL, &b, "NotExpired"); /* no deadline before the first commit */
        chain_buf_free(&b);
        CHECK(chain_arb_commit(&env.arb, &env.txm[who], &run.run_id, chain_merkle_root(h->tree), NULL, NULL,
                               NULL) == 0);
        CHECK(fx_warp(&env, 3601) == 0);
        int other = who == FX_TRAINER ? FX_AUDITOR : FX_TRAINER;
        fx_history *oh = other == FX_TRAINER ? &run.trainer : &run.auditor;
        commit_call(&b, &run, chain_merkle_root(oh->tree), other);
        chain_u256 bond = chain_u256_from_u64(other == FX_TRAINER ? 1000 : 2000);
        CHECK_REVERT(other, &bond, &b, "DeadlinePassed");
        chain_buf_free(&b);
        if (who == FX_TRAINER)
            expect_timeout(&run, CHAIN_ARB_UNCHALLENGED, 1000, 0);
        else
            expect_timeout(&run, CHAIN_ARB_TRAINER_ABSENT, 0, 2000);
        fx_run_free(&run);
    }
}

/* A move carried into a reorganised chain names a round the game is no
 * longer in, and reverts there instead of being applied to the wrong round;
 * the game then goes on to the right step. */
static void test_reorg(void)
{
    fx_run run;
    int moved;
    CHECK(disputed_run(&run, 1000, 777, 600) == 0);
    for (int k = 0; k < 2; k++) {
        CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && moved);
        CHECK(fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0 && moved);
    }
    chain_arb_game g = game(&run);
    CHECK(g.round == 2);
    ovt_hash l, r;
    CHECK(chain_merkle_children(run.trainer.tree, &l, &r, g.round, g.index) == 0);
    chain_buf move, raw;
    chain_buf_init(&move);
    CHECK(chain_arb_encode_bisect(&move, &run.run_id, g.round, &l, &r) == 0);
    ovt_hash txh;
    CHECK(sign_raw(&raw, &txh, FX_TRAINER, &move) == 0);
    CHECK(mined_status(&raw, &txh) == 1);
    CHECK(game(&run).flags == CHAIN_ARB_FLAG_TRAINER);

    /* drop the last two blocks (the auditor's round-1 move and this one) and
     * mine the trainer's round-2 move again in the new first block */
    char *hex = malloc(2 * raw.len + 3);
    tc_hex0x(hex, raw.data, raw.len);
    CHECK(fx_raw(&env, "anvil_reorg", json_pack("[i,[[s,i]]]", 2, hex, 0)) == 0);
    free(hex);
    g = game(&run);
    CHECK_MSG(g.round == 1 && g.flags == CHAIN_ARB_FLAG_TRAINER, "after the reorg: round %u flags %u", g.round,
              g.flags);
    CHECK_EQ_U64(mined_status_of(&txh), 0);
    CHECK_REVERT(FX_TRAINER, NULL, &move, "WrongRound");
    chain_buf_free(&raw);
    chain_buf_free(&move);

    /* the managers' nonces went back with the chain */
    for (int who = FX_TRAINER; who <= FX_AUDITOR; who++)
        CHECK(chain_rpc_nonce(env.rpc, &env.txm[who].next_nonce, &env.addr[who], "pending") == 0);
    CHECK(play_through(&run, CHAIN_ARB_PHASE_BISECTING) == 0);
    g = game(&run);
    CHECK(g.phase == CHAIN_ARB_PHASE_REVEALING && g.index == 777);
    fx_run_free(&run);
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    CHECK_RUN(test_open_rejections());
    CHECK_RUN(test_game_rejections());
    CHECK_RUN(test_withdraw());
    CHECK_RUN(test_verdict_kinds());
    CHECK_RUN(test_step_zero_rules());
    CHECK_RUN(test_deadlines());
    CHECK_RUN(test_reorg());
    fx_stop(&env);
    return check_done();
}
