#ifndef OVT_KERNELS_RLOG_CMD_H
#define OVT_KERNELS_RLOG_CMD_H

#include <stdio.h>

/* `ovt rlog [--entries] [--json] FILE`: checks a rounding-log file and shows
 * its step, SHA-256, sizes and entries (kernels/rlog_cmd.c). */
int krn_cmd_rlog(int argc, char **argv);

/* The help of `ovt rlog`, its file form and the replay form (`ovt rlog
 * RUNDIR --step K --sites`, which needs the trainer: trn_cmd_rlog). */
void krn_rlog_usage(FILE *out);

#endif
