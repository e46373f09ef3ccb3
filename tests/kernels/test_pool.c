/* The kernels' thread pool: every chunk runs exactly once per loop, for any
 * chunk count and thread count, over many loops in a row (late workers must
 * never run a chunk of a loop that has ended); results written by workers
 * are visible to the caller when krn_pool_run returns; background jobs run
 * once each, beside loops or at the wait. */
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"
#include "common/cpus.h"
#include "kernels/pool.h"

typedef struct {
    size_t nchunks;
    atomic_int *runs;  /* per chunk: how many times it ran */
    uint64_t *result;  /* per chunk: a value computed by whoever ran it */
} loop_arg;

static void chunk_fn(void *p, size_t c)
{
    loop_arg *a = p;
    atomic_fetch_add(&a->runs[c], 1);
    uint64_t h = c + 1;
    for (int k = 0; k < 200; k++)
        h = h * 6364136223846793005u + 1442695040888963407u;
    a->result[c] = h;
}

/* A loop whose every chunk runs an inner loop of 13 chunks on the same
 * pool (pool.h: the inner one runs on the chunk's thread alone). */
typedef struct {
    krn_pool *pool;
    atomic_int *runs; /* per outer chunk, per inner chunk */
} nested_arg;

typedef struct {
    atomic_int *runs;
} inner_arg;

static void inner_fn(void *p, size_t c)
{
    inner_arg *a = p;
    atomic_fetch_add(&a->runs[c], 1);
}

static void outer_fn(void *p, size_t c)
{
    nested_arg *a = p;
    inner_arg in = {a->runs + 13 * c};
    krn_pool_run(a->pool, 13, inner_fn, &in);
}

/* Every inner chunk of every outer chunk runs exactly once. */
static void test_nested(int threads)
{
    krn_pool *pool;
    CHECK(krn_pool_new(&pool, threads) == 0);
    size_t bad = 0;
    for (int loop = 0; loop < 50; loop++) {
        nested_arg a = {pool, calloc(31 * 13, sizeof *a.runs)};
        krn_pool_run(pool, 31, outer_fn, &a);
        for (size_t i = 0; i < 31 * 13; i++)
            bad += atomic_load(&a.runs[i]) != 1;
        free(a.runs);
    }
    CHECK_MSG(bad == 0, "threads %d: %zu inner chunks of nested loops ran other than once", threads, bad);
    krn_pool_free(pool);
}

/* Background jobs (krn_pool_background) beside loops: every job runs
 * exactly once whether workers took it between loops or the wait ran it,
 * with its result visible after the wait; a batch with no wait runs before
 * the next batch starts and before the pool is freed. */
static void test_background(int threads)
{
    krn_pool *pool;
    CHECK(krn_pool_new(&pool, threads) == 0);
    size_t bad = 0;
    for (int round = 0; round < 40; round++) {
        size_t n = (size_t)(round * 37 % 300);
        loop_arg bg = {.nchunks = n, .runs = calloc(n + 1, sizeof(atomic_int)), .result = calloc(n + 1, 8)};
        krn_pool_background(pool, n, chunk_fn, &bg);
        for (int loop = 0; loop < round % 4; loop++) {
            loop_arg a = {.nchunks = 17, .runs = calloc(17, sizeof(atomic_int)), .result = calloc(17, 8)};
            krn_pool_run(pool, 17, chunk_fn, &a);
            for (size_t c = 0; c < 17; c++)
                bad += atomic_load(&a.runs[c]) != 1;
            free(a.runs);
            free(a.result);
        }
        krn_pool_background_wait(pool);
        for (size_t c = 0; c < n; c++)
            bad += atomic_load(&bg.runs[c]) != 1 || bg.result[c] == 0;
        krn_pool_background_wait(pool); /* a second wait: nothing to do */
        free(bg.runs);
        free(bg.result);
    }
    loop_arg last = {.nchunks = 50, .runs = calloc(50, sizeof(atomic_int)), .result = calloc(50, 8)};
    krn_pool_background(pool, 50, chunk_fn, &last);
    krn_pool_free(pool); /* waits for the batch */
    for (size_t c = 0; c < 50; c++)
        bad += atomic_load(&last.runs[c]) != 1;
    free(last.runs);
    free(last.result);
    CHECK_MSG(bad == 0, "threads %d: %zu background jobs or loop chunks ran other than once", threads, bad);
}

int main(void)
{
    CHECK(ovt_cpu_count() >= 1);
    krn_pool *bad = NULL;
    CHECK(krn_pool_new(&bad, 0) == OVT_EINVAL && bad == NULL);
    for (int threads = 1; threads <= 5; threads++) {
        krn_pool *pool;
        CHECK(krn_pool_new(&pool, threads) == 0);
        size_t bad_runs = 0, bad_results = 0;
        for (int loop = 0; loop < 400; loop++) {
            size_t n = (size_t)(loop * 7919 % 97);
            loop_arg a = {.nchunks = n};
            a.runs = calloc(n + 1, sizeof *a.runs);
            a.result = calloc(n + 1, sizeof *a.result);
            krn_pool_run(pool, n, chunk_fn, &a);
            for (size_t c = 0; c < n; c++) {
                uint64_t h = c + 1;
                for (int k = 0; k < 200; k++)
                    h = h * 6364136223846793005u + 1442695040888963407u;
                bad_runs += atomic_load(&a.runs[c]) != 1;
                bad_results += a.result[c] != h;
            }
            free(a.runs);
            free(a.result);
        }
        CHECK_MSG(bad_runs == 0 && bad_results == 0, "threads %d: %zu chunks ran other than once, "
                  "%zu results missing", threads, bad_runs, bad_results);
        krn_pool_free(pool);
        test_nested(threads);
        test_background(threads);
    }
    return check_done();
}
