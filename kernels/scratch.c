/* Per-thread scratch buffers (scratch.h). */
#include "kernels/scratch.h"

#include <stdint.h>
#include <stdlib.h>

#include "common/bigmem.h"
#include "common/err.h"

static _Thread_local struct {
    double *p;
    size_t n;
} scratch[KRN_SCRATCH_SLOTS];

double *krn_scratch(int slot, size_t n)
{
    if (n == 0)
        n = 1;
    if (scratch[slot].n >= n)
        return scratch[slot].p;
    if (n > SIZE_MAX / sizeof(double)) {
        ovt_fail(OVT_ENOMEM, "scratch buffer of %zu doubles overflows the address space", n);
        return NULL;
    }
    free(scratch[slot].p);
    scratch[slot].p = ovt_big_alloc(n, sizeof(double));
    scratch[slot].n = scratch[slot].p ? n : 0;
    if (!scratch[slot].p)
        ovt_fail(OVT_ENOMEM, "out of memory for a scratch buffer of %zu doubles", n);
    return scratch[slot].p;
}

void krn_scratch_release(void)
{
    for (int i = 0; i < KRN_SCRATCH_SLOTS; i++) {
        free(scratch[i].p);
        scratch[i].p = NULL;
        scratch[i].n = 0;
    }
}
