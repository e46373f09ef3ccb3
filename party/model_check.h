#ifndef OVT_PARTY_MODEL_CHECK_H
#define OVT_PARTY_MODEL_CHECK_H

/* A model file that carries its commitment (docs/formats.md, "Model
 * export"): `ovt export --format safetensors` writes the parameters of
 * checkpoint K with metadata from which `ovt verify --model FILE RECEIPT`
 * checks, from the file and the receipt alone, that the tensors are
 * exactly the parameters of the state committed as leaf K under the
 * receipt's root:
 *   the tensors, mapped back to ovt's layout, give D(params, t) for every
 *   tensor t; the metadata carries D(m, t), D(v, t), the run config (its
 *   SHA-256 is configHash) and the step K, so stateHash_K is recomputed as
 *   docs/formats.md defines it; leaf K is built from it, the receipt's
 *   runId and the metadata's batchHash_K and logHash_K, and the metadata's
 *   Merkle proof of leaf K (its siblings, bottom up) must lead to the
 *   receipt's root. Every metadata key is checked against what it names;
 *   a key ovt does not write is refused. */

#include <stdbool.h>
#include <stdint.h>

#include "chain/types.h"
#include "common/bytes.h"
#include "trainer/run.h"
#include "trainer/state.h"

/* What party_model_export wrote. */
typedef struct {
    uint64_t step;
    ovt_hash state_hash;
    bool has_proof; /* the run had a runId (receipt.json, or run.json's --run-id) */
    ovt_hash run_id, root;
} party_model_exported;

/* Writes st (state K of the run in dir, whose step table is table) to path
 * as safetensors (modelio/export.h) with the metadata above. The runId and
 * root come from dir/receipt.json when there is one (its root must be the
 * table's root for its runId), else from a non-zero run_id in
 * dir/run.json; without either the file carries no proof, and `ovt verify
 * --model` says so. */
int party_model_export(const char *path, const char *dir, const trn_state *st, const trn_step_table *table,
                       party_model_exported *out) OVT_MUST_USE;

/* What the receipt commits to, for the check. */
typedef struct {
    uint64_t chain_id;
    chain_address contract;
    chain_address trainer;
    ovt_hash run_id, root, config_hash, dataset_hash;
    uint64_t steps;
} party_model_anchor;

typedef struct {
    uint64_t step;
    ovt_hash state_hash, leaf;
    size_t tensors, nparams;
    char summary[400]; /* one line: what was checked */
} party_model_report;

/* Checks the model file at path against anchor (above). 0 when every check
 * passes; otherwise OVT_EFORMAT or OVT_ECRYPTO with a message naming what is
 * wrong: a tensor whose bytes are not the committed ones (named), a missing,
 * renamed, extra or misshapen tensor, a metadata key that is edited,
 * missing or unknown, a stateHash or leaf that the root does not cover. */
int party_model_check(const char *path, const party_model_anchor *anchor, party_model_report *out) OVT_MUST_USE;

/* Whether the safetensors file at path carries a Merkle proof (an export
 * made once the run had a runId): 1 or 0, or a negative code when the file
 * cannot be read as safetensors. For a message before any receipt exists. */
int party_model_has_proof(const char *path) OVT_MUST_USE;

#endif
