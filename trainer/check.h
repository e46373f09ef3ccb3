#ifndef OVT_TRAINER_CHECK_H
#define OVT_TRAINER_CHECK_H

/* Offline checks of a finished run (docs/trainer.md):
 *   `ovt step`   re-executes one step from the run directory and compares it
 *                with the step table (and the leaf, when the run has a runId);
 *   `ovt verify` checks a commitment receipt (RUNDIR/receipt.json, written by
 *                `ovt commit`) against the run directory and dataset, and
 *                re-executes a deterministic spread of steps;
 *   `ovt rlog RUNDIR --step K --sites` re-executes one step and counts per
 *                site the elements within tau/2 and tau of a midpoint. */

int trn_cmd_step(int argc, char **argv);
int trn_cmd_verify(int argc, char **argv);

/* `ovt rlog`: the file form is krn_cmd_rlog's (kernels/rlog_cmd.c); the
 * run-directory form (RUNDIR --step K [--sites]) is here, since --sites
 * re-executes the step to count per site how many elements lie within tau/2
 * and tau of a midpoint. */
int trn_cmd_rlog(int argc, char **argv);

#endif
