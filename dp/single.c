/* dp/dp.h in a build without MPI: one process is the only choice. */
#include "dp/dp.h"
#include "dp/sum.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int no_mpi(void)
{
    return ovt_fail(OVT_EINVAL, "this ovt was built without MPI: install libopenmpi-dev (scripts/setup.sh) and "
                                "rebuild to run data-parallel processes with mpirun");
}

bool dp_available(void) { return false; }
/* Started by mpirun all the same: say so, so that `ovt train` tries to open
 * a dp and fails with the message above instead of R processes each
 * training alone into the same run directory. */
bool dp_launched(void) { return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL; }
void dp_set_timeout(dp_ctx *dp, double timeout_s)
{
    (void)dp;
    (void)timeout_s;
}

int dp_open(dp_ctx **out, double timeout_s)
{
    (void)timeout_s;
    *out = NULL;
    return no_mpi();
}
void dp_close(dp_ctx *dp) { (void)dp; }
void dp_abort(dp_ctx *dp, int code)
{
    /* no dp_ctx can be open in this build: only misuse gets here */
    (void)dp, (void)code;
    abort();
}
int dp_rank(const dp_ctx *dp) { (void)dp; return 0; }
int dp_size(const dp_ctx *dp) { (void)dp; return 1; }
const char *dp_host(const dp_ctx *dp) { (void)dp; return ""; }
int dp_hosts(const dp_ctx *dp, char (*hosts)[DP_HOST_MAX])
{
    (void)dp;
    memset(hosts[0], 0, DP_HOST_MAX);
    if (gethostname(hosts[0], DP_HOST_MAX - 1) != 0)
        return ovt_fail_errno(OVT_EIO, "gethostname");
    return 0;
}
int dp_share_shards(dp_ctx *dp, dp_shard_record *rec, uint32_t S, uint64_t step)
{
    (void)dp, (void)rec, (void)S, (void)step;
    return no_mpi();
}
int dp_grad_sum(dp_ctx *dp, float *grads, const float *const *shard, uint32_t nlocal, uint32_t S, size_t n,
                    int grid_bits, uint64_t step)
{
    /* a NULL dp is one process holding every shard, as in the MPI build */
    if (dp == NULL)
        return dp_sum_one_process(grads, shard, nlocal, S, n, grid_bits, step);
    return no_mpi();
}
int dp_merge_log(dp_ctx *dp, krn_rlog *log, uint64_t step)
{
    (void)dp, (void)log, (void)step;
    return no_mpi();
}
int dp_check_state(dp_ctx *dp, const ovt_hash *state_hash, uint64_t step)
{
    (void)dp, (void)state_hash, (void)step;
    return no_mpi();
}
int dp_agree(dp_ctx *dp, int rv, uint64_t step)
{
    (void)dp, (void)step;
    return rv;
}
