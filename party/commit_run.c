/* `ovt commit`'s work: open the run (or join it), publish it, commit its
 * root, with RUNDIR/commit.json so that a run again continues (see
 * commit.h). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "party/commit.h"
#include "trainer/rundata.h"

struct commit {
    const party_commit_opts *o;
    chain_arb_params p; /* the run's terms, completed from RUNDIR and the chain */
    chain_session s;
    trn_step_table t;
    party_commit_journal j;
    int resumed;        /* j is the journal of a commit under way */
    ovt_hash run_id, root, steps_blob;
    chain_receipt open_r, commit_r;
    uint8_t sig[65];
};

/* Test-only fault injection: OVT_TEST_EXIT_AT=opened|committed ends the
 * process (status 86) at that point, as a kill would (with
 * OVT_TEST_EXIT_AFTER_SEND, chain/txm.c, for the moments after a send). */
static void fault_point(const char *name)
{
    const char *at = getenv("OVT_TEST_EXIT_AT");
    if (at && strcmp(at, name) == 0) {
        fflush(NULL);
        _exit(86);
    }
}

/* The run's config and step table: its configHash, datasetHash and steps. */
static int load_run(struct commit *c)
{
    char path[4096];
    trn_run_config rc;
    int rv = trn_run_load_config(c->o->dir, &rc, &c->p.config_hash);
    if (rv || (rv = trn_run_path(path, sizeof path, c->o->dir, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&c->t, path)))
        return rv;
    if (memcmp(c->t.config_hash.b, c->p.config_hash.b, 32) != 0 || c->t.count < 2)
        return ovt_fail(OVT_EFORMAT, "%s does not belong to %s/config.bin or holds no steps", path, c->o->dir);
    c->p.dataset_hash = rc.dataset_hash;
    c->p.steps = c->t.count - 1;
    return 0;
}

/* Whether RUNDIR/receipt.json is that of the journal's run: that commit
 * finished, and running ovt commit again commits the directory anew. */
static bool journal_finished(const char *dir, const party_commit_journal *j)
{
    char path[4096];
    uint8_t *text;
    size_t len;
    if (trn_run_path(path, sizeof path, dir, NULL, 0, "receipt.json") || ovt_read_file(path, &text, &len, 1 << 20)) {
        ovt_err_clear();
        return false;
    }
    json_t *o = json_loadb((const char *)text, len, 0, NULL);
    free(text);
    ovt_hash rid;
    bool same = o && chain_json_hash(&rid, o, "run_id") == 0 && memcmp(rid.b, j->run_id.b, 32) == 0;
    ovt_err_clear();
    json_decref(o);
    return same;
}

/* A run again continues what the journal says was begun: c->resumed. */
static int resume_point(struct commit *c)
{
    const char *dir = c->o->dir;
    int rv = party_commit_journal_load(dir, &c->j);
    if (rv == 0)
        c->resumed = !journal_finished(dir, &c->j); /* a finished commit is no resume point: a new run */
    else if (rv != OVT_ENOTFOUND)
        return rv;
    if (c->resumed && (c->j.chain_id != c->s.arb.chain_id || !chain_address_eq(&c->j.contract, &c->s.arb.address))) {
        char jc[43];
        chain_address_to_string(jc, &c->j.contract);
        return ovt_fail(OVT_EINVAL,
                        "%s/commit.json records a commit on chain %llu, contract %s: this run was committed there; "
                        "move the file away to commit it to another contract",
                        dir, (unsigned long long)c->j.chain_id, jc);
    }
    if (c->resumed && !c->j.joined) {
        /* The journal's run may never have been opened: its open reverted
         * (the contract refused the terms) or was never sent. Once nothing
         * this account sent is pending, a run the chain does not know is no
         * resume point, and these flags start afresh. */
        chain_arb_params jp;
        if ((rv = chain_txm_settle(&c->s.txm)))
            return rv;
        rv = chain_arb_get_run(&c->s.arb, &c->j.run_id, NULL, &jp);
        if (rv == OVT_EREVERT) {
            ovt_err_clear();
            c->resumed = 0;
        } else if (rv) {
            return rv;
        }
    }
    if (c->resumed && !c->o->have_run_id && !c->j.joined) {
        if (c->o->have_nonce && c->p.nonce != c->j.nonce)
            return ovt_fail(OVT_EINVAL, "--nonce %llu differs from the nonce %llu of the run this directory opened",
                            (unsigned long long)c->p.nonce, (unsigned long long)c->j.nonce);
        c->p.nonce = c->j.nonce;
    }
    return 0;
}

static int same_params(const chain_arb_params *on_chain, const chain_arb_params *mine)
{
    return chain_address_eq(&on_chain->trainer, &mine->trainer) &&
           memcmp(on_chain->config_hash.b, mine->config_hash.b, 32) == 0 &&
           memcmp(on_chain->dataset_hash.b, mine->dataset_hash.b, 32) == 0 && on_chain->steps == mine->steps;
}

/* The runId: the run joined (its terms checked against the policy and
 * taken), or the one these terms open. Then the journal: a new one written
 * before anything is sent, or the one resumed checked to name this run. */
static int name_run(struct commit *c)
{
    const party_commit_opts *o = c->o;
    int rv;
    if (o->have_run_id) {
        chain_arb_params on_chain;
        c->run_id = o->run_id;
        if ((rv = chain_arb_get_run(&c->s.arb, &c->run_id, NULL, &on_chain)))
            return rv;
        if (!same_params(&on_chain, &c->p))
            return ovt_fail(OVT_EINVAL, "run --run-id was opened for another trainer, config, dataset or step count");
        if ((rv = party_policy_check(o->policy, &on_chain, c->s.arb.chain_id, &c->s.arb.address, 1)) ||
            (rv = chain_arb_find_nonce(&c->s.arb, &c->run_id, &on_chain)))
            return rv;
        c->p = on_chain;
    } else {
        if (!o->have_parties)
            return ovt_fail(OVT_EINVAL, "--auditor and --arbiter are required to open a run");
        chain_arb_run_id(&c->run_id, c->s.arb.chain_id, &c->s.arb.address, &c->p);
    }
    if (c->resumed && memcmp(c->j.run_id.b, c->run_id.b, 32) != 0) {
        char jr[67];
        chain_hash_hex(jr, &c->j.run_id);
        return ovt_fail(OVT_EINVAL,
                        "%s/commit.json records run %s, but these flags name another run (different terms or "
                        "--run-id): run again with the same flags, or move the file away",
                        o->dir, jr);
    }
    if (c->resumed)
        return chain_txm_settle(&c->s.txm); /* what the interrupted run sent lands before the chain is read */
    c->j = (party_commit_journal){.chain_id = c->s.arb.chain_id, .contract = c->s.arb.address, .run_id = c->run_id,
                                  .nonce = c->p.nonce, .joined = o->have_run_id};
    if ((rv = chain_rpc_block_number(c->s.rpc, &c->j.from_block)))
        return rv;
    return party_commit_journal_save(o->dir, &c->j);
}

static int publish(struct commit *c)
{
    store_ctx *s;
    int rv = store_open(&s, c->o->store);
    if (rv)
        return rv;
    store_manifest m;
    rv = party_publish_run(s, c->o->dir, &c->t, c->o->data, &c->p.dataset_hash, &c->run_id, &m);
    if (!rv)
        c->steps_blob = m.steps_hash;
    store_close(s);
    return rv;
}

/* Opens the run (unless joined) and commits the root, each only if the
 * interrupted run did not: its transaction is then waited on instead. */
static int open_and_commit(struct commit *c)
{
    int rv, found = 0;
    ovt_hash tx;
    if (!c->o->have_run_id) {
        chain_arb_params on_chain;
        if (c->resumed && chain_arb_get_run(&c->s.arb, &c->run_id, NULL, &on_chain) == 0 &&
            (rv = party_commit_find_event(&c->s.arb, &c->run_id, CHAIN_ARB_EV_RUN_OPENED, NULL, c->j.from_block,
                                          &tx, &found)))
            return rv;
        ovt_err_clear();
        if (found)
            rv = chain_txm_wait_hash(&c->s.txm, &tx, &c->open_r); /* opened by the interrupted run */
        else
            rv = chain_arb_open(&c->s.arb, &c->s.txm, &c->p, &c->run_id, &c->open_r);
        if (rv)
            return rv;
        fault_point("opened");
    }
    found = 0;
    if (c->resumed && (rv = party_commit_find_event(&c->s.arb, &c->run_id, CHAIN_ARB_EV_COMMITTED, &c->s.txm.from,
                                                    c->j.from_block, &tx, &found)))
        return rv;
    if (found) { /* committed by the interrupted run: the same deterministic signature */
        if ((rv = chain_arb_sign_commitment(c->sig, &c->s.txm.key, c->s.arb.chain_id, &c->s.arb.address, &c->run_id,
                                            &c->root, &c->p)) ||
            (rv = chain_txm_wait_hash(&c->s.txm, &tx, &c->commit_r)))
            return rv;
    } else if (c->o->replay ? (rv = chain_arb_commit_replay(&c->s.arb, &c->s.txm, &c->run_id, &c->root, NULL, c->sig,
                                                            &c->commit_r))
                            : (rv = chain_arb_commit(&c->s.arb, &c->s.txm, &c->run_id, &c->root, NULL, c->sig,
                                                     &c->commit_r))) {
        return rv;
    }
    fault_point("committed");
    return 0;
}

/* RUNDIR/receipt.json. */
static int write_receipt(struct commit *c, party_commit_result *out)
{
    const party_commit_opts *o = c->o;
    out->receipt = (party_receipt){.chain_id = c->s.arb.chain_id, .contract = c->s.arb.address, .params = c->p,
                                   .run_id = c->run_id, .root = c->root, .commit_tx = c->commit_r.tx_hash,
                                   .has_open_tx = !o->have_run_id, .open_tx = c->open_r.tx_hash, .store = o->store,
                                   .data = o->data, .steps_blob = c->steps_blob};
    memcpy(out->receipt.signature, c->sig, 65);
    int rv = party_receipt_json(&out->receipt, &out->json);
    if (!rv && !(rv = trn_run_path(out->path, sizeof out->path, o->dir, NULL, 0, "receipt.json")))
        rv = ovt_write_atomic(out->path, out->json, strlen(out->json), 0644);
    return rv;
}

int party_commit_run(const party_commit_opts *o, party_commit_result *out)
{
    memset(out, 0, sizeof *out);
    struct commit c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.p = o->terms;
    int rv = load_run(&c);
    if (rv || (rv = chain_session_open(&c.s, o->chain, 1)))
        goto done;
    c.p.trainer = c.s.txm.from;
    if ((rv = resume_point(&c)) || (rv = name_run(&c)) || (rv = trn_step_table_root(&c.root, &c.t, &c.run_id)))
        goto done;
    if (o->store && (rv = publish(&c)))
        goto done;
    if (!(rv = open_and_commit(&c)))
        rv = write_receipt(&c, out);
done:
    if (rv)
        party_commit_result_free(out);
    chain_receipt_free(&c.open_r);
    chain_receipt_free(&c.commit_r);
    chain_session_close(&c.s);
    trn_step_table_free(&c.t);
    return rv;
}

void party_commit_result_free(party_commit_result *r)
{
    free(r->json);
    memset(r, 0, sizeof *r);
}
