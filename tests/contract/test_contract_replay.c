/* Proof of replay (issue 43), against a real anvil: the trainer's
 * commitReplay fixes a beacon; the named auditor must then commit, with its
 * root, its site root (per step the hash of the beacon's site's output, from
 * its replay); the trainer reveals its own site root after it; equal site
 * roots settle Verified, different ones are bisected to a step, where each
 * party reveals its site hash and the arbiter, re-executing the step, says
 * whose is right (docs/contract.md, "Proof of replay").
 *
 * - An honest pair settles Verified: bonds back, the beacon and both site
 *   roots readable.
 * - A lazy auditor that copies the trainer's root and guesses the site
 *   hashes loses its bond to the trainer at the verdict, the run's root not
 *   refuted; also one that replayed only the first steps (the dispute ends on
 *   the first step it skipped).
 * - A trainer that moves its site hashes after seeing the auditor's loses
 *   its bond to the honest auditor; its root is not refuted by that.
 * - A trainer that never reveals its site root loses its bond (timeout).
 * - Roots that differ on a replay run: the root dispute as always.
 * - Refusals by name: the auditor's plain commit (ReplayRequired), its
 *   commitReplay before the trainer's or on a plain run and the trainer's
 *   after the auditor's (NoBeacon), zero site roots (ZeroRoot), revealSites
 *   by the auditor (NotParty), before the auditor's commit (SitesNotDue),
 *   late (DeadlinePassed) and a second time, the trainer's late change
 *   (WrongPhase); revealLeaf in a replay dispute and revealSite in a root
 *   dispute (WrongReveal); a site hash that is not the party's (BadLeaf); a
 *   proof of the wrong length (BadProof).
 * - After every scenario the contract's balance equals the credits plus
 *   the bonds of the unsettled runs, to the wei.
 * - The gas of every new call, and of a whole replay dispute over 2^20
 *   steps. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/narrow.h"
#include "check.h"
#include "fixture.h"
#include "util.h"

static fx_env env;
static chain_narrow narrow; /* OvtNarrow bound to env's arbitration contract */

#define TB 1000u
#define AB 2000u

/* One party's site hashes (steps + 1 of them, the step-0 one zero: step 0
 * runs no site) and its site tree. */
typedef struct {
    uint64_t steps;
    ovt_hash *hash;
    ovt_hash *leaves;
    chain_merkle *tree;
} sites;

static int sites_build(sites *s, const ovt_hash *run_id)
{
    for (uint64_t i = 0; i <= s->steps; i++)
        chain_merkle_site_leaf_hash(&s->leaves[i], run_id, i, &s->hash[i]);
    chain_merkle_free(s->tree);
    s->tree = NULL;
    return chain_merkle_build(&s->tree, s->leaves, s->steps + 1);
}

/* Random site hashes for steps 1..steps (the honest replay's, for the test). */
static int sites_random(sites *s, const ovt_hash *run_id, uint64_t steps)
{
    memset(s, 0, sizeof *s);
    s->steps = steps;
    s->hash = calloc(steps + 1, sizeof *s->hash);
    s->leaves = calloc(steps + 1, sizeof *s->leaves);
    if (!s->hash || !s->leaves)
        return OVT_ENOMEM;
    for (uint64_t i = 1; i <= steps; i++)
        tc_rnd_hash(&s->hash[i]);
    return sites_build(s, run_id);
}

/* A copy of from whose hashes are guessed (changed) from step `from_step` on. */
static int sites_guessed(sites *s, const sites *from, const ovt_hash *run_id, uint64_t from_step)
{
    memset(s, 0, sizeof *s);
    s->steps = from->steps;
    s->hash = malloc((from->steps + 1) * sizeof *s->hash);
    s->leaves = calloc(from->steps + 1, sizeof *s->leaves);
    if (!s->hash || !s->leaves)
        return OVT_ENOMEM;
    memcpy(s->hash, from->hash, (from->steps + 1) * sizeof *s->hash);
    for (uint64_t i = from_step; i <= s->steps; i++)
        tc_rnd_hash(&s->hash[i]);
    return sites_build(s, run_id);
}

static void sites_free(sites *s)
{
    free(s->hash);
    free(s->leaves);
    chain_merkle_free(s->tree);
    memset(s, 0, sizeof *s);
}

static const ovt_hash *sroot(const sites *s)
{
    return chain_merkle_root(s->tree);
}

static bool is_zero(const ovt_hash *h)
{
    static const ovt_hash zero;
    return !memcmp(h->b, zero.b, 32);
}

static chain_arb_replay replay_of(const fx_run *run)
{
    chain_arb_replay r;
    CHECK_MSG(chain_arb_get_replay(&env.arb, &run->run_id, NULL, &r) == 0, "replays: %s", ovt_errmsg());
    return r;
}

static ovt_hash refuted_by(const ovt_hash *run_id)
{
    ovt_hash h;
    CHECK_MSG(chain_arb_refuted_by(&env.arb, run_id, NULL, &h) == 0, "refutedBy: %s", ovt_errmsg());
    return h;
}

/* The sum of every account's credit. */
static uint64_t credits(void)
{
    uint64_t c = 0;
    for (int a = 0; a < FX_NACCOUNTS; a++)
        c += fx_credit(&env, a);
    return c;
}

/* Bonds conserved: the balance is the credits plus `held` wei of bonds in
 * runs not yet settled. */
static void check_conserved(uint64_t held, const char *when)
{
    uint64_t balance = fx_balance(&env), c = credits();
    CHECK_MSG(balance == c + held, "%s: balance %llu, credits %llu + held %llu", when, (unsigned long long)balance,
              (unsigned long long)c, (unsigned long long)held);
}

/* A call's result rc; when it succeeded, its receipt's gas into *gas (may
 * be NULL) and the receipt freed. */
static int gas_of(int rc, chain_receipt *r, uint64_t *gas)
{
    if (rc == 0) {
        if (gas)
            *gas = r->gas_used;
        chain_receipt_free(r);
    }
    return rc;
}

/* A run of `steps` whose two histories agree (the auditor's root is the
 * trainer's), opened; the trainer has committed with commitReplay. */
static int open_replay_run(fx_run *run, uint64_t steps, uint64_t *gas)
{
    chain_arb_params p;
    fx_params(&env, &p, steps, 600, TB, AB);
    int rc = fx_open(&env, run, &p, NULL);
    if (rc == 0)
        rc = fx_histories(run, steps + 1);
    chain_receipt r;
    if (rc == 0)
        rc = gas_of(chain_arb_commit_replay(&env.arb, &env.txm[FX_TRAINER], &run->run_id,
                                            chain_merkle_root(run->trainer.tree), NULL, NULL, &r),
                    &r, gas);
    return rc;
}

static int auditor_commits(const fx_run *run, const sites *s, uint64_t *gas)
{
    chain_receipt r;
    return gas_of(chain_arb_commit_replay(&env.arb, &env.txm[FX_AUDITOR], &run->run_id,
                                          chain_merkle_root(run->auditor.tree), sroot(s), NULL, &r),
                  &r, gas);
}

static int trainer_reveals(const fx_run *run, const sites *s, uint64_t *gas)
{
    chain_receipt r;
    return gas_of(chain_arb_reveal_sites(&env.arb, &env.txm[FX_TRAINER], &run->run_id, sroot(s), &r), &r, gas);
}

/* Plays a replay dispute from both site trees to the verdict; *gas (may be
 * NULL) adds every move's, first_reveal/second_reveal (may be NULL) get the
 * two reveals'. */
static int play_sites(fx_run *run, const sites *ts, const sites *as, uint64_t *gas, uint64_t *first_reveal,
                      uint64_t *second_reveal)
{
    for (int guard = 0; guard < 200; guard++) {
        chain_arb_game g = fx_game(&env, run);
        if (!chain_arb_is_replay_dispute(&g) || g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT)
            return 0;
        chain_arb_replay rp = replay_of(run);
        int order = (int)(tc_rnd() & 1);
        for (int k = 0; k < 2; k++) {
            int party = (k ^ order) == 0 ? FX_TRAINER : FX_AUDITOR;
            const sites *s = party == FX_TRAINER ? ts : as;
            fx_history *h = party == FX_TRAINER ? &run->trainer : &run->auditor;
            chain_arb_game now = fx_game(&env, run);
            chain_arb_move mv;
            int rc = chain_arb_plan_site_move(&mv, &run->run_id, &now, &rp, party == FX_TRAINER, s->tree, s->hash,
                                              h->tree, fx_preimage, h);
            if (rc != 0)
                return rc;
            if (mv.kind == CHAIN_ARB_MOVE_NONE)
                continue;
            chain_receipt r;
            if ((rc = chain_arb_send_move(&env.arb, &env.txm[party], &run->run_id, &mv, &r)) != 0)
                return rc;
            if (gas)
                *gas += r.gas_used;
            if (mv.kind == CHAIN_ARB_MOVE_REVEAL_SITE) {
                uint64_t *slot = mv.nproof ? first_reveal : second_reveal;
                if (slot)
                    *slot = r.gas_used;
            }
            chain_receipt_free(&r);
        }
    }
    return ovt_fail(OVT_EINVAL, "the replay dispute did not end");
}

/* The arbiter's verdict on a replay dispute: the recomputed site leaf is
 * `right`'s (the party whose site hash of step j is the step's). */
static int site_verdict(const fx_run *run, const sites *right, chain_arb_outcome o, uint64_t *gas)
{
    chain_arb_game g = fx_game(&env, run);
    ovt_hash evidence;
    chain_merkle_site_leaf_hash(&evidence, &run->run_id, g.index, &right->hash[g.index]);
    chain_receipt r;
    return gas_of(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run->run_id, g.index, o, &evidence, &r), &r, gas);
}

static void test_honest_verified(void)
{
    fx_run run;
    sites honest;
    uint64_t c0 = credits(), t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(open_replay_run(&run, 64, NULL) == 0 && sites_random(&honest, &run.run_id, 64) == 0);
    chain_arb_replay rp = replay_of(&run);
    CHECK(!is_zero(&rp.beacon) && is_zero(&rp.trainer_sites) && is_zero(&rp.auditor_sites));
    chain_arb_game g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_COMMITTING && (g.flags & CHAIN_ARB_FLAG_REPLAY));
    CHECK(auditor_commits(&run, &honest, NULL) == 0);
    g = fx_game(&env, &run);
    /* the roots agree, but that is not Verified yet: the trainer's site root is due */
    CHECK(g.phase == CHAIN_ARB_PHASE_COMMITTING && g.deadline != 0 &&
          (g.flags & 3) == (CHAIN_ARB_FLAG_TRAINER | CHAIN_ARB_FLAG_AUDITOR));
    check_conserved(TB + AB, "both committed");
    CHECK(trainer_reveals(&run, &honest, NULL) == 0);
    g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_VERIFIED);
    rp = replay_of(&run);
    CHECK(!memcmp(rp.trainer_sites.b, sroot(&honest)->b, 32) && !memcmp(rp.auditor_sites.b, sroot(&honest)->b, 32));
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, TB);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, AB);
    CHECK_EQ_U64(credits() - c0, TB + AB);
    check_conserved(0, "verified");
    sites_free(&honest);
    fx_run_free(&run);
}

/* A lazy auditor: the trainer's root copied, its site hashes guessed from
 * step `skipped` on (1: no replay at all). */
static void lazy_auditor(uint64_t steps, uint64_t skipped)
{
    fx_run run;
    sites honest, guess;
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(open_replay_run(&run, steps, NULL) == 0 && sites_random(&honest, &run.run_id, steps) == 0);
    CHECK(sites_guessed(&guess, &honest, &run.run_id, skipped) == 0);
    CHECK(auditor_commits(&run, &guess, NULL) == 0);
    CHECK(trainer_reveals(&run, &honest, NULL) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_BISECTING && chain_arb_is_replay_dispute(&g));
    CHECK(!memcmp(g.trainer_node.b, sroot(&honest)->b, 32) && !memcmp(g.auditor_node.b, sroot(&guess)->b, 32));
    check_conserved(TB + AB, "replay dispute open");
    CHECK_MSG(play_sites(&run, &honest, &guess, NULL, NULL, NULL) == 0, "%s", ovt_errmsg());
    g = fx_game(&env, &run);
    CHECK_MSG(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == skipped, "phase %s, step %llu",
              chain_arb_phase_name(g.phase), (unsigned long long)g.index);
    /* the arbiter's inputs are the run's: state j-1, batch and log j */
    CHECK(!memcmp(g.previous_state.b, run.trainer.pre[skipped - 1].state_hash.b, 32));
    CHECK(!memcmp(g.trainer_batch.b, run.trainer.pre[skipped].batch_hash.b, 32));
    CHECK(!memcmp(g.trainer_log.b, run.trainer.pre[skipped].log_hash.b, 32));
    /* the auditor's site leaf cannot be the one a re-execution gives */
    ovt_hash wrong;
    chain_merkle_site_leaf_hash(&wrong, &run.run_id, g.index, &guess.hash[g.index]);
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_verdict(&b, &run.run_id, g.index, CHAIN_ARB_TRAINER_RIGHT, &wrong) == 0);
    FX_CHECK_REVERT(&env, FX_ARBITER, NULL, &b, "VerdictContradictsLeaves");
    chain_buf_free(&b);
    CHECK(site_verdict(&run, &honest, CHAIN_ARB_TRAINER_RIGHT, NULL) == 0);
    g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_SETTLED && g.outcome == CHAIN_ARB_TRAINER_RIGHT);
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, TB + AB); /* the copied root lost the auditor's bond */
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, 0);
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(is_zero(&by));
    check_conserved(0, "lazy auditor settled");
    sites_free(&guess);
    sites_free(&honest);
    fx_run_free(&run);
}

static void test_lazy_auditor(void)
{
    lazy_auditor(64, 1);
    lazy_auditor(1000, 377); /* replayed steps 1..376 only */
    lazy_auditor(7, 7);
}

/* The trainer moves its site hashes after seeing the auditor's: the
 * re-execution sides with the auditor. */
static void test_trainer_moves_sites(void)
{
    fx_run run;
    sites honest, moved;
    uint64_t t0 = fx_credit(&env, FX_TRAINER), a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(open_replay_run(&run, 100, NULL) == 0 && sites_random(&honest, &run.run_id, 100) == 0);
    CHECK(sites_guessed(&moved, &honest, &run.run_id, 42) == 0);
    CHECK(auditor_commits(&run, &honest, NULL) == 0);
    CHECK(trainer_reveals(&run, &moved, NULL) == 0);
    CHECK(play_sites(&run, &moved, &honest, NULL, NULL, NULL) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == 42);
    /* a replay dispute's leaves are site hashes: OvtNarrow has no trace to narrow there */
    chain_buf start;
    chain_buf_init(&start);
    CHECK(chain_narrow_encode_start(&start, &run.run_id) == 0);
    const char *name = fx_revert_name_at(&env, FX_TRAINER, &narrow.address, NULL, &start, chain_narrow_revert_name);
    CHECK_MSG(strcmp(name, "ReplayDispute") == 0, "OvtNarrow.start on a replay dispute: expected ReplayDispute, got '%s'",
              name);
    chain_buf_free(&start);
    CHECK(site_verdict(&run, &honest, CHAIN_ARB_AUDITOR_RIGHT, NULL) == 0);
    CHECK(fx_game(&env, &run).outcome == CHAIN_ARB_AUDITOR_RIGHT);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, TB + AB);
    CHECK_EQ_U64(fx_credit(&env, FX_TRAINER) - t0, 0);
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(is_zero(&by)); /* the root was never in question */
    check_conserved(0, "trainer moved its sites");
    sites_free(&moved);
    sites_free(&honest);
    fx_run_free(&run);
}

/* The trainer never reveals its site root: it loses its bond. */
static void test_trainer_silent(void)
{
    fx_run run;
    sites honest;
    uint64_t a0 = fx_credit(&env, FX_AUDITOR);
    CHECK(open_replay_run(&run, 16, NULL) == 0 && sites_random(&honest, &run.run_id, 16) == 0);
    CHECK(auditor_commits(&run, &honest, NULL) == 0);
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_timeout(&b, &run.run_id) == 0);
    FX_CHECK_REVERT(&env, FX_OUTSIDER, NULL, &b, "NotExpired");
    CHECK(fx_warp(&env, 3601) == 0);
    chain_buf_free(&b);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_sites(&b, &run.run_id, sroot(&honest)) == 0);
    FX_CHECK_REVERT(&env, FX_TRAINER, NULL, &b, "DeadlinePassed");
    chain_buf_free(&b);
    CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    CHECK(fx_game(&env, &run).outcome == CHAIN_ARB_TRAINER_TIMED_OUT);
    CHECK_EQ_U64(fx_credit(&env, FX_AUDITOR) - a0, TB + AB);
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(is_zero(&by));
    check_conserved(0, "trainer silent");
    sites_free(&honest);
    fx_run_free(&run);
}

/* Roots that differ on a replay run are the root dispute, as always. */
static void test_roots_differ(void)
{
    fx_run run;
    chain_arb_params p;
    sites s;
    fx_params(&env, &p, 32, 600, TB, AB);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 11) == 0);
    CHECK(sites_random(&s, &run.run_id, 32) == 0);
    CHECK(chain_arb_commit_replay(&env.arb, &env.txm[FX_TRAINER], &run.run_id, chain_merkle_root(run.trainer.tree),
                                  NULL, NULL, NULL) == 0);
    CHECK(auditor_commits(&run, &s, NULL) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_BISECTING && !chain_arb_is_replay_dispute(&g));
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == 11);
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, g.index, CHAIN_ARB_AUDITOR_RIGHT,
                            &g.auditor_node, NULL) == 0);
    ovt_hash by = refuted_by(&run.run_id);
    CHECK(!memcmp(by.b, run.run_id.b, 32));
    check_conserved(0, "roots differ");
    sites_free(&s);
    fx_run_free(&run);
}

/* who's commit of its history's root, with its bond and signature, reverts
 * with `name` ("": it would pass): commitReplay with sites_root when
 * replay, else the plain commit. */
static void check_commit(const fx_run *run, int who, bool replay, const ovt_hash *sites_root, const char *name)
{
    const fx_history *h = who == FX_TRAINER ? &run->trainer : &run->auditor;
    uint8_t sig[65];
    CHECK(chain_arb_sign_commitment(sig, &env.key[who], env.arb.chain_id, &env.arb.address, &run->run_id,
                                    chain_merkle_root(h->tree), &run->params) == 0);
    chain_buf b;
    chain_buf_init(&b);
    CHECK((replay ? chain_arb_encode_commit_replay(&b, &run->run_id, chain_merkle_root(h->tree), sites_root, sig)
                  : chain_arb_encode_commit(&b, &run->run_id, chain_merkle_root(h->tree), sig)) == 0);
    chain_u256 bond = who == FX_TRAINER ? run->params.trainer_bond : run->params.auditor_bond;
    FX_CHECK_REVERT(&env, who, &bond, &b, name);
    chain_buf_free(&b);
}

static void check_commit_replay(const fx_run *run, int who, const ovt_hash *sites_root, const char *name)
{
    check_commit(run, who, true, sites_root, name);
}

static void check_reveal_sites(const fx_run *run, int who, const ovt_hash *root, const char *name)
{
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_sites(&b, &run->run_id, root) == 0);
    FX_CHECK_REVERT(&env, who, NULL, &b, name);
    chain_buf_free(&b);
}

/* The trainer's revealSite of move mv with site_hash, leaf j and nproof of
 * its proof reverts with `name` ("": it would pass). */
static void check_reveal_site(const fx_run *run, const chain_arb_move *mv, const ovt_hash *site_hash,
                              const chain_merkle_preimage *leaf, size_t nproof, const char *name)
{
    chain_buf b;
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_site(&b, &run->run_id, mv->round, site_hash, leaf, &mv->previous, mv->proof,
                                       nproof) == 0);
    FX_CHECK_REVERT(&env, FX_TRAINER, NULL, &b, name);
    chain_buf_free(&b);
}

static void test_refusals(void)
{
    static const ovt_hash zero;
    fx_run run;
    chain_arb_params p;
    sites honest, guess;
    /* the auditor first: no beacon yet */
    fx_params(&env, &p, 8, 600, TB, AB);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 9) == 0);
    CHECK(sites_random(&honest, &run.run_id, 8) == 0 && sites_guessed(&guess, &honest, &run.run_id, 3) == 0);
    check_commit_replay(&run, FX_AUDITOR, sroot(&honest), "NoBeacon");
    check_reveal_sites(&run, FX_TRAINER, sroot(&honest), "SitesNotDue");
    /* a plain run: the auditor's commitReplay has no beacon to answer */
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run.run_id, chain_merkle_root(run.trainer.tree), NULL,
                           NULL, NULL) == 0);
    check_commit_replay(&run, FX_AUDITOR, sroot(&honest), "NoBeacon");
    check_reveal_sites(&run, FX_TRAINER, sroot(&honest), "SitesNotDue");
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_AUDITOR], &run.run_id, chain_merkle_root(run.auditor.tree), NULL,
                           NULL, NULL) == 0);
    CHECK(fx_game(&env, &run).outcome == CHAIN_ARB_VERIFIED);
    fx_run_free(&run);
    sites_free(&honest);
    sites_free(&guess);

    /* the auditor committed first on a plain run: the trainer's commitReplay comes too late */
    fx_params(&env, &p, 8, 600, TB, AB);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 9) == 0);
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_AUDITOR], &run.run_id, chain_merkle_root(run.auditor.tree), NULL,
                           NULL, NULL) == 0);
    check_commit_replay(&run, FX_TRAINER, NULL, "NoBeacon");
    CHECK(chain_arb_commit(&env.arb, &env.txm[FX_TRAINER], &run.run_id, chain_merkle_root(run.trainer.tree), NULL,
                           NULL, NULL) == 0);
    fx_run_free(&run);

    /* a replay run */
    CHECK(open_replay_run(&run, 8, NULL) == 0);
    CHECK(sites_random(&honest, &run.run_id, 8) == 0 && sites_guessed(&guess, &honest, &run.run_id, 3) == 0);
    check_commit(&run, FX_AUDITOR, false, NULL, "ReplayRequired");
    check_commit_replay(&run, FX_AUDITOR, &zero, "ZeroRoot");
    check_reveal_sites(&run, FX_TRAINER, sroot(&honest), "SitesNotDue"); /* the auditor has not committed */
    CHECK(auditor_commits(&run, &guess, NULL) == 0);
    check_commit_replay(&run, FX_AUDITOR, sroot(&guess), "AlreadyMoved");
    check_reveal_sites(&run, FX_AUDITOR, sroot(&honest), "NotParty");
    check_reveal_sites(&run, FX_TRAINER, &zero, "ZeroRoot");
    CHECK(trainer_reveals(&run, &honest, NULL) == 0);
    /* the trainer cannot change its site root once revealed */
    check_reveal_sites(&run, FX_TRAINER, sroot(&guess), "WrongPhase");
    chain_arb_replay rp = replay_of(&run);
    CHECK(!memcmp(rp.trainer_sites.b, sroot(&honest)->b, 32));
    /* down to the reveal */
    for (int guard = 0; guard < 20 && fx_game(&env, &run).phase == CHAIN_ARB_PHASE_BISECTING; guard++) {
        chain_arb_game g = fx_game(&env, &run);
        for (int party = FX_TRAINER; party <= FX_AUDITOR; party++) {
            const sites *s = party == FX_TRAINER ? &honest : &guess;
            fx_history *h = party == FX_TRAINER ? &run.trainer : &run.auditor;
            chain_arb_move mv;
            g = fx_game(&env, &run);
            CHECK(chain_arb_plan_site_move(&mv, &run.run_id, &g, &rp, party == FX_TRAINER, s->tree, s->hash, h->tree,
                                           fx_preimage, h) == 0);
            CHECK(chain_arb_send_move(&env.arb, &env.txm[party], &run.run_id, &mv, NULL) == 0);
        }
    }
    chain_arb_game g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_REVEALING && g.index == 3);
    chain_arb_move mv;
    CHECK(chain_arb_plan_site_move(&mv, &run.run_id, &g, &rp, 1, honest.tree, honest.hash, run.trainer.tree,
                                   fx_preimage, &run.trainer) == 0);
    CHECK(mv.kind == CHAIN_ARB_MOVE_REVEAL_SITE && mv.nproof == 2 * g.depth);
    chain_buf b;
    chain_buf_init(&b);
    /* a root dispute's reveal here */
    CHECK(chain_arb_encode_reveal_leaf(&b, &run.run_id, mv.round, &mv.leaf, &mv.previous, mv.proof + g.depth,
                                       g.depth) == 0);
    FX_CHECK_REVERT(&env, FX_TRAINER, NULL, &b, "WrongReveal");
    chain_buf_free(&b);
    check_reveal_site(&run, &mv, &guess.hash[3], &mv.leaf, mv.nproof, "BadLeaf"); /* the auditor's site hash */
    check_reveal_site(&run, &mv, &mv.site_hash, &mv.leaf, g.depth, "BadProof");   /* leaf j's proof alone */
    chain_merkle_preimage forged = mv.leaf;
    forged.log_hash.b[0] ^= 1;
    check_reveal_site(&run, &mv, &mv.site_hash, &forged, mv.nproof, "BadProof"); /* another leaf j than the run's */
    check_reveal_site(&run, &mv, &mv.site_hash, &mv.leaf, mv.nproof, "");        /* the planned move passes */
    CHECK(play_sites(&run, &honest, &guess, NULL, NULL, NULL) == 0);
    CHECK(site_verdict(&run, &honest, CHAIN_ARB_TRAINER_RIGHT, NULL) == 0);
    check_conserved(0, "refusals");
    sites_free(&honest);
    sites_free(&guess);
    fx_run_free(&run);

    /* a root dispute: revealSite is not its reveal */
    fx_params(&env, &p, 8, 600, TB, AB);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 2) == 0 && fx_commit_both(&env, &run, NULL) == 0);
    for (int guard = 0; guard < 20 && fx_game(&env, &run).phase == CHAIN_ARB_PHASE_BISECTING; guard++) {
        int moved;
        CHECK(fx_move(&env, &run, FX_TRAINER, &moved, NULL) == 0 && fx_move(&env, &run, FX_AUDITOR, &moved, NULL) == 0);
    }
    CHECK(fx_plan(&env, &run, FX_TRAINER, &mv) == 0 && mv.kind == CHAIN_ARB_MOVE_REVEAL);
    chain_buf_init(&b);
    CHECK(chain_arb_encode_reveal_site(&b, &run.run_id, mv.round, &zero, &mv.leaf, &mv.previous, mv.proof,
                                       mv.nproof) == 0);
    FX_CHECK_REVERT(&env, FX_TRAINER, NULL, &b, "WrongReveal");
    chain_buf_free(&b);
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    g = fx_game(&env, &run);
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, g.index, CHAIN_ARB_TRAINER_RIGHT,
                            &g.trainer_node, NULL) == 0);
    fx_run_free(&run);
    check_conserved(0, "root dispute");
}

/* The gas of the new calls, and a whole replay dispute over 2^20 steps (the
 * same disputed step as the root dispute's figures). */
static void test_gas(void)
{
    const uint64_t steps = (uint64_t)1 << 20, j = 882590;
    fx_run run;
    sites honest, guess;
    uint64_t open_gas = 0, tc = 0, ac = 0, rs = 0, moves = 0, r1 = 0, r2 = 0, verdict = 0;
    chain_arb_params p;
    fx_params(&env, &p, steps, 600, TB, AB);
    chain_receipt r;
    CHECK(fx_open(&env, &run, &p, &open_gas) == 0 && fx_histories(&run, steps + 1) == 0);
    CHECK(chain_arb_commit_replay(&env.arb, &env.txm[FX_TRAINER], &run.run_id, chain_merkle_root(run.trainer.tree),
                                  NULL, NULL, &r) == 0);
    tc = r.gas_used;
    chain_receipt_free(&r);
    CHECK(sites_random(&honest, &run.run_id, steps) == 0 && sites_guessed(&guess, &honest, &run.run_id, j) == 0);
    CHECK(auditor_commits(&run, &guess, &ac) == 0 && trainer_reveals(&run, &honest, &rs) == 0);
    CHECK(play_sites(&run, &honest, &guess, &moves, &r1, &r2) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK(g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == j);
    CHECK(site_verdict(&run, &honest, CHAIN_ARB_TRAINER_RIGHT, &verdict) == 0);
    uint64_t total = open_gas + tc + ac + rs + moves + verdict;
    printf("gas: commitReplay, trainer (fixes the beacon) %llu\n", (unsigned long long)tc);
    printf("gas: commitReplay, auditor (its site root; roots agree) %llu\n", (unsigned long long)ac);
    printf("gas: revealSites (opens the replay dispute) %llu\n", (unsigned long long)rs);
    printf("gas: revealSite, first (leaf j and j-1, 2 x 21 siblings) %llu\n", (unsigned long long)r1);
    printf("gas: revealSite, second (opens the verdict) %llu\n", (unsigned long long)r2);
    printf("gas: verdict of a replay dispute (TrainerRight) %llu\n", (unsigned long long)verdict);
    printf("gas: whole replay dispute over 2^20 steps (open + 2 commits + revealSites + 42 bisect moves + 2 reveals "
           "+ verdict) %llu\n",
           (unsigned long long)total);
    sites_free(&guess);
    fx_run_free(&run);

    /* revealSites that settles Verified */
    CHECK(open_replay_run(&run, 64, NULL) == 0);
    sites s64;
    CHECK(sites_random(&s64, &run.run_id, 64) == 0);
    CHECK(auditor_commits(&run, &s64, NULL) == 0 && trainer_reveals(&run, &s64, &rs) == 0);
    printf("gas: revealSites (equal: Verified) %llu\n", (unsigned long long)rs);
    sites_free(&s64);
    sites_free(&honest);
    fx_run_free(&run);
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    fx_seed(4343);
    narrow = env.narrow; /* deployed bound to env.arb by the fixture */
    CHECK_RUN(test_honest_verified());
    CHECK_RUN(test_lazy_auditor());
    CHECK_RUN(test_trainer_moves_sites());
    CHECK_RUN(test_trainer_silent());
    CHECK_RUN(test_roots_differ());
    CHECK_RUN(test_refusals());
    CHECK_RUN(test_gas());
    fx_stop(&env);
    return check_done();
}
