#ifndef OVT_TESTS_KERNELS_CUDA_DEVICE_CHECKS_H
#define OVT_TESTS_KERNELS_CUDA_DEVICE_CHECKS_H

/* Device checks of test_cuda_ops beyond the op cases (included by
 * test_ops_replay.c when it is built as test_cuda_ops; run only where a
 * device is usable):
 *  - the products' two paths (kernels/cuda/gemm_plan.h): the batched path,
 *    with its default scratch and with budgets that force groups and
 *    tiles, against the per-chunk path bit for bit, and both against the
 *    CPU's chunked GEMM: within twice the contract's chunked bound on
 *    random operands, and bit for bit on adversarial ones whose chunk sums
 *    are exact but differ by 2^60 in scale, so only the contract's chunk
 *    order gives the CPU's bits;
 *  - the tree root of device memory (krn_cuda_tree_root) against the
 *    host's ovt_tree_root_le32 on random buffers of 0 bytes to 5 MB, and
 *    the roots of twelve tensors at once (krn_cuda_tree_roots). */

#if defined(OVT_TEST_CUDA) && defined(OVT_HAVE_CUDA)
#include <cuda_runtime.h>
#include <math.h>

#include "common/tree.h"
#include "kernels/chunked_gemm.h"
#include "kernels/cuda/cuda.h"

/* A rows x cols operand (row stride cols) whose term index runs along rows
 * (k_is_row) or columns. adversarial: small integers times 2^(0, 60 or
 * -60) by chunk, so every chunk's sum is exact in any order. */
static double *dc_operand(size_t rows, size_t cols, bool k_is_row, bool adversarial, uint64_t seed)
{
    double *x = malloc((rows * cols + 1) * sizeof *x);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double u = krn_rng_uniform(seed, 0, KRN_RNG_TEST, r * cols + c);
            size_t chunk = (k_is_row ? r : c) / KRN_GEMM_CHUNK;
            x[r * cols + c] = adversarial ? ldexp(floor(u * 17.0) - 8.0, (int)(chunk % 3) * 60 - 60) : 2.0 * u - 1.0;
        }
    return x;
}

/* One product on both device paths and the CPU. */
static void dc_gemm_case(krn_ctx *ctx, bool ta, bool tb, size_t m, size_t n, size_t k, size_t budget, bool with_old,
                         bool adversarial, uint64_t seed)
{
    size_t lda = ta ? m : k, ldb = tb ? k : n;
    double *a = dc_operand(ta ? k : m, lda, ta, adversarial, seed), *b = dc_operand(tb ? n : k, ldb, !tb, adversarial,
                                                                                   seed + 1);
    float *old = NULL;
    if (with_old) {
        old = malloc((m * n + 1) * sizeof *old);
        for (size_t i = 0; i < m * n; i++)
            old[i] = i % 5 == 1 ? -0.0f : (float)(krn_rng_uniform(seed, 2, KRN_RNG_TEST, i) - 0.5);
    }
    double *batched = malloc((m * n + 1) * sizeof(double)), *per_chunk = malloc((m * n + 1) * sizeof(double));
    double *cpu = malloc((m * n + 1) * sizeof(double));
    krn_gemm_in in = {.ta = ta, .a = a, .lda = lda, .tb = tb, .b = b, .ldb = ldb, .old = old};
    int rc = krn_cuda_gemm_probe(ctx, KRN_CUDA_GEMM_BATCHED, budget, &in, m, n, k, batched, 1, NULL);
    CHECK_MSG(rc == 0, "batched: %s", ovt_errmsg());
    rc = krn_cuda_gemm_probe(ctx, KRN_CUDA_GEMM_PER_CHUNK, 0, &in, m, n, k, per_chunk, 1, NULL);
    CHECK_MSG(rc == 0, "per-chunk: %s", ovt_errmsg());
    krn_cpu be = {KRN_BACKEND_CPU, 7, 1, KRN_CPU_GEMM_BEST, NULL};
    CHECK(krn_chunked_gemm(&be, cpu, ta, a, lda, tb, b, ldb, m, n, k) == 0);
    size_t differ = 0, outside = 0, cpu_differ = 0;
    double gamma = krn_chunked_gamma(k);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            size_t e = i * n + j;
            differ += memcmp(&batched[e], &per_chunk[e], sizeof(double)) != 0;
            double want = old ? cpu[e] + (double)old[e] : cpu[e], mag = old ? fabs((double)old[e]) : 0.0;
            for (size_t q = 0; q < k; q++)
                mag += fabs((ta ? a[q * lda + i] : a[i * lda + q]) * (tb ? b[j * ldb + q] : b[q * ldb + j]));
            /* each within gamma * mag of the exact value, + one rounding for old */
            outside += !(fabs(batched[e] - want) <= 2.0 * gamma * mag + 0x1p-51 * mag);
            cpu_differ += memcmp(&batched[e], &want, sizeof(double)) != 0;
        }
    CHECK_MSG(differ == 0, "ta %d tb %d %zu x %zu over %zu (budget %zu, old %d): %zu elements of the batched path "
              "differ from the per-chunk path", ta, tb, m, n, k, budget, with_old, differ);
    CHECK_MSG(outside == 0, "%zu x %zu over %zu: %zu elements outside the chunked bound of the CPU's", m, n, k,
              outside);
    if (adversarial)
        CHECK_MSG(cpu_differ == 0, "%zu x %zu over %zu, adversarial: %zu elements differ from the CPU's", m, n, k,
                  cpu_differ);
    free(a);
    free(b);
    free(old);
    free(batched);
    free(per_chunk);
    free(cpu);
}

/* A cuda ctx, or NULL after a failed check. */
static krn_ctx *dc_ctx(void)
{
    krn_config cfg = {.backend = KRN_BACKEND_CUDA, .mode = KRN_RECORD, .grid_bits = 32};
    krn_ctx *ctx = NULL;
    int rc = krn_ctx_new(&ctx, &cfg);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    return rc ? NULL : ctx;
}

static void test_cuda_gemm_paths(void)
{
    krn_ctx *ctx = dc_ctx();
    if (!ctx)
        return;
    const struct {
        size_t m, n, k, budget;
    } cases[] = {
        {1, 1, 1, 0},        {3, 5, 127, 0},        {17, 9, 128, 0},        {17, 9, 129, 0},
        {64, 48, 1000, 0},   {64, 48, 1000, 64 * 48 * 2}, {64, 48, 1000, 48 * 5}, {64, 48, 1000, 1},
        {130, 70, 3077, 0},  {600, 33, 700, 33 * 600}, {600, 33, 700, 33 * 300}, {257, 31, 0, 0},
        {256, 384, 1024, 0},
    };
    uint64_t seed = 100;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 4; t++)
            for (int adversarial = 0; adversarial < 2; adversarial++)
                dc_gemm_case(ctx, t & 1, t >> 1, cases[c].m, cases[c].n, cases[c].k, cases[c].budget, (c + t) % 2,
                             adversarial, seed++);
    /* misuse: a stride shorter than its row is refused with a message */
    double a[4] = {0}, b[4] = {0}, out[4];
    krn_gemm_in bad = {.a = a, .lda = 1, .b = b, .ldb = 2};
    CHECK(krn_cuda_gemm_probe(ctx, KRN_CUDA_GEMM_BATCHED, 0, &bad, 2, 2, 2, out, 1, NULL) == OVT_EINVAL);
    krn_ctx_free(ctx);
}

static void test_cuda_tree_root(void)
{
    krn_ctx *ctx = dc_ctx();
    if (!ctx)
        return;
    const size_t K = OVT_TREE_LEAF_BYTES;
    const size_t lens[] = {0, 4, 63 * 1024, K, K + 4, 3 * K, 3 * K + 8, 7 * K, 13 * K - 4, 5000000, 64 * K + 12};
    float *host = fx_normal(5000000 / 4 + 4 * K, 77, 1, 1.0);
    void *dev = NULL;
    CHECK(cudaMalloc(&dev, 5000000 + 16 * K) == cudaSuccess);
    CHECK(cudaMemcpy(dev, host, 5000000 + 16 * K, cudaMemcpyHostToDevice) == cudaSuccess);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        ovt_hash want, got;
        CHECK(ovt_tree_root_le32(&want, host, lens[i]) == 0);
        int rc = krn_cuda_tree_root(ctx, &got, lens[i] ? dev : NULL, lens[i]);
        CHECK_MSG(rc == 0, "%s", ovt_errmsg());
        CHECK_MSG(memcmp(want.b, got.b, 32) == 0, "device tree root of %zu bytes differs from the host's", lens[i]);
    }
    /* a repeated call on the same ctx gives the same root (nothing left over between calls) */
    ovt_hash again, want;
    CHECK(krn_cuda_tree_root(ctx, &again, dev, 3 * K) == 0 && ovt_tree_root_le32(&want, host, 3 * K) == 0);
    CHECK(memcmp(again.b, want.b, 32) == 0);
    CHECK(krn_cuda_tree_root(ctx, &again, NULL, 8) == OVT_EINVAL);
    /* many tensors at once, as a state's digests: views of the buffer at
     * word offsets, sizes from empty to 40 leaves */
    const size_t many[] = {3072, 0, 4, K, K + 4, 3 * K + 8, 2 * K, 17 * K - 4, 5 * K, 12, 40 * K, 768 * 4};
    const size_t count = sizeof many / sizeof many[0];
    const void *views[sizeof many / sizeof many[0]];
    ovt_hash roots[sizeof many / sizeof many[0]];
    for (size_t t = 0; t < count; t++)
        views[t] = (const char *)dev + 4 * t;
    int rc = krn_cuda_tree_roots(ctx, roots, views, many, count);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    for (size_t t = 0; t < count; t++) {
        CHECK(ovt_tree_root_le32(&want, (const char *)host + 4 * t, many[t]) == 0);
        CHECK_MSG(memcmp(want.b, roots[t].b, 32) == 0, "tensor %zu of %zu (%zu bytes): device root differs", t, count,
                  many[t]);
    }
    cudaFree(dev);
    free(host);
    krn_ctx_free(ctx);
}
#endif

#endif
