#ifndef OVT_TRAINER_STORE_H
#define OVT_TRAINER_STORE_H

/* The artifact store (DESIGN.md section 4, docs/store.md): where a trainer
 * publishes what an auditor or arbiter needs to replay its run, named by a
 * URL: file://DIR or http(s)://HOST/PATH (read and write; http through
 * libcurl, uploads by PUT, trainer/store_http.h; a file:// store's directory
 * served by any static web server is a read-only http store).
 *
 * Content addressed, with two naming rules:
 *   blob/<hex>       any bytes, named by the SHA-256 of the bytes: run config
 *                    (configHash), dataset (datasetHash), rounding logs
 *                    (logHash), step tables;
 *   state/<hex>      a checkpoint file (docs/formats.md), named by the
 *                    stateHash of the state it holds (the committed hash), not
 *                    by the hash of its bytes;
 *   run/<runId>.json the run's manifest: which blobs make up the run. The
 *                    only name that is not a hash: its content is checked by
 *                    the reader against the chain (trn_store_manifest).
 * Every get checks what it downloaded against the name it asked for and fails
 * with OVT_ECRYPTO on a mismatch; a missing object is OVT_ENOTFOUND, a server
 * error or unreachable server OVT_EIO, each with a message naming the object. */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "trainer/state.h"

typedef struct trn_store trn_store;

/* Parses the URL (file:// with an absolute path, http:// or https://).
 * Nothing is contacted yet. */
int trn_store_open(trn_store **out, const char *url) OVT_MUST_USE;
void trn_store_close(trn_store *s);
const char *trn_store_url(const trn_store *s);

/* Bounds (docs/store.md, "Limits"). A store may be slow, endless or
 * forged, so every get is bounded in size and time:
 * - size: a get accepts at most the smallest of the caller's max_len, the
 *   cap given for that name with trn_store_expect, and the store's blob cap
 *   (trn_store_set_max_blob; default TRN_STORE_MAX_BLOB_DEFAULT). A
 *   checkpoint is capped at the exact size its header's config implies, and
 *   with trn_store_expect_config that config must be the run's. Callers cap
 *   the rest by what each must be: a rounding log at KRN_RLOG_MAX_FILE
 *   (kernels/rlog.h), starting parameters at trn_init_blob_len of the run's
 *   config (trainer/init.h), a config at TRN_STORE_MAX_CONFIG. An HTTP body
 *   streams to an unlinked temporary file and is read into memory only once
 *   complete and within its cap: a declared Content-Length over the cap is
 *   refused before any byte, a body that grows past it as soon as it does
 *   (after at most the cap and one libcurl buffer, CURL_MAX_WRITE_SIZE);
 * - time: every HTTP get ends (OVT_EIO, "deadline") at the store's deadline
 *   (trn_store_set_deadline), and at once when *stop becomes non-zero
 *   (trn_store_set_stop: a SIGINT/SIGTERM flag), checked by libcurl's
 *   progress callback at least once a second while waiting. */
#define TRN_STORE_MAX_BLOB_DEFAULT ((size_t)1 << 30)
/* A run config encoding (version 3 is 208 bytes). */
#define TRN_STORE_MAX_CONFIG ((size_t)4096)

void trn_store_set_max_blob(trn_store *s, size_t max_len);
/* A cap for the blob called name (up to 16 names; later calls for the same
 * name replace the cap). */
void trn_store_expect(trn_store *s, const ovt_hash *name, size_t max_len);
/* Checkpoints fetched from now on must hold a state of this config. */
void trn_store_expect_config(trn_store *s, const ovt_hash *config_hash);
/* Fetches end seconds from now (CLOCK_MONOTONIC); seconds <= 0: no deadline. */
void trn_store_set_deadline(trn_store *s, double seconds);
void trn_store_set_stop(trn_store *s, volatile sig_atomic_t *stop);

/* Stores bytes as blob/<SHA-256>; *name (may be NULL) gets the hash. An
 * object already present is left as it is (same name, same bytes). file://
 * writes are atomic (temporary file, fsync, rename); http(s):// uploads by
 * PUT after a HEAD (trainer/store_http.h), put_file streaming. */
int trn_store_put(trn_store *s, const void *data, size_t len, ovt_hash *name) OVT_MUST_USE;
int trn_store_put_file(trn_store *s, const char *path, ovt_hash *name) OVT_MUST_USE;

/* Fetches blob/<name> (at most max_len bytes) and checks its SHA-256. */
int trn_store_get(trn_store *s, const ovt_hash *name, size_t max_len, uint8_t **data, size_t *len) OVT_MUST_USE;

/* Whether a blob is present (1 yes, 0 no or unknown; http(s): a HEAD). */
int trn_store_has(trn_store *s, const ovt_hash *name);

/* Stores the state's checkpoint as state/<stateHash>. */
int trn_store_put_state(trn_store *s, const trn_state *st) OVT_MUST_USE;

/* Fetches state/<state_hash>, parses the checkpoint and checks that its
 * stateHash is state_hash. */
int trn_store_get_state(trn_store *s, const ovt_hash *state_hash, trn_state **out) OVT_MUST_USE;

/* The run manifest (JSON, docs/store.md): the blobs of a committed run. */
typedef struct {
    ovt_hash run_id;
    ovt_hash config_hash;  /* blob: config.bin */
    ovt_hash dataset_hash; /* blob: the data file */
    ovt_hash steps_hash;   /* blob: steps.bin (the trainer's step table) */
    uint64_t steps;        /* N */
    bool has_ranks;        /* a sharded run published its ranks.json (optional field "ranks") */
    ovt_hash ranks_hash;   /* blob: RUNDIR/ranks.json (trainer/ranks.h), which process computed which
                              shard: the trainer's own record, a hint that no hash commits to */
} trn_store_manifest;

int trn_store_put_manifest(trn_store *s, const trn_store_manifest *m) OVT_MUST_USE;
/* Reads run/<run_id>.json; checks that it names run_id. "ranks" is
 * optional (manifests before it have none): absent, or not 32 bytes of hex,
 * it leaves has_ranks false; it is a hint, never a reason to refuse a run. */
int trn_store_get_manifest(trn_store *s, const ovt_hash *run_id, trn_store_manifest *out) OVT_MUST_USE;

#endif
