/* The step's trace (kernels/trace.h): a record per site of what it wrote
 * and what it read, hashed into one root. The recorder keeps the step's
 * writes in order (the registered regions first, then each site's output
 * and each zeroed range as they happen) and names each part of a read by
 * the latest write that covers it. */
#include "kernels/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tree.h"
#include "kernels/site_internal.h"

/* One write of the step: `rows` rows of `width` bytes, row i at
 * lo + i*stride (one row for a site's output, a region, a zeroed range;
 * several for a site's output copied into every row of a wider tensor,
 * krn_trace_scatter). Row i holds the source's bytes from
 * src_off + i*width on. */
typedef struct {
    uintptr_t lo;
    size_t rows, width, stride, src_off;
    krn_trace_kind kind;
    uint32_t id;      /* the site (KRN_TRACE_SITE) or the region (STATE, BATCH) */
    uint8_t *copy;    /* check mode: the rows as written (NULL for ZERO) */
} trace_write;

static uintptr_t write_end(const trace_write *w)
{
    return w->lo + (w->rows - 1) * w->stride + w->width;
}

/* A read declared for the k-th site from now. */
typedef struct {
    unsigned k;
    const void *p;
    size_t width, stride, rows; /* elements */
} trace_pending;

typedef struct {
    char name[64];
} trace_region;

/* A source whose writes a trace keeps (krn_trace_keep). */
typedef struct {
    krn_trace_kind kind;
    uint32_t id;
} trace_keep;

struct krn_trace {
    bool check;
    bool outputs_only; /* krn_trace_outputs_only: no reads, no record hashes, one site's root */
    uint32_t only_site;
    int rc;            /* the first failure, or 0 */
    char msg[480];
    trace_region *regions;
    size_t nregions, regions_cap;
    trace_write *writes;
    size_t nwrites, writes_cap;
    trace_pending *pending;
    size_t npending, pending_cap;
    krn_trace_record *records;
    size_t nrecords, records_cap;
    krn_trace_src *reads;
    size_t nreads, reads_cap;
    trace_keep *keep; /* not check mode: the sources whose writes are copied (krn_trace_keep) */
    size_t nkeep;
};

/* Grows *p (of *cap elements of size sz) to hold n; false when out of memory. */
static bool grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    void *q = realloc(*p, c * sz);
    if (q == NULL)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* grow() for the array t->arr with its capacity t->cap_field. */
#define GROW(t, arr, cap_field, need) grow((void **)&(t)->arr, &(t)->cap_field, (need), sizeof *(t)->arr)

/* Records the trace's first failure (the step is not affected): OVT_EINVAL
 * for a read or declaration the trace cannot name, and out of memory. */
static void trace_fail_code(krn_trace *t, int code, const char *fmt, va_list ap)
{
    if (t->rc < 0)
        return;
    vsnprintf(t->msg, sizeof t->msg, fmt, ap);
    t->rc = code;
}

static void trace_fail(krn_trace *t, const char *fmt, ...) OVT_PRINTF(2, 3);
static void trace_fail(krn_trace *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    trace_fail_code(t, OVT_EINVAL, fmt, ap);
    va_end(ap);
}

static void trace_oom(krn_trace *t, const char *fmt, ...) OVT_PRINTF(2, 3);
static void trace_oom(krn_trace *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    trace_fail_code(t, OVT_ENOMEM, fmt, ap);
    va_end(ap);
}

/* Whether the trace keeps copies of source (kind, id)'s writes. */
static bool kept(const krn_trace *t, krn_trace_kind kind, uint32_t id)
{
    for (size_t i = 0; i < t->nkeep; i++)
        if (t->keep[i].kind == kind && t->keep[i].id == id)
            return true;
    return false;
}

int krn_trace_keep(krn_trace *t, krn_trace_kind kind, uint32_t id)
{
    trace_keep *k = realloc(t->keep, (t->nkeep + 1) * sizeof *k);
    if (k == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for the trace's kept sources");
    t->keep = k;
    t->keep[t->nkeep++] = (trace_keep){.kind = kind, .id = id};
    return 0;
}

int krn_trace_new(krn_trace **out, bool check)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for a step trace");
    (*out)->check = check;
    return 0;
}

void krn_trace_free(krn_trace *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nwrites; i++)
        free(t->writes[i].copy);
    free(t->writes);
    free(t->keep);
    free(t->regions);
    free(t->pending);
    free(t->records);
    free(t->reads);
    free(t);
}

int krn_ctx_set_trace(krn_ctx *ctx, krn_trace *t)
{
    if (t != NULL && ctx->cfg.backend == KRN_BACKEND_CUDA)
        return ovt_fail(OVT_EINVAL, "the step trace is not available on the cuda backend yet (its outputs "
                                    "stay on the device): trace on cpu, ref or shuffle");
    ctx->trace = t;
    return 0;
}

krn_trace *krn_ctx_trace(const krn_ctx *ctx)
{
    return ctx->trace;
}

void krn_trace_outputs_only(krn_trace *t, uint32_t site)
{
    t->outputs_only = true;
    t->only_site = site;
}

/* Appends a write (w's copy is made here in check mode). */
static void add_write_rows(krn_trace *t, trace_write w)
{
    if (t->rc < 0 || w.rows == 0 || w.width == 0)
        return;
    if (!GROW(t, writes, writes_cap, t->nwrites + 1))
        return trace_oom(t, "out of memory for the trace's writes");
    if (w.kind != KRN_TRACE_ZERO && (t->check || kept(t, w.kind, w.id))) {
        if ((w.copy = malloc(w.rows * w.width)) == NULL)
            return trace_oom(t, "out of memory for the trace's check copies");
        for (size_t i = 0; i < w.rows; i++)
            memcpy(w.copy + i * w.width, (const uint8_t *)(w.lo + i * w.stride), w.width);
    }
    t->writes[t->nwrites++] = w;
}

/* Appends a write of count elements at p. */
static void add_write(krn_trace *t, krn_trace_kind kind, uint32_t id, const void *p, size_t count)
{
    add_write_rows(t, (trace_write){.lo = (uintptr_t)p, .rows = 1, .width = count * 4, .stride = count * 4,
                                    .kind = kind, .id = id});
}

int krn_trace_region(krn_trace *t, krn_trace_kind kind, const char *name, const void *p, size_t count)
{
    if (kind != KRN_TRACE_STATE && kind != KRN_TRACE_BATCH)
        return ovt_fail(OVT_EINVAL, "krn_trace_region: a region is state or batch");
    if (strlen(name) >= sizeof t->regions[0].name)
        return ovt_fail(OVT_EINVAL, "krn_trace_region: name '%s' is too long", name);
    if (!GROW(t, regions, regions_cap, t->nregions + 1))
        return ovt_fail(OVT_ENOMEM, "out of memory for the trace's regions");
    snprintf(t->regions[t->nregions].name, sizeof t->regions[0].name, "%s", name);
    add_write(t, kind, (uint32_t)t->nregions, p, count);
    t->nregions++;
    return t->rc < 0 ? ovt_fail(t->rc, "%s", t->msg) : 0;
}

void krn_trace_zero(krn_ctx *ctx, const void *p, size_t count)
{
    if (ctx->trace != NULL && !ctx->trace->outputs_only)
        add_write(ctx->trace, KRN_TRACE_ZERO, 0, p, count);
}

/* Block mode: a read declared for the target site is handed to the
 * block's fill, numbered as take_reads numbers the record's inputs. */
static void block_read(krn_ctx *ctx, unsigned k, const void *p, size_t width, size_t stride, size_t rows)
{
    if (!ctx->block.on || p == NULL || width == 0 || rows == 0 ||
        ctx->step.next_site + (uint64_t)k != ctx->block.target)
        return;
    ctx->block.fill(ctx->block.arg, ctx->block.inputs++, (float *)(uintptr_t)p, width, stride, rows);
}

void krn_ctx_block(krn_ctx *ctx, uint32_t target, krn_block_fill fill, void *arg, float *result, size_t cap)
{
    ctx->block.result = result;
    ctx->block.result_cap = cap;
    ctx->block.result_n = 0;
    ctx->block.on = fill != NULL;
    ctx->block.reached = false;
    ctx->block.target = target;
    ctx->block.fill = fill;
    ctx->block.arg = arg;
    ctx->block.inputs = 0;
}

void krn_block_done(const site_job *job)
{
    krn_ctx *ctx = job->ctx;
    ctx->block.reached = true;
    ctx->block.result_n = job->n;
    memcpy(ctx->block.result, job->out, (job->n < ctx->block.result_cap ? job->n : ctx->block.result_cap) * 4);
}

size_t krn_ctx_block_reached(const krn_ctx *ctx)
{
    return ctx->block.reached ? ctx->block.result_n : 0;
}

void krn_trace_reads(krn_ctx *ctx, unsigned k, const krn_span *reads, size_t nreads)
{
    for (size_t i = 0; ctx->block.on && i < nreads; i++)
        block_read(ctx, k, reads[i].p, reads[i].count, reads[i].count, 1);
    krn_trace *t = ctx->trace;
    if (t == NULL || t->rc < 0 || t->outputs_only)
        return;
    if (!GROW(t, pending, pending_cap, t->npending + nreads))
        return trace_oom(t, "out of memory for the trace's declared reads");
    for (size_t i = 0; i < nreads; i++)
        if (reads[i].p != NULL && reads[i].count > 0)
            t->pending[t->npending++] = (trace_pending){.k = k, .p = reads[i].p, .width = reads[i].count,
                                                        .stride = reads[i].count, .rows = 1};
}

void krn_trace_read_rows(krn_ctx *ctx, unsigned k, const void *p, size_t width, size_t stride, size_t rows)
{
    block_read(ctx, k, p, width, stride, rows);
    krn_trace *t = ctx->trace;
    if (t == NULL || t->rc < 0 || t->outputs_only || p == NULL || width == 0 || rows == 0)
        return;
    if (!GROW(t, pending, pending_cap, t->npending + 1))
        return trace_oom(t, "out of memory for the trace's declared reads");
    t->pending[t->npending++] = (trace_pending){.k = k, .p = p, .width = width, .stride = stride, .rows = rows};
}

/* ---- resolving a read ---- */

typedef struct {
    krn_trace *t;
    uint32_t site;       /* the site that reads */
    const char *name;
    uintptr_t out_lo, out_hi; /* its output, which it may have written over its reads */
    bool dry;            /* check the bytes only, record nothing */
    uint32_t input;      /* the input being resolved (its number in the site's declarations) */
    uintptr_t row_lo;    /* the row of it being resolved: its address, */
    uint64_t row_pos;    /* and its first element's position in the input */
} resolver;

/* Check mode: the bytes [lo, hi) of row `row` of write w now hold what w
 * put there (skipped where the reading site has since written over them
 * in place). */
static void check_bytes(resolver *r, const trace_write *w, size_t row, uintptr_t lo, uintptr_t hi)
{
    if (!r->t->check || (lo < r->out_hi && r->out_lo < hi))
        return;
    const uint8_t *now = (const uint8_t *)lo;
    bool same = true;
    if (w->kind == KRN_TRACE_ZERO) {
        for (uintptr_t i = 0; i < hi - lo && same; i++)
            same = now[i] == 0;
    } else {
        same = memcmp(now, w->copy + row * w->width + (lo - (w->lo + row * w->stride)), hi - lo) == 0;
    }
    if (!same)
        trace_fail(r->t, "step trace: site %u (%s) reads %zu bytes that no longer hold what their "
                         "source (kind %d, %u) wrote: a write the trace does not know of",
                   r->site, r->name, (size_t)(hi - lo), (int)w->kind, w->id);
}

/* Folds part s into one of the last few parts of its input when it
 * continues it (the next elements of both) or adds a run at the same
 * distances (the next row of a fused tensor's third); true if it did. The
 * parts of an input arrive in increasing dst. */
static bool merge_src(krn_trace *t, const krn_trace_src *s)
{
    size_t first = t->records[t->nrecords].first_read;
    for (size_t j = t->nreads, look = 0; j > first && look < 8; j--, look++) {
        krn_trace_src *p = &t->reads[j - 1];
        if (p->input != s->input)
            return false;
        if (p->kind != s->kind || p->site != s->site || p->region != s->region)
            continue;
        bool src_next = s->kind == KRN_TRACE_ZERO || p->offset + p->count == s->offset;
        if (p->rows == 1 && p->dst + p->count == s->dst && src_next) {
            p->count += s->count;
            return true;
        }
        if (p->count != s->count || s->offset < p->offset || s->dst <= p->dst)
            continue;
        if (p->rows == 1) {
            p->rows = 2;
            p->src_step = s->offset - p->offset;
            p->dst_step = s->dst - p->dst;
            return true;
        }
        if (p->rows < UINT32_MAX && s->offset == p->offset + p->rows * p->src_step &&
            s->dst == p->dst + p->rows * p->dst_step) {
            p->rows++;
            return true;
        }
    }
    return false;
}

/* Appends the part [lo, hi) of row `row` of w to the record's reads. */
static void push_src(resolver *r, const trace_write *w, size_t row, uintptr_t lo, uintptr_t hi)
{
    krn_trace *t = r->t;
    if (r->dry)
        return;
    if (!GROW(t, reads, reads_cap, t->nreads + 1))
        return trace_oom(t, "out of memory for the trace's reads");
    krn_trace_src s = {.kind = w->kind, .count = (hi - lo) / 4, .rows = 1, .input = r->input,
                       .dst = r->row_pos + (lo - r->row_lo) / 4};
    if (w->kind == KRN_TRACE_SITE)
        s.site = w->id;
    if (w->kind == KRN_TRACE_STATE || w->kind == KRN_TRACE_BATCH)
        s.region = w->id;
    if (w->kind != KRN_TRACE_ZERO)
        s.offset = (w->src_off + row * w->width + (lo - (w->lo + row * w->stride))) / 4;
    if (merge_src(t, &s))
        return;
    t->reads[t->nreads++] = s;
}

/* Names bytes [lo, hi) by the writes before index `before`, latest first,
 * parts in address order. */
static void resolve(resolver *r, uintptr_t lo, uintptr_t hi, size_t before)
{
    krn_trace *t = r->t;
    while (before > 0 && t->rc == 0) {
        const trace_write *w = &t->writes[--before];
        if (write_end(w) <= lo || hi <= w->lo)
            continue;
        uintptr_t at = lo; /* [lo, at) is named */
        bool hit = false;
        for (size_t row = lo > w->lo ? (lo - w->lo) / w->stride : 0; row < w->rows && t->rc == 0; row++) {
            uintptr_t rs = w->lo + row * w->stride, re = rs + w->width;
            if (rs >= hi)
                break;
            uintptr_t a = at > rs ? at : rs, b = hi < re ? hi : re;
            if (a >= b)
                continue;
            if (at < a)
                resolve(r, at, a, before);
            check_bytes(r, w, row, a, b);
            push_src(r, w, row, a, b);
            at = b;
            hit = true;
        }
        if (!hit)
            continue; /* the range lies between w's rows */
        if (at < hi)
            resolve(r, at, hi, before);
        return;
    }
    if (t->rc == 0)
        trace_fail(t, "step trace: site %u (%s) reads %zu bytes that no earlier site wrote and no "
                      "registered state, batch or zeroed range holds",
                   r->site, r->name, (size_t)(hi - lo));
}

void krn_trace_scatter(krn_ctx *ctx, const void *dst, const void *src, size_t width, size_t stride, size_t rows)
{
    krn_trace *t = ctx->trace;
    if (t == NULL || t->rc < 0 || t->outputs_only || rows == 0 || width == 0)
        return;
    uintptr_t lo = (uintptr_t)src, hi = lo + rows * width * 4;
    for (size_t i = t->nwrites; i > 0; i--) {
        const trace_write *w = &t->writes[i - 1];
        if (write_end(w) <= lo || hi <= w->lo)
            continue;
        if (w->rows != 1 || lo < w->lo || write_end(w) < hi || w->kind == KRN_TRACE_ZERO)
            return trace_fail(t, "step trace: a copy's source is not one site's output");
        return add_write_rows(t, (trace_write){.lo = (uintptr_t)dst, .rows = rows, .width = width * 4,
                                               .stride = stride * 4, .src_off = w->src_off + (lo - w->lo),
                                               .kind = w->kind, .id = w->id});
    }
    trace_fail(t, "step trace: a copy's source was never written");
}

/* ---- a site's record ---- */

typedef struct {
    const uint8_t *bytes;
    size_t len, leaves;
    ovt_hash *hashes;
} leaf_job;

static void hash_leaf(void *arg, size_t i)
{
    const leaf_job *j = arg;
    size_t off = i * (size_t)OVT_TREE_LEAF_BYTES;
    size_t len = j->len - off < OVT_TREE_LEAF_BYTES ? j->len - off : OVT_TREE_LEAF_BYTES;
    ovt_tree_leaf_le32(&j->hashes[i], j->bytes + off, len);
}

/* The tree root of the site's output, its leaves hashed on the ctx's threads. */
static int output_root(krn_ctx *ctx, ovt_hash *root, const float *out, size_t n)
{
    leaf_job j = {.bytes = (const uint8_t *)out, .len = n * 4, .leaves = ovt_tree_leaves(n * 4)};
    if ((j.hashes = malloc(j.leaves * sizeof *j.hashes)) == NULL)
        return OVT_ENOMEM;
    int rc = krn_ctx_parallel(ctx, j.leaves, hash_leaf, &j);
    if (rc == 0)
        ovt_tree_root_of_leaves(root, j.hashes, j.leaves);
    free(j.hashes);
    return rc;
}

/* Takes the reads declared for this site (k = 0) and moves the others one
 * site closer. */
static void take_reads(resolver *r)
{
    krn_trace *t = r->t;
    size_t keep = 0;
    for (size_t i = 0; i < t->npending; i++) {
        trace_pending p = t->pending[i];
        if (p.k == 0) {
            for (size_t row = 0; row < p.rows; row++) {
                r->row_lo = (uintptr_t)p.p + row * p.stride * 4;
                r->row_pos = row * p.width;
                resolve(r, r->row_lo, r->row_lo + p.width * 4, t->nwrites);
            }
            r->input++;
        } else if (r->dry) {
            continue;
        } else {
            p.k--;
            t->pending[keep++] = p;
        }
    }
    if (!r->dry)
        t->npending = keep;
}

void krn_trace_enter(krn_ctx *ctx, const char *name)
{
    krn_trace *t = ctx->trace;
    if (!t->check || t->rc < 0 || t->outputs_only)
        return;
    resolver r = {.t = t, .site = ctx->step.next_site, .name = name, .dry = true};
    take_reads(&r);
}

void krn_trace_site(krn_ctx *ctx, const site_job *job)
{
    krn_trace *t = ctx->trace;
    if (t->rc < 0)
        return;
    if (job->site != t->nrecords)
        return trace_fail(t, "step trace: site %u ran after %zu traced sites (a trace starts at site 0 "
                             "and numbers every site of one process)",
                          job->site, t->nrecords);
    if (!GROW(t, records, records_cap, t->nrecords + 1))
        return trace_oom(t, "out of memory for the trace's records");
    krn_trace_record *rec = &t->records[t->nrecords];
    memset(rec, 0, sizeof *rec);
    rec->site = job->site;
    snprintf(rec->op, sizeof rec->op, "%s", job->name);
    rec->n = job->n;
    rec->first_read = t->nreads;
    if (t->outputs_only) { /* proof of replay: the one site's output root, nothing else */
        if ((job->site == t->only_site || t->only_site == KRN_TRACE_ALL_SITES) &&
            output_root(ctx, &rec->root, job->out, job->n) < 0)
            return trace_oom(t, "out of memory for the tree of site %u", job->site);
        t->nrecords++;
        return;
    }
    resolver r = {.t = t, .site = job->site, .name = job->name, .out_lo = (uintptr_t)job->out,
                  .out_hi = (uintptr_t)job->out + job->n * 4};
    take_reads(&r);
    rec->nreads = t->nreads - rec->first_read;
    if (output_root(ctx, &rec->root, job->out, job->n) < 0)
        return trace_oom(t, "out of memory for the tree of site %u", job->site);
    if (t->rc < 0)
        return;
    t->nrecords++;
    size_t len = krn_trace_encode(t, t->nrecords - 1, NULL, 0);
    uint8_t *buf = malloc(len + 1);
    if (buf == NULL)
        return trace_oom(t, "out of memory for the record of site %u", job->site);
    buf[0] = 0x00; /* a leaf's prefix (common/tree.h) */
    krn_trace_encode(t, t->nrecords - 1, buf + 1, len);
    ovt_sha256(&rec->hash, buf, len + 1);
    free(buf);
    add_write(t, KRN_TRACE_SITE, job->site, job->out, job->n);
}

int krn_trace_finish(krn_trace *t, ovt_hash *root)
{
    memset(root, 0, sizeof *root);
    if (t->rc == 0 && t->npending > 0)
        trace_fail(t, "step trace: reads were declared for %u sites after the last one (%zu), which never ran",
                   t->pending[0].k + 1, t->nrecords);
    if (t->rc == 0 && t->nrecords == 0)
        trace_fail(t, "step trace: no site ran");
    if (t->rc < 0)
        return ovt_fail(t->rc, "%s", t->msg);
    if (t->outputs_only)
        return 0; /* no record hashes: no root */
    ovt_hash *h = malloc(t->nrecords * sizeof *h);
    if (h == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for the trace root");
    for (size_t i = 0; i < t->nrecords; i++)
        h[i] = t->records[i].hash;
    ovt_tree_root_of_leaves(root, h, t->nrecords);
    free(h);
    return 0;
}

const char *krn_trace_error(const krn_trace *t)
{
    return t->rc < 0 ? t->msg : "";
}

size_t krn_trace_count(const krn_trace *t)
{
    return t->nrecords;
}

const krn_trace_record *krn_trace_record_at(const krn_trace *t, size_t i)
{
    return &t->records[i];
}

const krn_trace_src *krn_trace_reads_of(const krn_trace *t, size_t i)
{
    return t->reads + t->records[i].first_read;
}

const float *krn_trace_written(const krn_trace *t, krn_trace_kind kind, uint32_t id, size_t *count)
{
    *count = 0;
    for (size_t i = 0; i < t->nwrites; i++) {
        const trace_write *w = &t->writes[i];
        if (w->kind == kind && w->id == id && w->rows == 1 && w->src_off == 0 && w->copy != NULL) {
            *count = w->width / 4;
            return (const float *)w->copy;
        }
    }
    return NULL;
}

const char *krn_trace_region_name(const krn_trace *t, uint32_t region)
{
    return region < t->nregions ? t->regions[region].name : "";
}

/* ---- the canonical encoding (docs/formats.md, "Step trace") ---- */

typedef struct {
    uint8_t *buf;
    size_t cap, len;
} enc;

static void put(enc *e, const void *p, size_t n)
{
    if (e->len + n <= e->cap)
        memcpy(e->buf + e->len, p, n);
    e->len += n;
}

static void put_u8(enc *e, uint8_t v)
{
    put(e, &v, 1);
}

static void put_le(enc *e, uint64_t v, size_t bytes)
{
    uint8_t b[8];
    for (size_t i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(e, b, bytes);
}

static void put_name(enc *e, const char *s)
{
    size_t n = strlen(s);
    put_u8(e, (uint8_t)n);
    put(e, s, n);
}

size_t krn_trace_encode(const krn_trace *t, size_t i, uint8_t *buf, size_t cap)
{
    enc e = {.buf = buf, .cap = buf ? cap : 0};
    const krn_trace_record *rec = &t->records[i];
    const krn_trace_src *rd = krn_trace_reads_of(t, i);
    put_le(&e, rec->site, 4);
    put_name(&e, rec->op);
    put_le(&e, rec->n, 8);
    put(&e, rec->root.b, 32);
    put_le(&e, rec->nreads, 4);
    for (size_t k = 0; k < rec->nreads; k++) {
        put_u8(&e, (uint8_t)rd[k].kind);
        if (rd[k].kind == KRN_TRACE_SITE)
            put_le(&e, rd[k].site, 4);
        else if (rd[k].kind != KRN_TRACE_ZERO)
            put_name(&e, krn_trace_region_name(t, rd[k].region));
        put_le(&e, rd[k].input, 4);
        put_le(&e, rd[k].dst, 8);
        put_le(&e, rd[k].offset, 8);
        put_le(&e, rd[k].count, 8);
        put_le(&e, rd[k].rows, 4);
        put_le(&e, rd[k].src_step, 8);
        put_le(&e, rd[k].dst_step, 8);
    }
    return e.len;
}

size_t krn_trace_bytes(const krn_trace *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->nrecords; i++)
        total += krn_trace_encode(t, i, NULL, 0);
    return total;
}

/* The trace file: "OVTTRACE", u32 version 1, u64 step, u32 record count,
 * the root, then each record's encoding after its u32 length. */
int krn_trace_file(const krn_trace *t, uint64_t step, const ovt_hash *root, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    enc e = {0};
    for (int pass = 0; pass < 2; pass++) {
        put(&e, "OVTTRACE", 8);
        put_le(&e, 1, 4);
        put_le(&e, step, 8);
        put_le(&e, t->nrecords, 4);
        put(&e, root->b, 32);
        for (size_t i = 0; i < t->nrecords; i++) {
            size_t n = krn_trace_encode(t, i, NULL, 0);
            put_le(&e, n, 4);
            if (e.buf != NULL)
                krn_trace_encode(t, i, e.buf + e.len, n);
            e.len += n;
        }
        if (pass == 0 && (e.buf = malloc(e.len)) == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for a trace file of %zu bytes", e.len);
        e.cap = e.len;
        if (pass == 0)
            e.len = 0;
    }
    *out = e.buf;
    *len = e.len;
    return 0;
}
