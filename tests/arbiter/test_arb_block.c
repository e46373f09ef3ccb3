/* The block engine (arbiter/block.h) against the whole step, on real steps
 * of gpt2-tiny, llama-tiny, resnet-mini and an MLP: for every site of the
 * step's trace whose op the engine knows, and for its first, middle and
 * last leaf, the block re-executed from the proven slices of what it reads
 * and the trainer's log entries is bit for bit the whole step's traced
 * output of that leaf (and hashes to the same leaf). Then what must fail:
 * a slice with one bit changed or a proof for another leaf (OVT_EFRAUD), a
 * slice withheld (OVT_ENOTFOUND), a log entry dropped (the block differs
 * from the trainer's or the arbiter's rule rejects it), a leaf outside the
 * site. Then the commands: a gpt2-tiny run with a deep fault (bit 22 of one
 * element of a late site's output flipped in step 2) is packed by the
 * honest party and by the faulty one; `ovt block check` re-executes the
 * block, names the site and leaf, says whose claim is right, and refuses a
 * changed, truncated or foreign-rooted package. Element packages (level
 * 4 of a one-value-per-row site, version 3): one element of a leaf of
 * xent.sum, layernorm.mean, layernorm.bwd.dmean (gpt2-tiny) and
 * rmsnorm.rstd (llama-tiny), bit for bit the step's, from a package smaller
 * than the leaf's, refused when a slice changes; `ovt block pack
 * --element`, `ovt block check --trainer-node --auditor-node`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block.h"
#include "arbiter/block_file.h"
#include "chain/narrow.h"
#include "party/narrow.h"
#include "trainer/run.h"
#include "block_fixture.h"
#include "check.h"
#include "common/tree.h"
#include "data/dataset.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/state.h"
#include "trainer/trace.h"
#include "trainer/trn_helpers.h"
#include "support/cli_fixture.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

/* Runs the block of record i, leaf L; 0 or the engine's failure. On
 * success *same says whether it is the traced output's leaf, bit for bit. */
static int block_of(const step_fixture *f, size_t i, uint64_t L, bool *same, bool drop_entry)
{
    arb_block_task task = {.config = &f->rc, .step = 1, .threads = 1};
    arb_block_owned own;
    int rc = arb_block_from_trace(&task, &own, f->t, i, f->log, L);
    if (rc < 0)
        return rc;
    if (drop_entry && task.nentries > 0) {
        /* drop the entry the leaf holds, or the last of the rows computed */
        size_t k = task.nentries - 1;
        for (size_t j = 0; j < task.nentries; j++)
            if (task.entries[j].index >= L * LEAF_ELEMS && task.entries[j].index < (L + 1) * LEAF_ELEMS)
                k = j;
        memmove(own.entries + k, own.entries + k + 1, (task.nentries - k - 1) * sizeof *own.entries);
        task.nentries--;
    }
    arb_block_result r;
    rc = arb_block_run(&task, &r);
    if (rc == 0) {
        size_t n;
        const float *out = krn_trace_written(f->t, KRN_TRACE_SITE, (uint32_t)i, &n);
        ovt_hash want;
        ovt_tree_leaf_le32(&want, out + r.first, r.count * 4);
        *same = n == task.n && memcmp(r.values, out + r.first, r.count * 4) == 0 &&
                memcmp(want.b, r.leaf.b, 32) == 0;
        arb_block_result_free(&r);
    }
    arb_block_owned_free(&own);
    return rc;
}

/* Every site the engine knows, leaves first, middle and last: the whole
 * step's bits. */
static void test_preset(const char *preset, uint32_t batch, uint32_t seq, size_t min_supported)
{
    step_fixture f;
    step_open(&f, preset, batch, seq);
    size_t supported = 0, blocks = 0, multi = 0, whole_rows = 0, partial_rows = 0;
    char missing[2048] = "";
    for (size_t i = 0; i < krn_trace_count(f.t); i++) {
        const krn_trace_record *rec = krn_trace_record_at(f.t, i);
        if (!arb_block_supported(rec->op)) {
            if (!strstr(missing, rec->op) && strlen(missing) + strlen(rec->op) + 2 < sizeof missing) {
                strcat(missing, " ");
                strcat(missing, rec->op);
            }
            continue;
        }
        supported++;
        uint64_t leaves = ovt_tree_leaves(rec->n * 4);
        multi += leaves > 1;
        uint64_t pick[3] = {0, leaves / 2, leaves - 1};
        for (int k = 0; k < 3; k++) {
            if (k > 0 && pick[k] == pick[k - 1])
                continue;
            bool same = false;
            int rc = block_of(&f, i, pick[k], &same, false);
            CHECK_MSG(rc == 0, "%s site %zu (%s) leaf %llu: %s", preset, i, rec->op, (unsigned long long)pick[k],
                      ovt_errmsg());
            CHECK_MSG(same, "%s site %zu (%s) leaf %llu of %llu: the block is not the step's", preset, i, rec->op,
                      (unsigned long long)pick[k], (unsigned long long)leaves);
            blocks++;
        }
        arb_block_task task = {.config = &f.rc, .step = 1};
        arb_block_owned own;
        CHECK(arb_block_from_trace(&task, &own, f.t, i, f.log, 0) == 0);
        arb_block_plan p;
        CHECK(arb_block_plan_make(&task, &p) == 0);
        if (p.whole)
            whole_rows++;
        else if (p.row_hi - p.row_lo < p.rows)
            partial_rows++;
        arb_block_plan_free(&p);
        arb_block_owned_free(&own);
    }
    printf("%s: %zu of %zu sites by block (%zu with several leaves; %zu from a part of the rows, %zu need every "
           "row), %zu blocks the step's; whole step only:%s\n",
           preset, supported, krn_trace_count(f.t), multi, partial_rows, whole_rows, blocks, missing);
    CHECK(supported >= min_supported);
    CHECK(blocks > supported);
    step_close(&f);
}

/* A slice's bytes (its leaves' elements, the last leaf maybe short). */
static size_t slice_bytes(const arb_block_slice *s)
{
    uint64_t e0 = s->first_leaf * LEAF_ELEMS, e1 = (s->first_leaf + s->nleaves) * LEAF_ELEMS;
    return (size_t)((e1 < s->n ? e1 : s->n) - e0) * 4;
}

/* One element alone (the span of a single element: the rows it needs, not
 * the leaf's), for every site the engine knows: the step's value, from
 * fewer rows where the op has rows. */
static void test_elements(const char *preset, uint32_t batch, uint32_t seq)
{
    step_fixture f;
    step_open(&f, preset, batch, seq);
    int same = 0, tried = 0, fewer = 0;
    for (size_t i = 0; i < krn_trace_count(f.t); i++) {
        const krn_trace_record *rec = krn_trace_record_at(f.t, i);
        if (!arb_block_supported(rec->op))
            continue;
        uint64_t leaves = ovt_tree_leaves(rec->n * 4), L = leaves / 2;
        uint64_t e0 = L * LEAF_ELEMS, e1 = rec->n < e0 + LEAF_ELEMS ? rec->n : e0 + LEAF_ELEMS;
        uint64_t e = e0 + (e1 - e0) / 2;
        arb_block_task task = {.config = &f.rc, .step = 1, .threads = 1};
        arb_block_owned own;
        CHECK(arb_block_from_trace(&task, &own, f.t, i, f.log, L) == 0);
        arb_block_plan whole_leaf;
        CHECK(arb_block_plan_make(&task, &whole_leaf) == 0);
        task.span_first = e;
        task.span_count = 1;
        /* the run reads the slices in place where it can (a weight read
         * whole): it must leave their bytes as they were */
        float *before[8] = {0};
        size_t nb = own.nslices < 8 ? own.nslices : 8;
        for (size_t k = 0; k < nb; k++)
            if ((before[k] = malloc(slice_bytes(&own.slices[k]))) != NULL)
                memcpy(before[k], own.slices[k].data, slice_bytes(&own.slices[k]));
        arb_block_result r;
        int rc = arb_block_run(&task, &r);
        for (size_t k = 0; k < nb; k++) {
            CHECK_MSG(before[k] && memcmp(before[k], own.slices[k].data, slice_bytes(&own.slices[k])) == 0,
                      "%s site %zu (%s): the block changed its slice %zu", preset, i, rec->op, k);
            free(before[k]);
        }
        CHECK_MSG(rc == 0, "%s site %zu (%s) element %llu: %s", preset, i, rec->op, (unsigned long long)e,
                  ovt_errmsg());
        size_t n;
        const float *out = krn_trace_written(f.t, KRN_TRACE_SITE, (uint32_t)i, &n);
        tried++;
        if (rc == 0) {
            same += r.first == e && r.count == 1 && memcmp(&r.values[0], &out[e], 4) == 0;
            fewer += r.plan.row_hi - r.plan.row_lo < whole_leaf.row_hi - whole_leaf.row_lo;
            arb_block_result_free(&r);
        }
        arb_block_plan_free(&whole_leaf);
        arb_block_owned_free(&own);
    }
    printf("%s: %d of %d single elements the step's, %d from fewer rows than their leaf\n", preset, same, tried,
           fewer);
    CHECK(same == tried && tried > 0);
    CHECK(fewer > tried / 4);
    step_close(&f);
}

/* The first site named op with a leaf that holds at least min log entries. */
static bool find_logged(const step_fixture *f, const char *op, size_t min, size_t *site, uint64_t *leaf)
{
    for (size_t i = 0; i < krn_trace_count(f->t); i++) {
        const krn_trace_record *rec = krn_trace_record_at(f->t, i);
        const krn_rlog_site *ls = krn_rlog_find(f->log, rec->site);
        if (strcmp(rec->op, op) || ls == NULL)
            continue;
        for (size_t k = 0; k + min <= ls->count && min > 0; k++)
            if (ls->entries[k].index / LEAF_ELEMS == ls->entries[k + min - 1].index / LEAF_ELEMS) {
                *site = i;
                *leaf = ls->entries[k].index / LEAF_ELEMS;
                return true;
            }
    }
    return false;
}

/* A gpt2-tiny step, and a matmul.fwd site and leaf with min log entries. */
static void open_logged_matmul(step_fixture *f, size_t min, size_t *i, uint64_t *L)
{
    step_open(f, "gpt2-tiny", 8, 64);
    CHECK(find_logged(f, "matmul.fwd", min, i, L));
}

/* What must fail, on gpt2-tiny. */
static void test_refusals(void)
{
    step_fixture f;
    size_t i = 0;
    uint64_t L = 0;
    open_logged_matmul(&f, 1, &i, &L);
    arb_block_task task = {.config = &f.rc, .step = 1, .threads = 1};
    arb_block_owned own;
    arb_block_result r;
    CHECK(arb_block_from_trace(&task, &own, f.t, i, f.log, L) == 0);
    CHECK(task.nslices >= 2);

    /* one bit of a slice changed: its proof fails, naming it */
    own.slices[0].data[3] = -own.slices[0].data[3];
    CHECK(arb_block_run(&task, &r) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "does not prove against its root") != NULL);
    own.slices[0].data[3] = -own.slices[0].data[3];
    CHECK(arb_block_run(&task, &r) == 0);
    arb_block_result_free(&r);

    /* a proof for other leaves than the slice's */
    own.slices[0].first_leaf ^= 1;
    CHECK(arb_block_run(&task, &r) == OVT_EFRAUD);
    own.slices[0].first_leaf ^= 1;

    /* a slice withheld */
    task.nslices--;
    CHECK(arb_block_run(&task, &r) == OVT_ENOTFOUND);
    CHECK(strstr(ovt_errmsg(), "withheld") != NULL);
    task.nslices++;

    /* a leaf outside the site */
    task.leaf = ovt_tree_leaves(task.n * 4);
    CHECK(arb_block_run(&task, &r) == OVT_EINVAL);
    task.leaf = L;
    arb_block_owned_free(&own);

    /* a log entry dropped: the block is not the trainer's output, or the
     * arbiter's rule rejects it (a missing entry) */
    bool same = true;
    int rc = block_of(&f, i, L, &same, true);
    CHECK_MSG(rc == OVT_EFRAUD || (rc == 0 && !same), "rc %d: %s", rc, ovt_errmsg());
    printf("a dropped entry of site %zu leaf %llu: %s\n", i, (unsigned long long)L,
           rc ? ovt_errmsg() : "the block differs from the trainer's");

    /* an op the engine does not know is refused, naming the fallback */
    arb_block_task other = {.config = &f.rc, .step = 1, .n = 1};
    snprintf(other.op, sizeof other.op, "bn.running_var");
    arb_block_plan p;
    CHECK(arb_block_plan_make(&other, &p) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "whole step") != NULL);
    step_close(&f);
}

/* A package cut short anywhere is refused; one with any one byte changed
 * is refused (a proof fails, a field is malformed) or re-executes to the
 * honest leaf (a byte the block does not use), except in the run config,
 * which the package carries unbound: the arbiter must compare it with the
 * run's configHash (docs/formats.md, "Block package"). Nothing crashes:
 * the reader takes untrusted bytes. */
static void test_package_bytes(void)
{
    step_fixture f;
    size_t i = 0;
    uint64_t L = 0;
    open_logged_matmul(&f, 1, &i, &L);
    ovt_hash root;
    memset(&root, 0, sizeof root);
    CHECK(krn_trace_finish(f.t, &root) == 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(arb_block_package_make(&buf, &len, &f.rc, f.t, &root, 1, i, L, f.log) == 0);
    arb_block_package p;
    arb_block_result r;
    CHECK(arb_block_package_read(&p, buf, len) == 0);
    CHECK(arb_block_run(&p.task, &r) == 0);
    ovt_hash honest = r.leaf;
    CHECK_MEM(honest.b, p.claim.b, 32);
    arb_block_result_free(&r);
    arb_block_package_free(&p);
    if (buf == NULL || len < 100)
        return;
    /* the same package from a second run of the step that keeps only the
     * block's sources (what `ovt block pack` does), byte for byte */
    krn_trace *lean;
    krn_rlog *log2 = krn_rlog_new();
    CHECK(krn_trace_new(&lean, false) == 0);
    CHECK(arb_block_keep_for(lean, f.t, i, &f.rc, 1, L) == 0);
    run_traced(&f, lean, log2);
    uint8_t *buf2 = NULL;
    size_t len2 = 0;
    CHECK(arb_block_package_make(&buf2, &len2, &f.rc, lean, &root, 1, i, L, log2) == 0);
    CHECK(len2 == len && buf2 && memcmp(buf, buf2, len) == 0);
    size_t kept_n;
    CHECK(krn_trace_written(lean, KRN_TRACE_SITE, (uint32_t)i, &kept_n) != NULL);
    CHECK(krn_trace_written(lean, KRN_TRACE_SITE, (uint32_t)(i + 1), &kept_n) == NULL); /* not a source */
    free(buf2);
    krn_rlog_free(log2);
    krn_trace_free(lean);
    size_t cfg_lo = 16, cfg_hi = 16 + (size_t)ovt_get_le32(buf + 12); /* magic, version, config length */
    int cuts = 0, cut_refused = 0, flips = 0, refused = 0, harmless = 0, config_changed = 0, other = 0;
    for (size_t cut = 0; cut < len; cut += cut < 4096 ? 7 : 4099, cuts++)
        cut_refused += arb_block_package_read(&p, buf, cut) < 0;
    for (size_t at = 0; at < len; at += at < 4096 ? 3 : 1021, flips++) {
        buf[at] ^= 0x10;
        int rc = arb_block_package_read(&p, buf, len);
        bool same = false;
        if (rc == 0) {
            rc = arb_block_run(&p.task, &r);
            same = rc == 0 && memcmp(r.leaf.b, honest.b, 32) == 0;
            if (rc == 0)
                arb_block_result_free(&r);
            arb_block_package_free(&p);
        }
        refused += rc < 0;
        harmless += rc == 0 && same;
        config_changed += rc == 0 && !same && at >= cfg_lo && at < cfg_hi;
        other += rc == 0 && !same && !(at >= cfg_lo && at < cfg_hi);
        buf[at] ^= 0x10;
    }
    printf("package of %zu bytes: %d of %d cuts refused; of %d one-byte changes %d refused, %d harmless, %d in "
           "the config changed the block, %d elsewhere did\n",
           len, cut_refused, cuts, flips, refused, harmless, config_changed, other);
    CHECK(cut_refused == cuts);
    CHECK(other == 0);
    CHECK(refused > flips / 2);
    free(buf);
    step_close(&f);
}

/* ---- the trainer's log in place of the package's entries ---- */

/* Where a package's entry count lies: after the header, the run config,
 * the claim with its proof and the disputed record with its proof
 * (docs/formats.md, "Block package"). */
static size_t entries_at(const uint8_t *buf, size_t len)
{
    size_t at = 16 + (size_t)ovt_get_le32(buf + 12); /* magic, version, config length, config */
    at += 32 + 4 + 8 + 4 + 8 + 32;                   /* trace root, records, step, site, leaf, claim */
    at += 4 + 32 * (size_t)ovt_get_le32(buf + at);   /* the claim's proof */
    at += 4 + (size_t)ovt_get_le32(buf + at);        /* the record */
    at += 4 + 32 * (size_t)ovt_get_le32(buf + at);   /* its proof */
    CHECK(at + 4 <= len);
    return at;
}

/* buf with its entries replaced by e[0..n): what a lying packer hands over
 * (nothing binds the entries; *out malloc'd). */
static void forge_entries(uint8_t **out, size_t *out_len, const uint8_t *buf, size_t len, const krn_rlog_entry *e,
                          size_t n)
{
    size_t at = entries_at(buf, len), tail = at + 4 + 13 * (size_t)ovt_get_le32(buf + at);
    *out_len = at + 4 + 13 * n + (len - tail);
    *out = malloc(*out_len);
    CHECK(*out != NULL);
    if (*out == NULL)
        return;
    memcpy(*out, buf, at);
    ovt_put_le32(*out + at, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        uint8_t *q = *out + at + 4 + 13 * k;
        uint32_t u;
        memcpy(&u, &e[k].value, 4);
        ovt_put_le64(q, e[k].index);
        q[8] = (uint8_t)e[k].dir;
        ovt_put_le32(q + 9, u);
    }
    memcpy(*out + at + 4 + 13 * n, buf + tail, len - tail);
}

/* The package's entries with direction entry `which` (counted from the
 * first at or after element `from`) turned the other way and, when drop,
 * another entry dropped: one changed, one dropped. *e malloc'd; false
 * when there is no such entry. */
static bool lie_about_entries(krn_rlog_entry **e, size_t *n, const arb_block_task *t, uint64_t from, size_t which,
                              bool drop)
{
    *e = malloc((t->nentries + 1) * sizeof **e);
    CHECK(*e != NULL);
    if (*e == NULL)
        return false;
    memcpy(*e, t->entries, t->nentries * sizeof **e);
    *n = t->nentries;
    size_t changed = SIZE_MAX;
    for (size_t k = 0; k < *n && changed == SIZE_MAX; k++)
        if ((*e)[k].index >= from && (*e)[k].dir != KRN_DIR_VALUE && which-- == 0) {
            (*e)[k].dir = (*e)[k].dir == KRN_DIR_UP ? KRN_DIR_DOWN : KRN_DIR_UP;
            changed = k;
        }
    if (drop && *n >= 2) {
        size_t d = changed == *n - 1 ? *n - 2 : *n - 1;
        memmove(*e + d, *e + d + 1, (*n - d - 1) * sizeof **e);
        (*n)--;
    }
    if (changed == SIZE_MAX) {
        free(*e);
        *e = NULL;
    }
    return changed != SIZE_MAX;
}

/* The block of package bytes, with the log's entries (log) or the
 * package's (NULL): 0 and *leaf, or the refusal. */
static int check_package(const uint8_t *buf, size_t len, const krn_rlog *log, ovt_hash *leaf, bool *differed)
{
    arb_block_package p;
    arb_block_result r;
    int rc = arb_block_package_read(&p, buf, len);
    if (rc < 0)
        return rc;
    *differed = false;
    if (log && (rc = arb_block_entries_from_log(&p.task, &p.own, log, differed)) < 0) {
        arb_block_package_free(&p);
        return rc;
    }
    if ((rc = arb_block_run(&p.task, &r)) == 0) {
        *leaf = r.leaf;
        arb_block_result_free(&r);
    }
    arb_block_package_free(&p);
    return rc;
}

/* Which direction entry of the package's leaf, turned the other way,
 * fools an arbiter that takes the package's entries: the block is then
 * accepted (the arbiter's rule allows either direction where its own value
 * is that close to the midpoint) and is not the honest one. */
static bool fooling_change(const uint8_t *buf, size_t len, const ovt_hash *honest, size_t *which)
{
    arb_block_package p;
    if (arb_block_package_read(&p, buf, len) < 0)
        return false;
    krn_rlog_entry *e;
    size_t n;
    bool found = false;
    for (*which = 0; !found && lie_about_entries(&e, &n, &p.task, p.task.leaf * LEAF_ELEMS, *which, false);
         ++*which) {
        uint8_t *forged = NULL;
        size_t flen = 0;
        ovt_hash leaf;
        bool differed;
        forge_entries(&forged, &flen, buf, len, e, n);
        found = check_package(forged, flen, NULL, &leaf, &differed) == 0 && memcmp(leaf.b, honest->b, 32) != 0;
        free(forged);
        free(e);
    }
    ovt_err_clear();
    if (found)
        --*which;
    arb_block_package_free(&p);
    return found;
}

/* A package whose entries were changed (one turned the other way) and one
 * dropped: with its own entries the block is not the trainer's (the
 * package fools an arbiter that takes them); with the trainer's log's it is
 * the true block. */
static void test_log_entries(void)
{
    step_fixture f;
    step_open(&f, "gpt2-tiny", 8, 64);
    ovt_hash root, honest, leaf;
    memset(&root, 0, sizeof root);
    CHECK(krn_trace_finish(f.t, &root) == 0);
    CHECK(krn_rlog_step(f.log) == 1);
    /* the first site and leaf (of at least two entries) where one changed
     * entry fools the package's own entries */
    uint8_t *buf = NULL, *forged = NULL;
    size_t len = 0, flen = 0, which = 0, i, tried = 0;
    uint64_t L = 0;
    bool differed = true, found = false;
    for (i = 0; i < krn_trace_count(f.t) && !found; i++) {
        const krn_trace_record *rec = krn_trace_record_at(f.t, i);
        const krn_rlog_site *ls = krn_rlog_find(f.log, rec->site);
        if (ls == NULL || ls->count < 2 || !arb_block_supported(rec->op))
            continue;
        L = ls->entries[0].index / LEAF_ELEMS;
        if (ls->entries[1].index / LEAF_ELEMS != L)
            continue;
        free(buf);
        buf = NULL;
        tried++;
        CHECK(arb_block_package_make(&buf, &len, &f.rc, f.t, &root, 1, i, L, f.log) == 0);
        CHECK(check_package(buf, len, NULL, &honest, &differed) == 0);
        found = fooling_change(buf, len, &honest, &which);
    }
    i--;
    CHECK_MSG(found, "no entry of %zu sites' first leaves fools the package's entries", tried);
    if (!found) {
        free(buf);
        step_close(&f);
        return;
    }
    /* the honest package: the log's entries are its own */
    CHECK(check_package(buf, len, f.log, &leaf, &differed) == 0);
    CHECK(!differed);
    CHECK_MEM(leaf.b, honest.b, 32);
    arb_block_package p;
    CHECK(arb_block_package_read(&p, buf, len) == 0);
    krn_rlog_entry *e = NULL;
    size_t n = 0;
    /* one entry changed: the package's entries give another block (fooled);
     * the log's the true one */
    CHECK(lie_about_entries(&e, &n, &p.task, L * LEAF_ELEMS, which, false));
    forge_entries(&forged, &flen, buf, len, e, n);
    int rc = check_package(forged, flen, NULL, &leaf, &differed);
    CHECK_MSG(rc == 0 && memcmp(leaf.b, honest.b, 32) != 0, "a changed entry: rc %d (%s)", rc, ovt_errmsg());
    CHECK(check_package(forged, flen, f.log, &leaf, &differed) == 0);
    CHECK(differed);
    CHECK_MEM(leaf.b, honest.b, 32);
    free(forged);
    free(e);
    /* one changed and one dropped: refused or another block without the
     * log; the true block with it */
    CHECK(lie_about_entries(&e, &n, &p.task, L * LEAF_ELEMS, which, true));
    CHECK(n + 1 == p.task.nentries);
    forge_entries(&forged, &flen, buf, len, e, n);
    rc = check_package(forged, flen, NULL, &leaf, &differed);
    CHECK_MSG(rc == OVT_EFRAUD || (rc == 0 && memcmp(leaf.b, honest.b, 32) != 0), "rc %d", rc);
    CHECK(check_package(forged, flen, f.log, &leaf, &differed) == 0);
    CHECK(differed);
    CHECK_MEM(leaf.b, honest.b, 32);
    printf("site %zu (%s) leaf %llu, %zu entries: entry %zu changed fools the package's entries; with one dropped "
           "too: %s; with the trainer's log both give the true block\n",
           i, p.task.op, (unsigned long long)L, p.task.nentries, which, rc ? "refused" : "another block");
    free(forged);
    free(e);
    /* a log of another step is refused, the package's entries kept */
    krn_rlog *other = krn_rlog_new();
    krn_rlog_reset(other, 7);
    size_t before = p.task.nentries;
    CHECK(arb_block_entries_from_log(&p.task, &p.own, other, &differed) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "of step 7") != NULL);
    CHECK(p.task.nentries == before);
    krn_rlog_free(other);
    arb_block_package_free(&p);
    free(buf);
    step_close(&f);
}

/* dir/name into out (512 bytes). */
static void in_dir(char *out, const char *name)
{
    snprintf(out, 512, "%s/%s", dir, name);
}

/* A gpt2-tiny run of `steps` steps (4 x 32 tokens, a checkpoint each) in
 * dir/name on tok's tokens, with extra flags. */
static void tiny_run(char *tok, char *run, const char *name, int steps, const char *extra)
{
    in_dir(tok, "t.tok");
    in_dir(run, name);
    CHECK(cli_fox_tokens(tok, 300) == 0);
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s --steps %d --batch 4 --seq 32 --every 0 "
                  "--checkpoint-every 1%s",
                  tok, run, steps, extra) == 0);
}

static void test_cli(void)
{
    char tok[512], run[512], honest[512], faulty[512], bad[512], line[256];
    in_dir(honest, "honest.blk");
    in_dir(faulty, "faulty.blk");
    in_dir(bad, "bad.blk");
    /* site 150 of gpt2-tiny's step: adamw.param, the last site (120576
     * elements, 8 leaves); element 40000 lies in leaf 2. (A flip in an
     * earlier site makes the trainer's log, recorded from the flipped
     * values, fail the fraud check at a later site: the step level then
     * decides, FraudulentLog.) */
    tiny_run(tok, run, "run", 3, " --inject-fault flip-output --fault-step 2 --fault-site 150 --fault-element 40000");
    CHECK(run_ovt("step --run %s --step 2 --data %s", run, tok) == 1);
    CHECK(output_has("does NOT match the step table"));
    CHECK(run_ovt("block pack %s --step 2 --site 150 --leaf 2 --out %s --data %s", run, honest, tok) == 0);
    CHECK(output_has("site 150 (adamw.param, 120576 elements), leaf 2 of 8"));
    CHECK(run_ovt("block pack %s --step 2 --site 150 --leaf 2 --out %s --data %s --inject-fault flip-output "
                  "--fault-element 40000",
                  run, faulty, tok) == 0);

    /* the faulty party's package: its claim is not the block */
    char trainer_leaf[67], auditor_leaf[67], trainer_root[67];
    CHECK(run_ovt("block check %s --json", faulty) == 0);
    CHECK(output_has("\"site\": 150") && output_has("\"op\": \"adamw.param\"") && output_has("\"leaf\": 2,"));
    CHECK(output_has("\"claim_matches\": false"));
    CHECK(output_hex("claimed_leaf", trainer_leaf) && output_hex("trace_root", trainer_root));
    /* the honest one's: its claim is; with both claims, the verdict */
    CHECK(run_ovt("block check %s --json", honest) == 0);
    CHECK(output_has("\"claim_matches\": true"));
    CHECK(output_hex("claimed_leaf", auditor_leaf));
    CHECK(strcmp(trainer_leaf, auditor_leaf) != 0);
    CHECK(run_ovt("block check %s --trainer-leaf %s --auditor-leaf %s", faulty, trainer_leaf, auditor_leaf) == 0);
    CHECK(output_has("verdict: auditor-right"));
    snprintf(line, sizeof line, "recomputed leaf %s", auditor_leaf);
    CHECK(output_has(line) && output_has("site 150 (adamw.param), leaf 2"));
    CHECK(output_has("DIFFERS: the packing party's block is wrong"));

    /* refused: a package bound to another trace root, one changed byte of
     * a slice, a truncated one, not a package at all */
    CHECK(run_ovt("block check %s --trace-root %s", honest, trainer_root) == 1);
    CHECK(output_has("not the agreed one"));
    /* the run config it carries must be the run's: configHash from config.bin */
    char config_bin[600], config_hex[67] = "0x";
    uint8_t *cb = NULL;
    size_t cl = 0;
    snprintf(config_bin, sizeof config_bin, "%s/config.bin", run);
    CHECK(ovt_read_file(config_bin, &cb, &cl, 1 << 16) == 0);
    ovt_hash ch;
    ovt_sha256(&ch, cb, cl);
    free(cb);
    ovt_hex_encode(config_hex + 2, ch.b, 32);
    CHECK(run_ovt("block check %s --config-hash %s", honest, config_hex) == 0);
    CHECK(output_has("matches"));
    CHECK(run_ovt("block check %s --config-hash %s", honest, auditor_leaf) == 1);
    CHECK(output_has("another run config"));
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(ovt_read_file(honest, &buf, &len, 1 << 26) == 0 && len > 100);
    if (buf == NULL || len <= 100)
        return;
    buf[len - 100] ^= 1;
    CHECK(ovt_write_atomic(bad, buf, len, 0644) == 0);
    CHECK(run_ovt("block check %s", bad) == 1);
    CHECK(output_has("refused") && output_has("does not prove against its root"));
    CHECK(ovt_write_atomic(bad, buf, len - 7, 0644) == 0);
    CHECK(run_ovt("block check %s", bad) == 1);
    CHECK(output_has("truncated"));
    CHECK(ovt_write_atomic(bad, "hello", 5, 0644) == 0);
    CHECK(run_ovt("block check %s", bad) == 1);
    CHECK(output_has("not a block package"));
    free(buf);
    CHECK(run_ovt("block pack %s --step 2 --site 9999 --leaf 0 --out %s --data %s", run, bad, tok) == 1);
    CHECK(output_has("step 2 has 151 sites"));
    CHECK(run_ovt("block frob") == 2);
}

/* `ovt block check --log`: a package whose entries a lying packer changed
 * gives another block from its own entries and the true one with the
 * trainer's log file of the run. */
static void test_cli_log(void)
{
    char tok[512], run[512], honest[512], forged[512], logfile[600], other_log[600];
    in_dir(honest, "log-honest.blk");
    in_dir(forged, "log-forged.blk");
    tiny_run(tok, run, "run-log", 2, "");
    snprintf(logfile, sizeof logfile, "%s/logs/step-00000002.rlog", run);
    snprintf(other_log, sizeof other_log, "%s/logs/step-00000001.rlog", run);
    /* the first site of step 2's log whose first entry's leaf has an entry
     * that, changed, fools the package's entries: packed by the honest
     * party, then the lie written into a copy */
    krn_rlog *log = krn_rlog_new();
    CHECK(krn_rlog_read_file(log, logfile) == 0);
    char truth[67], got[67];
    uint8_t *buf = NULL, *bad = NULL;
    size_t len = 0, blen = 0, n = 0, which = 0;
    bool found = false;
    for (size_t k = 0; k < krn_rlog_nsites(log) && k < 24 && !found; k++) {
        const krn_rlog_site *ls = krn_rlog_site_at(log, k);
        uint64_t L = ls->entries[0].index / LEAF_ELEMS;
        free(buf);
        buf = NULL;
        if (run_ovt("block pack %s --step 2 --site %u --leaf %llu --out %s --data %s", run, ls->site,
                    (unsigned long long)L, honest, tok) != 0 ||
            run_ovt("block check %s --json --log %s", honest, logfile) != 0)
            continue;
        CHECK(output_has("\"claim_matches\": true") && output_has("\"entries_from\": \"log\""));
        CHECK(output_hex("recomputed_leaf", truth));
        ovt_hash h;
        CHECK(ovt_hex_decode(h.b, 32, truth + 2) == 0);
        CHECK(ovt_read_file(honest, &buf, &len, 1 << 26) == 0);
        found = buf && fooling_change(buf, len, &h, &which);
    }
    krn_rlog_free(log);
    CHECK_MSG(found, "no site of step 2's log has an entry whose change fools the package's entries");
    arb_block_package p;
    krn_rlog_entry *e = NULL;
    if (!found || arb_block_package_read(&p, buf, len) < 0) {
        free(buf);
        return;
    }
    CHECK(lie_about_entries(&e, &n, &p.task, p.task.leaf * LEAF_ELEMS, which, false));
    forge_entries(&bad, &blen, buf, len, e, n);
    arb_block_package_free(&p);
    CHECK(ovt_write_atomic(forged, bad, blen, 0644) == 0);
    free(e);
    free(bad);
    free(buf);
    /* without the log: another block (the arbiter fooled) */
    CHECK(run_ovt("block check %s --json", forged) == 0);
    CHECK(output_has("\"entries_from\": \"package\""));
    CHECK(output_hex("recomputed_leaf", got) && strcmp(got, truth) != 0);
    /* with it: the true block, and it says the entries were replaced */
    CHECK(run_ovt("block check %s --json --log %s", forged, logfile) == 0);
    CHECK(output_has("\"claim_matches\": true") && output_has("\"entries_from\": \"log-replaced\""));
    CHECK(output_hex("recomputed_leaf", got) && strcmp(got, truth) == 0);
    CHECK(run_ovt("block check %s --log %s", forged, logfile) == 0);
    CHECK(output_has("differ from the trainer's log: replaced"));
    /* another step's log, a missing one, --log with pack: refused */
    CHECK(run_ovt("block check %s --log %s", forged, other_log) == 1);
    CHECK(output_has("is of step 1, the block of step 2"));
    CHECK(run_ovt("block check %s --log %s/nope.rlog", forged, dir) == 1);
    CHECK(run_ovt("block pack %s --step 2 --site 0 --leaf 0 --out %s --log %s", run, forged, logfile) == 2);
}

/* The first site of op in f's step (SIZE_MAX: none). */
static size_t site_of_op(const step_fixture *f, const char *op)
{
    for (size_t k = 0; k < krn_trace_count(f->t); k++)
        if (strcmp(krn_trace_record_at(f->t, k)->op, op) == 0)
            return k;
    return SIZE_MAX;
}

/* Element packages of the last leaf of the first site of op: elements 0,
 * the middle one and the last of the leaf, each re-executed alone to the
 * traced output's bits (its element node the hash of those bits) from a
 * package smaller than the leaf's (smaller: strictly; else the leaf's
 * inputs are one tree leaf anyway, and the package is the leaf's and its
 * 8-byte element); a changed slice word is refused, an element past the
 * leaf cannot be packed. */
static void test_element_package(const char *preset, uint32_t batch, uint32_t seq, const char *op, bool smaller)
{
    step_fixture f;
    step_open(&f, preset, batch, seq);
    size_t i = site_of_op(&f, op);
    CHECK_MSG(i != SIZE_MAX, "%s has no %s site", preset, op);
    ovt_hash root;
    memset(&root, 0, sizeof root);
    CHECK(krn_trace_finish(f.t, &root) == 0);
    const krn_trace_record *rec = i == SIZE_MAX ? NULL : krn_trace_record_at(f.t, i);
    uint8_t *leaf_buf = NULL, *buf = NULL;
    size_t leaf_len = 0, len = 0, n = 0;
    uint64_t L = rec ? ovt_tree_leaves(rec->n * 4) - 1 : 0, count = rec ? rec->n - L * LEAF_ELEMS : 0;
    if (rec)
        CHECK(arb_block_package_make(&leaf_buf, &leaf_len, &f.rc, f.t, &root, 1, i, L, f.log) == 0);
    const float *out = rec ? krn_trace_written(f.t, KRN_TRACE_SITE, (uint32_t)i, &n) : NULL;
    uint64_t es[3] = {0, count / 2, count ? count - 1 : 0};
    for (int k = 0; k < 3 && rec && out; k++) {
        CHECK(arb_block_element_package_make(&buf, &len, &f.rc, f.t, &root, 1, i, L, f.log, es[k]) == 0);
        CHECK_MSG(smaller ? len < leaf_len : len <= leaf_len + 8, "%s element package %zu bytes, the leaf's %zu", op,
                  len, leaf_len);
        arb_block_package p;
        arb_block_result r;
        CHECK(arb_block_package_read(&p, buf, len) == 0);
        CHECK_EQ_U64(p.task.span_first, L * LEAF_ELEMS + es[k]);
        CHECK_EQ_U64(p.task.span_count, 1);
        int rc = arb_block_run(&p.task, &r);
        CHECK_MSG(rc == 0, "%s %s element %llu: %s", preset, op, (unsigned long long)es[k], ovt_errmsg());
        if (rc == 0) {
            const float *want = out + L * LEAF_ELEMS + es[k];
            CHECK(r.count == 1 && memcmp(&r.values[0], want, 4) == 0);
            ovt_hash node, direct;
            chain_narrow_element_leaves(&node, &r.values[0], 1);
            uint8_t le[4];
            uint32_t bits;
            memcpy(&bits, want, 4);
            ovt_put_le32(le, bits);
            ovt_tree_leaf(&direct, le, 4);
            CHECK_MEM(node.b, direct.b, 32);
            arb_block_result_free(&r);
        }
        if (k == 1)
            printf("%s %s: element package %zu bytes, the leaf's %zu (%.1f%%), rows %zu slices\n", preset, op, len,
                   leaf_len, 100.0 * (double)len / (double)leaf_len, p.task.nslices);
        arb_block_package_free(&p);
        buf[len - 3] ^= 0x01; /* a word of the last slice */
        CHECK(arb_block_package_read(&p, buf, len) == 0);
        rc = arb_block_run(&p.task, &r);
        CHECK_MSG(rc == OVT_EFRAUD, "a changed slice gave %d", rc);
        if (rc == 0)
            arb_block_result_free(&r);
        arb_block_package_free(&p);
        free(buf);
        buf = NULL;
    }
    if (rec && count < LEAF_ELEMS)
        CHECK(arb_block_element_package_make(&buf, &len, &f.rc, f.t, &root, 1, i, L, f.log, count) != 0);
    free(buf);
    free(leaf_buf);
    step_close(&f);
}

/* `ovt block pack --element` of gpt2-tiny's xent.sum site and `ovt block
 * check` of it: the element's node decides between two element leaves. */
static void test_element_cli(void)
{
    step_fixture f;
    step_open(&f, "gpt2-tiny", 4, 32);
    size_t site = site_of_op(&f, "xent.sum");
    step_close(&f);
    CHECK(site != SIZE_MAX);
    char tok[512], run[512], pkg[512], leaf_pkg[512];
    snprintf(tok, sizeof tok, "%s/e.tok", dir);
    snprintf(run, sizeof run, "%s/erun", dir);
    snprintf(pkg, sizeof pkg, "%s/element.blk", dir);
    snprintf(leaf_pkg, sizeof leaf_pkg, "%s/leaf.blk", dir);
    CHECK(cli_fox_tokens(tok, 300) == 0);
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s --steps 2 --batch 4 --seq 32 --every 0 "
                  "--checkpoint-every 1",
                  tok, run) == 0);
    CHECK(run_ovt("block pack %s --step 2 --site %zu --leaf 0 --element 77 --out %s --data %s", run, site, pkg,
                  tok) == 0);
    CHECK(output_has("(xent.sum, 128 elements), leaf 0 of 1") && output_has("element 77 of the leaf"));
    CHECK(run_ovt("block check %s --json", pkg) == 0);
    char node[67], other[67] = "0x";
    CHECK(output_hex("element_node", node) && output_has("\"element\": 77,"));
    CHECK(output_has("\"verdict\": null") && output_has("\"op\": \"xent.sum\""));
    CHECK(output_has("\"row_lo\": 77,") && output_has("\"row_hi\": 78,")); /* only row 77's logits are read */
    for (int k = 0; k < 64; k++)
        other[2 + k] = node[2 + k] == 'a' ? 'b' : 'a';
    other[66] = 0;
    CHECK(run_ovt("block check %s --trainer-node %s --auditor-node %s", pkg, other, node) == 0);
    CHECK(output_has("verdict: auditor-right") && output_has("element 77"));
    CHECK(run_ovt("block check %s --trainer-node %s --auditor-node %s", pkg, node, other) == 0);
    CHECK(output_has("verdict: trainer-right"));
    CHECK(run_ovt("block check %s --trainer-node %s --auditor-node %s", pkg, other, other) == 0);
    CHECK(output_has("verdict: neither"));
    /* the leaf package of the same leaf: no element to compare */
    CHECK(run_ovt("block pack %s --step 2 --site %zu --leaf 0 --out %s --data %s", run, site, leaf_pkg, tok) == 0);
    CHECK(run_ovt("block check %s --trainer-node %s", leaf_pkg, node) == 1);
    CHECK(output_has("is a leaf package"));
    CHECK(run_ovt("block pack %s --step 2 --site %zu --leaf 0 --element 16384 --out %s --data %s", run, site, pkg,
                  tok) == 2);
    CHECK(run_ovt("block pack %s --step 2 --site %zu --leaf 0 --element 128 --out %s --data %s", run, site, pkg,
                  tok) == 1);
    CHECK(output_has("not within leaf 0"));

    /* the party agent's side (party/narrow.c): at the element posting its
     * planner posts the root of the leaf's element tree, and the package it
     * publishes for element 77 is the command's, byte for byte */
    CHECK(run_ovt("block pack %s --step 2 --site %zu --leaf 0 --element 77 --out %s --data %s", run, site, pkg,
                  tok) == 0);
    char steps[600];
    snprintf(steps, sizeof steps, "%s/steps.bin", run);
    trn_step_table table;
    CHECK(trn_step_table_read(&table, steps) == 0);
    party_narrow_step ps;
    CHECK_MSG(party_narrow_load(&ps, run, tok, 2, &table.steps[2], NULL) == 0, "%s", ovt_errmsg());
    size_t n = 0;
    const float *out = krn_trace_written(ps.trace, KRN_TRACE_SITE, (uint32_t)site, &n);
    CHECK(out && n == 128);
    chain_narrow_game g;
    memset(&g, 0, sizeof g);
    g.phase = CHAIN_NARROW_PHASE_POSTING;
    g.stage = CHAIN_NARROW_STAGE_ELEMENTS;
    g.item_stage = CHAIN_NARROW_STAGE_TRACE;
    g.item = site;
    g.count = n;
    if (out)
        ovt_tree_leaf_le32(&g.auditor_side.block_leaf, out, n * 4);
    chain_narrow_party party = party_narrow_party(&ps, 0, 0);
    chain_narrow_move mv;
    CHECK_MSG(chain_narrow_plan_move(&mv, &g, &party) == 0, "%s", ovt_errmsg());
    CHECK_EQ_U64(mv.kind, CHAIN_NARROW_MOVE_POST_ELEMENTS);
    ovt_hash leaves[128], want;
    if (out && n == 128) {
        chain_narrow_element_leaves(leaves, out, n);
        ovt_tree_root_of_leaves(&want, leaves, n);
        CHECK_MEM(mv.chain_root.b, want.b, 32);
    }
    uint8_t *mine = NULL, *theirs = NULL;
    size_t mine_len = 0, theirs_len = 0;
    CHECK(party_narrow_pack_element(&ps, site, 0, 77, &mine, &mine_len) == 0);
    CHECK(ovt_read_file(pkg, &theirs, &theirs_len, 1 << 26) == 0);
    CHECK(mine && theirs && mine_len == theirs_len && memcmp(mine, theirs, mine_len) == 0);
    free(mine);
    free(theirs);
    party_narrow_free(&ps);
    trn_step_table_free(&table);
}

int main(int argc, char **argv)
{
    if (cli_setup("arb-block"))
        return 1;
    if (argc == 2 && !strcmp(argv[1], "log")) {
        /* test_arb_block_log: the trainer's log in place of the package's entries alone */
        CHECK_RUN(test_log_entries());
        CHECK_RUN(test_cli_log());
        cli_cleanup();
        return check_done();
    }
    CHECK_RUN(test_cli());
    CHECK_RUN(test_element_package("gpt2-tiny", 8, 64, "xent.sum", true));
    CHECK_RUN(test_element_package("gpt2-tiny", 8, 64, "layernorm.mean", true));
    CHECK_RUN(test_element_package("gpt2-tiny", 8, 64, "layernorm.bwd.dmean", true));
    CHECK_RUN(test_element_package("llama-tiny", 8, 64, "rmsnorm.rstd", false));
    CHECK_RUN(test_element_cli());
    CHECK_RUN(test_package_bytes());
    CHECK_RUN(test_log_entries());
    CHECK_RUN(test_elements("gpt2-tiny", 8, 64));
    CHECK_RUN(test_elements("resnet-mini", 4, 0));
    CHECK_RUN(test_refusals());
    CHECK_RUN(test_preset("gpt2-tiny", 8, 64, 151));
    CHECK_RUN(test_preset("llama-tiny", 8, 64, 150));
    CHECK_RUN(test_preset("mlp-demo", 64, 0, 40));
    CHECK_RUN(test_preset("resnet-mini", 4, 0, 164));
    cli_cleanup();
    return check_done();
}
