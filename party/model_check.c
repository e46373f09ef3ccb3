/* A model file that carries its commitment: the export's metadata and the
 * check (see model_check.h). */
#include "party/model_check.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/keys.h"
#include "chain/merkle.h"
#include "chain/parse.h"
#include "chain/session.h"
#include "common/fileio.h"
#include "modelio/export.h"
#include "trainer/state_hash.h"

#define MODEL_FORMAT "ovt.model.v1"
#define MODEL_MAX_FILE ((size_t)1 << 36)

/* Every metadata key an export writes; the last six only for a run with a
 * runId (the first three of them) and a receipt (the rest). */
static const char *const meta_keys[] = {
    "format",         "ovt.format",    "ovt.model",         "ovt.config",    "ovt.config_hash",
    "ovt.dataset_hash", "ovt.step",    "ovt.steps",         "ovt.state_hash", "ovt.params_digests",
    "ovt.m_digests",  "ovt.v_digests", "ovt.batch_hash",    "ovt.log_hash",  "ovt.run_id",
    "ovt.root",       "ovt.merkle_proof", "ovt.chain_id",   "ovt.contract",  "ovt.trainer",
};
#define NKEYS (sizeof meta_keys / sizeof meta_keys[0])
#define NKEYS_ALWAYS 14

/* ---- the export's metadata ------------------------------------------------ */

typedef struct {
    bool has_run_id, has_receipt;
    ovt_hash run_id, root;
    uint64_t chain_id;
    chain_address contract, trainer;
} run_link;

/* dir/name as JSON, or NULL when it is absent or no JSON. */
static json_t *run_file_json(const char *dir, const char *name)
{
    char path[4096];
    return ovt_path_join(path, sizeof path, dir, name) ? NULL : json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
}

/* The runId (and, from a receipt, its root, chain and contract) of the run
 * in dir: receipt.json, else a non-zero run_id in run.json. */
static int read_link(run_link *l, const char *dir)
{
    static const ovt_hash zero;
    memset(l, 0, sizeof *l);
    json_t *r = run_file_json(dir, "receipt.json");
    if (r) {
        json_t *cid = json_object_get(r, "chain_id");
        const char *id = json_string_value(json_object_get(r, "run_id")),
                   *root = json_string_value(json_object_get(r, "root")),
                   *contract = json_string_value(json_object_get(r, "contract")),
                   *trainer = json_string_value(json_object_get(r, "trainer"));
        int bad = !json_is_integer(cid) || json_integer_value(cid) < 1 || !id || !root || !contract || !trainer ||
                  chain_parse_hash(&l->run_id, "run_id", id) || chain_parse_hash(&l->root, "root", root) ||
                  chain_parse_address(&l->contract, "contract", contract) ||
                  chain_parse_address(&l->trainer, "trainer", trainer);
        l->chain_id = (uint64_t)json_integer_value(cid);
        json_decref(r);
        if (bad)
            return ovt_fail(OVT_EFORMAT, "%s/receipt.json lacks a valid chain_id, contract, trainer, run_id or "
                                         "root",
                            dir);
        l->has_run_id = l->has_receipt = true;
        return 0;
    }
    json_t *j = run_file_json(dir, "run.json");
    const char *id = json_string_value(json_object_get(j, "run_id"));
    l->has_run_id = id && !chain_parse_hash(&l->run_id, "run_id", id) && memcmp(l->run_id.b, zero.b, 32) != 0;
    json_decref(j);
    return 0;
}

/* Leaf K's Merkle proof under the table's root for runId l->run_id, as hex
 * (malloc'd); l->root is checked against it (a receipt's) or set. */
static int proof_hex(char **out, run_link *l, const trn_step_table *t, uint64_t k, const char *dir)
{
    *out = NULL;
    ovt_hash *leaves = malloc(t->count * sizeof *leaves), siblings[64];
    chain_merkle *tree = NULL;
    if (!leaves)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaves", t->count);
    for (size_t i = 0; i < t->count; i++)
        chain_merkle_leaf_hash(&leaves[i], &l->run_id, i, &t->steps[i]);
    int rv = chain_merkle_build(&tree, leaves, t->count);
    free(leaves);
    if (rv)
        return rv;
    unsigned depth = chain_merkle_tree_depth(tree);
    if (l->has_receipt && memcmp(chain_merkle_root(tree)->b, l->root.b, 32) != 0)
        rv = ovt_fail(OVT_EFORMAT, "%s/receipt.json's root is not the root of steps.bin's leaves with its runId: "
                                   "the receipt is not this run's",
                      dir);
    if (!rv)
        rv = chain_merkle_proof(tree, siblings, k);
    l->root = *chain_merkle_root(tree);
    chain_merkle_free(tree);
    if (!rv && !(*out = malloc(64 * depth + 1)))
        rv = ovt_fail(OVT_ENOMEM, "out of memory");
    for (unsigned i = 0; !rv && i < depth; i++)
        ovt_hex_encode(*out + 64 * i, siblings[i].b, 32);
    if (!rv && depth == 0)
        (*out)[0] = 0;
    return rv;
}

/* The metadata values, in meta_keys's order (empty: not written). */
typedef struct {
    char *v[NKEYS];
} meta_values;

static char *hash_text(const ovt_hash *h)
{
    char *s = malloc(67);
    if (s)
        chain_hash_hex(s, h);
    return s;
}

static char *hex_text(const void *p, size_t len)
{
    char *s = malloc(2 * len + 1);
    if (s)
        ovt_hex_encode(s, p, len);
    return s;
}

static char *dec_text(uint64_t v)
{
    char *s = malloc(24);
    if (s)
        snprintf(s, 24, "%llu", (unsigned long long)v);
    return s;
}

static char *address_text(const chain_address *a)
{
    char *s = malloc(43);
    if (s)
        chain_address_to_string(s, a);
    return s;
}

static void meta_fill(meta_values *m, const trn_state *st, const trn_step_table *t, const ovt_hash *digests)
{
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t n = st->layout.count, enc_len = trn_config_encode(enc, &st->config);
    const chain_merkle_preimage *p = &t->steps[st->step];
    m->v[0] = strdup("pt"); /* what Hugging Face's loader expects of a PyTorch checkpoint */
    m->v[1] = strdup(MODEL_FORMAT);
    m->v[2] = strdup(trn_model_kind_name(st->config.model.kind));
    m->v[3] = hex_text(enc, enc_len);
    m->v[4] = hash_text(&st->config_hash);
    m->v[5] = hash_text(&st->config.dataset_hash);
    m->v[6] = dec_text(st->step);
    m->v[7] = dec_text(t->count - 1);
    m->v[8] = hash_text(&p->state_hash);
    for (int s = 0; s < 3; s++)
        m->v[9 + s] = hex_text(digests + s * n, n * sizeof(ovt_hash));
    m->v[12] = hash_text(&p->batch_hash);
    m->v[13] = hash_text(&p->log_hash);
}

int party_model_export(const char *path, const char *dir, const trn_state *st, const trn_step_table *table,
                       party_model_exported *out)
{
    memset(out, 0, sizeof *out);
    meta_values m = {0};
    trn_st_meta meta[NKEYS];
    ovt_hash digests[3 * TRN_MAX_TENSORS];
    run_link l;
    size_t nmeta = 0;
    int rv = read_link(&l, dir);
    if (!rv && l.has_run_id && !(rv = proof_hex(&m.v[16], &l, table, st->step, dir))) {
        m.v[14] = hash_text(&l.run_id);
        m.v[15] = hash_text(&l.root);
    }
    if (!rv && l.has_receipt) {
        m.v[17] = dec_text(l.chain_id);
        m.v[18] = address_text(&l.contract);
        m.v[19] = address_text(&l.trainer);
    }
    if (!rv) {
        trn_state_digests(digests, st);
        meta_fill(&m, st, table, digests);
    }
    for (size_t i = 0; !rv && i < NKEYS; i++) {
        bool wanted = i < NKEYS_ALWAYS || (i < 17 ? l.has_run_id : l.has_receipt);
        if (wanted && !m.v[i])
            rv = ovt_fail(OVT_ENOMEM, "out of memory for the export's metadata");
        else if (wanted)
            meta[nmeta++] = (trn_st_meta){(char *)meta_keys[i], m.v[i]};
    }
    if (!rv)
        rv = trn_export_safetensors(path, st, meta, nmeta);
    if (!rv) {
        *out = (party_model_exported){.step = st->step, .state_hash = table->steps[st->step].state_hash,
                                      .has_proof = l.has_run_id, .run_id = l.run_id, .root = l.root};
    }
    for (size_t i = 0; i < NKEYS; i++)
        free(m.v[i]);
    return rv;
}

/* ---- the check ------------------------------------------------------------ */

static int meta_hash(ovt_hash *out, const trn_st_file *f, const char *key)
{
    const char *s = trn_st_meta_get(f, key);
    if (!s)
        return ovt_fail(OVT_EFORMAT, "%s has no metadata \"%s\"", "the model file", key);
    if (strncmp(s, "0x", 2) != 0 || strlen(s) != 66 || chain_parse_hash(out, key, s))
        return ovt_fail(OVT_EFORMAT, "metadata \"%s\" is not 0x and 64 hex digits", key);
    return 0;
}

/* A decimal number as the export writes it: digits only, no leading zero. */
static int meta_u64(uint64_t *out, const trn_st_file *f, const char *key)
{
    const char *s = trn_st_meta_get(f, key);
    char *end = NULL;
    errno = 0;
    if (s && s[0] >= '0' && s[0] <= '9' && (s[0] != '0' || !s[1]))
        *out = strtoull(s, &end, 10);
    if (!s || !end || *end || errno)
        return ovt_fail(OVT_EFORMAT, "metadata \"%s\" is %s, not a decimal number", key, s ? s : "missing");
    return 0;
}

/* n hashes as 64 n hex digits. */
static int meta_hashes(ovt_hash *out, size_t n, const trn_st_file *f, const char *key)
{
    const char *s = trn_st_meta_get(f, key);
    if (!s || strlen(s) != 64 * n)
        return ovt_fail(OVT_EFORMAT, "metadata \"%s\" is %s, not %zu hashes in hex", key, s ? "malformed" : "missing",
                        n);
    for (size_t i = 0; i < n; i++) {
        char one[65];
        memcpy(one, s + 64 * i, 64);
        one[64] = 0;
        if (ovt_hex_decode(out[i].b, 32, one))
            return ovt_fail(OVT_EFORMAT, "metadata \"%s\": hash %zu is not hex", key, i);
    }
    return 0;
}

/* Only keys ovt writes, the fixed ones with their values. */
static int check_keys(const trn_st_file *f)
{
    for (size_t i = 0; i < f->nmeta; i++) {
        size_t k = 0;
        while (k < NKEYS && strcmp(f->meta[i].key, meta_keys[k]) != 0)
            k++;
        if (k == NKEYS)
            return ovt_fail(OVT_EFORMAT, "metadata \"%s\" is not a key ovt writes (the file was edited)",
                            f->meta[i].key);
    }
    const char *fmt = trn_st_meta_get(f, "format"), *ours = trn_st_meta_get(f, "ovt.format");
    if (!ours)
        return ovt_fail(OVT_EFORMAT, "the file has no metadata \"ovt.format\": not a model ovt exported");
    if (strcmp(ours, MODEL_FORMAT) != 0)
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.format\" is %s; this ovt reads %s", ours, MODEL_FORMAT);
    if (!fmt || strcmp(fmt, "pt") != 0)
        return ovt_fail(OVT_EFORMAT, "metadata \"format\" is %s, not \"pt\"", fmt ? fmt : "missing");
    return 0;
}

/* The run config the metadata carries: configHash = its SHA-256, the
 * receipt's; the model kind and datasetHash as stated. */
static int check_config(trn_run_config *rc, ovt_hash *ch, const trn_st_file *f, const party_model_anchor *a)
{
    const char *hex = trn_st_meta_get(f, "ovt.config"), *kind = trn_st_meta_get(f, "ovt.model");
    uint8_t *enc = NULL;
    size_t len = 0;
    ovt_hash stated, data;
    if (!hex || ovt_hex_decode_alloc(&enc, &len, hex))
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.config\" is %s, not the run config in hex",
                        hex ? "malformed" : "missing");
    int rv = trn_config_decode(rc, enc, len);
    ovt_sha256(ch, enc, len);
    free(enc);
    if (rv)
        return ovt_fail_wrap(OVT_EFORMAT, "metadata \"ovt.config\"");
    if ((rv = meta_hash(&stated, f, "ovt.config_hash")) || (rv = meta_hash(&data, f, "ovt.dataset_hash")))
        return rv;
    if (memcmp(stated.b, ch->b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.config_hash\" is not the SHA-256 of \"ovt.config\"");
    if (memcmp(ch->b, a->config_hash.b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "the file's run config (configHash from \"ovt.config\") is not the receipt's "
                                     "config_hash");
    if (memcmp(data.b, rc->dataset_hash.b, 32) != 0 || memcmp(data.b, a->dataset_hash.b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.dataset_hash\" is not the run config's and the receipt's "
                                     "datasetHash");
    if (!kind || strcmp(kind, trn_model_kind_name(rc->model.kind)) != 0)
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.model\" is %s, the run config's model is %s",
                        kind ? kind : "missing", trn_model_kind_name(rc->model.kind));
    return 0;
}

/* "transformer.h.N.mlp.c_fc.weight, N = 0..11" for ovt tensor k: the
 * file's names of it. */
static void names_of(char *buf, size_t cap, const trn_export_tensor *e, size_t n, uint32_t k, uint32_t layers)
{
    for (size_t i = 0; i < n; i++) {
        if (e[i].index != k)
            continue;
        const char *dot = strstr(e[i].name, ".h.0.");
        if (dot)
            snprintf(buf, cap, "%.*s.h.N.%s, N = 0..%u", (int)(dot - e[i].name), e[i].name, dot + 5, layers - 1);
        else
            snprintf(buf, cap, "%s", e[i].name);
        return;
    }
    snprintf(buf, cap, "?");
}

/* D(params, t) of the tensors against the metadata's, naming the first
 * that differs. */
static int check_param_digests(const ovt_hash *have, const trn_st_file *f, const trn_layout *l)
{
    ovt_hash said[TRN_MAX_TENSORS];
    int rv = meta_hashes(said, l->count, f, "ovt.params_digests");
    for (uint32_t k = 0; !rv && k < l->count; k++) {
        if (memcmp(have[k].b, said[k].b, 32) == 0)
            continue;
        trn_export_tensor *e;
        size_t n;
        char names[128] = "?";
        if (trn_export_tensors(&e, &n, l) == 0) {
            names_of(names, sizeof names, e, n, k, l->model.n_layer);
            free(e);
        }
        return ovt_fail(OVT_EFORMAT, "the bytes of tensor %s (%s in the file) are not the exported parameters: "
                                     "their SHA-256 differs from the metadata's \"ovt.params_digests\"",
                        l->t[k].name, names);
    }
    return rv;
}

/* The tensors mapped back to ovt's layout give D(params, t); with the
 * metadata's moments' digests and step they give stateHash_K, which must
 * be the metadata's. */
static int check_state(party_model_report *r, const trn_st_file *f, const trn_run_config *rc, const ovt_hash *ch,
                       const char *path)
{
    trn_layout l;
    ovt_hash d[3 * TRN_MAX_TENSORS], stated;
    int rv = trn_layout_build(&l, &rc->model);
    if (rv)
        return rv;
    float *params = malloc(l.nparams * sizeof(float));
    if (!params)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu parameters", l.nparams);
    rv = trn_export_import(params, &l, f, 0, path);
    for (size_t k = 0; !rv && k < l.count; k++)
        rv = trn_state_tensor_digest(&d[k], trn_config_state_hash(rc), params + l.t[k].offset, l.t[k].size);
    free(params);
    if (!rv)
        rv = check_param_digests(d, f, &l);
    if (!rv && !(rv = meta_hashes(d + l.count, l.count, f, "ovt.m_digests")) &&
        !(rv = meta_hashes(d + 2 * l.count, l.count, f, "ovt.v_digests")) && !(rv = meta_u64(&r->step, f, "ovt.step")))
        rv = meta_hash(&stated, f, "ovt.state_hash");
    if (rv)
        return rv;
    trn_state_hash_combine(&r->state_hash, trn_config_state_hash(rc), ch, r->step, l.count, d);
    r->tensors = f->ntensors;
    r->nparams = l.nparams;
    if (memcmp(r->state_hash.b, stated.b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "the stateHash of these parameters with the metadata's moments' digests, "
                                     "configHash and step %llu is not the metadata's \"ovt.state_hash\": the "
                                     "metadata was edited",
                        (unsigned long long)r->step);
    return 0;
}

/* The metadata's copies of the receipt's fields, when present, are the
 * receipt's. */
static int check_copies(const trn_st_file *f, const party_model_anchor *a)
{
    uint64_t v;
    ovt_hash h;
    chain_address addr;
    int rv;
    if ((rv = meta_u64(&v, f, "ovt.steps")))
        return rv;
    if (v != a->steps)
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.steps\" is %llu, the receipt's run has %llu steps",
                        (unsigned long long)v, (unsigned long long)a->steps);
    if (!trn_st_meta_get(f, "ovt.run_id") || !trn_st_meta_get(f, "ovt.merkle_proof"))
        return ovt_fail(OVT_EFORMAT, "the file carries no Merkle proof: it was exported before the run had a "
                                     "runId; export it again after `ovt commit`");
    if ((rv = meta_hash(&h, f, "ovt.run_id")) || memcmp(h.b, a->run_id.b, 32) != 0)
        return rv ? rv : ovt_fail(OVT_EFORMAT, "metadata \"ovt.run_id\" is not the receipt's run_id");
    if ((rv = meta_hash(&h, f, "ovt.root")) || memcmp(h.b, a->root.b, 32) != 0)
        return rv ? rv : ovt_fail(OVT_EFORMAT, "metadata \"ovt.root\" is not the receipt's root");
    if (trn_st_meta_get(f, "ovt.chain_id") &&
        ((rv = meta_u64(&v, f, "ovt.chain_id")) || v != a->chain_id))
        return rv ? rv : ovt_fail(OVT_EFORMAT, "metadata \"ovt.chain_id\" is not the receipt's chain_id");
    const char *keys[2] = {"ovt.contract", "ovt.trainer"};
    const chain_address *want[2] = {&a->contract, &a->trainer};
    for (int i = 0; i < 2; i++) {
        const char *s = trn_st_meta_get(f, keys[i]);
        if (s && (chain_parse_address(&addr, keys[i], s) || memcmp(addr.b, want[i]->b, 20) != 0))
            return ovt_fail(OVT_EFORMAT, "metadata \"%s\" is not the receipt's %s", keys[i], keys[i] + 4);
    }
    return 0;
}

/* Leaf K from stateHash_K, the receipt's runId and the metadata's batch and
 * log hashes; its proof must lead to the receipt's root. */
static int check_leaf(party_model_report *r, const trn_st_file *f, const party_model_anchor *a)
{
    chain_merkle_preimage p = {.state_hash = r->state_hash};
    unsigned depth = chain_merkle_depth(a->steps);
    ovt_hash siblings[64];
    int rv;
    if (r->step > a->steps)
        return ovt_fail(OVT_EFORMAT, "metadata \"ovt.step\" is %llu, past the run's %llu steps",
                        (unsigned long long)r->step, (unsigned long long)a->steps);
    if ((rv = meta_hash(&p.batch_hash, f, "ovt.batch_hash")) || (rv = meta_hash(&p.log_hash, f, "ovt.log_hash")) ||
        (rv = meta_hashes(siblings, depth, f, "ovt.merkle_proof")))
        return rv;
    chain_merkle_leaf_hash(&r->leaf, &a->run_id, r->step, &p);
    if (chain_merkle_verify(&a->root, &r->leaf, r->step, siblings, depth))
        return ovt_fail(OVT_ECRYPTO, "leaf %llu (this stateHash, the receipt's runId and the metadata's batch and "
                                     "log hashes) with the metadata's Merkle proof does not lead to the receipt's "
                                     "root: this is not the state committed at step %llu",
                        (unsigned long long)r->step, (unsigned long long)r->step);
    return 0;
}

int party_model_check(const char *path, const party_model_anchor *anchor, party_model_report *out)
{
    memset(out, 0, sizeof *out);
    trn_st_file f;
    trn_run_config rc;
    ovt_hash ch;
    int rv = trn_st_read(&f, path, MODEL_MAX_FILE);
    if (rv)
        return rv;
    if (!(rv = check_keys(&f)) && !(rv = check_config(&rc, &ch, &f, anchor)) &&
        !(rv = check_state(out, &f, &rc, &ch, path)) && !(rv = check_copies(&f, anchor)))
        rv = check_leaf(out, &f, anchor);
    trn_st_free(&f);
    if (rv)
        return rv;
    char sh[67];
    chain_hash_hex(sh, &out->state_hash);
    snprintf(out->summary, sizeof out->summary,
             "%zu tensors (%zu parameters) are the parameters of step %llu: stateHash %s, leaf %llu under the "
             "receipt's root",
             out->tensors, out->nparams, (unsigned long long)out->step, sh, (unsigned long long)out->step);
    return 0;
}

int party_model_has_proof(const char *path)
{
    trn_st_file f;
    int rv = trn_st_read(&f, path, MODEL_MAX_FILE);
    if (rv)
        return rv;
    rv = trn_st_meta_get(&f, "ovt.run_id") && trn_st_meta_get(&f, "ovt.merkle_proof");
    trn_st_free(&f);
    return rv;
}
