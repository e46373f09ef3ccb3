/* bench_step: issue 5's figures for one training step. From the same state
 * and batch (random tokens), interleaved in one run:
 *   RECORD  the trainer's controlled-rounding step (cpu backend, log written),
 *   PLAIN   the same ops with sites that only convert (float)x (KRN_PLAIN: no
 *           band check, no log): a plain FP64-compute step as the baseline;
 * the median of each, their ratio, and the floor: the step's matmul and
 * attention FLOPs at the OpenBLAS DGEMM rate measured in the same run (the
 * step's FC shape, the same thread count). Also the rounding log's encoded
 * bytes per step, the bits of choice (elements with d <= delta, where either
 * rounding is honest) and the time of trn_state_hash on the state after
 * the step. A third step per pair, RECORD with OVT_GEMM=blas (the chunked
 * products through OpenBLAS one chunk at a time, the cpu backend's path
 * before issue 15), gives the before/after ratio in the same run and shows
 * that the two paths give the same rounding log and stateHash.
 *
 * Every step runs on a step runner (trainer/runner.h), one per mode; its
 * time is the runner's step seconds (the step, not the batch's making).
 *
 * With --loop K, instead: K consecutive RECORD steps from the same start (the
 * schedule's batches 1..K), each
 * followed by its stateHash, twice per repetition in alternating order: once
 * hashing after each step (the trainer before issue 15's overlap) and once
 * with trn_state_hash_begin, the hash running during the next step's forward
 * and backward as `ovt train` does now; seconds per step with the hash, and
 * whether both give the same K hashes.
 *
 *   bench_step [--model gpt2-small] [--batch 4] [--seq 64] [--threads 2] [--reps 3] [--loop K]
 * The DGEMM rate is measured before every pair of steps and its median
 * taken, so all three figures see the same load on a shared machine.
 * Results are written down in docs/bench-trainer.md. */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/gemm.h"
#include "kernels/rlog.h"
#include "kernels/rng.h"
#include "kernels/site.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"

#include "bench_setup.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_step: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

/* The counters of the last RECORD step (bits of choice). */
static krn_stats last_record;

/* OVT_GEMM as the caller found it, for the steps that do not force blas. */
static const char *gemm_env;

/* One timed step of r (its mode) from a fresh copy of init; the state
 * after it stays r's (trn_runner_state). blas: the chunked products
 * through OpenBLAS (OVT_GEMM=blas) for this step; record: r is RECORD's
 * runner (its counters are kept in last_record). */
static double timed_step(trn_runner *r, const trn_state *init, bool record, double *cpu, bool blas)
{
    if (blas)
        setenv("OVT_GEMM", "blas", 1);
    else if (gemm_env)
        setenv("OVT_GEMM", gemm_env, 1);
    else
        unsetenv("OVT_GEMM");
    trn_runner_result res;
    double c0 = cpu_now();
    if (bench_runner_step(r, init, &res))
        fail(record ? "RECORD step" : "PLAIN step");
    *cpu = cpu_now() - c0;
    if (record)
        last_record = res.info.stats;
    if (blas && gemm_env)
        setenv("OVT_GEMM", gemm_env, 1);
    else if (blas)
        unsetenv("OVT_GEMM");
    return res.seconds;
}

/* One core's FP64 FMA rate in GFLOP/s: twelve independent chains of
 * 256-bit (avx512: 512-bit) fused multiply-adds kept in registers (the
 * empty asm only makes the compiler keep every chain), for
 * about 0.2 s: the most any kernel can reach here, against which the
 * DGEMM rate the floor uses can be read. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FMA_CHAINS 12
__attribute__((target("avx2,fma"), noinline)) static double fma_peak_avx2(void)
{
    __m256d acc[FMA_CHAINS], x = _mm256_set1_pd(0.999999), y = _mm256_set1_pd(1e-7);
    for (int c = 0; c < FMA_CHAINS; c++)
        acc[c] = _mm256_set1_pd(c);
    const long iters = 20000000;
    double t0 = now();
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int c = 0; c < FMA_CHAINS; c++)
            acc[c] = _mm256_fmadd_pd(acc[c], x, y);
        __asm__ volatile("" ::"x"(acc[0]), "x"(acc[1]), "x"(acc[2]), "x"(acc[3]), "x"(acc[4]), "x"(acc[5]),
                         "x"(acc[6]), "x"(acc[7]), "x"(acc[8]), "x"(acc[9]), "x"(acc[10]), "x"(acc[11]));
    }
    double t = now() - t0;
    return (double)iters * FMA_CHAINS * 8 / t / 1e9;
}

__attribute__((target("avx512f"), noinline)) static double fma_peak_avx512(void)
{
    __m512d acc[FMA_CHAINS], x = _mm512_set1_pd(0.999999), y = _mm512_set1_pd(1e-7);
    for (int c = 0; c < FMA_CHAINS; c++)
        acc[c] = _mm512_set1_pd(c);
    const long iters = 10000000;
    double t0 = now();
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int c = 0; c < FMA_CHAINS; c++)
            acc[c] = _mm512_fmadd_pd(acc[c], x, y);
        __asm__ volatile("" ::"v"(acc[0]), "v"(acc[1]), "v"(acc[2]), "v"(acc[3]), "v"(acc[4]), "v"(acc[5]),
                         "v"(acc[6]), "v"(acc[7]), "v"(acc[8]), "v"(acc[9]), "v"(acc[10]), "v"(acc[11]));
    }
    double t = now() - t0;
    return (double)iters * FMA_CHAINS * 16 / t / 1e9;
}
#endif

/* The better of the two paths this CPU runs (0 where neither). */
static double fma_peak(void)
{
    double best = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best = fma_peak_avx2();
    if (__builtin_cpu_supports("avx512f")) {
        double p = fma_peak_avx512();
        best = p > best ? p : best;
    }
#endif
    return best;
}

/* Seconds of k RECORD steps of r from init, each with its stateHash (into
 * hashes[0..k)): after the step, or overlapped with the next one; or with
 * no hash at all (hashes NULL: the step alone, for the hash's share). */
static double timed_loop(trn_runner *r, const trn_state *init, int k, bool overlap, ovt_hash *hashes)
{
    if (trn_runner_copy_state(r, init))
        fail("setup");
    trn_runner_result res;
    uint64_t at;
    double t0 = now();
    for (int i = 0; i < k; i++) {
        if (trn_runner_step(r, &res))
            fail("RECORD step");
        if (!hashes)
            continue;
        if (overlap && trn_runner_hash_end(r, &hashes[i ? i - 1 : 0], &at) &&
            at != trn_runner_state(r)->step - 1)
            fail("the overlapped hash is of the wrong step");
        if (!overlap)
            trn_state_hash(&hashes[i], trn_runner_state(r));
        else if (trn_runner_hash_begin(r))
            fail("hash");
    }
    if (hashes && overlap && !trn_runner_hash_end(r, &hashes[k - 1], &at))
        fail("no overlapped hash");
    return now() - t0;
}

int main(int argc, char **argv)
{
    bench_shape shape = {.model = "gpt2-small", .B = 4, .T = 64, .threads = 2};
    int reps = 3, loop = 0, state_hash = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (bench_shape_flag(&shape, argv[i], argv[i + 1]))
            continue;
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--loop"))
            loop = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--state-hash"))
            state_hash = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_step [--model NAME] [--batch B] [--seq T] [--threads N] [--reps R] "
                            "[--loop K] [--state-hash 1|3]\n");
            return 2;
        }
    }
    const char *model = shape.model;
    uint32_t B = shape.B, T = shape.T;
    int threads = shape.threads;
    if (reps < 1 || reps > 32 || threads < 1 || B < 1 || T < 1 || loop < 0 || loop > 16) {
        fprintf(stderr, "bench_step: reps must be 1..32, loop 0..16, threads, batch and seq positive\n");
        return 2;
    }
    trn_model_config m;
    if (trn_model_preset(&m, model))
        fail("--model");
    bench_step_inputs in;
    const char *what;
    if (bench_step_inputs_new(&in, &m, B, T, &what))
        fail(what);
    if (state_hash) { /* the same state under another stateHash version (its config) */
        trn_run_config rc = in.init->config;
        rc.state_hash = (uint32_t)state_hash;
        trn_state *other;
        if (trn_state_new(&other, &rc))
            fail("--state-hash");
        trn_state_copy(other, in.init);
        trn_state_free(in.init);
        in.init = other;
        in.rc = rc;
    }
    trn_state *init = in.init;
    /* a runner per mode: RECORD (also the OpenBLAS steps) and PLAIN; a
     * runner's state is released after each step, so that one copy of the
     * state lives beside init, as in the trainer */
    trn_runner *rec_r = NULL, *plain_r = NULL;
    if (bench_runner_open(&rec_r, &in, KRN_RECORD, threads) || bench_runner_open(&plain_r, &in, KRN_PLAIN, threads))
        fail("setup");
    krn_rlog *log = trn_runner_log(rec_r);
    uint8_t *bytes = NULL, *blas_bytes = NULL;
    size_t len = 0, blas_len = 0;
    gemm_env = getenv("OVT_GEMM");
    double load[3] = {-1, -1, -1};
    if (getloadavg(load, 3) < 0)
        load[0] = -1;

    /* warm-up (first touch of the workspace and the scratch buffers) */
    double c_rec[32], c_plain[32], c_blas[32], crates[32];
    timed_step(rec_r, init, true, c_rec, false);
    if (loop > 0) {
        double t_seq[32], t_ovl[32], t_none[32];
        bool same = true;
        for (int r = 0; r < reps; r++) {
            ovt_hash hs[16], ho[16];
            for (int o = 0; o < 3; o++) {
                int how = (o + r) % 3; /* rotate which goes first: 0 no hash, 1 after, 2 overlapped */
                double t = timed_loop(rec_r, init, loop, how == 2, how == 0 ? NULL : how == 2 ? ho : hs);
                *(how == 0 ? &t_none[r] : how == 2 ? &t_ovl[r] : &t_seq[r]) = t / loop;
            }
            same = same && memcmp(hs, ho, (size_t)loop * sizeof hs[0]) == 0;
        }
        qsort(t_seq, (size_t)reps, sizeof(double), cmp_double);
        qsort(t_ovl, (size_t)reps, sizeof(double), cmp_double);
        qsort(t_none, (size_t)reps, sizeof(double), cmp_double);
        double none = t_none[reps / 2], seq = t_seq[reps / 2], ovl = t_ovl[reps / 2];
        printf("bench_step --loop: %s, batch %u x %u, %d thread(s), stateHash version %u, load average %.2f %.2f "
               "%.2f\n", model, B, T, threads, trn_config_state_hash(&init->config), load[0], load[1], load[2]);
        printf("step + hash      %8.3f s per step hashing after it, %.3f s overlapped with the next step "
               "(%d steps, median of %d): overlapped / after = %.3f; same stateHashes: %s\n",
               seq, ovl, loop, reps, ovl / seq, same ? "yes" : "NO");
        printf("hash share       step alone %.3f s; the hash's share of a step: %.1f%% after it, %.1f%% overlapped\n",
               none, 100 * (seq - none) / seq, 100 * (ovl - none) / ovl);
        trn_runner_free(plain_r);
        trn_runner_free(rec_r);
        bench_step_inputs_free(&in);
        return same ? 0 : 1;
    }
    size_t C = m.width, L = m.n_layer, V = m.vocab, N = (size_t)B * T;
    double t_rec[32], t_plain[32], t_blas[32], rates[32], t_hash = 1e30;
    bool same_hash = true;
    for (int r = 0; r < reps; r++) {
        rates[r] = bench_dgemm_rate(N, 4 * C, C, threads, &crates[r]);
        if (rates[r] < 0)
            fail("out of memory");
        t_rec[r] = timed_step(rec_r, init, true, &c_rec[r], false);
        ovt_hash h, hb;
        double t0 = now();
        trn_state_hash(&h, trn_runner_state(rec_r));
        double th = now() - t0;
        t_hash = th < t_hash ? th : t_hash;
        free(bytes);
        if (krn_rlog_encode(log, &bytes, &len))
            fail("encode");
        trn_state_free(trn_runner_release(rec_r));
        t_plain[r] = timed_step(plain_r, init, false, &c_plain[r], false);
        trn_state_free(trn_runner_release(plain_r));
        t_blas[r] = timed_step(rec_r, init, true, &c_blas[r], true);
        trn_state_hash(&hb, trn_runner_state(rec_r));
        trn_state_free(trn_runner_release(rec_r));
        same_hash = same_hash && memcmp(&h, &hb, sizeof h) == 0;
        free(blas_bytes);
        if (krn_rlog_encode(log, &blas_bytes, &blas_len))
            fail("encode");
    }
    qsort(t_rec, (size_t)reps, sizeof(double), cmp_double);
    qsort(t_plain, (size_t)reps, sizeof(double), cmp_double);
    qsort(rates, (size_t)reps, sizeof(double), cmp_double);
    qsort(c_rec, (size_t)reps, sizeof(double), cmp_double);
    qsort(c_plain, (size_t)reps, sizeof(double), cmp_double);
    qsort(t_blas, (size_t)reps, sizeof(double), cmp_double);
    qsort(c_blas, (size_t)reps, sizeof(double), cmp_double);
    qsort(crates, (size_t)reps, sizeof(double), cmp_double);
    double rec = t_rec[reps / 2], plain = t_plain[reps / 2], rate = rates[reps / 2];
    bool same_log = len == blas_len && memcmp(bytes, blas_bytes, len) == 0;
    free(bytes);
    free(blas_bytes);

    /* the floor: every matmul forward (2 N C OC) and backward (4 N C OC),
     * the tied head included; attention 4 B T^2 C per layer forward, twice
     * that backward */
    double flops = 6.0 * (double)N * ((double)L * 12.0 * (double)C * (double)C + (double)V * (double)C) +
                   12.0 * (double)L * (double)B * (double)T * (double)T * (double)C;
    double floor_s = flops / (rate * 1e9);
    printf("bench_step: %s, %zu parameters, batch %u x %u, %d thread(s), median of %d, "
           "chunked GEMM: %s (own kernel: %s), load average %.2f %.2f %.2f\n",
           model, init->layout.nparams, B, T, threads, reps, gemm_env ? gemm_env : "own",
           krn_gemm_isa_name(krn_gemm_isa_best()), load[0], load[1], load[2]);
    printf("RECORD step      %8.3f s   (each rep: ", rec);
    for (int r = 0; r < reps; r++)
        printf("%.2f%s", t_rec[r], r + 1 < reps ? " " : " s; PLAIN ");
    for (int r = 0; r < reps; r++)
        printf("%.2f%s", t_plain[r], r + 1 < reps ? " " : " s; DGEMM ");
    for (int r = 0; r < reps; r++)
        printf("%.1f%s", rates[r], r + 1 < reps ? " " : " GFLOP/s, sorted)\n");
    printf("PLAIN step       %8.3f s   RECORD / PLAIN = %.3f (target <= 1.15)\n", plain, rec / plain);
    printf("floor            %8.3f s   %.4g GFLOP at %.2f GFLOP/s DGEMM (%zu x %zu x %zu); "
           "RECORD / floor = %.2f (target <= 1.5), PLAIN / floor = %.2f\n",
           floor_s, flops / 1e9, rate, N, 4 * C, C, rec / floor_s, plain / floor_s);
    double crec = c_rec[reps / 2], cplain = c_plain[reps / 2], cfloor = flops / (crates[reps / 2] * 1e9);
    printf("CPU seconds      RECORD %.2f, PLAIN %.2f (RECORD / PLAIN = %.3f); floor %.2f at %.2f GFLOP "
           "per CPU s: RECORD / floor = %.2f, PLAIN / floor = %.2f\n",
           crec, cplain, crec / cplain, cfloor, crates[reps / 2], crec / cfloor, cplain / cfloor);
    double blas = t_blas[reps / 2], cblas = c_blas[reps / 2];
    printf("RECORD, blas     %8.3f s   (OVT_GEMM=blas) RECORD / RECORD-blas = %.3f (CPU %.3f); "
           "RECORD-blas / floor = %.2f; same log and stateHash as RECORD: %s\n",
           blas, rec / blas, crec / cblas, blas / floor_s, same_log && same_hash ? "yes" : "NO");
    printf("rounding log     %llu entries, %zu bytes per step (target < 200000)\n",
           (unsigned long long)krn_rlog_nentries(log), len);
    printf("bits of choice   %llu elements with d <= delta = tau/(2M) (both roundings honest) of %llu "
           "rounded; %llu of them exactly 0 or on a midpoint\n", (unsigned long long)last_record.ambiguous,
           (unsigned long long)last_record.outputs, (unsigned long long)last_record.ambiguous_exact);
    printf("state hash       %8.3f s per step (%.1f%% of RECORD)\n", t_hash, 100.0 * t_hash / rec);
    double peak = fma_peak();
    if (peak > 0)
        printf("FMA peak         %8.1f GFLOP/s per core (FP64, registers only): the DGEMM above runs at %.0f%% of "
               "%d cores' peak; the step's GEMMs at that peak would take %.3f s (RECORD / that = %.2f)\n",
               peak, 100.0 * rate / (peak * threads), threads, flops / (peak * threads * 1e9),
               rec / (flops / (peak * threads * 1e9)));
    trn_runner_free(plain_r);
    trn_runner_free(rec_r);
    bench_step_inputs_free(&in);
    return 0;
}
