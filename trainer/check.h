#ifndef OVT_TRAINER_CHECK_H
#define OVT_TRAINER_CHECK_H

/* Offline checks of a finished run (docs/trainer.md):
 *   `ovt step`   re-executes one step from the run directory and compares it
 *                with the step table (and the leaf, when the run has a runId);
 *   `ovt verify` checks a commitment receipt (RUNDIR/receipt.json, written by
 *                `ovt commit`) against the run directory and dataset, and
 *                re-executes a deterministic spread of steps. */

int trn_cmd_step(int argc, char **argv);
int trn_cmd_verify(int argc, char **argv);

#endif
