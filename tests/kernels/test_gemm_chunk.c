/* The cpu backend's own chunked GEMM (kernels/cpu/gemm.h) gives exactly the
 * bits of OpenBLAS's DGEMM called chunk by chunk (beta = 0, then 1), which
 * the cpu backend used before: on every path this CPU runs (AVX-512,
 * AVX2+FMA, portable C), all four transpositions, the tile shapes of a
 * gpt2-tiny and a gpt2-small step, edge sizes that are not multiples of a
 * micro-tile and k that is not a multiple of the chunk. A second, separate
 * reference is the order gemm.h documents, written here as plain scalar
 * loops; so a change of OpenBLAS's kernel shows up as a failure against one
 * reference and not the other. Then krn_chunked_gemm_in (tiles, threads, an
 * FP32 b widened per chunk, an old gradient, column norms) with
 * OVT_GEMM=blas against the own kernel, and OVT_GEMM's parsing.
 *
 * OpenBLAS picks its DGEMM kernel by CPU at load time. The order gemm.h
 * documents is that of its Haswell kernel, which it runs on Haswell and Zen
 * cores; on AVX-512 cores (SkylakeX, Cooperlake, ...) it runs another
 * kernel that sums in another order. There the comparisons with OpenBLAS
 * are skipped (said so on stdout) and every own path is checked against the
 * documented order and against the portable C path instead: the own
 * kernel's bits are the same on every machine, OpenBLAS's are not. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "check.h"
#include "kernels/chunked_gemm.h"
#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/rng.h"
#include "kernels/sum_sites.h"
#include "kernels/widen.h"
#include "ops_fixture.h"

/* Doubles with full 53-bit significands and exponents over a range of
 * 2^+-8, signs mixed: every fma rounds, so a different order shows. */
static double *random_doubles(size_t n, uint64_t seed)
{
    double *p = malloc((n ? n : 1) * sizeof *p);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = (double)(s >> 11) * 0x1p-53; /* [0, 1) */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int e = (int)(s % 17) - 8;
        p[i] = ldexp(s & (1ull << 40) ? -(0.5 + u) : 0.5 + u, e);
    }
    return p;
}

static double op_a(bool ta, const double *a, size_t lda, size_t i, size_t k)
{
    return ta ? a[k * lda + i] : a[i * lda + k];
}

static double op_b(bool tb, const double *b, size_t ldb, size_t k, size_t j)
{
    return tb ? b[j * ldb + k] : b[k * ldb + j];
}

/* The order gemm.h documents, one element at a time. */
static void documented_order(double *c, bool ta, const double *a, size_t lda, bool tb,
                             const double *b, size_t ldb, size_t m, size_t n, size_t k)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (size_t k0 = 0; k0 < k; k0 += KRN_GEMM_CHUNK) {
                size_t kc = k - k0 < KRN_GEMM_CHUNK ? k - k0 : KRN_GEMM_CHUNK;
                double s;
                if (m % 2 == 1 && i == m - 1 && j < n / 4 * 4) {
                    double e[4] = {0, 0, 0, 0};
                    size_t k8 = kc / 8 * 8;
                    for (size_t q = 0; q < kc; q++)
                        e[q < k8 ? q % 4 : 0] = fma(op_a(ta, a, lda, i, k0 + q),
                                                    op_b(tb, b, ldb, k0 + q, j), e[q < k8 ? q % 4 : 0]);
                    s = (e[0] + e[1]) + (e[2] + e[3]);
                } else {
                    s = 0.0;
                    for (size_t q = 0; q < kc; q++)
                        s = fma(op_a(ta, a, lda, i, k0 + q), op_b(tb, b, ldb, k0 + q, j), s);
                }
                acc = k0 == 0 ? 0.0 + s : acc + s;
            }
            c[i * n + j] = acc;
        }
}

/* OpenBLAS chunk by chunk, as the cpu backend's tiles called it. */
static void blas_chunks(double *c, bool ta, const double *a, size_t lda, bool tb, const double *b,
                        size_t ldb, size_t m, size_t n, size_t k)
{
    krn_cpu be = {KRN_BACKEND_CPU, 0, 1, KRN_CPU_GEMM_BLAS, NULL};
    for (size_t k0 = 0; k0 < k; k0 += KRN_GEMM_CHUNK) {
        size_t kc = k - k0 < KRN_GEMM_CHUNK ? k - k0 : KRN_GEMM_CHUNK;
        const double *ak = ta ? a + k0 * lda : a + k0, *bk = tb ? b + k0 : b + k0 * ldb;
        if (k0 == 0)
            krn_cpu_gemm(&be, c, n, ta, ak, lda, tb, bk, ldb, m, n, kc);
        else
            krn_cpu_gemm_add(&be, c, n, ta, ak, lda, tb, bk, ldb, m, n, kc);
    }
}

/* Whether this OpenBLAS runs the Haswell DGEMM kernel, whose order gemm.h
 * documents. */
static bool blas_comparable(void)
{
    const char *core = openblas_get_corename();
    return core && (!strcmp(core, "Haswell") || !strcmp(core, "Zen"));
}

static size_t count_diff(const double *x, const double *y, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&x[i], &y[i], sizeof x[i]) != 0;
    return bad;
}

/* Tiles the chunked products of a step hand to the kernel (m <= 256 rows,
 * widths from reduce.c's gemm_tile_n, attention's T x T x hs), and edges. */
static void test_block_bits(void)
{
    const size_t shapes[][3] = {
        /* gpt2-small, B = 4, T = 64: tiles of N = 256 rows by 192 (C = 768,
         * 3C), 256 (4C) or 252 (V) columns; K = C, 4C, N; attention T x T x
         * hs and T x hs x T; the last tile row of dwte (50257 = 196 * 256 + 81) */
        {256, 192, 128}, {256, 256, 128}, {256, 252, 128}, {256, 192, 768}, {256, 192, 3072},
        {64, 64, 64}, {81, 192, 256},
        /* gpt2-tiny, B = 8, T = 64: C = 64, 3C = 192, 4C = 256, V = 256, hs = 16 */
        {256, 64, 64}, {256, 192, 64}, {256, 256, 256}, {256, 64, 512}, {64, 64, 16}, {64, 16, 64},
        /* other batch shapes */
        {64, 128, 128}, {128, 64, 64}, {16, 16, 16}, {32, 96, 32},
        /* odd m (OpenBLAS's last-row order), edges, k off the chunk */
        {1, 1, 1}, {1, 13, 128}, {3, 5, 7}, {17, 23, 128}, {9, 25, 129}, {7, 4, 300},
        {255, 257, 100}, {129, 131, 127}, {5, 9, 64}, {31, 48, 9}, {33, 3, 256}, {2, 1, 200},
    };
    krn_gemm_isa best = krn_gemm_isa_best();
    size_t bad_blas[3] = {0}, bad_doc[3] = {0}, bad_ref = 0, total = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        double *a = random_doubles(m * k, 2 * s + 1), *b = random_doubles(k * n, 2 * s + 2);
        double *c = malloc(m * n * sizeof *c), *want = malloc(m * n * sizeof *want);
        double *doc = malloc(m * n * sizeof *doc);
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            size_t lda = ta ? m : k, ldb = tb ? k : n;
            blas_chunks(want, ta, a, lda, tb, b, ldb, m, n, k);
            documented_order(doc, ta, a, lda, tb, b, ldb, m, n, k);
            bad_ref += count_diff(want, doc, m * n);
            for (int isa = KRN_GEMM_ISA_C; isa <= (int)best; isa++) {
                double *pack = malloc(krn_gemm_pack_doubles(isa, m, n, k) * sizeof *pack);
                for (size_t i = 0; i < m * n; i++)
                    c[i] = NAN; /* first = true must not read c */
                krn_gemm_block(isa, pack, c, n, ta, a, lda, tb, b, ldb, m, n, k, true, NULL);
                bad_blas[isa] += count_diff(c, want, m * n);
                bad_doc[isa] += count_diff(c, doc, m * n);
                free(pack);
            }
            total += m * n;
        }
        free(a), free(b), free(c), free(want), free(doc);
    }
    bool blas = blas_comparable();
    if (blas)
        CHECK_MSG(bad_ref == 0, "%zu of %zu elements: OpenBLAS's order is not the one gemm.h documents",
                  bad_ref, total);
    for (int isa = KRN_GEMM_ISA_C; isa <= (int)best; isa++) {
        if (blas)
            CHECK_MSG(bad_blas[isa] == 0, "%s: %zu of %zu elements differ from OpenBLAS",
                      krn_gemm_isa_name(isa), bad_blas[isa], total);
        CHECK_MSG(bad_doc[isa] == 0, "%s: %zu of %zu elements differ from the documented order",
                  krn_gemm_isa_name(isa), bad_doc[isa], total);
    }
    printf("block: %zu elements x %d paths (best: %s) compared with the documented order%s\n", total,
           (int)best + 1, krn_gemm_isa_name(best),
           blas ? " and OpenBLAS"
                : "; not with OpenBLAS, whose DGEMM kernel here is not its Haswell one");
    if (!blas)
        printf("OpenBLAS core %s: %zu of %zu elements in another order than gemm.h documents\n",
               openblas_get_corename(), bad_ref, total);
}

/* first = false adds to c: c0 + chunk sums, each chunk's sum added in turn
 * (the first one too, unlike first = true's 0 + sum). */
static void test_block_add(void)
{
    size_t m = 37, n = 29, k = 2 * KRN_GEMM_CHUNK + 5;
    double *a = random_doubles(m * k, 91), *b = random_doubles(k * n, 92);
    double *c0 = random_doubles(m * n, 93), *c = malloc(m * n * sizeof *c);
    double *doc = malloc(m * n * sizeof *doc), *part = malloc(m * n * sizeof *part);
    for (int isa = KRN_GEMM_ISA_C; isa <= (int)krn_gemm_isa_best(); isa++) {
        double *pack = malloc(krn_gemm_pack_doubles(isa, m, n, k) * sizeof *pack);
        memcpy(c, c0, m * n * sizeof *c);
        krn_gemm_block(isa, pack, c, n, false, a, k, false, b, n, m, n, k, false, NULL);
        memcpy(doc, c0, m * n * sizeof *doc);
        for (size_t k0 = 0; k0 < k; k0 += KRN_GEMM_CHUNK) {
            size_t kc = k - k0 < KRN_GEMM_CHUNK ? k - k0 : KRN_GEMM_CHUNK;
            documented_order(part, false, a + k0, k, false, b + k0 * n, n, m, n, kc);
            for (size_t i = 0; i < m * n; i++)
                doc[i] += part[i];
        }
        CHECK_MSG(count_diff(c, doc, m * n) == 0, "%s: first = false does not add to c",
                  krn_gemm_isa_name(isa));
        free(pack);
    }
    free(a), free(b), free(c0), free(c), free(doc), free(part);
}

/* krn_chunked_gemm_in over several tiles and two threads: the own kernel on
 * each path and OpenBLAS give the same outputs and column norms, with b in
 * FP64 or FP32 (which the own kernel widens as it packs), stored as it is or
 * transposed (the forward products' weights), a stored as it is or
 * transposed (the weight gradients' products; a product of several tiles
 * per row of tiles packs a once for all of them), with and without an old
 * gradient. */
static void test_chunked_paths(void)
{
    /* 301 x 603: an odd m whose last row takes one chain in its last
     * n mod 4 = 3 columns, with tiles of another width on each path (152
     * on the C path, 168 on AVX-512) */
    const size_t shapes[][3] = {{301, 600, 300}, {301, 603, 300}, {256, 768, 768}, {7, 33, 129}, {64, 64, 64}};
    krn_gemm_isa best = krn_gemm_isa_best();
    krn_pool *pool = NULL; /* the two threads the tiles run on */
    CHECK(krn_pool_new(&pool, 2) == 0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        double *a = random_doubles(m * k, 40 + s);
        float *bf = fx_normal(k * n, 50 + s, 1, 2.0), *old = fx_normal(m * n, 60 + s, 2, 1.0);
        double *bd = malloc(k * n * sizeof *bd);
        krn_widen(bd, bf, k * n);
        float *bft = malloc(k * n * sizeof *bft); /* b^T: n rows of k */
        double *bdt = malloc(k * n * sizeof *bdt), *at = malloc(m * k * sizeof *at); /* a^T */
        for (size_t i = 0; i < m; i++)
            for (size_t kk = 0; kk < k; kk++)
                at[kk * m + i] = a[i * k + kk];
        for (size_t kk = 0; kk < k; kk++)
            for (size_t j = 0; j < n; j++)
                bft[j * k + kk] = bf[kk * n + j], bdt[j * k + kk] = bd[kk * n + j];
        double *want = malloc(m * n * sizeof *want), *got = malloc(m * n * sizeof *got);
        double *doc = malloc(m * n * sizeof *doc);
        double *nwant = malloc(n * sizeof *nwant), *ngot = malloc(n * sizeof *ngot);
        for (int variant = 0; variant < 6; variant++) {
            krn_gemm_in in = {.a = a, .lda = k, .ldb = n};
            if (variant == 0)
                in.b = bd;
            else if (variant <= 2)
                in.bf = bf, in.bnorms = nwant;
            else if (variant == 3)
                in.tb = true, in.bf = bft, in.ldb = k, in.bnorms = nwant;
            else if (variant == 4)
                in.tb = true, in.b = bdt, in.ldb = k;
            else
                in.ta = true, in.a = at, in.lda = m, in.b = bd;
            if (variant == 2 || variant == 3 || variant == 5)
                in.old = old;
            /* the reference: OpenBLAS where it runs the documented order,
             * else the own portable C path (every path must give its bits) */
            krn_cpu ref = {KRN_BACKEND_CPU, 0, 2, blas_comparable() ? KRN_CPU_GEMM_BLAS : KRN_CPU_GEMM_C, pool};
            CHECK(krn_chunked_gemm_in(&ref, want, &in, m, n, k) == 0);
            /* and the documented order, element by element, plus the old
             * value last: independent of the tiles and the packing */
            documented_order(doc, in.ta, in.a, in.lda, in.tb, in.tb ? bdt : bd, in.ldb, m, n, k);
            for (size_t i = 0; in.old && i < m * n; i++)
                doc[i] += (double)in.old[i];
            size_t bad_doc = count_diff(want, doc, m * n);
            CHECK_MSG(bad_doc == 0, "%zu x %zu x %zu variant %d: %zu reference outputs differ from the documented order",
                      m, n, k, variant, bad_doc);
            /* the norms of op(b)'s columns: krn_col_norms' values, or
             * krn_widen_rows' for a transposed b (its rows) */
            double *nref = malloc(n * sizeof *nref);
            if (in.bnorms && !in.tb)
                CHECK(krn_col_norms(&ref, nref, bf, k, n) == 0);
            if (in.bnorms && in.tb)
                CHECK(krn_widen_rows(&ref, NULL, nref, bft, n, k) == 0);
            if (in.bnorms)
                CHECK_MSG(count_diff(nwant, nref, n) == 0, "%zu x %zu x %zu variant %d: column norms differ",
                          m, n, k, variant);
            free(nref);
            const krn_cpu_gemm_kind kinds[] = {KRN_CPU_GEMM_C, KRN_CPU_GEMM_AVX2, KRN_CPU_GEMM_AVX512};
            for (int isa = KRN_GEMM_ISA_C; isa <= (int)best; isa++) {
                krn_cpu own = {KRN_BACKEND_CPU, 0, 2, kinds[isa], pool};
                if (in.bnorms)
                    in.bnorms = ngot;
                CHECK(krn_chunked_gemm_in(&own, got, &in, m, n, k) == 0);
                size_t bad = count_diff(got, want, m * n);
                CHECK_MSG(bad == 0, "%zu x %zu x %zu variant %d %s: %zu outputs differ from %s", m, n, k, variant,
                          krn_gemm_isa_name(isa), bad, blas_comparable() ? "OpenBLAS" : "the C path");
                if (in.bnorms)
                    CHECK(count_diff(ngot, nwant, n) == 0);
                if (in.bnorms)
                    in.bnorms = nwant;
            }
        }
        free(a), free(bf), free(old), free(bd), free(want), free(got), free(nwant), free(ngot);
        free(bft), free(bdt), free(at), free(doc);
    }
    krn_pool_free(pool);
}

/* OVT_GEMM picks the cpu backend's products; a bad value is refused with a
 * message that names the variable and the values it takes. */
static void test_env(void)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_PLAIN, .grid_bits = 32, .threads = 1};
    krn_ctx *ctx = NULL;
    CHECK(krn_ctx_new(&ctx, &cfg) == 0);
    krn_cpu be;
    setenv("OVT_GEMM", "blas", 1);
    CHECK(krn_cpu_from_ctx(ctx, &be) == 0 && be.gemm == KRN_CPU_GEMM_BLAS);
    setenv("OVT_GEMM", "c", 1);
    CHECK(krn_cpu_from_ctx(ctx, &be) == 0 && be.gemm == KRN_CPU_GEMM_C);
    CHECK(krn_cpu_gemm_isa(&be) == KRN_GEMM_ISA_C);
    setenv("OVT_GEMM", "fast", 1);
    CHECK(krn_cpu_from_ctx(ctx, &be) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "OVT_GEMM=fast") && strstr(ovt_errmsg(), "blas"));
    unsetenv("OVT_GEMM");
    CHECK(krn_cpu_from_ctx(ctx, &be) == 0 && be.gemm == KRN_CPU_GEMM_BEST);
    CHECK(krn_cpu_gemm_isa(&be) == krn_gemm_isa_best());
    krn_ctx_free(ctx);
}

/* krn_colsum_values (eight columns at a time on the cpu backend) against
 * the order it documents written out here as scalar loops, and against
 * krn_chunked_dot column by column: N below, at and past a chunk and not a
 * multiple of 4, column counts and starts that are not multiples of 8,
 * terms of mixed sign and magnitude so that any other order shows. */
static double colsum_documented(const double *m, size_t N, size_t C, size_t j, float acc)
{
    double s = 0.0;
    for (size_t k0 = 0; k0 < N; k0 += KRN_GEMM_CHUNK) {
        size_t kc = N - k0 < KRN_GEMM_CHUNK ? N - k0 : KRN_GEMM_CHUNK;
        double c[4] = {0.0, 0.0, 0.0, 0.0};
        size_t k = 0;
        for (; k + 4 <= kc; k += 4)
            for (int l = 0; l < 4; l++)
                c[l] = c[l] + m[(k0 + k + (size_t)l) * C + j];
        for (; k < kc; k++)
            c[0] = c[0] + m[(k0 + k) * C + j];
        double part = (c[0] + c[1]) + (c[2] + c[3]);
        s = k0 == 0 ? part : s + part;
    }
    return s + (double)acc;
}

static void test_colsum(const krn_cpu *be)
{
    static const size_t Ns[] = {1, 3, 4, 127, 128, 129, 300, 513};
    static const size_t Cs[] = {7, 8, 77};
    size_t bad = 0, cases = 0, differs = 0;
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
        for (size_t b = 0; b < sizeof Cs / sizeof *Cs; b++) {
            size_t N = Ns[a], C = Cs[b];
            double *m = malloc(N * C * sizeof *m), *x = malloc(C * sizeof *x);
            float *acc = malloc(C * sizeof *acc);
            for (size_t i = 0; i < N * C; i++) {
                uint64_t r = krn_rng_u64(5, N, KRN_RNG_TEST, i);
                m[i] = ldexp((double)(r >> 11) * 0x1p-53 - 0.5, (int)(r % 40) - 20);
            }
            for (size_t j = 0; j < C; j++)
                acc[j] = (float)ldexp(1.0, (int)j % 7 - 3);
            for (size_t j0 = 0; j0 < 3 && j0 < C; j0++) {
                krn_colsum_values(be, m, N, C, acc, j0, C, x);
                for (size_t j = j0; j < C; j++) {
                    double want = colsum_documented(m, N, C, j, acc[j]);
                    double lib = krn_chunked_dot(be, m + j, (ptrdiff_t)C, NULL, 0, N) + (double)acc[j];
                    bad += x[j] != want || lib != want;
                    /* the same terms summed row after row, to see that order matters here */
                    double seq = 0.0;
                    for (size_t k = 0; k < N; k++)
                        seq += m[k * C + j];
                    differs += seq + (double)acc[j] != want;
                    cases++;
                }
            }
            free(m);
            free(x);
            free(acc);
        }
    CHECK_MSG(bad == 0, "%zu of %zu column sums differ from the documented order", bad, cases);
    CHECK_MSG(differs > cases / 10, "only %zu of %zu sums depend on the order: the data does not test it", differs,
              cases);
}

int main(void)
{
    /* as in every op: the cpu backend sets OpenBLAS to one thread (its
     * threaded DGEMM splits C differently, so its last-row order moves) */
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_PLAIN, .grid_bits = 32, .threads = 1};
    krn_ctx *ctx = NULL;
    krn_cpu be;
    unsetenv("OVT_GEMM");
    CHECK(krn_ctx_new(&ctx, &cfg) == 0 && krn_cpu_from_ctx(ctx, &be) == 0);
    krn_ctx_free(ctx);
    CHECK_RUN(test_colsum(&be));
    CHECK_RUN(test_block_bits());
    CHECK_RUN(test_block_add());
    CHECK_RUN(test_chunked_paths());
    CHECK_RUN(test_env());
    return check_done();
}
