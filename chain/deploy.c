/* A deployment of the arbitration contract and its narrowing contract, and
 * its record (see deploy.h). */
#include "chain/deploy.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/narrow.h"
#include "chain/password.h"
#include "chain/session.h"
#include "common/fileio.h"

/* One creation transaction: its nonce and every version sent for it. */
struct deploy_tx {
    uint64_t nonce;
    ovt_hash hashes[CHAIN_TXM_MAX_VERSIONS];
    size_t n;
};

enum { TX_ARB, TX_NARROW };

/* The journal of a deployment under way: the plan and what was sent, for a
 * run again. For a pair, tx[TX_NARROW].nonce is fixed before the first send
 * (the arbitration contract is constructed with the address it gives). */
struct deploy_journal {
    const char *path; /* NULL: none */
    uint64_t chain_id;
    chain_address deployer;
    int pair;
    struct deploy_tx tx[2];
    int current; /* the transaction being sent */
    int write_failed;
};

static json_t *hashes_json(const struct deploy_tx *t)
{
    char h[67];
    json_t *hs = json_array();
    for (size_t i = 0; i < t->n; i++) {
        chain_hash_hex(h, &t->hashes[i]);
        json_array_append_new(hs, json_string(h));
    }
    return hs;
}

static int journal_write(struct deploy_journal *j)
{
    char from[43], at[43];
    chain_address narrow;
    if (j->pair && chain_create_address(&narrow, &j->deployer, j->tx[TX_NARROW].nonce))
        return ovt_fail_wrap(OVT_EINVAL, "the narrowing contract's address");
    chain_address_to_string(from, &j->deployer);
    json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:o}", "status", "sent", "chain_id", (json_int_t)j->chain_id,
                          "deployer", from, "nonce", (json_int_t)j->tx[TX_ARB].nonce, "tx_hashes",
                          hashes_json(&j->tx[TX_ARB]));
    if (o && j->pair) {
        chain_address_to_string(at, &narrow);
        json_object_set_new(o, "narrow",
                            json_pack("{s:s, s:I, s:o}", "address", at, "nonce", (json_int_t)j->tx[TX_NARROW].nonce,
                                      "tx_hashes", hashes_json(&j->tx[TX_NARROW])));
    }
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    int rc = text ? ovt_write_atomic(j->path, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
    free(text);
    json_decref(o);
    return rc;
}

/* txm's hook: every version is in the journal before the node sees it. */
static void journal_on_send(void *ctx, const chain_tx *tx, const ovt_hash *hash)
{
    struct deploy_journal *j = ctx;
    struct deploy_tx *t = &j->tx[j->current];
    if (t->n && t->nonce != tx->nonce)
        t->n = 0; /* a new nonce: the earlier hashes were never accepted */
    t->nonce = tx->nonce;
    if (t->n < CHAIN_TXM_MAX_VERSIONS)
        t->hashes[t->n++] = *hash;
    if (journal_write(j))
        j->write_failed = 1;
}

static json_t *tx_json(const chain_address *at, const chain_receipt *r, uint64_t nonce, int with_nonce)
{
    char addr[43], tx[67];
    chain_address_to_string(addr, at);
    chain_hash_hex(tx, &r->tx_hash);
    json_t *o = json_pack("{s:s, s:s, s:I, s:I}", "address", addr, "tx_hash", tx, "block_number",
                          (json_int_t)r->block_number, "gas_used", (json_int_t)r->gas_used);
    if (o && with_nonce)
        json_object_set_new(o, "nonce", json_integer((json_int_t)nonce));
    return o;
}

json_t *chain_deployment_json(const chain_deployment *d, int with_nonce)
{
    char from[43];
    chain_address_to_string(from, &d->deployer);
    json_t *o = tx_json(&d->address, &d->receipt, d->nonce, with_nonce);
    if (o && (json_object_set_new(o, "chain_id", json_integer((json_int_t)d->chain_id)) ||
              json_object_set_new(o, "deployer", json_string(from)))) {
        json_decref(o);
        return NULL;
    }
    if (o && d->has_narrow) {
        json_t *n = tx_json(&d->narrow, &d->narrow_receipt, d->narrow_nonce, with_nonce);
        if (!n || json_object_set_new(o, "narrow", n)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* One transaction's hashes from a record: tx_hashes under way, tx_hash
 * once finished. */
static int parse_tx(struct deploy_tx *t, const json_t *o, const char *path)
{
    json_t *jn = json_object_get(o, "nonce"), *hs = json_object_get(o, "tx_hashes"), *one = json_object_get(o,
                                                                                                          "tx_hash");
    if (!json_is_integer(jn) || json_integer_value(jn) < 0 || (!json_is_array(hs) && !json_is_string(one)) ||
        json_array_size(hs) > CHAIN_TXM_MAX_VERSIONS)
        return ovt_fail(OVT_EFORMAT, "%s is not a deployment record of ovt deploy (move it away to deploy anew)",
                        path);
    t->nonce = (uint64_t)json_integer_value(jn);
    t->n = 0;
    size_t i;
    json_t *v;
    if (!hs)
        return chain_parse_hash(&t->hashes[t->n++], "tx_hash", json_string_value(one));
    json_array_foreach(hs, i, v)
    {
        if (!json_is_string(v) || chain_parse_hash(&t->hashes[t->n++], "tx_hashes", json_string_value(v)))
            return ovt_fail(OVT_EFORMAT, "%s: a transaction hash is malformed", path);
    }
    return 0;
}

/* Reads the record at j->path into j (its pair flag is the record's). */
static int parse_record(struct deploy_journal *j)
{
    uint8_t *text;
    size_t len;
    int rc = ovt_read_file(j->path, &text, &len, 1 << 20);
    if (rc)
        return rc;
    json_error_t e;
    json_t *o = json_loadb((const char *)text, len, 0, &e);
    free(text);
    json_t *cid = json_object_get(o, "chain_id"), *narrow = json_object_get(o, "narrow");
    if (!o || !json_is_integer(cid) || json_integer_value(cid) < 0 ||
        chain_json_address(&j->deployer, o, "deployer") || (narrow && !json_is_object(narrow))) {
        json_decref(o);
        ovt_err_clear();
        return ovt_fail(OVT_EFORMAT, "%s is not a deployment record of ovt deploy (move it away to deploy anew)",
                        j->path);
    }
    j->chain_id = (uint64_t)json_integer_value(cid);
    j->pair = narrow != NULL;
    rc = parse_tx(&j->tx[TX_ARB], o, j->path);
    if (rc == 0 && narrow && (rc = parse_tx(&j->tx[TX_NARROW], narrow, j->path)) == 0 && j->tx[TX_NARROW].nonce == 0)
        rc = ovt_fail(OVT_EFORMAT, "%s: OvtNarrow's nonce 0 leaves none for the arbitration contract before it "
                                   "(move the file away to deploy anew)",
                      j->path);
    json_decref(o);
    return rc;
}

/* The confirmed receipt of whichever version of t was mined (*found), if any. */
static int find_mined(chain_txm *m, const struct deploy_tx *t, chain_receipt *r, int *found, const char *path)
{
    *found = 0;
    for (size_t i = 0; i < t->n; i++) {
        chain_receipt_free(r);
        int rc = chain_rpc_receipt(m->rpc, r, found, &t->hashes[i]);
        if (rc)
            return rc; /* never taken for "not mined": that would deploy again */
        if (!*found)
            continue;
        chain_receipt_free(r);
        if ((rc = chain_txm_wait_hash(m, &t->hashes[i], r)))
            return rc;
        if (!r->has_contract_address)
            return ovt_fail(OVT_EFORMAT, "transaction in %s created no contract", path);
        return 0;
    }
    *found = 0;
    return 0;
}

/* The contract at nonce `nonce` of the deployer, or a refusal: created
 * elsewhere, its nonce was taken by another transaction of the account. */
static int check_at(const chain_address *deployer, uint64_t nonce, const chain_address *got, const char *what)
{
    chain_address want;
    int rc = chain_create_address(&want, deployer, nonce);
    if (rc == 0 && !chain_address_eq(&want, got)) {
        char w[43], g[43];
        chain_address_to_string(w, &want);
        chain_address_to_string(g, got);
        rc = ovt_fail(OVT_EINVAL,
                      "%s was created at %s, not at %s (the deployer's nonce %llu): another transaction of the "
                      "account took that nonce, so the arbitration contract and OvtNarrow are not bound to each "
                      "other; deploy the pair again (move the --out file away)",
                      what, g, w, (unsigned long long)nonce);
    }
    return rc;
}

/* A run again with --out FILE: FILE exists. Each transaction of a finished
 * or interrupted deployment is found if mined (done[k]); what is not mined
 * is made anew by the caller. */
static int resume(struct deploy_journal *j, chain_txm *m, chain_deployment *d, int done[2])
{
    int pair = j->pair;
    int rc = parse_record(j);
    if (rc)
        return rc;
    if (j->chain_id != m->chain_id || !chain_address_eq(&j->deployer, &m->from))
        return ovt_fail(OVT_EINVAL,
                        "%s records a deployment on chain %llu by another account or chain; give another --out",
                        j->path, (unsigned long long)j->chain_id);
    if (j->pair != pair)
        return ovt_fail(OVT_EINVAL,
                        j->pair ? "%s records the arbitration contract with OvtNarrow: run without --no-narrow to "
                                  "finish or report it, or give another --out"
                                : "%s records the arbitration contract alone (deployed with --no-narrow, or before "
                                  "ovt deploy made the pair): run with --no-narrow to finish or report it, or give "
                                  "another --out to deploy the pair",
                        j->path);
    /* What the interrupted run sent lands first, then the chain is read. */
    if ((rc = chain_txm_settle(m)))
        return rc;
    if ((rc = find_mined(m, &j->tx[TX_ARB], &d->receipt, &done[TX_ARB], j->path)) || !done[TX_ARB])
        return rc;
    d->address = d->receipt.contract_address;
    if (!pair)
        return 0;
    if ((rc = check_at(&m->from, j->tx[TX_NARROW].nonce - 1, &d->address, "the arbitration contract")))
        return rc;
    if ((rc = find_mined(m, &j->tx[TX_NARROW], &d->narrow_receipt, &done[TX_NARROW], j->path)) || !done[TX_NARROW])
        return rc;
    d->narrow = d->narrow_receipt.contract_address;
    return check_at(&m->from, j->tx[TX_NARROW].nonce, &d->narrow, "OvtNarrow");
}

/* Fixes the pair's nonces before anything is sent: the account's next one
 * for the arbitration contract, the one after for OvtNarrow. */
static int plan_pair(struct deploy_journal *j, chain_txm *m)
{
    uint64_t pending = 0;
    int rc = chain_rpc_nonce(m->rpc, &pending, &m->from, "pending");
    if (rc)
        return ovt_fail_wrap(rc, "reading the deployer's nonce");
    uint64_t nonce = pending > m->next_nonce ? pending : m->next_nonce; /* what its next send takes */
    memset(j->tx, 0, sizeof j->tx);
    j->tx[TX_ARB].nonce = nonce;
    j->tx[TX_NARROW].nonce = nonce + 1;
    return j->path ? journal_write(j) : 0;
}

/* OvtNarrow must go at exactly its planned nonce: refused, with nothing
 * sent, when another transaction of the account took it or waits for it. */
static int narrow_nonce_free(chain_txm *m, uint64_t nonce, const chain_address *arb)
{
    uint64_t latest = 0, pending = 0;
    int rc = chain_rpc_nonce(m->rpc, &latest, &m->from, "latest");
    if (rc == 0)
        rc = chain_rpc_nonce(m->rpc, &pending, &m->from, "pending");
    if (rc)
        return ovt_fail_wrap(rc, "reading the deployer's nonce");
    chain_address at;
    if ((rc = chain_create_address(&at, &m->from, nonce)))
        return rc;
    char a[43], n[43];
    chain_address_to_string(a, arb);
    chain_address_to_string(n, &at);
    if (latest > nonce)
        return ovt_fail(OVT_EINVAL,
                        "the deployer's nonce %llu, where OvtNarrow had to be created, was taken by another "
                        "transaction of the account: the arbitration contract at %s is bound to %s, where OvtNarrow "
                        "can never be, so it cannot narrow; deploy the pair again (move the --out file away) from "
                        "an account nothing else uses meanwhile",
                        (unsigned long long)nonce, a, n);
    if (latest < nonce)
        return ovt_fail(OVT_EINVAL,
                        "the deployer's nonce is %llu, below %llu where OvtNarrow must be created (the chain lost "
                        "the arbitration contract's creation in a reorg?); run again with the same --out",
                        (unsigned long long)latest, (unsigned long long)nonce);
    if (pending > nonce)
        return ovt_fail(OVT_EINVAL,
                        "another transaction of the deployer is pending at nonce %llu, where OvtNarrow (%s, the "
                        "address the arbitration contract at %s is bound to) must be created: wait until it is "
                        "mined or dropped and run again with the same --out",
                        (unsigned long long)nonce, n, a);
    return 0;
}

/* Sends what the record does not show mined: the arbitration contract (for
 * a pair, bound to OvtNarrow's planned address), then OvtNarrow. */
static int send_missing(struct deploy_journal *j, chain_txm *m, chain_deployment *d, const int done[2])
{
    chain_arb arb;
    int rc = 0;
    if (!done[TX_ARB]) {
        chain_address at;
        if (j->pair && ((rc = plan_pair(j, m)) || (rc = chain_create_address(&at, &m->from, j->tx[TX_NARROW].nonce))))
            return rc;
        j->current = TX_ARB;
        if ((rc = chain_arb_deploy(&arb, m, j->pair ? &at : NULL, &d->receipt)))
            return rc;
        d->address = arb.address;
        /* against the plan: the nonce it was bound for, whatever nonce the manager ended up using */
        if (j->pair && (rc = check_at(&m->from, j->tx[TX_NARROW].nonce - 1, &d->address, "the arbitration contract")))
            return rc;
    }
    if (j->pair && !done[TX_NARROW]) {
        chain_narrow n;
        j->current = TX_NARROW;
        if ((rc = narrow_nonce_free(m, j->tx[TX_NARROW].nonce, &d->address)) ||
            (rc = chain_narrow_deploy(&n, m, &d->address, &d->narrow_receipt)))
            return rc;
        d->narrow = n.address;
        rc = check_at(&m->from, j->tx[TX_NARROW].nonce, &d->narrow, "OvtNarrow");
    }
    return rc;
}

/* Deploys, finishes or reports the deployment, checks the code is there,
 * writes the finished record. */
static int deploy(const chain_deploy_opts *o, chain_txm *m, chain_deployment *d)
{
    struct deploy_journal j;
    memset(&j, 0, sizeof j);
    j.path = o->record;
    j.pair = !o->alone;
    j.chain_id = m->chain_id;
    j.deployer = m->from;
    int rc = 0, done[2] = {0, 0};
    if (o->record && access(o->record, F_OK) == 0)
        rc = resume(&j, m, d, done);
    if (o->record) {
        m->on_send = journal_on_send;
        m->on_send_ctx = &j;
    }
    if (rc == 0)
        rc = send_missing(&j, m, d, done);
    if (rc == 0 && j.write_failed)
        rc = ovt_fail(OVT_EIO, "the contracts are deployed but %s could not be written", o->record);
    m->on_send = NULL;
    chain_arb check;
    if (rc == 0)
        rc = chain_arb_attach(&check, m->rpc, &d->address);
    if (rc == 0 && j.pair)
        rc = chain_arb_attach(&check, m->rpc, &d->narrow);
    d->chain_id = m->chain_id;
    d->deployer = m->from;
    d->nonce = j.tx[TX_ARB].nonce;
    d->has_narrow = j.pair;
    d->narrow_nonce = j.pair ? j.tx[TX_NARROW].nonce : 0;
    if (rc == 0 && o->record) {
        json_t *rec = chain_deployment_json(d, 1);
        char *text = rec ? json_dumps(rec, JSON_INDENT(2)) : NULL;
        rc = text ? ovt_write_atomic(o->record, text, strlen(text), 0644) : ovt_fail(OVT_ENOMEM, "out of memory");
        free(text);
        json_decref(rec);
    }
    return rc;
}

int chain_deploy(const chain_deploy_opts *o, chain_deployment *out)
{
    memset(out, 0, sizeof *out);
    chain_privkey key;
    chain_rpc *rpc = NULL;
    chain_txm m;
    memset(&m, 0, sizeof m);
    int rc = chain_load_key(&key, o->keystore, o->password_file, o->private_key);
    if (rc == 0) {
        chain_rpc_opts ro;
        chain_rpc_opts_default(&ro);
        ro.custom_errors = chain_arb_errors;
        rc = chain_rpc_open(&rpc, o->rpc_url, &ro);
    }
    if (rc == 0)
        rc = chain_txm_init(&m, rpc, &key, &o->txm);
    ovt_wipe(&key, sizeof key);
    if (rc == 0)
        rc = deploy(o, &m, out);
    if (rc != 0)
        chain_deployment_free(out);
    if (m.rpc)
        chain_txm_free(&m);
    chain_rpc_close(rpc);
    return rc;
}

void chain_deployment_free(chain_deployment *d)
{
    chain_receipt_free(&d->receipt);
    chain_receipt_free(&d->narrow_receipt);
    memset(d, 0, sizeof *d);
}
