#ifndef OVT_STORE_HTTP_H
#define OVT_STORE_HTTP_H

/* Uploads to an http(s):// artifact store (docs/store.md, "Publishing over
 * HTTP"): objects go up by PUT under the same content-addressed names as in
 * a file:// store. Idempotent: a HEAD first, and an object already there
 * with the right size is not sent again (its name fixes its bytes), so
 * re-running an interrupted publish sends only what is missing. Large files
 * stream from disk with progress lines on stderr.
 *
 * Credentials come from the environment, never from argv, and never appear
 * in a message:
 *   OVT_STORE_BEARER_TOKEN or OVT_STORE_BEARER_TOKEN_FILE  -> Authorization: Bearer
 *   OVT_STORE_BASIC_AUTH ("user:password") or OVT_STORE_BASIC_AUTH_FILE -> basic auth
 * A *_FILE holds the value (a trailing newline is dropped). */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

/* PUTs len bytes at base/rel unless (replace == 0) an object of len bytes
 * is already there. */
int store_http_put(const char *base, const char *rel, const void *data, size_t len, int replace) OVT_MUST_USE;

/* The same from a file of `size` bytes, streamed. */
int store_http_put_file(const char *base, const char *rel, const char *path, uint64_t size,
                            int replace) OVT_MUST_USE;

/* Publishes a file as base/blob/<SHA-256 of its bytes>, hashed and sent
 * streaming (never whole in memory); *name (may be NULL) gets the hash. */
int store_http_put_blob_file(const char *base, const char *path, ovt_hash *name) OVT_MUST_USE;

/* HEAD base/rel: *found 1 with *size (UINT64_MAX when the server did not
 * say) or 0 on 404/410; other statuses are OVT_EIO. */
int store_http_head(const char *base, const char *rel, int *found, uint64_t *size) OVT_MUST_USE;

/* s3://BUCKET[/PREFIX] (docs/store.md, "S3"): the base URL to use, path
 * style under $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL when set (MinIO, R2,
 * ...), else https://BUCKET.s3.REGION.amazonaws.com/PREFIX. Requests to a
 * resolved base are signed with SigV4 by libcurl (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION from the environment). */
int store_s3_resolve(char *out, size_t cap, const char *url) OVT_MUST_USE;
/* Whether base was resolved from an s3:// URL (requests to it are signed). */
int store_s3_is(const char *base);
const char *store_s3_region(void);

/* For a GET of url with a CURL handle: signs it when url is an S3 store's
 * (nothing otherwise); store_http_get_done after the request. */
struct store_http_get_auth;
int store_http_get_sign(void *curl, const char *url, struct store_http_get_auth **out) OVT_MUST_USE;
void store_http_get_done(struct store_http_get_auth *g);

#endif
