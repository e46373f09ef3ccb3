#ifndef OVT_CHAIN_ARBITRATION_CLI_H
#define OVT_CHAIN_ARBITRATION_CLI_H

/* `ovt deploy`: deploys the embedded arbitration contract (no node.js needed). */
int chain_cmd_deploy(int argc, char **argv);

/* `ovt game`: shows a run's parameters and the state of its game. */
int chain_cmd_game(int argc, char **argv);

#endif
