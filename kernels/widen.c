/* FP64 copies of FP32 operands and their norms (widen.h). */
#include "kernels/widen.h"

#include <math.h>

#include "kernels/parallel.h"
#include "kernels/vec.h"

/* krn_widen's loop (a multiversioned function is declared with its clones
 * before any use, so this one is static and comes first). */
KRN_VEC_CLONES static void widen_vec(double *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* Chunks of about 64K elements for krn_parallel, whole rows or columns. */
static size_t lines_per_chunk(size_t line_len)
{
    size_t per = ((size_t)1 << 16) / (line_len ? line_len : 1);
    return per ? per : 1;
}

/* A loop over a row-major float matrix split into chunks of `per` rows or
 * columns for krn_parallel: its FP64 copy (or NULL) and norms. */
typedef struct {
    double *dst, *norms;
    const float *src;
    size_t rows, cols, per;
} matrix_job;

/* Columns [c*per, c*per + per): each column's squares added in row order. */
KRN_VEC_CLONES static void col_norms_chunk(void *arg, size_t c)
{
    const matrix_job *j = arg;
    size_t j0 = c * j->per, j1 = j0 + j->per < j->cols ? j0 + j->per : j->cols;
    double *restrict nrm = j->norms;
    for (size_t k = j0; k < j1; k++)
        nrm[k] = 0;
    for (size_t i = 0; i < j->rows; i++) {
        const float *restrict r = j->src + i * j->cols;
        for (size_t k = j0; k < j1; k++)
            nrm[k] += (double)r[k] * (double)r[k];
    }
    for (size_t k = j0; k < j1; k++)
        nrm[k] = sqrt(nrm[k]);
}

int krn_col_norms(const krn_cpu *be, double *norms, const float *m, size_t rows, size_t cols)
{
    /* two chunks per thread, of 64 columns at least: every chunk reads
     * its columns of every row, so wide chunks read whole cache lines */
    size_t per = (cols + 2 * (size_t)be->threads - 1) / (2 * (size_t)be->threads);
    per = per < 64 ? 64 : (per + 15) / 16 * 16;
    matrix_job j = {.norms = norms, .src = m, .rows = rows, .cols = cols, .per = per};
    return krn_parallel(be, (cols + per - 1) / per, col_norms_chunk, &j);
}

/* One row: its FP64 copy into d (NULL: none) and its Euclidean norm. */
static double widen_row(double *restrict d, const float *restrict r, size_t cols)
{
    /* eight partial sums so the loop vectorises (the order of a band's
     * own sum is free: the margin covers its rounding) */
    double acc[8] = {0};
    size_t j = 0;
    for (; j + 8 <= cols; j += 8)
        for (int k = 0; k < 8; k++) {
            double v = r[j + k];
            if (d)
                d[j + k] = v;
            acc[k] += v * v;
        }
    double s = krn_lanes_sum(acc);
    for (; j < cols; j++) {
        double v = r[j];
        if (d)
            d[j] = v;
        s += v * v;
    }
    return sqrt(s);
}

KRN_VEC_CLONES static void widen_rows_chunk(void *arg, size_t c)
{
    const matrix_job *j = arg;
    size_t i0 = c * j->per, i1 = i0 + j->per < j->rows ? i0 + j->per : j->rows;
    for (size_t i = i0; i < i1; i++) {
        double nrm = widen_row(j->dst ? j->dst + i * j->cols : NULL, j->src + i * j->cols, j->cols);
        if (j->norms)
            j->norms[i] = nrm;
    }
}

int krn_widen_rows(const krn_cpu *be, double *dst, double *norms, const float *src, size_t rows,
                   size_t cols)
{
    matrix_job j = {.dst = dst, .norms = norms, .src = src, .rows = rows, .cols = cols,
                        .per = lines_per_chunk(cols)};
    return krn_parallel(be, (rows + j.per - 1) / j.per, widen_rows_chunk, &j);
}

void krn_widen(double *dst, const float *src, size_t n)
{
    widen_vec(dst, src, n);
}
