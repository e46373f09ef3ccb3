/* The MPI-free parts of dp_grad_sum (dp/sum.h). The definition
 * of the sum is kernels/shard.h; these loops only split it between a rank's
 * own shards (keys, terms) and its slice of the total (mean, rounding). */
#include "dp/sum.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/grid.h"
#include "kernels/shard.h"

/* krn_shard_key of a non-finite value: its exponent field is all ones. */
#define KEY_NONFINITE 255

int dp_sum_check(uint32_t S, int R, int grid_bits)
{
    if (S == 0 || R < 1 || S % (uint32_t)R != 0)
        return ovt_fail(OVT_EINVAL, "grad.sum: %u shards cannot be split evenly over %d processes: the number of "
                                    "processes (mpirun -np) must divide --shards", S, R);
    if (krn_grid_check_bits(grid_bits) != 0)
        return ovt_fail_wrap(OVT_EINVAL, "grad.sum");
    return 0;
}

void dp_sum_keys(uint8_t *key, const float *const *shard, uint32_t nlocal, size_t c0, size_t m)
{
    memset(key, 1, m);
    for (uint32_t s = 0; s < nlocal; s++) {
        const float *g = shard[s] + c0;
        for (size_t j = 0; j < m; j++) {
            uint8_t k = krn_shard_key(g[j]);
            key[j] = k > key[j] ? k : key[j];
        }
    }
}

void dp_sum_terms(double *partial, const uint8_t *key, const float *const *shard, uint32_t nlocal, uint32_t S,
                      size_t c0, size_t m)
{
    double quantum[256];
    for (int k = 0; k < 256; k++)
        quantum[k] = krn_shard_quantum((uint8_t)k, S);
    for (size_t j = 0; j < m; j++)
        partial[j] = 0.0; /* +0, as krn_shard_mean starts: a zero sum stays +0 in any order */
    for (uint32_t s = 0; s < nlocal; s++) {
        const float *g = shard[s] + c0;
        for (size_t j = 0; j < m; j++)
            if (key[j] != KEY_NONFINITE)
                partial[j] += krn_shard_term(g[j], quantum[key[j]]);
    }
}

size_t dp_sum_first_nonfinite(const uint8_t *key, size_t m)
{
    const uint8_t *p = memchr(key, KEY_NONFINITE, m);
    return p != NULL ? (size_t)(p - key) : m;
}

int dp_sum_fail_nonfinite(const float *const *shard, uint32_t nlocal, uint32_t first, size_t i, uint64_t step)
{
    for (uint32_t s = 0; s < nlocal; s++)
        if (!isfinite(shard[s][i]))
            return ovt_fail(OVT_ENUMERIC, "step %llu: grad.sum: shard %u's gradient element %zu is not finite (%g)",
                            (unsigned long long)step, first + s, i, (double)shard[s][i]);
    return ovt_fail(OVT_ENUMERIC, "step %llu: grad.sum: gradient element %zu is not finite in a shard of another "
                                  "process (see its error)", (unsigned long long)step, i);
}

/* *out = mean rounded to the grid, or 0 and OVT_ENUMERIC if that is past
 * the grid's largest finite value (element i of the site; the message is
 * recorded only if report, so that it names the first such element). */
static int round_mean(float *out, double mean, int grid_bits, size_t i, uint64_t step, bool report)
{
    float v = krn_grid_round(mean, grid_bits);
    if (isfinite(v)) {
        *out = v;
        return 0;
    }
    *out = 0.0f;
    if (!report)
        return OVT_ENUMERIC;
    return ovt_fail(OVT_ENUMERIC, "step %llu: grad.sum: the mean %.17g of gradient element %zu rounds past the "
                                  "largest finite value of the %d-bit grid (shard gradients off the grid)",
                    (unsigned long long)step, mean, i, grid_bits);
}

int dp_sum_mean(float *out, const double *total, uint32_t S, int grid_bits, size_t offset, size_t len,
                    uint64_t step, bool report)
{
    int rc = 0;
    for (size_t j = 0; j < len; j++) {
        /* krn_shard_mean's division: one correctly rounded quotient */
        int r = round_mean(&out[j], total[j] / (double)S, grid_bits, offset + j, step, report && rc == 0);
        rc = rc != 0 ? rc : r;
    }
    return rc;
}

int dp_sum_one_process(float *grads, const float *const *shard, uint32_t nlocal, uint32_t S, size_t n,
                           int grid_bits, uint64_t step)
{
    int rc = dp_sum_check(S, 1, grid_bits);
    if (rc == 0 && nlocal != S)
        rc = ovt_fail(OVT_EINVAL, "grad.sum: one process holds %u of %u shards; without processes to share the "
                                  "step (a NULL dp) it must hold all of them", nlocal, S);
    for (size_t i = 0; i < n && rc == 0; i++) {
        double mean = krn_shard_mean(shard, S, i);
        if (!isfinite(mean)) {
            rc = dp_sum_fail_nonfinite(shard, S, 0, i, step);
            break;
        }
        rc = round_mean(&grads[i], mean, grid_bits, i, step, true);
    }
    if (rc != 0)
        memset(grads, 0, n * sizeof *grads);
    return rc;
}
