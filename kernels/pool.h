#ifndef OVT_KERNELS_POOL_H
#define OVT_KERNELS_POOL_H

/* A small thread pool for splitting one loop into chunks (kernels/ internal).
 *
 * The calling thread always works too, and it waits only for chunks that a
 * worker has actually started: a worker that is not scheduled in time (on a
 * busy machine, or while BLAS threads still spin) simply finds no chunk left.
 * A team-and-barrier scheme (an OpenMP parallel region) would instead stall
 * the whole loop until every thread has run. Chunks are claimed in
 * increasing order from one counter; which thread runs which chunk is not
 * deterministic, so callers write each chunk's results to that chunk's own
 * place and combine them in chunk order. */

#include <limits.h>
#include <stddef.h>

#include "common/err.h"

typedef struct krn_pool krn_pool;

/* A pool that runs loops on the caller plus threads - 1 workers. */
int krn_pool_new(krn_pool **out, int threads) OVT_MUST_USE;
void krn_pool_free(krn_pool *pool);

/* The process's one pool, shared by every kernel context (site_ctx.h): the
 * first attach starts it, one that asks for more threads than it has adds
 * workers (it holds the most any attach asked for), and the last detach
 * frees it. Each user runs its loops with its own thread count
 * (krn_pool_run_on), so sharing changes no user's number of threads, and
 * no result: a loop's chunks never depend on which threads ran them.
 * Users on different threads may share it: a loop started while another
 * thread's loop has the workers runs on its caller alone. */
int krn_pool_attach(krn_pool **out, int threads) OVT_MUST_USE;
void krn_pool_detach(krn_pool *pool);

/* Every thread of the pool (krn_pool_run_on, krn_pool_background_on). */
#define KRN_POOL_ALL INT_MAX

/* Calls fn(arg, c) once for every c in [0, nchunks), on the caller and any
 * idle workers, and returns when all calls have returned. One loop at a time
 * per pool has the workers: a loop started on another thread while one is
 * under way runs on its caller alone. A loop started from inside a loop of the same pool (fn
 * calling krn_pool_run on it) runs on the calling thread alone: the pool's
 * threads are busy with the outer loop, and one loop's counter and
 * function are all the pool holds. */
void krn_pool_run(krn_pool *pool, size_t nchunks, void (*fn)(void *arg, size_t chunk), void *arg);

/* krn_pool_run on at most `threads` threads (the caller and threads - 1 of
 * the workers); a loop that another thread started and that still runs
 * leaves this one to its caller alone. */
void krn_pool_run_on(krn_pool *pool, int threads, size_t nchunks, void (*fn)(void *arg, size_t chunk),
                     void *arg);

/* Background jobs: fn(arg, j) for every j in [0, njobs), run by workers
 * while they have no loop to run (a step's serial parts: a worker that has
 * just run a loop first waits 0.2 ms for the next), one job at a time, so
 * a loop that starts waits for at most one job of a worker (which joins
 * it after, if it is still open). On Linux a worker runs its jobs at
 * SCHED_IDLE (CPU time nothing else wants, other processes' included) and
 * a loop's chunks at normal priority, where the system lets a thread come
 * back from SCHED_IDLE (tried once per pool). The owner
 * thread runs none of them until krn_pool_background_wait, which runs the
 * jobs no worker took as a loop on every thread and returns once all have
 * returned. One background batch at a time; a new one waits for the last.
 * The caller keeps fn's inputs unchanged until the wait. */
void krn_pool_background(krn_pool *pool, size_t njobs, void (*fn)(void *arg, size_t job), void *arg);
void krn_pool_background_wait(krn_pool *pool);

/* krn_pool_background on at most `threads` threads: threads - 1 workers at
 * once, and the wait's loop on threads. A wait returns once every batch
 * started before it has returned, whoever started it. */
void krn_pool_background_on(krn_pool *pool, int threads, size_t njobs, void (*fn)(void *arg, size_t job),
                            void *arg);

#endif
