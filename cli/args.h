#ifndef OVT_CLI_ARGS_H
#define OVT_CLI_ARGS_H

/* What every command shares: its flags' values and how it reports a failure.
 *
 * A flag's value is parsed with common/parse.h (numbers, reals, durations,
 * sizes) or chain/parse.h (wei amounts, addresses, hashes), whose messages
 * all read "--FLAG expects ..., got 'TEXT'"; a command that gets an error
 * from them, or from any library call, reports it in one of two ways:
 *
 *   return cli_usage_fail("train");  bad input on the command line: exit 2
 *   return cli_fail("train");        the work failed: exit 1
 *
 * Both print "ovt CMD: MESSAGE" (ovt_errmsg()) to stderr, the first with
 * "; see `ovt CMD --help`". */

#include <getopt.h>
#include <stdio.h>

#include "chain/parse.h"
#include "common/err.h"
#include "common/parse.h"

/* "ovt CMD: <ovt_errmsg()>" on stderr; returns 1 (a runtime failure). */
int cli_fail(const char *cmd);

/* "ovt CMD: <ovt_errmsg()>; see `ovt CMD --help`" on stderr; returns 2 (a
 * usage error). */
int cli_usage_fail(const char *cmd);

/* Records the formatted message (ovt_fail), then cli_usage_fail. */
int cli_usage_error(const char *cmd, const char *fmt, ...) OVT_PRINTF(2, 3);

/* The long name of the option getopt_long returned as c, with its dashes
 * ("--steps"), for the value parsers' messages ("" if none). */
const char *cli_arg_name(const struct option *longopts, int c);

/* Takes one option: code as getopt_long returned it, flag its long name
 * ("--steps"), arg its value, given the argument as typed (for
 * cli_arg_unknown). Returns 0, or the exit status to end the command with. */
typedef int (*cli_take_fn)(void *ctx, int code, const char *flag, const char *arg, const char *given);

/* The option loop of a command (argv[0] its name): each option to take,
 * -h/--help to usage(stdout). Returns -1 once every option is taken
 * (optind is then the first operand), else the exit status: take's, or 0
 * after the help. */
int cli_getopt(int argc, char **argv, const struct option *longopts, void (*usage)(FILE *out), cli_take_fn take,
               void *ctx);

/* Reports an unknown option or one without its value; returns 2. */
int cli_arg_unknown(const char *cmd, const char *arg);

/* Reports the first argument left after the options and returns -1, or
 * returns 0 when there is none. */
int cli_arg_none_left(const char *cmd, int argc, char **argv);

#endif
