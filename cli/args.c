#include "cli/args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char *cli_arg_name(const struct option *longopts, int c)
{
    for (const struct option *lo = longopts; lo->name; lo++)
        if (lo->val == c)
            return lo->name;
    return "";
}

int cli_arg_unknown(const char *cmd, const char *arg)
{
    fprintf(stderr, "ovt %s: unknown or incomplete option '%s'; see `ovt %s --help`\n", cmd, arg, cmd);
    return 2;
}

int cli_arg_none_left(const char *cmd, int argc, char **argv)
{
    if (optind >= argc)
        return 0;
    fprintf(stderr, "ovt %s: unexpected argument '%s'; see `ovt %s --help`\n", cmd, argv[optind], cmd);
    return -1;
}

int cli_arg_u64(const char *cmd, const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "ovt %s: --%s expects an integer in %" PRIu64 "..%" PRIu64 ", got '%s'\n", cmd, flag, lo,
                hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_arg_real(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "ovt %s: --%s expects a number in [%g, %g], got '%s'\n", cmd, flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}
