#ifndef OVT_KERNELS_SITE_CTX_H
#define OVT_KERNELS_SITE_CTX_H

/* Internal to kernels/: what a krn_ctx lends the backends that run its ops:
 * its threads and the device state of the cuda backend.
 * The ctx holds its threads for the step on the process's one pool: it
 * runs the large sites' chunks, krn_ctx_parallel's pieces and, lent to the
 * cpu backend (krn_cpu_from_ctx), the GEMM tiles and the ops' other loops,
 * so `--threads N` is N threads in all. The ops run their loops and their
 * sites one after the other on the thread that owns the ctx, so a ctx
 * never has two loops at once. */

#include "common/err.h"
#include "kernels/pool.h"
#include "kernels/site.h"

/* The ctx's thread count: krn_config.threads, 0 meaning one per CPU the
 * process may use (ovt_cpu_count), at most KRN_MAX_THREADS. */
#define KRN_MAX_THREADS 64
int krn_ctx_threads(const krn_ctx *ctx);

/* The pool the ctx runs on: the process's (krn_pool_attach), attached on
 * first use and detached when the ctx is freed, so every ctx of a process
 * (the auditor's two runners, the demo's) shares one set of threads. The
 * ctx runs its loops on krn_ctx_threads of them (krn_pool_run_on); *pool
 * is NULL when the ctx runs on one thread. OVT_ENOMEM if the pool cannot
 * start. */
int krn_ctx_pool(krn_ctx *ctx, krn_pool **pool) OVT_MUST_USE;

/* The backend state a ctx carries (the cuda backend's device, streams and
 * buffers); freed with the ctx by device_free. */
void *krn_ctx_device(const krn_ctx *ctx);
void krn_ctx_set_device(krn_ctx *ctx, void *device, void (*device_free)(void *device));

/* The table of a ctx's tensor memory (kernels/mem.c), freed with the ctx
 * by mem_free, before the device state. */
void *krn_ctx_mem(const krn_ctx *ctx);
void krn_ctx_set_mem(krn_ctx *ctx, void *mem, void (*mem_free)(krn_ctx *ctx, void *mem));

/* Creates the cuda backend's state for a new ctx (kernels/cuda/device.cu):
 * fails with a clear message when ovt was built without CUDA or no device is
 * usable. */
int krn_cuda_attach(krn_ctx *ctx) OVT_MUST_USE;

#endif
