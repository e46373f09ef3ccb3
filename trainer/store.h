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
} trn_store_manifest;

int trn_store_put_manifest(trn_store *s, const trn_store_manifest *m) OVT_MUST_USE;
/* Reads run/<run_id>.json; checks that it names run_id. */
int trn_store_get_manifest(trn_store *s, const ovt_hash *run_id, trn_store_manifest *out) OVT_MUST_USE;

#endif
