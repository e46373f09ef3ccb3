/* A step's bits do not depend on the thread count, with the runners alive
 * at once on the process's one pool (kernels/pool.h): a RECORD runner on
 * one thread and one on two, stepping in turn, write the same rounding
 * logs and reach the same stateHashes; the model is large enough that its
 * sites are cut into chunks and its GEMMs into tiles on the pool. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/rlog.h"
#include "data/dataset.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"

#define STEPS 2

static trn_run_config wide_config(trn_run_data *d)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 2, .width = 512, .in_dim = 256, .n_class = 10};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 64;
    rc.seed = 11;
    rc.grid_bits = 32;
    memset(d, 0, sizeof *d);
    if (data_samples_synthetic(&d->samples, rc.seed, 256, m.in_dim, m.n_class, 32) != 0)
        abort();
    rc.dataset_hash = d->samples.hash;
    return rc;
}

static void test_one_and_two_threads(void)
{
    trn_run_data d;
    trn_run_config rc = wide_config(&d);
    trn_runner *r1 = NULL, *r2 = NULL;
    trn_runner_opts o1 = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .threads = 1};
    trn_runner_opts o2 = o1;
    o2.threads = 2;
    CHECK_MSG(trn_runner_open(&r1, &rc, &d, &o1) == 0 && trn_runner_start(r1, NULL, 0) == 0, "%s", ovt_errmsg());
    CHECK_MSG(trn_runner_open(&r2, &rc, &d, &o2) == 0 && trn_runner_start(r2, NULL, 0) == 0, "%s", ovt_errmsg());
    for (int i = 1; r1 && r2 && i <= STEPS; i++) {
        trn_runner_result a, b;
        CHECK_MSG(trn_runner_step(r1, &a) == 0, "%s", ovt_errmsg());
        CHECK_MSG(trn_runner_step(r2, &b) == 0, "%s", ovt_errmsg());
        CHECK_MSG(memcmp(a.state_hash.b, b.state_hash.b, 32) == 0, "step %d: stateHash differs", i);
        uint8_t *la = NULL, *lb = NULL;
        size_t na = 0, nb = 0;
        CHECK(krn_rlog_encode(trn_runner_log(r1), &la, &na) == 0);
        CHECK(krn_rlog_encode(trn_runner_log(r2), &lb, &nb) == 0);
        CHECK_MSG(na == nb && na > 0 && memcmp(la, lb, na) == 0, "step %d: the logs differ", i);
        free(la);
        free(lb);
    }
    trn_runner_free(r2);
    trn_runner_free(r1);
    trn_run_data_free(&d);
}

int main(void)
{
    CHECK_RUN(test_one_and_two_threads());
    return check_done();
}
