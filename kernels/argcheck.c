/* The ops' argument checks (argcheck.h). */
#include "kernels/argcheck.h"

#include <stdint.h>

int krn_check_ptr(const char *op, const char *what, const void *p)
{
    if (!p)
        return ovt_fail(OVT_EINVAL, "%s: %s is NULL", op, what);
    return 0;
}

int krn_check_dims(const char *op, size_t a, size_t b, size_t *product)
{
    if (a == 0 || b == 0)
        return ovt_fail(OVT_EINVAL, "%s: zero dimension (%zu x %zu)", op, a, b);
    if (a > SIZE_MAX / 16 / b)
        return ovt_fail(OVT_EINVAL, "%s: dimensions %zu x %zu overflow", op, a, b);
    *product = a * b;
    return 0;
}
