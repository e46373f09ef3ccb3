/* The cpu backend's own chunked GEMM (gemm.h): packing, the micro-kernels
 * for AVX-512, AVX2+FMA and portable C, and OpenBLAS's last-row order.
 *
 * This file keeps -ffp-contract=off like the rest: every fused multiply-add
 * below is an explicit fma() or _mm*_fmadd_pd, the operation the order in
 * gemm.h names; nothing else is fused. */
#include "kernels/cpu/gemm.h"

#include <math.h>
#include <stdint.h>

#include "kernels/contract.h"
#include "kernels/vec.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KRN_GEMM_X86 1
#endif

/* K block of the packed operands, in chunks: each block of A (m x KC) is
 * packed once and stays in L2 while the B micro-panels (KC x NR) pass
 * through L1; one chunk keeps a 24-column B panel at 24 KiB. */
#ifndef KRN_GEMM_KC_CHUNKS
#define KRN_GEMM_KC_CHUNKS 1
#endif
#define KC ((size_t)KRN_GEMM_CHUNK * KRN_GEMM_KC_CHUNKS)

/* The micro-tile: MR rows of C by NR columns; ap is an MR-row panel of A
 * packed k-major (MR values per k), bp an NR-column panel of B packed
 * k-major (NR values per k). zero: c's old values are taken as +0 (the
 * first chunk of a product, which OpenBLAS computes with beta = 0). */
typedef void (*ukr_fn)(size_t kc, const double *restrict ap, const double *restrict bp,
                       double *restrict c, size_t ldc, bool zero);

typedef struct {
    size_t mr, nr;
    ukr_fn ukr;
} isa_desc;

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* ---- portable C: 4 x 4, fma() from libm (hardware where the CPU has it) */

static void ukr_c(size_t kc, const double *restrict ap, const double *restrict bp,
                  double *restrict c, size_t ldc, bool zero)
{
    for (size_t k0 = 0; k0 < kc; k0 += KRN_GEMM_CHUNK) {
        size_t kn = min_sz(KRN_GEMM_CHUNK, kc - k0);
        double acc[4][4] = {{0}};
        for (size_t k = k0; k < k0 + kn; k++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fma(ap[k * 4 + i], bp[k * 4 + j], acc[i][j]);
        bool z = zero && k0 == 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                c[i * ldc + j] = (z ? 0.0 : c[i * ldc + j]) + acc[i][j];
    }
}

#ifdef KRN_GEMM_X86

/* ---- AVX2 + FMA: 6 x 8, twelve ymm accumulators */

__attribute__((target("avx2,fma"))) static void ukr_avx2(size_t kc, const double *restrict ap,
                                                         const double *restrict bp,
                                                         double *restrict c, size_t ldc, bool zero)
{
    for (size_t k0 = 0; k0 < kc; k0 += KRN_GEMM_CHUNK) {
        size_t kn = min_sz(KRN_GEMM_CHUNK, kc - k0);
        __m256d acc[6][2];
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++)
            acc[i][0] = acc[i][1] = _mm256_setzero_pd();
        const double *a = ap + k0 * 6, *b = bp + k0 * 8;
        for (size_t k = 0; k < kn; k++, a += 6, b += 8) {
            __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
#pragma GCC unroll 6
            for (int i = 0; i < 6; i++) {
                __m256d ai = _mm256_broadcast_sd(a + i);
                acc[i][0] = _mm256_fmadd_pd(ai, b0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_pd(ai, b1, acc[i][1]);
            }
        }
        bool z = zero && k0 == 0;
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++)
#pragma GCC unroll 2
            for (int v = 0; v < 2; v++) {
                double *p = c + i * ldc + 4 * v;
                __m256d old = z ? _mm256_setzero_pd() : _mm256_loadu_pd(p);
                _mm256_storeu_pd(p, _mm256_add_pd(old, acc[i][v]));
            }
    }
}

/* ---- AVX-512F: 8 x 24, twenty-four zmm accumulators */

__attribute__((target("avx512f"))) static void ukr_avx512(size_t kc, const double *restrict ap,
                                                          const double *restrict bp,
                                                          double *restrict c, size_t ldc,
                                                          bool zero)
{
    for (size_t k0 = 0; k0 < kc; k0 += KRN_GEMM_CHUNK) {
        size_t kn = min_sz(KRN_GEMM_CHUNK, kc - k0);
        __m512d acc[8][3];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_pd();
        const double *a = ap + k0 * 8, *b = bp + k0 * 24;
        for (size_t k = 0; k < kn; k++, a += 8, b += 24) {
            __m512d b0 = _mm512_loadu_pd(b), b1 = _mm512_loadu_pd(b + 8);
            __m512d b2 = _mm512_loadu_pd(b + 16);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                __m512d ai = _mm512_set1_pd(a[i]);
                acc[i][0] = _mm512_fmadd_pd(ai, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_pd(ai, b1, acc[i][1]);
                acc[i][2] = _mm512_fmadd_pd(ai, b2, acc[i][2]);
            }
        }
        bool z = zero && k0 == 0;
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
#pragma GCC unroll 3
            for (int v = 0; v < 3; v++) {
                double *p = c + i * ldc + 8 * v;
                __m512d old = z ? _mm512_setzero_pd() : _mm512_loadu_pd(p);
                _mm512_storeu_pd(p, _mm512_add_pd(old, acc[i][v]));
            }
    }
}

#endif

static isa_desc desc_of(krn_gemm_isa isa)
{
#ifdef KRN_GEMM_X86
    if (isa == KRN_GEMM_ISA_AVX512)
        return (isa_desc){8, 24, ukr_avx512};
    if (isa == KRN_GEMM_ISA_AVX2)
        return (isa_desc){6, 8, ukr_avx2};
#endif
    (void)isa;
    return (isa_desc){4, 4, ukr_c};
}

krn_gemm_isa krn_gemm_isa_best(void)
{
#ifdef KRN_GEMM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return KRN_GEMM_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return KRN_GEMM_ISA_AVX2;
#endif
    return KRN_GEMM_ISA_C;
}

const char *krn_gemm_isa_name(krn_gemm_isa isa)
{
    switch (isa) {
    case KRN_GEMM_ISA_AVX512:
        return "avx512";
    case KRN_GEMM_ISA_AVX2:
        return "avx2";
    default:
        return "c";
    }
}

size_t krn_gemm_nr(krn_gemm_isa isa)
{
    return desc_of(isa).nr;
}

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

size_t krn_gemm_pack_doubles(krn_gemm_isa isa, size_t m, size_t n, size_t k)
{
    isa_desc d = desc_of(isa);
    return (round_up(m, d.mr) + round_up(n, d.nr)) * min_sz(k, KC);
}

/* dst[k * width + r] = src[r * ld + k] for r < count, k < kc, and 0 for
 * the rows count .. width: a panel gathered from count strided rows. From
 * src, or when it is NULL from the FP32 srcf, each value widened (exactly)
 * as it is packed, so an FP32 operand needs no FP64 copy of its own. */
static void gather_panel(double *restrict dst, size_t width, const double *restrict src,
                         const float *restrict srcf, size_t ld, size_t count, size_t kc)
{
    for (size_t k = 0; k < kc; k++) {
        double *d = dst + k * width;
        for (size_t r = 0; r < count; r++)
            d[r] = src ? src[r * ld + k] : (double)srcf[r * ld + k];
        for (size_t r = count; r < width; r++)
            d[r] = 0.0;
    }
}

#ifdef KRN_GEMM_X86
/* gather_panel by 4 x 4 transposes: four rows' next four values loaded as
 * four vectors, stored as four k-columns of the panel. The same values, in
 * the same places; the rest (a last group of rows, k past a multiple of 4)
 * as gather_panel does it. */
__attribute__((target("avx2"))) static void gather_panel_avx2(double *restrict dst, size_t width,
                                                              const double *restrict src,
                                                              const float *restrict srcf, size_t ld,
                                                              size_t count, size_t kc)
{
#define LOAD4(row, k) (src ? _mm256_loadu_pd(src + (row) * ld + (k)) \
                           : _mm256_cvtps_pd(_mm_loadu_ps(srcf + (row) * ld + (k))))
    size_t rows4 = count / 4 * 4, k4 = kc / 4 * 4;
    for (size_t r = 0; r < rows4; r += 4)
        for (size_t k = 0; k < k4; k += 4) {
            __m256d v0 = LOAD4(r, k), v1 = LOAD4(r + 1, k), v2 = LOAD4(r + 2, k), v3 = LOAD4(r + 3, k);
            __m256d t0 = _mm256_unpacklo_pd(v0, v1), t1 = _mm256_unpackhi_pd(v0, v1);
            __m256d t2 = _mm256_unpacklo_pd(v2, v3), t3 = _mm256_unpackhi_pd(v2, v3);
            double *d = dst + k * width + r;
            _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
            _mm256_storeu_pd(d + width, _mm256_permute2f128_pd(t1, t3, 0x20));
            _mm256_storeu_pd(d + 2 * width, _mm256_permute2f128_pd(t0, t2, 0x31));
            _mm256_storeu_pd(d + 3 * width, _mm256_permute2f128_pd(t1, t3, 0x31));
        }
#undef LOAD4
    for (size_t k = 0; k < kc; k++) {
        double *d = dst + k * width;
        for (size_t r = k < k4 ? rows4 : 0; r < count; r++)
            d[r] = src ? src[r * ld + k] : (double)srcf[r * ld + k];
        for (size_t r = count; r < width; r++)
            d[r] = 0.0;
    }
}
#endif

/* dst[k * width + r] = src[k * ld + r] for r < count, k < kc, 0 past count:
 * a panel copied from kc rows; src or srcf as for gather_panel. */
KRN_VEC_CLONES static void copy_panel(double *restrict dst, size_t width, const double *restrict src,
                                      const float *restrict srcf, size_t ld, size_t count, size_t kc)
{
    for (size_t k = 0; k < kc; k++) {
        double *d = dst + k * width;
        if (src)
            for (size_t r = 0; r < count; r++)
                d[r] = src[k * ld + r];
        else
            for (size_t r = 0; r < count; r++)
                d[r] = (double)srcf[k * ld + r];
        for (size_t r = count; r < width; r++)
            d[r] = 0.0;
    }
}

/* The count lines (rows of op(a), columns of op(b)) of an operand at k0 ..
 * k0+kc into panels of width lines, k-major, lines past count as zeros.
 * gather: a line is a row of the storage (a not transposed, b transposed),
 * gathered by transposes where the CPU has AVX2 (vec); else a line is a
 * column of the storage, copied. The operand is src, or when it is NULL
 * the FP32 srcf. */
static void pack_panels(double *restrict dst, size_t width, bool gather, const double *src,
                        const float *srcf, size_t ld, size_t count, size_t k0, size_t kc, bool vec)
{
    for (size_t p0 = 0; p0 < count; p0 += width, dst += width * kc) {
        size_t lines = min_sz(width, count - p0), at = gather ? p0 * ld + k0 : k0 * ld + p0;
        const double *s = src ? src + at : NULL;
        const float *sf = src ? NULL : srcf + at;
        if (!gather)
            copy_panel(dst, width, s, sf, ld, lines, kc);
#ifdef KRN_GEMM_X86
        else if (vec)
            gather_panel_avx2(dst, width, s, sf, ld, lines, kc);
#endif
        else
            gather_panel(dst, width, s, sf, ld, lines, kc);
    }
    (void)vec;
}

/* Where the prefetches of a krn_gemm_ahead have got to. */
typedef struct {
    const krn_gemm_ahead *ah;
    int reg;
    size_t row, off;
} ahead_cursor;

static size_t ahead_lines(const krn_gemm_ahead *ah)
{
    size_t lines = 0;
    for (int i = 0; ah && i < ah->n; i++)
        lines += ah->r[i].rows * (ah->r[i].row_bytes / 64 + 2);
    return lines;
}

/* The next `lines` cache lines of the regions, into L2. */
static void ahead_some(ahead_cursor *cur, size_t lines)
{
    while (lines && cur->ah && cur->reg < cur->ah->n) {
        const krn_gemm_region *r = &cur->ah->r[cur->reg];
        if (cur->row >= r->rows) {
            cur->reg++, cur->row = 0, cur->off = 0;
            continue;
        }
        uintptr_t p = (uintptr_t)r->base + cur->row * r->stride;
        uintptr_t q = (p & ~(uintptr_t)63) + cur->off;
        if (q >= p + r->row_bytes) {
            cur->row++, cur->off = 0;
            continue;
        }
        __builtin_prefetch((const void *)q, 0, 2);
        cur->off += 64;
        lines--;
    }
}

/* A micro-tile cut by the edge of C (rows < MR or cols < NR): through a
 * full-size buffer, so the micro-kernel is the same one. */
static void edge_tile(const isa_desc *d, size_t kc, const double *ap, const double *bp, double *c,
                      size_t ldc, size_t rows, size_t cols, bool zero)
{
    double tmp[8 * 24] = {0}; /* lanes past the edge: summed, never stored */
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            tmp[i * d->nr + j] = zero ? 0.0 : c[i * ldc + j];
    d->ukr(kc, ap, bp, tmp, d->nr, zero);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            c[i * ldc + j] = tmp[i * d->nr + j];
}

/* The last row of an odd m (see gemm.h): row r of the packed A panel ap,
 * every column of the packed B panels, chunk by chunk. Columns below
 * 4*floor(n/4) take OpenBLAS's four partial sums, the others one chain.
 * Four columns at a time so that sixteen independent chains keep the FMA
 * units busy; always inlined into each target below, where fma() is the
 * hardware instruction. */
static inline __attribute__((always_inline)) void
last_row_body(size_t mr, size_t nr, size_t kc, const double *restrict ap, size_t r,
              const double *restrict bp, double *restrict c, size_t n, bool zero)
{
    size_t n4 = n / 4 * 4;
    for (size_t k0 = 0; k0 < kc; k0 += KRN_GEMM_CHUNK) {
        size_t kn = min_sz(KRN_GEMM_CHUNK, kc - k0), k8 = kn / 8 * 8;
        bool z = zero && k0 == 0;
        for (size_t j = 0; j < n4; j += 4) {
            const double *b = bp + j / nr * nr * kc + j % nr; /* 4 columns in one panel */
            double e[4][4] = {{0}};
            for (size_t k = 0; k < k8; k += 4)
                for (size_t u = 0; u < 4; u++)
                    for (size_t q = 0; q < 4; q++)
                        e[u][q] = fma(ap[(k0 + k + u) * mr + r], b[(k0 + k + u) * nr + q], e[u][q]);
            for (size_t k = k8; k < kn; k++)
                for (size_t q = 0; q < 4; q++)
                    e[0][q] = fma(ap[(k0 + k) * mr + r], b[(k0 + k) * nr + q], e[0][q]);
            for (size_t q = 0; q < 4; q++)
                c[j + q] = (z ? 0.0 : c[j + q]) + ((e[0][q] + e[1][q]) + (e[2][q] + e[3][q]));
        }
        for (size_t j = n4; j < n; j++) {
            const double *b = bp + j / nr * nr * kc + j % nr;
            double acc = 0.0;
            for (size_t k = k0; k < k0 + kn; k++)
                acc = fma(ap[k * mr + r], b[k * nr], acc);
            c[j] = (z ? 0.0 : c[j]) + acc;
        }
    }
}

static void last_row_c(size_t mr, size_t nr, size_t kc, const double *ap, size_t r,
                       const double *bp, double *c, size_t n, bool zero)
{
    last_row_body(mr, nr, kc, ap, r, bp, c, n, zero);
}

#ifdef KRN_GEMM_X86
__attribute__((target("avx2,fma"))) static void last_row_fma(size_t mr, size_t nr, size_t kc,
                                                             const double *ap, size_t r,
                                                             const double *bp, double *c, size_t n,
                                                             bool zero)
{
    last_row_body(mr, nr, kc, ap, r, bp, c, n, zero);
}
#endif

void krn_gemm_block_ex(krn_gemm_isa isa, double *pack, double *c, size_t ldc, bool ta,
                       const double *a, size_t lda, const double *a_packed, bool tb,
                       const double *b, const float *bf, const double *b_packed, size_t ldb, size_t m,
                       size_t n, size_t k, bool first, const krn_gemm_ahead *ahead)
{
    isa_desc d = desc_of(isa);
    size_t mp = round_up(m, d.mr);
    size_t mmain = m & 1 ? m - 1 : m; /* an odd m's last row: OpenBLAS's own order */
    bool vec = isa != KRN_GEMM_ISA_C;
    /* the prefetches spread evenly over the micro-tiles of all K blocks */
    size_t tiles = (mmain + d.mr - 1) / d.mr * ((n + d.nr - 1) / d.nr) * ((k + KC - 1) / KC);
    size_t per = tiles ? ahead_lines(ahead) / tiles + 1 : 0;
    ahead_cursor cur = {.ah = ahead};
    for (size_t k0 = 0; k0 < k; k0 += KC) {
        size_t kc = min_sz(KC, k - k0);
        const double *apk = a_packed;
        const double *bpk = b_packed;
        bool zero = first && k0 == 0;
        if (!a_packed) {
            pack_panels(pack, d.mr, !ta, a, NULL, lda, m, k0, kc, vec);
            apk = pack;
        }
        if (!b_packed) {
            pack_panels(pack + mp * kc, d.nr, tb, b, bf, ldb, n, k0, kc, vec);
            bpk = pack + mp * kc;
        }
        for (size_t j = 0; j < n; j += d.nr)
            for (size_t i = 0; i < mmain; i += d.mr) {
                const double *ap = apk + i * kc, *bp = bpk + j * kc;
                size_t rows = min_sz(d.mr, mmain - i), cols = min_sz(d.nr, n - j);
                if (rows == d.mr && cols == d.nr)
                    d.ukr(kc, ap, bp, c + i * ldc + j, ldc, zero);
                else
                    edge_tile(&d, kc, ap, bp, c + i * ldc + j, ldc, rows, cols, zero);
                ahead_some(&cur, per);
            }
        if (mmain == m)
            continue;
        const double *ap = apk + mmain / d.mr * d.mr * kc;
        size_t r = mmain % d.mr;
#ifdef KRN_GEMM_X86
        if (isa != KRN_GEMM_ISA_C) {
            last_row_fma(d.mr, d.nr, kc, ap, r, bpk, c + mmain * ldc, n, zero);
            continue;
        }
#endif
        last_row_c(d.mr, d.nr, kc, ap, r, bpk, c + mmain * ldc, n, zero);
    }
    ahead_some(&cur, SIZE_MAX); /* what is left (a block of one row: no micro-tiles) */
}

void krn_gemm_block(krn_gemm_isa isa, double *pack, double *c, size_t ldc, bool ta, const double *a,
                    size_t lda, bool tb, const double *b, size_t ldb, size_t m, size_t n, size_t k,
                    bool first, const krn_gemm_ahead *ahead)
{
    krn_gemm_block_ex(isa, pack, c, ldc, ta, a, lda, NULL, tb, b, NULL, NULL, ldb, m, n, k, first, ahead);
}

size_t krn_gemm_apack_doubles(krn_gemm_isa isa, size_t m, size_t kc)
{
    return round_up(m, desc_of(isa).mr) * kc;
}

void krn_gemm_pack_a(krn_gemm_isa isa, double *dst, bool ta, const double *a, size_t lda, size_t m,
                     size_t k0, size_t kc)
{
    pack_panels(dst, desc_of(isa).mr, !ta, a, NULL, lda, m, k0, kc, isa != KRN_GEMM_ISA_C);
}

size_t krn_gemm_bpack_doubles(krn_gemm_isa isa, size_t n, size_t kc)
{
    return round_up(n, desc_of(isa).nr) * kc;
}

void krn_gemm_pack_b(krn_gemm_isa isa, double *dst, bool tb, const double *b, const float *bf,
                     size_t ldb, size_t n, size_t kc)
{
    pack_panels(dst, desc_of(isa).nr, tb, b, bf, ldb, n, 0, kc, isa != KRN_GEMM_ISA_C);
}
