/* The ops' loops on the ctx's threads (parallel.h). */
#include "kernels/parallel.h"

#include "kernels/pool.h"

int krn_parallel(const krn_cpu *be, size_t nchunks, void (*fn)(void *arg, size_t chunk), void *arg)
{
    if (be->kind == KRN_BACKEND_CPU && be->threads > 1 && be->pool != NULL)
        krn_pool_run_on(be->pool, be->threads, nchunks, fn, arg);
    else /* ref, shuffle: one thread, in chunk order */
        for (size_t c = 0; c < nchunks; c++)
            fn(arg, c);
    return 0;
}

typedef struct {
    size_t n, per;
    void (*fn)(void *arg, size_t i0, size_t i1);
    void *arg;
} ranges_job;

static void range_chunk(void *arg, size_t c)
{
    const ranges_job *j = arg;
    size_t i0 = c * j->per;
    j->fn(j->arg, i0, j->n - i0 < j->per ? j->n : i0 + j->per);
}

int krn_parallel_ranges(const krn_cpu *be, size_t n, size_t per,
                        void (*fn)(void *arg, size_t i0, size_t i1), void *arg)
{
    ranges_job j = {.n = n, .per = per ? per : 1, .fn = fn, .arg = arg};
    return krn_parallel(be, (n + j.per - 1) / j.per, range_chunk, &j);
}
