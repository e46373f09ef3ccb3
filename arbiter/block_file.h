#ifndef OVT_ARBITER_BLOCK_FILE_H
#define OVT_ARBITER_BLOCK_FILE_H

/* The block package (docs/formats.md, "Block package"): what a party hands
 * the arbiter for one block (arbiter/block.h), in one file. It binds every
 * root it uses to the step's trace root: the disputed record and the
 * record of every earlier site it reads come with their Merkle proofs
 * against the trace root, the slices with theirs against those records'
 * output roots (state tensors and batch arrays: against the roots it
 * names, which the arbiter compares with stateHash_{K-1}'s tensor roots and
 * the batch it rebuilds). The party's claim is the leaf of the disputed
 * output with its proof against the record's output root. */

#include <stddef.h>
#include <stdint.h>

#include "arbiter/block.h"
#include "common/tree.h"
#include "common/bytes.h"
#include "common/err.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/config.h"

#define ARB_BLOCK_MAGIC "OVTBLOCK"
#define ARB_BLOCK_VERSION 1u
#define ARB_BLOCK_VERSION_CHUNK 2u /* a chunk of a batch sum's chain (arbiter/block_chunk.h) */
#define ARB_BLOCK_VERSION_ELEMENT 3u /* one element of a leaf (level 4 of a one-value-per-row site) */

/* The package of leaf `leaf` of record i of t (a check-mode trace of step
 * `step` whose root is root, made with log and config rc): *buf malloc'd.
 * Errors as arb_block_from_trace's. */
int arb_block_package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                           const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf,
                           const krn_rlog *log) OVT_MUST_USE;

/* The package of element `element` (0 .. 16383, within the leaf) of leaf
 * `leaf` of record i (version ARB_BLOCK_VERSION_ELEMENT, docs/formats.md
 * "Block package"): as arb_block_package_make's, the leaf's claim kept,
 * with only the slices and log entries of the rows that element needs. Read
 * back, its task has span_first = leaf * 16384 + element, span_count = 1. */
int arb_block_element_package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                                   const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf, const krn_rlog *log,
                                   uint64_t element) OVT_MUST_USE;

/* The package of chunk `chunk` of the chain of leaf `leaf` of record i
 * (version 2, docs/formats.md "Block package"): as arb_block_package_make's,
 * plus the packing party's chain (its root, leaf count, its node at
 * `chunk` with its path), P_{chunk-1} with its path, and instead of the
 * block's slices those of the chunk's rows (chunk < C) or of the leaf's old
 * gradient and its log entries (chunk = C). t must keep every row of the
 * site's inputs (arb_block_keep_for). */
int arb_chunk_package_make(uint8_t **buf, size_t *len, const trn_run_config *rc, const krn_trace *t,
                           const ovt_hash *root, uint64_t step, size_t i, uint64_t leaf, const krn_rlog *log,
                           uint64_t chunk) OVT_MUST_USE;

/* Version 2's part: the packing party's chain and the state before the
 * chunk. */
typedef struct {
    uint64_t chunk, leaves;     /* the chunk (chain leaf) and the chain's leaf count C + 1 */
    ovt_hash root;              /* the packing party's chain root */
    ovt_hash node;              /* its chain leaf at chunk */
    ovt_hash node_proof[OVT_TREE_MAX_PROOF];
    size_t node_proof_len;
    uint8_t *prev;              /* P_{chunk-1} (malloc'd; NULL for chunk 0) */
    size_t prev_len;
    ovt_hash prev_proof[OVT_TREE_MAX_PROOF];
    size_t prev_proof_len;
} arb_chunk_part;

/* A package read back: the task to run (config, reads, slices, entries
 * point into it), the trace root it is bound to and the party's claim;
 * version 2: the chunk's part. */
typedef struct {
    uint32_t version;
    trn_run_config config;
    ovt_hash trace_root;
    uint32_t nrecords;
    ovt_hash claim;
    arb_block_task task;
    arb_block_owned own;
    arb_chunk_part chunk;
} arb_block_package;

/* Parses and checks buf: OVT_EFORMAT naming what is malformed; OVT_EFRAUD
 * when a record does not prove against the trace root or the claim
 * against the record's output root. The slices' own proofs are
 * arb_block_run's to check. */
int arb_block_package_read(arb_block_package *p, const uint8_t *buf, size_t len) OVT_MUST_USE;
void arb_block_package_free(arb_block_package *p);

/* The arbiter's check of a version 2 package: its chain has the count the
 * record's N gives (C + 1; OVT_EFRAUD naming both counts otherwise),
 * P_{chunk-1}'s and the node's paths climb to its chain root (OVT_EFRAUD),
 * and chain leaf `chunk` recomputed from them and the slices
 * (arb_chunk_step) into *leaf; values (NULL or info.count floats) as
 * arb_chunk_step's. */
int arb_chunk_package_run(const arb_block_package *p, ovt_hash *leaf, float *values) OVT_MUST_USE;

/* A task's record part (site, op, n, root, reads) from a trace record's
 * encoding alone (docs/formats.md "Step trace"; e.g. as revealed on chain),
 * enough for arb_block_plan_make and arb_chunk_info_of once the caller has
 * set config, step and leaf. *reads (malloc'd, the caller frees it) backs
 * task->reads. OVT_EFORMAT for a malformed record. */
int arb_block_record_task(arb_block_task *task, arb_block_read **reads, const uint8_t *enc,
                          size_t len) OVT_MUST_USE;

#endif
