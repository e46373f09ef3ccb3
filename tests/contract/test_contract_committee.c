/* A committee of arbiters against a real anvil (issue 30): runs name up to
 * five arbiters (anvil's dev keys 3 and 5..8), a threshold m and an arbiter
 * bond; arbiters take their seats with accept(), seal verdicts with
 * commitVerdict and open them with revealVerdict. Each scenario drives a
 * dispute to AwaitingVerdict, plays every seat by a plan (honest, lying,
 * silent before or after sealing, unseated) and checks the outcome, every
 * account's credit (exact wei, the expected figures written out from the
 * bonds below), the contract's balance against the credits, the wallets of
 * the arbiters that paid a bond, and one ArbiterSettled event per seated
 * arbiter. Then: the refusals by error name (accept, ballots, reveals,
 * verdict() on a committee, a ballot on a one-arbiter run, open with a bad
 * committee or threshold), a copied ballot that its copier cannot open,
 * bonds returned when a run ends before the verdict, ballotHash against the
 * C one, and the gas of a whole 2^20-step dispute for n = 1, 3 and 5. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "util.h"

static fx_env env;

#define TB 1000u /* trainer bond */
#define AB 2000u /* auditor bond */
#define WINDOW 7200u /* arbiterTimeout */

static const int seat_account[CHAIN_ARB_MAX_ARBITERS] = {FX_ARBITER, FX_ARBITER2, FX_ARBITER3, FX_ARBITER4,
                                                         FX_ARBITER5};

static chain_arb_game game(const fx_run *run)
{
    return fx_game(&env, run);
}

static chain_arb_committee committee(const fx_run *run)
{
    chain_arb_committee c;
    if (chain_arb_get_committee(&env.arb, &run->run_id, NULL, &c) != 0) {
        fprintf(stderr, "getCommittee: %s\n", ovt_errmsg());
        memset(&c, 0, sizeof c);
    }
    return c;
}

/* The low 64 bits of a balance (dev accounts hold ~1e22 wei). */
static uint64_t lo64(const chain_u256 *v)
{
    uint64_t x = 0;
    for (int i = 24; i < 32; i++)
        x = x << 8 | v->b[i];
    return x;
}

static uint64_t balance(const chain_address *a)
{
    chain_u256 b;
    if (chain_rpc_balance(env.rpc, &b, a, NULL) != 0) {
        fprintf(stderr, "balance: %s\n", ovt_errmsg());
        return 0;
    }
    return lo64(&b);
}

/* Mines a block just past unix time `when`. */
static int warp_past(uint64_t when)
{
    uint64_t now = fx_now(&env);
    return fx_warp(&env, when >= now ? when - now + 1 : 1);
}

/* Opens a disputed run (histories first differ at d) with arbiters seats
 * 0..n-1, threshold m and arbiter bond. */
static int committee_run(fx_run *run, unsigned n, unsigned m, uint64_t bond, uint64_t steps, uint64_t d)
{
    chain_arb_params p;
    fx_params(&env, &p, steps, 600, TB, AB);
    for (unsigned k = 0; k < n; k++)
        p.arbiters[k] = env.addr[seat_account[k]];
    p.threshold = m;
    p.arbiter_bond = chain_u256_from_u64(bond);
    int rc = fx_open(&env, run, &p, NULL);
    if (rc == 0)
        rc = fx_histories(run, d);
    if (rc != 0)
        fprintf(stderr, "committee_run: %s\n", ovt_errmsg());
    return rc;
}

/* Seat k accepts; checks the wallet paid exactly bond + fee. */
static int accept_seat(const fx_run *run, unsigned k, uint64_t bond, uint64_t *gas)
{
    const chain_address *who = &env.addr[seat_account[k]];
    uint64_t before = balance(who);
    chain_receipt r;
    int rc = chain_arb_accept(&env.arb, &env.txm[seat_account[k]], &run->run_id, &r);
    CHECK_MSG(rc == 0, "accept by seat %u: %s", k, ovt_errmsg());
    if (rc != 0)
        return rc;
    CHECK_EQ_U64(before - balance(who), bond + r.gas_used * r.effective_gas_price);
    if (gas)
        *gas += r.gas_used;
    chain_receipt_free(&r);
    return 0;
}

/* Both parties commit and play to the verdict; checks its deadline (one
 * window for one arbiter, two for a committee). */
static int to_verdict(fx_run *run, unsigned n)
{
    int rc = fx_commit_both(&env, run, NULL);
    if (rc == 0)
        rc = fx_play(&env, run, NULL, NULL);
    CHECK_MSG(rc == 0, "playing to the verdict: %s", ovt_errmsg());
    chain_arb_game g = game(run);
    CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT);
    CHECK_EQ_U64(g.deadline - fx_now(&env), n > 1 ? 2 * WINDOW : WINDOW);
    return rc != 0 || g.phase != CHAIN_ARB_PHASE_AWAITING_VERDICT ? -1 : 0;
}

/* A verdict and the salt that seals it. */
typedef struct {
    chain_arb_outcome outcome;
    ovt_hash evidence, salt;
} ballot;

/* 'T' TrainerRight (evidence: the trainer's leaf d), 'A' AuditorRight (the
 * auditor's leaf), 'N' Neither (a hash that is neither leaf). */
static void make_ballot(ballot *b, const fx_run *run, uint64_t d, char kind)
{
    static const ovt_hash neither = {{0x4e, 0x65, 0x69, 0x74, 0x68, 0x65, 0x72}};
    b->outcome = kind == 'A' ? CHAIN_ARB_AUDITOR_RIGHT : kind == 'N' ? CHAIN_ARB_NEITHER : CHAIN_ARB_TRAINER_RIGHT;
    b->evidence = kind == 'A' ? run->auditor.leaves[d] : kind == 'N' ? neither : run->trainer.leaves[d];
    tc_rnd_hash(&b->salt);
}

static void seal(ovt_hash *out, const fx_run *run, unsigned k, uint64_t d, const ballot *b)
{
    chain_arb_ballot_hash(out, &run->run_id, &env.addr[seat_account[k]], d, b->outcome, &b->evidence, &b->salt);
}

static int commit_seat(const fx_run *run, unsigned k, uint64_t d, const ballot *b, uint64_t *gas)
{
    ovt_hash h;
    seal(&h, run, k, d, b);
    chain_receipt r;
    int rc = chain_arb_commit_verdict(&env.arb, &env.txm[seat_account[k]], &run->run_id, &h, &r);
    CHECK_MSG(rc == 0, "commitVerdict by seat %u: %s", k, ovt_errmsg());
    if (rc == 0) {
        if (gas)
            *gas += r.gas_used;
        chain_receipt_free(&r);
    }
    return rc;
}

static int reveal_seat(const fx_run *run, unsigned k, uint64_t d, const ballot *b, uint64_t *gas)
{
    chain_receipt r;
    int rc = chain_arb_reveal_verdict(&env.arb, &env.txm[seat_account[k]], &run->run_id, d, b->outcome,
                                      &b->evidence, &b->salt, &r);
    CHECK_MSG(rc == 0, "revealVerdict by seat %u: %s", k, ovt_errmsg());
    if (rc == 0) {
        if (gas)
            *gas += r.gas_used;
        chain_receipt_free(&r);
    }
    return rc;
}

#define CHECK_REVERT(who, value, buf, name) FX_CHECK_REVERT(&env, (who), (value), (buf), (name))

static void check_reveal_refused(const fx_run *run, unsigned k, uint64_t d, const ballot *b, const char *error)
{
    chain_buf c;
    chain_buf_init(&c);
    CHECK(chain_arb_encode_reveal_verdict(&c, &run->run_id, d, b->outcome, &b->evidence, &b->salt) == 0);
    CHECK_REVERT(seat_account[k], NULL, &c, error);
    chain_buf_free(&c);
}

static void encode_accept(chain_buf *b, const fx_run *run)
{
    chain_buf_init(b);
    CHECK(chain_arb_encode_accept(b, &run->run_id) == 0);
}

static void encode_commit_verdict(chain_buf *b, const fx_run *run, const ovt_hash *h)
{
    chain_buf_init(b);
    CHECK(chain_arb_encode_commit_verdict(b, &run->run_id, h) == 0);
}

/* Credits of every account and the contract's balance, before a run pays
 * anything in. */
typedef struct {
    uint64_t credit[FX_NACCOUNTS];
    uint64_t contract;
} ledger;

static void snapshot(ledger *l)
{
    for (int i = 0; i < FX_NACCOUNTS; i++)
        l->credit[i] = fx_credit(&env, i);
    l->contract = balance(&env.arb.address);
}

/* What a settled run must have credited (hand-computed) and which arbiter
 * lost its bond. */
typedef struct {
    chain_arb_outcome outcome;
    uint64_t to_trainer, to_auditor;
    uint64_t seat[CHAIN_ARB_MAX_ARBITERS];
    uint64_t lost[CHAIN_ARB_MAX_ARBITERS];
} expected;

/* Outcome, every account's credit (nobody else gains a wei), the contract
 * holding exactly what was paid in (paid), and the ArbiterSettled events
 * of the seated seats (mask; none for one arbiter without a bond). */
static void check_settled(const fx_run *run, const ledger *before, const expected *e, uint64_t paid, unsigned seated,
                          uint64_t bond)
{
    unsigned n = chain_arb_arbiter_count(&run->params);
    chain_arb_game g = game(run);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == e->outcome, "phase %s outcome %s, expected %s",
              chain_arb_phase_name(g.phase), chain_arb_outcome_name(g.outcome), chain_arb_outcome_name(e->outcome));
    uint64_t want[FX_NACCOUNTS] = {0};
    want[FX_TRAINER] = e->to_trainer;
    want[FX_AUDITOR] = e->to_auditor;
    for (unsigned k = 0; k < n; k++)
        want[seat_account[k]] = e->seat[k];
    uint64_t sum = 0;
    for (int i = 0; i < FX_NACCOUNTS; i++) {
        uint64_t got = fx_credit(&env, i) - before->credit[i];
        CHECK_MSG(got == want[i], "account %d credited %llu, expected %llu", i, (unsigned long long)got,
                  (unsigned long long)want[i]);
        sum += want[i];
    }
    CHECK_EQ_U64(sum, paid); /* the expectations themselves add up */
    CHECK_EQ_U64(balance(&env.arb.address) - before->contract, paid);

    chain_arb_event *ev;
    size_t nev;
    uint64_t head = 0;
    CHECK(chain_rpc_block_number(env.rpc, &head) == 0);
    CHECK(chain_arb_get_events(&env.arb, &run->run_id, 0, head, &ev, &nev) == 0);
    unsigned seen = 0, events = 0;
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].kind != CHAIN_ARB_EV_ARBITER_SETTLED)
            continue;
        events++;
        int k = chain_arb_seat(&run->params, &ev[i].u.arbiter_settled.arbiter);
        CHECK(k >= 0 && (seated >> k & 1) && !(seen >> k & 1));
        if (k < 0)
            continue;
        seen |= 1u << k;
        uint64_t lost = 0, reward = 0;
        CHECK(chain_u256_to_u64(&lost, &ev[i].u.arbiter_settled.forfeited) == 0 &&
              chain_u256_to_u64(&reward, &ev[i].u.arbiter_settled.reward) == 0);
        CHECK_EQ_U64(lost, e->lost[k]);
        CHECK_EQ_U64(bond - lost + reward, e->seat[k]);
    }
    CHECK_EQ_U64(events, n > 1 || bond > 0 ? (unsigned)__builtin_popcount(seated) : 0);
    free(ev);
}

/* One committee scenario. plan has one letter per seat: 'T', 'A', 'N' seal
 * and reveal that verdict (n = 1: give it with verdict()); 'C' seals 'T'
 * and never reveals; 'S' is seated but seals nothing; 'U' never accepts
 * (only with a bond). */
typedef struct {
    const char *name;
    unsigned m;
    uint64_t bond;
    const char *plan;
    expected e;
} scenario;

/* The seats of a plan that seal a ballot (mask), and those seated. */
static unsigned plan_mask(const char *plan, const char *letters)
{
    unsigned mask = 0;
    for (unsigned k = 0; plan[k]; k++)
        if (strchr(letters, plan[k]))
            mask |= 1u << k;
    return mask;
}

/* n = 1: the verdict, or silence until timeout. */
static void play_single(const fx_run *run, const scenario *s, uint64_t d)
{
    if (s->plan[0] == 'S') {
        CHECK(warp_past(game(run).deadline) == 0);
        CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run->run_id, NULL) == 0);
        return;
    }
    ballot b;
    make_ballot(&b, run, d, s->plan[0]);
    ovt_hash h;
    seal(&h, run, 0, d, &b);
    chain_buf cv;
    encode_commit_verdict(&cv, run, &h);
    CHECK_REVERT(FX_ARBITER, NULL, &cv, "SingleArbiterRun");
    chain_buf_free(&cv);
    CHECK_MSG(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run->run_id, d, b.outcome, &b.evidence, NULL) == 0,
              "verdict: %s", ovt_errmsg());
    /* verdict() leaves the committee's masks alone (the outcome is getGame's) */
    chain_arb_committee view = committee(run);
    CHECK(view.count == 1 && view.threshold == 1 && view.seated == 1 && view.committed == 0 && view.revealed == 0);
    CHECK(view.outcomes[0] == CHAIN_ARB_NONE);
}

/* n > 1: seals, the reveals (after the commit window when a seated seat
 * sealed nothing), and timeout() when a sealed ballot stays closed. */
static void play_committee(const fx_run *run, const scenario *s, uint64_t d, unsigned seated)
{
    unsigned n = (unsigned)strlen(s->plan);
    unsigned sealers = plan_mask(s->plan, "TANC"), revealers = plan_mask(s->plan, "TAN");
    ballot b[CHAIN_ARB_MAX_ARBITERS];
    for (unsigned k = 0; k < n; k++)
        make_ballot(&b[k], run, d, s->plan[k] == 'C' ? 'T' : s->plan[k]);
    for (unsigned k = 0; k < n; k++)
        if (sealers >> k & 1)
            CHECK(commit_seat(run, k, d, &b[k], NULL) == 0);
    chain_arb_committee c = committee(run);
    chain_arb_game g = game(run);
    CHECK(c.count == n && c.threshold == s->m && c.seated == seated && c.committed == sealers && c.revealed == 0);
    CHECK_EQ_U64(c.commit_deadline, g.deadline - WINDOW);
    for (unsigned k = 0; k < n; k++) {
        ovt_hash h;
        seal(&h, run, k, d, &b[k]);
        CHECK(memcmp(c.ballots[k].b, (sealers >> k & 1) ? h.b : (const uint8_t[32]){0}, 32) == 0);
    }
    if (sealers != seated) { /* a seated seat is silent: reveals wait for the commit window to close */
        unsigned first = (unsigned)__builtin_ctz(revealers ? revealers : sealers);
        check_reveal_refused(run, first, d, &b[first], "RevealsNotOpen");
        CHECK(warp_past(c.commit_deadline) == 0);
    }
    for (unsigned k = 0; k < n; k++) {
        if (!(revealers >> k & 1))
            continue;
        CHECK(game(run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT); /* not before the last reveal */
        CHECK(reveal_seat(run, k, d, &b[k], NULL) == 0);
    }
    if (sealers != revealers) { /* a sealed ballot stays closed: the run waits for its deadline */
        chain_buf t;
        chain_buf_init(&t);
        CHECK(chain_arb_encode_timeout(&t, &run->run_id) == 0);
        CHECK(game(run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT);
        CHECK_REVERT(FX_OUTSIDER, NULL, &t, "NotExpired");
        chain_buf_free(&t);
        CHECK(warp_past(g.deadline) == 0);
        unsigned late = (unsigned)__builtin_ctz(sealers & ~revealers);
        check_reveal_refused(run, late, d, &b[late], "DeadlinePassed");
        CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run->run_id, NULL) == 0);
    }
    c = committee(run);
    CHECK(c.revealed == revealers);
    for (unsigned k = 0; k < n; k++) {
        int open = revealers >> k & 1;
        CHECK(c.outcomes[k] == (open ? b[k].outcome : CHAIN_ARB_NONE));
        if (open)
            CHECK_MEM(c.ballots[k].b, b[k].evidence.b, 32);
    }
}

static void run_scenario(const scenario *s)
{
    unsigned n = (unsigned)strlen(s->plan);
    uint64_t d = 3 + tc_rnd() % 10;
    fx_run run;
    ledger before;
    if (committee_run(&run, n, s->m, s->bond, 16, d) != 0) {
        CHECK_MSG(0, "%s: could not open", s->name);
        return;
    }
    snapshot(&before);
    unsigned seated = s->bond ? plan_mask(s->plan, "TANCS") : (1u << n) - 1;
    for (unsigned k = 0; k < n && s->bond; k++)
        if (seated >> k & 1)
            CHECK(accept_seat(&run, k, s->bond, NULL) == 0);
    if (to_verdict(&run, n) == 0) {
        if (n == 1)
            play_single(&run, s, d);
        else
            play_committee(&run, s, d, seated);
    }
    uint64_t paid = TB + AB + (s->bond ? (uint64_t)__builtin_popcount(seated) * s->bond : 0);
    check_settled(&run, &before, &s->e, paid, seated, s->bond);
    printf("%-44s %s\n", s->name, chain_arb_outcome_name(game(&run).outcome));
    fx_run_free(&run);
}

/* Every letter of a plan is one arbiter; bonds: trainer 1000, auditor 2000,
 * arbiters as given. Honest means 'T' here unless the case says otherwise.
 * The expected credits are written out from the rules: losers' bonds
 * shared equally by the matching seats (odd wei to the first of them);
 * with no verdict, silent seated bonds split between the parties (odd wei
 * to the auditor), everyone else refunded. */
static const scenario scenarios[] = {
    {"n=3 m=2, one liar", 2, 1000, "TTA",
     {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {1000 + 500, 1000 + 500, 0}, {0, 0, 1000}}},
    {"n=3 m=2, liar at seat 0, odd bond", 2, 1001, "ATT",
     {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {0, 1001 + 500 + 1, 1001 + 500}, {1001, 0, 0}}},
    {"n=3 m=2, auditor right, one liar", 2, 1000, "TAA",
     {CHAIN_ARB_AUDITOR_RIGHT, 0, TB + AB, {0, 1000 + 500, 1000 + 500}, {1000, 0, 0}}},
    {"n=3 m=2, one seated but never seals", 2, 1000, "TST",
     {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {1000 + 500, 0, 1000 + 500}, {0, 1000, 0}}},
    {"n=3 m=2, one seals but never reveals", 2, 1000, "CTT",
     {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {0, 1000 + 500, 1000 + 500}, {1000, 0, 0}}},
    {"n=5 m=3, two colluders", 3, 3000, "AATTT",
     {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {0, 0, 3000 + 2000, 3000 + 2000, 3000 + 2000}, {3000, 3000, 0, 0, 0}}},
    {"n=5 m=3, two colluders, an honest one silent", 3, 3001, "AATTC",
     {CHAIN_ARB_NO_MAJORITY, TB + 1500, AB + 1501, {3001, 3001, 3001, 3001, 0}, {0, 0, 0, 0, 3001}}},
    {"n=3 m=2, only one reveals", 2, 1000, "TSC",
     {CHAIN_ARB_ARBITER_TIMED_OUT, TB + 1000, AB + 1000, {1000, 0, 0}, {0, 1000, 1000}}},
    {"n=3 m=2, three different verdicts", 2, 1000, "TAN",
     {CHAIN_ARB_NO_MAJORITY, TB, AB, {1000, 1000, 1000}, {0, 0, 0}}},
    {"n=3 m=3, two of three agree", 3, 1000, "TTA", {CHAIN_ARB_NO_MAJORITY, TB, AB, {1000, 1000, 1000}, {0, 0, 0}}},
    {"n=3 m=3, one silent, odd bond", 3, 1001, "TTS",
     {CHAIN_ARB_ARBITER_TIMED_OUT, TB + 500, AB + 501, {1001, 1001, 0}, {0, 0, 1001}}},
    {"n=3 m=2, one never accepts", 2, 1000, "TTU", {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {1000, 1000, 0}, {0, 0, 0}}},
    {"n=3 m=2, no arbiter bond, one liar", 2, 0, "TTA", {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {0, 0, 0}, {0, 0, 0}}},
    {"n=1, bond, verdict", 1, 1001, "A", {CHAIN_ARB_AUDITOR_RIGHT, 0, TB + AB, {1001}, {0}}},
    {"n=1, bond, silent", 1, 1001, "S", {CHAIN_ARB_ARBITER_TIMED_OUT, TB + 500, AB + 501, {0}, {1001}}},
    {"n=1, no bond, verdict", 1, 0, "T", {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {0}, {0}}},
};

static void test_scenarios(void)
{
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        run_scenario(&scenarios[i]);
}

/* --- refusals */

/* open() with params p: the error it reverts with ("" if none). */
static const char *open_error(const chain_arb_params *p)
{
    chain_buf b;
    chain_buf_init(&b);
    if (chain_arb_encode_open(&b, p) != 0)
        return "(encode failed)";
    const char *got = fx_revert_name(&env, FX_OPENER, NULL, &b);
    chain_buf_free(&b);
    return got;
}

static void test_open_refusals(void)
{
    static const chain_address zero;
    const chain_address *a1 = &env.addr[FX_ARBITER], *a2 = &env.addr[FX_ARBITER2], *a3 = &env.addr[FX_ARBITER3];
    struct {
        const char *what;
        const chain_address *arbiters[CHAIN_ARB_MAX_ARBITERS]; /* NULL: zero */
        unsigned m;
        const char *error;
    } cases[] = {
        {"no arbiter", {NULL}, 1, "BadCommittee"},
        {"a gap after seat 0", {a1, NULL, a3}, 2, "BadCommittee"},
        {"seat 0 empty", {NULL, a2}, 1, "BadCommittee"},
        {"the same arbiter twice", {a1, a1}, 2, "BadParty"},
        {"the same arbiter twice, apart", {a1, a2, a1}, 2, "BadParty"},
        {"the trainer as arbiter", {a1, &env.addr[FX_TRAINER]}, 2, "BadParty"},
        {"the auditor as arbiter", {a1, a2, &env.addr[FX_AUDITOR]}, 2, "BadParty"},
        {"n=1 m=2", {a1}, 2, "BadThreshold"},
        {"n=2 m=1", {a1, a2}, 1, "BadThreshold"},
        {"n=3 m=1", {a1, a2, a3}, 1, "BadThreshold"},
        {"n=3 m=4", {a1, a2, a3}, 4, "BadThreshold"},
        {"n=4 m=2", {a1, a2, a3, &env.addr[FX_ARBITER4]}, 2, "BadThreshold"},
        {"n=5 m=6", {a1, a2, a3, &env.addr[FX_ARBITER4], &env.addr[FX_ARBITER5]}, 6, "BadThreshold"},
        {"n=2 m=2", {a1, a2}, 2, ""},
        {"n=4 m=3", {a1, a2, a3, &env.addr[FX_ARBITER4]}, 3, ""},
        {"n=5 m=5", {a1, a2, a3, &env.addr[FX_ARBITER4], &env.addr[FX_ARBITER5]}, 5, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chain_arb_params p;
        fx_params(&env, &p, 8, 600, TB, AB);
        for (int k = 0; k < CHAIN_ARB_MAX_ARBITERS; k++)
            p.arbiters[k] = cases[i].arbiters[k] ? *cases[i].arbiters[k] : zero;
        p.threshold = cases[i].m;
        const char *got = open_error(&p);
        CHECK_MSG(strcmp(got, cases[i].error) == 0, "%s: expected '%s', got '%s'", cases[i].what, cases[i].error,
                  got);
    }
    /* the C encoder spells out a threshold of 0 as a majority: 3 of 4 */
    chain_arb_params p;
    fx_params(&env, &p, 8, 600, TB, AB);
    p.arbiters[1] = *a2;
    p.arbiters[2] = *a3;
    p.arbiters[3] = env.addr[FX_ARBITER4];
    fx_run run;
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    chain_arb_params back;
    CHECK(chain_arb_get_run(&env.arb, &run.run_id, NULL, &back) == 0);
    CHECK(back.threshold == 3 && chain_arb_arbiter_count(&back) == 4);
    CHECK(chain_address_eq(&back.arbiters[3], &env.addr[FX_ARBITER4]) && chain_address_eq(&back.arbiters[4], &zero));
    CHECK(committee(&run).count == 4 && committee(&run).threshold == 3);
}

/* accept(), commitVerdict, revealVerdict and verdict() refused by name
 * through one run: n = 3, m = 2, bond 1000; seats 0 and 1 accept, seat 2
 * never does. */
static void test_refusals(void)
{
    fx_run run;
    uint64_t d = 5, bond = 1000;
    if (committee_run(&run, 3, 2, bond, 12, d) != 0)
        return;
    ledger before;
    snapshot(&before);
    chain_u256 right = chain_u256_from_u64(bond), less = chain_u256_from_u64(bond - 1),
               more = chain_u256_from_u64(bond + 1);
    chain_buf b;
    encode_accept(&b, &run);
    CHECK_REVERT(FX_ARBITER, &less, &b, "WrongBond");
    CHECK_REVERT(FX_ARBITER, &more, &b, "WrongBond");
    CHECK_REVERT(FX_ARBITER, NULL, &b, "WrongBond");
    CHECK_REVERT(FX_OUTSIDER, &right, &b, "NotArbiter");
    CHECK_REVERT(FX_TRAINER, &right, &b, "NotArbiter");
    CHECK_REVERT(FX_ARBITER2, &right, &b, "");
    CHECK(accept_seat(&run, 0, bond, NULL) == 0);
    CHECK_REVERT(FX_ARBITER, &right, &b, "AlreadyMoved");
    CHECK(accept_seat(&run, 1, bond, NULL) == 0);
    CHECK(committee(&run).seated == 3);
    ballot v[3];
    for (unsigned k = 0; k < 3; k++)
        make_ballot(&v[k], &run, d, 'T');
    ovt_hash sealed[3];
    for (unsigned k = 0; k < 3; k++)
        seal(&sealed[k], &run, k, d, &v[k]);
    chain_buf cv;
    encode_commit_verdict(&cv, &run, &sealed[0]);
    CHECK_REVERT(FX_ARBITER, NULL, &cv, "WrongPhase"); /* no verdict due yet */
    chain_buf_free(&cv);

    if (to_verdict(&run, 3) != 0) {
        chain_buf_free(&b);
        fx_run_free(&run);
        return;
    }
    CHECK_REVERT(FX_ARBITER3, &right, &b, "WrongPhase"); /* too late to take a seat */
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_verdict(&b, &run.run_id, d, CHAIN_ARB_TRAINER_RIGHT, &run.trainer.leaves[d]) == 0);
    CHECK_REVERT(FX_ARBITER, NULL, &b, "CommitteeRun");
    CHECK_REVERT(FX_ARBITER2, NULL, &b, "NotArbiter");
    chain_buf_free(&b);
    encode_commit_verdict(&cv, &run, &sealed[2]);
    CHECK_REVERT(FX_ARBITER3, NULL, &cv, "NotArbiter"); /* named, never seated */
    CHECK_REVERT(FX_OUTSIDER, NULL, &cv, "NotArbiter");
    chain_buf_free(&cv);
    check_reveal_refused(&run, 0, d, &v[0], "NotCommitted");
    CHECK(commit_seat(&run, 0, d, &v[0], NULL) == 0);
    encode_commit_verdict(&cv, &run, &sealed[0]);
    CHECK_REVERT(FX_ARBITER, NULL, &cv, "AlreadyMoved");
    chain_buf_free(&cv);
    check_reveal_refused(&run, 0, d, &v[0], "RevealsNotOpen"); /* seat 1 may still seal */
    CHECK(commit_seat(&run, 1, d, &v[1], NULL) == 0);          /* every seated seat sealed: reveals open */
    ballot wrong = v[0];
    wrong.salt.b[31] ^= 1;
    check_reveal_refused(&run, 0, d, &wrong, "BadBallot");
    wrong = v[0];
    wrong.outcome = CHAIN_ARB_AUDITOR_RIGHT;
    wrong.evidence = run.auditor.leaves[d];
    check_reveal_refused(&run, 0, d, &wrong, "BadBallot");
    check_reveal_refused(&run, 0, d - 1, &v[0], "WrongStep");
    check_reveal_refused(&run, 2, d, &v[2], "NotCommitted");
    CHECK(reveal_seat(&run, 0, d, &v[0], NULL) == 0);
    check_reveal_refused(&run, 0, d, &v[0], "AlreadyMoved");
    CHECK(reveal_seat(&run, 1, d, &v[1], NULL) == 0);
    expected e = {CHAIN_ARB_TRAINER_RIGHT, TB + AB, 0, {1000, 1000, 0}, {0, 0, 0}};
    check_settled(&run, &before, &e, TB + AB + 2 * bond, 3, bond);
    /* an arbiter's credit (this run's bond and earlier runs') withdraws like a party's */
    uint64_t owed = fx_credit(&env, FX_ARBITER), wallet = balance(&env.addr[FX_ARBITER]);
    chain_receipt r;
    CHECK(owed >= bond && chain_arb_withdraw(&env.arb, &env.txm[FX_ARBITER], &r) == 0);
    CHECK_EQ_U64(balance(&env.addr[FX_ARBITER]) - wallet, owed - r.gas_used * r.effective_gas_price);
    CHECK_EQ_U64(fx_credit(&env, FX_ARBITER), 0);
    chain_receipt_free(&r);
    encode_commit_verdict(&cv, &run, &sealed[2]);
    CHECK_REVERT(FX_ARBITER, NULL, &cv, "WrongPhase");
    chain_buf_free(&cv);
    encode_accept(&b, &run);
    CHECK_REVERT(FX_ARBITER3, &right, &b, "WrongPhase");
    chain_buf_free(&b);
    fx_run_free(&run);
}

/* An arbiter that posts another's ballot as its own cannot open it, even
 * once the other has opened it and the preimage is public: the ballot binds
 * the address. A ballot after the commit window is refused. */
static void test_copied_ballot(void)
{
    fx_run run;
    uint64_t d = 7, bond = 1000;
    if (committee_run(&run, 3, 2, bond, 12, d) != 0)
        return;
    ledger before;
    snapshot(&before);
    for (unsigned k = 0; k < 3; k++)
        CHECK(accept_seat(&run, k, bond, NULL) == 0);
    if (to_verdict(&run, 3) != 0) {
        fx_run_free(&run);
        return;
    }
    ballot honest, late;
    make_ballot(&honest, &run, d, 'T');
    make_ballot(&late, &run, d, 'T');
    CHECK(commit_seat(&run, 0, d, &honest, NULL) == 0);
    chain_arb_committee c = committee(&run);
    ovt_hash copied = c.ballots[0]; /* as read from the chain (or the mempool) */
    CHECK(chain_arb_commit_verdict(&env.arb, &env.txm[FX_ARBITER3], &run.run_id, &copied, NULL) == 0);
    CHECK(warp_past(c.commit_deadline) == 0);
    ovt_hash h;
    seal(&h, &run, 1, d, &late);
    chain_buf cv;
    encode_commit_verdict(&cv, &run, &h);
    CHECK_REVERT(FX_ARBITER2, NULL, &cv, "DeadlinePassed");
    chain_buf_free(&cv);
    CHECK(reveal_seat(&run, 0, d, &honest, NULL) == 0);
    check_reveal_refused(&run, 2, d, &honest, "BadBallot");
    CHECK(game(&run).phase == CHAIN_ARB_PHASE_AWAITING_VERDICT); /* the copy stays sealed */
    CHECK(warp_past(game(&run).deadline) == 0);
    CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    /* one reveal of m = 2: no verdict; the late and the copying seat lose
     * their bonds to the parties */
    expected e = {CHAIN_ARB_ARBITER_TIMED_OUT, TB + 1000, AB + 1000, {1000, 0, 0}, {0, 1000, 1000}};
    check_settled(&run, &before, &e, TB + AB + 3 * bond, 7, bond);
    fx_run_free(&run);
}

/* A run that ends before the verdict is due returns every arbiter bond. */
static void test_early_end(void)
{
    uint64_t bond = 1000;
    /* equal roots */
    fx_run run;
    ledger before;
    CHECK(committee_run(&run, 3, 2, bond, 9, 10) == 0); /* d > steps: identical histories */
    snapshot(&before);
    for (unsigned k = 0; k < 3; k++)
        CHECK(accept_seat(&run, k, bond, NULL) == 0);
    CHECK(fx_commit_both(&env, &run, NULL) == 0);
    expected verified = {CHAIN_ARB_VERIFIED, TB, AB, {1000, 1000, 1000}, {0, 0, 0}};
    check_settled(&run, &before, &verified, TB + AB + 3 * bond, 7, bond);
    fx_run_free(&run);

    /* neither party bisects; two of three seated */
    CHECK(committee_run(&run, 3, 2, bond, 9, 4) == 0);
    snapshot(&before);
    CHECK(accept_seat(&run, 0, bond, NULL) == 0 && accept_seat(&run, 2, bond, NULL) == 0);
    CHECK(fx_commit_both(&env, &run, NULL) == 0);
    CHECK(warp_past(game(&run).deadline) == 0);
    CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    expected both = {CHAIN_ARB_BOTH_TIMED_OUT, TB, AB, {1000, 0, 1000}, {0, 0, 0}};
    check_settled(&run, &before, &both, TB + AB + 2 * bond, 5, bond);
    fx_run_free(&run);

    /* one arbiter with a bond, the auditor never commits */
    CHECK(committee_run(&run, 1, 1, bond, 9, 4) == 0);
    snapshot(&before);
    CHECK(accept_seat(&run, 0, bond, NULL) == 0);
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run.run_id, chain_merkle_root(run.trainer.tree), NULL,
                           NULL, NULL) == 0);
    CHECK(warp_past(game(&run).deadline) == 0);
    CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    expected unchallenged = {CHAIN_ARB_UNCHALLENGED, TB, 0, {1000}, {0}};
    check_settled(&run, &before, &unchallenged, TB + bond, 1, bond);
    fx_run_free(&run);
}

/* ballotHash on chain equals chain_arb_ballot_hash, and names the arbiter. */
static void test_ballot_hash(void)
{
    for (int i = 0; i < 4; i++) {
        ovt_hash run_id, evidence, salt, mine, other;
        tc_rnd_hash(&run_id);
        tc_rnd_hash(&evidence);
        tc_rnd_hash(&salt);
        uint64_t step = i == 0 ? 0 : tc_rnd() >> (i * 8);
        chain_arb_outcome o = (chain_arb_outcome)(CHAIN_ARB_TRAINER_RIGHT + i);
        const chain_address *who = &env.addr[seat_account[i]];
        chain_abi_enc enc;
        chain_abi_enc_init(&enc);
        chain_abi_put_bytes32(&enc, &run_id);
        chain_abi_put_address(&enc, who);
        chain_abi_put_uint(&enc, step);
        chain_abi_put_uint(&enc, (uint64_t)o);
        chain_abi_put_bytes32(&enc, &evidence);
        chain_abi_put_bytes32(&enc, &salt);
        uint8_t sel[4];
        chain_abi_selector(sel, "ballotHash(bytes32,address,uint64,uint8,bytes32,bytes32)");
        chain_buf call, ret;
        chain_buf_init(&call);
        chain_buf_init(&ret);
        CHECK(chain_abi_enc_finish(&enc, &call, sel) == 0);
        chain_abi_enc_free(&enc);
        chain_call_msg msg = {.to = &env.arb.address, .data = call.data, .data_len = call.len};
        uint8_t theirs[32];
        CHECK(chain_rpc_eth_call(env.rpc, &ret, &msg, NULL) == 0 && chain_arb_decode_word(theirs, ret.data, ret.len) == 0);
        chain_arb_ballot_hash(&mine, &run_id, who, step, o, &evidence, &salt);
        CHECK_MEM(mine.b, theirs, 32);
        chain_arb_ballot_hash(&other, &run_id, &env.addr[FX_OUTSIDER], step, o, &evidence, &salt);
        CHECK(memcmp(other.b, theirs, 32) != 0);
        chain_buf_free(&call);
        chain_buf_free(&ret);
    }
}

/* --- gas of a whole dispute over 2^20 steps, as test_contract_game
 * measures it for one arbiter, with the committee's calls added */

typedef struct {
    unsigned n, m;
    uint64_t bond;
    uint64_t open, accept, commit, bisect, reveal_leaf, seal, reveal_first, reveal_last, verdict;
    uint64_t total;
    uint64_t step; /* the disputed one */
} gas_row;

static void sum_moves(void *ctx, const chain_arb_move *move, int first_in_round, uint64_t gas)
{
    (void)first_in_round;
    gas_row *g = ctx;
    if (move->kind == CHAIN_ARB_MOVE_REVEAL)
        g->reveal_leaf += gas;
    else
        g->bisect += gas;
}

/* The verdict phase: verdict(), or every seat seals and reveals 'T' (the
 * last reveal settles the run). */
static int gas_verdict(gas_row *g, const fx_run *run, uint64_t d)
{
    if (g->n == 1) {
        chain_receipt r;
        int rc = chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run->run_id, d, CHAIN_ARB_TRAINER_RIGHT,
                                   &run->trainer.leaves[d], &r);
        if (rc == 0) {
            g->verdict = r.gas_used;
            chain_receipt_free(&r);
        }
        return rc;
    }
    ballot b[CHAIN_ARB_MAX_ARBITERS];
    int rc = 0;
    for (unsigned k = 0; k < g->n && rc == 0; k++) {
        make_ballot(&b[k], run, d, 'T');
        rc = commit_seat(run, k, d, &b[k], &g->seal);
    }
    for (unsigned k = 0; k < g->n && rc == 0; k++)
        rc = reveal_seat(run, k, d, &b[k], k + 1 < g->n ? &g->reveal_first : &g->reveal_last);
    g->verdict = g->seal + g->reveal_first + g->reveal_last;
    return rc;
}

static void gas_dispute(gas_row *g)
{
    uint64_t steps = UINT64_C(1) << 20, d = 1 + tc_rnd() % steps;
    g->step = d;
    chain_arb_params p;
    fx_params(&env, &p, steps, 3600, 1000000000000000000ULL, 1000000000000000000ULL);
    for (unsigned k = 0; k < g->n; k++)
        p.arbiters[k] = env.addr[seat_account[k]];
    p.threshold = g->m;
    p.arbiter_bond = chain_u256_from_u64(g->bond);
    fx_run run;
    uint64_t commit[2] = {0, 0};
    int rc = fx_open(&env, &run, &p, &g->open);
    if (rc == 0)
        rc = fx_histories(&run, d);
    for (unsigned k = 0; k < g->n && g->bond && rc == 0; k++)
        rc = accept_seat(&run, k, g->bond, &g->accept);
    if (rc == 0)
        rc = fx_commit_both(&env, &run, commit);
    g->commit = commit[0] + commit[1];
    if (rc == 0)
        rc = fx_play(&env, &run, sum_moves, g);
    if (rc == 0)
        rc = gas_verdict(g, &run, d);
    CHECK_MSG(rc == 0, "2^20 dispute, n=%u: %s", g->n, ovt_errmsg());
    CHECK(game(&run).outcome == CHAIN_ARB_TRAINER_RIGHT);
    g->total = g->open + g->accept + g->commit + g->bisect + g->reveal_leaf + g->verdict;
    fx_run_free(&run);
}

static void test_gas(void)
{
    gas_row rows[] = {{.n = 1, .m = 1}, {.n = 1, .m = 1, .bond = 10000000000000000ULL},
                      {.n = 3, .m = 2, .bond = 10000000000000000ULL}, {.n = 5, .m = 3, .bond = 10000000000000000ULL}};
    size_t nrows = sizeof rows / sizeof rows[0];
    for (size_t i = 0; i < nrows; i++) {
        tc_seed(0x6a5); /* the same disputed step and order of moves in every row (util.h's */
        fx_seed(0x6a5); /* generator has one state in this file and one in the fixture's) */
        gas_dispute(&rows[i]);
    }
    printf("gas, one dispute over N = 2^20 steps (depth 21, 42 bisect moves, disputed step %llu), verdict "
           "TrainerRight by all:\n", (unsigned long long)rows[0].step);
    printf("  %-28s", "");
    for (size_t i = 0; i < nrows; i++) {
        char head[32];
        snprintf(head, sizeof head, "n=%u m=%u%s", rows[i].n, rows[i].m, rows[i].bond ? " bond" : "");
        printf(" %14s", head);
    }
    printf("\n");
#define GAS_LINE(label, field)                                                     \
    do {                                                                           \
        printf("  %-28s", label);                                                  \
        for (size_t i_ = 0; i_ < nrows; i_++)                                      \
            printf(" %14llu", (unsigned long long)rows[i_].field);                 \
        printf("\n");                                                              \
    } while (0)
    GAS_LINE("open", open);
    GAS_LINE("accept (all seats)", accept);
    GAS_LINE("commit (both parties)", commit);
    GAS_LINE("bisect (42 moves)", bisect);
    GAS_LINE("revealLeaf (both)", reveal_leaf);
    GAS_LINE("commitVerdict (all seats)", seal);
    GAS_LINE("revealVerdict (all but last)", reveal_first);
    GAS_LINE("revealVerdict (last, settles)", reveal_last);
    GAS_LINE("verdict phase in all", verdict);
    GAS_LINE("total", total);
#undef GAS_LINE
    /* one arbiter without a bond is the old game: 2,707,957 before committees */
    CHECK_MSG(rows[0].total < 2707957 + 2707957 / 20, "n=1 dispute costs %llu gas, more than 5%% over 2,707,957",
              (unsigned long long)rows[0].total);
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    CHECK_RUN(test_ballot_hash());
    CHECK_RUN(test_scenarios());
    CHECK_RUN(test_open_refusals());
    CHECK_RUN(test_refusals());
    CHECK_RUN(test_copied_ballot());
    CHECK_RUN(test_early_end());
    CHECK_RUN(test_gas());
    fx_stop(&env);
    return check_done();
}
