#ifndef OVT_BIGMEM_H
#define OVT_BIGMEM_H

/* Large buffers (a model's parameters, moments, gradients, activations) on
 * transparent huge pages where the kernel offers them on request
 * (MADV_HUGEPAGE): a 1.5 GB state is then about 750 page faults instead of
 * 390,000, and the streaming passes over it miss the TLB far less. Freed
 * with free(). NULL when out of memory (no message set). */
#include <stddef.h>

void *ovt_big_alloc(size_t count, size_t size);  /* contents undefined */
void *ovt_big_calloc(size_t count, size_t size); /* zeroed */

#endif
