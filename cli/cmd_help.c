/* `ovt help [COMMAND]`: the list of commands, or one command's --help. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"

void cli_usage(FILE *out)
{
    fprintf(out,
            "ovt: optimistic verifiable training\n"
            "\n"
            "A trainer trains with controlled rounding and commits a Merkle root over the\n"
            "state after every step; an auditor replays the run on other hardware; a dispute\n"
            "is bisected on chain down to one step, which an arbiter re-executes on a CPU.\n"
            "\n"
            "usage: ovt COMMAND [OPTIONS]\n"
            "\n"
            "commands:\n");
    for (const struct ovt_command *c = ovt_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\nRun `ovt COMMAND --help` for a command's options.\n");
}

const struct ovt_command *cli_find_command(const char *name)
{
    for (const struct ovt_command *c = ovt_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

int cmd_help(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "-h") && strcmp(argv[1], "--help")) {
        const struct ovt_command *c = cli_find_command(argv[1]);
        if (!c || c->fn == cmd_help)
            return cli_usage_error("help", "unknown command '%s'", argv[1]);
        char help[] = "--help";
        char *args[] = {argv[1], help, NULL};
        return c->fn(2, args);
    }
    cli_usage(stdout);
    return 0;
}
