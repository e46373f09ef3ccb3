#ifndef OVT_KERNELS_ARGCHECK_H
#define OVT_KERNELS_ARGCHECK_H

/* Internal to kernels/: the argument checks the ops share. */

#include <stddef.h>

#include "common/err.h"

/* Argument checks shared by the ops: 0, or OVT_EINVAL naming the op. */
int krn_check_ptr(const char *op, const char *what, const void *p) OVT_MUST_USE;
int krn_check_dims(const char *op, size_t a, size_t b, size_t *product) OVT_MUST_USE;

#endif
