#ifndef OVT_KERNELS_RLOG_CMD_H
#define OVT_KERNELS_RLOG_CMD_H

/* `ovt rlog [--entries] [--json] FILE`: checks a rounding-log file and shows
 * its step, SHA-256, sizes and entries (kernels/rlog_cmd.c). */
int krn_cmd_rlog(int argc, char **argv);

#endif
