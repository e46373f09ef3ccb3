/* A deployment of the arbitration contract and its record (see deploy.h). */
#include "chain/deploy.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/password.h"
#include "chain/session.h"
#include "common/fileio.h"

/* The journal of a deployment under way: what was sent, for a run again. */
struct deploy_journal {
    const char *path; /* NULL: none */
    uint64_t chain_id;
    chain_address deployer;
    uint64_t nonce;
    ovt_hash hashes[CHAIN_TXM_MAX_VERSIONS];
    size_t n;
    int write_failed;
};

static int journal_write(struct deploy_journal *j)
{
    char from[43], h[67];
    chain_address_to_string(from, &j->deployer);
    json_t *hs = json_array();
    for (size_t i = 0; i < j->n; i++) {
        chain_hash_hex(h, &j->hashes[i]);
        json_array_append_new(hs, json_string(h));
    }
    json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:o}", "status", "sent", "chain_id", (json_int_t)j->chain_id,
                          "deployer", from, "nonce", (json_int_t)j->nonce, "tx_hashes", hs);
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
    if (j->n && j->nonce != tx->nonce)
        j->n = 0; /* a new nonce: the earlier hashes were never accepted */
    j->nonce = tx->nonce;
    if (j->n < CHAIN_TXM_MAX_VERSIONS)
        j->hashes[j->n++] = *hash;
    if (journal_write(j))
        j->write_failed = 1;
}

/* The finished deployment's record: what `ovt deploy --json` prints, and the nonce. */
static json_t *record_json(const chain_arb *arb, const chain_address *deployer, const chain_receipt *r, uint64_t nonce)
{
    char addr[43], from[43], tx[67];
    chain_address_to_string(addr, &arb->address);
    chain_address_to_string(from, deployer);
    chain_hash_hex(tx, &r->tx_hash);
    return json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I}", "address", addr, "chain_id", (json_int_t)arb->chain_id,
                     "deployer", from, "tx_hash", tx, "block_number", (json_int_t)r->block_number, "gas_used",
                     (json_int_t)r->gas_used, "nonce", (json_int_t)nonce);
}

/* A run again with --out FILE: FILE exists. A finished deployment whose code
 * is still there is reported again (*done); one under way is finished when
 * one of its transactions was mined (*done), else a fresh one is made. */
static int resume(struct deploy_journal *j, chain_txm *m, chain_arb *arb, chain_receipt *r, int *done)
{
    *done = 0;
    uint8_t *text;
    size_t len;
    int rc = ovt_read_file(j->path, &text, &len, 1 << 20);
    if (rc)
        return rc;
    json_error_t e;
    json_t *o = json_loadb((const char *)text, len, 0, &e);
    free(text);
    json_t *cid = json_object_get(o, "chain_id"), *jn = json_object_get(o, "nonce");
    uint64_t chain_id = (uint64_t)json_integer_value(cid), nonce = (uint64_t)json_integer_value(jn);
    chain_address from;
    if (!o || !json_is_integer(cid) || !json_is_integer(jn) || json_integer_value(cid) < 0 ||
        json_integer_value(jn) < 0 || chain_json_address(&from, o, "deployer")) {
        json_decref(o);
        ovt_err_clear();
        return ovt_fail(OVT_EFORMAT, "%s is not a deployment record of ovt deploy (move it away to deploy anew)",
                        j->path);
    }
    if (chain_id != m->chain_id || !chain_address_eq(&from, &m->from)) {
        json_decref(o);
        return ovt_fail(OVT_EINVAL,
                        "%s records a deployment on chain %llu by another account or chain; give another --out",
                        j->path, (unsigned long long)chain_id);
    }
    /* What the interrupted run sent lands first, then the chain is read. */
    if ((rc = chain_txm_settle(m))) {
        json_decref(o);
        return rc;
    }
    json_t *hs = json_object_get(o, "tx_hashes");
    ovt_hash h;
    if (!hs && json_object_get(o, "tx_hash")) /* a finished record */
        hs = json_pack("[O]", json_object_get(o, "tx_hash"));
    else
        json_incref(hs);
    size_t i;
    json_t *v;
    json_array_foreach(hs, i, v)
    {
        if (!json_is_string(v) || chain_parse_hash(&h, "tx_hashes", json_string_value(v))) {
            rc = ovt_fail(OVT_EFORMAT, "%s: a transaction hash is malformed", j->path);
            break;
        }
        chain_receipt_free(r);
        int found;
        if ((rc = chain_rpc_receipt(m->rpc, r, &found, &h)))
            break;
        if (!found)
            continue;
        chain_receipt_free(r);
        if ((rc = chain_txm_wait_hash(m, &h, r)))
            break;
        if (!r->has_contract_address) {
            rc = ovt_fail(OVT_EFORMAT, "transaction in %s created no contract", j->path);
            break;
        }
        arb->rpc = m->rpc;
        arb->address = r->contract_address;
        arb->chain_id = m->chain_id;
        j->nonce = nonce;
        *done = 1;
        break;
    }
    json_decref(hs);
    json_decref(o);
    return rc;
}

/* Sends the creation transaction, or finishes the one the record names. */
static int deploy(const chain_deploy_opts *o, chain_txm *m, chain_arb *arb, chain_receipt *receipt)
{
    struct deploy_journal j;
    memset(&j, 0, sizeof j);
    j.path = o->record;
    int rc = 0, done = 0;
    if (o->record) {
        j.chain_id = m->chain_id;
        j.deployer = m->from;
        if (access(o->record, F_OK) == 0)
            rc = resume(&j, m, arb, receipt, &done);
        m->on_send = journal_on_send;
        m->on_send_ctx = &j;
    }
    if (rc == 0 && !done) {
        rc = chain_arb_deploy(arb, m, NULL, receipt);
        if (rc == 0 && j.write_failed)
            rc = ovt_fail(OVT_EIO, "the contract is deployed but %s could not be written", o->record);
    }
    m->on_send = NULL;
    if (rc == 0) {
        chain_arb check;
        rc = chain_arb_attach(&check, m->rpc, &arb->address);
    }
    if (rc == 0 && o->record) {
        json_t *rec = record_json(arb, &m->from, receipt, j.nonce);
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
    chain_arb arb;
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
        rc = deploy(o, &m, &arb, &out->receipt);
    if (rc == 0) {
        out->address = arb.address;
        out->chain_id = arb.chain_id;
        out->deployer = m.from;
    } else {
        chain_receipt_free(&out->receipt);
    }
    if (m.rpc)
        chain_txm_free(&m);
    chain_rpc_close(rpc);
    return rc;
}

void chain_deployment_free(chain_deployment *d)
{
    chain_receipt_free(&d->receipt);
    memset(d, 0, sizeof *d);
}
