#include "cli/args.h"

#include <stdarg.h>
#include <stdio.h>

int cli_fail(const char *cmd)
{
    fprintf(stderr, "ovt %s: %s\n", cmd, ovt_errmsg());
    return 1;
}

int cli_usage_fail(const char *cmd)
{
    fprintf(stderr, "ovt %s: %s; see `ovt %s --help`\n", cmd, ovt_errmsg(), cmd);
    return 2;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ovt_fail(OVT_EINVAL, "%s", msg);
    return cli_usage_fail(cmd);
}

const char *cli_arg_name(const struct option *longopts, int c)
{
    static _Thread_local char name[64];
    for (const struct option *lo = longopts; lo->name; lo++)
        if (lo->val == c) {
            snprintf(name, sizeof name, "--%s", lo->name);
            return name;
        }
    return "";
}

int cli_getopt(int argc, char **argv, const struct option *longopts, void (*usage)(FILE *out), cli_take_fn take,
               void *ctx)
{
    int c, rv;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if ((rv = take(ctx, c, cli_arg_name(longopts, c), optarg, argv[optind - 1])))
            return rv;
    }
    return -1;
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
