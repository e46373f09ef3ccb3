/* A party's connection to the node and the contract (see session.h). */
#include "chain/session.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chain/password.h"
#include "common/parse.h"
#include "common/fileio.h"

int chain_session_args_any(const chain_session_args *a)
{
    return a->contract || chain_session_key_sources(a) > 0;
}

int chain_session_key_sources(const chain_session_args *a)
{
    return !!a->keystore + !!a->private_key + !!a->private_key_file + !!a->private_key_env;
}

/* A raw hex key from --private-key-file or --private-key-env. */
static int load_raw_key(chain_privkey *key, const chain_session_args *a)
{
    char hex[200];
    if (a->private_key_env) {
        const char *v = getenv(a->private_key_env);
        if (!v || !*v)
            return ovt_fail(OVT_EINVAL, "--private-key-env: the environment variable %s is not set", a->private_key_env);
        if (strlen(v) >= sizeof hex)
            return ovt_fail(OVT_EINVAL, "--private-key-env: %s does not hold a hex key", a->private_key_env);
        strcpy(hex, v);
    } else {
        struct stat st;
        uint8_t *buf;
        size_t len;
        int rv = ovt_read_file(a->private_key_file, &buf, &len, sizeof hex - 1);
        if (rv)
            return ovt_fail_wrap(rv, "--private-key-file");
        if (stat(a->private_key_file, &st) == 0 && (st.st_mode & 077)) {
            ovt_wipe(buf, len);
            free(buf);
            return ovt_fail(OVT_EINVAL,
                            "--private-key-file %s can be read by other users (mode %03o): chmod 600 it first",
                            a->private_key_file, (unsigned)(st.st_mode & 0777));
        }
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
            len--;
        memcpy(hex, buf, len);
        hex[len] = 0;
        ovt_wipe(buf, len);
        free(buf);
    }
    int rv = chain_key_from_hex(key, hex);
    ovt_wipe(hex, sizeof hex);
    return rv == 0 ? 0
                   : ovt_fail_wrap(rv, "%s", a->private_key_env ? "--private-key-env" : "--private-key-file");
}

int chain_session_load_key(chain_privkey *key, const chain_session_args *a)
{
    if (chain_session_key_sources(a) != 1)
        return ovt_fail(OVT_EINVAL, "give exactly one of --keystore, --private-key-file, --private-key-env and "
                                    "--private-key");
    if (a->private_key_file || a->private_key_env)
        return load_raw_key(key, a);
    return chain_load_key(key, a->keystore, a->password_file, a->private_key);
}

int chain_session_key_address(chain_address *address, const chain_session_args *a)
{
    chain_privkey key;
    int rc = a->keystore && chain_session_key_sources(a) == 1
                 ? chain_unlock_keystore(&key, address, a->keystore, a->password_file)
                 : chain_session_load_key(&key, a);
    if (!rc && !a->keystore)
        rc = chain_key_address(address, &key);
    ovt_wipe(&key, sizeof key);
    return rc;
}

/* A fee per gas: wei, gwei or ether below 2^64 (the transaction's fields). */
static int fee_cap(uint64_t *out, const char *what, const char *text)
{
    chain_u256 v;
    int rc = chain_parse_wei(&v, what, text, 64);
    if (!rc)
        rc = chain_u256_to_u64(out, &v);
    return rc;
}

int chain_session_fee_caps(chain_txm_opts *opts, const char *max_fee, const char *priority_fee)
{
    int rc;
    if (max_fee && (rc = fee_cap(&opts->max_fee_cap, "--max-fee-per-gas", max_fee)))
        return rc;
    if (priority_fee && (rc = fee_cap(&opts->max_tip_cap, "--priority-fee", priority_fee)))
        return rc;
    if (opts->max_fee_cap && opts->max_tip_cap > opts->max_fee_cap)
        return ovt_fail(OVT_EINVAL, "--priority-fee (%llu) is above --max-fee-per-gas (%llu)",
                        (unsigned long long)opts->max_tip_cap, (unsigned long long)opts->max_fee_cap);
    return 0;
}

int chain_session_open(chain_session *s, const chain_session_args *a, int need_key)
{
    memset(s, 0, sizeof *s);
    if (!a->rpc_url || !*a->rpc_url)
        return ovt_fail(OVT_EINVAL, "--rpc-url is required (or set ETH_RPC_URL)");
    if (!a->contract)
        return ovt_fail(OVT_EINVAL, "--contract is required");
    chain_address addr;
    if (chain_address_from_string(&addr, a->contract))
        return ovt_fail(OVT_EINVAL, "--contract is not an address: '%s'", a->contract);
    chain_txm_opts to;
    chain_txm_opts_default(&to);
    uint32_t confirmations;
    int rv = 0;
    if (a->confirmations && !(rv = ovt_parse_u32(&confirmations, "--confirmations", a->confirmations, 1, 1000)))
        to.confirmations = confirmations;
    if (rv || (rv = chain_session_fee_caps(&to, a->max_fee, a->priority_fee)))
        return rv;
    chain_rpc_opts ro;
    chain_rpc_opts_default(&ro);
    ro.custom_errors = chain_arb_errors;
    rv = chain_rpc_open(&s->rpc, a->rpc_url, &ro);
    if (!rv)
        rv = chain_arb_attach(&s->arb, s->rpc, &addr);
    if (!rv && need_key) {
        chain_privkey key;
        rv = chain_session_load_key(&key, a);
        if (!rv)
            rv = chain_txm_init(&s->txm, s->rpc, &key, &to);
        ovt_wipe(&key, sizeof key);
    }
    if (rv)
        chain_session_close(s);
    return rv;
}

void chain_session_close(chain_session *s)
{
    if (s->txm.rpc)
        chain_txm_free(&s->txm);
    chain_rpc_close(s->rpc);
    memset(s, 0, sizeof *s);
}

void chain_hash_hex(char out[67], const ovt_hash *h)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, h->b, 32);
}
