#ifndef OVT_STORE_STORE_H
#define OVT_STORE_STORE_H

/* The artifact store (docs/store.md): where a trainer
 * publishes what an auditor or arbiter needs to replay its run, named by a
 * URL: file://DIR or http(s)://HOST/PATH (read and write; http through
 * libcurl, uploads by PUT, store/http.h; a file:// store's directory
 * served by any static web server is a read-only http store).
 *
 * Content addressed, with two naming rules:
 *   blob/<hex>       any bytes, named by the SHA-256 of the bytes: run config
 *                    (configHash), dataset (datasetHash), rounding logs
 *                    (logHash), step tables;
 *   state/<hex>      a checkpoint file (docs/formats.md), named by the
 *                    stateHash of the state it holds (the committed hash), not
 *                    by the hash of its bytes. The store keeps and serves its
 *                    bytes without reading them: the reader decodes them
 *                    (trn_checkpoint_decode) and checks the stateHash;
 *   block/<hex>      a block package of the narrowing, named by the leaf
 *                    hash its party claims (store_put_block);
 *   run/<runId>.json the run's manifest: which blobs make up the run. The
 *                    only name that is not a hash: its content is checked by
 *                    the reader against the chain (store_manifest).
 * Every get checks what it downloaded against the name it asked for and fails
 * with OVT_ECRYPTO on a mismatch; a missing object is OVT_ENOTFOUND, a server
 * error or unreachable server OVT_EIO, each with a message naming the object. */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

typedef struct store_ctx store_ctx;

/* Parses the URL (file:// with an absolute path, http:// or https://).
 * Nothing is contacted yet. */
int store_open(store_ctx **out, const char *url) OVT_MUST_USE;
void store_close(store_ctx *s);
const char *store_url_of(const store_ctx *s);

/* Bounds (docs/store.md, "Limits"). A store may be slow, endless or
 * forged, so every get is bounded in size and time:
 * - size: a get accepts at most the smallest of the caller's max_len, the
 *   cap given for that name with store_expect, and the store's blob cap
 *   (store_set_max_blob; default STORE_MAX_BLOB_DEFAULT). Callers cap
 *   each object by what it must be: a checkpoint at the exact size of one
 *   of the run's config (trn_checkpoint_size, trainer/checkpoint.h), a rounding
 *   log at KRN_RLOG_MAX_FILE (kernels/rlog.h), starting parameters at
 *   trn_init_blob_len of the run's config (trainer/init.h), a config at
 *   STORE_MAX_CONFIG. An HTTP body
 *   streams to an unlinked temporary file and is read into memory only once
 *   complete and within its cap: a declared Content-Length over the cap is
 *   refused before any byte, a body that grows past it as soon as it does
 *   (after at most the cap and one libcurl buffer, CURL_MAX_WRITE_SIZE);
 * - time: every HTTP get ends (OVT_EIO, "deadline") at the store's deadline
 *   (store_set_deadline), and at once when *stop becomes non-zero
 *   (store_set_stop: a SIGINT/SIGTERM flag), checked by libcurl's
 *   progress callback at least once a second while waiting. */
#define STORE_MAX_BLOB_DEFAULT ((size_t)1 << 30)
/* A run config encoding (version 3 is 208 bytes). */
#define STORE_MAX_CONFIG ((size_t)4096)

void store_set_max_blob(store_ctx *s, size_t max_len);
/* A cap for the blob called name (up to 16 names; later calls for the same
 * name replace the cap). */
void store_expect(store_ctx *s, const ovt_hash *name, size_t max_len);
/* Fetches end seconds from now (CLOCK_MONOTONIC); seconds <= 0: no deadline. */
void store_set_deadline(store_ctx *s, double seconds);
void store_set_stop(store_ctx *s, volatile sig_atomic_t *stop);

/* Stores bytes as blob/<SHA-256>; *name (may be NULL) gets the hash. An
 * object already present is left as it is (same name, same bytes). file://
 * writes are atomic (temporary file, fsync, rename); http(s):// uploads by
 * PUT after a HEAD (store/http.h), put_file streaming. */
int store_put(store_ctx *s, const void *data, size_t len, ovt_hash *name) OVT_MUST_USE;
int store_put_file(store_ctx *s, const char *path, ovt_hash *name) OVT_MUST_USE;

/* Fetches blob/<name> (at most max_len bytes) and checks its SHA-256. */
int store_get(store_ctx *s, const ovt_hash *name, size_t max_len, uint8_t **data, size_t *len) OVT_MUST_USE;

/* Whether a blob is present (1 yes, 0 no or unknown; http(s): a HEAD). */
int store_has(store_ctx *s, const ovt_hash *name);

/* Stores a checkpoint's bytes (trn_checkpoint_encode) as
 * state/<state_hash>, state_hash being the stateHash of the state they hold
 * (trn_state_hash), which the store takes as given. */
int store_put_state(store_ctx *s, const ovt_hash *state_hash, const void *data, size_t len) OVT_MUST_USE;

/* Fetches state/<state_hash> (at most max_len bytes) as it is: the caller
 * decodes it (trn_checkpoint_decode) and checks that the state's stateHash
 * is state_hash; until then the bytes are only what the store served. */
int store_get_state(store_ctx *s, const ovt_hash *state_hash, size_t max_len, uint8_t **data,
                    size_t *len) OVT_MUST_USE;

/* A block package of the narrowing (docs/formats.md, "Block package") as
 * block/<claim>, claim being the leaf hash the packing party claims for
 * the block (its node at the narrowing's end, getNarrow), which the store
 * takes as given: the arbiter reads the package and checks it against the
 * chain. */
int store_put_block(store_ctx *s, const ovt_hash *claim, const void *data, size_t len) OVT_MUST_USE;
int store_get_block(store_ctx *s, const ovt_hash *claim, size_t max_len, uint8_t **data, size_t *len) OVT_MUST_USE;

/* The run manifest (JSON, docs/store.md): the blobs of a committed run. */
typedef struct {
    ovt_hash run_id;
    ovt_hash config_hash;  /* blob: config.bin */
    ovt_hash dataset_hash; /* blob: the data file */
    ovt_hash steps_hash;   /* blob: steps.bin (the trainer's step table) */
    uint64_t steps;        /* N */
    bool has_ranks;        /* a sharded run published its ranks.json (optional field "ranks") */
    ovt_hash ranks_hash;   /* blob: RUNDIR/ranks.json (dp/ranks.h), which process computed which
                              shard: the trainer's own record, a hint that no hash commits to */
} store_manifest;

int store_put_manifest(store_ctx *s, const store_manifest *m) OVT_MUST_USE;
/* Reads run/<run_id>.json; checks that it names run_id. "ranks" is
 * optional (manifests before it have none): absent, or not 32 bytes of hex,
 * it leaves has_ranks false; it is a hint, never a reason to refuse a run. */
int store_get_manifest(store_ctx *s, const ovt_hash *run_id, store_manifest *out) OVT_MUST_USE;

#endif
