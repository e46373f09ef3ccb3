/* `ovt audit` on chain (see audit.h). */
#include "party/audit.h"

#include <stdio.h>
#include <string.h>

#include "common/fileio.h"
#include "party/agent.h"
#include "party/sites.h"
#include "store/store.h"

/* Reads the run's terms and checks them against this auditor's policy and
 * key, before anything is fetched or sent. */
static int check_terms(chain_session *s, const party_audit_opts *o, chain_arb_params *p)
{
    int rv = chain_arb_get_run(&s->arb, &o->audit.run_id, NULL, p);
    if (!rv && o->challenge && (chain_address_eq(&p->auditor, &s->txm.from) || chain_address_eq(&p->trainer, &s->txm.from)))
        rv = ovt_fail(OVT_EINVAL, "this key is one of the run's parties: a party commits its root (drop --challenge), "
                                  "a challenger uses a key of its own");
    else if (!rv && !o->challenge && !chain_address_eq(&p->auditor, &s->txm.from))
        rv = ovt_fail(OVT_EINVAL, "this key is not the run's auditor (an outside replay: --challenge)");
    if (!rv)
        rv = party_policy_check(o->policy, p, s->arb.chain_id, &s->arb.address, 0);
    return rv;
}

/* The root of the replayed history for the run, after checking the run's
 * terms (check_terms) and that its config and step count are the replay's. */
static int replay_root(chain_session *s, const party_audit_opts *o, const aud_report *r, ovt_hash *root_out)
{
    chain_arb_params p;
    int rv = check_terms(s, o, &p);
    if (rv)
        return rv;
    if (memcmp(p.config_hash.b, r->own.config_hash.b, 32) != 0 || p.steps != r->steps)
        return ovt_fail(OVT_EINVAL, "the run on chain has another config or step count than the replayed run");
    party_history h;
    if ((rv = party_history_from_table(&h, &r->own, &o->audit.run_id)))
        return rv;
    *root_out = *chain_merkle_root(h.tree);
    party_history_free(&h);
    return 0;
}

/* A run with proof of replay: the site hashes of the beacon's site (from
 * the replay's site roots, or guessed by a lazy auditor), kept in OUT for the
 * agent, and commitReplay with their root. */
static int commit_sites(chain_session *s, const party_audit_opts *o, const aud_report *r, const ovt_hash *root)
{
    const ovt_hash *run_id = &o->audit.run_id;
    chain_arb_replay rp;
    party_sites sites;
    int rv = chain_arb_get_replay(&s->arb, run_id, NULL, &rp);
    if (rv)
        return rv;
    if (o->guess_sites_from)
        rv = party_sites_guess(&sites, r, o->guess_sites_from, &rp.beacon, run_id);
    else if (!r->site_roots)
        return ovt_fail(OVT_EINVAL, "the trainer asked for proof of replay after this replay began: run the audit "
                                    "again (it traces every step when the run asks for it)");
    else
        rv = party_sites_from_report(&sites, r, &rp.beacon, run_id);
    if (rv)
        return rv;
    if (!o->audit.out)
        rv = ovt_fail(OVT_EINVAL, "proof of replay needs the auditor's folder (--out) to keep its site hashes");
    if (!rv && !(rv = party_sites_save(&sites, o->audit.out)))
        rv = chain_arb_commit_replay(&s->arb, &s->txm, run_id, root, chain_merkle_root(sites.tree), NULL, NULL);
    party_sites_free(&sites);
    return rv;
}

/* Commits the auditor's own root for the run (replay_root).
 * *trainer_root_matches: whether the trainer's committed root is the root
 * of the step table it published (-1: the trainer has not committed yet). */
static int commit_root(chain_session *s, const party_audit_opts *o, const aud_report *r, ovt_hash *root_out,
                       int *trainer_root_matches)
{
    const ovt_hash *run_id = &o->audit.run_id;
    *trainer_root_matches = -1;
    int rv = replay_root(s, o, r, root_out);
    if (rv)
        return rv;
    chain_arb_game g;
    ovt_hash published;
    if (!(rv = chain_arb_get_game(&s->arb, run_id, NULL, &g)) && (g.flags & CHAIN_ARB_FLAG_TRAINER) &&
        !(rv = trn_step_table_root(&published, &r->trainer, run_id))) {
        *trainer_root_matches = memcmp(published.b, g.trainer_root.b, 32) == 0;
        if (!*trainer_root_matches)
            fprintf(stderr, "ovt audit: warning: the trainer's committed root is not the root of the step table it "
                            "published; the dispute will show where they part\n");
    }
    if (!rv && o->copy_trainer_root && !(g.flags & CHAIN_ARB_FLAG_TRAINER))
        rv = ovt_fail(OVT_EINVAL, "--copy-trainer-root: the trainer has not committed a root to copy yet");
    else if (!rv && o->copy_trainer_root)
        *root_out = g.trainer_root; /* the fault: the trainer's root, whatever the replay found */
    if (!rv && (g.flags & CHAIN_ARB_FLAG_AUDITOR))
        rv = 0; /* committed before (a restart): nothing to send */
    else if (!rv && (g.flags & CHAIN_ARB_FLAG_REPLAY))
        rv = commit_sites(s, o, r, root_out);
    else if (!rv)
        rv = chain_arb_commit(&s->arb, &s->txm, run_id, root_out, NULL, NULL, NULL);
    return rv;
}

/* An outside challenger (o->challenge): once the trainer has committed,
 * challenge() its root when the replay's differs. *game_id: the
 * challenge's game, sent now or before (a restart); zero when the roots
 * agree and nothing was sent. */
static int challenge_root(chain_session *s, const party_audit_opts *o, const aud_report *r, ovt_hash *root_out,
                          ovt_hash *game_id)
{
    const ovt_hash *run_id = &o->audit.run_id;
    memset(game_id, 0, sizeof *game_id);
    int rv = replay_root(s, o, r, root_out);
    if (rv)
        return rv;
    chain_arb_game g;
    static const ovt_hash zero;
    if ((rv = chain_arb_get_game(&s->arb, run_id, NULL, &g)))
        return rv;
    if (!memcmp(g.trainer_root.b, zero.b, 32))
        return ovt_fail(OVT_EINVAL, "the trainer has not committed a root yet: nothing to challenge (run this again "
                                    "once it has, within its commit timeout)");
    if (!memcmp(g.trainer_root.b, root_out->b, 32))
        return 0; /* the replay agrees with the trainer */
    ovt_hash id;
    chain_arb_challenge_id(&id, run_id, &s->txm.from);
    chain_arb_game cg;
    rv = chain_arb_get_game(&s->arb, &id, NULL, &cg);
    if (rv == OVT_EREVERT) { /* UnknownRun: not challenged yet */
        ovt_err_clear();
        rv = chain_arb_challenge(&s->arb, &s->txm, run_id, root_out, NULL, NULL);
    }
    if (!rv)
        *game_id = id;
    return rv;
}

/* Commits the root, reports, and with agent plays the game. */
static int commit_and_play(const party_audit_opts *o, const aud_report *r, json_t *report, party_audit_result *out)
{
    chain_session s;
    ovt_hash root;
    int matches;
    if (r->partial)
        return ovt_fail(OVT_EINVAL, "a partial audit (--steps-from/--steps-to) cannot be committed");
    int rv = chain_session_open(&s, o->chain, 1);
    if (rv)
        return rv;
    ovt_hash game_id;
    static const ovt_hash zero;
    memset(&game_id, 0, sizeof game_id);
    if (o->challenge && !(rv = challenge_root(&s, o, r, &root, &game_id))) {
        char hex[67];
        chain_hash_hex(hex, &root);
        json_object_set_new(report, "root", json_string(hex));
        bool challenged = memcmp(game_id.b, zero.b, 32) != 0;
        json_object_set_new(report, "challenged", json_boolean(challenged));
        chain_hash_hex(hex, &game_id);
        if (challenged)
            json_object_set_new(report, "challenge_id", json_string(hex));
    } else if (!o->challenge && !(rv = commit_root(&s, o, r, &root, &matches))) {
        char hex[67];
        chain_hash_hex(hex, &root);
        json_object_set_new(report, "root", json_string(hex));
        if (matches >= 0)
            json_object_set_new(report, "trainer_root_matches", json_boolean(matches));
    }
    bool reported = false;
    if (!rv && o->agent && (!o->challenge || memcmp(game_id.b, zero.b, 32))) {
        o->on_report(o->ctx, r, report);
        reported = true;
        char sdir[4096];
        if (!o->state_dir)
            rv = ovt_path_join(sdir, sizeof sdir, o->audit.out, "agent");
        party_agent_opts ao = {.is_trainer = false, .run_id = o->audit.run_id, .game_id = game_id,
                               .run_dir = o->audit.out,
                               .state_dir = o->state_dir ? o->state_dir : sdir, .poll_ms = o->poll_ms,
                               .json = o->json};
        char ndir[4096], ndata[4096];
        store_ctx *store = NULL;
        if (!rv && o->narrow && !(rv = ovt_path_join(ndir, sizeof ndir, o->audit.out, "trainer")) &&
            !(rv = ovt_path_join(ndata, sizeof ndata, ndir, "dataset.bin")) &&
            !(rv = store_open(&store, o->audit.source))) {
            ao.narrow = o->narrow;
            ao.narrow_dir = ndir;
            ao.narrow_data = ndata;
            ao.store = store;
            ao.withhold_block = o->withhold_block;
        }
        party_agent_install_signals();
        if (!rv && !(rv = party_agent_run(&s, &ao, &out->outcome)))
            out->played = true;
        store_close(store);
    }
    chain_session_close(&s);
    if (!rv && !reported)
        o->on_report(o->ctx, r, report);
    return rv;
}

int party_audit(const party_audit_opts *o, party_audit_result *out)
{
    memset(out, 0, sizeof *out);
    int rv;
    bool sites = false;
    chain_arb_replay rp;
    if (o->chain) {
        /* Refuse a run outside the policy before fetching anything from
         * its store (and long before any bond moves). */
        chain_session s;
        chain_arb_params p;
        if ((rv = chain_session_open(&s, o->chain, 1)))
            return rv;
        rv = check_terms(&s, o, &p);
        /* The trainer asked for proof of replay: every step is traced. */
        chain_arb_game g;
        if (!rv && !o->challenge && !(rv = chain_arb_get_game(&s.arb, &o->audit.run_id, NULL, &g)))
            sites = (g.flags & CHAIN_ARB_FLAG_REPLAY) != 0;
        if (!rv && sites)
            rv = chain_arb_get_replay(&s.arb, &o->audit.run_id, NULL, &rp);
        chain_session_close(&s);
        if (rv)
            return rv;
    }
    aud_report r;
    json_t *report;
    aud_audit_opts ao = o->audit;
    ao.sites = sites;
    ao.site_beacon = sites ? &rp.beacon : NULL;
    if ((rv = aud_audit(&ao, &r, &report)))
        return rv;
    out->finding = r.finding;
    if (o->chain)
        rv = commit_and_play(o, &r, report, out);
    else
        o->on_report(o->ctx, &r, report);
    json_decref(report);
    aud_report_free(&r);
    return rv;
}
