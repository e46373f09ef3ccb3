/* The commitment receipt (see commit.h). */
#include "trainer/commit.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"

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

int trn_commit_receipt_json(const trn_commit_receipt *r, char **text)
{
    *text = NULL;
    json_t *o = json_object();
    if (!o)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "chain_id", json_integer((json_int_t)r->chain_id));
    set_address(o, "contract", &r->contract);
    set_hash(o, "run_id", &r->run_id);
    set_address(o, "trainer", &r->params.trainer);
    set_address(o, "auditor", &r->params.auditor);
    set_address(o, "arbiter", &r->params.arbiter);
    set_hash(o, "config_hash", &r->params.config_hash);
    set_hash(o, "dataset_hash", &r->params.dataset_hash);
    json_object_set_new(o, "steps", json_integer((json_int_t)r->params.steps));
    json_object_set_new(o, "commit_timeout", json_integer(r->params.commit_timeout));
    json_object_set_new(o, "move_timeout", json_integer(r->params.move_timeout));
    json_object_set_new(o, "verdict_timeout", json_integer(r->params.arbiter_timeout));
    set_wei(o, "trainer_bond", &r->params.trainer_bond);
    set_wei(o, "auditor_bond", &r->params.auditor_bond);
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
