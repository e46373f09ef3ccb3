/* The shared chain flags (see flags_chain.h). */
#include "cli/flags_chain.h"

#include <stdlib.h>
#include <string.h>

void cli_chain_init(chain_session_args *a)
{
    memset(a, 0, sizeof *a);
    a->rpc_url = getenv("ETH_RPC_URL");
}

int cli_chain_take(chain_session_args *a, int code, const char *arg)
{
    switch (code) {
    case CLI_CHAIN_RPC_URL: a->rpc_url = arg; return 1;
    case CLI_CHAIN_CONTRACT: a->contract = arg; return 1;
    case CLI_CHAIN_KEYSTORE: a->keystore = arg; return 1;
    case CLI_CHAIN_PASSWORD_FILE: a->password_file = arg; return 1;
    case CLI_CHAIN_PRIVATE_KEY: {
        char *copy = strdup(arg);
        if (copy) {
            memset((char *)arg, 'x', strlen(arg));
            a->private_key = copy;
        } else {
            a->private_key = arg;
        }
        return 1;
    }
    case CLI_CHAIN_PRIVATE_KEY_FILE: a->private_key_file = arg; return 1;
    case CLI_CHAIN_PRIVATE_KEY_ENV: a->private_key_env = arg; return 1;
    case CLI_CHAIN_CONFIRMATIONS: a->confirmations = arg; return 1;
    case CLI_CHAIN_MAX_FEE: a->max_fee = arg; return 1;
    case CLI_CHAIN_PRIORITY_FEE: a->priority_fee = arg; return 1;
    default: return 0;
    }
}
