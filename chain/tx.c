/* Transaction encoding and signing (see tx.h). */
#include "chain/tx.h"

#include <string.h>

#include "chain/keccak.h"
#include "chain/rlp.h"

/* Appends the unsigned field list (without the list header) shared by the
 * signing payload and the signed form. */
static void put_fields(chain_buf *b, const chain_tx *tx)
{
    if (tx->type == CHAIN_TX_EIP1559) {
        chain_rlp_put_uint(b, tx->chain_id);
        chain_rlp_put_uint(b, tx->nonce);
        chain_rlp_put_uint(b, tx->max_priority_fee_per_gas);
        chain_rlp_put_uint(b, tx->max_fee_per_gas);
    } else {
        chain_rlp_put_uint(b, tx->nonce);
        chain_rlp_put_uint(b, tx->gas_price);
    }
    chain_rlp_put_uint(b, tx->gas_limit);
    chain_rlp_put_bytes(b, tx->has_to ? tx->to.b : NULL, tx->has_to ? 20 : 0);
    chain_rlp_put_u256(b, &tx->value);
    chain_rlp_put_bytes(b, tx->data, tx->data_len);
    if (tx->type == CHAIN_TX_EIP1559) {
        size_t access_list = chain_rlp_list_begin(b);
        chain_rlp_list_end(b, access_list);
    }
}

static int check_tx(const chain_tx *tx)
{
    if (tx->type != CHAIN_TX_EIP1559 && tx->type != CHAIN_TX_LEGACY)
        return ovt_fail(OVT_EINVAL, "unsupported transaction type %d", tx->type);
    if (tx->type == CHAIN_TX_LEGACY && tx->chain_id >= (1ULL << 62))
        return ovt_fail(OVT_EINVAL, "chain id %llu too large for an EIP-155 transaction",
                        (unsigned long long)tx->chain_id);
    if (tx->type == CHAIN_TX_EIP1559 && tx->max_priority_fee_per_gas > tx->max_fee_per_gas)
        return ovt_fail(OVT_EINVAL, "maxPriorityFeePerGas %llu exceeds maxFeePerGas %llu",
                        (unsigned long long)tx->max_priority_fee_per_gas,
                        (unsigned long long)tx->max_fee_per_gas);
    if (tx->data_len > 0 && !tx->data)
        return ovt_fail(OVT_EINVAL, "transaction data is NULL with a nonzero length");
    return 0;
}

/* Strips leading zeros of a 32-byte scalar for RLP. */
static void put_scalar(chain_buf *b, const uint8_t v[32])
{
    chain_u256 u;
    memcpy(u.b, v, 32);
    chain_rlp_put_u256(b, &u);
}

int chain_tx_signing_hash(ovt_hash *out, const chain_tx *tx)
{
    memset(out, 0, sizeof *out);
    int rc = check_tx(tx);
    if (rc)
        return rc;
    chain_buf b;
    chain_buf_init(&b);
    if (tx->type == CHAIN_TX_EIP1559)
        chain_buf_push(&b, CHAIN_TX_EIP1559);
    size_t list = chain_rlp_list_begin(&b);
    put_fields(&b, tx);
    if (tx->type == CHAIN_TX_LEGACY) {
        chain_rlp_put_uint(&b, tx->chain_id);
        chain_rlp_put_uint(&b, 0);
        chain_rlp_put_uint(&b, 0);
    }
    chain_rlp_list_end(&b, list);
    rc = chain_buf_check(&b);
    if (rc == 0)
        chain_keccak256(out, b.data, b.len);
    chain_buf_free(&b);
    return rc;
}

int chain_tx_encode_signed(chain_buf *raw, const chain_tx *tx, const chain_sig *sig)
{
    int rc = check_tx(tx);
    if (rc)
        return rc;
    if (sig->recid > 1)
        return ovt_fail(OVT_EINVAL, "signature recovery id %u is not 0 or 1", sig->recid);
    if (tx->type == CHAIN_TX_EIP1559)
        chain_buf_push(raw, CHAIN_TX_EIP1559);
    size_t list = chain_rlp_list_begin(raw);
    put_fields(raw, tx);
    if (tx->type == CHAIN_TX_EIP1559)
        chain_rlp_put_uint(raw, sig->recid);
    else
        chain_rlp_put_uint(raw, tx->chain_id * 2 + 35 + sig->recid);
    put_scalar(raw, sig->r);
    put_scalar(raw, sig->s);
    chain_rlp_list_end(raw, list);
    return chain_buf_check(raw);
}

int chain_tx_sign(chain_buf *raw, ovt_hash *tx_hash, const chain_tx *tx, const chain_privkey *key)
{
    ovt_hash h;
    chain_sig sig;
    memset(tx_hash, 0, sizeof *tx_hash);
    int rc = chain_tx_signing_hash(&h, tx);
    if (rc == 0)
        rc = chain_sign_hash(&sig, key, &h);
    size_t start = raw->len;
    if (rc == 0)
        rc = chain_tx_encode_signed(raw, tx, &sig);
    if (rc == 0)
        chain_keccak256(tx_hash, raw->data + start, raw->len - start);
    return rc;
}

/* Reads the next list element as an integer / address / bytes. */
static int next_item(const chain_rlp_item *list, size_t *pos, chain_rlp_item *item, const char *what)
{
    int rc = chain_rlp_list_next(list, pos, item);
    if (rc < 0)
        return ovt_fail_wrap(rc, "transaction field %s", what);
    if (rc == 0)
        return ovt_fail(OVT_EFORMAT, "transaction ends before field %s", what);
    return 0;
}

static int next_uint(const chain_rlp_item *list, size_t *pos, uint64_t *out, const char *what)
{
    chain_rlp_item item;
    int rc = next_item(list, pos, &item, what);
    if (rc == 0 && (rc = chain_rlp_get_uint(out, &item)) != 0)
        rc = ovt_fail_wrap(rc, "transaction field %s", what);
    return rc;
}

static int next_scalar(const chain_rlp_item *list, size_t *pos, uint8_t out[32], const char *what)
{
    chain_rlp_item item;
    chain_u256 v;
    int rc = next_item(list, pos, &item, what);
    if (rc == 0 && (rc = chain_rlp_get_u256(&v, &item)) != 0)
        rc = ovt_fail_wrap(rc, "transaction field %s", what);
    if (rc == 0)
        memcpy(out, v.b, 32);
    return rc;
}

int chain_tx_decode_signed(chain_tx *tx, chain_sig *sig, chain_address *sender, const uint8_t *raw,
                           size_t len)
{
    memset(tx, 0, sizeof *tx);
    memset(sig, 0, sizeof *sig);
    memset(sender, 0, sizeof *sender);
    if (len == 0)
        return ovt_fail(OVT_EFORMAT, "empty transaction");
    int typed = raw[0] == CHAIN_TX_EIP1559;
    if (!typed && raw[0] < 0xc0)
        return ovt_fail(OVT_EFORMAT, "unsupported transaction type byte 0x%02x", raw[0]);
    chain_rlp_item list, item;
    int rc = chain_rlp_decode_whole(&list, raw + typed, len - typed);
    if (rc)
        return rc;
    if (!list.is_list)
        return ovt_fail(OVT_EFORMAT, "transaction is not an RLP list");
    size_t pos = 0;
    uint64_t v = 0;
    tx->type = typed ? CHAIN_TX_EIP1559 : CHAIN_TX_LEGACY;
    if (typed) {
        if ((rc = next_uint(&list, &pos, &tx->chain_id, "chainId")) ||
            (rc = next_uint(&list, &pos, &tx->nonce, "nonce")) ||
            (rc = next_uint(&list, &pos, &tx->max_priority_fee_per_gas, "maxPriorityFeePerGas")) ||
            (rc = next_uint(&list, &pos, &tx->max_fee_per_gas, "maxFeePerGas")))
            return rc;
    } else if ((rc = next_uint(&list, &pos, &tx->nonce, "nonce")) ||
               (rc = next_uint(&list, &pos, &tx->gas_price, "gasPrice"))) {
        return rc;
    }
    if ((rc = next_uint(&list, &pos, &tx->gas_limit, "gas")) || (rc = next_item(&list, &pos, &item, "to")))
        return rc;
    if (item.is_list || (item.len != 0 && item.len != 20))
        return ovt_fail(OVT_EFORMAT, "transaction field to: not empty or 20 bytes");
    tx->has_to = item.len == 20;
    if (tx->has_to)
        memcpy(tx->to.b, item.payload, 20);
    if ((rc = next_scalar(&list, &pos, tx->value.b, "value")) || (rc = next_item(&list, &pos, &item, "data")))
        return rc;
    if (item.is_list)
        return ovt_fail(OVT_EFORMAT, "transaction field data: a list");
    tx->data = item.payload;
    tx->data_len = item.len;
    if (typed) {
        if ((rc = next_item(&list, &pos, &item, "accessList")))
            return rc;
        if (!item.is_list || item.len != 0)
            return ovt_fail(OVT_EFORMAT, "transactions with a non-empty access list are not supported");
    }
    if ((rc = next_uint(&list, &pos, &v, "v")) || (rc = next_scalar(&list, &pos, sig->r, "r")) ||
        (rc = next_scalar(&list, &pos, sig->s, "s")))
        return rc;
    if (pos != list.len)
        return ovt_fail(OVT_EFORMAT, "transaction has extra fields");
    if (typed) {
        if (v > 1)
            return ovt_fail(OVT_EFORMAT, "yParity %llu is not 0 or 1", (unsigned long long)v);
        sig->recid = (uint8_t)v;
    } else {
        if (v < 37)
            return ovt_fail(OVT_EFORMAT, "legacy transaction without EIP-155 replay protection");
        tx->chain_id = (v - 35) / 2;
        sig->recid = (uint8_t)((v - 35) % 2);
    }
    ovt_hash h;
    if ((rc = chain_tx_signing_hash(&h, tx)))
        return rc;
    return chain_recover_address(sender, sig, &h);
}

int chain_create_address(chain_address *out, const chain_address *from, uint64_t nonce)
{
    memset(out, 0, sizeof *out);
    chain_buf b;
    chain_buf_init(&b);
    size_t list = chain_rlp_list_begin(&b);
    chain_rlp_put_bytes(&b, from->b, sizeof from->b);
    chain_rlp_put_uint(&b, nonce);
    chain_rlp_list_end(&b, list);
    int rc = chain_buf_check(&b);
    if (rc == 0) {
        ovt_hash h;
        chain_keccak256(&h, b.data, b.len);
        memcpy(out->b, h.b + 12, sizeof out->b);
    }
    chain_buf_free(&b);
    return rc;
}
