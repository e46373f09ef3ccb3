#ifndef OVT_CLI_COMMANDS_H
#define OVT_CLI_COMMANDS_H

/* Every `ovt` subcommand, one file each: cli/cmd_<name>.c defines
 * int cmd_<name>(int argc, char **argv), where argv[0] is the subcommand's
 * name. It returns the process exit status (0 ok, 1 runtime failure, 2 usage
 * error). A command parses its flags, calls its role's library and prints;
 * docs/architecture.md says where the work itself lives. */
#include <stdio.h>

typedef int (*ovt_command_fn)(int argc, char **argv);

struct ovt_command {
    const char *name;
    const char *summary;
    ovt_command_fn fn;
};

/* The table lives in cli/main.c. */
extern const struct ovt_command ovt_commands[];

/* The command called name, or NULL. */
const struct ovt_command *cli_find_command(const char *name);

/* `ovt --help`: what ovt is and the list of commands. */
void cli_usage(FILE *out);

int cmd_help(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_step(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_keys(int argc, char **argv);
int cmd_deploy(int argc, char **argv);
int cmd_commit(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_arbiter(int argc, char **argv);
int cmd_game(int argc, char **argv);
int cmd_rlog(int argc, char **argv);
int cmd_devnet(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_state_proof(int argc, char **argv);
int cmd_block(int argc, char **argv);

#endif
