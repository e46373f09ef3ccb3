/* A commitment receipt checked offline (party/verify.h). */
#include "party/verify.h"
#include "party/model_check.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "chain/keys.h"
#include "chain/parse.h"
#include "chain/session.h"
#include "common/fileio.h"
#include "common/parse.h"
#include "trainer/check.h"
#include "trainer/run.h"
#include "trainer/step.h"

/* The checks made so far, and where each goes. */
typedef struct {
    const party_verify_opts *o;
    bool all_ok;
} checks;

static void check_add(checks *c, const char *name, bool ok, const char *fmt, ...) OVT_PRINTF(4, 5);
static void check_add(checks *c, const char *name, bool ok, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    c->all_ok = c->all_ok && ok;
    party_check pc = {.name = name, .ok = ok, .detail = detail};
    if (c->o->on_check)
        c->o->on_check(c->o->arg, &pc);
}

static void hex(char out[67], const ovt_hash *h)
{
    chain_hash_hex(out, h);
}

static int json_hash(ovt_hash *out, json_t *o, const char *key, const char *what)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s)
        return ovt_fail(OVT_EFORMAT, "%s has no \"%s\"", what, key);
    return chain_parse_hash(out, key, s) ? ovt_fail_wrap(OVT_EFORMAT, "%s", what) : 0;
}

typedef struct {
    uint64_t chain_id;
    chain_address contract;
    chain_arb_params p; /* trainer, configHash, datasetHash, steps always; the rest when has_params */
    int version;
    bool has_params;    /* version 3: every RunParams field, the nonce and the committee included */
    ovt_hash run_id, root;
    uint8_t sig[65];
    char data[4096];
} receipt;

/* The committee (receipt version 3): "arbiters" (1 to 5 addresses, the
 * first also as "arbiter"), "threshold" as given at open, "arbiter_bond". */
static int receipt_read_committee(receipt *r, json_t *j, const char *path)
{
    json_t *list = json_object_get(j, "arbiters"), *m = json_object_get(j, "threshold");
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n < 1 || n > CHAIN_ARB_MAX_ARBITERS)
        return ovt_fail(OVT_EFORMAT, "%s: \"arbiters\" must list 1 to %d addresses", path, CHAIN_ARB_MAX_ARBITERS);
    for (size_t k = 0; k < n; k++) {
        const char *s = json_string_value(json_array_get(list, k));
        if (!s || chain_address_from_string(&r->p.arbiters[k], s))
            return ovt_fail(OVT_EFORMAT, "%s: \"arbiters\"[%zu] must be an address", path, k);
    }
    if (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) > CHAIN_ARB_MAX_ARBITERS)
        return ovt_fail(OVT_EFORMAT, "%s: \"threshold\" must be 0 to %d", path, CHAIN_ARB_MAX_ARBITERS);
    r->p.threshold = (unsigned)json_integer_value(m);
    const char *s = json_string_value(json_object_get(j, "arbiter_bond"));
    if (!s || chain_u256_from_dec(&r->p.arbiter_bond, s))
        return ovt_fail(OVT_EFORMAT, "%s: \"arbiter_bond\" must be a decimal string of wei", path);
    return 0;
}

/* The RunParams fields beyond those the signature covers (receipt version 3):
 * with them the runId can be derived as the contract derives it. */
static int receipt_read_params(receipt *r, json_t *j, const char *path)
{
    const char *addr[] = {"auditor", "arbiter"}, *wei[] = {"trainer_bond", "auditor_bond"},
               *secs[] = {"commit_timeout", "move_timeout", "verdict_timeout"};
    chain_address *addr_out[] = {&r->p.auditor, &r->p.arbiters[0]};
    chain_u256 *wei_out[] = {&r->p.trainer_bond, &r->p.auditor_bond};
    uint32_t *secs_out[] = {&r->p.commit_timeout, &r->p.move_timeout, &r->p.arbiter_timeout};
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_object_get(j, addr[i]));
        if (!s || chain_address_from_string(addr_out[i], s))
            return ovt_fail(OVT_EFORMAT, "%s: \"%s\" must be an address", path, addr[i]);
        s = json_string_value(json_object_get(j, wei[i]));
        if (!s || chain_u256_from_dec(wei_out[i], s))
            return ovt_fail(OVT_EFORMAT, "%s: \"%s\" must be a decimal string of wei", path, wei[i]);
    }
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(j, secs[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
            return ovt_fail(OVT_EFORMAT, "%s: \"%s\" must be a number of seconds", path, secs[i]);
        *secs_out[i] = (uint32_t)json_integer_value(v);
    }
    const char *nonce = json_string_value(json_object_get(j, "nonce"));
    if (!nonce || ovt_parse_u64(&r->p.nonce, "\"nonce\"", nonce, 0, UINT64_MAX))
        return ovt_fail(OVT_EFORMAT, "%s: \"nonce\" must be a decimal string", path);
    return receipt_read_committee(r, j, path);
}

static int receipt_read(receipt *r, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, 1 << 20);
    if (rv)
        return rv;
    json_error_t err;
    json_t *j = json_loadb((const char *)buf, len, 0, &err);
    free(buf);
    if (!json_is_object(j)) {
        json_decref(j);
        return ovt_fail(OVT_EFORMAT, "%s is not a JSON object (line %d: %s)", path, err.line, err.text);
    }
    memset(r, 0, sizeof *r);
    json_t *cid = json_object_get(j, "chain_id"), *steps = json_object_get(j, "steps");
    const char *contract = json_string_value(json_object_get(j, "contract"));
    const char *trainer = json_string_value(json_object_get(j, "trainer"));
    const char *sig = json_string_value(json_object_get(j, "signature"));
    const char *data = json_string_value(json_object_get(j, "data"));
    if (!json_is_integer(cid) || json_integer_value(cid) < 1 || !json_is_integer(steps) ||
        json_integer_value(steps) < 1) {
        rv = ovt_fail(OVT_EFORMAT, "%s: \"chain_id\" and \"steps\" must be positive integers", path);
    } else if (!contract || !trainer || !sig) {
        rv = ovt_fail(OVT_EFORMAT, "%s lacks \"contract\", \"trainer\" or \"signature\"", path);
    } else if ((rv = chain_address_from_string(&r->contract, contract)) ||
               (rv = chain_address_from_string(&r->p.trainer, trainer))) {
        rv = ovt_fail_wrap(OVT_EFORMAT, "%s", path);
    } else if (ovt_hex_decode(r->sig, 65, sig + (strncmp(sig, "0x", 2) ? 0 : 2))) {
        rv = ovt_fail(OVT_EFORMAT, "%s: \"signature\" must be 65 bytes of hex", path);
    } else if (!(rv = json_hash(&r->run_id, j, "run_id", path)) && !(rv = json_hash(&r->root, j, "root", path)) &&
               !(rv = json_hash(&r->p.config_hash, j, "config_hash", path)) &&
               !(rv = json_hash(&r->p.dataset_hash, j, "dataset_hash", path))) {
        json_t *version = json_object_get(j, "version");
        r->version = json_is_integer(version) ? (int)json_integer_value(version) : 1;
        r->has_params = r->version >= 3;
        if (r->has_params)
            rv = receipt_read_params(r, j, path);
    }
    r->chain_id = (uint64_t)json_integer_value(cid);
    r->p.steps = (uint64_t)json_integer_value(steps);
    if (data)
        snprintf(r->data, sizeof r->data, "%s", data);
    json_decref(j);
    return rv;
}

static void check_signature(checks *c, const receipt *r)
{
    ovt_hash digest;
    chain_arb_commitment_digest(&digest, r->chain_id, &r->contract, &r->run_id, &r->root, &r->p);
    chain_sig sig;
    chain_address who;
    char want[43], got[43];
    chain_address_to_string(want, &r->p.trainer);
    if (chain_sig_from_rsv(&sig, r->sig) || chain_recover_address(&who, &sig, &digest)) {
        check_add(c, "signature", false, "the signature is not a valid secp256k1 signature: %s", ovt_errmsg());
        return;
    }
    chain_address_to_string(got, &who);
    if (chain_address_eq(&who, &r->p.trainer))
        check_add(c, "signature", true, "recovers to the trainer %s", want);
    else
        check_add(c, "signature", false, "recovers to %s, not to the trainer %s", got, want);
}

/* The signature covers runId but not the parties, deadlines and bonds; the
 * runId does (the contract derives it from all of RunParams), so a receipt
 * whose runId is re-derived from its own fields names the run's real terms. */
static void check_run_id(checks *c, const receipt *r)
{
    if (!r->has_params) {
        check_add(c, "run_id", false,
                  r->version == 2 ? "receipt version 2 predates committees (its contract named one arbiter): the "
                                    "runId cannot be derived under this contract"
                                  : "receipt version 1 has no nonce: the runId cannot be derived");
        return;
    }
    ovt_hash id;
    char want[67], got[67];
    chain_arb_run_id(&id, r->chain_id, &r->contract, &r->p);
    chain_hash_hex(want, &r->run_id);
    chain_hash_hex(got, &id);
    if (memcmp(id.b, r->run_id.b, 32) == 0)
        check_add(c, "run_id", true, "%s derives from the receipt's chain, contract, parties, terms and nonce", want);
    else
        check_add(c, "run_id", false, "the receipt's chain, contract, parties, terms and nonce derive %s, not %s", got,
                  want);
}

static void check_steps(checks *c, const receipt *r, const trn_step_table *t)
{
    char a[67], b[67];
    hex(a, &t->config_hash);
    hex(b, &r->p.config_hash);
    if (t->count != r->p.steps + 1) {
        check_add(c, "steps", false, "steps.bin holds %zu steps, the receipt %llu", t->count - 1,
                  (unsigned long long)r->p.steps);
        return;
    }
    if (memcmp(t->config_hash.b, r->p.config_hash.b, 32)) {
        check_add(c, "steps", false, "steps.bin is for configHash %s, the receipt for %s", a, b);
        return;
    }
    ovt_hash root;
    if (trn_step_table_root(&root, t, &r->run_id)) {
        check_add(c, "steps", false, "%s", ovt_errmsg());
        return;
    }
    hex(a, &root);
    hex(b, &r->root);
    if (memcmp(root.b, r->root.b, 32))
        check_add(c, "steps", false, "the %zu leaves hash to root %s, the receipt says %s", t->count, a, b);
    else
        check_add(c, "steps", true, "%zu leaves hash to the receipt's root %s", t->count, b);
}

static void check_file_hash(checks *c, const char *name, const char *path, const ovt_hash *want)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, SIZE_MAX / 2)) {
        check_add(c, name, false, "%s", ovt_errmsg());
        return;
    }
    ovt_hash h;
    ovt_sha256(&h, buf, len);
    free(buf);
    char a[67], b[67];
    hex(a, &h);
    hex(b, want);
    if (memcmp(h.b, want->b, 32))
        check_add(c, name, false, "%s hashes to %s, the receipt says %s", path, a, b);
    else
        check_add(c, name, true, "%s hashes to %s", path, a);
}

/* Step j of k (0-based) of a replay spread over steps 1..n: evenly from 1
 * to n, both ends included. */
static uint64_t spread_step(uint64_t j, uint64_t k, uint64_t n)
{
    if (k <= 1)
        return n;
    return 1 + (j * (n - 1)) / (k - 1);
}

static void check_replay(checks *c, const char *dir, const char *data, const trn_step_table *t, uint64_t k,
                         int threads)
{
    trn_run_config rc;
    trn_run_data d;
    memset(&d, 0, sizeof d);
    if (trn_run_dataset(&d, &rc, dir, data)) {
        check_add(c, "replay", false, "%s", ovt_errmsg());
        return;
    }
    uint64_t n = t->count - 1, last = 0;
    if (k > n)
        k = n;
    for (uint64_t j = 0; j < k; j++) {
        uint64_t s = spread_step(j, k, n);
        if (s == last)
            continue;
        last = s;
        trn_replay_result r;
        char name[32];
        snprintf(name, sizeof name, "step %llu", (unsigned long long)s);
        if (trn_step_replay_run(dir, &d, s, threads, &r, NULL, NULL)) {
            check_add(c, name, false, "%s", ovt_errmsg());
            continue;
        }
        const chain_merkle_preimage *w = &t->steps[s];
        const char *what = memcmp(r.state_hash.b, w->state_hash.b, 32)   ? "stateHash"
                           : memcmp(r.batch_hash.b, w->batch_hash.b, 32) ? "batchHash"
                           : memcmp(r.log_hash.b, w->log_hash.b, 32)     ? "logHash"
                                                                          : NULL;
        char a[67];
        hex(a, &r.state_hash);
        if (what)
            check_add(c, name, false, "re-executed from checkpoint %llu: its %s differs from steps.bin's",
                      (unsigned long long)r.from_checkpoint, what);
        else
            check_add(c, name, true, "re-executed from checkpoint %llu: stateHash %s as in steps.bin",
                      (unsigned long long)r.from_checkpoint, a);
    }
    trn_run_data_free(&d);
}

/* The run directory of the receipt at path: the folder it lies in. */
static void receipt_dir(char *dir, size_t cap, const char *path)
{
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, cap, ".");
}

/* The dataset check: config.bin names the receipt's datasetHash, and the
 * file hashes to it. */
static void check_dataset(checks *c, const receipt *r, const char *dir, const char *data)
{
    trn_run_config rc;
    ovt_hash ch;
    if (trn_run_load_config(dir, &rc, &ch))
        check_add(c, "dataset", false, "%s", ovt_errmsg());
    else if (memcmp(rc.dataset_hash.b, r->p.dataset_hash.b, 32))
        check_add(c, "dataset", false, "config.bin names another datasetHash than the receipt");
    else if (!data)
        check_add(c, "dataset", false, "no dataset to check: pass --data FILE (the receipt names none)");
    else
        check_file_hash(c, "dataset", data, &r->p.dataset_hash);
}

/* --model: the model file's tensors are the parameters of the state the
 * receipt's root commits to (party/model_check.h). */
static void check_model(checks *c, const receipt *r, const char *model)
{
    party_model_anchor a = {.chain_id = r->chain_id, .contract = r->contract, .trainer = r->p.trainer,
                            .run_id = r->run_id, .root = r->root, .config_hash = r->p.config_hash,
                            .dataset_hash = r->p.dataset_hash, .steps = r->p.steps};
    party_model_report m;
    bool ok = party_model_check(model, &a, &m) == 0;
    check_add(c, "model", ok, "%s: %s", model, ok ? m.summary : ovt_errmsg());
}

/* A receipt that does not exist yet: the run is not committed (only `ovt
 * commit` writes one, as the runId comes from the chain). The message says
 * so, and of a model file exported before then, that it carries no proof. */
static int receipt_missing(const party_verify_opts *o)
{
    char dir[4096];
    receipt_dir(dir, sizeof dir, o->receipt);
    const char *commit = "`ovt commit` writes it once the run is opened on chain (the receipt holds the runId "
                         "and the signed root; `ovt commit --help`)";
    if (o->model && party_model_has_proof(o->model) == 0)
        return ovt_fail(OVT_ENOTFOUND, "%s has no receipt.json: the run is not committed yet, and %s carries no "
                        "Merkle proof: it was exported before the run had a runId. Commit the run (`ovt commit %s "
                        "...`, see `ovt commit --help`), export it again (`ovt export %s --format safetensors --out "
                        "FILE`), then `ovt verify --model FILE %s`",
                        dir, o->model, dir, dir, dir);
    return ovt_fail(OVT_ENOTFOUND, "%s has no receipt.json: the run is not committed yet. %s; then run `ovt verify "
                    "%s%s%s%s`", dir, commit, o->model ? "--model " : "", o->model ? o->model : "",
                    o->model ? " " : "", dir);
}

int party_verify(const party_verify_opts *o, party_verify_result *res)
{
    memset(res, 0, sizeof *res);
    receipt r;
    if (access(o->receipt, F_OK) != 0 && errno == ENOENT)
        return receipt_missing(o);
    int rv = receipt_read(&r, o->receipt);
    if (rv)
        return rv;
    res->steps = r.p.steps;
    char dir[4096], path[4096];
    receipt_dir(dir, sizeof dir, o->receipt);
    const char *data = o->data ? o->data : r.data[0] ? r.data : NULL;
    checks ck = {.o = o, .all_ok = true};
    check_signature(&ck, &r);
    check_run_id(&ck, &r);
    if (o->model) {
        check_model(&ck, &r, o->model);
        res->ok = ck.all_ok;
        return 0;
    }
    trn_step_table t = {0};
    bool have_table = false;
    if (trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin") || trn_step_table_read(&t, path))
        check_add(&ck, "steps", false, "%s", ovt_errmsg());
    else
        have_table = true;
    if (have_table)
        check_steps(&ck, &r, &t);
    if (!trn_run_path(path, sizeof path, dir, NULL, 0, "config.bin"))
        check_file_hash(&ck, "config", path, &r.p.config_hash);
    check_dataset(&ck, &r, dir, data);
    if (o->replay && have_table && ck.all_ok)
        check_replay(&ck, dir, data, &t, o->replay, o->threads);
    else if (o->replay)
        check_add(&ck, "replay", false, "not attempted: an earlier check failed");
    trn_step_table_free(&t);
    res->ok = ck.all_ok;
    return 0;
}
