/* The commitment receipt (see commit.h). */
#include "party/commit.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"
#include "common/fileio.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "dp/ranks.h"
#include "trainer/rundata.h"

static void set_hash(json_t *o, const char *key, const ovt_hash *h)
{
    char hex[67];
    chain_hash_hex(hex, h);
    json_object_set_new(o, key, json_string(hex));
}

static void set_address(json_t *o, const char *key, const chain_address *a)
{
    char s[43];
    chain_address_to_string(s, a);
    json_object_set_new(o, key, json_string(s));
}

static void set_wei(json_t *o, const char *key, const chain_u256 *v)
{
    char s[80];
    chain_u256_to_dec(s, v);
    json_object_set_new(o, key, json_string(s));
}

int party_receipt_json(const party_receipt *r, char **text)
{
    *text = NULL;
    json_t *o = json_object();
    if (!o)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    json_object_set_new(o, "version", json_integer(3));
    json_object_set_new(o, "chain_id", json_integer((json_int_t)r->chain_id));
    set_address(o, "contract", &r->contract);
    set_hash(o, "run_id", &r->run_id);
    set_address(o, "trainer", &r->params.trainer);
    set_address(o, "auditor", &r->params.auditor);
    set_address(o, "arbiter", &r->params.arbiters[0]);
    json_t *committee = json_array();
    for (unsigned k = 0; k < chain_arb_arbiter_count(&r->params); k++) {
        char addr[43];
        chain_address_to_string(addr, &r->params.arbiters[k]);
        json_array_append_new(committee, json_string(addr));
    }
    json_object_set_new(o, "arbiters", committee);
    json_object_set_new(o, "threshold", json_integer(r->params.threshold));
    set_wei(o, "arbiter_bond", &r->params.arbiter_bond);
    set_hash(o, "config_hash", &r->params.config_hash);
    set_hash(o, "dataset_hash", &r->params.dataset_hash);
    json_object_set_new(o, "steps", json_integer((json_int_t)r->params.steps));
    json_object_set_new(o, "commit_timeout", json_integer(r->params.commit_timeout));
    json_object_set_new(o, "move_timeout", json_integer(r->params.move_timeout));
    json_object_set_new(o, "verdict_timeout", json_integer(r->params.arbiter_timeout));
    set_wei(o, "trainer_bond", &r->params.trainer_bond);
    set_wei(o, "auditor_bond", &r->params.auditor_bond);
    char nonce[24]; /* a decimal string: JSON readers lose integers above 2^53 */
    snprintf(nonce, sizeof nonce, "%llu", (unsigned long long)r->params.nonce);
    json_object_set_new(o, "nonce", json_string(nonce));
    set_hash(o, "root", &r->root);
    char sig[133];
    sig[0] = '0';
    sig[1] = 'x';
    ovt_hex_encode(sig + 2, r->signature, 65);
    json_object_set_new(o, "signature", json_string(sig));
    json_object_set_new(o, "open_tx", json_null());
    if (r->has_open_tx)
        set_hash(o, "open_tx", &r->open_tx);
    set_hash(o, "commit_tx", &r->commit_tx);
    json_object_set_new(o, "store", r->store ? json_string(r->store) : json_null());
    json_object_set_new(o, "data", r->data ? json_string(r->data) : json_null());
    if (r->store)
        set_hash(o, "steps_table", &r->steps_blob);
    *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *text ? 0 : ovt_fail(OVT_ENOMEM, "out of memory");
}

int party_publish_init(store_ctx *s, const char *dir)
{
    trn_run_config rc;
    ovt_hash ch, name;
    char path[4096];
    trn_state *st = NULL;
    int rv = trn_run_load_config(dir, &rc, &ch);
    if (rv || !trn_config_has_init(&rc))
        return rv;
    if ((rv = trn_run_path(path, sizeof path, dir, "ckpt", 0, "ckpt")) || (rv = trn_checkpoint_read(&st, path)))
        return ovt_fail_wrap(rv, "the run starts from given parameters (init_hash) and needs its state 0");
    if (memcmp(st->config_hash.b, ch.b, 32) != 0)
        rv = ovt_fail(OVT_EFORMAT, "%s belongs to another run config", path);
    else if ((rv = trn_state_check_start(st)))
        rv = ovt_fail_wrap(rv, "%s", path);
    else if (!(rv = store_put(s, st->params, st->layout.nparams * sizeof(float), &name)) &&
             memcmp(name.b, rc.init_hash.b, 32) != 0)
        rv = ovt_fail(OVT_EFORMAT, "the parameters of %s are not the ones init_hash names", path);
    trn_state_free(st);
    return rv;
}

/* A sharded run's RUNDIR/ranks.json (which process computed which shard)
 * as a blob the manifest names; nothing when the run has none (one shard,
 * or a run from before ranks.json). It is the trainer's own record, not
 * committed: an arbiter uses it only to name a rank and host. A file that
 * ranks.json.sha256 does not bind, or that is malformed, is refused
 * (dp_ranks_load): the manifest's "ranks" then binds only what the run
 * wrote. */
static int publish_ranks(store_ctx *s, const char *dir, store_manifest *m)
{
    uint8_t *buf = NULL;
    size_t len;
    bool bound;
    int rv = dp_ranks_load(dir, &buf, &len, &bound);
    if (rv == OVT_ENOTFOUND) {
        ovt_err_clear();
        return 0;
    }
    if (rv)
        return rv;
    rv = store_put(s, buf, len, &m->ranks_hash);
    free(buf);
    if (!rv)
        m->has_ranks = true;
    return rv;
}

int party_publish_run(store_ctx *s, const char *dir, const trn_step_table *t, const char *data_path,
                    const ovt_hash *dataset_hash, const ovt_hash *run_id, store_manifest *m)
{
    memset(m, 0, sizeof *m);
    m->run_id = *run_id;
    m->config_hash = t->config_hash;
    m->dataset_hash = *dataset_hash;
    m->steps = t->count - 1;
    char path[4096];
    ovt_hash h;
    uint8_t *buf = NULL;
    size_t len;
    int rv;
    if ((rv = trn_run_path(path, sizeof path, dir, NULL, 0, "config.bin")) || (rv = store_put_file(s, path, &h)))
        return rv;
    if (memcmp(h.b, t->config_hash.b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "%s is not the config of the step table", path);
    if ((rv = store_put_file(s, data_path, &h)))
        return rv;
    if (memcmp(h.b, dataset_hash->b, 32) != 0)
        return ovt_fail(OVT_ECRYPTO, "%s is not the run's dataset (SHA-256 differs)", data_path);
    if ((rv = party_publish_init(s, dir)))
        return rv;
    for (size_t i = 1; i < t->count; i++) {
        if ((rv = trn_run_path(path, sizeof path, dir, "logs", i, "rlog")) || (rv = store_put_file(s, path, &h)))
            return rv;
        if (memcmp(h.b, t->steps[i].log_hash.b, 32) != 0)
            return ovt_fail(OVT_EFORMAT, "%s is not the log the step table names for step %zu", path, i);
    }
    if ((rv = publish_ranks(s, dir, m)))
        return rv;
    if (!(rv = trn_step_table_encode(t, &buf, &len)) && !(rv = store_put(s, buf, len, &m->steps_hash)))
        rv = store_put_manifest(s, m);
    free(buf);
    return rv;
}
