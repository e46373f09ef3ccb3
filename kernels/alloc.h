#ifndef OVT_KERNELS_ALLOC_H
#define OVT_KERNELS_ALLOC_H

/* Internal to kernels/: the ops' FP64 and FP32 buffers (krn_ops_release,
 * in ops.h, hands back their per-thread scratch). */

#include <stddef.h>

/* malloc of n doubles or floats with an overflow check; NULL after setting
 * an OVT_ENOMEM message naming `what`. */
double *krn_doubles(size_t n, const char *what);
float *krn_floats(size_t n, const char *what);

#endif
