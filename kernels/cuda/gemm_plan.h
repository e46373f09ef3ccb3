#ifndef OVT_KERNELS_CUDA_GEMM_PLAN_H
#define OVT_KERNELS_CUDA_GEMM_PLAN_H

/* Internal to kernels/: the launch plan of a product on the device in a few
 * launches (kernels/cuda/gemm.cu, docs/gpu.md), plain C so that the host
 * tests (test_cuda_host) check every launch's arithmetic without a device.
 *
 * out (m x n, row-major, dense) = op(a) op(b) over k terms, k cut into the
 * contract's chunks of KRN_GEMM_CHUNK terms (the last one short when k is
 * not a multiple). The rows of out are cut into tiles of `rows` rows; for
 * each tile, the chunks are taken in groups of `group` consecutive chunks:
 * one strided-batched DGEMM computes every full chunk of the group, each
 * into its own slice of the scratch with beta = 0 (a short last chunk is
 * one more plain DGEMM into its slice), then one kernel adds the slices
 * into the tile in increasing chunk order: chunk 0 first, then out + chunk
 * 1, out + chunk 2, ... (a later group starts from the tile's value), and
 * after the last group an optional FP32 old value. These are exactly the
 * FP64 additions of the per-chunk path, in the same order.
 *
 * The scratch holds group * rows * n doubles, at most the budget (at least
 * one row of one chunk). The default budget (krn_cuda_gemm_budget) is the
 * larger of KRN_CUDA_GEMM_SCRATCH_MIN doubles and m * n: the per-chunk
 * path's own scratch, so the new path never needs more memory than the old
 * one did, or 1 GiB. */

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Doubles of scratch any product may use (1 GiB). */
#define KRN_CUDA_GEMM_SCRATCH_MIN ((size_t)1 << 27)
/* A tile keeps at least this many rows (or all of m) while the budget can
 * hold one chunk of them: fewer rows make DGEMMs that use the GPU badly. */
#define KRN_CUDA_GEMM_MIN_ROWS 256u

typedef struct {
    bool ta, tb;        /* the product's operands, as given */
    size_t lda, ldb, m, n, k;
    size_t chunks;      /* ceil(k / KRN_GEMM_CHUNK); 0 when k == 0 */
    size_t full;        /* chunks of exactly KRN_GEMM_CHUNK terms */
    size_t tail;        /* terms of the short last chunk; 0: none */
    size_t group;       /* chunks per group (<= chunks) */
    size_t groups;      /* ceil(chunks / group) */
    size_t rows;        /* rows of out per tile (the last tile may have fewer) */
    size_t tiles;       /* ceil(m / rows); 0 when m or n is 0 */
    size_t slice;       /* doubles between the slices of consecutive chunks: rows * n */
    size_t scratch;     /* doubles of scratch: group * slice; 0 with one chunk (written straight into out) */
    long long stride_a; /* elements of a between consecutive chunks */
    long long stride_b; /* elements of b between consecutive chunks */
} krn_cuda_gemm_plan;

/* The default scratch budget of an m x n product, in doubles:
 * max(KRN_CUDA_GEMM_SCRATCH_MIN, m * n) (m * n assumed not to overflow:
 * krn_cuda_gemm_plan_make checks it first). */
size_t krn_cuda_gemm_budget(size_t m, size_t n);

/* The plan of out (m x n) = op(a) op(b) over k terms, a and b stored as
 * krn_cpu_gemm says (row-major; a is m x k, or k x m with ta, row stride
 * lda; b is k x n, or n x k with tb, row stride ldb), with at most budget
 * doubles of scratch (0: krn_cuda_gemm_budget(m, n)). OVT_EINVAL with a
 * message when a dimension or stride does not fit cuBLAS's 32-bit ints, a
 * stride is shorter than its row, or m * n overflows; *p zeroed then. */
int krn_cuda_gemm_plan_make(krn_cuda_gemm_plan *p, bool ta, size_t lda, bool tb, size_t ldb, size_t m, size_t n,
                            size_t k, size_t budget) OVT_MUST_USE;

/* One launch of a plan, in elements from the start of each array:
 *  FILL   out[c_off + i] = 0 + old[c_off + i] (with_old) or 0, for i <
 *         rows * n (k == 0; the addition makes an old -0 a +0, as on the
 *         per-chunk path)
 *  DGEMM  for j < count: C_j = op(A_j) op(B_j), rows x n over kc terms,
 *         beta = 0, C_j at (into_out ? out : scratch) + c_off + j * slice
 *         (row stride n), A_j at a + a_off + j * stride_a, B_j at b + b_off
 *         + j * stride_b (one plain DGEMM when count is 1, one
 *         strided-batched DGEMM otherwise)
 *  SUM    for i < rows * n: out[c_off + i] = (from_out ? out[c_off + i] :
 *         scratch[i]) + scratch[j * slice + i] for the further j < nslices
 *         in increasing order, + old[c_off + i] when with_old. */
typedef enum { KRN_CUDA_GEMM_FILL, KRN_CUDA_GEMM_DGEMM, KRN_CUDA_GEMM_SUM } krn_cuda_gemm_launch_kind;

typedef struct {
    krn_cuda_gemm_launch_kind kind;
    size_t a_off, b_off, c_off;
    size_t rows, kc, count;
    bool into_out;
    size_t nslices;
    bool from_out, with_old;
} krn_cuda_gemm_launch;

/* Calls launch(arg, l) for every launch of the plan in order (old: whether
 * an old value is added); stops at and returns the first nonzero result. */
int krn_cuda_gemm_plan_walk(const krn_cuda_gemm_plan *p, bool old,
                            int (*launch)(void *arg, const krn_cuda_gemm_launch *l), void *arg);

/* The number of launches of the plan, and of the per-chunk path for the
 * same product (one DGEMM per chunk, one addition per chunk after the
 * first, one for old; one fill when k is 0). */
size_t krn_cuda_gemm_launches(const krn_cuda_gemm_plan *p, bool old);
size_t krn_cuda_gemm_launches_per_chunk(size_t k, bool old);

/* The two ways the device computes a product: the plan above (the
 * default), or the path verified on an H200 on 2026-12-04, one DGEMM and
 * one addition kernel per chunk (kernels/cuda/reduce.cu), kept selectable
 * until a device has run the new one. */
typedef enum { KRN_CUDA_GEMM_BATCHED = 0, KRN_CUDA_GEMM_PER_CHUNK = 1 } krn_cuda_gemm_path;

/* The path the environment variable OVT_CUDA_GEMM names (value: its text,
 * NULL when unset): unset, empty or "batched" the plan above,
 * "per-chunk" the old path. OVT_EINVAL with a message for anything else. */
int krn_cuda_gemm_path_parse(const char *value, krn_cuda_gemm_path *path) OVT_MUST_USE;

#endif
