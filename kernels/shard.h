#ifndef OVT_KERNELS_SHARD_H
#define OVT_KERNELS_SHARD_H

/* The mean of S shard values, exact whatever order and grouping adds them
 * (the sites "grad.sum" and "loss.mean" of a sharded step; the definition
 * and its proof: docs/op-bounds.md, "grad.sum").
 *
 * For one element with shard values g_0 .. g_{S-1} (finite FP32 grid
 * values):
 *   k    = max over s of krn_shard_key(g_s)        (so every |g_s| < 2^E,
 *                                                  E = k - 126)
 *   q    = krn_shard_quantum(k, S) = 2^(E - 53 + c), c = ceil(log2 S)
 *   t_s  = krn_shard_term(g_s, q) = g_s rounded to a multiple of q (ties
 *          to even)
 *   mean = (t_0 + ... + t_{S-1}) / S                  (FP64)
 * Every t_s is an integer multiple of q with |t_s| <= 2^E, so every partial
 * sum, in any order and grouping, is a multiple of q of magnitude at most
 * S * 2^E <= 2^53 q: exactly representable, hence computed exactly. The
 * sum is therefore the same on every machine and every process count, and
 * the mean is one correctly rounded division of it: the sites are exact
 * (band zero, never logged). t_s = g_s unless g_s is more than 29 - c
 * binades below the largest term, so the mean is the exact mean of the
 * g_s to far below the grid's precision.
 *
 * Data-parallel processes (dp/mpi.c) reduce the keys with a max and
 * the terms with a sum; one process does both in krn_shard_mean. */

#include <stddef.h>
#include <stdint.h>

/* FP32's biased exponent field of g, with 1 for zeros and subnormals:
 * |g| < 2^(key - 126). */
uint8_t krn_shard_key(float g);

/* 2^(key - 179 + ceil(log2 S)), S >= 1. */
double krn_shard_quantum(uint8_t key, uint32_t S);

/* g rounded to the nearest multiple of q, ties to even (exact in FP64). */
double krn_shard_term(float g, double q);

/* The mean of g[0][i] .. g[S-1][i] as defined above. */
double krn_shard_mean(const float *const *g, uint32_t S, size_t i);

/* x[j] = krn_shard_mean(g, S, i0 + j) for j < len (the same values, the
 * per-call work done once). */
void krn_shard_mean_block(double *x, const float *const *g, uint32_t S, size_t i0, size_t len);

#endif
