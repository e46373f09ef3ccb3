/* bench_dp: what the data-parallel transport costs (docs/data-parallel.md):
 * the gradient sum (FP64 reduce-scatter of sums and magnitudes, the slice's
 * rounding, FP32 all-gather) for the parameter counts of gpt2-tiny and
 * gpt2-small, and the per-step small calls (shard table, stateHash check,
 * failure check). Run under mpirun:
 *   mpirun -np 2 bench/bench_dp [N ...]
 * (as root, over loopback: add --allow-run-as-root --mca btl self,tcp
 * --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo). Rank 0 prints the
 * median wall time of each over the repetitions; the rounding is a plain
 * FP32 conversion, so the figure is the communication and its memory
 * traffic, not the grad.sum site's band arithmetic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "trainer/dp.h"

static int round_plain(void *arg, float *out, const double *sum, const double *abs_sum, size_t offset, size_t len)
{
    (void)arg, (void)abs_sum, (void)offset;
    for (size_t i = 0; i < len; i++)
        out[i] = (float)sum[i];
    return 0;
}

int main(int argc, char **argv)
{
    if (!trn_dp_available() || !trn_dp_launched()) {
        fprintf(stderr, "bench_dp: start it with mpirun -np R (see the top of bench/bench_dp.c)%s\n",
                trn_dp_available() ? "" : "; this build has no MPI");
        return 2;
    }
    trn_dp *dp;
    if (trn_dp_open(&dp, 600) != 0) {
        fprintf(stderr, "bench_dp: %s\n", ovt_errmsg());
        return 1;
    }
    int R = trn_dp_size(dp), rank = trn_dp_rank(dp);
    size_t sizes[8] = {120576, 124439808};
    int nsizes = 2;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++)
            sizes[nsizes++] = strtoull(argv[i], NULL, 10);
    }
    if (rank == 0)
        printf("R = %d\n%12s %6s %12s %12s\n", R, "n", "reps", "grad_sum ms", "MB/s/rank");
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        float *grads = malloc(n * sizeof *grads);
        double *sum = malloc(n * sizeof *sum), *abs_sum = malloc(n * sizeof *abs_sum);
        if (!grads || !sum || !abs_sum)
            return 1;
        int reps = n > 10000000 ? 5 : 50;
        double t[50];
        for (int k = 0; k < reps; k++) {
            for (size_t i = 0; i < n; i++)
                sum[i] = abs_sum[i] = (double)(i % 1000) * 0.001;
            if (trn_dp_agree(dp, 0, (uint64_t)k) != 0) /* start together */
                return 1;
            double t0 = now();
            if (trn_dp_grad_sum(dp, grads, sum, abs_sum, n, round_plain, NULL, (uint64_t)k) != 0)
                return 1;
            t[k] = now() - t0;
        }
        double med = median(t, reps);
        if (rank == 0)
            printf("%12zu %6d %12.2f %12.0f\n", n, reps, med * 1e3, (double)n * 20.0 / med / 1e6);
        free(grads);
        free(sum);
        free(abs_sum);
    }
    uint32_t S = (uint32_t)R * 4; /* 4 shards per rank */
    trn_shard_record *rec = calloc(S, sizeof *rec);
    if (rec == NULL)
        return 1;
    ovt_hash h = {{0}};
    double t[200];
    for (int k = 0; k < 200; k++) {
        double t0 = now();
        if (trn_dp_share_shards(dp, rec, S, (uint64_t)k) != 0 ||
            trn_dp_check_state(dp, &h, (uint64_t)k) != 0 || trn_dp_agree(dp, 0, (uint64_t)k) != 0)
            return 1;
        t[k] = now() - t0;
    }
    if (rank == 0)
        printf("shard table + stateHash check + failure check: %.3f ms per step (median of 200)\n", median(t, 200) * 1e3);
    free(rec);
    trn_dp_close(dp);
    return 0;
}
