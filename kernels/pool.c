/* The kernels' thread pool (pool.h). Workers sleep on a condition variable
 * and wake for each loop; chunks are claimed with one atomic counter; the
 * caller waits for the workers that joined the loop, never for one that did
 * not get to run. */
#include "kernels/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/scratch.h"

struct krn_pool {
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* workers: a new loop, or stop */
    pthread_cond_t settled; /* caller: the last joined worker left */
    pthread_t *threads;
    int nworkers;
    bool stop;
    uint64_t generation; /* bumped for every loop */
    bool looping;        /* a loop is under way (another thread's loop then runs on its caller alone) */
    bool open;           /* workers may still join the current loop */
    int inside;          /* workers inside the current loop */
    int joiners;         /* how many workers may join it (its thread count - 1) */
    void (*fn)(void *, size_t);
    void *arg;
    size_t nchunks;
    atomic_size_t next; /* the next unclaimed chunk */
    /* krn_pool_background's batch */
    bool bg_on; /* workers may claim its jobs */
    int bg_inside; /* workers running one of its jobs */
    void (*bg_fn)(void *, size_t);
    void *bg_arg;
    size_t bg_njobs;
    int bg_threads;        /* the batch's thread count: at most bg_threads - 1 workers run its jobs */
    int bg_draining;       /* krn_pool_background_wait calls running what is left of it */
    atomic_size_t bg_next; /* the next unclaimed job */
    bool idle_ok;          /* a worker may run its jobs at SCHED_IDLE and come back */
};

/* The pool whose chunks this thread runs (a worker's own pool, or the one
 * the caller is in a loop of), or NULL: krn_pool_run on it from inside a
 * chunk runs the inner loop on this thread alone (pool.h). */
static _Thread_local const krn_pool *running;

static void run_chunks(krn_pool *pool, void (*fn)(void *, size_t), void *arg, size_t nchunks)
{
    for (;;) {
        size_t c = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (c >= nchunks)
            return;
        fn(arg, c);
    }
}

static bool background_ready(krn_pool *pool)
{
    return pool->bg_on && pool->bg_inside < pool->bg_threads - 1 &&
           atomic_load_explicit(&pool->bg_next, memory_order_relaxed) < pool->bg_njobs;
}

/* One background job, taken with the mutex held (released while it runs). */
static void background_job(krn_pool *pool)
{
    size_t j = atomic_fetch_add_explicit(&pool->bg_next, 1, memory_order_relaxed);
    if (j >= pool->bg_njobs)
        return;
    pool->bg_inside++;
    void (*fn)(void *, size_t) = pool->bg_fn;
    void *arg = pool->bg_arg;
    pthread_mutex_unlock(&pool->mu);
    fn(arg, j);
    pthread_mutex_lock(&pool->mu);
    if (--pool->bg_inside == 0)
        pthread_cond_broadcast(&pool->settled);
}

/* How long a worker that has run a loop waits for the next one before it
 * takes background jobs: a step's loops follow each other within
 * microseconds, and a worker busy with a job when one starts leaves its
 * chunks to the others; a longer gap is a serial part of the step, which
 * the jobs fill. */
#define BACKGROUND_AFTER_NS 200000

/* Waits, mutex held, until a loop starts or (false) the worker has seen
 * none for BACKGROUND_AFTER_NS. */
static bool loop_soon(krn_pool *pool, uint64_t seen)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += BACKGROUND_AFTER_NS;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!pool->stop && pool->generation == seen)
        if (pthread_cond_timedwait(&pool->wake, &pool->mu, &until) != 0)
            break;
    return pool->stop || pool->generation != seen;
}

/* Linux: the calling thread alone at SCHED_IDLE (it runs only on CPU time
 * nothing else wants, the step's threads and other processes included) or
 * back at SCHED_OTHER. */
static bool set_idle(bool idle)
{
    const struct sched_param none = {.sched_priority = 0};
    return pthread_setschedparam(pthread_self(), idle ? SCHED_IDLE : SCHED_OTHER, &none) == 0;
}

/* Whether a thread may go to SCHED_IDLE and come back (an unprivileged
 * thread may be refused the way back under a low RLIMIT_NICE): tried on a
 * thread of its own, which then ends. */
static void *idle_probe(void *out)
{
    *(bool *)out = set_idle(true) && set_idle(false);
    return NULL;
}

static bool idle_allowed(void)
{
    pthread_t t;
    bool ok = false;
    if (pthread_create(&t, NULL, idle_probe, &ok) != 0)
        return false;
    pthread_join(t, NULL);
    return ok;
}

static void *worker(void *p)
{
    krn_pool *pool = p;
    uint64_t seen = 0;
    bool after_loop = false; /* the last thing this worker ran was a loop's chunks */
    bool idle = false;       /* this thread is at SCHED_IDLE (background jobs) */
    running = pool;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->generation == seen && !background_ready(pool))
            pthread_cond_wait(&pool->wake, &pool->mu);
        if (pool->stop)
            break;
        if (pool->generation == seen && after_loop && loop_soon(pool, seen))
            continue;
        after_loop = false;
        if (pool->generation == seen) { /* no new loop: a background job */
            if (pool->idle_ok && !idle)
                idle = set_idle(true);
            if (background_ready(pool))
                background_job(pool);
            continue;
        }
        if (idle)
            idle = !set_idle(false); /* a loop's chunks at normal priority */
        seen = pool->generation;
        after_loop = true;
        if (!pool->open || pool->inside >= pool->joiners)
            continue; /* woke too late (the loop is finished or finishing), or the loop has its threads */
        pool->inside++;
        void (*fn)(void *, size_t) = pool->fn;
        void *arg = pool->arg;
        size_t nchunks = pool->nchunks;
        pthread_mutex_unlock(&pool->mu);
        run_chunks(pool, fn, arg, nchunks);
        pthread_mutex_lock(&pool->mu);
        if (--pool->inside == 0)
            pthread_cond_broadcast(&pool->settled);
    }
    pthread_mutex_unlock(&pool->mu);
    krn_scratch_release(); /* the buffers the loops grew on this thread (scratch.h) */
    return NULL;
}

/* Starts workers until the pool has threads - 1 (the caller's mutex held
 * when the pool already runs loops: a worker reads nworkers under it). A
 * worker started while a loop is open may join it, as any late worker. */
static int add_workers(krn_pool *pool, int threads)
{
    pthread_t *t = realloc(pool->threads, ((size_t)threads - 1) * sizeof *t);
    if (t == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for a thread pool of %d", threads);
    pool->threads = t;
    while (pool->nworkers < threads - 1) {
        if (pthread_create(&pool->threads[pool->nworkers], NULL, worker, pool) != 0)
            return ovt_fail(OVT_ENOMEM, "cannot start thread %d of a pool of %d", pool->nworkers + 2, threads);
        pool->nworkers++;
    }
    return 0;
}

int krn_pool_new(krn_pool **out, int threads)
{
    *out = NULL;
    if (threads < 1)
        return ovt_fail(OVT_EINVAL, "a thread pool needs at least one thread, not %d", threads);
    krn_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for a thread pool");
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->settled, NULL);
    atomic_init(&pool->next, 0);
    atomic_init(&pool->bg_next, 0);
    if (threads > 1) {
        pool->idle_ok = idle_allowed();
        int rc = add_workers(pool, threads);
        if (rc < 0) {
            krn_pool_free(pool);
            return rc;
        }
    }
    *out = pool;
    return 0;
}

/* ---- the process's pool (krn_pool_attach) ---- */

static pthread_mutex_t process_mu = PTHREAD_MUTEX_INITIALIZER;
static krn_pool *process_pool; /* NULL while nothing is attached */
static int process_users;

int krn_pool_attach(krn_pool **out, int threads)
{
    *out = NULL;
    if (threads < 1)
        return ovt_fail(OVT_EINVAL, "a thread pool needs at least one thread, not %d", threads);
    pthread_mutex_lock(&process_mu);
    int rc = 0;
    if (process_pool == NULL)
        rc = krn_pool_new(&process_pool, threads);
    else if (threads > process_pool->nworkers + 1) {
        if (process_pool->nworkers == 0)
            process_pool->idle_ok = idle_allowed();
        pthread_mutex_lock(&process_pool->mu);
        rc = add_workers(process_pool, threads);
        pthread_mutex_unlock(&process_pool->mu);
    }
    if (rc == 0) {
        process_users++;
        *out = process_pool;
    }
    pthread_mutex_unlock(&process_mu);
    return rc;
}

void krn_pool_detach(krn_pool *pool)
{
    if (pool == NULL)
        return;
    pthread_mutex_lock(&process_mu);
    if (pool == process_pool && process_users > 0 && --process_users == 0) {
        krn_pool_free(process_pool);
        process_pool = NULL;
    }
    pthread_mutex_unlock(&process_mu);
}

void krn_pool_free(krn_pool *pool)
{
    if (pool == NULL)
        return;
    krn_pool_background_wait(pool);
    pthread_mutex_lock(&pool->mu);
    pool->stop = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int t = 0; t < pool->nworkers; t++)
        pthread_join(pool->threads[t], NULL);
    free(pool->threads);
    pthread_cond_destroy(&pool->settled);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

static void run_alone(size_t nchunks, void (*fn)(void *arg, size_t chunk), void *arg)
{
    for (size_t c = 0; c < nchunks; c++)
        fn(arg, c);
}

void krn_pool_run(krn_pool *pool, size_t nchunks, void (*fn)(void *arg, size_t chunk), void *arg)
{
    krn_pool_run_on(pool, KRN_POOL_ALL, nchunks, fn, arg);
}

void krn_pool_run_on(krn_pool *pool, int threads, size_t nchunks, void (*fn)(void *arg, size_t chunk), void *arg)
{
    if (threads <= 1 || nchunks <= 1 || running == pool) {
        run_alone(nchunks, fn, arg);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    if (pool->nworkers == 0 || pool->looping) { /* another thread's loop has the workers */
        pthread_mutex_unlock(&pool->mu);
        run_alone(nchunks, fn, arg);
        return;
    }
    pool->looping = true;
    pool->joiners = threads - 1;
    pool->fn = fn;
    pool->arg = arg;
    pool->nchunks = nchunks;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    pool->open = true;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);

    const krn_pool *outer = running;
    running = pool;
    run_chunks(pool, fn, arg, nchunks);
    running = outer;

    /* Every chunk is claimed. Close the loop to latecomers, then wait for
     * the workers that joined it to finish their last chunk. The mutex
     * orders their writes before our return. */
    pthread_mutex_lock(&pool->mu);
    pool->open = false;
    while (pool->inside > 0)
        pthread_cond_wait(&pool->settled, &pool->mu);
    pool->looping = false;
    pthread_mutex_unlock(&pool->mu);
}

void krn_pool_background(krn_pool *pool, size_t njobs, void (*fn)(void *arg, size_t job), void *arg)
{
    krn_pool_background_on(pool, KRN_POOL_ALL, njobs, fn, arg);
}

/* Whether a batch is open or still has jobs running (mutex held). */
static bool background_busy(const krn_pool *pool)
{
    return pool->bg_on || pool->bg_inside > 0 || pool->bg_draining > 0;
}

void krn_pool_background_on(krn_pool *pool, int threads, size_t njobs, void (*fn)(void *arg, size_t job), void *arg)
{
    pthread_mutex_lock(&pool->mu);
    while (background_busy(pool)) { /* the last batch first: its jobs read its fn and njobs */
        pthread_mutex_unlock(&pool->mu);
        krn_pool_background_wait(pool);
        pthread_mutex_lock(&pool->mu);
    }
    pool->bg_threads = threads < pool->nworkers + 1 ? threads : pool->nworkers + 1;
    pool->bg_fn = fn;
    pool->bg_arg = arg;
    pool->bg_njobs = njobs;
    atomic_store_explicit(&pool->bg_next, 0, memory_order_relaxed);
    pool->bg_on = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
}

/* A chunk of the final loop: background jobs until none is left. */
static void background_drain(void *p, size_t chunk)
{
    (void)chunk;
    krn_pool *pool = p;
    for (;;) {
        size_t j = atomic_fetch_add_explicit(&pool->bg_next, 1, memory_order_relaxed);
        if (j >= pool->bg_njobs)
            return;
        pool->bg_fn(pool->bg_arg, j);
    }
}

void krn_pool_background_wait(krn_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    bool on = pool->bg_on;
    int threads = pool->bg_threads;
    pool->bg_on = false; /* workers claim no more; the loop below takes the rest */
    pool->bg_draining += on;
    pthread_mutex_unlock(&pool->mu);
    if (on)
        krn_pool_run_on(pool, threads, (size_t)threads, background_drain, pool);
    pthread_mutex_lock(&pool->mu);
    if (on && --pool->bg_draining == 0)
        pthread_cond_broadcast(&pool->settled);
    while (pool->bg_inside > 0 || pool->bg_draining > 0) /* another thread's wait may be running our jobs */
        pthread_cond_wait(&pool->settled, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}
