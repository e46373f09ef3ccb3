#ifndef OVT_TESTS_ARBITER_WATCH_FIXTURE_H
#define OVT_TESTS_ARBITER_WATCH_FIXTURE_H

/* `ovt arbiter watch --metrics-addr` on the contract fixture's anvil, as
 * the suites that watch its HTTP server start it (test_arb_metrics,
 * test_arb_status): the fixture's arbiter key, an empty file:// store and a
 * state dir under dir, one confirmation, 0.2 s polls, no wait for missing
 * inputs; its log in dir/arbiter.log. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chain/keys.h"
#include "common/bytes.h"
#include "common/fileio.h"
#include "fixture.h"
#include "support/servers.h"

/* The watcher's pid (-1 when it could not start); contract gets the
 * contract's address as text. */
static pid_t watch_spawn(const fx_env *env, const char *dir, const char *maddr, bool json, char contract[43])
{
    const char *bin = getenv("OVT_BINARY_DIR");
    char ovt[4096], arb_log[300], state_dir[300], store[300], key[65];
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    snprintf(arb_log, sizeof arb_log, "%s/arbiter.log", dir);
    snprintf(state_dir, sizeof state_dir, "%s/arbiter", dir);
    snprintf(store, sizeof store, "file://%s/store", dir);
    if (ovt_mkdirs(store + 7, 0755))
        return -1;
    chain_address_to_string(contract, &env->arb.address);
    ovt_hex_encode(key, env->key[FX_ARBITER].b, 32);
    char *argv[] = {ovt, "arbiter", "watch", "--rpc-url", (char *)env->node.url, "--contract", contract,
                    "--private-key", key, "--store", store, "--state-dir", state_dir, "--confirmations", "1",
                    "--poll-interval", "0.2", "--input-wait", "0", "--metrics-addr", (char *)maddr,
                    json ? "--json" : NULL, NULL};
    return tsup_spawn(argv, arb_log);
}

/* A run of 8 steps naming the fixture's arbiter (bonds 1000 wei, an hour a
 * move), its two histories differing from step 3, both roots committed: a
 * dispute bisecting. 0 or the failing call's code. */
static int watch_dispute(fx_env *env, fx_run *run)
{
    memset(run, 0, sizeof *run);
    chain_arb_params params;
    fx_params(env, &params, 8, 3600, 1000, 1000);
    int rv = fx_open(env, run, &params, NULL);
    if (!rv)
        rv = fx_histories(run, 3);
    return rv ? rv : fx_commit_both(env, run, NULL);
}

#endif
