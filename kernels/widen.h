#ifndef OVT_KERNELS_WIDEN_H
#define OVT_KERNELS_WIDEN_H

/* Internal to kernels/: FP64 copies of FP32 operands (exact) and the
 * Euclidean norms of their rows or columns that the bands take. */

#include <stddef.h>

#include "common/err.h"
#include "kernels/cpu/backend.h"

/* The sum of eight partial sums, in the order krn_widen_rows' norms use
 * (and the chunked GEMM's row norms of its operand, which must equal them). */
static inline double krn_lanes_sum(const double *a8)
{
    return ((a8[0] + a8[1]) + (a8[2] + a8[3])) + ((a8[4] + a8[5]) + (a8[6] + a8[7]));
}

/* Euclidean norms of the columns (cols values) of a row-major float matrix,
 * in FP64, each column's squares added in row order; split over columns
 * with krn_parallel. */
int krn_col_norms(const krn_cpu *be, double *norms, const float *m, size_t rows,
                  size_t cols) OVT_MUST_USE;

/* FP64 copy of a row-major float matrix (dst may be NULL: norms only) and,
 * in the same pass, the Euclidean norm of each row (norms may be NULL), with
 * eight partial sums per row; split over rows with krn_parallel. */
int krn_widen_rows(const krn_cpu *be, double *restrict dst, double *restrict norms,
                   const float *restrict src, size_t rows, size_t cols) OVT_MUST_USE;

/* FP64 copy of a float array (exact). */
void krn_widen(double *dst, const float *src, size_t n);

#endif
