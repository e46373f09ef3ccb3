/* The reduction sites the ops share: column sums, row means and row sums
 * (sum_sites.h). */
#include "kernels/sum_sites.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/alloc.h"
#include "kernels/contract.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"
#include "kernels/vec.h"

typedef struct {
    const krn_cpu *be;
    const double *m;
    const float *acc;
    double *x, *mag;
    size_t N, C;
} colsum_job;

/* COLSUM_LANES columns from m + j at once, each summed exactly as
 * krn_chunked_dot sums one with the cpu backend's krn_cpu_dot (four chains
 * over the rows of a chunk, k = 0, 1, 2, 3 mod 4, the rest into the first,
 * then (s0 + s1) + (s2 + s3); the chunks in order), plus the old value: a
 * column per lane, so vectorised loads along the rows of m. */
#define COLSUM_LANES 8
KRN_VEC_CLONES static void colsum_lanes(const double *restrict m, size_t C, size_t N,
                                        const float *restrict acc, double *restrict x)
{
    double s[COLSUM_LANES];
    for (size_t k0 = 0; k0 < N; k0 += KRN_GEMM_CHUNK) {
        size_t kc = N - k0 < KRN_GEMM_CHUNK ? N - k0 : KRN_GEMM_CHUNK;
        double s0[COLSUM_LANES] = {0}, s1[COLSUM_LANES] = {0}, s2[COLSUM_LANES] = {0},
               s3[COLSUM_LANES] = {0};
        const double *r = m + k0 * C;
        size_t k = 0;
        for (; k + 4 <= kc; k += 4, r += 4 * C)
            for (int l = 0; l < COLSUM_LANES; l++) {
                s0[l] += r[l];
                s1[l] += r[C + l];
                s2[l] += r[2 * C + l];
                s3[l] += r[3 * C + l];
            }
        for (; k < kc; k++, r += C)
            for (int l = 0; l < COLSUM_LANES; l++)
                s0[l] += r[l];
        for (int l = 0; l < COLSUM_LANES; l++) {
            double part = (s0[l] + s1[l]) + (s2[l] + s3[l]);
            s[l] = k0 == 0 ? part : s[l] + part;
        }
    }
    for (int l = 0; l < COLSUM_LANES; l++)
        x[l] = s[l] + (double)acc[l];
}

void krn_colsum_values(const krn_cpu *be, const double *m, size_t N, size_t C, const float *acc,
                       size_t j0, size_t j1, double *x)
{
    size_t j = j0;
    if (be->kind == KRN_BACKEND_CPU)
        for (; j + COLSUM_LANES <= j1; j += COLSUM_LANES)
            colsum_lanes(m + j, C, N, acc + j, x + j);
    for (; j < j1; j++)
        x[j] = krn_chunked_dot(be, m + j, (ptrdiff_t)C, NULL, 0, N) + (double)acc[j];
}

/* Columns [j0, j1): chunked sums plus the old value, and magnitudes added in
 * row order. */
static void colsum_cols(void *arg, size_t j0, size_t j1)
{
    const colsum_job *c = arg;
    size_t C = c->C, j;
    krn_colsum_values(c->be, c->m, c->N, C, c->acc, j0, j1, c->x);
    for (j = j0; j < j1; j++)
        c->mag[j] = 0;
    for (size_t i = 0; i < c->N; i++)
        for (j = j0; j < j1; j++)
            c->mag[j] += fabs(c->m[i * C + j]);
}

int krn_colsum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *acc,
                    const double *m, size_t N, size_t C)
{
    int rc = OVT_ENOMEM;
    double *x = krn_doubles(C, name), *mag = krn_doubles(C, name);
    if (!x || !mag)
        goto done;
    colsum_job job = {.be = be, .m = m, .acc = acc, .x = x, .mag = mag, .N = N, .C = C};
    if ((rc = krn_parallel_ranges(be, C, 64, colsum_cols, &job)))
        goto done;
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, N, 1.0, 1);
    band.a = mag;
    rc = krn_site(ctx, name, acc, x, C, &band);
done:
    free(x);
    free(mag);
    return rc;
}

/* Rows per range of the row sites' loop on the pool: each row's value
 * depends on that row alone. */
#define ROW_SITE_ROWS 16

typedef struct {
    const krn_cpu *be;
    const double *a, *b;
    const float *acc; /* NULL: a mean (divide by C) */
    double *x, *mag;
    size_t C;
} row_job;

static void row_values(void *arg, size_t i0, size_t i1)
{
    const row_job *j = arg;
    size_t C = j->C;
    for (size_t i = i0; i < i1; i++) {
        const double *ai = j->a + i * C, *bi = j->b ? j->b + i * C : NULL;
        double s = krn_chunked_dot(j->be, ai, 1, bi, 1, C);
        j->x[i] = j->acc ? s + (double)j->acc[i] : s / (double)C;
        double m = 0;
        for (size_t c = 0; c < C; c++)
            m += fabs(bi ? ai[c] * bi[c] : ai[c]);
        j->mag[i] = m;
    }
}

/* The site of j's N rows: their values and magnitudes, then the band (a
 * mean: 1/C times the sum, then one division; a sum: + old). */
static int row_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out, row_job *j, size_t N)
{
    int rc = krn_parallel_ranges(be, N, ROW_SITE_ROWS, row_values, j);
    if (rc)
        return rc;
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, j->C, j->acc ? 1.0 : 1.0 / (double)j->C, 1);
    band.a = j->mag;
    return krn_site(ctx, name, out, j->x, N, &band);
}

int krn_row_mean_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out, const double *a,
                      const double *b, size_t N, size_t C, double *x, double *mag)
{
    row_job j = {.be = be, .a = a, .b = b, .x = x, .mag = mag, .C = C};
    return row_site(ctx, be, name, out, &j, N);
}

int krn_row_sum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *acc, const double *a,
                     const double *b, size_t N, size_t C)
{
    double *x = krn_doubles(N, name), *mag = krn_doubles(N, name);
    row_job j = {.be = be, .a = a, .b = b, .acc = acc, .x = x, .mag = mag, .C = C};
    int rc = x && mag ? row_site(ctx, be, name, acc, &j, N) : OVT_ENOMEM;
    free(x);
    free(mag);
    return rc;
}
