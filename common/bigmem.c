#define _DEFAULT_SOURCE
#include "common/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* MADV_POPULATE_WRITE is Linux 5.14's; older headers lack the name, and an
 * older kernel answers EINVAL, which sends us to the fallback below. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Makes every page of [p, p + len) present and writable now, in one system
 * call, so that the step which uses the buffer takes no page faults on it.
 * Measured on this project's machines (docs/bench-trainer.md, "The
 * arbiter's re-execution against a warm step"): populating 1.1 GB of 4 KB
 * pages this way takes 0.3 to 0.55 s; the same bytes faulted in 2 MB huge
 * pages (MADV_HUGEPAGE, then first touch or populate) 2.5 to 3.2 s, and in
 * 4 KB pages one fault at a time 1.4 s; a second thread populating half of
 * it gained nothing. Where the kernel cannot populate, huge pages are
 * asked for instead, so a first touch is one fault per 2 MB. Advice only:
 * if both are refused the pages fault in as usual. */
static void populate(void *p, size_t len)
{
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
        return;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE);
#endif
}

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
    populate(p, rounded);
    return p;
}

void *ovt_big_calloc(size_t count, size_t size)
{
    void *p = ovt_big_alloc(count, size);
    if (p)
        memset(p, 0, count * size);
    return p;
}
