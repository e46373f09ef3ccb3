#include "chain/sender.h"

#include <string.h>

#include "chain/arbitration.h"
#include "chain/password.h"

int chain_sender_open(chain_sender *s, const char *rpc_url, const char *keystore, const char *password_file,
                      const char *private_key, const chain_txm_opts *opts)
{
    memset(s, 0, sizeof *s);
    chain_privkey key;
    int rc = chain_load_key(&key, keystore, password_file, private_key);
    if (rc)
        return rc;
    chain_rpc_opts ro;
    chain_rpc_opts_default(&ro);
    ro.custom_errors = chain_arb_errors;
    rc = chain_rpc_open(&s->rpc, rpc_url, &ro);
    if (rc == 0)
        rc = chain_txm_init(&s->txm, s->rpc, &key, opts);
    ovt_wipe(&key, sizeof key);
    if (rc)
        chain_sender_close(s);
    return rc;
}

void chain_sender_close(chain_sender *s)
{
    if (s->txm.rpc)
        chain_txm_free(&s->txm);
    chain_rpc_close(s->rpc);
    memset(s, 0, sizeof *s);
}
