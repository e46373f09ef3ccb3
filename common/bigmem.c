#define _DEFAULT_SOURCE
#include "common/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *ovt_big_alloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t bytes = count * size;
    if (bytes < HUGE_PAGE)
        return malloc(bytes ? bytes : 1);
    void *p = NULL;
    size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (posix_memalign(&p, HUGE_PAGE, rounded))
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: 4 KB pages if refused */
#endif
    return p;
}

void *ovt_big_calloc(size_t count, size_t size)
{
    void *p = ovt_big_alloc(count, size);
    if (p)
        memset(p, 0, count * size);
    return p;
}
