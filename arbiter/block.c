/* One block of one site re-executed from proven inputs (arbiter/block.h). */
#include "arbiter/block.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block_ops.h"
#include "common/tree.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

void arb_block_plan_free(arb_block_plan *p)
{
    free(p->needs);
    memset(p, 0, sizeof *p);
}

void arb_block_result_free(arb_block_result *r)
{
    free(r->values);
    free(r->entries);
    arb_block_plan_free(&r->plan);
    memset(r, 0, sizeof *r);
}

bool arb_block_supported(const char *op)
{
    return blk_op_find(op) != NULL;
}

/* ---- the record's inputs ---- */

/* One run of an input's elements: input positions [dst, dst + count) are
 * the source's from offset on. */
typedef struct {
    uint64_t dst, count, offset;
    const arb_block_read *read;
} blk_run;

typedef struct {
    blk_rec rec;
    blk_run *runs[BLK_MAX_INPUTS];
    size_t nruns[BLK_MAX_INPUTS];
} blk_inputs;

static void inputs_free(blk_inputs *in)
{
    for (size_t m = 0; m < BLK_MAX_INPUTS; m++)
        free(in->runs[m]);
}

static int run_cmp(const void *a, const void *b)
{
    const blk_run *x = a, *y = b;
    return x->dst < y->dst ? -1 : x->dst > y->dst;
}

/* The inputs' sizes and their runs, sorted by position. */
static int inputs_of(const arb_block_task *task, blk_inputs *in)
{
    memset(in, 0, sizeof *in);
    in->rec.n = task->n;
    in->rec.cfg = task->config;
    in->rec.step = task->step;
    for (size_t k = 0; k < task->nreads; k++) {
        const krn_trace_src *s = &task->reads[k].src;
        if (s->input >= BLK_MAX_INPUTS)
            return ovt_fail(OVT_EINVAL, "block: site %u reads input %u; the engine takes %d", task->site, s->input,
                            BLK_MAX_INPUTS);
        if (s->input + 1 > in->rec.ninputs)
            in->rec.ninputs = s->input + 1;
        in->rec.S[s->input] += s->count * s->rows;
        in->nruns[s->input] += s->rows;
    }
    for (size_t m = 0; m < in->rec.ninputs; m++) {
        if ((in->runs[m] = calloc(in->nruns[m] ? in->nruns[m] : 1, sizeof(blk_run))) == NULL)
            return ovt_fail(OVT_ENOMEM, "block: out of memory for the site's reads");
        in->nruns[m] = 0;
    }
    for (size_t k = 0; k < task->nreads; k++) {
        const krn_trace_src *s = &task->reads[k].src;
        for (uint64_t r = 0; r < s->rows; r++)
            in->runs[s->input][in->nruns[s->input]++] =
                (blk_run){.dst = s->dst + r * s->dst_step, .count = s->count,
                          .offset = s->offset + r * s->src_step, .read = &task->reads[k]};
    }
    for (size_t m = 0; m < in->rec.ninputs; m++)
        qsort(in->runs[m], in->nruns[m], sizeof(blk_run), run_cmp);
    return 0;
}

/* The first run of input m that ends after position pos. */
static size_t run_at(const blk_inputs *in, size_t m, uint64_t pos)
{
    size_t lo = 0, hi = in->nruns[m];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const blk_run *r = &in->runs[m][mid];
        if (r->dst + r->count <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool same_source(const arb_block_read *rd, krn_trace_kind kind, uint32_t site, const char *name)
{
    if (rd->src.kind != kind)
        return false;
    return kind == KRN_TRACE_SITE ? rd->src.site == site : strcmp(rd->name, name) == 0;
}

/* ---- the plan ---- */

/* Input m's positions the rows [r0, r1) read. */
static void input_range(const blk_shape *sh, const blk_inputs *in, size_t m, uint64_t r0, uint64_t r1,
                        uint64_t *lo, uint64_t *hi)
{
    uint64_t S = in->rec.S[m];
    if (sh->whole || (sh->whole_inputs >> m & 1u) || S % sh->R) {
        *lo = 0;
        *hi = S;
    } else {
        *lo = r0 * (S / sh->R);
        *hi = r1 * (S / sh->R);
    }
}

/* Widens (or adds) the need for a source to cover [lo, hi). */
static int need_add(arb_block_plan *p, const arb_block_read *rd, uint64_t lo, uint64_t hi)
{
    if (rd->src.kind == KRN_TRACE_ZERO)
        return 0;
    for (size_t i = 0; i < p->nneeds; i++) {
        arb_block_need *nd = &p->needs[i];
        if (nd->kind == rd->src.kind && (nd->kind == KRN_TRACE_SITE ? nd->site == rd->src.site
                                                                    : strcmp(nd->name, rd->name) == 0)) {
            nd->lo = lo < nd->lo ? lo : nd->lo;
            nd->hi = hi > nd->hi ? hi : nd->hi;
            return 0;
        }
    }
    arb_block_need *q = realloc(p->needs, (p->nneeds + 1) * sizeof *q);
    if (q == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for the plan");
    p->needs = q;
    q[p->nneeds++] = (arb_block_need){.kind = rd->src.kind, .site = rd->src.site, .lo = lo, .hi = hi};
    snprintf(q[p->nneeds - 1].name, sizeof q->name, "%s", rd->name);
    return 0;
}

/* The output elements [*e0, *e1) the task asks for: leaf L's, or the span
 * inside it. */
static int span_of(const arb_block_task *task, uint64_t *e0, uint64_t *e1)
{
    *e0 = task->leaf * LEAF_ELEMS;
    if (task->n == 0 || *e0 >= task->n)
        return ovt_fail(OVT_EINVAL, "block: leaf %llu is outside site %u's output of %llu elements (%llu leaves)",
                        (unsigned long long)task->leaf, task->site, (unsigned long long)task->n,
                        (unsigned long long)ovt_tree_leaves(task->n * 4));
    *e1 = *e0 + LEAF_ELEMS < task->n ? *e0 + LEAF_ELEMS : task->n;
    if (task->span_count == 0)
        return 0;
    if (task->span_first < *e0 || task->span_count > *e1 - task->span_first)
        return ovt_fail(OVT_EINVAL, "block: elements %llu..%llu are not within leaf %llu of site %u",
                        (unsigned long long)task->span_first,
                        (unsigned long long)(task->span_first + task->span_count - 1), (unsigned long long)task->leaf,
                        task->site);
    *e0 = task->span_first;
    *e1 = task->span_first + task->span_count;
    return 0;
}

static int plan_of(const arb_block_task *task, const blk_op *op, const blk_inputs *in, const blk_shape *sh,
                   arb_block_plan *p)
{
    memset(p, 0, sizeof *p);
    uint64_t e0, e1;
    int rc = span_of(task, &e0, &e1);
    if (rc < 0)
        return rc;
    if (sh->R == 0 || (!sh->whole && task->n % sh->R))
        return ovt_fail(OVT_EINVAL, "block: site %u (%s): its %llu elements are not %llu rows", task->site, op->name,
                        (unsigned long long)task->n, (unsigned long long)sh->R);
    uint64_t w = sh->whole ? task->n : task->n / sh->R; /* whole: one row of output, every input row */
    p->rows = sh->R;
    p->whole = sh->whole;
    p->row_lo = sh->whole ? 0 : e0 / w;
    p->row_hi = sh->whole ? sh->R : (e1 + w - 1) / w;
    p->out_lo = sh->whole ? 0 : p->row_lo * w;
    p->out_hi = sh->whole ? task->n : p->row_hi * w;
    for (size_t m = 0; m < in->rec.ninputs; m++) {
        uint64_t lo, hi;
        input_range(sh, in, m, p->row_lo, p->row_hi, &lo, &hi);
        for (size_t i = run_at(in, m, lo); i < in->nruns[m] && in->runs[m][i].dst < hi; i++) {
            const blk_run *r = &in->runs[m][i];
            uint64_t a = lo > r->dst ? lo : r->dst, b = hi < r->dst + r->count ? hi : r->dst + r->count;
            if ((rc = need_add(p, r->read, r->offset + (a - r->dst), r->offset + (b - r->dst))) < 0) {
                arb_block_plan_free(p);
                return rc;
            }
        }
    }
    return 0;
}

/* The op, the inputs and the shape of task. */
static int prepare(const arb_block_task *task, const blk_op **op, blk_inputs *in, blk_shape *sh)
{
    memset(in, 0, sizeof *in);
    if ((*op = blk_op_find(task->op)) == NULL)
        return ovt_fail(OVT_EINVAL, "block: site %u's op '%s' has no block re-execution yet: the whole step decides "
                                    "(docs/arbiter.md, \"One block of one site\")",
                        task->site, task->op);
    int rc = inputs_of(task, in);
    if (rc == 0 && (rc = (*op)->shape(&in->rec, sh)) < 0)
        rc = ovt_fail_wrap(rc, "block: site %u (%s)", task->site, task->op);
    return rc;
}

int arb_block_plan_make(const arb_block_task *task, arb_block_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    const blk_op *op;
    blk_inputs in;
    blk_shape sh;
    int rc = prepare(task, &op, &in, &sh);
    if (rc == 0)
        rc = plan_of(task, op, &in, &sh, plan);
    inputs_free(&in);
    return rc;
}

/* ---- the slices ---- */

int arb_block_slice_verify(const arb_block_slice *s)
{
    uint64_t leaves = ovt_tree_leaves(s->n * 4);
    const char *kind = s->kind == KRN_TRACE_SITE ? "site" : s->kind == KRN_TRACE_STATE ? "state" : "batch";
    char what[96];
    if (s->kind == KRN_TRACE_SITE)
        snprintf(what, sizeof what, "site %u's output", s->site);
    else
        snprintf(what, sizeof what, "%s tensor %s", kind, s->name);
    if (s->nleaves == 0 || s->first_leaf >= leaves || s->nleaves > leaves - s->first_leaf)
        return ovt_fail(OVT_EFRAUD, "block: the slice of %s names leaves %llu..%llu of its %llu: not a range of it",
                        what, (unsigned long long)s->first_leaf,
                        (unsigned long long)(s->first_leaf + s->nleaves), (unsigned long long)leaves);
    ovt_hash *h = malloc(s->nleaves * sizeof *h);
    if (h == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for a slice's leaves");
    for (uint64_t i = 0; i < s->nleaves; i++) {
        uint64_t e0 = (s->first_leaf + i) * LEAF_ELEMS;
        uint64_t len = s->n - e0 < LEAF_ELEMS ? s->n - e0 : LEAF_ELEMS;
        ovt_tree_leaf_le32(&h[i], s->data + (e0 - s->first_leaf * LEAF_ELEMS), len * 4);
    }
    bool ok = ovt_tree_verify(&s->root, leaves, s->first_leaf, s->nleaves, h, s->proof, s->proof_len);
    free(h);
    char root[65];
    ovt_hex_encode(root, s->root.b, 32);
    if (!ok)
        return ovt_fail(OVT_EFRAUD, "block: the slice of %s (leaves %llu..%llu) does not prove against its root %s: "
                                    "its bytes or its proof were changed; the party that gave it loses",
                        what, (unsigned long long)s->first_leaf, (unsigned long long)(s->first_leaf + s->nleaves - 1),
                        root);
    return 0;
}

/* The slice that holds source elements [lo, hi), or NULL. */
static const arb_block_slice *slice_for(const arb_block_task *task, const arb_block_read *rd, uint64_t lo,
                                        uint64_t hi)
{
    for (size_t i = 0; i < task->nslices; i++) {
        const arb_block_slice *s = &task->slices[i];
        uint64_t a = s->first_leaf * LEAF_ELEMS, b = (s->first_leaf + s->nleaves) * LEAF_ELEMS;
        b = b < s->n ? b : s->n;
        if (same_source(rd, s->kind, s->site, s->name) && a <= lo && hi <= b)
            return s;
    }
    return NULL;
}

/* ---- block mode's fill ---- */

typedef struct {
    const arb_block_task *task;
    const blk_inputs *in;
    const blk_shape *sh;
    const arb_block_plan *plan;
    int rc;
    char msg[400];
} fill_state;

static void fill_fail(fill_state *fs, int rc, const char *fmt, ...) OVT_PRINTF(3, 4);
static void fill_fail(fill_state *fs, int rc, const char *fmt, ...)
{
    if (fs->rc < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fs->msg, sizeof fs->msg, fmt, ap);
    va_end(ap);
    fs->rc = rc;
}

/* Whether dst[0 .. n) shares an element with any slice's memory (which
 * the block only reads: the slices are the caller's). */
static bool in_slices(const arb_block_task *task, const float *dst, uint64_t n)
{
    uintptr_t a = (uintptr_t)dst, b = a + n * 4;
    for (size_t i = 0; i < task->nslices; i++) {
        const arb_block_slice *s = &task->slices[i];
        uint64_t count = s->nleaves * LEAF_ELEMS;
        if (count > s->n - s->first_leaf * LEAF_ELEMS)
            count = s->n - s->first_leaf * LEAF_ELEMS;
        uintptr_t lo = (uintptr_t)s->data;
        if (a < lo + count * 4 && lo < b)
            return true;
    }
    return false;
}

/* Writes input m's positions [pos, pos + len) to dst from the slices. */
static void fill_range(fill_state *fs, unsigned m, uint64_t pos, uint64_t len, float *dst)
{
    const blk_inputs *in = fs->in;
    uint64_t end = pos + len;
    size_t i = run_at(in, m, pos);
    while (pos < end && fs->rc == 0) {
        if (i >= in->nruns[m] || in->runs[m][i].dst > pos)
            return fill_fail(fs, OVT_EINVAL, "block: site %u's input %u has no source at position %llu",
                             fs->task->site, m, (unsigned long long)pos);
        const blk_run *r = &in->runs[m][i];
        uint64_t b = end < r->dst + r->count ? end : r->dst + r->count, n = b - pos;
        uint64_t off = r->offset + (pos - r->dst);
        if (r->read->src.kind == KRN_TRACE_ZERO) {
            memset(dst, 0, n * 4);
        } else {
            const arb_block_slice *s = slice_for(fs->task, r->read, off, off + n);
            if (s == NULL)
                return fill_fail(fs, OVT_ENOTFOUND,
                                 "block: the package holds no slice of %s %s%u covering its elements %llu..%llu, "
                                 "which site %u reads: the party that must provide it withheld it",
                                 r->read->src.kind == KRN_TRACE_SITE ? "site" : "region", r->read->name,
                                 r->read->src.kind == KRN_TRACE_SITE ? r->read->src.site : 0,
                                 (unsigned long long)off, (unsigned long long)(off + n), fs->task->site);
            const float *src = s->data + (off - s->first_leaf * LEAF_ELEMS);
            if (dst != src && in_slices(fs->task, dst, n))
                return fill_fail(fs, OVT_EINVAL,
                                 "block: site %u's op reads input %u (elements %llu..%llu) into a proven slice's "
                                 "memory, not where it holds them (an engine bug: a slice's memory is read in "
                                 "place only where it already holds the input, never written)",
                                 fs->task->site, m, (unsigned long long)off, (unsigned long long)(off + n));
            if (dst != src) /* the op reads the slice in place (blk_shape.given): nothing to copy */
                memcpy(dst, src, n * 4);
        }
        dst += n;
        pos = b;
        i++;
    }
}

static void block_fill(void *arg, unsigned m, float *p, size_t width, size_t stride, size_t rows)
{
    fill_state *fs = arg;
    if (fs->rc < 0)
        return;
    if (m >= fs->in->rec.ninputs)
        return fill_fail(fs, OVT_EINVAL, "block: the op declares input %u of site %u, whose record has %zu", m,
                         fs->task->site, fs->in->rec.ninputs);
    uint64_t lo, hi, size = (uint64_t)width * rows;
    input_range(fs->sh, fs->in, m, fs->plan->row_lo, fs->plan->row_hi, &lo, &hi);
    if (hi - lo != size)
        return fill_fail(fs, OVT_EINVAL, "block: site %u (%s) reads %llu elements of input %u for rows %llu..%llu; "
                                         "the record's input gives %llu",
                         fs->task->site, fs->task->op, (unsigned long long)size, m,
                         (unsigned long long)fs->plan->row_lo, (unsigned long long)fs->plan->row_hi,
                         (unsigned long long)(hi - lo));
    for (size_t r = 0; r < rows && fs->rc == 0; r++)
        fill_range(fs, m, lo + (uint64_t)r * width, width, p + r * stride);
}

int arb_block_read_input(const arb_block_task *task, unsigned m, uint64_t pos, uint64_t len, float *dst)
{
    blk_inputs in;
    int rc = inputs_of(task, &in);
    if (rc == 0 && (m >= in.rec.ninputs || len > in.rec.S[m] || pos > in.rec.S[m] - len))
        rc = ovt_fail(OVT_EINVAL, "block: site %u has no elements %llu..%llu of input %u", task->site,
                      (unsigned long long)pos, (unsigned long long)(pos + len), m);
    if (rc == 0) {
        fill_state fs = {.task = task, .in = &in};
        fill_range(&fs, m, pos, len, dst);
        if (fs.rc < 0)
            rc = ovt_fail(fs.rc, "%s", fs.msg);
    }
    inputs_free(&in);
    return rc;
}

int arb_block_need_input(const arb_block_task *task, unsigned m, uint64_t lo, uint64_t hi, arb_block_plan *p)
{
    blk_inputs in;
    int rc = inputs_of(task, &in);
    if (rc == 0 && (m >= in.rec.ninputs || hi > in.rec.S[m] || lo > hi))
        rc = ovt_fail(OVT_EINVAL, "block: site %u has no elements %llu..%llu of input %u", task->site,
                      (unsigned long long)lo, (unsigned long long)hi, m);
    for (size_t i = rc == 0 ? run_at(&in, m, lo) : 0; rc == 0 && i < in.nruns[m] && in.runs[m][i].dst < hi; i++) {
        const blk_run *r = &in.runs[m][i];
        uint64_t a = lo > r->dst ? lo : r->dst, b = hi < r->dst + r->count ? hi : r->dst + r->count;
        rc = need_add(p, r->read, r->offset + (a - r->dst), r->offset + (b - r->dst));
    }
    inputs_free(&in);
    return rc;
}

_Static_assert(BLK_MAX_INPUTS == ARB_BLOCK_MAX_INPUTS, "one input limit");

int arb_block_input_sizes(const arb_block_task *task, uint64_t sizes[ARB_BLOCK_MAX_INPUTS], size_t *ninputs)
{
    blk_inputs in;
    int rc = inputs_of(task, &in);
    *ninputs = rc == 0 ? in.rec.ninputs : 0;
    for (size_t m = 0; m < *ninputs; m++)
        sizes[m] = in.rec.S[m];
    inputs_free(&in);
    return rc;
}

/* ---- the run ---- */

/* Sets sh->given[m] for each input m read whole from one slice: one run
 * of one source covering the input, held by one (verified) slice, so that
 * an op that only reads it takes the slice's memory instead of a copy
 * (issue 42: the LM head's weight, 512 MB at Llama-7B's shapes, was held
 * twice). The op's values are the same bits either way. */
static void given_of(const arb_block_task *task, const blk_inputs *in, blk_shape *sh)
{
    for (size_t m = 0; m < in->rec.ninputs; m++) {
        sh->given[m] = NULL;
        if (!(sh->whole || (sh->whole_inputs >> m & 1u)) || in->nruns[m] != 1)
            continue;
        const blk_run *r = &in->runs[m][0];
        if (r->dst != 0 || r->count != in->rec.S[m] || r->read->src.kind == KRN_TRACE_ZERO)
            continue;
        const arb_block_slice *s = slice_for(task, r->read, r->offset, r->offset + r->count);
        if (s != NULL)
            sh->given[m] = s->data + (r->offset - s->first_leaf * LEAF_ELEMS);
    }
}

int arb_block_sub_log(const arb_block_task *task, uint64_t lo, uint64_t hi, unsigned target, krn_rlog **out)
{
    *out = krn_rlog_new();
    if (*out == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for the log");
    krn_rlog_reset(*out, task->step);
    size_t k0 = 0, k1 = 0;
    while (k0 < task->nentries && task->entries[k0].index < lo)
        k0++;
    for (k1 = k0; k1 < task->nentries && task->entries[k1].index < hi; k1++)
        ;
    if (k1 == k0)
        return 0;
    krn_rlog_entry *e = malloc((k1 - k0) * sizeof *e);
    if (e == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for the log");
    for (size_t k = k0; k < k1; k++) {
        e[k - k0] = task->entries[k];
        e[k - k0].index -= lo;
    }
    int rc = krn_rlog_add_site(*out, target, hi - lo, e, k1 - k0);
    free(e);
    if (rc < 0)
        return ovt_fail_wrap(rc, "block: site %u's log entries", task->site);
    return 0;
}

/* RECORD: the entries the sub-run made for the site, at their indices in
 * the site's output. */
static int made_entries(const krn_rlog *log, unsigned target, const arb_block_plan *p, arb_block_result *res)
{
    const krn_rlog_site *ls = krn_rlog_find(log, target);
    if (ls == NULL || ls->count == 0)
        return 0;
    if ((res->entries = malloc(ls->count * sizeof *res->entries)) == NULL)
        return ovt_fail(OVT_ENOMEM, "block: out of memory for the entries");
    for (size_t k = 0; k < ls->count; k++) {
        res->entries[k] = ls->entries[k];
        res->entries[k].index += p->out_lo;
    }
    res->nentries = ls->count;
    return 0;
}

static int sub_run(const arb_block_task *task, const blk_op *op, const blk_inputs *in, const blk_shape *sh,
                   const arb_block_plan *p, float *out, arb_block_result *res)
{
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = task->record ? KRN_RECORD : KRN_REPLAY,
                     .verifier = KRN_VERIFY_ARBITER,
                     .grid_bits = (int)task->config->grid_bits, .threads = task->threads > 0 ? task->threads : 1,
                     .rule = trn_config_rule(task->config)};
    krn_ctx *ctx = NULL;
    krn_rlog *log = NULL;
    int rc = krn_ctx_new(&ctx, &kc);
    if (rc == 0 && task->record && (log = krn_rlog_new()) == NULL)
        rc = ovt_fail(OVT_ENOMEM, "block: out of memory for the log");
    else if (rc == 0 && !task->record)
        rc = arb_block_sub_log(task, p->out_lo, p->out_hi, op->target, &log);
    if (rc == 0)
        rc = krn_step_begin(ctx, task->step, log);
    if (rc < 0)
        goto done;
    fill_state fs = {.task = task, .in = in, .sh = sh, .plan = p};
    size_t n = p->out_hi - p->out_lo;
    krn_ctx_block(ctx, op->target, block_fill, &fs, out, n);
    rc = op->call(ctx, sh, p->row_hi - p->row_lo, task->config);
    size_t got = krn_ctx_block_reached(ctx);
    char msg[480];
    snprintf(msg, sizeof msg, "%s", ovt_errmsg());
    krn_stats st;
    int end = krn_step_end(ctx, &st);
    (void)end; /* the stop after the target fails the step on purpose */
    if (fs.rc < 0)
        rc = ovt_fail(fs.rc, "%s", fs.msg);
    else if (got == 0)
        rc = ovt_fail(rc < 0 ? rc : OVT_EINVAL, "block: step %llu site %u (%s): %s", (unsigned long long)task->step,
                      task->site, task->op, rc < 0 ? msg : "the op never reached the site");
    else if (got != n)
        rc = ovt_fail(OVT_EINVAL, "block: site %u (%s) computed %zu elements for rows %llu..%llu, not %zu",
                      task->site, task->op, got, (unsigned long long)p->row_lo, (unsigned long long)p->row_hi, n);
    else
        rc = task->record ? made_entries(log, op->target, p, res) : 0;
done:
    krn_ctx_block(ctx, 0, NULL, NULL, NULL, 0);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    return rc;
}

int arb_block_run(const arb_block_task *task, arb_block_result *out)
{
    memset(out, 0, sizeof *out);
    const blk_op *op;
    blk_inputs in;
    blk_shape sh;
    float *all = NULL;
    int rc = prepare(task, &op, &in, &sh);
    if (rc == 0)
        rc = plan_of(task, op, &in, &sh, &out->plan);
    for (size_t i = 0; i < task->nslices && rc == 0; i++)
        rc = arb_block_slice_verify(&task->slices[i]);
    if (rc < 0)
        goto done;
    given_of(task, &in, &sh);
    const arb_block_plan *p = &out->plan;
    if ((all = malloc((p->out_hi - p->out_lo) * sizeof *all)) == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "block: out of memory for rows %llu..%llu of site %u",
                      (unsigned long long)p->row_lo, (unsigned long long)p->row_hi, task->site);
        goto done;
    }
    if ((rc = sub_run(task, op, &in, &sh, p, all, out)) < 0)
        goto done;
    uint64_t e1;
    (void)span_of(task, &out->first, &e1); /* checked by plan_of */
    out->count = e1 - out->first;
    if ((out->values = malloc(out->count * sizeof *out->values)) == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "block: out of memory for the block");
        goto done;
    }
    memcpy(out->values, all + (out->first - p->out_lo), out->count * 4);
    if (task->span_count == 0)
        ovt_tree_leaf_le32(&out->leaf, out->values, out->count * 4);
done:
    free(all);
    inputs_free(&in);
    if (rc < 0)
        arb_block_result_free(out);
    return rc;
}
