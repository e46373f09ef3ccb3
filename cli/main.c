/* ovt: the single executable. Dispatches to the subcommands (cli/cmd_*.c);
 * `ovt help` and `ovt --help` list them. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

const struct ovt_command ovt_commands[] = {
    {"help", "show this help, or a command's help (ovt help COMMAND)", cmd_help},
    {"version", "print the version", cmd_version},
    {"demo", "the exactness demo: train, replay on other backends with and without the log", cmd_demo},
    {"data", "make a data file: mlp samples, text tokens (bytes, gpt2, llama2, mistral), idx or cifar images",
     cmd_data},
    {"train", "train a model with controlled rounding into a run directory", cmd_train},
    {"step", "re-execute one step of a run, compare it with the step table; --trace: its trace", cmd_step},
    {"verify", "check a commitment receipt offline (signature, root, config, data, replayed steps)", cmd_verify},
    {"keys", "create a keystore or show its address (new, address)", cmd_keys},
    {"deploy", "deploy the arbitration contract", cmd_deploy},
    {"commit", "open a run on chain, publish it to a store and commit its step root", cmd_commit},
    {"audit", "replay a run on another backend, compare leaf by leaf, commit or challenge a root", cmd_audit},
    {"agent", "play a run's dispute game (or a challenge) as the trainer or the auditor", cmd_agent},
    {"arbiter", "the arbiter daemon: watch disputes, re-execute the step, post verdicts", cmd_arbiter},
    {"game", "show a run and the state of its dispute game", cmd_game},
    {"rlog", "check a rounding-log file; --sites: count a step's near-midpoint elements per site", cmd_rlog},
    {"export", "write a checkpoint as safetensors (with its commitment), llmc or llama2c", cmd_export},
    {"eval", "a checkpoint's loss on held-out tokens (perplexity) or images (accuracy)", cmd_eval},
    {"block", "one block of one site of a step: pack its inputs with proofs, or check and re-execute it", cmd_block},
    {"state-proof", "prove a leaf range of a tensor against a tree stateHash, or check such a proof", cmd_state_proof},
    {"devnet", "the local dispute simulation: anvil, a faulty trainer, auditor and arbiter", cmd_devnet},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        cli_usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0)
        return cmd_version(0, NULL);
    const struct ovt_command *c = cli_find_command(name);
    if (!c) {
        fprintf(stderr, "ovt: unknown command '%s'; run `ovt --help` for the list\n", name);
        return 2;
    }
    return c->fn(argc - 1, argv + 1);
}
