/* The devnet's transactions, read back from the node (ledger.h). */
#include "examples/devnet/ledger.h"

#include <stdlib.h>
#include <string.h>

#include "chain/keccak.h"
#include "chain/keys.h"

/* The arbitration contract's state-changing functions (docs/contract.md). */
static const char *const functions[][2] = {
    {"open", "open((address,address,address[5],bytes32,bytes32,uint64,uint32,uint32,uint32,uint96,uint96,uint8,uint96,"
             "uint64))"},
    {"accept", "accept(bytes32)"},
    {"commitVerdict", "commitVerdict(bytes32,bytes32)"},
    {"revealVerdict", "revealVerdict(bytes32,uint64,uint8,bytes32,bytes32)"},
    {"commit", "commit(bytes32,bytes32,bytes)"},
    {"bisect", "bisect(bytes32,uint8,bytes32,bytes32)"},
    {"revealLeaf", "revealLeaf(bytes32,uint8,(bytes32,bytes32,bytes32),(bytes32,bytes32,bytes32),bytes32[])"},
    {"verdict", "verdict(bytes32,uint64,uint8,bytes32)"},
    {"timeout", "timeout(bytes32)"},
    {"withdraw", "withdraw()"},
    {"challenge", "challenge(bytes32,bytes32)"},
    {"commitReplay", "commitReplay(bytes32,bytes32,bytes32,bytes)"},
    {"revealSites", "revealSites(bytes32,bytes32)"},
    {"revealSite", "revealSite(bytes32,uint8,bytes32,(bytes32,bytes32,bytes32),(bytes32,bytes32,bytes32),bytes32[])"},
    /* the narrowing contract's (OvtNarrow; its timeout(bytes32) is the same selector as the above) */
    {"startNarrow", "start(bytes32)"},
    {"postTrace", "postTrace(bytes32,(bytes32,bytes32,bytes32),bytes32,uint64,bytes32[],bytes32[],uint64[])"},
    {"descend", "descend(bytes32,uint32,bytes32,bytes32)"},
    {"revealRecord", "reveal(bytes32,uint32,bytes)"},
    {"compareStates", "compareStates(bytes32,uint32,bytes32[],uint64[],bytes32[],uint64[])"},
    {"postChunks", "postChunks(bytes32,uint32,bytes32,uint64,bytes32[])"}, /* level 4 */
};

const char *devnet_call_name(const uint8_t *input, size_t len, int creates)
{
    if (creates)
        return "deploy";
    if (len < 4)
        return "other";
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
        ovt_hash h;
        chain_keccak256(&h, functions[i][1], strlen(functions[i][1]));
        if (memcmp(h.b, input, 4) == 0)
            return functions[i][0];
    }
    return "other";
}

static const char *party_of(const devnet_parties *p, const chain_address *from)
{
    for (size_t i = 0; i < p->n; i++)
        if (chain_address_eq(&p->addrs[i], from))
            return p->names[i];
    return "other";
}

/* One transaction object of eth_getBlockByNumber(n, true). */
static int read_tx(devnet_tx *t, chain_rpc *rpc, const json_t *obj, const devnet_parties *parties)
{
    chain_address from;
    int rv;
    if ((rv = chain_json_hash(&t->hash, obj, "hash")) || (rv = chain_json_address(&from, obj, "from")))
        return rv;
    const json_t *to = json_object_get(obj, "to");
    const char *input = json_string_value(json_object_get(obj, "input"));
    uint8_t sel[4] = {0};
    size_t sel_len = 0;
    if (input && strncmp(input, "0x", 2) == 0 && strlen(input) >= 10) {
        char hex[9];
        memcpy(hex, input + 2, 8);
        hex[8] = '\0';
        if (ovt_hex_decode(sel, 4, hex) == 0)
            sel_len = 4;
    }
    t->call = devnet_call_name(sel, sel_len, to == NULL || json_is_null(to));
    t->party = party_of(parties, &from);
    chain_receipt r;
    int found = 0;
    if ((rv = chain_rpc_receipt(rpc, &r, &found, &t->hash)))
        return rv;
    if (!found)
        return ovt_fail(OVT_ENOTFOUND, "no receipt for a mined transaction");
    t->block = r.block_number;
    t->gas_used = r.gas_used;
    t->status = r.status;
    chain_receipt_free(&r);
    return 0;
}

int devnet_ledger_read(devnet_ledger *out, chain_rpc *rpc, uint64_t from, uint64_t to,
                       const devnet_parties *parties)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    int rv = 0;
    for (uint64_t b = from; b <= to && rv == 0; b++) {
        char q[24];
        snprintf(q, sizeof q, "0x%llx", (unsigned long long)b);
        json_t *block = NULL;
        if ((rv = chain_rpc_call(rpc, &block, "eth_getBlockByNumber", json_pack("[s, b]", q, 1))))
            break;
        const json_t *txs = json_object_get(block, "transactions");
        size_t i;
        const json_t *obj;
        json_array_foreach(txs, i, obj)
        {
            if (out->n == cap) {
                size_t ncap = cap ? 2 * cap : 64;
                devnet_tx *p = realloc(out->tx, ncap * sizeof *p);
                if (!p) {
                    rv = ovt_fail(OVT_ENOMEM, "out of memory for the transaction list");
                    break;
                }
                out->tx = p;
                cap = ncap;
            }
            if ((rv = read_tx(&out->tx[out->n], rpc, obj, parties))) {
                rv = ovt_fail_wrap(rv, "block %llu", (unsigned long long)b);
                break;
            }
            out->n++;
        }
        json_decref(block);
    }
    if (rv)
        devnet_ledger_free(out);
    return rv;
}

void devnet_ledger_free(devnet_ledger *l)
{
    free(l->tx);
    l->tx = NULL;
    l->n = 0;
}

uint64_t devnet_ledger_gas(const devnet_ledger *l, const char *party)
{
    uint64_t gas = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->tx[i].party == party || strcmp(l->tx[i].party, party) == 0)
            gas += l->tx[i].gas_used;
    return gas;
}
