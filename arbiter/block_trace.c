/* A block's inputs taken from a traced step (arbiter/block.h): what the
 * party re-running step K hands the arbiter, and what the tests compare
 * against the whole step. */
#include "arbiter/block.h"

#include "arbiter/block_chunk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tree.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

void arb_block_owned_free(arb_block_owned *o)
{
    for (size_t i = 0; i < o->nslices; i++) {
        free(o->slices[i].data);
        free(o->slices[i].proof);
    }
    free(o->slices);
    free(o->reads);
    free(o->entries);
    memset(o, 0, sizeof *o);
}

/* The region index of a name in t, or UINT32_MAX. */
static uint32_t region_index(const krn_trace *t, const char *name)
{
    for (uint32_t r = 0; *krn_trace_region_name(t, r); r++)
        if (strcmp(krn_trace_region_name(t, r), name) == 0)
            return r;
    return UINT32_MAX;
}

/* The slice of need nd: its leaves' elements and their proof against the
 * source's root. */
int arb_block_slice_make(arb_block_slice *s, const krn_trace *t, const arb_block_need *nd)
{
    memset(s, 0, sizeof *s);
    uint32_t id = nd->kind == KRN_TRACE_SITE ? nd->site : region_index(t, nd->name);
    size_t n;
    const float *src = krn_trace_written(t, nd->kind, id, &n);
    if (src == NULL)
        return ovt_fail(OVT_EINVAL, "block: the trace keeps no copy of %s %s (a check-mode trace, or one that "
                                    "keeps the block's sources, arb_block_keep_for, is needed)",
                        nd->kind == KRN_TRACE_SITE ? "a site's output" : "region", nd->name);
    size_t leaves = ovt_tree_leaves(n * 4);
    ovt_hash *h = malloc(leaves * sizeof *h), *tmp = malloc(leaves * sizeof *tmp);
    int rc = 0;
    if (h == NULL || tmp == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "block: out of memory for a source's tree");
        goto done;
    }
    for (size_t i = 0; i < leaves; i++) {
        size_t e0 = i * LEAF_ELEMS, len = n - e0 < LEAF_ELEMS ? n - e0 : LEAF_ELEMS;
        ovt_tree_leaf_le32(&h[i], src + e0, len * 4);
    }
    memcpy(tmp, h, leaves * sizeof *h);
    ovt_tree_root_of_leaves(&s->root, tmp, leaves);
    s->kind = nd->kind;
    s->site = nd->site;
    snprintf(s->name, sizeof s->name, "%s", nd->name);
    s->n = n;
    s->first_leaf = nd->lo / LEAF_ELEMS;
    s->nleaves = nd->hi == nd->lo ? 1 : (nd->hi - 1) / LEAF_ELEMS - s->first_leaf + 1;
    size_t e0 = s->first_leaf * LEAF_ELEMS, e1 = (s->first_leaf + s->nleaves) * LEAF_ELEMS;
    e1 = e1 < n ? e1 : n;
    s->proof_len = ovt_tree_proof_len(leaves, s->first_leaf, s->nleaves);
    if ((s->data = malloc((e1 - e0) * 4 + 4)) == NULL ||
        (s->proof = malloc((s->proof_len ? s->proof_len : 1) * sizeof(ovt_hash))) == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "block: out of memory for a slice");
        goto done;
    }
    memcpy(s->data, src + e0, (e1 - e0) * 4);
    rc = ovt_tree_proof(s->proof, &s->proof_len, h, leaves, s->first_leaf, s->nleaves);
done:
    free(h);
    free(tmp);
    return rc;
}

/* The task's record and reads from record i of t (owned by own). */
static int record_of(arb_block_task *task, arb_block_owned *own, const krn_trace *t, size_t i, uint64_t leaf)
{
    const krn_trace_record *rec = krn_trace_record_at(t, i);
    const krn_trace_src *rd = krn_trace_reads_of(t, i);
    task->site = rec->site;
    snprintf(task->op, sizeof task->op, "%s", rec->op);
    task->n = rec->n;
    task->root = rec->root;
    task->leaf = leaf;
    if ((own->reads = calloc(rec->nreads ? rec->nreads : 1, sizeof *own->reads)) == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for the reads");
    for (size_t k = 0; k < rec->nreads; k++) {
        own->reads[k].src = rd[k];
        if (rd[k].kind == KRN_TRACE_STATE || rd[k].kind == KRN_TRACE_BATCH)
            snprintf(own->reads[k].name, sizeof own->reads[k].name, "%s", krn_trace_region_name(t, rd[k].region));
    }
    own->nreads = rec->nreads;
    task->reads = own->reads;
    task->nreads = own->nreads;
    return 0;
}

int arb_block_keep_for(krn_trace *dst, const krn_trace *t, size_t i, const trn_run_config *cfg, uint64_t step,
                       uint64_t leaf)
{
    arb_block_task task = {.config = cfg, .step = step};
    arb_block_owned own;
    arb_block_plan plan;
    memset(&own, 0, sizeof own);
    int rc = record_of(&task, &own, t, i, leaf);
    if (rc == 0 && (rc = arb_block_plan_make(&task, &plan)) == 0) {
        rc = krn_trace_keep(dst, KRN_TRACE_SITE, (uint32_t)i); /* the claim's leaf */
        for (size_t k = 0; k < plan.nneeds && rc == 0; k++) {
            const arb_block_need *nd = &plan.needs[k];
            uint32_t id = nd->kind == KRN_TRACE_SITE ? nd->site : region_index(t, nd->name);
            rc = krn_trace_keep(dst, nd->kind, id);
        }
        arb_block_plan_free(&plan);
    }
    arb_block_owned_free(&own);
    return rc;
}

/* Site `site`'s entries of log (NULL: none) over the plan's output range
 * out_lo .. out_hi, the ones the block rounds with: *out malloc'd, NULL
 * when there are none. */
static int cut_entries(krn_rlog_entry **out, size_t *n, const krn_rlog *log, uint32_t site,
                       const arb_block_plan *plan)
{
    *out = NULL;
    *n = 0;
    const krn_rlog_site *ls = log ? krn_rlog_find(log, site) : NULL;
    size_t k0 = 0, k1;
    while (ls && k0 < ls->count && ls->entries[k0].index < plan->out_lo)
        k0++;
    for (k1 = k0; ls && k1 < ls->count && ls->entries[k1].index < plan->out_hi; k1++)
        ;
    if (k1 == k0)
        return 0;
    if ((*out = malloc((k1 - k0) * sizeof **out)) == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for the entries");
    memcpy(*out, ls->entries + k0, (k1 - k0) * sizeof **out);
    *n = k1 - k0;
    return 0;
}

/* Whether two entries round alike: the value counts only for a value entry. */
static bool entry_same(const krn_rlog_entry *a, const krn_rlog_entry *b)
{
    return a->index == b->index && a->dir == b->dir &&
           (a->dir != KRN_DIR_VALUE || memcmp(&a->value, &b->value, sizeof a->value) == 0);
}

int arb_block_entries_from_log(arb_block_task *task, arb_block_owned *own, const krn_rlog *log, bool *differed)
{
    *differed = false;
    if (krn_rlog_step(log) != task->step)
        return ovt_fail(OVT_EINVAL, "block: the rounding log is of step %llu, the block of step %llu",
                        (unsigned long long)krn_rlog_step(log), (unsigned long long)task->step);
    arb_block_plan plan;
    int rc = arb_block_plan_make(task, &plan);
    if (rc < 0)
        return rc;
    krn_rlog_entry *e;
    size_t n;
    rc = cut_entries(&e, &n, log, task->site, &plan);
    arb_block_plan_free(&plan);
    if (rc < 0)
        return rc;
    *differed = n != task->nentries;
    for (size_t k = 0; k < n && !*differed; k++)
        *differed = !entry_same(&e[k], &task->entries[k]);
    free(own->entries);
    own->entries = e;
    own->nentries = n;
    task->entries = e;
    task->nentries = n;
    return 0;
}

int arb_block_from_trace(arb_block_task *task, arb_block_owned *own, const krn_trace *t, size_t i,
                         const krn_rlog *log, uint64_t leaf)
{
    memset(own, 0, sizeof *own);
    const krn_trace_record *rec = krn_trace_record_at(t, i);
    int r0 = record_of(task, own, t, i, leaf);
    if (r0 < 0) {
        arb_block_owned_free(own);
        return r0;
    }
    arb_block_plan plan;
    int rc = arb_block_plan_make(task, &plan);
    if (rc < 0)
        goto fail;
    if ((own->slices = calloc(plan.nneeds ? plan.nneeds : 1, sizeof *own->slices)) == NULL)
        rc = ovt_fail(OVT_ENOMEM, "block: out of memory for the slices");
    for (size_t k = 0; k < plan.nneeds && rc == 0; k++, own->nslices++)
        rc = arb_block_slice_make(&own->slices[k], t, &plan.needs[k]);
    if (rc == 0)
        rc = cut_entries(&own->entries, &own->nentries, log, rec->site, &plan);
    arb_block_plan_free(&plan);
    if (rc < 0)
        goto fail;
    task->slices = own->slices;
    task->nslices = own->nslices;
    task->entries = own->entries;
    task->nentries = own->nentries;
    return 0;
fail:
    arb_block_owned_free(own);
    return rc;
}

/* The slices of needs into own (appended). */
static int slices_of(arb_block_owned *own, const krn_trace *t, const arb_block_plan *plan)
{
    arb_block_slice *s = realloc(own->slices, (own->nslices + plan->nneeds + 1) * sizeof *s);
    if (s == NULL)
        return ovt_fail(OVT_ENOMEM, "chunk: out of memory for the slices");
    own->slices = s;
    int rc = 0;
    for (size_t k = 0; k < plan->nneeds && rc == 0; k++, own->nslices++)
        rc = arb_block_slice_make(&own->slices[own->nslices], t, &plan->needs[k]);
    return rc;
}

int arb_chunk_from_trace(arb_block_task *task, arb_block_owned *own, const krn_trace *t, size_t i,
                         const krn_rlog *log, uint64_t leaf, uint64_t c)
{
    arb_block_task whole = *task;
    arb_block_owned all;
    int rc = arb_block_from_trace(&whole, &all, t, i, log, leaf);
    if (rc < 0)
        return rc;
    memset(own, 0, sizeof *own);
    *task = whole;
    task->slices = NULL;
    task->nslices = 0;
    task->entries = NULL;
    task->nentries = 0;
    own->reads = all.reads; /* the record's reads move over */
    all.reads = NULL;
    arb_chunk_info info;
    arb_block_plan plan;
    memset(&plan, 0, sizeof plan);
    if ((rc = arb_chunk_info_of(task, &info)) < 0)
        goto done;
    if (c > info.chunks) {
        rc = ovt_fail(OVT_EINVAL, "chunk: site %zu leaf %llu has chain leaves 0..%llu; %llu is none", i,
                      (unsigned long long)leaf, (unsigned long long)info.chunks, (unsigned long long)c);
        goto done;
    }
    if (c < info.chunks) { /* the chunk's rows of every input summed */
        uint64_t r0 = c * ARB_CHUNK_ROWS, r1 = r0 + ARB_CHUNK_ROWS < info.rows ? r0 + ARB_CHUNK_ROWS : info.rows;
        uint64_t g0 = r0 / info.group_rows, g1 = (r1 + info.group_rows - 1) / info.group_rows;
        for (unsigned m = 0; m < info.summed_inputs && rc == 0; m++) /* the groups of rows that hold them */
            rc = arb_block_need_input(task, m, g0 * info.group_width[m], g1 * info.group_width[m], &plan);
    } else { /* the last step: the old gradient of the leaf, and its entries */
        if (info.old_input >= 0)
            rc = arb_block_need_input(task, (unsigned)info.old_input, info.first, info.first + info.count, &plan);
        size_t k0 = 0, k1; /* the leaf's entries (the whole op's rows hold the site's) */
        while (k0 < all.nentries && all.entries[k0].index < info.first)
            k0++;
        for (k1 = k0; k1 < all.nentries && all.entries[k1].index < info.first + info.count; k1++)
            ;
        memmove(all.entries, all.entries + k0, (k1 - k0) * sizeof *all.entries);
        own->entries = all.entries;
        own->nentries = k1 - k0;
        all.entries = NULL;
        all.nentries = 0;
    }
    if (rc == 0)
        rc = slices_of(own, t, &plan);
done:
    arb_block_plan_free(&plan);
    arb_block_owned_free(&all);
    if (rc < 0) {
        arb_block_owned_free(own);
        return rc;
    }
    task->slices = own->slices;
    task->nslices = own->nslices;
    task->entries = own->entries;
    task->nentries = own->nentries;
    return 0;
}

int arb_chunk_chain_from_trace(arb_chunk_chain *out, arb_block_task *task, const krn_trace *t, size_t i,
                               const krn_rlog *log, uint64_t leaf, bool *recomputed_differs)
{
    memset(out, 0, sizeof *out);
    *recomputed_differs = false;
    arb_block_owned own;
    int rc = arb_block_from_trace(task, &own, t, i, log, leaf);
    if (rc == 0)
        rc = arb_chunk_chain_make(task, out);
    size_t n;
    const float *y = rc == 0 ? krn_trace_written(t, KRN_TRACE_SITE, (uint32_t)i, &n) : NULL;
    if (rc == 0 && y == NULL)
        rc = ovt_fail(OVT_EINVAL, "chunk: the trace keeps no copy of site %zu's output", i);
    ovt_hash *tmp = rc == 0 ? malloc((out->info.chunks + 1) * sizeof *tmp) : NULL;
    if (rc == 0 && tmp == NULL)
        rc = ovt_fail(OVT_ENOMEM, "chunk: out of memory for the chain's root");
    if (rc == 0) {
        ovt_hash mine;
        ovt_tree_leaf_le32(&mine, y + out->info.first, out->info.count * 4);
        *recomputed_differs = memcmp(mine.b, out->leaves[out->info.chunks].b, 32) != 0;
        out->leaves[out->info.chunks] = mine;
        memcpy(tmp, out->leaves, (out->info.chunks + 1) * sizeof *tmp);
        ovt_tree_root_of_leaves(&out->root, tmp, out->info.chunks + 1);
    }
    free(tmp);
    arb_block_owned_free(&own);
    task->slices = NULL; /* they were own's */
    task->nslices = 0;
    task->entries = NULL;
    task->nentries = 0;
    if (rc < 0)
        arb_chunk_chain_free(out);
    return rc;
}
