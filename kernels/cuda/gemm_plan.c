/* The launch plan of a device product in a few launches (gemm_plan.h). */
#include "kernels/cuda/gemm_plan.h"

#include <stdint.h>
#include <string.h>

#include "kernels/contract.h"

size_t krn_cuda_gemm_budget(size_t m, size_t n)
{
    size_t mn = m * n;
    return mn > KRN_CUDA_GEMM_SCRATCH_MIN ? mn : KRN_CUDA_GEMM_SCRATCH_MIN;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

static int plan_check(bool ta, size_t lda, bool tb, size_t ldb, size_t m, size_t n, size_t k)
{
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX)
        return ovt_fail(OVT_EINVAL, "device product %zu x %zu over %zu terms (strides %zu, %zu): a dimension or "
                                    "stride is over cuBLAS's limit of %d; split the product",
                        m, n, k, lda, ldb, INT32_MAX);
    if (n != 0 && m > SIZE_MAX / sizeof(double) / n)
        return ovt_fail(OVT_EINVAL, "device product %zu x %zu: the output's size overflows", m, n);
    size_t arow = ta ? m : k, brow = tb ? k : n;
    if (lda < arow || ldb < brow)
        return ovt_fail(OVT_EINVAL, "device product %zu x %zu over %zu terms: row stride %zu of a or %zu of b is "
                                    "shorter than its row (%zu, %zu)", m, n, k, lda, ldb, arow, brow);
    return 0;
}

/* The tile height and group size within budget (more than one chunk). */
static void plan_shape(krn_cuda_gemm_plan *p, size_t m, size_t n, size_t budget)
{
    size_t want = min_size(m, KRN_CUDA_GEMM_MIN_ROWS);
    size_t rows_all = budget / (p->chunks * n); /* every chunk in one group */
    if (rows_all >= want) {
        p->group = p->chunks;
        p->rows = min_size(m, rows_all);
        return;
    }
    p->rows = want;
    p->group = budget / (want * n);
    if (p->group == 0) { /* not even one chunk of want rows: fewer rows, one chunk */
        p->group = 1;
        p->rows = budget / n ? min_size(m, budget / n) : 1;
    }
    p->group = min_size(p->group, p->chunks);
}

int krn_cuda_gemm_plan_make(krn_cuda_gemm_plan *p, bool ta, size_t lda, bool tb, size_t ldb, size_t m, size_t n,
                            size_t k, size_t budget)
{
    memset(p, 0, sizeof *p);
    int rc = plan_check(ta, lda, tb, ldb, m, n, k);
    if (rc)
        return rc;
    p->ta = ta;
    p->tb = tb;
    p->lda = lda;
    p->ldb = ldb;
    p->m = m;
    p->n = n;
    p->k = k;
    p->chunks = ceil_div(k, KRN_GEMM_CHUNK);
    p->full = k / KRN_GEMM_CHUNK;
    p->tail = k % KRN_GEMM_CHUNK;
    p->stride_a = (long long)(ta ? KRN_GEMM_CHUNK * lda : KRN_GEMM_CHUNK);
    p->stride_b = (long long)(tb ? KRN_GEMM_CHUNK : KRN_GEMM_CHUNK * ldb);
    if (m == 0 || n == 0 || k == 0) { /* nothing to multiply: the caller fills out */
        p->group = p->chunks;
        p->groups = p->chunks != 0;
        p->rows = m;
        p->tiles = m != 0 && n != 0;
        return 0;
    }
    if (budget == 0)
        budget = krn_cuda_gemm_budget(m, n);
    if (p->chunks == 1) {
        p->group = p->groups = p->tiles = 1;
        p->rows = m;
        return 0;
    }
    plan_shape(p, m, n, budget);
    p->groups = ceil_div(p->chunks, p->group);
    p->tiles = ceil_div(m, p->rows);
    p->slice = p->rows * n;
    p->scratch = p->group * p->slice;
    return 0;
}

/* Where chunk terms from k0 start in a's rows from i0, and in b. */
static size_t a_at(const krn_cuda_gemm_plan *p, size_t i0, size_t k0)
{
    return p->ta ? k0 * p->lda + i0 : i0 * p->lda + k0;
}

static size_t b_at(const krn_cuda_gemm_plan *p, size_t k0)
{
    return p->tb ? k0 : k0 * p->ldb;
}

/* The launches of group g of the tile at rows i0 (rows of them). */
static int walk_group(const krn_cuda_gemm_plan *p, bool old, size_t g, size_t i0, size_t rows,
                      int (*launch)(void *, const krn_cuda_gemm_launch *), void *arg)
{
    size_t c0 = g * p->group, count = min_size(p->group, p->chunks - c0);
    size_t full = c0 + count <= p->full ? count : p->full - c0;
    bool direct = p->chunks == 1, last = g + 1 == p->groups;
    size_t out_off = i0 * p->n, k0 = c0 * KRN_GEMM_CHUNK;
    krn_cuda_gemm_launch l = {.kind = KRN_CUDA_GEMM_DGEMM, .rows = rows, .into_out = direct};
    int rc = 0;
    if (full > 0) {
        l.a_off = a_at(p, i0, k0);
        l.b_off = b_at(p, k0);
        l.c_off = direct ? out_off : 0;
        l.kc = KRN_GEMM_CHUNK;
        l.count = full;
        rc = launch(arg, &l);
    }
    if (rc == 0 && count > full) { /* the short last chunk */
        size_t kt = k0 + full * KRN_GEMM_CHUNK;
        l.a_off = a_at(p, i0, kt);
        l.b_off = b_at(p, kt);
        l.c_off = direct ? out_off : full * p->slice;
        l.kc = p->tail;
        l.count = 1;
        rc = launch(arg, &l);
    }
    if (rc || (direct && !(old && last)))
        return rc;
    krn_cuda_gemm_launch sum = {.kind = KRN_CUDA_GEMM_SUM, .c_off = out_off, .rows = rows,
                                .nslices = direct ? 0 : count, .from_out = g > 0 || direct,
                                .with_old = old && last};
    return launch(arg, &sum);
}

int krn_cuda_gemm_plan_walk(const krn_cuda_gemm_plan *p, bool old,
                            int (*launch)(void *arg, const krn_cuda_gemm_launch *l), void *arg)
{
    if (p->tiles == 0)
        return 0;
    if (p->chunks == 0) {
        krn_cuda_gemm_launch l = {.kind = KRN_CUDA_GEMM_FILL, .rows = p->m, .with_old = old};
        return launch(arg, &l);
    }
    for (size_t t = 0; t < p->tiles; t++) {
        size_t i0 = t * p->rows, rows = min_size(p->rows, p->m - i0);
        for (size_t g = 0; g < p->groups; g++) {
            int rc = walk_group(p, old, g, i0, rows, launch, arg);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int count_launch(void *arg, const krn_cuda_gemm_launch *l)
{
    (void)l;
    (*(size_t *)arg)++;
    return 0;
}

size_t krn_cuda_gemm_launches(const krn_cuda_gemm_plan *p, bool old)
{
    size_t n = 0;
    int rc = krn_cuda_gemm_plan_walk(p, old, count_launch, &n);
    (void)rc; /* count_launch never fails */
    return n;
}

size_t krn_cuda_gemm_launches_per_chunk(size_t k, bool old)
{
    size_t chunks = ceil_div(k, KRN_GEMM_CHUNK);
    return chunks == 0 ? 1 : 2 * chunks - 1 + old;
}

int krn_cuda_gemm_path_parse(const char *value, krn_cuda_gemm_path *path)
{
    *path = KRN_CUDA_GEMM_BATCHED;
    if (value == NULL || value[0] == '\0' || strcmp(value, "batched") == 0)
        return 0;
    if (strcmp(value, "per-chunk") == 0) {
        *path = KRN_CUDA_GEMM_PER_CHUNK;
        return 0;
    }
    return ovt_fail(OVT_EINVAL, "OVT_CUDA_GEMM=%s: expected \"batched\" (the default: a few launches per "
                                "product) or \"per-chunk\" (one DGEMM per chunk of %d terms)", value, KRN_GEMM_CHUNK);
}
