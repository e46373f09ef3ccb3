/* The process's one pool (pool.h, krn_pool_attach): every kernel context
 * of a process runs on the same pool, which holds the most threads any of
 * them asked for; freeing one context leaves the others' loops and
 * background jobs working; the last context's free ends it (a new context
 * then starts another). Contexts on two threads at once share it too: a
 * loop that finds the workers busy runs on its caller, every index once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/site.h"
#include "kernels/site_ctx.h"

#define N 97

typedef struct {
    atomic_int runs[N];
} count_arg;

static void count_fn(void *p, size_t i)
{
    count_arg *a = p;
    volatile uint64_t h = i; /* a little work, so that loops of two threads overlap */
    for (int k = 0; k < 2000; k++)
        h = h * 6364136223846793005u + 1442695040888963407u;
    atomic_fetch_add(&a->runs[i], 1);
}

static krn_ctx *ctx_of(int threads)
{
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = 32, .threads = threads};
    krn_ctx *ctx = NULL;
    CHECK_MSG(krn_ctx_new(&ctx, &kc) == 0, "%s", ovt_errmsg());
    return ctx;
}

/* Every index of a loop (and, when background, of a batch) ran once. */
static bool runs_once(krn_ctx *ctx, bool background)
{
    count_arg a = {0};
    if (background) {
        int rc = krn_ctx_background(ctx, N, count_fn, &a);
        if (rc < 0)
            return false;
        if (rc == 0) /* no pool: the caller runs the jobs */
            for (size_t i = 0; i < N; i++)
                count_fn(&a, i);
        krn_ctx_background_wait(ctx);
    } else if (krn_ctx_parallel(ctx, N, count_fn, &a) != 0) {
        return false;
    }
    for (size_t i = 0; i < N; i++)
        if (atomic_load(&a.runs[i]) != 1)
            return false;
    return true;
}

static void test_shared(void)
{
    krn_ctx *a = ctx_of(2), *b = ctx_of(3), *one = ctx_of(1);
    krn_pool *pa = NULL, *pb = NULL, *p1 = NULL;
    CHECK(a && b && one);
    CHECK(krn_ctx_pool(a, &pa) == 0 && krn_ctx_pool(b, &pb) == 0 && krn_ctx_pool(one, &p1) == 0);
    CHECK(pa != NULL && pa == pb); /* one pool for the process */
    CHECK(p1 == NULL);             /* a ctx of one thread runs on its caller */
    CHECK(krn_ctx_threads(a) == 2 && krn_ctx_threads(b) == 3);
    for (int r = 0; r < 20; r++) {
        CHECK(runs_once(a, false) && runs_once(b, false) && runs_once(one, false));
        CHECK(runs_once(a, true) && runs_once(b, true));
    }
    /* a's background batch still open while b runs loops and starts its own */
    count_arg bg = {0};
    CHECK(krn_ctx_background(a, N, count_fn, &bg) == 1);
    CHECK(runs_once(b, false) && runs_once(b, true));
    krn_ctx_background_wait(a);
    for (size_t i = 0; i < N; i++)
        CHECK(atomic_load(&bg.runs[i]) == 1);

    krn_ctx_free(b); /* a keeps the pool */
    for (int r = 0; r < 20; r++)
        CHECK(runs_once(a, false) && runs_once(a, true));
    krn_ctx *c = ctx_of(4); /* a larger one joins: the pool grows, a keeps working */
    krn_pool *pc = NULL;
    CHECK(krn_ctx_pool(c, &pc) == 0 && pc == pa);
    for (int r = 0; r < 20; r++)
        CHECK(runs_once(a, false) && runs_once(c, false) && runs_once(c, true));
    krn_ctx_free(a);
    krn_ctx_free(c);
    /* the last free ended the pool; a new ctx starts one */
    krn_ctx *d = ctx_of(2);
    krn_pool *pd = NULL;
    CHECK(krn_ctx_pool(d, &pd) == 0 && pd != NULL);
    CHECK(runs_once(d, false) && runs_once(d, true));
    krn_ctx_free(d);
    krn_ctx_free(one);
}

/* A thread of its own driving a ctx of its own: loops and batches. */
static void *drive(void *p)
{
    krn_ctx *ctx = p;
    for (int r = 0; r < 200; r++)
        if (!runs_once(ctx, false) || !runs_once(ctx, r % 4 == 0))
            return p; /* failed */
    return NULL;
}

static void test_two_threads(void)
{
    krn_ctx *a = ctx_of(3), *b = ctx_of(2);
    pthread_t ta, tb;
    void *ra = a, *rb = b;
    CHECK(pthread_create(&ta, NULL, drive, a) == 0);
    CHECK(pthread_create(&tb, NULL, drive, b) == 0);
    CHECK(pthread_join(ta, &ra) == 0 && ra == NULL);
    CHECK(pthread_join(tb, &rb) == 0 && rb == NULL);
    krn_pool *pa = NULL, *pb = NULL;
    CHECK(krn_ctx_pool(a, &pa) == 0 && krn_ctx_pool(b, &pb) == 0 && pa == pb && pa != NULL);
    krn_ctx_free(a);
    krn_ctx_free(b);
}

int main(void)
{
    test_shared();
    test_two_threads();
    return check_done();
}
