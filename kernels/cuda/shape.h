#ifndef OVT_KERNELS_CUDA_SHAPE_H
#define OVT_KERNELS_CUDA_SHAPE_H

/* Launch shapes of the cuda backend, plain C so the host tests check them
 * without a device. Every element-wise kernel is a grid-stride loop: any grid
 * covers any n, the cap only bounds the launch. */
#include <stddef.h>
#include <stdint.h>

#define KRN_CUDA_THREADS 256u
#define KRN_CUDA_MAX_BLOCKS 65535u

/* Blocks of `threads` threads for n elements: ceil(n / threads), at least
 * 1, at most KRN_CUDA_MAX_BLOCKS. */
static inline unsigned krn_cuda_blocks_of(size_t n, unsigned threads)
{
    size_t b = n / threads + (n % threads != 0);
    if (b == 0)
        b = 1;
    return b > KRN_CUDA_MAX_BLOCKS ? KRN_CUDA_MAX_BLOCKS : (unsigned)b;
}

/* Blocks of KRN_CUDA_THREADS threads for n elements. */
static inline unsigned krn_cuda_blocks(size_t n)
{
    return krn_cuda_blocks_of(n, KRN_CUDA_THREADS);
}

/* The number of chunks of KRN_GEMM_CHUNK terms in a reduction of K terms
 * (one DGEMM each), and the length of chunk j. */
static inline size_t krn_cuda_nchunks(size_t K, size_t chunk)
{
    return K / chunk + (K % chunk != 0);
}

static inline size_t krn_cuda_chunk_len(size_t K, size_t chunk, size_t j)
{
    size_t k0 = j * chunk;
    return K - k0 < chunk ? K - k0 : chunk;
}

/* The tree hash (tree_hash.cu): one thread per leaf or node, in blocks of
 * KRN_CUDA_TREE_THREADS (krn_cuda_blocks_of) so that a tensor's few
 * thousand leaves (64 KiB each, about a thousand SHA-256 blocks a thread)
 * spread over every multiprocessor. */
#define KRN_CUDA_TREE_THREADS 32u

/* A device site's element count must fit the 32-bit flag scan. */
#define KRN_CUDA_SITE_MAX ((size_t)UINT32_MAX)

#endif
