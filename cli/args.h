#ifndef OVT_TRAINER_CLIARGS_H
#define OVT_TRAINER_CLIARGS_H

/* Flag value parsing shared by the trainer's commands. Each prints
 * "ovt CMD: --flag expects ..., got 'x'" to stderr and returns -1 on bad
 * input, 0 otherwise. */

#include <getopt.h>
#include <stdint.h>

/* The long name of the option getopt_long returned as c ("" if none). */
const char *cli_arg_name(const struct option *longopts, int c);

int cli_arg_u64(const char *cmd, const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Reports an unknown option; returns 2 (the usage exit status). */
int cli_arg_unknown(const char *cmd, const char *arg);

/* Reports the first argument left after the options (-1), or returns 0. */
int cli_arg_none_left(const char *cmd, int argc, char **argv);

/* A finite real in [lo, hi]. */
int cli_arg_real(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);

#endif
