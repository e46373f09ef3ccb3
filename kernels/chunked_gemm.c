/* The chunked GEMM by output tiles (chunked_gemm.h). */
#include "kernels/chunked_gemm.h"

#include <math.h>
#include <stdatomic.h>

#include "kernels/contract.h"
#include "kernels/cpu/gemm.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"
#include "kernels/vec.h"
#include "kernels/widen.h"

/* Output tile of the chunked GEMM: the partial products of one tile stay in
 * cache while the chunks are added (bench/bench_gemm.c measured the size). */
#ifndef KRN_TILE_CPU_N
#define KRN_TILE_CPU_N 256
#endif
#ifndef KRN_TILE_N
#define KRN_TILE_N 512
#endif

/* What the pool's workers need to compute tiles of one product. */
typedef struct {
    const krn_cpu *be;
    double *out;
    krn_gemm_in in;
    size_t m, n, k, tile_n, tiles_n;
    bool own;         /* cpu: kernels/cpu/gemm.c, not OpenBLAS */
    krn_gemm_isa isa; /* its path */
    double *apre;       /* own: a packed once (NULL: each tile packs its own) */
    size_t apre_tile;   /* doubles of apre per row of tiles */
    double *bpre;       /* own: b packed once (NULL: each tile packs its own) */
    size_t bpre_row;    /* doubles of bpre per row of b at a chunk: n rounded up to the micro-tile */
    atomic_int rc;
} gemm_job;

/* The FP64 copy of the part of the FP32 operand b that chunk k0 (kc terms)
 * of the tile at columns j0 (nb) reads, and its row stride: with tb the rows
 * j0.. and columns k0.. of b, else the rows k0.. and columns j0... */
static const double *widen_chunk(const krn_gemm_in *in, double *buf, size_t k0, size_t kc,
                                 size_t j0, size_t nb, size_t *ld)
{
    size_t rows = in->tb ? nb : kc, cols = in->tb ? kc : nb;
    const float *src = in->tb ? in->bf + j0 * in->ldb + k0 : in->bf + k0 * in->ldb + j0;
    for (size_t r = 0; r < rows; r++)
        krn_widen(buf + r * cols, src + r * in->ldb, cols);
    *ld = cols;
    return buf;
}

/* bnorms[j0 .. j0+nb) += the squares of one chunk's rows of b (FP32, row
 * stride ld; without tb: each column's squares in row order). */
KRN_VEC_CLONES static void chunk_col_squares(double *restrict sq, const float *restrict b, size_t ld,
                                             size_t kc, size_t nb)
{
    for (size_t r = 0; r < kc; r++)
        for (size_t c = 0; c < nb; c++)
            sq[c] += (double)b[r * ld + c] * (double)b[r * ld + c];
}

/* The row norms of b with tb (krn_widen_rows' order, kernels/widen.c):
 * lanes[8 c + q] += the squares of row c's columns k = q mod 8 in this
 * chunk (len a multiple of 8: a chunk starts at a multiple of 128). */
KRN_VEC_CLONES static void row_square_lanes(double *restrict lanes, const float *restrict b, size_t ld,
                                            size_t rows, size_t len)
{
    for (size_t c = 0; c < rows; c++)
        for (size_t k = 0; k < len; k += 8)
            for (size_t q = 0; q < 8; q++)
                lanes[8 * c + q] += (double)b[c * ld + k + q] * (double)b[c * ld + k + q];
}

/* tile (mb x nb, row stride n) = (first ? 0 : tile) + one chunk's product
 * on the cpu backend: its own kernel (pack non-NULL, kernels/cpu/gemm.h) or
 * OpenBLAS (beta = 0 for the first chunk, 1 after: the same sums, no
 * partial buffer). Both give the same bits (test_gemm_chunk). */
static void cpu_tile_chunk(const gemm_job *j, double *pack, double *tile, const double *ab,
                           const double *ap, const double *bb, const float *bc, const double *bp,
                           size_t ldb, size_t mb, size_t nb, size_t kc, bool first,
                           const krn_gemm_ahead *ahead)
{
    const krn_gemm_in *in = &j->in;
    if (pack) /* bb NULL: the own kernel packs the FP32 bc itself */
        krn_gemm_block_ex(j->isa, pack, tile, j->n, in->ta, ab, in->lda, ap, in->tb, bb, bc, bp, ldb,
                          mb, nb, kc, first, ahead);
    else if (first)
        krn_cpu_gemm(j->be, tile, j->n, in->ta, ab, in->lda, in->tb, bb, ldb, mb, nb, kc);
    else
        krn_cpu_gemm_add(j->be, tile, j->n, in->ta, ab, in->lda, in->tb, bb, ldb, mb, nb, kc);
}

/* Where the rows i0 .. i0+mb of a start in the product's packed a, at the
 * chunk at k0 (prepack_unit's layout). */
static double *apre_at(const gemm_job *j, size_t i0, size_t mb, size_t k0)
{
    return j->apre + i0 / KRN_TILE_M * j->apre_tile + krn_gemm_apack_doubles(j->isa, mb, k0);
}

/* Where the columns j0.. start in the product's packed b, at the chunk at
 * k0 (prepack_b_unit's layout: each chunk's panels of all n columns, the
 * chunks one after the other). */
static double *bpre_at(const gemm_job *j, size_t j0, size_t k0)
{
    size_t kc = j->k - k0 < KRN_GEMM_CHUNK ? j->k - k0 : KRN_GEMM_CHUNK;
    return j->bpre + j->bpre_row * k0 + j0 * kc;
}

/* tile (mb x nb, row stride n) += old (FP32, the same stride), after the
 * tile's last chunk. */
KRN_VEC_CLONES static void add_old(double *restrict tile, size_t n, const float *restrict old,
                                   size_t mb, size_t nb)
{
    for (size_t i = 0; i < mb; i++) {
        double *restrict row = tile + i * n;
        const float *restrict orow = old + i * n;
        for (size_t c = 0; c < nb; c++)
            row[c] += (double)orow[c];
    }
}

/* What the tile at rows i0.. (mb), columns j0.. (nb) reads after its chunk
 * at k0 (kc terms): the next chunk's rows of a and of b, or after the last
 * one the old values. Prefetched during the chunk's micro-tiles, they come
 * from memory while it computes (the FP32 weights of a step are read from
 * DRAM: 500 MB for gpt2-small). */
static krn_gemm_ahead tile_ahead(const gemm_job *j, size_t i0, size_t mb, size_t j0, size_t nb,
                                 size_t k0, size_t kc)
{
    const krn_gemm_in *in = &j->in;
    krn_gemm_ahead ah = {.n = 0};
    size_t k1 = k0 + kc;
    if (k1 >= j->k) {
        if (in->old)
            ah.r[ah.n++] = (krn_gemm_region){in->old + i0 * j->n + j0, mb, nb * sizeof(float),
                                             j->n * sizeof(float)};
        return ah;
    }
    size_t kn = j->k - k1 < KRN_GEMM_CHUNK ? j->k - k1 : KRN_GEMM_CHUNK;
    if (j->apre) /* a packed once: the tile reads the next chunk's panels there */
        ah.r[ah.n++] = (krn_gemm_region){apre_at(j, i0, mb, k1), 1,
                                         krn_gemm_apack_doubles(j->isa, mb, kn) * sizeof(double), 0};
    else if (in->ta)
        ah.r[ah.n++] = (krn_gemm_region){in->a + k1 * in->lda + i0, kn, mb * sizeof(double),
                                         in->lda * sizeof(double)};
    else
        ah.r[ah.n++] = (krn_gemm_region){in->a + i0 * in->lda + k1, mb, kn * sizeof(double),
                                         in->lda * sizeof(double)};
    if (j->bpre) { /* and b */
        ah.r[ah.n++] = (krn_gemm_region){bpre_at(j, j0, k1), 1,
                                         krn_gemm_bpack_doubles(j->isa, nb, kn) * sizeof(double), 0};
        return ah;
    }
    size_t es = in->bf ? sizeof(float) : sizeof(double);
    const char *b = in->bf ? (const char *)in->bf : (const char *)in->b;
    if (in->tb)
        ah.r[ah.n++] = (krn_gemm_region){b + (j0 * in->ldb + k1) * es, nb, kn * es, in->ldb * es};
    else
        ah.r[ah.n++] = (krn_gemm_region){b + (k1 * in->ldb + j0) * es, kn, nb * es, in->ldb * es};
    return ah;
}

/* One output tile (rows i0.., columns j0..) of krn_chunked_gemm_in. */
static int gemm_tile(const gemm_job *j, size_t i0, size_t mb, size_t j0, size_t nb)
{
    const krn_gemm_in *in = &j->in;
    size_t n = j->n, k = j->k;
    bool cpu = j->be->kind == KRN_BACKEND_CPU;
    double *tile = j->out + i0 * n + j0, *part = NULL, *wide = NULL, *pack = NULL;
    if (k > KRN_GEMM_CHUNK && !cpu &&
        !(part = krn_scratch(KRN_SCRATCH_TILE, (size_t)KRN_TILE_M * KRN_TILE_N)))
        return OVT_ENOMEM;
    /* the own kernel widens an FP32 b as it packs it; OpenBLAS and the ref
     * and shuffle backends take an FP64 copy of each chunk */
    bool direct = cpu && j->own && in->bf;
    if (in->bf && !direct && !(wide = krn_scratch(KRN_SCRATCH_WIDE, (size_t)KRN_GEMM_CHUNK * nb)))
        return OVT_ENOMEM;
    if (cpu && j->own &&
        !(pack = krn_scratch(KRN_SCRATCH_PACK, krn_gemm_pack_doubles(j->isa, mb, nb, KRN_GEMM_CHUNK))))
        return OVT_ENOMEM;
    /* the first row of tiles takes op(b)'s column norms from the FP32 b as
     * it reads it (with tb: eight lanes per row, krn_widen_rows' partial
     * sums), whichever path computes the product */
    bool norms = in->bnorms && in->bf && !in->tb && i0 == 0;
    bool rnorms = in->bnorms && in->bf && in->tb && i0 == 0;
    double *lanes = NULL;
    if (rnorms && !(lanes = krn_scratch(KRN_SCRATCH_LANES, 8 * nb)))
        return OVT_ENOMEM;
    for (size_t c = 0; rnorms && c < 8 * nb; c++)
        lanes[c] = 0;
    size_t k8 = k / 8 * 8;
    if (norms)
        for (size_t c = 0; c < nb; c++)
            in->bnorms[j0 + c] = 0;
    for (size_t k0 = 0; k0 < k; k0 += KRN_GEMM_CHUNK) {
        size_t kc = k - k0 < KRN_GEMM_CHUNK ? k - k0 : KRN_GEMM_CHUNK, ldb = in->ldb;
        const double *ab = in->ta ? in->a + k0 * in->lda + i0 : in->a + i0 * in->lda + k0;
        const float *bc = !in->bf ? NULL : in->tb ? in->bf + j0 * ldb + k0 : in->bf + k0 * ldb + j0;
        if (rnorms && k0 < k8)
            row_square_lanes(lanes, bc, ldb, nb, (k8 < k0 + kc ? k8 : k0 + kc) - k0);
        if (norms)
            chunk_col_squares(in->bnorms + j0, bc, ldb, kc, nb);
        const double *bb = direct ? NULL
                           : in->bf ? widen_chunk(in, wide, k0, kc, j0, nb, &ldb)
                           : in->tb ? in->b + j0 * in->ldb + k0 : in->b + k0 * in->ldb + j0;
        if (cpu) {
            krn_gemm_ahead ah = tile_ahead(j, i0, mb, j0, nb, k0, kc);
            const double *ap = j->apre ? apre_at(j, i0, mb, k0) : NULL;
            const double *bp = j->bpre ? bpre_at(j, j0, k0) : NULL;
            cpu_tile_chunk(j, pack, tile, ab, ap, bb, bc, bp, ldb, mb, nb, kc, k0 == 0, &ah);
            continue;
        }
        if (k0 == 0) {
            krn_cpu_gemm(j->be, tile, n, in->ta, ab, in->lda, in->tb, bb, ldb, mb, nb, kc);
            continue;
        }
        krn_cpu_gemm(j->be, part, nb, in->ta, ab, in->lda, in->tb, bb, ldb, mb, nb, kc);
        for (size_t i = 0; i < mb; i++) {
            double *restrict row = tile + i * n;
            const double *restrict prow = part + i * nb;
            for (size_t c = 0; c < nb; c++)
                row[c] += prow[c];
        }
    }
    if (norms)
        for (size_t c = 0; c < nb; c++)
            in->bnorms[j0 + c] = sqrt(in->bnorms[j0 + c]);
    for (size_t c = 0; rnorms && c < nb; c++) {
        double sum = krn_lanes_sum(lanes + 8 * c);
        const float *row = in->bf + (j0 + c) * in->ldb;
        for (size_t q = k8; q < k; q++)
            sum += (double)row[q] * (double)row[q];
        in->bnorms[j0 + c] = sqrt(sum);
    }
    if (in->old)
        add_old(tile, n, in->old + i0 * n + j0, mb, nb);
    return 0;
}

static void gemm_tile_job(void *arg, size_t t)
{
    gemm_job *j = arg;
    size_t i0 = t / j->tiles_n * KRN_TILE_M, j0 = t % j->tiles_n * j->tile_n;
    size_t mb = j->m - i0 < KRN_TILE_M ? j->m - i0 : KRN_TILE_M;
    size_t nb = j->n - j0 < j->tile_n ? j->n - j0 : j->tile_n;
    if (gemm_tile(j, i0, mb, j0, nb) != 0)
        atomic_store(&j->rc, OVT_ENOMEM);
}

/* The most doubles of a packed once for all tiles (16 MB): every product of
 * a gpt2-small step but the head's dinp (K = 50257: 103 MB). */
#define APRE_MAX ((size_t)1 << 21)

/* Packs a's rows of tiles, chunk by chunk, unit u = (row of tiles, chunk),
 * into job->apre: row of tiles r at r * apre_tile, its chunk at k0 after
 * round_up(rows, MR) * k0 doubles, each exactly as krn_gemm_block packs it. */
static void prepack_unit(void *arg, size_t u)
{
    gemm_job *j = arg;
    const krn_gemm_in *in = &j->in;
    size_t chunks = (j->k + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK;
    size_t r = u / chunks, k0 = u % chunks * KRN_GEMM_CHUNK, i0 = r * KRN_TILE_M;
    size_t mb = j->m - i0 < KRN_TILE_M ? j->m - i0 : KRN_TILE_M;
    size_t kc = j->k - k0 < KRN_GEMM_CHUNK ? j->k - k0 : KRN_GEMM_CHUNK;
    krn_gemm_pack_a(j->isa, apre_at(j, i0, mb, k0), in->ta, in->ta ? in->a + i0 : in->a + i0 * in->lda, in->lda, mb, k0, kc);
}

/* The most doubles of b packed once for all rows of tiles (16 MB): b of
 * every weight gradient of a gpt2-small step (K = B T). */
#define BPRE_MAX ((size_t)1 << 21)

/* Packs b's columns of tiles, chunk by chunk, unit u = (chunk, column of
 * tiles), into job->bpre at bpre_at's place, each exactly as
 * krn_gemm_block packs them. */
static void prepack_b_unit(void *arg, size_t u)
{
    gemm_job *j = arg;
    const krn_gemm_in *in = &j->in;
    size_t k0 = u / j->tiles_n * KRN_GEMM_CHUNK, j0 = u % j->tiles_n * j->tile_n;
    size_t nb = j->n - j0 < j->tile_n ? j->n - j0 : j->tile_n;
    size_t kc = j->k - k0 < KRN_GEMM_CHUNK ? j->k - k0 : KRN_GEMM_CHUNK, ldb = in->ldb;
    size_t at = in->tb ? j0 * ldb + k0 : k0 * ldb + j0;
    krn_gemm_pack_b(j->isa, bpre_at(j, j0, k0), in->tb, in->bf ? NULL : in->b + at,
                    in->bf ? in->bf + at : NULL, ldb, nb, kc);
}

/* Columns per output tile. ref and shuffle: KRN_TILE_N (their summation
 * draws follow the tiles). cpu: up to about KRN_TILE_CPU_N columns, the
 * tiles of a row of tiles equal in width and their count about a multiple
 * of 4, so that two or four threads get equal shares; a function of n and
 * the kernel alone, never of the thread count. The width is a multiple of
 * 8 (OpenBLAS's column unroll) and, for the own kernel, of its micro-tile's
 * columns (24 on AVX-512: a 252-wide tile ran its last 12 columns through
 * the edge path, 6 to 8% slower than 240 or 264 in a single-thread timing).
 * Each element's chunk sums are the same whatever tile computes them, and
 * with every width a multiple of 4 the columns that take a single chain in
 * an odd m's last row (gemm.h) are always the last n mod 4 of the whole
 * product, so the width changes no bit. */
static size_t gemm_tile_n(const krn_cpu *be, size_t n, bool own, krn_gemm_isa isa)
{
    if (be->kind != KRN_BACKEND_CPU)
        return KRN_TILE_N;
    if (n <= KRN_TILE_CPU_N)
        return n;
    size_t tiles = (n + KRN_TILE_CPU_N - 1) / KRN_TILE_CPU_N;
    tiles = (tiles + 3) / 4 * 4;
    size_t w = (n + tiles - 1) / tiles, nr = own ? krn_gemm_nr(isa) : 8, unit = nr;
    while (unit % 8 != 0) /* the least common multiple of 8 and nr: 24, 8 */
        unit += nr;
    return (w + unit - 1) / unit * unit;
}

int krn_chunked_gemm_in(const krn_cpu *be, double *out, const krn_gemm_in *in, size_t m, size_t n,
                        size_t k)
{
    if (k == 0) {
        for (size_t i = 0; i < m * n; i++)
            out[i] = in->old ? (double)in->old[i] : 0.0;
        for (size_t j = 0; in->bnorms && in->bf && j < n; j++)
            in->bnorms[j] = 0;
        return 0;
    }
    gemm_job job = {.be = be, .out = out, .in = *in, .m = m, .n = n, .k = k};
    job.own = be->gemm != KRN_CPU_GEMM_BLAS;
    job.isa = krn_cpu_gemm_isa(be);
    job.tile_n = gemm_tile_n(be, n, job.own, job.isa);
    job.tiles_n = (n + job.tile_n - 1) / job.tile_n;
    atomic_init(&job.rc, 0);
    size_t rows_t = (m + KRN_TILE_M - 1) / KRN_TILE_M, ntiles = rows_t * job.tiles_n;
    size_t chunks = (k + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK;
    int rc;
    /* the own kernel on several tiles per row of tiles: a packed once, not
     * once per tile (a gpt2-small head's forward has 191 tiles) */
    if (be->kind == KRN_BACKEND_CPU && job.own && job.tiles_n > 1) {
        job.apre_tile = krn_gemm_apack_doubles(job.isa, KRN_TILE_M, k);
        if (rows_t * job.apre_tile <= APRE_MAX)
            job.apre = krn_scratch(KRN_SCRATCH_APACK, rows_t * job.apre_tile);
        if (job.apre && (rc = krn_parallel(be, rows_t * chunks, prepack_unit, &job)))
            return rc;
    }
    /* and on several rows of tiles, b once, not once per row of tiles (a
     * gpt2-small head's weight gradient has 197) */
    if (be->kind == KRN_BACKEND_CPU && job.own && rows_t > 1) {
        job.bpre_row = krn_gemm_bpack_doubles(job.isa, n, 1);
        if (job.bpre_row * k <= BPRE_MAX)
            job.bpre = krn_scratch(KRN_SCRATCH_BPACK, job.bpre_row * k);
        if (job.bpre && (rc = krn_parallel(be, chunks * job.tiles_n, prepack_b_unit, &job)))
            return rc;
    }
    /* Tiles are independent: each adds its own chunks in order. */
    rc = krn_parallel(be, ntiles, gemm_tile_job, &job);
    if (rc)
        return rc;
    if (atomic_load(&job.rc))
        return ovt_fail(OVT_ENOMEM, "chunked GEMM: out of memory for a tile buffer");
    return 0;
}

int krn_chunked_gemm(const krn_cpu *be, double *out, bool ta, const double *a, size_t lda, bool tb,
                     const double *b, size_t ldb, size_t m, size_t n, size_t k)
{
    krn_gemm_in in = {.ta = ta, .a = a, .lda = lda, .tb = tb, .b = b, .ldb = ldb};
    return krn_chunked_gemm_in(be, out, &in, m, n, k);
}
