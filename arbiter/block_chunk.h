#ifndef OVT_ARBITER_BLOCK_CHUNK_H
#define OVT_ARBITER_BLOCK_CHUNK_H

/* The arbiter's fourth level (issue 42, docs/arbiter.md "The reduction's
 * chunks"): a site that sums over the batch (arb_chunk_supported) needs
 * every row of its inputs for one leaf, so the dispute bisects once more,
 * over a canonical chain every honest party computes identically whatever
 * its hardware.
 *
 * For leaf L of such a site and its N rows, C = ceil(N / 128) chunks
 * (KRN_GEMM_CHUNK). P_c, for c < C, is the exact state after the terms of
 * rows [0, 128(c+1)), as canonical bytes (arbiter/xsum.h), element by
 * element of the leaf:
 *   the exact sum of its terms (80 bytes), and for the column sums
 *   ("matmul.bwd.dbias", "bias.bwd", the norms' "layernorm.bwd.dbias",
 *   "layernorm.bwd.dweight", "rmsnorm.bwd.dweight") the exact sum of their
 *   absolute values (80 bytes: the band's magnitude);
 * then, for "matmul.bwd.dweight" (whose band is the outer product of
 * norms), the exact sums of squares of dout's columns o0 .. o1 - 1 (the
 * leaf's rows of the weight gradient) and of inp's columns c0 .. c1 - 1
 * (the leaf's columns: all C when it spans more than one row), 80 bytes
 * each. Chain leaf c = SHA-256(0x00 || P_c); chain leaf C = the
 * leaf's output leaf hash (ovt_tree_leaf_le32 of its float32 values),
 * computed from P_{C-1}, the old gradient and the log entries: y = the
 * exact old + sum rounded once to FP64, the band from the exact magnitudes
 * (the norms: square roots of the sums rounded once), rounded by the
 * site's own rule (krn_batch_sum_round in a REPLAY ctx under the run's
 * rule, the arbiter's strict verifier). The chain's root is common/tree.h's
 * root over its C + 1 leaf hashes.
 *
 * On chain (OvtNarrow's stage Chunks), a party posts its chain's root, its
 * leaf count C + 1 and the proof that its last leaf is its level-3 node
 * (ovt_tree_proof over arb_chunk_chain_from_trace's leaves at C); a count
 * other than arb_chunk_info_of's chunks + 1 for the agreed record is
 * wrong. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arbiter/block.h"
#include "common/bytes.h"
#include "common/err.h"

#define ARB_CHUNK_ROWS 128 /* KRN_GEMM_CHUNK: the chain's chunks are the contract's */
#define ARB_CHUNK_MAX_SUMMED 4 /* the most inputs a chained site sums over (layernorm.bwd.dweight's) */

/* Whether op is a site the chain covers: "matmul.bwd.dweight",
 * "matmul.bwd.dbias", "bias.bwd", "gradnorm.sumsq" (N = every gradient
 * element, one output: P_c is its exact sum of squares, which is also its
 * magnitude; nothing old is added), "conv.bwd.dweight" (a ResNet's, as the
 * block engine reads its record: N = images x output positions, image by
 * image, a term dout * im2col(inp); P_c as the weight gradient's, its
 * columns being the Cin*k*k taps), the norms' column sums
 * "layernorm.bwd.dbias" (a float32 term: dout), "layernorm.bwd.dweight" and
 * "rmsnorm.bwd.dweight" (a term is the kernel's FP64 expression
 * ((inp - mean) * rstd) * dout of float32 values, mean 0.0 for RMSNorm,
 * rounded identically on every IEEE machine and summed exactly; a term with
 * a set bit below 2^-320, or of 2^256 or more, is refused: no chain),
 * "encoder.bwd.dwpe" (a column sum over the B sequences, bias.bwd's) and
 * "encoder.bwd.dwte" (a scatter: N = B*T positions, the summed inputs dout
 * and the tokens; P_c holds per element its exact sum and magnitude over
 * the rows whose token names its table row, then per table row the leaf
 * touches its count of tokens, which sets the kernel's per-token band; a
 * token outside the vocabulary is refused). */
bool arb_chunk_supported(const char *op);

/* The chain's sizes for leaf task->leaf of the task's site. */
typedef struct {
    uint64_t rows;        /* N, the reduction's length */
    uint64_t chunks;      /* C = ceil(N / ARB_CHUNK_ROWS); the chain has C + 1 leaves */
    uint64_t first, count; /* the leaf's elements of the site's output */
    size_t partial_len;   /* the bytes of each P_c */
    unsigned summed_inputs; /* inputs 0 .. summed_inputs - 1 are summed, (N, width) row-major */
    int old_input;        /* the input that is the old gradient; -1: none (gradnorm.sumsq) */
    uint64_t group_rows;  /* the summed inputs come in groups of this many rows (a convolution's
                             image: its output positions; else 1) */
    uint64_t group_width[ARB_CHUNK_MAX_SUMMED]; /* elements per group of inputs 0 .. summed_inputs - 1 */
} arb_chunk_info;

/* OVT_EINVAL for an op the chain does not cover, sizes that do not fit
 * it, or a leaf outside the site. Reads the record only. */
int arb_chunk_info_of(const arb_block_task *task, arb_chunk_info *info) OVT_MUST_USE;

typedef struct {
    arb_chunk_info info;
    ovt_hash *leaves; /* info.chunks + 1, malloc'd */
    ovt_hash root;
} arb_chunk_chain;

void arb_chunk_chain_free(arb_chunk_chain *c);

/* The party's work: the whole chain of the task's leaf, from a task whose
 * slices hold every row of the site's inputs (arb_block_from_trace) and
 * the log entries of the leaf. Verifies the slices (OVT_EFRAUD naming one
 * that does not prove). */
int arb_chunk_chain_make(const arb_block_task *task, arb_chunk_chain *out) OVT_MUST_USE;

/* P_c (0 <= c < C) of the task's leaf, from every row as
 * arb_chunk_chain_make takes them: the preimage of chain leaf c, which a
 * package for chunk c + 1 carries. *bytes malloc'd, *len = partial_len. */
int arb_chunk_partial(const arb_block_task *task, uint64_t c, uint8_t **bytes, size_t *len) OVT_MUST_USE;

/* The arbiter's block at chunk c of the chain (0 <= c <= C):
 *   c < C   from prev = P_{c-1} (c = 0: NULL, the zero state) and the
 *           task's slices of the rows [128c, 128c + 128) of the site's
 *           inputs: chain leaf c (the hash of P_c);
 *   c = C   from prev = P_{C-1}, the task's slice of the old gradient and
 *           its log entries of the leaf: chain leaf C, the leaf's output
 *           leaf hash; values (may be NULL) receives its info.count float32
 *           values.
 * Verifies every slice (OVT_EFRAUD naming it); OVT_ENOTFOUND when the
 * slices do not hold the chunk's rows (or the leaf's old gradient);
 * OVT_EINVAL when prev is not partial_len bytes; OVT_EFRAUD when the
 * log's entries break the arbiter's rule. */
int arb_chunk_step(const arb_block_task *task, uint64_t c, const uint8_t *prev, size_t prev_len, ovt_hash *leaf,
                   float *values) OVT_MUST_USE;

/* The party's chain as it posts it: arb_chunk_chain_make's from record i
 * of t (a trace that keeps the site's sources and output), with its last
 * leaf the trace's own output leaf, the party's level-3 node (the same
 * for an honest party; *recomputed_differs says whether it is not).
 * task: as arb_block_from_trace fills it (config, step, threads set). */
int arb_chunk_chain_from_trace(arb_chunk_chain *out, arb_block_task *task, const krn_trace *t, size_t i,
                               const krn_rlog *log, uint64_t leaf, bool *recomputed_differs) OVT_MUST_USE;

/* Testing only: the party's walk over the rows reads n input floats at
 * once (0: the default, 2^24), one chunk at least; the chain is the same. */
void arb_chunk_walk_floats(uint64_t n);

/* Chain leaf of a state: SHA-256(0x00 || P). OVT_ENOMEM. */
int arb_chunk_state_leaf(ovt_hash *leaf, const uint8_t *state, size_t len) OVT_MUST_USE;

/* The party's side: fills task (config, step, threads set by the caller)
 * for chunk c of the chain of leaf `leaf` of record i of t (a trace that
 * keeps the site's sources, as arb_block_from_trace takes): the record,
 * its reads and the proven slices of the rows [128c, 128c + 128) of the
 * inputs summed (c < C), or of the leaf's old gradient with the site's log
 * entries (c = C). */
int arb_chunk_from_trace(arb_block_task *task, arb_block_owned *own, const krn_trace *t, size_t i,
                         const krn_rlog *log, uint64_t leaf, uint64_t c) OVT_MUST_USE;

#endif
