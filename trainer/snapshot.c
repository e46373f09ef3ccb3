/* The state at a checkpoint of a run directory (see snapshot.h). */
#include "trainer/snapshot.h"

#include <string.h>
#include <unistd.h>

#include "trainer/rundata.h"
#include "trainer/step.h"

int trn_snapshot_load(trn_state **st, trn_step_table *table, const char *dir, bool has_step, uint64_t step)
{
    *st = NULL;
    memset(table, 0, sizeof *table);
    trn_run_config rc;
    ovt_hash ch;
    char path[4096];
    uint64_t at = 0;
    int rv = trn_run_load_config(dir, &rc, &ch);
    if (!rv && !(rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")))
        rv = trn_step_table_read(table, path);
    if (!rv && !has_step)
        rv = trn_run_latest_checkpoint(dir, UINT64_MAX, &step);
    char have[160];
    if (!rv && (step >= table->count ||
                (has_step && (trn_run_path(path, sizeof path, dir, "ckpt", step, "ckpt") || access(path, F_OK))))) {
        trn_run_checkpoint_list(have, sizeof have, dir);
        rv = ovt_fail(step >= table->count ? OVT_EINVAL : OVT_ENOTFOUND,
                      "the run in %s has %s step %llu; it has checkpoints of steps %s: pass one of them to "
                      "--step (a run keeps step 0, every --checkpoint-every steps and its last)",
                      dir, step >= table->count ? "no" : "no checkpoint of", (unsigned long long)step, have);
    }
    if (!rv)
        rv = trn_run_start_state(st, &at, dir, &rc, &ch, table, step);
    if (!rv && at != step) {
        trn_state_free(*st);
        *st = NULL;
        rv = ovt_fail(OVT_ENOTFOUND, "the run in %s has no checkpoint of step %llu (the latest before it is step "
                                     "%llu): export step 0, a step of --checkpoint-every or the last",
                      dir, (unsigned long long)step, (unsigned long long)at);
    }
    if (rv)
        trn_step_table_free(table);
    return rv;
}
