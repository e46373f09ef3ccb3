/* The ops' buffers (alloc.h) and their per-thread scratch's release (ops.h). */
#include "kernels/alloc.h"

#include <stdint.h>

#include "common/bigmem.h"
#include "common/err.h"
#include "kernels/ops.h"
#include "kernels/scratch.h"

void krn_ops_release(void)
{
    krn_scratch_release();
}

double *krn_doubles(size_t n, const char *what)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX / sizeof(double)) {
        ovt_fail(OVT_ENOMEM, "%s: %zu doubles overflow the address space", what, n);
        return NULL;
    }
    double *p = ovt_big_alloc(n, sizeof(double));
    if (!p)
        ovt_fail(OVT_ENOMEM, "%s: out of memory allocating %zu doubles", what, n);
    return p;
}

float *krn_floats(size_t n, const char *what)
{
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX / sizeof(float)) {
        ovt_fail(OVT_ENOMEM, "%s: %zu floats overflow the address space", what, n);
        return NULL;
    }
    float *p = ovt_big_alloc(n, sizeof(float));
    if (!p)
        ovt_fail(OVT_ENOMEM, "%s: out of memory allocating %zu floats", what, n);
    return p;
}
