/* The block package (arbiter/block_file.h, docs/formats.md "Block
 * package"): little-endian throughout. */
#include "arbiter/block_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block_chunk.h"
#include "common/tree.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

/* ---- writing ---- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} wbuf;

static void put(wbuf *w, const void *d, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n > w->cap) {
        size_t c = w->cap ? w->cap : 4096;
        while (c < w->len + n)
            c *= 2;
        uint8_t *q = realloc(w->p, c);
        if (q == NULL) {
            w->oom = true;
            return;
        }
        w->p = q;
        w->cap = c;
    }
    memcpy(w->p + w->len, d, n);
    w->len += n;
}

static void put_u8(wbuf *w, uint8_t v)
{
    put(w, &v, 1);
}

static void put_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4];
    ovt_put_le32(b, v);
    put(w, b, 4);
}

static void put_u64(wbuf *w, uint64_t v)
{
    uint8_t b[8];
    ovt_put_le64(b, v);
    put(w, b, 8);
}

static void put_hashes(wbuf *w, const ovt_hash *h, size_t n)
{
    put_u32(w, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        put(w, h[i].b, 32);
}

static void put_words(wbuf *w, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_u32(w, u);
    }
}

/* Record i's encoding and its proof against the trace root. */
static int put_record(wbuf *w, const krn_trace *t, size_t i, const ovt_hash *all, size_t nrec)
{
    size_t len = krn_trace_encode(t, i, NULL, 0);
    uint8_t *enc = malloc(len);
    ovt_hash proof[OVT_TREE_MAX_PROOF];
    size_t plen;
    if (enc == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory for a record");
    krn_trace_encode(t, i, enc, len);
    put_u32(w, (uint32_t)len);
    put(w, enc, len);
    free(enc);
    int rc = ovt_tree_proof(proof, &plen, all, nrec, i, 1);
    if (rc == 0)
        put_hashes(w, proof, plen);
    return rc;
}

/* The claim: the leaf of record i's output and its proof. */
static int put_claim(wbuf *w, const krn_trace *t, size_t i, uint64_t leaf)
{
    size_t n;
    const float *out = krn_trace_written(t, KRN_TRACE_SITE, (uint32_t)i, &n);
    if (out == NULL)
        return ovt_fail(OVT_EINVAL, "block package: the trace keeps no copy of site %zu's output", i);
    size_t leaves = ovt_tree_leaves(n * 4);
    ovt_hash *h = malloc(leaves * sizeof *h), proof[OVT_TREE_MAX_PROOF];
    size_t plen;
    if (h == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory for a tree");
    for (size_t k = 0; k < leaves; k++) {
        size_t e0 = k * LEAF_ELEMS, len = n - e0 < LEAF_ELEMS ? n - e0 : LEAF_ELEMS;
        ovt_tree_leaf_le32(&h[k], out + e0, len * 4);
    }
    put(w, h[leaf].b, 32);
    int rc = ovt_tree_proof(proof, &plen, h, leaves, leaf, 1);
    free(h);
    if (rc == 0)
        put_hashes(w, proof, plen);
    return rc;
}

/* No element: the whole leaf's package (version 1). */
#define NO_ELEMENT UINT64_MAX

/* Version 2's part: the packing party's chain and the state before the
 * chunk, each with its path. */
static void put_chunk(wbuf *w, const arb_chunk_part *ck)
{
    put_u64(w, ck->chunk);
    put_u64(w, ck->leaves);
    put(w, ck->root.b, 32);
    put(w, ck->node.b, 32);
    put_hashes(w, ck->node_proof, ck->node_proof_len);
    put_u32(w, (uint32_t)ck->prev_len);
    put(w, ck->prev, ck->prev_len);
    put_hashes(w, ck->prev_proof, ck->prev_proof_len);
}

/* The package of task (record i of t, leaf `leaf`): version 1, 2 with
 * the chunk's part ck, or 3 with the element (NO_ELEMENT: none). */
static int package_write(wbuf *w, const trn_run_config *rc, const krn_trace *t, const ovt_hash *root, uint64_t step,
                         size_t i, uint64_t leaf, const arb_block_task *task, const arb_chunk_part *ck,
                         uint64_t element)
{
    size_t nrec = krn_trace_count(t);
    ovt_hash *all = malloc(nrec * sizeof *all);
    uint8_t cfg[TRN_CONFIG_ENC_MAX];
    size_t cfg_len = trn_config_encode(cfg, rc);
    if (all == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory");
    for (size_t k = 0; k < nrec; k++)
        all[k] = krn_trace_record_at(t, k)->hash;
    put(w, ARB_BLOCK_MAGIC, 8);
    put_u32(w, ck ? ARB_BLOCK_VERSION_CHUNK : element != NO_ELEMENT ? ARB_BLOCK_VERSION_ELEMENT : ARB_BLOCK_VERSION);
    put_u32(w, (uint32_t)cfg_len);
    put(w, cfg, cfg_len);
    put(w, root->b, 32);
    put_u32(w, (uint32_t)nrec);
    put_u64(w, step);
    put_u32(w, (uint32_t)i);
    put_u64(w, leaf);
    int r = put_claim(w, t, i, leaf);
    if (r == 0)
        r = put_record(w, t, i, all, nrec);
    if (r == 0 && ck)
        put_chunk(w, ck);
    if (r == 0 && element != NO_ELEMENT)
        put_u64(w, element);
    put_u32(w, (uint32_t)task->nentries);
    for (size_t k = 0; k < task->nentries && r == 0; k++) {
        put_u64(w, task->entries[k].index);
        put_u8(w, (uint8_t)task->entries[k].dir);
        put_words(w, &task->entries[k].value, 1);
    }
    put_u32(w, (uint32_t)task->nslices);
    for (size_t k = 0; k < task->nslices && r == 0; k++) {
        const arb_block_slice *s = &task->slices[k];
        put_u8(w, (uint8_t)s->kind);
        if (s->kind == KRN_TRACE_SITE) {
            r = put_record(w, t, s->site, all, nrec);
        } else {
            size_t nl = strlen(s->name);
            put_u8(w, (uint8_t)nl);
            put(w, s->name, nl);
            put_u64(w, s->n);
            put(w, s->root.b, 32);
        }
        put_u64(w, s->first_leaf);
        put_u64(w, s->nleaves);
        put_hashes(w, s->proof, s->proof_len);
        uint64_t e0 = s->first_leaf * LEAF_ELEMS, e1 = (s->first_leaf + s->nleaves) * LEAF_ELEMS;
        put_words(w, s->data, (e1 < s->n ? e1 : s->n) - e0);
    }
    if (r == 0 && w->oom)
        r = ovt_fail(OVT_ENOMEM, "block package: out of memory");
    free(all);
    return r;
}

static int package_done(wbuf *w, int r, uint8_t **buf, size_t *len)
{
    if (r < 0) {
        free(w->p);
        return r;
    }
    *buf = w->p;
    *len = w->len;
    return 0;
}

/* The package of leaf `leaf`, or of element `element` within it (version
 * ARB_BLOCK_VERSION_ELEMENT: the slices and entries of that element's rows
 * only). */
static int package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                        const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf, const krn_rlog *log,
                        uint64_t element)
{
    *buf = NULL;
    *len = 0;
    arb_block_task task = {.config = rc, .step = step};
    if (element != NO_ELEMENT) {
        task.span_first = leaf * LEAF_ELEMS + element;
        task.span_count = 1;
    }
    arb_block_owned own;
    int r = arb_block_from_trace(&task, &own, t, i, log, leaf);
    if (r < 0)
        return r;
    wbuf w = {0};
    r = package_write(&w, rc, t, root, step, i, leaf, &task, NULL, element);
    arb_block_owned_free(&own);
    return package_done(&w, r, buf, len);
}

/* The packing party's chain: its root, node at ck->chunk with its path,
 * and P_{chunk-1} with its path. */
static int chunk_part_of(arb_chunk_part *ck, const arb_block_task *whole, const krn_trace *t, size_t i,
                         const krn_rlog *log, uint64_t chunk)
{
    arb_chunk_chain ch;
    arb_block_task task = {.config = whole->config, .step = whole->step, .threads = whole->threads};
    bool differs;
    int r = arb_chunk_chain_from_trace(&ch, &task, t, i, log, whole->leaf, &differs);
    if (r < 0)
        return r;
    size_t n = ch.info.chunks + 1;
    if (chunk >= n) {
        r = ovt_fail(OVT_EINVAL, "chunk package: the chain of site %u leaf %llu has leaves 0..%zu; %llu is none",
                     whole->site, (unsigned long long)whole->leaf, n - 1, (unsigned long long)chunk);
        goto done;
    }
    ck->chunk = chunk;
    ck->leaves = n;
    ck->root = ch.root;
    ck->node = ch.leaves[chunk];
    if ((r = ovt_tree_proof(ck->node_proof, &ck->node_proof_len, ch.leaves, n, chunk, 1)) < 0)
        goto done;
    if (chunk > 0 && (r = arb_chunk_partial(whole, chunk - 1, &ck->prev, &ck->prev_len)) == 0)
        r = ovt_tree_proof(ck->prev_proof, &ck->prev_proof_len, ch.leaves, n, chunk - 1, 1);
done:
    arb_chunk_chain_free(&ch);
    return r;
}

int arb_chunk_package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                           const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf, const krn_rlog *log,
                           uint64_t chunk)
{
    *buf = NULL;
    *len = 0;
    arb_block_task whole = {.config = rc, .step = step}, task = whole;
    arb_block_owned all, own;
    arb_chunk_part ck;
    memset(&ck, 0, sizeof ck);
    memset(&own, 0, sizeof own);
    wbuf w = {0};
    int r = arb_block_from_trace(&whole, &all, t, i, log, leaf);
    if (r < 0)
        return r;
    if ((r = chunk_part_of(&ck, &whole, t, i, log, chunk)) == 0 &&
        (r = arb_chunk_from_trace(&task, &own, t, i, log, leaf, chunk)) == 0)
        r = package_write(&w, rc, t, root, step, i, leaf, &task, &ck, NO_ELEMENT);
    free(ck.prev);
    arb_block_owned_free(&own);
    arb_block_owned_free(&all);
    return package_done(&w, r, buf, len);
}

int arb_block_package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                           const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf, const krn_rlog *log)
{
    return package_make(buf, len, rc, t, root, step, i, leaf, log, NO_ELEMENT);
}

int arb_block_element_package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                                   const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf, const krn_rlog *log,
                                   uint64_t element)
{
    if (element >= LEAF_ELEMS)
        return ovt_fail(OVT_EINVAL, "block package: element %llu is not within a leaf of %u elements",
                        (unsigned long long)element, (unsigned)LEAF_ELEMS);
    return package_make(buf, len, rc, t, root, step, i, leaf, log, element);
}

/* ---- reading ---- */

typedef struct {
    const uint8_t *p;
    size_t len, at;
    bool bad;
    const char *what; /* the first field that did not fit */
} rbuf;

static const uint8_t *take(rbuf *r, size_t n, const char *what)
{
    if (r->bad || n > r->len - r->at) {
        if (!r->bad)
            r->what = what;
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->at;
    r->at += n;
    return q;
}

static uint8_t get_u8(rbuf *r, const char *what)
{
    const uint8_t *q = take(r, 1, what);
    return q ? q[0] : 0;
}

static uint32_t get_u32(rbuf *r, const char *what)
{
    const uint8_t *q = take(r, 4, what);
    return q ? ovt_get_le32(q) : 0;
}

static uint64_t get_u64(rbuf *r, const char *what)
{
    const uint8_t *q = take(r, 8, what);
    return q ? ovt_get_le64(q) : 0;
}

static void get_hash(rbuf *r, ovt_hash *h, const char *what)
{
    const uint8_t *q = take(r, 32, what);
    if (q)
        memcpy(h->b, q, 32);
}

static void get_name(rbuf *r, char *out, size_t cap, const char *what)
{
    size_t n = get_u8(r, what);
    const uint8_t *q = take(r, n, what);
    if (q == NULL || n >= cap) {
        r->bad = true;
        r->what = r->what ? r->what : what;
        out[0] = 0;
        return;
    }
    memcpy(out, q, n);
    out[n] = 0;
}

/* A proof (count, then hashes) into proof (OVT_TREE_MAX_PROOF). */
static size_t get_proof(rbuf *r, ovt_hash *proof, const char *what)
{
    uint32_t n = get_u32(r, what);
    if (n > OVT_TREE_MAX_PROOF) {
        r->bad = true;
        r->what = what;
        return 0;
    }
    for (uint32_t i = 0; i < n; i++)
        get_hash(r, &proof[i], what);
    return n;
}

/* A decoded record: its site, op, n, output root and reads. */
typedef struct {
    uint32_t site;
    char op[48];
    uint64_t n;
    ovt_hash root;
    arb_block_read *reads;
    size_t nreads;
} rec_view;

static int decode_record(rec_view *v, const uint8_t *enc, size_t len, bool with_reads)
{
    memset(v, 0, sizeof *v);
    rbuf r = {.p = enc, .len = len};
    v->site = get_u32(&r, "record site");
    get_name(&r, v->op, sizeof v->op, "record op");
    v->n = get_u64(&r, "record n");
    get_hash(&r, &v->root, "record root");
    uint32_t nreads = get_u32(&r, "record reads");
    if (!r.bad && nreads > len / 40 + 1)
        return ovt_fail(OVT_EFORMAT, "block package: a record claims %u reads in %zu bytes", nreads, len);
    if (with_reads && !r.bad && (v->reads = calloc(nreads ? nreads : 1, sizeof *v->reads)) == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory for reads");
    for (uint32_t k = 0; k < nreads && !r.bad; k++) {
        arb_block_read rd = {0};
        rd.src.kind = (krn_trace_kind)get_u8(&r, "read kind");
        if (rd.src.kind == KRN_TRACE_SITE)
            rd.src.site = get_u32(&r, "read site");
        else if (rd.src.kind == KRN_TRACE_STATE || rd.src.kind == KRN_TRACE_BATCH)
            get_name(&r, rd.name, sizeof rd.name, "read region");
        else if (rd.src.kind != KRN_TRACE_ZERO)
            r.bad = true, r.what = "read kind";
        rd.src.input = get_u32(&r, "read input");
        rd.src.dst = get_u64(&r, "read dst");
        rd.src.offset = get_u64(&r, "read offset");
        rd.src.count = get_u64(&r, "read count");
        rd.src.rows = get_u32(&r, "read rows");
        rd.src.src_step = get_u64(&r, "read src_step");
        rd.src.dst_step = get_u64(&r, "read dst_step");
        if (with_reads)
            v->reads[v->nreads++] = rd;
    }
    if (r.bad || r.at != len) {
        free(v->reads);
        v->reads = NULL;
        return ovt_fail(OVT_EFORMAT, "block package: a trace record is malformed (%s)",
                        r.bad ? r.what : "trailing bytes");
    }
    return 0;
}

/* A record with its proof, checked against the trace root: index must be
 * its site. */
static int get_record(rbuf *r, const arb_block_package *p, uint32_t index, rec_view *v, bool with_reads)
{
    uint32_t len = get_u32(r, "record length");
    const uint8_t *enc = take(r, len, "record");
    ovt_hash proof[OVT_TREE_MAX_PROOF];
    size_t plen = get_proof(r, proof, "record proof");
    if (r->bad)
        return ovt_fail(OVT_EFORMAT, "block package: truncated at the %s", r->what);
    uint8_t *pre = malloc((size_t)len + 1);
    if (pre == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory");
    pre[0] = 0x00;
    memcpy(pre + 1, enc, len);
    ovt_hash leaf;
    ovt_sha256(&leaf, pre, (size_t)len + 1);
    free(pre);
    if (!ovt_tree_verify(&p->trace_root, p->nrecords, index, 1, &leaf, proof, plen))
        return ovt_fail(OVT_EFRAUD, "block package: the record of site %u does not prove against the trace root "
                                    "(a changed record or proof)",
                        index);
    int rc = decode_record(v, enc, len, with_reads);
    if (rc == 0 && v->site != index) {
        free(v->reads);
        return ovt_fail(OVT_EFRAUD, "block package: the record at index %u says site %u", index, v->site);
    }
    return rc;
}

void arb_block_package_free(arb_block_package *p)
{
    arb_block_owned_free(&p->own);
    free(p->chunk.prev);
    memset(p, 0, sizeof *p);
}

static int read_slices(rbuf *r, arb_block_package *p)
{
    uint32_t ns = get_u32(r, "slice count");
    if (r->bad || ns > r->len / 64 + 1)
        return ovt_fail(OVT_EFORMAT, "block package: truncated or impossible slice count");
    if ((p->own.slices = calloc(ns ? ns : 1, sizeof *p->own.slices)) == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory for slices");
    for (uint32_t k = 0; k < ns; k++) {
        arb_block_slice *s = &p->own.slices[p->own.nslices++];
        s->kind = (krn_trace_kind)get_u8(r, "slice kind");
        if (s->kind == KRN_TRACE_SITE) {
            uint32_t len = r->bad || r->len - r->at < 8 ? 0 : ovt_get_le32(r->p + r->at + 4);
            rec_view v;
            int rc = get_record(r, p, len, &v, false);
            if (rc < 0)
                return rc;
            s->site = v.site;
            s->n = v.n;
            s->root = v.root;
        } else if (s->kind == KRN_TRACE_STATE || s->kind == KRN_TRACE_BATCH) {
            get_name(r, s->name, sizeof s->name, "slice region");
            s->n = get_u64(r, "slice n");
            get_hash(r, &s->root, "slice root");
        } else {
            return ovt_fail(OVT_EFORMAT, "block package: slice %u has kind %d", k, (int)s->kind);
        }
        s->first_leaf = get_u64(r, "slice first leaf");
        s->nleaves = get_u64(r, "slice leaves");
        ovt_hash proof[OVT_TREE_MAX_PROOF];
        s->proof_len = get_proof(r, proof, "slice proof");
        uint64_t e0 = s->first_leaf * LEAF_ELEMS, e1 = (s->first_leaf + s->nleaves) * LEAF_ELEMS;
        e1 = e1 < s->n ? e1 : s->n;
        if (r->bad || s->nleaves == 0 || e0 >= e1 || (e1 - e0) * 4 > r->len - r->at)
            return ovt_fail(OVT_EFORMAT, "block package: slice %u is truncated or names no elements", k);
        if ((s->proof = malloc((s->proof_len ? s->proof_len : 1) * sizeof *s->proof)) == NULL ||
            (s->data = malloc((e1 - e0) * 4)) == NULL)
            return ovt_fail(OVT_ENOMEM, "block package: out of memory for a slice");
        memcpy(s->proof, proof, s->proof_len * sizeof *proof);
        for (uint64_t e = 0; e < e1 - e0; e++) {
            uint32_t u = get_u32(r, "slice data");
            memcpy(&s->data[e], &u, 4);
        }
    }
    return 0;
}

/* An element package's element (within the leaf): the task's span, one
 * element of the leaf. */
static int read_element(rbuf *r, arb_block_task *t)
{
    uint64_t e = get_u64(r, "element");
    if (r->bad)
        return ovt_fail(OVT_EFORMAT, "block package: truncated at the %s", r->what);
    uint64_t first = t->leaf * LEAF_ELEMS;
    if (first >= t->n || e >= LEAF_ELEMS || e >= t->n - first)
        return ovt_fail(OVT_EFORMAT, "block package: element %llu is not within leaf %llu of site %u's %llu elements",
                        (unsigned long long)e, (unsigned long long)t->leaf, t->site, (unsigned long long)t->n);
    t->span_first = first + e;
    t->span_count = 1;
    return 0;
}

/* Version 2's part. */
static int read_chunk(rbuf *r, arb_chunk_part *ck)
{
    ck->chunk = get_u64(r, "chunk");
    ck->leaves = get_u64(r, "chain leaf count");
    get_hash(r, &ck->root, "chain root");
    get_hash(r, &ck->node, "chain node");
    ck->node_proof_len = get_proof(r, ck->node_proof, "chain node proof");
    ck->prev_len = get_u32(r, "state length");
    if (r->bad || ck->prev_len > r->len - r->at)
        return ovt_fail(OVT_EFORMAT, "block package: truncated at the %s", r->bad ? r->what : "chain state");
    if (ck->prev_len && (ck->prev = malloc(ck->prev_len)) == NULL)
        return ovt_fail(OVT_ENOMEM, "block package: out of memory for the chain state");
    if (ck->prev_len)
        memcpy(ck->prev, take(r, ck->prev_len, "chain state"), ck->prev_len);
    ck->prev_proof_len = get_proof(r, ck->prev_proof, "chain state proof");
    if (r->bad)
        return ovt_fail(OVT_EFORMAT, "block package: truncated at the %s", r->what);
    return 0;
}

int arb_block_package_read(arb_block_package *p, const uint8_t *buf, size_t len)
{
    memset(p, 0, sizeof *p);
    rbuf r = {.p = buf, .len = len};
    const uint8_t *magic = take(&r, 8, "magic");
    if (magic == NULL || memcmp(magic, ARB_BLOCK_MAGIC, 8) != 0)
        return ovt_fail(OVT_EFORMAT, "block package: not a block package (no %s magic)", ARB_BLOCK_MAGIC);
    uint32_t version = get_u32(&r, "version");
    if (version != ARB_BLOCK_VERSION && version != ARB_BLOCK_VERSION_CHUNK && version != ARB_BLOCK_VERSION_ELEMENT)
        return ovt_fail(OVT_EFORMAT, "block package: version %u; this ovt reads versions %u, %u and %u", version,
                        ARB_BLOCK_VERSION, ARB_BLOCK_VERSION_CHUNK, ARB_BLOCK_VERSION_ELEMENT);
    p->version = version;
    uint32_t cfg_len = get_u32(&r, "config length");
    const uint8_t *cfg = take(&r, cfg_len, "config");
    int rc;
    if (cfg == NULL)
        return ovt_fail(OVT_EFORMAT, "block package: truncated at the %s", r.what);
    if ((rc = trn_config_decode(&p->config, cfg, cfg_len)) < 0)
        return ovt_fail_wrap(rc, "block package: its run config");
    get_hash(&r, &p->trace_root, "trace root");
    p->nrecords = get_u32(&r, "record count");
    arb_block_task *t = &p->task;
    t->config = &p->config;
    t->step = get_u64(&r, "step");
    uint32_t site = get_u32(&r, "site");
    t->leaf = get_u64(&r, "leaf");
    get_hash(&r, &p->claim, "claim");
    ovt_hash cproof[OVT_TREE_MAX_PROOF];
    size_t cplen = get_proof(&r, cproof, "claim proof");
    if (r.bad)
        return ovt_fail(OVT_EFORMAT, "block package: truncated at the %s", r.what);
    if (site >= p->nrecords)
        return ovt_fail(OVT_EFORMAT, "block package: site %u of a trace of %u records", site, p->nrecords);
    rec_view v;
    if ((rc = get_record(&r, p, site, &v, true)) < 0)
        return rc;
    t->site = v.site;
    snprintf(t->op, sizeof t->op, "%s", v.op);
    t->n = v.n;
    t->root = v.root;
    p->own.reads = v.reads;
    p->own.nreads = v.nreads;
    t->reads = v.reads;
    t->nreads = v.nreads;
    if (version == ARB_BLOCK_VERSION_ELEMENT && (rc = read_element(&r, t)) < 0) {
        arb_block_package_free(p);
        return rc;
    }
    if (!ovt_tree_verify(&v.root, ovt_tree_leaves(v.n * 4), t->leaf, 1, &p->claim, cproof, cplen)) {
        arb_block_package_free(p);
        return ovt_fail(OVT_EFRAUD, "block package: its claimed leaf %llu does not prove against site %u's output "
                                    "root",
                        (unsigned long long)t->leaf, site);
    }
    if (version == ARB_BLOCK_VERSION_CHUNK && (rc = read_chunk(&r, &p->chunk)) < 0) {
        arb_block_package_free(p);
        return rc;
    }
    uint32_t ne = get_u32(&r, "entry count");
    if (r.bad || ne > (r.len - r.at) / 13) {
        arb_block_package_free(p);
        return ovt_fail(OVT_EFORMAT, "block package: truncated or impossible entry count");
    }
    if ((p->own.entries = calloc(ne ? ne : 1, sizeof *p->own.entries)) == NULL) {
        arb_block_package_free(p);
        return ovt_fail(OVT_ENOMEM, "block package: out of memory for entries");
    }
    for (uint32_t k = 0; k < ne; k++) {
        krn_rlog_entry *e = &p->own.entries[p->own.nentries++];
        e->index = get_u64(&r, "entry index");
        e->dir = (krn_dir)get_u8(&r, "entry dir");
        uint32_t u = get_u32(&r, "entry value");
        memcpy(&e->value, &u, 4);
        if (e->dir > KRN_DIR_VALUE || (k > 0 && e->index <= p->own.entries[k - 1].index) || e->index >= v.n) {
            arb_block_package_free(p);
            return ovt_fail(OVT_EFORMAT, "block package: log entry %u is out of order, out of range or of no kind", k);
        }
    }
    if ((rc = read_slices(&r, p)) < 0 || (r.at != r.len && (rc = ovt_fail(OVT_EFORMAT, "block package: %zu "
                                                                                        "trailing bytes",
                                                                           r.len - r.at)) < 0)) {
        arb_block_package_free(p);
        return rc;
    }
    t->entries = p->own.entries;
    t->nentries = p->own.nentries;
    t->slices = p->own.slices;
    t->nslices = p->own.nslices;
    return 0;
}

/* ---- a chunk package's check ---- */

/* Whether chain leaf `at` (hash leaf) climbs with proof to ck's root. */
static bool chain_has(const arb_chunk_part *ck, uint64_t at, const ovt_hash *leaf, const ovt_hash *proof,
                      size_t plen)
{
    return ovt_tree_verify(&ck->root, ck->leaves, at, 1, leaf, proof, plen);
}

int arb_chunk_package_run(const arb_block_package *p, ovt_hash *leaf, float *values)
{
    memset(leaf, 0, sizeof *leaf);
    const arb_chunk_part *ck = &p->chunk;
    const arb_block_task *t = &p->task;
    if (p->version != ARB_BLOCK_VERSION_CHUNK)
        return ovt_fail(OVT_EINVAL, "block package: version %u is not a chunk package", p->version);
    arb_chunk_info info;
    int rc = arb_chunk_info_of(t, &info);
    if (rc < 0)
        return rc;
    if (ck->leaves != info.chunks + 1)
        return ovt_fail(OVT_EFRAUD, "chunk package: its chain has %llu leaves; site %u's %llu rows make %llu "
                                    "chunks, so %llu (the packing party's count is wrong)",
                        (unsigned long long)ck->leaves, t->site, (unsigned long long)info.rows,
                        (unsigned long long)info.chunks, (unsigned long long)(info.chunks + 1));
    if (ck->chunk > info.chunks)
        return ovt_fail(OVT_EFORMAT, "chunk package: chunk %llu of a chain of %llu leaves",
                        (unsigned long long)ck->chunk, (unsigned long long)ck->leaves);
    if (!chain_has(ck, ck->chunk, &ck->node, ck->node_proof, ck->node_proof_len))
        return ovt_fail(OVT_EFRAUD, "chunk package: its node at chunk %llu does not climb to its chain root",
                        (unsigned long long)ck->chunk);
    if (ck->chunk > 0) {
        ovt_hash prev;
        if ((rc = arb_chunk_state_leaf(&prev, ck->prev, ck->prev_len)) < 0)
            return rc;
        if (!chain_has(ck, ck->chunk - 1, &prev, ck->prev_proof, ck->prev_proof_len))
            return ovt_fail(OVT_EFRAUD, "chunk package: its state P_%llu does not climb to its chain root (a "
                                        "changed state or path)",
                            (unsigned long long)(ck->chunk - 1));
    }
    return arb_chunk_step(t, ck->chunk, ck->prev, ck->prev_len, leaf, values);
}

/* ---- a record alone (the watcher's, for a chain count) ---- */

int arb_block_record_task(arb_block_task *task, arb_block_read **reads, const uint8_t *enc, size_t len)
{
    *reads = NULL;
    rec_view v;
    int rc = decode_record(&v, enc, len, true);
    if (rc < 0)
        return rc;
    task->site = v.site;
    memcpy(task->op, v.op, sizeof task->op);
    task->n = v.n;
    task->root = v.root;
    task->reads = v.reads;
    task->nreads = v.nreads;
    *reads = v.reads;
    return 0;
}
