#ifndef OVT_KERNELS_TRACE_H
#define OVT_KERNELS_TRACE_H

/* The step's trace (docs/formats.md, "Step trace"): for every rounding site
 * of a step, in site order, one record of what it wrote and what it read:
 *   the site's number and op name, its output's element count, the tensor
 *   tree root (common/tree.h) of its output as the step then uses it (the
 *   grid values after rounding, the log and any testing fault applied), and
 *   its reads: each a range of elements of an earlier site's output, of a
 *   state tensor or batch array the caller registered, or of memory the
 *   caller zeroed in this step.
 * The trace root is the tree root over the records' hashes, one leaf per
 * site, so one record can be proved against it (ovt_tree_proof).
 *
 * A recorder is attached to a ctx (krn_ctx_set_trace); with none attached
 * (the default) every hook is one branch. Tracing never changes a bit of
 * the step, nor whether it succeeds: a trace that cannot be made (a read no
 * registered memory or earlier output covers, reads declared for sites
 * that never ran, out of memory) fails the trace, reported by
 * krn_trace_finish, and the step goes on.
 *
 * Reads are declared by the ops (kernels/ops_*.c) and by callers that run
 * sites of their own, before the site: krn_trace_reads(ctx, k, ...) names
 * what the k-th site from now (0: the next one) reads, so an op declares
 * the reads of all its sites on entry, where every backend passes. A read
 * is resolved when its site has run, against the step's writes in order:
 * the latest write covering each part of the range (a site's output, a
 * zeroed range) wins, then the registered regions; so buffers reused
 * within a step are named by what last wrote them, and a site that reads
 * an earlier site of its own group (krn_site_exact_fills) sees that site.
 * A read must be declared before the op reads that memory: block mode
 * (below) writes the values there at the declaration.
 * The cuda backend cannot be traced yet (its outputs stay on the device). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/site.h"

typedef struct krn_trace krn_trace;

/* Where a read's elements come from (the record's source kind byte). */
typedef enum {
    KRN_TRACE_SITE = 0,  /* an earlier site's output: site, offset into it */
    KRN_TRACE_STATE = 1, /* a state tensor the caller registered: name, offset into it */
    KRN_TRACE_BATCH = 2, /* a batch array the caller registered: name, offset into it */
    KRN_TRACE_ZERO = 3   /* memory the caller zeroed in this step (offset 0) */
} krn_trace_kind;

/* One resolved part of a site's input `input` (its inputs numbered in the
 * order declared): `rows` runs of count elements (32-bit words), run r
 * holding the input's elements from dst + r*dst_step on, read from the
 * source's elements from offset + r*src_step on (rows 1, steps 0: one
 * plain range; more: the same third of every row of a fused tensor). The
 * parts of an input cover it exactly once. */
typedef struct {
    krn_trace_kind kind;
    uint32_t site;   /* KRN_TRACE_SITE */
    uint32_t region; /* KRN_TRACE_STATE, KRN_TRACE_BATCH: krn_trace_region_name's index */
    uint32_t input;
    uint64_t dst;
    uint64_t offset; /* 0 for KRN_TRACE_ZERO */
    uint64_t count;
    uint32_t rows;
    uint64_t src_step, dst_step;
} krn_trace_src;

/* One site's record; its reads are krn_trace_reads_of(t, i). */
typedef struct {
    uint32_t site;
    char op[48];
    uint64_t n;       /* output elements */
    ovt_hash root;    /* ovt_tree_root_le32 of the output */
    ovt_hash hash;    /* SHA-256(0x00 || the record's encoding): its leaf */
    size_t first_read, nreads;
} krn_trace_record;

/* A recorder for one step. check (testing): every write's bytes are kept
 * and every read's bytes compared with what its source wrote, so a read
 * named after the wrong source fails the trace. */
int krn_trace_new(krn_trace **out, bool check) OVT_MUST_USE;
void krn_trace_free(krn_trace *t);

/* Attaches t (NULL: detaches) to ctx from the next site on; ctx does not
 * own it. OVT_EINVAL on the cuda backend. */
int krn_ctx_set_trace(krn_ctx *ctx, krn_trace *t) OVT_MUST_USE;
krn_trace *krn_ctx_trace(const krn_ctx *ctx);

/* Proof of replay's cheap mode (docs/contract.md, "Proof of replay"), set
 * on a fresh recorder: from now on it records every site (number, op,
 * size) but resolves no reads and hashes no record, and hashes the output
 * of site `site` only (KRN_TRACE_ALL_SITES: of every site); the other
 * records' roots are zero, and krn_trace_finish gives a zero trace root.
 * The output roots it computes are the full trace's. */
#define KRN_TRACE_ALL_SITES UINT32_MAX
void krn_trace_outputs_only(krn_trace *t, uint32_t site);

/* Registers count 32-bit elements at p as the state tensor or batch array
 * `name` (kind KRN_TRACE_STATE or KRN_TRACE_BATCH), before the step. */
int krn_trace_region(krn_trace *t, krn_trace_kind kind, const char *name, const void *p,
                     size_t count) OVT_MUST_USE;

/* Declares that the k-th site from now (0: the next) reads count 32-bit
 * elements at p; p NULL or count 0 declares nothing. No-op without a trace. */
typedef struct {
    const void *p;
    size_t count;
} krn_span;
void krn_trace_reads(krn_ctx *ctx, unsigned k, const krn_span *reads, size_t nreads);
#define KRN_TRACE_READS(ctx, k, ...)                                                                \
    krn_trace_reads((ctx), (k), (const krn_span[]){__VA_ARGS__},                                    \
                    sizeof((const krn_span[]){__VA_ARGS__}) / sizeof(krn_span))

/* Declares that the k-th site from now reads `rows` rows of `width`
 * elements, row i at p + i*stride (a third of a fused tensor). */
void krn_trace_read_rows(krn_ctx *ctx, unsigned k, const void *p, size_t width, size_t stride, size_t rows);

/* The caller copied the rows*width elements at src, all of them the output
 * of one earlier site, into `rows` rows of `width` elements at dst, row i at
 * dst + i*stride: a read there names that site. No-op without a trace. */
void krn_trace_scatter(krn_ctx *ctx, const void *dst, const void *src, size_t width, size_t stride, size_t rows);

/* The caller zeroed count elements at p (a gradient the backward ops then
 * accumulate into). No-op without a trace. */
void krn_trace_zero(krn_ctx *ctx, const void *p, size_t count);

/* Ends the trace: its root over the records. Fails with the trace's first
 * failure, or OVT_EINVAL when reads were declared for sites that never ran
 * or no site ran. */
int krn_trace_finish(krn_trace *t, ovt_hash *root) OVT_MUST_USE;

/* The trace's failure as a message ("" while it has none). */
const char *krn_trace_error(const krn_trace *t);

/* The records (site order) and a record's reads; the region names. */
size_t krn_trace_count(const krn_trace *t);
const krn_trace_record *krn_trace_record_at(const krn_trace *t, size_t i);
const krn_trace_src *krn_trace_reads_of(const krn_trace *t, size_t i);
const char *krn_trace_region_name(const krn_trace *t, uint32_t region);

/* The canonical encoding of record i (docs/formats.md, "Step trace") into
 * buf (cap bytes); returns its length, or the length needed when cap is
 * too small. */
size_t krn_trace_encode(const krn_trace *t, size_t i, uint8_t *buf, size_t cap);

/* The trace file of step `step` (docs/formats.md, "Step trace"): *out
 * (malloc'd, the caller frees it) and *len. OVT_ENOMEM. */
int krn_trace_file(const krn_trace *t, uint64_t step, const ovt_hash *root, uint8_t **out, size_t *len) OVT_MUST_USE;

/* Bytes of all records' encodings (a figure of the trace's size). */
size_t krn_trace_bytes(const krn_trace *t);

/* Outside check mode, keeps a copy of what source (kind, id) writes in the
 * step (an earlier site's output, a registered region), as check mode
 * keeps every write, so krn_trace_written can hand it out: the sources one
 * block reads, without the whole step's outputs. Before the step. */
int krn_trace_keep(krn_trace *t, krn_trace_kind kind, uint32_t id) OVT_MUST_USE;

/* The whole output of site `id` (kind KRN_TRACE_SITE) or the registered
 * region `id` (KRN_TRACE_STATE, KRN_TRACE_BATCH) as written in the step,
 * *count elements; NULL when the trace keeps no such copy (neither check
 * mode nor krn_trace_keep). Points into t. For whoever must hand out
 * slices of them with proofs (arbiter/block.h: the party's block package,
 * its tests). */
const float *krn_trace_written(const krn_trace *t, krn_trace_kind kind, uint32_t id, size_t *count);

/* Block mode (the arbiter's re-execution of one block of one site,
 * arbiter/block.h): in the ctx's next step, every site numbered before
 * `target` is skipped (numbered; nothing rounded, logged or written),
 * the target runs as usual (REPLAY: with the log's entries for it), and
 * every site after it fails at once with OVT_EINVAL, which ends the op
 * that runs them. Each read the ops declare for the target (input by input,
 * in the order take_reads numbers a record's inputs) is first handed to
 * fill(arg, input, p, width, stride, rows), which writes the values the
 * target must read there (rows of width elements, row i at p + i*stride):
 * the block's caller owns every buffer the op reads. Once the target has
 * run its output (final: rounded, log applied) is copied to result (up to
 * cap elements). fill NULL turns block mode off. krn_ctx_block_reached:
 * the target's output size once it has run, 0 before. */
typedef void (*krn_block_fill)(void *arg, unsigned input, float *p, size_t width, size_t stride, size_t rows);
void krn_ctx_block(krn_ctx *ctx, uint32_t target, krn_block_fill fill, void *arg, float *result, size_t cap);
size_t krn_ctx_block_reached(const krn_ctx *ctx);

/* Testing only (the trace tests): in the current or
 * next step, after site `site` has rounded (and, REPLAY, applied its log),
 * bit `bit` (0..31) of element `element` (modulo the site's size) of its
 * output is flipped, so every later site computes from the flipped value.
 * krn_step_end disarms it; krn_ctx_output_flipped says whether it was made. */
void krn_ctx_flip_output_bit(krn_ctx *ctx, uint32_t site, uint64_t element, unsigned bit);
bool krn_ctx_output_flipped(const krn_ctx *ctx);

#endif
