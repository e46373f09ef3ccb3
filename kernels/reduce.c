/* The chunked summation order and its bands (reduce.h). */
#include "kernels/reduce.h"

#include "kernels/contract.h"

double krn_gamma(double k)
{
    return k * KRN_U / (1.0 - k * KRN_U);
}

double krn_chunked_gamma(size_t K)
{
    size_t c = K < KRN_GEMM_CHUNK ? K : KRN_GEMM_CHUNK;
    size_t n = (K + KRN_GEMM_CHUNK - 1) / KRN_GEMM_CHUNK;
    if (n == 0)
        n = 1;
    return krn_gamma((double)(c + n - 1));
}

double krn_chunked_dot(const krn_cpu *be, const double *x, ptrdiff_t incx, const double *y,
                       ptrdiff_t incy, size_t K)
{
    double s = 0;
    for (size_t k0 = 0; k0 < K; k0 += KRN_GEMM_CHUNK) {
        size_t kc = K - k0 < KRN_GEMM_CHUNK ? K - k0 : KRN_GEMM_CHUNK;
        double part = krn_cpu_dot(be, x + (ptrdiff_t)k0 * incx, incx,
                                  y ? y + (ptrdiff_t)k0 * incy : NULL, incy, kc);
        s = k0 == 0 ? part : s + part;
    }
    return s;
}

krn_band krn_band_reduction(krn_band_kind kind, size_t K, double factor, int ops)
{
    krn_band band = {0};
    band.kind = kind;
    band.scale = KRN_BAND_WIDTH * 2.0 * krn_chunked_gamma(K) * factor;
    band.rel = KRN_BAND_WIDTH * 2.0 * KRN_U * ops;
    return band;
}

krn_band krn_band_libm(void)
{
    krn_band band = {0};
    band.kind = KRN_BAND_ZERO;
    band.rel = KRN_BAND_WIDTH * 2.0 * KRN_LIBM_ULP * 0x1p-52;
    return band;
}

krn_band krn_band_exact(void)
{
    krn_band band = {0};
    band.kind = KRN_BAND_ZERO;
    return band;
}
