/* trainer/dp.h in a build without MPI: one process is the only choice. */
#include "trainer/dp.h"
#include "trainer/dp_sum.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int no_mpi(void)
{
    return ovt_fail(OVT_EINVAL, "this ovt was built without MPI: install libopenmpi-dev (scripts/setup.sh) and "
                                "rebuild to run data-parallel processes with mpirun");
}

bool trn_dp_available(void) { return false; }
/* Started by mpirun all the same: say so, so that `ovt train` tries to open
 * a dp and fails with the message above instead of R processes each
 * training alone into the same run directory. */
bool trn_dp_launched(void) { return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL; }
int trn_dp_open(trn_dp **out, double timeout_s)
{
    (void)timeout_s;
    *out = NULL;
    return no_mpi();
}
void trn_dp_close(trn_dp *dp) { (void)dp; }
void trn_dp_abort(trn_dp *dp, int code)
{
    /* no trn_dp can be open in this build: only misuse gets here */
    (void)dp, (void)code;
    abort();
}
int trn_dp_rank(const trn_dp *dp) { (void)dp; return 0; }
int trn_dp_size(const trn_dp *dp) { (void)dp; return 1; }
const char *trn_dp_host(const trn_dp *dp) { (void)dp; return ""; }
int trn_dp_hosts(const trn_dp *dp, char (*hosts)[TRN_SHARD_HOST_MAX])
{
    (void)dp;
    memset(hosts[0], 0, TRN_SHARD_HOST_MAX);
    if (gethostname(hosts[0], TRN_SHARD_HOST_MAX - 1) != 0)
        return ovt_fail_errno(OVT_EIO, "gethostname");
    return 0;
}
int trn_dp_share_shards(trn_dp *dp, trn_shard_record *rec, uint32_t S, uint64_t step)
{
    (void)dp, (void)rec, (void)S, (void)step;
    return no_mpi();
}
int trn_dp_grad_sum(trn_dp *dp, float *grads, const float *const *shard, uint32_t nlocal, uint32_t S, size_t n,
                    int grid_bits, uint64_t step)
{
    /* a NULL dp is one process holding every shard, as in the MPI build */
    if (dp == NULL)
        return trn_dp_sum_one_process(grads, shard, nlocal, S, n, grid_bits, step);
    return no_mpi();
}
int trn_dp_merge_log(trn_dp *dp, krn_rlog *log, uint64_t step)
{
    (void)dp, (void)log, (void)step;
    return no_mpi();
}
int trn_dp_check_state(trn_dp *dp, const ovt_hash *state_hash, uint64_t step)
{
    (void)dp, (void)state_hash, (void)step;
    return no_mpi();
}
int trn_dp_agree(trn_dp *dp, int rv, uint64_t step)
{
    (void)dp, (void)step;
    return rv;
}
