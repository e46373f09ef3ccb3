#ifndef OVT_KERNELS_CHUNKED_GEMM_H
#define OVT_KERNELS_CHUNKED_GEMM_H

/* Internal to kernels/: the product of the ops' GEMMs in the contract's
 * chunked order (reduce.h), computed by output tiles on the ctx's threads,
 * with the FP32 operand widened chunk by chunk. */

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "kernels/cpu/backend.h"

/* Rows per output tile of the chunked GEMM (chunked_gemm.c): a product split into
 * parts of rows at multiples of it computes every tile as the whole product
 * does, so its values are the same bit for bit. */
#ifndef KRN_TILE_M
#define KRN_TILE_M 256
#endif

/* out (m x n, dense) = op(a) @ op(b) with the inner dimension k in chunks as
 * above: per output tile, each chunk's product (beta = 0, the backend's
 * order) is added into the tile in increasing chunk order. Storage of a and
 * b as in krn_cpu_gemm. Fails only on allocation. */
int krn_chunked_gemm(const krn_cpu *be, double *out, bool ta, const double *a, size_t lda, bool tb,
                     const double *b, size_t ldb, size_t m, size_t n, size_t k) OVT_MUST_USE;

/* The operands of krn_chunked_gemm_in: a and b stored as for krn_cpu_gemm;
 * b in FP64 (b) or in FP32 (bf, the other NULL), an FP32 b being widened
 * chunk by chunk inside each tile, so no FP64 copy of it exists; old NULL or
 * an m x n FP32 matrix added to each element after its chunk sums (one FP64
 * addition: the accumulation into an existing gradient); bnorms NULL or,
 * with bf, n doubles that receive the Euclidean norms of op(b)'s columns,
 * taken as the tiles read b: without tb b's columns, each one's squares
 * added in row order (the values of krn_col_norms); with tb b's rows (a
 * forward product's weight rows), in krn_widen_rows' order, so a forward
 * product reads its weights once. */
typedef struct {
    bool ta;
    const double *a;
    size_t lda;
    bool tb;
    const double *b;
    const float *bf;
    size_t ldb;
    const float *old;
    double *bnorms;
} krn_gemm_in;

/* krn_chunked_gemm with the operands above: the same values as widening bf
 * first and adding old afterwards. */
int krn_chunked_gemm_in(const krn_cpu *be, double *out, const krn_gemm_in *in, size_t m, size_t n,
                        size_t k) OVT_MUST_USE;

#endif
