#ifndef OVT_KERNELS_GRID_H
#define OVT_KERNELS_GRID_H

/* The target grid (docs/numeric-contract.md section 1): FP32 values whose
 * low 32-b mantissa bits are zero, b in 24..32 (b = 32 is plain FP32). Precision p = b - 8
 * significant bits; the exponent range, subnormals included, is FP32's.
 * Rounding is to nearest, ties to even (even = last kept mantissa bit 0). */

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* The numeric contract rounds each float operation to float: a compiler
 * that evaluates float expressions in double (s390x's GCC under -std=c17)
 * would round twice. CMakeLists.txt passes the flag that makes it hold. */
#if !defined(__FLT_EVAL_METHOD__) || __FLT_EVAL_METHOD__ != 0
#error "ovt needs float expressions evaluated in float (__FLT_EVAL_METHOD__ 0): see docs/architectures.md"
#endif

#define KRN_GRID_BITS_MIN 24
#define KRN_GRID_BITS_MAX 32

/* 0 if b is a valid grid width, else OVT_EINVAL with a message. */
int krn_grid_check_bits(int b);

/* Where a finite FP64 value x lies relative to the grid. All fields are
 * exact (docs/numeric-contract.md, section 2):
 *   mid      the grid midpoint nearest to x (just above a binade edge 2^e
 *            that can be the midpoint 2^e - q/4 of the finer grid below);
 *   dist     |x - mid|;
 *   below, above  the two grid values whose midpoint mid is (above is +inf
 *            for the midpoint just past the largest finite grid value);
 *   spacing  above - below;
 *   nearest  x rounded to nearest-even on the grid (IEEE signed zeros). */
typedef struct {
    double mid;
    double dist;
    double spacing;
    float below;   /* grid value just below mid */
    float above;   /* grid value just above mid */
    float nearest; /* round-to-nearest-even of x */
} krn_grid_pos;

/* Fills *pos for finite x. Fails with OVT_ENUMERIC if x is not finite or
 * rounds past the largest finite grid value. */
int krn_grid_locate(double x, int b, krn_grid_pos *pos) OVT_MUST_USE;

/* Round-to-nearest-even of finite x on the grid (no overflow check: a value
 * past the largest finite grid value becomes +-inf, which the caller must
 * treat as a failed step). */
float krn_grid_round(double x, int b);

/* True if v is a finite grid value for width b. */
bool krn_grid_contains(float v, int b);

/* The rounding interval of grid value v: every x in [*lo, *hi] may round to v
 * (the ends are the midpoints to v's neighbours; a tie at an end goes to v
 * only if v is even). For v = 0 (either sign) it is [-q/2, q/2] with q the
 * smallest grid step. Exact. Fails with OVT_EINVAL unless v is a finite grid
 * value. */
int krn_grid_interval(float v, int b, double *lo, double *hi) OVT_MUST_USE;

#endif
