#ifndef OVT_KERNELS_PARALLEL_H
#define OVT_KERNELS_PARALLEL_H

/* Internal to kernels/: the ops' loops on the ctx's threads (the cpu
 * backend's pool, pool.h), or on the calling thread in order (ref and
 * shuffle). */

#include <stddef.h>

#include "common/err.h"
#include "kernels/cpu/backend.h"

/* fn(arg, c) for every c < nchunks on be->pool, the ctx's threads (the cpu
 * backend; ref and shuffle, and a krn_cpu without a pool, run every chunk
 * on the calling thread in order), chunks claimed in any order (pool.h).
 * Returns 0: the pool was made when the ctx lent it (krn_cpu_from_ctx). */
int krn_parallel(const krn_cpu *be, size_t nchunks, void (*fn)(void *arg, size_t chunk),
                 void *arg) OVT_MUST_USE;

/* fn(arg, i0, i1) for consecutive ranges [i0, i1) of `per` elements (the
 * last one shorter) covering [0, n), on krn_parallel: for loops whose
 * elements are independent (one thread, in order, on ref and shuffle, so
 * the shuffle backend's draws come in the same order as a plain loop's). */
int krn_parallel_ranges(const krn_cpu *be, size_t n, size_t per,
                        void (*fn)(void *arg, size_t i0, size_t i1), void *arg) OVT_MUST_USE;

#endif
