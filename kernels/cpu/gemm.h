#ifndef OVT_KERNELS_CPU_GEMM_H
#define OVT_KERNELS_CPU_GEMM_H

/* Internal: the cpu backend's own chunked GEMM (issue 15). Its K blocking
 * is the contract's chunk: the operands of a block are packed once, and a
 * register-blocked micro-kernel sums each chunk of KRN_GEMM_CHUNK terms from
 * zero in registers and adds that sum to C in one FP64 addition, chunks in
 * increasing order (docs/numeric-contract.md, the GEMM chunk).
 *
 * The order inside a chunk is the one OpenBLAS 0.3.21's Haswell DGEMM
 * kernel uses for a call of the same m x n x k (the core libopenblas picks
 * on Haswell and Zen cores; on cores it takes for SkylakeX or Cooperlake it
 * runs another kernel, and test_gemm_chunk then checks the own paths against
 * this order alone), so the cpu backend keeps its bits whichever of the two
 * computes a product where OpenBLAS runs that kernel:
 *   - every element: one chain of FMAs, k increasing, from +0;
 *   - except, when m is odd, the elements (m-1, j) with j < 4*floor(n/4):
 *     OpenBLAS computes row-major C as column-major C^T, and its kernel for
 *     a last single column of C^T (its "4x1" kernel) keeps four partial sums,
 *     e[k mod 4] for k below 8*floor(kc/8), the remaining k added to e[0],
 *     summed as (e0 + e1) + (e2 + e3).
 * Every fma is correctly rounded, so the AVX-512, AVX2+FMA and portable C
 * paths give identical bits; they differ only in speed. */

#include <stdbool.h>
#include <stddef.h>

typedef enum { KRN_GEMM_ISA_C, KRN_GEMM_ISA_AVX2, KRN_GEMM_ISA_AVX512 } krn_gemm_isa;

/* The fastest path this CPU runs (__builtin_cpu_supports): AVX-512F, else
 * AVX2 with FMA, else the portable C path. */
krn_gemm_isa krn_gemm_isa_best(void);

/* "avx512", "avx2" or "c". */
const char *krn_gemm_isa_name(krn_gemm_isa isa);

/* Columns of the path's micro-tile (24, 8 or 4): a tile of C whose width
 * is a multiple of it needs no edge tiles. */
size_t krn_gemm_nr(krn_gemm_isa isa);

/* Doubles of packing scratch krn_gemm_block needs for an m x n product. */
size_t krn_gemm_pack_doubles(krn_gemm_isa isa, size_t m, size_t n, size_t k);

/* Memory the caller reads after this block (the next chunk's operands, a
 * tile's old values): rows of row_bytes bytes, stride bytes apart. */
typedef struct {
    const void *base;
    size_t rows, row_bytes, stride;
} krn_gemm_region;

typedef struct {
    krn_gemm_region r[3];
    int n;
} krn_gemm_ahead;

/* c (m x n, row stride ldc) = (first ? 0 : c) + op(a) @ op(b), storage of a
 * and b as in krn_cpu_gemm, k in consecutive chunks of KRN_GEMM_CHUNK from
 * k = 0, each chunk's sum added to c in order: the values of krn_cpu_gemm
 * on the first chunk and krn_cpu_gemm_add on each later one, each called
 * with this m and n. pack holds krn_gemm_pack_doubles(isa, m, n, k). ahead
 * (may be NULL): lines to prefetch, a few after each micro-tile, so that
 * they come from memory while the block computes; it changes no value. */
void krn_gemm_block(krn_gemm_isa isa, double *pack, double *c, size_t ldc, bool ta, const double *a,
                    size_t lda, bool tb, const double *b, size_t ldb, size_t m, size_t n, size_t k,
                    bool first, const krn_gemm_ahead *ahead);

/* Doubles of op(a)'s m rows at one chunk (kc <= KRN_GEMM_CHUNK columns)
 * packed as krn_gemm_block packs them. */
size_t krn_gemm_apack_doubles(krn_gemm_isa isa, size_t m, size_t kc);

/* Packs rows 0 .. m of op(a) at columns k0 .. k0+kc (kc <= KRN_GEMM_CHUNK)
 * into dst (krn_gemm_apack_doubles of them), as krn_gemm_block does. */
void krn_gemm_pack_a(krn_gemm_isa isa, double *dst, bool ta, const double *a, size_t lda, size_t m,
                     size_t k0, size_t kc);

/* Doubles of op(b)'s n columns at one chunk (kc <= KRN_GEMM_CHUNK rows)
 * packed as krn_gemm_block packs them; a block of columns from j0 (a
 * multiple of krn_gemm_nr) starts j0 * kc doubles in. */
size_t krn_gemm_bpack_doubles(krn_gemm_isa isa, size_t n, size_t kc);

/* Packs columns 0 .. n of op(b) at rows 0 .. kc (b or, when NULL, the FP32
 * bf, pointing at the chunk's first row) into dst, as krn_gemm_block does. */
void krn_gemm_pack_b(krn_gemm_isa isa, double *dst, bool tb, const double *b, const float *bf,
                     size_t ldb, size_t n, size_t kc);

/* krn_gemm_block with more sources, the same values:
 *   a_packed (k <= KRN_GEMM_CHUNK): op(a) packed by krn_gemm_pack_a with
 *     this m and k, for a product whose tiles share their rows of a (a is
 *     then only read for an odd m's last row, from the packed copy too);
 *   b NULL: bf, b in FP32, each value widened to FP64 as it is packed;
 *   b_packed (k <= KRN_GEMM_CHUNK): op(b) packed by krn_gemm_pack_b with
 *     this n and k, for a product whose tiles share their columns of b
 *     (b and bf are then not read). */
void krn_gemm_block_ex(krn_gemm_isa isa, double *pack, double *c, size_t ldc, bool ta,
                       const double *a, size_t lda, const double *a_packed, bool tb,
                       const double *b, const float *bf, const double *b_packed, size_t ldb, size_t m,
                       size_t n, size_t k, bool first, const krn_gemm_ahead *ahead);

#endif
