#ifndef OVT_TRAINER_STORE_H
#define OVT_TRAINER_STORE_H

/* The artifact store (DESIGN.md section 4, "Data availability"): a base URL
 * (file:// for local runs, http:// or https:// otherwise, both through
 * libcurl) under which every object lives at BASE/<64 hex digits>, named by
 * the hash the chain commits to for it:
 *   a rounding log        by logHash     (SHA-256 of its bytes),
 *   a run config          by configHash  (SHA-256 of its encoding),
 *   a dataset             by datasetHash (SHA-256 of its bytes),
 *   a state checkpoint    by stateHash   (trn_state_hash of the state it holds).
 * Nothing fetched is trusted: the reader checks it against the name (the
 * caller checks checkpoints, whose name is not a hash of their bytes). */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

typedef struct trn_store trn_store;

/* Opens a store at url (file://PATH, http://..., https://...). Nothing is
 * read until the first get. */
int trn_store_open(trn_store **out, const char *url) OVT_MUST_USE;
void trn_store_close(trn_store *s);

/* Fetches the object named `name` (at most max_len bytes) into a malloc'd
 * *data. OVT_ENOTFOUND when the store does not have it (missing file, HTTP
 * 404), OVT_EIO for any other failure. */
int trn_store_get(trn_store *s, const ovt_hash *name, uint8_t **data, size_t *len, size_t max_len) OVT_MUST_USE;

/* Stores len bytes as object `name`: file:// writes atomically (temporary
 * file, fsync, rename), http(s) sends a PUT. */
int trn_store_put(trn_store *s, const ovt_hash *name, const void *data, size_t len) OVT_MUST_USE;

#endif
