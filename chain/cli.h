#ifndef OVT_CHAIN_CLI_H
#define OVT_CHAIN_CLI_H

/* `ovt keys new|address`: create and inspect Web3 keystores. */
int chain_cmd_keys(int argc, char **argv);

#endif
