/* The devnet follows the game through the contract's events (scenario.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/keys.h"
#include "examples/devnet/node.h"
#include "examples/devnet/scenario.h"

/* A short form of a hash for progress lines: 0x1234abcd.. */
static const char *short_hash(char buf[16], const ovt_hash *h)
{
    char full[67];
    devnet_hex0x(full, h->b, 32);
    snprintf(buf, 16, "%.10s..", full);
    return buf;
}

/* ---- following the game on chain ---- */

static devnet_party faulty_party(const devnet_opts *o)
{
    if (o->fault == DEVNET_NONE)
        return DEVNET_PARTY_NONE;
    return o->fault == DEVNET_LYING_AUDITOR || o->fault == DEVNET_LAZY_AUDITOR ? DEVNET_PARTY_AUDITOR
                                                                              : DEVNET_PARTY_TRAINER;
}

devnet_party devnet_wrong_party(chain_arb_outcome out)
{
    switch (out) {
    case CHAIN_ARB_AUDITOR_RIGHT:
    case CHAIN_ARB_FRAUDULENT_LOG:
    case CHAIN_ARB_INPUTS_UNAVAILABLE:
    case CHAIN_ARB_TRAINER_TIMED_OUT: return DEVNET_PARTY_TRAINER;
    case CHAIN_ARB_TRAINER_RIGHT:
    case CHAIN_ARB_AUDITOR_TIMED_OUT: return DEVNET_PARTY_AUDITOR;
    default: return DEVNET_PARTY_NONE;
    }
}

/* The committee seat of an address, or NULL. */
static devnet_arbiter *seat_of(struct devnet *d, const chain_address *a)
{
    for (unsigned k = 0; k < d->r->n_arbiters; k++)
        if (chain_address_eq(&d->addr[KEY_ARBITER + k], a))
            return &d->r->arbiters[k];
    return NULL;
}

static void note_verdict(struct devnet *d, const chain_address *who, chain_arb_outcome o, const ovt_hash *evidence)
{
    devnet_arbiter *a = seat_of(d, who);
    if (!a)
        return;
    a->revealed = true;
    a->verdict = o;
    a->evidence = *evidence;
}

/* One seated arbiter's bond at settlement: what it said, lost and won. */
static void devnet_arbiter_settled(struct devnet *d, const chain_arb_event *e)
{
    char lost[80], won[80];
    chain_u256_to_dec(lost, &e->u.arbiter_settled.forfeited);
    chain_u256_to_dec(won, &e->u.arbiter_settled.reward);
    devnet_arbiter *a = seat_of(d, &e->u.arbiter_settled.arbiter);
    if (a) {
        a->settled = true;
        a->forfeited = e->u.arbiter_settled.forfeited;
        a->reward = e->u.arbiter_settled.reward;
    }
    devnet_progress(d, "chain: %s (verdict %s): lost %s wei, rewarded %s wei",
                    devnet_party_of(d, &e->u.arbiter_settled.arbiter),
                    chain_arb_outcome_name(e->u.arbiter_settled.verdict), lost, won);
}

/* The outside challenger of an address, or NULL. */
static devnet_challenger *challenger_of(struct devnet *d, const chain_address *a)
{
    for (unsigned k = 0; k < d->r->n_challengers; k++) {
        chain_address c;
        if (chain_address_from_string(&c, d->r->challengers[k].address) == 0 && chain_address_eq(&c, a))
            return &d->r->challengers[k];
    }
    return NULL;
}

/* The challenger whose challenge's game is id, or NULL. */
static devnet_challenger *game_of(struct devnet *d, const ovt_hash *id)
{
    for (unsigned k = 0; k < d->r->n_challengers; k++) {
        devnet_challenger *c = &d->r->challengers[k];
        if (c->challenged && !memcmp(c->challenge_id.b, id->b, 32))
            return c;
    }
    return NULL;
}

/* An event of a challenge's game: its step, its verdict, its end. */
static void on_challenge_event(struct devnet *d, devnet_challenger *c, const chain_arb_event *e)
{
    if (e->kind == CHAIN_ARB_EV_STEP_FIXED)
        devnet_progress(d, "chain: %s's challenge: the first differing leaf is step %llu", c->name,
                        (unsigned long long)e->u.step_fixed.step);
    else if (e->kind == CHAIN_ARB_EV_VERDICT_GIVEN)
        devnet_progress(d, "chain: %s's challenge: verdict on step %llu: %s", c->name,
                        (unsigned long long)e->u.verdict_given.step, chain_arb_outcome_name(e->u.verdict_given.outcome));
    else if (e->kind == CHAIN_ARB_EV_SETTLED) {
        char c1[80], c2[80];
        chain_u256_to_dec(c1, &e->u.settled.trainer_credit);
        chain_u256_to_dec(c2, &e->u.settled.auditor_credit);
        c->settled = true;
        c->outcome = e->u.settled.outcome;
        devnet_progress(d, "chain: %s's challenge settled: %s (credited: trainer %s wei, %s %s wei)", c->name,
                        chain_arb_outcome_name(c->outcome), c1, c->name, c2);
    }
}

static void on_event(struct devnet *d, const chain_arb_event *e)
{
    char h1[16], h2[16];
    devnet_result *r = d->r;
    switch (e->kind) {
    case CHAIN_ARB_EV_RUN_OPENED:
        devnet_progress(d, "chain: run opened, %llu steps, tree depth %u", (unsigned long long)e->u.run_opened.steps,
                 e->u.run_opened.depth);
        break;
    case CHAIN_ARB_EV_COMMITTED: {
        const char *who = devnet_party_of(d, &e->u.committed.party);
        devnet_progress(d, "chain: %s committed root %s", who, short_hash(h1, &e->u.committed.root));
        devnet_party p = chain_address_eq(&e->u.committed.party, &d->addr[KEY_TRAINER]) ? DEVNET_PARTY_TRAINER
                                                                                          : DEVNET_PARTY_AUDITOR;
        devnet_party f = faulty_party(d->o);
        /* With no fault the clock runs from the trainer's commitment. */
        if (p == f || (f == DEVNET_PARTY_NONE && p == DEVNET_PARTY_TRAINER))
            r->faulty_commit_s = devnet_elapsed(d);
        break;
    }
    case CHAIN_ARB_EV_DISPUTE_OPENED:
        d->dispute_open = true;
        d->round = 0;
        devnet_progress(d, "chain: the roots differ: dispute opened (trainer %s, auditor %s), %u rounds of bisection",
                 short_hash(h1, &e->u.dispute_opened.trainer_root), short_hash(h2, &e->u.dispute_opened.auditor_root),
                 e->u.dispute_opened.depth);
        break;
    case CHAIN_ARB_EV_CHILDREN_REVEALED:
        if (d->o->silent && !chain_address_eq(&e->u.children_revealed.party,
                                              &d->addr[d->o->silent == DEVNET_PARTY_TRAINER ? KEY_TRAINER : KEY_AUDITOR]) &&
            e->u.children_revealed.round == d->round)
            d->honest_moved_s = devnet_elapsed(d);
        devnet_progress(d, "chain: round %u: %s revealed its children", e->u.children_revealed.round,
                     devnet_party_of(d, &e->u.children_revealed.party));
        break;
    case CHAIN_ARB_EV_DESCENDED:
        d->round = e->u.descended.round;
        devnet_progress(d, "chain: descended to round %u, node %llu", e->u.descended.round,
                 (unsigned long long)e->u.descended.index);
        break;
    case CHAIN_ARB_EV_STEP_FIXED:
        r->has_step = true;
        r->step = e->u.step_fixed.step;
        devnet_progress(d, "chain: the first differing leaf is step %llu", (unsigned long long)e->u.step_fixed.step);
        break;
    case CHAIN_ARB_EV_LEAF_REVEALED:
        devnet_progress(d, "chain: %s revealed its leaf %llu", devnet_party_of(d, &e->u.leaf_revealed.party),
                 (unsigned long long)e->u.leaf_revealed.step);
        break;
    case CHAIN_ARB_EV_PREVIOUS_LEAF_REVEALED:
    case CHAIN_ARB_EV_WITHDRAWN: break;
    case CHAIN_ARB_EV_VERDICT_DUE:
        d->verdict_due = true;
        devnet_progress(d, "chain: both leaves revealed: the %s on step %llu is due",
                        d->r->n_arbiters > 1 ? "committee's vote" : "arbiter's verdict",
                        (unsigned long long)e->u.verdict_due.step);
        break;
    case CHAIN_ARB_EV_VERDICT_GIVEN:
        r->verdict_s = devnet_elapsed(d);
        r->has_step = true;
        r->step = e->u.verdict_given.step;
        if (d->r->n_arbiters == 1)
            note_verdict(d, &d->addr[KEY_ARBITER], e->u.verdict_given.outcome, &e->u.verdict_given.evidence);
        devnet_progress(d, "chain: verdict on step %llu: %s (evidence %s)", (unsigned long long)e->u.verdict_given.step,
                 chain_arb_outcome_name(e->u.verdict_given.outcome), short_hash(h1, &e->u.verdict_given.evidence));
        break;
    case CHAIN_ARB_EV_TIMED_OUT:
        r->verdict_s = devnet_elapsed(d);
        devnet_progress(d, "chain: a deadline passed (phase %s, round %u)", chain_arb_phase_name(e->u.timed_out.phase),
                 e->u.timed_out.round);
        break;
    case CHAIN_ARB_EV_SETTLED: {
        char c1[80], c2[80];
        chain_u256_to_dec(c1, &e->u.settled.trainer_credit);
        chain_u256_to_dec(c2, &e->u.settled.auditor_credit);
        d->settled = true;
        r->outcome = e->u.settled.outcome;
        r->settled_trainer = e->u.settled.trainer_credit;
        r->settled_auditor = e->u.settled.auditor_credit;
        if (r->verdict_s == 0)
            r->verdict_s = devnet_elapsed(d);
        devnet_progress(d, "chain: settled: %s (credited: trainer %s wei, auditor %s wei)",
                 chain_arb_outcome_name(e->u.settled.outcome), c1, c2);
        break;
    }
    case CHAIN_ARB_EV_ARBITER_ACCEPTED:
        devnet_progress(d, "chain: arbiter %s took seat %u", devnet_party_of(d, &e->u.arbiter_accepted.arbiter),
                        e->u.arbiter_accepted.seat);
        break;
    case CHAIN_ARB_EV_VERDICT_COMMITTED:
        d->sealed++;
        devnet_progress(d, "chain: %s sealed its verdict", devnet_party_of(d, &e->u.verdict_committed.arbiter));
        break;
    case CHAIN_ARB_EV_VERDICT_REVEALED:
        note_verdict(d, &e->u.verdict_revealed.arbiter, e->u.verdict_revealed.outcome,
                     &e->u.verdict_revealed.evidence);
        devnet_progress(d, "chain: %s revealed %s on step %llu", devnet_party_of(d, &e->u.verdict_revealed.arbiter),
                        chain_arb_outcome_name(e->u.verdict_revealed.outcome),
                        (unsigned long long)e->u.verdict_revealed.step);
        break;
    case CHAIN_ARB_EV_ARBITER_SETTLED:
        devnet_arbiter_settled(d, e);
        break;
    case CHAIN_ARB_EV_CHALLENGE_OPENED: {
        devnet_challenger *c = challenger_of(d, &e->u.challenge_opened.challenger);
        if (c) {
            c->challenged = true;
            c->challenge_id = e->u.challenge_opened.challenge_id;
        }
        devnet_progress(d, "chain: %s challenged the trainer's root with %s (game %s)",
                        c ? c->name : devnet_party_of(d, &e->u.challenge_opened.challenger),
                        short_hash(h1, &e->u.challenge_opened.root),
                        short_hash(h2, &e->u.challenge_opened.challenge_id));
        break;
    }
    case CHAIN_ARB_EV_REFUTED:
        r->refuted = true;
        r->refuted_by = e->u.refuted.game_id;
        devnet_progress(d, "chain: the trainer's root is refuted (%s, by game %s)",
                        chain_arb_outcome_name(e->u.refuted.outcome), short_hash(h1, &e->u.refuted.game_id));
        break;
    case CHAIN_ARB_EV_COUNT: break;
    }
}

/* Reads the contract's new events up to the head and handles them. */
int devnet_follow_events(struct devnet *d)
{
    uint64_t head;
    int rv = chain_rpc_block_number(d->rpc, &head);
    if (rv || head < d->next_block)
        return rv;
    chain_arb_event *ev = NULL;
    size_t n = 0;
    if ((rv = chain_arb_get_events(&d->arb, NULL, d->next_block, head, &ev, &n)))
        return rv;
    for (size_t i = 0; i < n; i++) {
        if (!d->have_run && ev[i].kind == CHAIN_ARB_EV_RUN_OPENED) {
            d->run_id = ev[i].run_id;
            d->have_run = true;
            devnet_hex0x(d->r->run_id, d->run_id.b, 32);
        }
        devnet_challenger *c = d->have_run ? game_of(d, &ev[i].run_id) : NULL;
        if (d->have_run && memcmp(ev[i].run_id.b, d->run_id.b, 32) == 0)
            on_event(d, &ev[i]);
        else if (c)
            on_challenge_event(d, c, &ev[i]);
    }
    free(ev);
    d->next_block = head + 1;
    return 0;
}

int devnet_skip_silent_arbiter(struct devnet *d)
{
    if (d->o->fault != DEVNET_SILENT_ARBITER || d->clock_past_ballots || !d->verdict_due ||
        d->sealed + 1 < d->o->arbiters)
        return 0;
    /* the run's verdict timeout: one window for the ballots */
    chain_arb_params p;
    int rv = chain_arb_get_run(&d->arb, &d->run_id, NULL, &p);
    if (rv)
        return rv;
    devnet_progress(d, "devnet: every arbiter but the silent one has sealed its ballot: moving anvil's clock %u s "
                       "forward, past the commit deadline, so the reveals open without it",
                    p.arbiter_timeout + 1);
    if ((rv = devnet_advance_time(d->rpc, (uint64_t)p.arbiter_timeout + 1)))
        return rv;
    d->clock_past_ballots = true;
    return 0;
}

/* A party that stops answering: once the dispute is open its agent is
 * stopped; once the other party has made its move of the round, the
 * devnet's clock jumps past the move deadline, and the other party's agent
 * claims the timeout. */
int devnet_silence(struct devnet *d)
{
    if (!d->o->silent || !d->dispute_open)
        return 0;
    devnet_child *c = d->o->silent == DEVNET_PARTY_TRAINER ? d->trainer_agent : d->auditor;
    if (!d->silenced) {
        devnet_progress(d, "devnet: the %s stops answering (its agent, pid %d, is stopped)",
                 devnet_party_name(d->o->silent), (int)c->pid);
        devnet_stop(c, 3000);
        d->silenced = true;
        return 0;
    }
    /* Only once the other party's move of this round is on chain: moving
     * the clock earlier would put that party past the deadline too. There is
     * no wall-clock fallback (a loaded machine can take any time to move);
     * the devnet's --timeout bounds the wait. */
    bool ready = d->honest_moved_s > 0 && devnet_elapsed(d) - d->honest_moved_s > 1.0;
    if (!d->time_moved && ready) {
        devnet_progress(d, "devnet: moving anvil's clock %u s forward, past the move deadline", d->o->move_timeout + 1);
        int rv = devnet_advance_time(d->rpc, (uint64_t)d->o->move_timeout + 1);
        if (rv)
            return rv;
        d->time_moved = true;
    }
    return 0;
}

/* Whether c's log has a line with `needle`. */
static bool log_has(const devnet_child *c, const char *needle)
{
    FILE *f = c ? fopen(c->log_path, "r") : NULL;
    if (!f)
        return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int devnet_narrow_clock(struct devnet *d)
{
    if (!d->o->narrow || !d->verdict_due || d->settled)
        return 0;
    if (!d->narrow_stuck) {
        if (!log_has(d->trainer_agent, "narrow_unplayable") && !log_has(d->auditor, "narrow_unplayable") &&
            !log_has(d->trainer_agent, "narrow_no_chain")) /* --fault no-chain: it never posts its chain */
            return 0;
        d->narrow_stuck = true;
    }
    chain_narrow_game g;
    chain_block_header h;
    int found = 0;
    if (chain_narrow_get(&d->narrow, &d->run_id, NULL, &g) || chain_rpc_block_header(d->rpc, &h, &found, "latest") ||
        !found) {
        ovt_err_clear(); /* the next pass reads again */
        return 0;
    }
    if (g.phase == CHAIN_NARROW_PHASE_NONE || g.phase == CHAIN_NARROW_PHASE_ENDED ||
        g.deadline == d->narrow_clock_deadline || h.timestamp > g.deadline)
        return 0;
    /* --fault no-chain: only once the auditor has posted its chain, so that the trainer alone is silent */
    if (d->o->fault == DEVNET_NO_CHAIN && (g.stage != CHAIN_NARROW_STAGE_CHUNKS || g.auditor_side.chunks == 0))
        return 0;
    uint64_t by = g.deadline - h.timestamp + 1;
    devnet_progress(d, "devnet: a party cannot play the narrowing; moving anvil's clock %llu s forward, past its "
                       "deadline", (unsigned long long)by);
    d->narrow_clock_deadline = g.deadline;
    return devnet_advance_time(d->rpc, by);
}
