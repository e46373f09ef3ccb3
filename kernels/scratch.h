#ifndef OVT_KERNELS_SCRATCH_H
#define OVT_KERNELS_SCRATCH_H

/* Internal to kernels/: per-thread scratch buffers for the ops' large FP64
 * temporaries, kept and grown across calls so a step does not fault in
 * fresh pages for every op. Below the thread pool (pool.h), whose workers
 * release theirs when they stop.
 *
 * krn_scratch returns the calling thread's buffer of the slot, grown to at
 * least n doubles; it stays valid until the next request of the same slot
 * on the same thread (an op uses each slot once). NULL after an OVT_ENOMEM
 * message. krn_scratch_release frees the calling thread's buffers. */

#include <stddef.h>

enum {
    KRN_SCRATCH_A,
    KRN_SCRATCH_B,
    KRN_SCRATCH_C,
    KRN_SCRATCH_D,
    KRN_SCRATCH_E,
    KRN_SCRATCH_F,
    KRN_SCRATCH_OUT,
    KRN_SCRATCH_GATHER, /* attention: a key/value head's query heads stacked (ops_attn.c) */
    KRN_SCRATCH_TILE, /* krn_chunked_gemm's own */
    KRN_SCRATCH_WIDE, /* krn_chunked_gemm's own */
    KRN_SCRATCH_PACK, /* krn_chunked_gemm's own: packed operands (kernels/cpu/gemm.h) */
    KRN_SCRATCH_APACK, /* krn_chunked_gemm's own: a packed once for all of a product's tiles */
    KRN_SCRATCH_BPACK, /* and b, for a product with several rows of tiles */
    KRN_SCRATCH_LANES, /* krn_chunked_gemm's own: partial sums of b's row norms */
    KRN_SCRATCH_SLOTS
};
double *krn_scratch(int slot, size_t n);
void krn_scratch_release(void);

#endif
