/* bench_dp: what the data-parallel transport costs (docs/data-parallel.md):
 * the exact gradient sum (keys' max all-reduce, the own shards' terms,
 * FP64 reduce-scatter of the partial sums, the slice's mean and rounding,
 * FP32 all-gather) with 2 shards per rank (S = 2R) for the parameter count
 * of gpt2-tiny and 16M, and the per-step small calls (shard table,
 * stateHash check, failure check). Run under mpirun:
 *   mpirun -np 2 bench/bench_dp [N ...]
 * (as root, over loopback: add --allow-run-as-root --mca btl self,tcp
 * --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo). Rank 0 prints the
 * median wall time of each over the repetitions, the time of the same sum
 * in one process (a NULL dp, all S shards: the arithmetic alone), and the
 * bytes each rank sends per element (1 key, 8 partial sum, 4 gather). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "dp/dp.h"

int main(int argc, char **argv)
{
    if (!dp_available() || !dp_launched()) {
        fprintf(stderr, "bench_dp: start it with mpirun -np R (see the top of bench/bench_dp.c)%s\n",
                dp_available() ? "" : "; this build has no MPI");
        return 2;
    }
    dp_ctx *dp;
    if (dp_open(&dp, 600) != 0) {
        fprintf(stderr, "bench_dp: %s\n", ovt_errmsg());
        return 1;
    }
    int R = dp_size(dp), rank = dp_rank(dp);
    size_t sizes[8] = {120576, 16777216};
    int nsizes = 2;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++)
            sizes[nsizes++] = strtoull(argv[i], NULL, 10);
    }
    enum { PER_RANK = 2 };
    uint32_t S_sum = (uint32_t)R * PER_RANK;
    if (rank == 0)
        printf("R = %d, S = %u\n%12s %6s %14s %14s %12s\n", R, S_sum, "n", "reps", "grad_sum ms", "1 process ms",
               "MB/s/rank");
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        float *grads = malloc(n * sizeof *grads);
        /* rank 0 also holds every shard for the one-process figure */
        uint32_t held = rank == 0 ? S_sum : PER_RANK;
        float **shard = calloc(held, sizeof *shard);
        if (!grads || !shard)
            return 1;
        for (uint32_t j = 0; j < held; j++) {
            uint32_t global = rank == 0 ? j : (uint32_t)rank * PER_RANK + j;
            if ((shard[j] = malloc(n * sizeof *shard[j])) == NULL)
                return 1;
            for (size_t i = 0; i < n; i++) /* exponents over 40 binades */
                shard[j][i] = ldexpf(1.0f + (float)((i * 7919u + global * 104729u) % 8388608u) * 0x1p-23f,
                                     (int)((i + global * 13u) % 40u) - 20) * (((i + global) & 1) ? -1.0f : 1.0f);
        }
        const float *const *own = (const float *const *)shard; /* rank 0: its own are shards 0, 1 */
        int reps = n > 10000000 ? 5 : 50;
        double t[50], t1[50];
        for (int k = 0; k < reps; k++) {
            if (dp_agree(dp, 0, (uint64_t)k) != 0) /* start together */
                return 1;
            double t0 = now();
            if (dp_grad_sum(dp, grads, own, PER_RANK, S_sum, n, 32, (uint64_t)k) != 0) {
                fprintf(stderr, "bench_dp: %s\n", ovt_errmsg());
                return 1;
            }
            t[k] = now() - t0;
        }
        for (int k = 0; k < reps && rank == 0; k++) {
            double t0 = now();
            if (dp_grad_sum(NULL, grads, own, S_sum, S_sum, n, 32, (uint64_t)k) != 0)
                return 1;
            t1[k] = now() - t0;
        }
        double med = median(t, reps), med1 = rank == 0 ? median(t1, reps) : 0;
        if (rank == 0)
            printf("%12zu %6d %14.2f %14.2f %12.0f\n", n, reps, med * 1e3, med1 * 1e3, (double)n * 13.0 / med / 1e6);
        for (uint32_t j = 0; j < held; j++)
            free(shard[j]);
        free(shard);
        free(grads);
    }
    uint32_t S = (uint32_t)R * 4; /* 4 shards per rank */
    dp_shard_record *rec = calloc(S, sizeof *rec);
    if (rec == NULL)
        return 1;
    ovt_hash h = {{0}};
    double t[200];
    for (int k = 0; k < 200; k++) {
        double t0 = now();
        if (dp_share_shards(dp, rec, S, (uint64_t)k) != 0 ||
            dp_check_state(dp, &h, (uint64_t)k) != 0 || dp_agree(dp, 0, (uint64_t)k) != 0)
            return 1;
        t[k] = now() - t0;
    }
    if (rank == 0)
        printf("shard table + stateHash check + failure check: %.3f ms per step (median of 200)\n", median(t, 200) * 1e3);
    free(rec);
    dp_close(dp);
    return 0;
}
