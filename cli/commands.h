#ifndef OVT_CLI_COMMANDS_H
#define OVT_CLI_COMMANDS_H

/* Every `ovt` subcommand: int fn(int argc, char **argv), where argv[0] is
 * the subcommand's name. It returns the process exit status (0 ok, 1 runtime
 * failure, 2 usage error). Each is implemented in its role's folder. */
typedef int (*ovt_command_fn)(int argc, char **argv);

struct ovt_command {
    const char *name;
    const char *summary;
    ovt_command_fn fn;
};

/* The table lives in cli/main.c. */
extern const struct ovt_command ovt_commands[];

#endif
