#ifndef OVT_KERNELS_SITE_SPARSE_H
#define OVT_KERNELS_SITE_SPARSE_H

/* Internal to kernels/: rounding sites whose FP64 values live somewhere the
 * host cannot cheaply read, such as a GPU (kernels/cuda/). The device runs
 * the fast path of every element (krn_round_fast, grid_bits.h), flags the
 * elements it cannot settle and compacts them; only those candidates (and,
 * in REPLAY, the logged elements) travel to the host, where this API settles
 * them with exactly the code krn_site runs: same numbering, same log entries,
 * same fraud checks and messages, same statistics. The device then writes
 * the settled outputs back over its fast-path results.
 *
 *   krn_sparse_begin    numbers the site, finds its log entries (REPLAY);
 *   (device)            round + flag + compact; gather the logged elements;
 *   krn_sparse_finish   settles the candidates in index order (RECORD: their
 *                       entries go to the log), then applies the log entries.
 *
 * Flags: in RECORD and REPLAY with a band the fast path uses the element's
 * band tau (REPLAY looks for missing entries among them); otherwise
 * (NEAREST, exact sites) a zero band, as krn_site does.
 * Every failure is also recorded as the step's failure (later sites refuse to
 * run, krn_step_end reports it). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/site.h"

typedef struct {
    const char *name;
    uint32_t site;
    size_t n;
    bool banded;                  /* the band is not zero everywhere */
    bool record;                  /* RECORD with a band: entries are logged */
    bool flag_band;               /* RECORD or REPLAY with a band: tau flags */
    const krn_rlog_site *logged;  /* REPLAY: this site's entries, or NULL */
} krn_sparse_site;

/* count elements: index (increasing), the site's FP64 value x and band tau
 * there; out receives the settled grid value. For the logged elements the
 * arrays are parallel to logged->entries and index is unused. */
typedef struct {
    size_t count;
    const uint64_t *index;
    const double *x;
    const double *tau;
    float *out;
} krn_sparse_values;

int krn_sparse_begin(krn_ctx *ctx, const char *name, size_t n, bool banded,
                     krn_sparse_site *s) OVT_MUST_USE;
int krn_sparse_finish(krn_ctx *ctx, const krn_sparse_site *s, const krn_sparse_values *cand,
                      const krn_sparse_values *logged) OVT_MUST_USE;

/* Records rc (< 0, message set) as the failure of the current step, as a
 * failed site does. For device errors between begin and finish. */
void krn_sparse_fail(krn_ctx *ctx, int rc);

#endif
