#ifndef OVT_KERNELS_BAND_H
#define OVT_KERNELS_BAND_H

/* Internal to kernels/: evaluating a site's band (krn_band, site.h) the way
 * every party evaluates it (docs/numeric-contract.md section 3). */

#include <stdbool.h>
#include <stddef.h>

#include "kernels/site.h"

/* True for a band that is 0 everywhere (NULL, or KRN_BAND_ZERO with no rel
 * term): an exact site. */
bool krn_band_is_zero(const krn_band *band);

/* 0, or OVT_EINVAL where the band cannot describe a site of n elements (an
 * array missing, cols not dividing n, an unknown kind). */
int krn_band_check(const krn_band *band, size_t n) OVT_MUST_USE;

/* tau[j] for elements i0 .. i0+len-1, whose values are xb[0 .. len-1]. */
void krn_band_fill(const krn_band *band, const double *restrict xb, size_t i0, size_t len,
                   double *restrict tau);

/* tau of element i alone, whose value is x[i] (the same value as
 * krn_band_fill gives it). */
double krn_band_at(const krn_band *band, const double *x, size_t i);

#endif
