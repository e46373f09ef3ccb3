/* The CPU backends' tanh (kernels/cpu/backend.h): fdlibm's algorithm, with
 * the fused multiply-adds exactly where glibc 2.36's x86-64 build for FMA
 * machines has them (its __expm1_fma, read from the disassembly), so that on
 * such a machine it returns glibc's tanh bit for bit; and the same on every
 * other machine, since it depends on no library. krn_tanh_array computes
 * eight at a time with AVX-512F where the CPU has it: the same IEEE
 * operations per element, so the same values (test_tanh checks both
 * against each other, against glibc where glibc is that build, and against
 * a long double reference within KRN_LIBM_ULP).
 *
 * tanh(x), |x| < 22, with E(y) = expm1(y):
 *   |x| < 2^-55     x * (1 + x)
 *   |x| < 1         -E(-2|x|) / (E(-2|x|) + 2)
 *   otherwise       1 - 2 / (E(2|x|) + 2)
 * and the sign of x; +-1 from 22 on. E reduces y = k ln2 + r (hi - lo, with
 * c the rounding error of hi - lo), evaluates fdlibm's rational
 * approximation on r and scales by 2^k (fdlibm's s_expm1.c, whose
 * derivation it follows). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/backend.h"
#include "kernels/grid_bits.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TANH_AVX512 1
#endif

/* fdlibm's constants (bits as glibc has them). */
#define LN2_HI 6.93147180369123816490e-01 /* 0x3fe62e42fee00000 */
#define LN2_LO 1.90821492927058770002e-10 /* 0x3dea39ef35793c76 */
#define INVLN2 1.44269504088896338700e+00 /* 0x3ff71547652b82fe */
#define Q1 -3.33333333333331316428e-02    /* 0xbfa11111111110f4 */
#define Q2 1.58730158725481460165e-03     /* 0x3f5a01a019fe5585 */
#define Q3 -7.93650757867487942473e-05    /* 0xbf14ce199eaadbb7 */
#define Q4 4.00821782732936239552e-06     /* 0x3ed0cfca86e65239 */
#define Q5 -2.01099218183624371326e-07    /* 0xbe8afdb76e09c32d */

/* expm1(y) for 2^-54 <= |y| < 709.78 (every argument tanh passes it). */
static double expm1_mid(double y)
{
    uint32_t hx = (uint32_t)(krn_double_bits(y) >> 32) & 0x7fffffffu;
    int neg = y < 0.0;
    double x = y, c = 0.0, hi, lo;
    int k = 0;
    if (hx > 0x3fd62e42u) { /* |y| > ln2 / 2 */
        if (hx < 0x3ff0a2b2u) { /* and < 3 ln2 / 2 */
            hi = neg ? y + LN2_HI : y - LN2_HI;
            lo = neg ? -LN2_LO : LN2_LO;
            k = neg ? -1 : 1;
        } else {
            k = (int)(INVLN2 * y + (neg ? -0.5 : 0.5)); /* glibc: not fused */
            double t = k;
            hi = fma(-t, LN2_HI, y);
            lo = t * LN2_LO;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    }
    double hfx = x * 0.5;
    double hxs = x * hfx;
    double r2 = fma(hxs, Q3, Q2), r3 = fma(hxs, Q5, Q4), r1 = fma(hxs, Q1, 1.0);
    double h2 = hxs * hxs, h4 = h2 * h2;
    double rr = fma(h4, r3, fma(h2, r2, r1));
    double t = fma(-rr, hfx, 3.0);
    double e = ((rr - t) / fma(-x, t, 6.0)) * hxs;
    if (k == 0)
        return x - fma(e, x, -hxs);
    e = fma(e - c, x, -c) - hxs;
    if (k == -1)
        return fma(0.5, x - e, -0.5);
    if (k == 1)
        return x < -0.25 ? (e - (x + 0.5)) * -2.0 : fma(x - e, 2.0, 1.0);
    uint64_t scale = (uint64_t)(int64_t)k << 52; /* k added to the exponent */
    if (k <= -2 || k > 56)
        return krn_bits_double(krn_double_bits(1.0 - (e - x)) + scale) - 1.0;
    if (k < 20) {
        double t1 = krn_bits_double((uint64_t)(0x3ff00000u - (0x200000u >> k)) << 32); /* 1 - 2^-k */
        return krn_bits_double(krn_double_bits(t1 - (e - x)) + scale);
    }
    double y1 = (x - (e + krn_bits_double((uint64_t)(0x3ff - k) << 52))) + 1.0;
    return krn_bits_double(krn_double_bits(y1) + scale);
}

double krn_tanh(double x)
{
    uint32_t ix = (uint32_t)(krn_double_bits(x) >> 32) & 0x7fffffffu;
    if (ix >= 0x7ff00000u)
        return x != x ? x + x : (x > 0 ? 1.0 : -1.0);
    double z;
    if (ix >= 0x40360000u) /* |x| >= 22 */
        z = 1.0;
    else if (ix < 0x3c800000u) /* |x| < 2^-55, and +-0 */
        return x * (1.0 + x);
    else if (ix < 0x3ff00000u) { /* |x| < 1 */
        double t = expm1_mid(fabs(x) * -2.0);
        z = -t / (t + 2.0);
    } else
        z = 1.0 - 2.0 / (expm1_mid(fabs(x) + fabs(x)) + 2.0);
    return x < 0.0 ? -z : z;
}

#ifdef TANH_AVX512
/* krn_tanh of eight lanes, each computed as krn_tanh does. Lanes it does
 * not settle (NaN, infinities, and expm1_mid's k = 1, which tanh's
 * arguments never reach) are set in *rest for the caller. Every branch of
 * krn_tanh and expm1_mid that the other lanes reach is computed for all
 * lanes and blended by masks. */
__attribute__((target("avx512f"))) static __m512d tanh8(__m512d xv, __mmask8 *rest)
{
    const __m512i sign = _mm512_set1_epi64((long long)UINT64_C(0x8000000000000000));
    const __m512d one = _mm512_set1_pd(1.0), two = _mm512_set1_pd(2.0), half = _mm512_set1_pd(0.5);
    __m512i xb = _mm512_castpd_si512(xv);
    __m512d ax = _mm512_castsi512_pd(_mm512_andnot_si512(sign, xb));
    __mmask8 finite = _mm512_cmp_pd_mask(ax, _mm512_set1_pd(INFINITY), _CMP_LT_OQ);
    __mmask8 sat = _mm512_cmp_pd_mask(ax, _mm512_set1_pd(22.0), _CMP_GE_OQ);
    __mmask8 tiny = _mm512_cmp_pd_mask(ax, _mm512_set1_pd(0x1p-55), _CMP_LT_OQ);
    __mmask8 small = _mm512_cmp_pd_mask(ax, one, _CMP_LT_OQ);

    /* expm1_mid's argument: -2|x| below 1, 2|x| from 1 on */
    __m512d y = _mm512_mask_mul_pd(_mm512_add_pd(ax, ax), small, ax, _mm512_set1_pd(-2.0));
    __m512i hy = _mm512_srli_epi64(_mm512_andnot_si512(sign, _mm512_castpd_si512(y)), 32);
    __mmask8 reduce = _mm512_cmpgt_epu64_mask(hy, _mm512_set1_epi64(0x3fd62e42));
    __mmask8 near = reduce & _mm512_cmplt_epu64_mask(hy, _mm512_set1_epi64(0x3ff0a2b2));
    /* k, hi and lo: near (y < 0 there: y >= 2 otherwise) k = -1 */
    __m512d kd = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(INVLN2), y),
                               _mm512_mask_blend_pd(small, half, _mm512_set1_pd(-0.5)));
    __m512i k = _mm512_cvtepi32_epi64(_mm512_cvttpd_epi32(kd));
    k = _mm512_mask_blend_epi64(near, k, _mm512_set1_epi64(-1));
    k = _mm512_mask_blend_epi64(reduce, _mm512_setzero_si512(), k);
    __m512d t = _mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(k));
    __m512d hi = _mm512_fnmadd_pd(t, _mm512_set1_pd(LN2_HI), y);
    __m512d lo = _mm512_mul_pd(t, _mm512_set1_pd(LN2_LO));
    hi = _mm512_mask_add_pd(hi, near, y, _mm512_set1_pd(LN2_HI));
    lo = _mm512_mask_mov_pd(lo, near, _mm512_set1_pd(-LN2_LO));
    __m512d x = _mm512_mask_sub_pd(y, reduce, hi, lo);
    __m512d c = _mm512_maskz_sub_pd(reduce, _mm512_sub_pd(hi, x), lo);

    /* the rational approximation on x */
    __m512d hfx = _mm512_mul_pd(x, half);
    __m512d hxs = _mm512_mul_pd(x, hfx);
    __m512d r2 = _mm512_fmadd_pd(hxs, _mm512_set1_pd(Q3), _mm512_set1_pd(Q2));
    __m512d r3 = _mm512_fmadd_pd(hxs, _mm512_set1_pd(Q5), _mm512_set1_pd(Q4));
    __m512d r1 = _mm512_fmadd_pd(hxs, _mm512_set1_pd(Q1), one);
    __m512d h2 = _mm512_mul_pd(hxs, hxs), h4 = _mm512_mul_pd(h2, h2);
    __m512d rr = _mm512_fmadd_pd(h4, r3, _mm512_fmadd_pd(h2, r2, r1));
    __m512d tt = _mm512_fnmadd_pd(rr, hfx, _mm512_set1_pd(3.0));
    __m512d e = _mm512_mul_pd(_mm512_div_pd(_mm512_sub_pd(rr, tt), _mm512_fnmadd_pd(x, tt, _mm512_set1_pd(6.0))), hxs);

    /* scaled by 2^k */
    __m512d e0 = _mm512_sub_pd(x, _mm512_fmsub_pd(e, x, hxs));                   /* k = 0 */
    __m512d e2 = _mm512_sub_pd(_mm512_fmsub_pd(_mm512_sub_pd(e, c), x, c), hxs);
    __m512d em1 = _mm512_fmsub_pd(half, _mm512_sub_pd(x, e2), half);              /* k = -1 */
    __m512i scale = _mm512_slli_epi64(k, 52);
    __m512d emx = _mm512_sub_pd(e2, x);
    __m512d ebig = _mm512_sub_pd(
        _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(_mm512_sub_pd(one, emx)), scale)), one);
    __m512i tk = _mm512_slli_epi64(
        _mm512_sub_epi64(_mm512_set1_epi64(0x3ff00000), _mm512_srlv_epi64(_mm512_set1_epi64(0x200000), k)), 32);
    __m512d emid = _mm512_castsi512_pd(
        _mm512_add_epi64(_mm512_castpd_si512(_mm512_sub_pd(_mm512_castsi512_pd(tk), emx)), scale));
    __m512d tinv = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_sub_epi64(_mm512_set1_epi64(0x3ff), k), 52));
    __m512d ehi = _mm512_castsi512_pd(_mm512_add_epi64(
        _mm512_castpd_si512(_mm512_add_pd(_mm512_sub_pd(x, _mm512_add_pd(e2, tinv)), one)), scale));
    __mmask8 k_lo = _mm512_cmplt_epi64_mask(k, _mm512_set1_epi64(20));
    __mmask8 k_big = _mm512_cmple_epi64_mask(k, _mm512_set1_epi64(-2)) |
                     _mm512_cmpgt_epi64_mask(k, _mm512_set1_epi64(56));
    __m512d em = _mm512_mask_blend_pd(k_lo, ehi, emid);
    em = _mm512_mask_blend_pd(k_big, em, ebig);
    em = _mm512_mask_blend_pd(_mm512_cmpeq_epi64_mask(k, _mm512_set1_epi64(-1)), em, em1);
    em = _mm512_mask_blend_pd(_mm512_cmpeq_epi64_mask(k, _mm512_setzero_si512()), em, e0);

    /* tanh from expm1, with the sign of x */
    __m512d den = _mm512_add_pd(em, two);
    __m512d zs = _mm512_div_pd(_mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(em), sign)), den);
    __m512d zl = _mm512_sub_pd(one, _mm512_div_pd(two, den));
    __m512d z = _mm512_mask_blend_pd(small, zl, zs);
    z = _mm512_mask_blend_pd(sat, z, one);
    z = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(z), _mm512_and_si512(xb, sign)));
    z = _mm512_mask_mul_pd(z, tiny, xv, _mm512_add_pd(one, xv));
    __mmask8 k_one = _mm512_cmpeq_epi64_mask(k, _mm512_set1_epi64(1)) & ~sat & ~tiny;
    *rest = (__mmask8)(~finite | k_one);
    return z;
}

__attribute__((target("avx512f"))) static void tanh_avx512(double *x, size_t n)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __mmask8 rest;
        __m512d z = tanh8(_mm512_loadu_pd(x + i), &rest);
        if (rest != 0) {
            double keep[8];
            _mm512_storeu_pd(keep, _mm512_loadu_pd(x + i));
            _mm512_storeu_pd(x + i, z);
            for (int l = 0; l < 8; l++)
                if (rest >> l & 1)
                    x[i + (size_t)l] = krn_tanh(keep[l]);
        } else {
            _mm512_storeu_pd(x + i, z);
        }
    }
}
#endif

/* Testing only: krn_tanh_array without its AVX-512 loop. */
static bool tanh_portable;

void krn_tanh_force_portable(bool on)
{
    tanh_portable = on;
}

void krn_tanh_array(double *x, size_t n)
{
    size_t i = 0;
#ifdef TANH_AVX512
    if (!tanh_portable && __builtin_cpu_supports("avx512f")) {
        i = n & ~(size_t)7;
        tanh_avx512(x, i);
    }
#endif
    for (; i < n; i++)
        x[i] = krn_tanh(x[i]);
}
