/* ovt: the single executable. Dispatches to the subcommands that each role
 * folder implements; `ovt help` and `ovt --help` list them. */
#include <stdio.h>
#include <string.h>

#include "arbiter/watch.h"
#include "auditor/cli.h"
#include "chain/arbitration_cli.h"
#include "chain/cli.h"
#include "cli/commands.h"
#include "examples/devnet/devnet.h"
#include "trainer/check.h"
#include "trainer/commit.h"
#include "trainer/data_cmd.h"
#include "trainer/demo.h"
#include "trainer/run.h"

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

const struct ovt_command ovt_commands[] = {
    {"help", "show this help, or a command's help (ovt help COMMAND)", cmd_help},
    {"version", "print the version", cmd_version},
    {"demo", "the exactness demo: train, replay on other backends with and without the log", trn_cmd_demo},
    {"data", "make a training data file: an MLP samples set, GPT-2 tokens from text", trn_cmd_data},
    {"train", "train a model with controlled rounding into a run directory", trn_cmd_train},
    {"step", "re-execute one step of a run and compare it with the step table", trn_cmd_step},
    {"verify", "check a commitment receipt offline (signature, root, config, data, replayed steps)", trn_cmd_verify},
    {"keys", "create a keystore or show its address (new, address)", chain_cmd_keys},
    {"deploy", "deploy the arbitration contract", chain_cmd_deploy},
    {"commit", "open a run on chain, publish it to a store and commit its step root", trn_cmd_commit},
    {"audit", "replay a run on another backend, compare leaf by leaf, commit the auditor's root", aud_cmd_audit},
    {"agent", "play a run's dispute game as the trainer or the auditor", aud_cmd_agent},
    {"arbiter", "the arbiter daemon: watch disputes, re-execute the step, post verdicts", arb_cmd_arbiter},
    {"game", "show a run and the state of its dispute game", chain_cmd_game},
    {"rlog", "check a rounding-log file; --sites: count a step's near-midpoint elements per site", trn_cmd_rlog},
    {"devnet", "the local dispute simulation: anvil, a faulty trainer, auditor and arbiter", devnet_cmd},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
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

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ovt %s\n", OVT_VERSION);
    return 0;
}

static const struct ovt_command *find(const char *name)
{
    for (const struct ovt_command *c = ovt_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static int cmd_help(int argc, char **argv)
{
    if (argc >= 2) {
        const struct ovt_command *c = find(argv[1]);
        if (!c || c->fn == cmd_help) {
            fprintf(stderr, "ovt: unknown command '%s'; run `ovt --help` for the list\n", argv[1]);
            return 2;
        }
        char help[] = "--help";
        char *args[] = {argv[1], help, NULL};
        return c->fn(2, args);
    }
    usage(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0)
        return cmd_version(0, NULL);
    const struct ovt_command *c = find(name);
    if (!c) {
        fprintf(stderr, "ovt: unknown command '%s'; run `ovt --help` for the list\n", name);
        return 2;
    }
    return c->fn(argc - 1, argv + 1);
}
