#ifndef OVT_ARBITER_BLOCK_H
#define OVT_ARBITER_BLOCK_H

/* The arbiter's third level (issue 42, docs/arbiter.md "One block of one
 * site"): the dispute narrowed to step K, site s of its trace and leaf L of
 * s's output (16384 float32 elements, common/tree.h). The arbiter computes
 * exactly those elements, bit for bit as the whole step does, from
 *   - s's trace record (its op, output size and reads, kernels/trace.h);
 *   - the slices of what the block reads: leaf ranges of earlier sites'
 *     outputs and of state tensors and batch arrays, each with its Merkle
 *     range proof against the agreed root it comes from;
 *   - the trainer's rounding-log entries of s over the rows computed;
 *   - the run config (heads, sequence length, AdamW's constants, grid,
 *     the REPLAY rule).
 * It runs the op that owns s (kernels/ops.h) on only the rows of its
 * inputs the block depends on, in a REPLAY ctx in block mode
 * (krn_ctx_block): the op's earlier sites are skipped, the declared reads
 * of s are filled from the proven slices, s rounds with the log's entries
 * under the arbiter's rule, the op stops after s. Ops whose one block
 * needs every row (weight gradients, sums over the batch) run on all rows:
 * the block then costs the whole op (docs/arbiter.md says which). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/config.h"

/* One read of the site: a krn_trace_src with its region's name (STATE,
 * BATCH), as the record's encoding carries it. */
typedef struct {
    krn_trace_src src;
    char name[64];
} arb_block_read;

/* A proven slice of a source: the elements of its leaves
 * [first_leaf, first_leaf + nleaves), which hash with proof to root in the
 * tree of a source of n elements. */
typedef struct {
    krn_trace_kind kind; /* KRN_TRACE_SITE, _STATE or _BATCH */
    uint32_t site;       /* KRN_TRACE_SITE */
    char name[64];       /* KRN_TRACE_STATE, _BATCH: the region */
    uint64_t n;
    ovt_hash root;
    uint64_t first_leaf, nleaves;
    float *data;         /* the leaves' elements, from first_leaf * OVT_TREE_LEAF_BYTES / 4 on */
    ovt_hash *proof;
    size_t proof_len;
} arb_block_slice;

/* What the block is of and what it may use. Nothing here is owned. */
typedef struct {
    const trn_run_config *config;
    uint64_t step;
    uint32_t site;
    char op[48];
    uint64_t n;             /* the site's output elements */
    ovt_hash root;          /* the root of its output the record claims (not used to compute) */
    uint64_t leaf;
    const arb_block_read *reads;
    size_t nreads;
    const arb_block_slice *slices;
    size_t nslices;
    const krn_rlog_entry *entries; /* the site's entries over plan.out_lo .. out_hi, increasing */
    size_t nentries;
    uint64_t span_first, span_count; /* count > 0: only the output elements [first, first + count), within
                                        the leaf (the rows they need); the result has no leaf hash */
    int threads;            /* 0: one */
    bool record;            /* the trainer's side: round to nearest and log (RECORD), entries ignored;
                               the result carries the entries made (benchmarks, generated inputs) */
} arb_block_task;

/* A source range the block reads: elements [lo, hi) of a source. */
typedef struct {
    krn_trace_kind kind;
    uint32_t site;
    char name[64];
    uint64_t lo, hi;
} arb_block_need;

/* What the block needs, from the record alone (the party packs it):
 * the op's rows computed, the site's output range they give (whose log
 * entries apply) and each source's element range. */
typedef struct {
    uint64_t rows, row_lo, row_hi; /* the op's leading rows, those computed */
    bool whole;                    /* every row: the block needs the op's whole input */
    uint64_t out_lo, out_hi;       /* the site's output elements computed */
    arb_block_need *needs;         /* malloc'd */
    size_t nneeds;
} arb_block_plan;

void arb_block_plan_free(arb_block_plan *p);

/* Whether the block engine knows the site's op ("matmul.fwd", ...); the
 * others are re-executed with the whole step (docs/arbiter.md). */
bool arb_block_supported(const char *op);

/* The plan of task (its slices and entries are not read). OVT_EINVAL for
 * an op not supported or a record whose sizes do not fit its op. */
int arb_block_plan_make(const arb_block_task *task, arb_block_plan *plan) OVT_MUST_USE;

/* The block's result: its elements and leaf hash. */
typedef struct {
    uint64_t first, count; /* the leaf's elements of the site's output (or the task's span) */
    float *values;         /* malloc'd */
    ovt_hash leaf;         /* ovt_tree_leaf_le32 of them (zero for a span) */
    arb_block_plan plan;
    krn_rlog_entry *entries; /* task.record: the entries made over plan.out_lo .. out_hi (malloc'd) */
    size_t nentries;
} arb_block_result;

void arb_block_result_free(arb_block_result *r);

/* Verifies every slice's proof (OVT_EFRAUD naming the slice), checks that
 * the slices hold everything the plan needs (OVT_ENOTFOUND naming the
 * missing source range), and computes the block. OVT_EFRAUD also for a
 * log entry the arbiter's rule rejects; the step's own failures (a
 * non-finite value) as the op reports them. */
int arb_block_run(const arb_block_task *task, arb_block_result *out) OVT_MUST_USE;

/* Proves one slice: OVT_EFRAUD with a message naming it when its proof
 * does not climb to its root. */
int arb_block_slice_verify(const arb_block_slice *s) OVT_MUST_USE;

/* ---- the party's side: a block's inputs from a traced step ---- */

/* What arb_block_from_trace makes, owned (arb_block_owned_free). */
typedef struct {
    arb_block_read *reads;
    size_t nreads;
    arb_block_slice *slices;
    size_t nslices;
    krn_rlog_entry *entries;
    size_t nentries;
} arb_block_owned;

void arb_block_owned_free(arb_block_owned *o);

/* Fills task (config, step, threads set by the caller) for leaf `leaf`
 * of record i of t, a check-mode trace (krn_trace_new(.., true)) or one
 * that keeps the block's sources (arb_block_keep_for) of the
 * step whose rounding log is log: the record, its reads, the proven slices
 * of everything the block reads (roots: the records' for sites, each
 * region's tree root for the state and the batch) and the site's log
 * entries over the rows computed. OVT_EINVAL when the op is not supported
 * or t keeps no copies. */
int arb_block_from_trace(arb_block_task *task, arb_block_owned *own, const krn_trace *t, size_t i,
                         const krn_rlog *log, uint64_t leaf) OVT_MUST_USE;

/* The arbiter's side of the entries (docs/arbiter.md, "One block of one
 * site"): replaces task's entries, owned by own (a package's, or
 * arb_block_from_trace's), with site task->site's entries of log, the
 * trainer's committed rounding log of step task->step (logHash_K), over the
 * block's rows (plan.out_lo .. out_hi), so that the block never rounds with
 * entries the packing party chose. *differed: whether the entries it had
 * were not those. OVT_EINVAL for a log of another step or a task
 * arb_block_plan_make refuses; task is then unchanged. */
int arb_block_entries_from_log(arb_block_task *task, arb_block_owned *own, const krn_rlog *log,
                               bool *differed) OVT_MUST_USE;

/* For a party that re-runs the step twice instead of keeping every output:
 * registers with dst (a fresh trace, not check mode, for the same step
 * again) the sources leaf `leaf` of record i of t (any trace of the step)
 * reads, and site i itself, so that arb_block_from_trace can take the
 * block from dst. OVT_EINVAL for an op not supported. */
int arb_block_keep_for(krn_trace *dst, const krn_trace *t, size_t i, const trn_run_config *cfg, uint64_t step,
                       uint64_t leaf) OVT_MUST_USE;

/* ---- what the chunk engine (arbiter/block_chunk.h) shares ---- */

#define ARB_BLOCK_MAX_INPUTS 16

/* The sizes (elements) of the site's inputs, from its reads. */
int arb_block_input_sizes(const arb_block_task *task, uint64_t sizes[ARB_BLOCK_MAX_INPUTS],
                          size_t *ninputs) OVT_MUST_USE;

/* Elements [pos, pos + len) of the site's input m, from the task's slices
 * (not verified here: arb_block_slice_verify). OVT_ENOTFOUND naming the
 * source range no slice holds; OVT_EINVAL for a range outside the input. */
int arb_block_read_input(const arb_block_task *task, unsigned m, uint64_t pos, uint64_t len,
                         float *dst) OVT_MUST_USE;

/* Adds to plan's needs the source ranges of the site's input m's elements
 * [lo, hi) (widening a source's need already there). */
int arb_block_need_input(const arb_block_task *task, unsigned m, uint64_t lo, uint64_t hi,
                         arb_block_plan *plan) OVT_MUST_USE;

/* The proven slice of one need from a trace that keeps its source. */
int arb_block_slice_make(arb_block_slice *s, const krn_trace *t, const arb_block_need *nd) OVT_MUST_USE;

/* A REPLAY log for a sub-run: the task's entries over the site's elements
 * [lo, hi), renumbered from lo, as site `target` of hi - lo elements. */
int arb_block_sub_log(const arb_block_task *task, uint64_t lo, uint64_t hi, unsigned target,
                      krn_rlog **out) OVT_MUST_USE;

#endif
