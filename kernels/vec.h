#ifndef OVT_KERNELS_VEC_H
#define OVT_KERNELS_VEC_H

/* Vector clones of an element-wise loop, the widest this CPU runs picked at
 * load time: AVX-512F, AVX2 or the x86-64 baseline (SSE2). Every clone does
 * the same IEEE operations on each element (conversions, + - * /, sqrt; no
 * contraction into FMAs: -ffp-contract=off), so they give the same bits and
 * differ only in how many elements one instruction takes. A leaf header. */
#if defined(__x86_64__) && defined(__GNUC__)
#define KRN_VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KRN_VEC_CLONES
#endif

#endif
