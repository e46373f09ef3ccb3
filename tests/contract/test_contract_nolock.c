/* Nobody can lock another's money (issue 43), against a real anvil.
 *
 * The stranger's runs: four runs opened by someone other than their
 * parties, naming the arbiter with a 0.3 ETH arbiter bond and a trainer and
 * an auditor that never commit. The arbiter accepts all four (as a watcher
 * before this issue did); before the first commitment's window
 * (commitTimeout from open) has passed nothing can end them, after it any
 * account ends each one as Cancelled and the arbiter's 1.2 ETH comes back,
 * and a commit after the window is refused.
 *
 * The invariant: a random sequence of calls by every account (open with
 * random committees and bonds, accept, commit, challenges, bisect and reveal
 * from both trees, verdicts, sealed ballots and their reveals, timeouts,
 * withdrawals, the clock moved on), after each of which the contract's balance equals
 * the credits plus the bonds paid into runs not yet settled, and every run
 * not yet settled has a deadline running (so timeout() will end it). At
 * the end every run is ended by timeout() alone and every account withdraws
 * its credit: the contract holds 0 wei. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "util.h"

static fx_env env;

#define MAX_RUNS 24

/* A call whose refusal is an expected result here (its error is cleared). */
#define TRY_CALL(call)             \
    do {                           \
        if ((call) != 0)           \
            ovt_err_clear();       \
    } while (0)

/* The low 64 bits of a u256 (the test's amounts are far below 2^64). */
static uint64_t lo64(const chain_u256 *v)
{
    uint64_t x = 0;
    for (int i = 24; i < 32; i++)
        x = x << 8 | v->b[i];
    return x;
}

static uint64_t head_time(void)
{
    chain_block_header h;
    int found = 0;
    if (chain_rpc_block_header(env.rpc, &h, &found, "latest") != 0 || !found)
        return 0;
    return h.timestamp;
}

static chain_arb_committee committee(const fx_run *run)
{
    chain_arb_committee c;
    if (chain_arb_get_committee(&env.arb, &run->run_id, NULL, &c) != 0)
        memset(&c, 0, sizeof c);
    return c;
}

static unsigned popcount(unsigned x)
{
    unsigned n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* --- the stranger's runs */

static void test_stranger_runs(void)
{
    const uint64_t bond = 300000000000000000ULL; /* 0.3 ETH */
    fx_run runs[4];
    uint64_t credit0 = fx_credit(&env, FX_ARBITER), held0 = fx_balance(&env);
    for (int k = 0; k < 4; k++) {
        chain_arb_params p;
        fx_params(&env, &p, 8, 600, 1000, 2000);
        p.arbiter_bond = chain_u256_from_u64(bond);
        CHECK(fx_open(&env, &runs[k], &p, NULL) == 0 && fx_histories(&runs[k], 3) == 0);
        uint64_t opened = head_time();
        CHECK(chain_arb_accept(&env.arb, &env.txm[FX_ARBITER], &runs[k].run_id, NULL) == 0);
        chain_arb_game g = fx_game(&env, &runs[k]);
        CHECK(g.phase == CHAIN_ARB_PHASE_COMMITTING && g.flags == 0);
        CHECK_EQ_U64(g.deadline, opened + 3600); /* the first commitment's window, from open */
    }
    CHECK_EQ_U64(fx_balance(&env) - held0, 4 * bond);
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_timeout(&b, &runs[0].run_id) == 0);
    FX_CHECK_REVERT(&env, FX_OUTSIDER, NULL, &b, "NotExpired"); /* the window is still open */
    CHECK(fx_warp(&env, 3601) == 0);
    FX_CHECK_REVERT(&env, FX_OUTSIDER, NULL, &b, ""); /* and now it is not */
    chain_buf_free(&b);
    /* too late to commit: the window is the run's own, not the stranger's */
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &runs[0].run_id, chain_merkle_root(runs[0].trainer.tree),
                           NULL, NULL, NULL) != 0);
    CHECK_MSG(strstr(ovt_errmsg(), "DeadlinePassed") != NULL, "commit after the window: %s", ovt_errmsg());
    ovt_err_clear();
    for (int k = 0; k < 4; k++) {
        chain_receipt r;
        CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &runs[k].run_id, &r) == 0);
        chain_arb_game g = fx_game(&env, &runs[k]);
        CHECK_MSG(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_CANCELLED, "run %d ended %s", k,
                  chain_arb_outcome_name(g.outcome));
        chain_arb_event *ev;
        size_t n;
        CHECK(chain_arb_receipt_events(&env.arb, &r, &ev, &n) == 0);
        CHECK(n == 3 && ev[1].kind == CHAIN_ARB_EV_ARBITER_SETTLED && lo64(&ev[1].u.arbiter_settled.forfeited) == 0 &&
              ev[2].kind == CHAIN_ARB_EV_SETTLED && ev[2].u.settled.outcome == CHAIN_ARB_CANCELLED);
        free(ev);
        if (k == 0)
            printf("gas: timeout, Cancelled, one accepted arbiter bond: %llu\n", (unsigned long long)r.gas_used);
        chain_receipt_free(&r);
        fx_run_free(&runs[k]);
    }
    CHECK_EQ_U64(fx_credit(&env, FX_ARBITER) - credit0, 4 * bond); /* 1.2 ETH back */
    CHECK(chain_arb_withdraw(&env.arb, &env.txm[FX_ARBITER], NULL) == 0);
    CHECK_EQ_U64(fx_credit(&env, FX_ARBITER), 0);
    CHECK_EQ_U64(fx_balance(&env), held0 >= credit0 ? held0 - credit0 : 0);
}

/* --- the invariant under random calls */

static const int arbiter_account[3] = {FX_ARBITER, FX_ARBITER2, FX_ARBITER3};

typedef struct {
    fx_run run[MAX_RUNS];
    size_t n;
    uint64_t checks;
} world;

/* Wei paid into a run not yet settled: the party bonds paid with commits
 * (both once the dispute is open) and each seated arbiter's bond. Also
 * checks that a deadline runs. */
static uint64_t held_by(const fx_run *run)
{
    chain_arb_game g = fx_game(&env, run);
    if (g.phase == CHAIN_ARB_PHASE_SETTLED)
        return 0;
    CHECK_MSG(g.deadline != 0, "a run in phase %s has no deadline: its bonds have no way back",
              chain_arb_phase_name(g.phase));
    uint64_t held = 0;
    bool committing = g.phase == CHAIN_ARB_PHASE_COMMITTING;
    if (!committing || (g.flags & CHAIN_ARB_FLAG_TRAINER))
        held += lo64(&run->params.trainer_bond);
    if (!committing || (g.flags & CHAIN_ARB_FLAG_AUDITOR))
        held += lo64(&run->params.auditor_bond);
    uint64_t bond = lo64(&run->params.arbiter_bond);
    if (bond)
        held += bond * popcount(committee(run).seated);
    return held;
}

static void check_conserved(world *w, const char *after)
{
    uint64_t credits = 0, held = 0;
    for (int a = 0; a < FX_NACCOUNTS; a++)
        credits += fx_credit(&env, a);
    for (size_t k = 0; k < w->n; k++)
        held += held_by(&w->run[k]);
    uint64_t balance = fx_balance(&env);
    CHECK_MSG(balance == credits + held, "after %s: balance %llu, credits %llu + held %llu", after,
              (unsigned long long)balance, (unsigned long long)credits, (unsigned long long)held);
    w->checks++;
}

static void open_random(world *w)
{
    if (w->n == MAX_RUNS)
        return;
    chain_arb_params p;
    uint64_t steps = 1 + tc_rnd() % 6;
    fx_params(&env, &p, steps, 200 + (uint32_t)(tc_rnd() % 400), 1000 + tc_rnd() % 1000, 2000 + tc_rnd() % 1000);
    p.commit_timeout = 200 + (uint32_t)(tc_rnd() % 600);
    p.arbiter_timeout = 200 + (uint32_t)(tc_rnd() % 400);
    unsigned n = 1 + (unsigned)(tc_rnd() % 3);
    for (unsigned k = 0; k < n; k++)
        p.arbiters[k] = env.addr[arbiter_account[k]];
    if (tc_rnd() % 3)
        p.arbiter_bond = chain_u256_from_u64(500 + tc_rnd() % 500);
    fx_run *run = &w->run[w->n];
    if (fx_open(&env, run, &p, NULL) != 0 || fx_histories(run, tc_rnd() % (steps + 2)) != 0) {
        CHECK_MSG(0, "open: %s", ovt_errmsg());
        return;
    }
    w->n++;
}

/* A committee seat's verdict for this test: TrainerRight or AuditorRight by
 * the seat and the run, so its reveal can rebuild the sealed ballot. */
static void seat_verdict(chain_arb_outcome *o, ovt_hash *evidence, ovt_hash *salt, const fx_run *run, unsigned seat,
                         const chain_arb_game *g)
{
    bool trainer = (run->run_id.b[0] + seat) % 3 != 0;
    *o = trainer ? CHAIN_ARB_TRAINER_RIGHT : CHAIN_ARB_AUDITOR_RIGHT;
    *evidence = trainer ? g->trainer_node : g->auditor_node;
    memset(salt, 0, sizeof *salt);
    salt->b[0] = (uint8_t)seat;
    salt->b[1] = 0x5a;
}

/* An arbiter of the run moves: verdict() for one arbiter, else a random
 * seat seals its ballot or opens the sealed one. */
static int arbiter_moves(const fx_run *run)
{
    chain_arb_game g = fx_game(&env, run);
    unsigned n = chain_arb_arbiter_count(&run->params);
    unsigned seat = (unsigned)(tc_rnd() % n);
    chain_txm *m = &env.txm[arbiter_account[seat]];
    chain_arb_outcome o;
    ovt_hash evidence, salt;
    seat_verdict(&o, &evidence, &salt, run, seat, &g);
    if (n == 1)
        return chain_arb_verdict(&env.arb, m, &run->run_id, g.index, o, &evidence, NULL);
    chain_arb_committee c = committee(run);
    if (!(c.committed & (1u << seat))) {
        ovt_hash ballot;
        chain_arb_ballot_hash(&ballot, &run->run_id, &env.addr[arbiter_account[seat]], g.index, o, &evidence, &salt);
        return chain_arb_commit_verdict(&env.arb, m, &run->run_id, &ballot, NULL);
    }
    return chain_arb_reveal_verdict(&env.arb, m, &run->run_id, g.index, o, &evidence, &salt, NULL);
}

/* A challenge of run (itself maybe a challenge, which is refused) by an
 * outsider, or now and then by a named arbiter (refused), with the auditor's
 * history or, now and then, the trainer's own root (refused). */
static void challenge_random(world *w, const fx_run *run)
{
    static const int who[] = {FX_OUTSIDER, FX_ARBITER4, FX_ARBITER5, FX_OUTSIDER, FX_ARBITER};
    if (w->n == MAX_RUNS)
        return;
    const fx_history *h = tc_rnd() % 5 ? &run->auditor : &run->trainer;
    if (fx_challenge(&env, &w->run[w->n], run, who[tc_rnd() % 5], h, NULL) == 0)
        w->n++;
    else
        ovt_err_clear();
}

/* A run to act on: mostly one not yet settled. */
static fx_run *pick_run(world *w)
{
    fx_run *open[MAX_RUNS];
    size_t n = 0;
    for (size_t k = 0; k < w->n; k++)
        if (fx_game(&env, &w->run[k]).phase != CHAIN_ARB_PHASE_SETTLED)
            open[n++] = &w->run[k];
    return n && tc_rnd() % 5 ? open[tc_rnd() % n] : &w->run[tc_rnd() % w->n];
}

/* One random call; many are refused (wrong phase, not theirs, too early or
 * late), which is part of the test. Weights: open 1, accept 2, commit 3,
 * commitReplay 2 (proof of replay: the trainer's, or the auditor's with one
 * of two site roots), revealSites 1 (the trainer's, either root), a party's
 * move 6, both parties played to the verdict 1, an arbiter's 4, a
 * challenge 3, the clock 1, timeout 1, withdraw 1. A challenge's game joins
 * the runs (its challenger plays the auditor's side); a replay dispute's
 * moves are refused to the fixture's players, so it ends by timeout or by
 * an arbiter that is never asked. */
static const char *random_call(world *w)
{
    static const char kinds[] = "oaacccrrsmmmmmmpvvvvhhhwtx";
    char kind = kinds[tc_rnd() % (sizeof kinds - 1)];
    if (kind == 'o' || w->n == 0) {
        open_random(w);
        return "open";
    }
    fx_run *run = pick_run(w);
    int who = (int)(tc_rnd() % FX_NACCOUNTS), moved;
    switch (kind) {
    case 'a':
        TRY_CALL(chain_arb_accept(&env.arb, &env.txm[arbiter_account[tc_rnd() % 3]], &run->run_id, NULL));
        return "accept";
    case 'c': {
        int party = tc_rnd() % 2 ? FX_TRAINER : FX_AUDITOR;
        fx_history *h = party == FX_TRAINER ? &run->trainer : &run->auditor;
        TRY_CALL(chain_arb_commit(&env.arb, &env.txm[party], &run->run_id, chain_merkle_root(h->tree), NULL, NULL, NULL));
        return "commit";
    }
    case 'm': {
        int party = tc_rnd() % 2 ? FX_TRAINER : run->challenger ? run->challenger : FX_AUDITOR;
        TRY_CALL(fx_move(&env, run, party, &moved, NULL));
        return "move";
    }
    case 'r': {
        int party = tc_rnd() % 2 ? FX_TRAINER : FX_AUDITOR;
        fx_history *h = party == FX_TRAINER ? &run->trainer : &run->auditor;
        ovt_hash sites = {{0}};
        sites.b[0] = (uint8_t)(1 + tc_rnd() % 2);
        TRY_CALL(chain_arb_commit_replay(&env.arb, &env.txm[party], &run->run_id, chain_merkle_root(h->tree),
                                         party == FX_AUDITOR ? &sites : NULL, NULL, NULL));
        return "commitReplay";
    }
    case 's': {
        ovt_hash sites = {{0}};
        sites.b[0] = (uint8_t)(1 + tc_rnd() % 2);
        TRY_CALL(chain_arb_reveal_sites(&env.arb, &env.txm[FX_TRAINER], &run->run_id, &sites, NULL));
        return "revealSites";
    }
    case 'h': challenge_random(w, run); return "challenge";
    case 'p': TRY_CALL(fx_play(&env, run, NULL, NULL)); return "play";
    case 'v': TRY_CALL(arbiter_moves(run)); return "arbiter";
    case 'w': TRY_CALL(fx_warp(&env, tc_rnd() % 150)); return "warp";
    case 't': TRY_CALL(chain_arb_timeout(&env.arb, &env.txm[who], &run->run_id, NULL)); return "timeout";
    default: TRY_CALL(chain_arb_withdraw(&env.arb, &env.txm[who], NULL)); return "withdraw";
    }
}

static void test_invariant(void)
{
    static world w;
    fx_seed(43);
    tc_seed(43);
    check_conserved(&w, "start");
    for (int i = 0; i < 400; i++) {
        const char *what = random_call(&w);
        ovt_err_clear();
        check_conserved(&w, what);
    }
    /* every bond has a way back: timeout() alone ends every run */
    for (size_t k = 0; k < w.n; k++) {
        for (int guard = 0; guard < 4; guard++) {
            chain_arb_game g = fx_game(&env, &w.run[k]);
            if (g.phase == CHAIN_ARB_PHASE_SETTLED)
                break;
            CHECK_MSG(g.deadline != 0, "run %zu in %s has no deadline", k, chain_arb_phase_name(g.phase));
            uint64_t now = head_time();
            CHECK(fx_warp(&env, g.deadline >= now ? g.deadline - now + 1 : 1) == 0);
            CHECK_MSG(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &w.run[k].run_id, NULL) == 0,
                      "timeout of run %zu: %s", k, ovt_errmsg());
        }
        CHECK(fx_game(&env, &w.run[k]).phase == CHAIN_ARB_PHASE_SETTLED);
    }
    check_conserved(&w, "the last timeouts");
    for (int a = 0; a < FX_NACCOUNTS; a++)
        if (fx_credit(&env, a))
            CHECK(chain_arb_withdraw(&env.arb, &env.txm[a], NULL) == 0);
    CHECK_EQ_U64(fx_balance(&env), 0);
    unsigned settled[CHAIN_ARB_CANCELLED + 1] = {0}, challenges = 0, replays = 0;
    for (size_t k = 0; k < w.n; k++) {
        chain_arb_game g = fx_game(&env, &w.run[k]);
        settled[g.outcome]++;
        challenges += w.run[k].challenger != 0;
        replays += (g.flags & CHAIN_ARB_FLAG_REPLAY) != 0;
        fx_run_free(&w.run[k]);
    }
    printf("invariant: %zu games (%u of them challenges, %u with proof of replay), %llu checks; outcomes:", w.n,
           challenges, replays, (unsigned long long)w.checks);
    for (unsigned o = 0; o <= CHAIN_ARB_CANCELLED; o++)
        if (settled[o])
            printf(" %s %u", chain_arb_outcome_name((chain_arb_outcome)o), settled[o]);
    printf("\n");
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    CHECK_RUN(test_stranger_runs());
    CHECK_RUN(test_invariant());
    fx_stop(&env);
    return check_done();
}
