/* A party's side of the narrowing (see narrow.h). */
#include "party/narrow.h"

#include <stdlib.h>
#include <string.h>

#include "arbiter/block_file.h"
#include "chain/session.h"
#include "common/fileio.h"
#include "common/tree.h"
#include "trainer/check.h"
#include "trainer/checkpoint.h"
#include "trainer/rundata.h"
#include "trainer/state_hash.h"
#include "trainer/step.h"

/* An auditor's copy of the trainer's run has no checkpoints: the initial
 * state (from the config's seed) as checkpoint 0, so the step can be
 * replayed from it with the trainer's logs. */
static int ensure_start(const char *dir, const trn_run_config *rc, uint64_t k)
{
    uint64_t at;
    if (trn_run_latest_checkpoint(dir, k - 1, &at) == 0)
        return 0;
    ovt_err_clear();
    if (trn_config_has_init(rc))
        return ovt_fail(OVT_ENOTFOUND, "%s has no checkpoint at or before step %llu, and its config starts "
                                       "from parameters (init_hash) this party does not have",
                        dir, (unsigned long long)(k - 1));
    char path[4096], ckdir[4096];
    trn_state *st;
    int rv = trn_run_path(path, sizeof path, dir, "ckpt", 0, "ckpt");
    if (!rv)
        rv = ovt_path_join(ckdir, sizeof ckdir, dir, "ckpt");
    if (!rv)
        rv = ovt_mkdirs(ckdir, 0755);
    if (rv || (rv = trn_state_new(&st, rc)))
        return rv;
    trn_state_init(st);
    rv = trn_checkpoint_write(st, path);
    trn_state_free(st);
    return rv;
}

static int trace_step(party_narrow_step *p, const char *dir, const char *data, uint64_t k, const trn_fault *fault)
{
    ovt_hash root;
    /* tolerant: a party that disputes step K as fraud committed the state of
     * the tolerant replay (auditor/replay.c), and traces the step to it */
    trn_step_trace tr = {.backend = KRN_BACKEND_CPU, .fault = fault, .trace = p->trace,
                         .roots_before = p->previous_roots, .after = &p->after, .tolerant = true};
    trn_step_check s;
    int rv = trn_step_check_traced(&s, dir, data, k, 0, &tr);
    if (!rv && s.verdict == TRN_CHECK_FRAUD)
        rv = ovt_fail(OVT_EFRAUD, "step %llu: %s", (unsigned long long)k, s.fraud);
    if (!rv && tr.trace_rc)
        rv = ovt_fail(tr.trace_rc, "the trace of step %llu failed: %s", (unsigned long long)k,
                      krn_trace_error(p->trace));
    root = tr.root;
    if (!rv && !p->after)
        rv = ovt_fail(OVT_EINVAL, "step %llu: no state after the step", (unsigned long long)k);
    p->post.trace_root = root;
    return rv;
}

int party_narrow_load(party_narrow_step *p, const char *dir, const char *data, uint64_t k,
                      const chain_merkle_preimage *leaf, const trn_fault *fault)
{
    memset(p, 0, sizeof *p);
    p->step = k;
    ovt_hash config_hash;
    char path[4096];
    int rv = k == 0 ? ovt_fail(OVT_EINVAL, "the narrowing needs a step K >= 1 (step 0 has no trace)") : 0;
    if (!rv && !(rv = trn_run_load_config(dir, &p->config, &config_hash)) && !(rv = ensure_start(dir, &p->config, k)))
        rv = krn_trace_new(&p->trace, true);
    if (!rv && !(p->log = krn_rlog_new()))
        rv = ovt_fail(OVT_ENOMEM, "out of memory");
    if (!rv)
        rv = trace_step(p, dir, data, k, fault);
    if (!rv && !(rv = trn_run_path(path, sizeof path, dir, "logs", k, "rlog")))
        rv = krn_rlog_read_file(p->log, path);
    if (rv)
        goto fail;
    ovt_hash state_hash;
    trn_state_hash(&state_hash, p->after);
    if (memcmp(state_hash.b, leaf->state_hash.b, 32) != 0) {
        char have[67], want[67];
        chain_hash_hex(have, &state_hash);
        chain_hash_hex(want, &leaf->state_hash);
        rv = ovt_fail(OVT_EINVAL, "step %llu re-executed gives stateHash %s, not the %s this party revealed: "
                                  "its trace would not match its own leaf",
                      (unsigned long long)k, have, want);
        goto fail;
    }
    p->nsites = krn_trace_count(p->trace);
    p->records = calloc(p->nsites ? p->nsites : 1, sizeof *p->records);
    p->record_lens = calloc(p->nsites ? p->nsites : 1, sizeof *p->record_lens);
    p->record_hashes = calloc(p->nsites ? p->nsites : 1, sizeof *p->record_hashes);
    if (!p->records || !p->record_lens || !p->record_hashes) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu trace records", p->nsites);
        goto fail;
    }
    for (size_t i = 0; i < p->nsites; i++) {
        size_t len = krn_trace_encode(p->trace, i, NULL, 0);
        if (!(p->records[i] = malloc(len))) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory for a trace record");
            goto fail;
        }
        p->record_lens[i] = krn_trace_encode(p->trace, i, p->records[i], len);
        p->record_hashes[i] = krn_trace_record_at(p->trace, i)->hash;
    }
    p->ntensors = p->after->layout.count;
    for (size_t i = 0; i < p->ntensors; i++)
        p->sizes[i] = p->after->layout.t[i].size;
    trn_state_digests(p->roots, p->after);
    p->post.leaf = *leaf;
    p->post.sites = p->nsites;
    p->post.previous_roots = p->previous_roots;
    p->post.nprevious = 3 * p->ntensors;
    p->post.roots = p->roots;
    p->post.nroots = 3 * p->ntensors;
    p->post.sizes = p->sizes;
    p->post.nsizes = p->ntensors;
    return 0;
fail:
    party_narrow_free(p);
    return rv;
}

void party_narrow_free(party_narrow_step *p)
{
    for (size_t i = 0; p->records && i < p->nsites; i++)
        free(p->records[i]);
    free(p->records);
    free(p->record_lens);
    free(p->record_hashes);
    if (p->has_chain)
        arb_chunk_chain_free(&p->chain);
    krn_trace_free(p->trace);
    krn_rlog_free(p->log);
    trn_state_free(p->after);
    memset(p, 0, sizeof *p);
}

/* The leaf hashes of n floats' tree. */
static int float_leaves(const float *v, uint64_t n, ovt_hash **leaves, size_t *count)
{
    size_t bytes = (size_t)n * 4, nl = ovt_tree_leaves(bytes);
    ovt_hash *h = malloc(nl * sizeof *h);
    if (!h)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaf hashes", nl);
    for (size_t i = 0; i < nl; i++) {
        size_t left = bytes - i * OVT_TREE_LEAF_BYTES;
        ovt_tree_leaf_le32(&h[i], (const uint8_t *)v + i * OVT_TREE_LEAF_BYTES,
                           left > OVT_TREE_LEAF_BYTES ? OVT_TREE_LEAF_BYTES : left);
    }
    *leaves = h;
    *count = nl;
    return 0;
}

static int output_leaves(void *ctx, chain_narrow_stage stage, uint64_t item, ovt_hash **leaves, size_t *n)
{
    const party_narrow_step *p = ctx;
    if (stage == CHAIN_NARROW_STAGE_TRACE) {
        size_t count = 0;
        const float *v = item < p->nsites ? krn_trace_written(p->trace, KRN_TRACE_SITE, (uint32_t)item, &count) : NULL;
        if (!v)
            return ovt_fail(OVT_ENOTFOUND, "narrowing: the party's trace keeps no output of site %llu",
                            (unsigned long long)item);
        return float_leaves(v, count, leaves, n);
    }
    if (item >= 3 * p->ntensors)
        return ovt_fail(OVT_EINVAL, "narrowing: state root %llu of %zu", (unsigned long long)item, 3 * p->ntensors);
    const trn_state *st = p->after;
    const float *base = item / p->ntensors == 0 ? st->params : item / p->ntensors == 1 ? st->m : st->v;
    const trn_tensor_info *t = &st->layout.t[item % p->ntensors];
    return float_leaves(base + t->offset, t->size, leaves, n);
}

/* Level 4: the chain of output leaf `block` of site `site`, made once
 * (every row of the site's inputs is in the check-mode trace). */
static int chunk_leaves(void *ctx, uint64_t site, uint64_t block, ovt_hash **leaves, size_t *n)
{
    party_narrow_step *p = ctx;
    *leaves = NULL;
    *n = 0;
    if (site >= p->nsites)
        return ovt_fail(OVT_EINVAL, "narrowing: site %llu of a step of %zu sites", (unsigned long long)site,
                        p->nsites);
    if (!p->has_chain || p->chain_site != site || p->chain_block != block) {
        if (p->has_chain)
            arb_chunk_chain_free(&p->chain);
        p->has_chain = false;
        arb_block_task task = {.config = &p->config, .step = p->step};
        bool differs = false;
        int rv = arb_chunk_chain_from_trace(&p->chain, &task, p->trace, (size_t)site, p->log, block, &differs);
        if (rv)
            return rv;
        uint64_t C = p->chain.info.chunks;
        for (uint64_t c = C / 2; p->forge_chain == PARTY_CHAIN_FORGED_MIDDLE && c < C; c++)
            p->chain.leaves[c].b[31] ^= 0x5a; /* a lie from the middle of the chain on; leaf C stays */
        p->has_chain = true;
        p->chain_site = site;
        p->chain_block = block;
        p->chain_differs = differs;
    }
    size_t count = (size_t)p->chain.info.chunks + 1, extra = p->forge_chain == PARTY_CHAIN_EXTRA_LEAF;
    if (!(*leaves = malloc((count + extra) * sizeof **leaves)))
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu chain leaves", count + extra);
    if (extra) /* a count off by one: leaf 0 twice */
        (*leaves)[0] = p->chain.leaves[0];
    memcpy(*leaves + extra, p->chain.leaves, count * sizeof **leaves);
    *n = count + extra;
    return 0;
}

/* Level 4 of an element op: the values of leaf `block` of site `site`'s output. */
static int element_values(void *ctx, uint64_t site, uint64_t block, float **values, size_t *n)
{
    const party_narrow_step *p = ctx;
    size_t count = 0;
    const float *v = site < p->nsites ? krn_trace_written(p->trace, KRN_TRACE_SITE, (uint32_t)site, &count) : NULL;
    uint64_t first = block * CHAIN_NARROW_LEAF_ELEMENTS;
    if (!v || first >= count)
        return ovt_fail(OVT_ENOTFOUND, "narrowing: the party's trace keeps no leaf %llu of site %llu's output",
                        (unsigned long long)block, (unsigned long long)site);
    *n = count - first < CHAIN_NARROW_LEAF_ELEMENTS ? count - first : CHAIN_NARROW_LEAF_ELEMENTS;
    if (!(*values = malloc(*n * sizeof **values)))
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu values", *n);
    memcpy(*values, v + first, *n * sizeof **values);
    return 0;
}

chain_narrow_party party_narrow_party(party_narrow_step *p, int is_trainer, int post_previous)
{
    p->post.nprevious = post_previous ? 3 * p->ntensors : 0;
    chain_narrow_party party = {.is_trainer = is_trainer, .post = &p->post, .other = NULL, .nsites = p->nsites,
                                .record_hashes = p->record_hashes, .records = (const uint8_t *const *)p->records,
                                .record_lens = p->record_lens, .output_leaves = output_leaves,
                                .chunk_leaves = chunk_leaves, .element_values = element_values, .ctx = p};
    return party;
}

/* A copy of log whose site `site` has an entry at element e added, or
 * removed when it has one (a lying packer's entries). */
static int forged_log(krn_rlog *out, const krn_rlog *log, uint32_t site, uint64_t n, uint64_t e)
{
    krn_rlog_reset(out, krn_rlog_step(log));
    const krn_rlog_site *at = krn_rlog_find(log, site);
    krn_rlog_entry *x = malloc(((at ? at->count : 0) + 1) * sizeof *x);
    size_t nx = 0;
    int rv = x ? 0 : ovt_fail(OVT_ENOMEM, "out of memory for a forged log");
    bool placed = false;
    for (size_t k = 0; at && k < at->count && rv == 0; k++) {
        if (!placed && at->entries[k].index >= e) {
            placed = true;
            if (at->entries[k].index == e)
                continue; /* removed */
            x[nx++] = (krn_rlog_entry){.index = e, .dir = KRN_DIR_UP};
        }
        x[nx++] = at->entries[k];
    }
    if (rv == 0 && !placed)
        x[nx++] = (krn_rlog_entry){.index = e, .dir = KRN_DIR_UP};
    bool added = false;
    for (size_t i = 0; i < krn_rlog_nsites(log) && rv == 0; i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        if (!added && s->site >= site) {
            added = true;
            if (nx)
                rv = krn_rlog_add_site(out, site, n, x, nx);
            if (s->site == site)
                continue;
        }
        if (rv == 0)
            rv = krn_rlog_add_site(out, s->site, s->n, s->entries, s->count);
    }
    if (rv == 0 && !added && nx)
        rv = krn_rlog_add_site(out, site, n, x, nx);
    free(x);
    return rv;
}

int party_narrow_pack(const party_narrow_step *p, uint64_t site, uint64_t leaf, bool forge_entries, uint8_t **buf,
                      size_t *len)
{
    if (site >= p->nsites)
        return ovt_fail(OVT_EINVAL, "block package: site %llu of a step of %zu sites", (unsigned long long)site,
                        p->nsites);
    if (!forge_entries)
        return arb_block_package_make(buf, len, &p->config, p->trace, &p->post.trace_root, p->step, (size_t)site,
                                      leaf, p->log);
    const krn_trace_record *rec = krn_trace_record_at(p->trace, (size_t)site);
    krn_rlog *lie = krn_rlog_new();
    int rv = lie ? forged_log(lie, p->log, rec->site, rec->n, leaf * (OVT_TREE_LEAF_BYTES / 4))
                 : ovt_fail(OVT_ENOMEM, "out of memory for a forged log");
    if (rv == 0)
        rv = arb_block_package_make(buf, len, &p->config, p->trace, &p->post.trace_root, p->step, (size_t)site, leaf,
                                    lie);
    krn_rlog_free(lie);
    return rv;
}

int party_narrow_pack_element(const party_narrow_step *p, uint64_t site, uint64_t leaf, uint64_t element,
                              uint8_t **buf, size_t *len)
{
    if (site >= p->nsites)
        return ovt_fail(OVT_EINVAL, "element package: site %llu of a step of %zu sites", (unsigned long long)site,
                        p->nsites);
    return arb_block_element_package_make(buf, len, &p->config, p->trace, &p->post.trace_root, p->step,
                                          (size_t)site, leaf, p->log, element);
}

int party_narrow_pack_chunk(const party_narrow_step *p, uint64_t site, uint64_t leaf, uint64_t chunk, uint8_t **buf,
                            size_t *len)
{
    if (site >= p->nsites)
        return ovt_fail(OVT_EINVAL, "chunk package: site %llu of a step of %zu sites", (unsigned long long)site,
                        p->nsites);
    return arb_chunk_package_make(buf, len, &p->config, p->trace, &p->post.trace_root, p->step, (size_t)site, leaf,
                                  p->log, chunk);
}
