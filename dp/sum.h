#ifndef OVT_DP_SUM_H
#define OVT_DP_SUM_H

/* The parts of dp_grad_sum (dp/dp.h) that need no MPI, shared by
 * dp/mpi.c and dp/single.c: the checks, a rank's own keys and
 * FP64 partial sums of one chunk, the mean and rounding of a slice of the
 * total, and the whole sum in one process (a NULL dp). Internal to the
 * trainer's dp files. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The checks every rank makes alike, before any collective: S >= 1, R
 * divides S, grid_bits valid. R is the process count (1 for a NULL dp). */
int dp_sum_check(uint32_t S, int R, int grid_bits) OVT_MUST_USE;

/* key[j] = the max over s < nlocal of krn_shard_key(shard[s][c0 + j]), and 1
 * (the least key) where nlocal is 0, for j < m. */
void dp_sum_keys(uint8_t *key, const float *const *shard, uint32_t nlocal, size_t c0, size_t m);

/* partial[j] = +0 plus the terms krn_shard_term(shard[s][c0 + j], q) of the
 * own shards, q = krn_shard_quantum(key[j], S) with key the max over all
 * ranks; 0 where key[j] is 255 (a non-finite value somewhere: the caller
 * fails). Exact, so the ranks' partial sums add up exactly in any order. */
void dp_sum_terms(double *partial, const uint8_t *key, const float *const *shard, uint32_t nlocal, uint32_t S,
                      size_t c0, size_t m);

/* The first j < m with key[j] == 255, or m if none. */
size_t dp_sum_first_nonfinite(const uint8_t *key, size_t m);

/* The error for a non-finite value at element i of grad.sum: names the
 * shard when one of the own shards (global indices first, first + 1, ...)
 * holds it, else says another rank does. Returns OVT_ENUMERIC. */
int dp_sum_fail_nonfinite(const float *const *shard, uint32_t nlocal, uint32_t first, size_t i, uint64_t step);

/* out[j] = krn_grid_round(total[j] / S, grid_bits) for j < len, element
 * offset + j of the site. 0 when every result is finite; otherwise
 * OVT_ENUMERIC (with a message naming the first such element if report)
 * for elements that round past the largest finite grid value (their out is
 * 0; the others are done). */
int dp_sum_mean(float *out, const double *total, uint32_t S, int grid_bits, size_t offset, size_t len,
                    uint64_t step, bool report) OVT_MUST_USE;

/* dp_grad_sum with a NULL dp: every shard in this process (nlocal must
 * be S), grads[i] = krn_grid_round(krn_shard_mean(shard, S, i), grid_bits). */
int dp_sum_one_process(float *grads, const float *const *shard, uint32_t nlocal, uint32_t S, size_t n,
                           int grid_bits, uint64_t step) OVT_MUST_USE;

#endif
