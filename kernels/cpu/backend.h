#ifndef OVT_KERNELS_CPU_BACKEND_H
#define OVT_KERNELS_CPU_BACKEND_H

/* Internal: the CPU backends behind kernels/ops.h. The ops are written once
 * (kernels/ops_*.c); what differs between backends is only the freedom the
 * numeric contract leaves them (docs/op-bounds.md):
 *   - the order in which one chunk of a sum or dot product is accumulated
 *     (and whether it uses FMA),
 *   - the last bits of a libm result, within the bound the contract takes.
 * cpu:     its own chunked GEMM (kernels/cpu/gemm.h: AVX-512, AVX2+FMA or
 *          portable C, chosen at run time) for chunk products, in the order
 *          of OpenBLAS's DGEMM kernel, which env OVT_GEMM=blas selects
 *          instead (same bits); sequential 4-way interleaved accumulation
 *          for vector chunks; ovt's own exp, log, pow, sin, cos and tanh
 *          (krn_exp, krn_log, krn_pow, krn_sin, krn_cos, krn_tanh below: the
 *          same bits everywhere).
 * ref:     plain loops on one thread, every chunk summed last term first;
 *          the C library's exp, log, pow, sin and cos, krn_tanh.
 * shuffle: every chunk summed in an order drawn from krn_rng (purpose
 *          KRN_RNG_SHUFFLE, the ctx's shuffle_seed), each product fused or
 *          not at random; the C library's exp, log, pow, sin and cos and krn_tanh,
 *          every result moved by up to KRN_SHUFFLE_LIBM_ULP ulps at
 *          random. Slow; for tests.
 * The shuffle backend draws its randomness from a per-thread counter, so a
 * single-threaded run is repeatable but two runs in one process differ. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/contract.h"
#include "kernels/cpu/gemm.h"
#include "kernels/pool.h"
#include "kernels/site.h"

/* What computes the cpu backend's chunk products: its own kernel on the
 * best path this CPU runs, OpenBLAS's DGEMM one chunk at a time, or its own
 * kernel on a given path (for tests and benchmarks). Env OVT_GEMM: unset or
 * "own", "blas", "avx512", "avx2", "c". The own paths give the same bits
 * on every machine; "blas" gives them too where OpenBLAS runs its Haswell
 * DGEMM kernel (Haswell and Zen cores), another honest order elsewhere
 * (its AVX-512 kernels on SkylakeX and Cooperlake cores). */
typedef enum {
    KRN_CPU_GEMM_BEST,
    KRN_CPU_GEMM_BLAS,
    KRN_CPU_GEMM_AVX512,
    KRN_CPU_GEMM_AVX2,
    KRN_CPU_GEMM_C
} krn_cpu_gemm_kind;

typedef struct {
    krn_backend_kind kind;
    uint64_t seed;
    int threads; /* cpu: threads over output tiles (each runs its GEMM on one thread) */
    krn_cpu_gemm_kind gemm; /* cpu: see above */
    krn_pool *pool; /* cpu: the ctx's pool of `threads` threads, lent (krn_parallel);
                       NULL: every loop on the calling thread */
} krn_cpu;

/* The path of the own kernel be->gemm names (BLAS: the best one). */
krn_gemm_isa krn_cpu_gemm_isa(const krn_cpu *be);

typedef enum { KRN_FN_EXP, KRN_FN_LOG, KRN_FN_TANH, KRN_FN_SIN, KRN_FN_COS } krn_libm_fn;

/* How far the shuffle backend moves the C library's result, in ulps: glibc's own
 * error is at most 2 ulps for these functions, so glibc + perturbation
 * stays within the contract's KRN_LIBM_ULP (kernels/contract.h). */
#define KRN_SHUFFLE_LIBM_ULP 2

/* Fills *be from the ctx's config. The cpu backend runs its GEMM output
 * tiles and the ops' other loops on the ctx's threads, the pool the ctx
 * lends it (kernels/site_ctx.h: the same pool as the ctx's sites, so the
 * process has krn_config.threads threads in all, 0 meaning one per CPU),
 * and sets OpenBLAS to one thread, so BLAS and the rounding sites never
 * compete for cores; its GEMM comes from env OVT_GEMM (above). Fails with
 * OVT_EINVAL for the cuda backend (not built yet), an unknown backend, an
 * unknown OVT_GEMM or a path this CPU cannot run, with OVT_ENOMEM if the
 * pool cannot start. */
int krn_cpu_from_ctx(krn_ctx *ctx, krn_cpu *be) OVT_MUST_USE;

/* sum_k x[k*incx]*y[k*incy] for k < n in this backend's order; y == NULL
 * means all y are 1 (a plain sum). One chunk of the contract: n terms in any
 * order. */
double krn_cpu_dot(const krn_cpu *be, const double *x, ptrdiff_t incx, const double *y,
                   ptrdiff_t incy, size_t n);

/* c (m x n, row stride ldc) = op(a) @ op(b), op(a) m x k, op(b) k x n, where
 * a is stored m x k (lda) or, with ta, k x m; b is stored k x n (ldb) or,
 * with tb, n x k. Overwrites c (beta = 0). One chunk of the contract. */
void krn_cpu_gemm(const krn_cpu *be, double *c, size_t ldc, bool ta, const double *a, size_t lda,
                  bool tb, const double *b, size_t ldb, size_t m, size_t n, size_t k);

/* The cpu backend only: c += op(a) @ op(b) (OpenBLAS with beta = 1), each
 * element's product summed from zero in the kernel and then added to c in
 * one FP64 addition, the same value as krn_cpu_gemm into a buffer and an
 * addition afterwards (OpenBLAS's kernels add alpha * acc to C once after
 * their k loop; k <= KRN_GEMM_CHUNK is a single k block;
 * test_ops_replay checks the identity). */
void krn_cpu_gemm_add(const krn_cpu *be, double *c, size_t ldc, bool ta, const double *a,
                      size_t lda, bool tb, const double *b, size_t ldb, size_t m, size_t n,
                      size_t k);

/* fn(x) with this backend's libm; and pow(x, y). tanh is krn_tanh on
 * every backend (shuffle moves it as it moves the C library's exp and
 * log); exp, log, pow, sin and cos are krn_exp, krn_log, krn_pow, krn_sin
 * and krn_cos on cpu, the C library's on ref and shuffle. */
double krn_cpu_libm(const krn_cpu *be, krn_libm_fn fn, double x);
double krn_cpu_pow(const krn_cpu *be, double x, double y);

/* ovt's tanh (kernels/cpu/tanh.c): fdlibm's algorithm with the fused
 * multiply-adds where glibc 2.36's x86-64 FMA build has them, so it gives
 * that glibc's values, on every machine (it calls no library function but
 * fma). Its error, as glibc's, is at most 2.11 ulps where test_tanh
 * looked (the contract admits KRN_LIBM_ULP). krn_tanh_array replaces x[0 .. n) by their krn_tanh, eight
 * at a time with AVX-512F where the CPU has it (the same operations per
 * element: the same values). krn_tanh_force_portable(true), for tests,
 * turns the AVX-512 loop off. */
double krn_tanh(double x);

/* ovt's exp, log and pow (kernels/cpu/libm.c), the cpu backend's: IEEE
 * + - * / and fma on double-double values and exact hex constants, no
 * library call, so the same bits on every machine and compiler. Each
 * rounds a double-double of relative error about 2^-80 (pow: 2^-70 where
 * |y log x| nears 745) once: correctly rounded on every input test_libm
 * checks against MPFR, off by one ulp only where the exact value lies
 * that close to a midpoint. Special values as C17 Annex F has them, except
 * that errno is not set and every invalid result is the same NaN (NAN). */
double krn_exp(double x);
double krn_log(double x);
double krn_pow(double x, double y);

/* ovt's sin and cos (kernels/cpu/libm.c, the same way): x reduced by the
 * nearest multiple of pi/2 in double-double (pi/2 in three parts), so that
 * near a zero of sin or cos the result is as accurate, relative to itself,
 * as elsewhere; a double-double Taylor series on [-pi/4, pi/4], rounded
 * once. For |x| <= 2^20 (rotary embeddings need |x| < 2^16): within 1 ulp
 * and correctly rounded on nearly every argument (test_libm measures it
 * against MPFR: docs/numeric-contract.md). NaN (NAN, or x's NaN quietened)
 * for an infinite or NaN x and for every finite |x| > 2^20, which this
 * reduction does not cover: a caller there gets a NaN, never a wrong
 * number. sin(-0) = -0, cos(+-0) = 1. */
double krn_sin(double x);
double krn_cos(double x);
void krn_tanh_array(double *x, size_t n);
void krn_tanh_force_portable(bool on);

#endif
