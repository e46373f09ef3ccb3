/* Bands (band.h): tau_i = base_i + rel * |x_i|, evaluated in the order the
 * contract fixes. */
#include "kernels/band.h"

#include <math.h>

#include "common/err.h"
#include "kernels/vec.h"

bool krn_band_is_zero(const krn_band *band)
{
    return band == NULL || (band->kind == KRN_BAND_ZERO && band->rel == 0.0);
}

int krn_band_check(const krn_band *band, size_t n)
{
    if (krn_band_is_zero(band))
        return 0;
    switch (band->kind) {
    case KRN_BAND_ZERO:
    case KRN_BAND_CONST:
        return 0;
    case KRN_BAND_ARRAY:
        if (band->a == NULL)
            return ovt_fail(OVT_EINVAL, "KRN_BAND_ARRAY without an array");
        return 0;
    case KRN_BAND_OUTER:
        if (band->a == NULL || band->b == NULL || band->cols == 0 || n % band->cols != 0)
            return ovt_fail(OVT_EINVAL, "KRN_BAND_OUTER needs row and column arrays and cols "
                                        "dividing n (n = %zu, cols = %zu)", n, band->cols);
        return 0;
    }
    return ovt_fail(OVT_EINVAL, "unknown band kind %d", (int)band->kind);
}

/* tau[j] for elements i0 .. i0+len-1, whose values are xb[0 .. len-1]:
 *   base = 0 | scale | scale * a[i] | (scale * a[i / cols]) * b[i % cols]
 *   tau  = base + rel * |x[i]|
 * evaluated in exactly this order (docs/numeric-contract.md). */
KRN_VEC_CLONES
void krn_band_fill(const krn_band *band, const double *restrict xb, size_t i0, size_t len,
                      double *restrict tau)
{
    const double scale = band->scale; /* locals: tau may not alias the band */
    switch (band->kind) {
    case KRN_BAND_ZERO:
        for (size_t j = 0; j < len; j++)
            tau[j] = 0.0;
        break;
    case KRN_BAND_CONST:
        for (size_t j = 0; j < len; j++)
            tau[j] = scale;
        break;
    case KRN_BAND_ARRAY: {
        const double *restrict a = band->a + i0;
        for (size_t j = 0; j < len; j++)
            tau[j] = scale * a[j];
        break;
    }
    case KRN_BAND_OUTER: {
        size_t r = i0 / band->cols, c = i0 % band->cols;
        size_t j = 0;
        while (j < len) {
            double row = scale * band->a[r];
            size_t run = band->cols - c < len - j ? band->cols - c : len - j;
            const double *col = band->b + c;
            for (size_t k = 0; k < run; k++)
                tau[j + k] = row * col[k];
            j += run;
            c = 0;
            r++;
        }
        break;
    }
    }
    if (band->rel != 0.0) {
        double rel = band->rel;
        for (size_t j = 0; j < len; j++)
            tau[j] = tau[j] + rel * fabs(xb[j]);
    }
}

double krn_band_at(const krn_band *band, const double *x, size_t i)
{
    double tau = 0.0;
    krn_band_fill(band, x + i, i, 1, &tau);
    return tau;
}
