#ifndef OVT_KERNELS_MEM_H
#define OVT_KERNELS_MEM_H

/* Tensor memory: where a backend keeps the tensors its ops read and write
 * (docs/gpu.md, "Memory"). One allocation and transfer interface for every
 * backend, so that the trainer never needs to know where its tensors are:
 *
 *   cpu, ref, shuffle   host memory (the ops read it directly);
 *   cuda                device memory (cudaMalloc), unless the environment
 *                       sets OVT_CUDA_HOST_TENSORS=1: then host memory, and
 *                       every op copies its inputs to the device and its
 *                       outputs back (the path verified on an H200 on
 *                       2026-12-04);
 *   the guard           (krn_config.mem_guard, testing, CPU backends) host
 *                       memory that stands in for a device's: whole pages,
 *                       and while krn_mem_guard is on, PROT_NONE, so that a
 *                       host access outside this interface faults.
 *
 * Memory from krn_mem_alloc is "backend memory": the ctx keeps a table of
 * it, and every transfer checks that its range lies inside one allocation
 * (OVT_EINVAL naming the allocation, the offset and the sizes). The ops of
 * kernels/ops.h take backend memory and host memory alike; host code may
 * read or write backend memory only where krn_mem_is_host says so, and
 * otherwise through krn_mem_upload, krn_mem_download, krn_mem_zero,
 * krn_mem_copy and krn_mem_tree_root(s). Every function returns 0 or a negative
 * OVT_E* code with a message. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "kernels/site.h"

/* Whether ctx's tensors live apart from the host (cuda's device memory, or
 * the guard): a caller that keeps a run's tensors where the ops run then
 * allocates them with krn_mem_alloc and reads them through this interface.
 * OVT_EINVAL for an OVT_CUDA_HOST_TENSORS that is neither 0 nor 1. The
 * environment is read once per ctx (here or at its first allocation). */
int krn_mem_placement(krn_ctx *ctx, bool *resident) OVT_MUST_USE;

/* bytes (> 0) of zeroed backend memory of ctx into *out, named `what` in
 * messages. OVT_EINVAL for 0 bytes, OVT_ENOMEM when there is no room. */
int krn_mem_alloc(krn_ctx *ctx, void **out, size_t bytes, const char *what) OVT_MUST_USE;

/* Frees backend memory of ctx (NULL: nothing); a pointer that is not the
 * start of one of ctx's allocations is a programming error (abort). */
void krn_mem_free(krn_ctx *ctx, void *p);

/* Whether host code may read and write p directly: true for memory that is
 * not ctx's backend memory (the caller's own), and for backend memory of a
 * host backend; false for cuda's device memory and the guard's. */
bool krn_mem_is_host(const krn_ctx *ctx, const void *p);

/* bytes from host memory src into backend memory dst, and back. */
int krn_mem_upload(krn_ctx *ctx, void *dst, const void *src, size_t bytes) OVT_MUST_USE;
int krn_mem_download(krn_ctx *ctx, void *dst, const void *src, size_t bytes) OVT_MUST_USE;

/* Zeroes bytes at p: backend memory of ctx (its range checked), or host
 * memory of the caller's. */
int krn_mem_zero(krn_ctx *ctx, void *p, size_t bytes) OVT_MUST_USE;

/* bytes from backend memory src to backend memory dst (no overlap). */
int krn_mem_copy(krn_ctx *ctx, void *dst, const void *src, size_t bytes) OVT_MUST_USE;

/* The tensor tree root (common/tree.h) of bytes (a multiple of 4) of 32-bit
 * words in backend memory at p, the digest of a tree stateHash
 * (trainer/state_hash.h); and the roots of count tensors at once, roots[t]
 * of lens[t] bytes at ptrs[t] (a state's digests). Host backends hash the
 * leaves on ctx's threads; cuda hashes every leaf and level of every
 * tensor on the device (krn_cuda_tree_roots, kernels/cuda/tree_hash.cu)
 * and only the roots come up. */
int krn_mem_tree_root(krn_ctx *ctx, const void *p, size_t bytes, ovt_hash *out) OVT_MUST_USE;
int krn_mem_tree_roots(krn_ctx *ctx, ovt_hash *roots, const void *const *ptrs, const size_t *lens,
                       size_t count) OVT_MUST_USE;

/* The guard (krn_config.mem_guard; a no-op on any other ctx): on, every
 * allocation of ctx is PROT_NONE until it is turned off, except inside the
 * calls above; a step runner turns it off for its steps only. */
int krn_mem_guard(krn_ctx *ctx, bool on) OVT_MUST_USE;

/* What crossed between host and backend memory through this interface, for
 * tests and benchmarks (bytes and calls of uploads, downloads; the tree
 * roots' downloads count as downloads). */
typedef struct {
    uint64_t upload_bytes, uploads;
    uint64_t download_bytes, downloads;
    uint64_t allocated_bytes; /* now */
} krn_mem_stats;
krn_mem_stats krn_mem_stats_of(const krn_ctx *ctx);

#endif
