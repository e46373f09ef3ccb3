/* anvil for the devnet (node.h). */
#include "examples/devnet/node.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef OVT_SOURCE_DIR
#define OVT_SOURCE_DIR ""
#endif

const char *devnet_source_dir(void)
{
    return OVT_SOURCE_DIR;
}

int devnet_self_exe(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return ovt_fail_errno(OVT_EIO, "cannot find the ovt executable (/proc/self/exe)");
    out[n] = '\0';
    return 0;
}

static int is_executable(const char *path)
{
    return path[0] && access(path, X_OK) == 0;
}

bool devnet_find_on_path(char *out, size_t cap, const char *name)
{
    char cand[PATH_MAX];
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len + strlen(name) + 2 < sizeof cand) {
            snprintf(cand, sizeof cand, "%.*s/%s", (int)len, path, name);
            if (is_executable(cand)) {
                snprintf(out, cap, "%s", cand);
                return true;
            }
        }
        path = end ? end + 1 : NULL;
    }
    return false;
}

/* Appends a candidate to the list of places looked at. */
static void note(char *looked, size_t cap, const char *path)
{
    size_t len = strlen(looked), add = strlen(path);
    if (len + add + 3 >= cap)
        return;
    if (len) {
        memcpy(looked + len, ", ", 2);
        len += 2;
    }
    memcpy(looked + len, path, add + 1);
}

int devnet_find_anvil(char *out, size_t cap, const char *given)
{
    char looked[2048] = "";
    char cand[PATH_MAX];
    if (given) {
        if (is_executable(given)) {
            snprintf(out, cap, "%s", given);
            return 0;
        }
        return ovt_fail(OVT_ENOTFOUND, "--anvil %s is not an executable file", given);
    }
    const char *env = getenv("OVT_ANVIL");
    if (env && *env) {
        if (is_executable(env)) {
            snprintf(out, cap, "%s", env);
            return 0;
        }
        note(looked, sizeof looked, env);
    }
    /* The source tree this ovt was built from, then next to the executable
     * and its parent folder (build/ovt in a checkout). */
    const char *roots[3] = {OVT_SOURCE_DIR, NULL, NULL};
    char exe[PATH_MAX], exe_dir[PATH_MAX], exe_parent[PATH_MAX];
    if (devnet_self_exe(exe, sizeof exe) == 0) {
        snprintf(exe_dir, sizeof exe_dir, "%s", exe);
        char *slash = strrchr(exe_dir, '/');
        if (slash) {
            *slash = '\0';
            roots[1] = exe_dir;
            snprintf(exe_parent, sizeof exe_parent, "%s", exe_dir);
            slash = strrchr(exe_parent, '/');
            if (slash) {
                *slash = '\0';
                roots[2] = exe_parent;
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        if (!roots[i] || !roots[i][0])
            continue;
        snprintf(cand, sizeof cand, "%s/node_modules/.bin/anvil", roots[i]);
        if (is_executable(cand)) {
            snprintf(out, cap, "%s", cand);
            return 0;
        }
        note(looked, sizeof looked, cand);
    }
    if (devnet_find_on_path(out, cap, "anvil"))
        return 0;
    note(looked, sizeof looked, "$PATH");
    return ovt_fail(OVT_ENOTFOUND,
                    "anvil not found: run `npm ci` in the source tree (it installs the pinned anvil into "
                    "node_modules/.bin), or pass --anvil PATH; looked at %s", looked);
}

#ifndef OVT_MPIRUN_PATH
#define OVT_MPIRUN_PATH ""
#endif

int devnet_find_mpirun(char *out, size_t cap)
{
    char looked[2048] = "";
    const char *env = getenv("OVT_MPIRUN");
    if (env && *env) {
        if (is_executable(env)) {
            snprintf(out, cap, "%s", env);
            return 0;
        }
        note(looked, sizeof looked, env);
    }
    if (is_executable(OVT_MPIRUN_PATH)) {
        snprintf(out, cap, "%s", OVT_MPIRUN_PATH);
        return 0;
    }
    if (OVT_MPIRUN_PATH[0])
        note(looked, sizeof looked, OVT_MPIRUN_PATH);
    if (devnet_find_on_path(out, cap, "mpirun"))
        return 0;
    note(looked, sizeof looked, "$PATH");
    return ovt_fail(OVT_ENOTFOUND, "mpirun not found (--ranks > 1 runs the trainer under Open MPI's mpirun: install "
                                   "openmpi-bin, or set OVT_MPIRUN); looked at %s", looked);
}

int devnet_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

int devnet_anvil_start(devnet_children *kids, devnet_child **child, chain_rpc **rpc, char *url, size_t url_cap,
                       const char *anvil, const char *log_path)
{
    return devnet_node_start(kids, child, rpc, url, url_cap, "anvil", anvil, 0, log_path);
}

#define DEVNET_MNEMONIC "test test test test test test test test test test test junk"

int devnet_node_start(devnet_children *kids, devnet_child **child, chain_rpc **rpc, char *url, size_t url_cap,
                      const char *kind, const char *anvil, uint32_t block_time, const char *log_path)
{
    char exe[PATH_MAX], bt[16], bt_env[64], hh_dir[PATH_MAX];
    snprintf(bt, sizeof bt, "%u", block_time);
    int is_ganache = strcmp(kind, "ganache") == 0, is_hardhat = strcmp(kind, "hardhat") == 0;
    if (is_ganache || is_hardhat) {
        snprintf(exe, sizeof exe, "%s/node_modules/.bin/%s", OVT_SOURCE_DIR, kind);
        if (!is_executable(exe))
            return ovt_fail(OVT_ENOTFOUND, "%s not found at %s: run `npm ci` in %s (it installs the pinned %s)",
                            kind, exe, OVT_SOURCE_DIR, kind);
        snprintf(hh_dir, sizeof hh_dir, "%s/tests/support/hardhat", OVT_SOURCE_DIR);
        snprintf(bt_env, sizeof bt_env, "%u", block_time);
        if (is_hardhat) {
            setenv("OVT_HARDHAT_BLOCK_TIME", bt_env, 1);
            setenv("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true", 1);
        }
        anvil = exe;
    } else if (strcmp(kind, "anvil") != 0) {
        return ovt_fail(OVT_EINVAL, "--node must be anvil, ganache or hardhat, got '%s'", kind);
    }
    *child = NULL;
    *rpc = NULL;
    chain_rpc_opts ro;
    chain_rpc_opts_default(&ro);
    ro.timeout_ms = 2000;
    ro.max_retries = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        int port = devnet_free_port();
        if (port < 0)
            return ovt_fail_errno(OVT_EIO, "no free TCP port on 127.0.0.1");
        char port_s[16];
        snprintf(port_s, sizeof port_s, "%d", port);
        char *argv[24];
        int n = 0;
        if (is_hardhat) { /* Hardhat runs only from its project folder: sh cds there, then execs it */
            char *hh[] = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", hh_dir, (char *)anvil, "node",
                          "--hostname", "127.0.0.1", "--port", port_s, NULL};
            for (int k = 0; hh[k]; k++)
                argv[n++] = hh[k];
        } else if (is_ganache) {
            char *g[] = {(char *)anvil, "--server.host", "127.0.0.1", "--server.port", port_s, "--wallet.mnemonic",
                         DEVNET_MNEMONIC, "--chain.hardfork", "shanghai", "--logging.quiet", NULL};
            for (int k = 0; g[k]; k++)
                argv[n++] = g[k];
            if (block_time) {
                argv[n++] = "--miner.blockTime";
                argv[n++] = bt;
            }
        } else {
            char *a[] = {(char *)anvil, "--host", "127.0.0.1", "--port", port_s, "--silent", NULL};
            for (int k = 0; a[k]; k++)
                argv[n++] = a[k];
            if (block_time) {
                argv[n++] = "--block-time";
                argv[n++] = bt;
            }
        }
        argv[n] = NULL;
        devnet_child *c;
        int rv = devnet_spawn(kids, &c, kind, argv, log_path);
        if (rv)
            return rv;
        snprintf(url, url_cap, "http://127.0.0.1:%d", port);
        if ((rv = chain_rpc_open(rpc, url, &ro)))
            return rv;
        for (int waited = 0; waited < 60000 && !devnet_interrupted(); waited += 100) { /* Hardhat takes seconds */
            uint64_t id;
            devnet_reap(kids);
            if (c->exited)
                break; /* most likely the port was taken meanwhile: try another */
            if (chain_rpc_chain_id(*rpc, &id) == 0) {
                /* Up. From here on the devnet follows the game with the
                 * client's ordinary timeouts and retries: a 2 s limit with no
                 * retry suits probing a port, but a loaded machine (the
                 * arbiter re-executing a step on both cores) can keep anvil
                 * from answering that fast, and one slow answer must not
                 * end the simulation. */
                chain_rpc_close(*rpc);
                chain_rpc_opts_default(&ro);
                if ((rv = chain_rpc_open(rpc, url, &ro)))
                    return rv;
                *child = c;
                return 0;
            }
            devnet_sleep_ms(100);
        }
        chain_rpc_close(*rpc);
        *rpc = NULL;
        if (!c->exited && devnet_interrupted()) {
            devnet_stop(c, 2000);
            return ovt_fail(OVT_EINVAL, "interrupted while anvil was starting");
        }
        if (!c->exited) {
            devnet_stop(c, 2000);
            return ovt_fail(OVT_ETIMEOUT, "%s did not answer on port %d within 60 s", anvil, port);
        }
    }
    return ovt_fail(OVT_EIO, "%s exited at start 4 times (see %s)", anvil, log_path);
}

int devnet_advance_time(chain_rpc *rpc, uint64_t seconds)
{
    json_t *r = NULL;
    int rv = chain_rpc_call(rpc, &r, "evm_increaseTime", json_pack("[I]", (json_int_t)seconds));
    json_decref(r);
    r = NULL;
    if (!rv)
        rv = chain_rpc_call(rpc, &r, "evm_mine", NULL);
    json_decref(r);
    return rv ? ovt_fail_wrap(rv, "moving anvil's clock by %llu s", (unsigned long long)seconds) : 0;
}
