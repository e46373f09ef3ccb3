/* The sites' fast path (site_internal.h): every element is rounded on the
 * bits of its double (krn_round_fast, grid_bits.h), which also measures its
 * distance to the midpoint of its own grid interval; only the elements it
 * cannot settle (within the band of a midpoint, a band wide compared with
 * the grid step, zero, subnormal, near overflow, non-finite, exact ties of
 * a banded site) are handed to the slow path (site_slow.c). */
#include "kernels/site_internal.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/grid_bits.h"
#include "kernels/vec.h"

/* AVX-512F, AVX2 and baseline clones (KRN_VEC_CLONES): all do the same
 * exact integer and IEEE operations, so they give the same bits. */
KRN_VEC_CLONES
static void round_block(const double *restrict x, const double *restrict tau, float *restrict out,
                        uint8_t *restrict flag, size_t len, int b)
{
    if (tau != NULL) {
        for (size_t j = 0; j < len; j++)
            flag[j] = krn_round_fast(x[j], tau[j], &out[j], b);
    } else if (b == 32) {
        /* a zero band on the FP32 grid: in the normal range the conversion
         * rounds to nearest even, as krn_round_fast_device does with its
         * integers, and zeros become +0; subnormal, near-overflow and
         * non-finite values take the slow path (a third of the time of the
         * integer version: AdamW alone rounds 3 x 124M such values a step) */
        for (size_t j = 0; j < len; j++) {
            double ax = fabs(x[j]);
            out[j] = (float)x[j] + 0.0f; /* -0 + +0 is +0; no other value changes */
            int settled = ((ax >= 0x1p-126) & (ax < 0x1p127)) | (ax == 0.0); /* false for NaN */
            flag[j] = (uint8_t)(settled ^ 1);
        }
    } else {
        /* a zero band: exact ties go to even and zeros to +0 here, as the
         * slow path would (krn_round_fast_device); only odd ranges are left */
        for (size_t j = 0; j < len; j++)
            flag[j] = krn_round_fast_device(x[j], 0.0, &out[j], b);
    }
}

/* Offsets of the nonzero flags, eight at a time where all are zero. */
static size_t collect_flags(const uint8_t *flag, size_t len, uint32_t *cand)
{
    size_t nc = 0, j = 0;
    for (; j + 8 <= len; j += 8) {
        uint64_t w;
        memcpy(&w, flag + j, sizeof w);
        if (w == 0)
            continue;
        for (size_t k = j; k < j + 8; k++) {
            cand[nc] = (uint32_t)k;
            nc += flag[k];
        }
    }
    for (; j < len; j++) {
        cand[nc] = (uint32_t)j;
        nc += flag[j];
    }
    return nc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SITE_AVX512 1

/* round_block's banded loop (krn_round_fast, tau != NULL) and its zero-band
 * FP32 loop (tau == NULL, b == 32) eight elements per instruction, the flags
 * kept as mask bits and written out as offsets (collect_flags' cand). The
 * same integer and IEEE operations in the same order, so the same outputs
 * and the same flags; test_site checks both against the portable loops.
 * len is a multiple of 8. Returns the number of offsets written. */
__attribute__((target("avx512f"))) static size_t
round_cand_avx512(const double *restrict x, const double *restrict tau, float *restrict out,
                  uint32_t *restrict cand, size_t len, int b)
{
    const int drop = 61 - b;
    const uint64_t m = (UINT64_C(1) << drop) - 1;
    const __m512i sign = _mm512_set1_epi64((long long)KRN_SIGN64);
    const __m512i mant = _mm512_set1_epi64((long long)KRN_MANT64);
    const __m512i mask = _mm512_set1_epi64((long long)m);
    const __m512i below_half = _mm512_set1_epi64((long long)(m >> 1));
    const __m512i half = _mm512_set1_epi64((long long)(UINT64_C(1) << (drop - 1)));
    const __m512i one = _mm512_set1_epi64(1);
    const __m128i shift = _mm_cvtsi32_si128(drop);
    const __m512d step_scale = _mm512_set1_pd(0x1p-52 * (double)(UINT64_C(1) << drop));
    const __m512d lo = _mm512_set1_pd(0x1p-126), hi = _mm512_set1_pd(0x1p127);
    const __m512d four = _mm512_set1_pd(4.0), zero = _mm512_setzero_pd();
    size_t nc = 0;
    for (size_t j = 0; j < len; j += 8) {
        __m512d xv = _mm512_loadu_pd(x + j);
        __m512i u = _mm512_castpd_si512(xv);
        __m512i a = _mm512_andnot_si512(sign, u);
        __m512d ax = _mm512_castsi512_pd(a);
        __mmask8 normal = _mm512_cmp_pd_mask(ax, lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(ax, hi, _CMP_LT_OQ);
        unsigned flag;
        if (tau != NULL) {
            __m512d t = _mm512_loadu_pd(tau + j);
            if (b == 32) {
                /* in the normal range the conversion rounds to nearest even
                 * as the integer rounding does; other lanes are flagged */
                _mm256_storeu_ps(out + j, _mm512_cvtpd_ps(xv));
            } else {
                __m512i lsb = _mm512_and_si512(_mm512_srl_epi64(a, shift), one);
                __m512i r = _mm512_andnot_si512(mask, _mm512_add_epi64(_mm512_add_epi64(a, below_half), lsb));
                __m512i rs = _mm512_or_si512(r, _mm512_and_si512(u, sign));
                _mm256_storeu_ps(out + j, _mm512_cvtpd_ps(_mm512_castsi512_pd(rs)));
            }
            __m512d mid = _mm512_castsi512_pd(_mm512_or_si512(_mm512_andnot_si512(mask, a), half));
            __m512d d = _mm512_castsi512_pd(
                _mm512_andnot_si512(sign, _mm512_castpd_si512(_mm512_sub_pd(ax, mid))));
            __m512d q = _mm512_mul_pd(_mm512_castsi512_pd(_mm512_andnot_si512(mant, a)), step_scale);
            unsigned plain_zero = _mm512_cmpeq_epi64_mask(u, _mm512_setzero_si512()) &
                                  _mm512_cmp_pd_mask(t, zero, _CMP_EQ_OQ);
            unsigned near = _mm512_cmp_pd_mask(d, t, _CMP_LE_OQ);
            unsigned wide = _mm512_cmp_pd_mask(_mm512_mul_pd(four, t), q, _CMP_GE_OQ);
            unsigned bad = _mm512_cmp_pd_mask(t, zero, _CMP_NGE_UQ); /* !(t >= 0) */
            flag = ((~(unsigned)normal | near | wide | bad) & ~plain_zero) & 0xffu;
        } else {
            __m256 f = _mm256_add_ps(_mm512_cvtpd_ps(xv), _mm256_setzero_ps()); /* -0 becomes +0 */
            _mm256_storeu_ps(out + j, f);
            unsigned settled = normal | _mm512_cmp_pd_mask(ax, zero, _CMP_EQ_OQ);
            flag = ~settled & 0xffu;
        }
        while (flag != 0) {
            cand[nc++] = (uint32_t)(j + (size_t)__builtin_ctz(flag));
            flag &= flag - 1;
        }
    }
    return nc;
}
#endif

/* Testing only: the portable loops even where the AVX-512 one would run. */
static bool site_portable;

void krn_site_force_portable(bool on)
{
    site_portable = on;
}

/* Rounds x[0 .. len) into out as round_block does and writes the offsets of
 * the elements it flags to cand, in increasing order; returns how many. */
size_t krn_site_round_cands(const double *restrict x, const double *restrict tau, float *restrict out,
                            uint8_t *restrict flag, uint32_t *restrict cand, size_t len, int b)
{
    size_t nc = 0, j = 0;
#ifdef SITE_AVX512
    if ((tau != NULL || b == 32) && !site_portable && __builtin_cpu_supports("avx512f")) {
        j = len & ~(size_t)7;
        nc = round_cand_avx512(x, tau, out, cand, j, b);
    }
#endif
    if (j < len) {
        round_block(x + j, tau != NULL ? tau + j : NULL, out + j, flag, len - j, b);
        size_t more = collect_flags(flag, len - j, cand + nc);
        for (size_t k = nc; k < nc + more; k++)
            cand[k] += (uint32_t)j;
        nc += more;
    }
    return nc;
}
