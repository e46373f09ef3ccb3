#ifndef OVT_TRAINER_STATE_HASH_H
#define OVT_TRAINER_STATE_HASH_H

/* The stateHash of a training state (docs/formats.md, "State and
 * stateHash"): 3 * ntensors per-tensor digests, the parameters', m's and
 * v's of every tensor in layout order, combined with the configHash and the
 * step under a domain that names the version the run config holds
 * (trn_config_state_hash):
 *   v1    the digest is SHA-256 of the tensor's little-endian bytes, one
 *         stream per tensor (every run made before the tree);
 *   tree  the digest is the root of the tensor's tree (common/tree.h),
 *         whose leaves are independent jobs for every thread, and a part
 *         of a tensor can be proved against the stateHash
 *         (trainer/state_proof.h).
 * The threads are the process's one pool, a krn_ctx's (kernels/pool.h),
 * lent by trn_state_hash_threads. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

typedef struct trn_state trn_state;
typedef struct krn_ctx krn_ctx;

/* Lends ctx's threads to st's hashing until st is freed or another call
 * (NULL: none): trn_state_hash and trn_state_digests run their jobs on them
 * and trn_state_hash_begin runs its jobs on the workers' idle time. Every
 * hashing call on st is then made from ctx's owner thread. Without a ctx a
 * large state is hashed on a ctx made for the call (on the process's
 * pool). The loan ends before ctx is freed: lend NULL (which settles a
 * hash in flight) first. */
void trn_state_hash_threads(trn_state *st, krn_ctx *ctx);

/* stateHash_i of the state as it is now. */
void trn_state_hash(ovt_hash *out, const trn_state *st);

/* The 3 * ntensors per-tensor digests stateHash combines, D(params, t) for
 * every tensor t in layout order, then D(m, t), then D(v, t), of the run
 * config's version; out has room for 3 * TRN_MAX_TENSORS. */
void trn_state_digests(ovt_hash *out, const trn_state *st);

/* stateHash from its parts: the stateHash version (TRN_STATE_HASH_*), a
 * configHash, the step and the 3 * ntensors digests in trn_state_digests's
 * order. What a verifier holding only the digests computes
 * (party/model_check.h, trainer/state_proof.h). */
void trn_state_hash_combine(ovt_hash *out, uint32_t version, const ovt_hash *config_hash, uint64_t step,
                            size_t ntensors, const ovt_hash *digests);

/* One tensor's digest under a stateHash version: n floats in host order,
 * hashed as little-endian. OVT_ENOMEM (the tree's leaf hashes). */
int trn_state_tensor_digest(ovt_hash *out, uint32_t version, const float *values, size_t n) OVT_MUST_USE;

/* trn_state_hash of the state as it is now, computed while the caller goes
 * on with work that only reads the state (the trainer: the next step's
 * forward and backward). A tree stateHash's leaves are background jobs of
 * the lent ctx's workers (trn_state_hash_threads), taken while they have no
 * loop of the step to run, one 64 KiB leaf at a time; what they have not
 * done when the hash is needed, every thread of the ctx does then. A v1
 * stateHash, or one without a lent ctx with workers, is computed all at
 * once when the state settles. Until trn_state_hash_end the state must not
 * change: whatever writes it calls trn_state_settle first (the optimizer
 * step does). OVT_ENOMEM when no memory is left for the job. One hash at a
 * time: a second begin settles and discards the first. */
int trn_state_hash_begin(trn_state *st) OVT_MUST_USE;

/* Waits for trn_state_hash_begin's digests (computing those no thread has
 * taken), after which the state may change; a no-op without a begin. */
void trn_state_settle(trn_state *st);

/* The hash trn_state_hash_begin started (settling it first) and the step
 * the state was at then. Returns false, out and step untouched, when none
 * was started. */
bool trn_state_hash_end(trn_state *st, ovt_hash *out, uint64_t *step);

/* The bytes of digest d = section * ntensors + tensor of st (section 0
 * params, 1 m, 2 v), as 32-bit words in host order. */
const float *trn_state_digest_words(const trn_state *st, size_t d, size_t *bytes);

#endif
