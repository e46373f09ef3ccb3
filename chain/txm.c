/* Transaction lifecycle (see txm.h). */
#include "chain/txm.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/clock.h"
#include "common/metrics.h"

void chain_txm_opts_default(chain_txm_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->confirmations = 1;
    opts->receipt_timeout_ms = 120000;
    opts->poll_ms = 250;
    opts->bump_after_ms = 20000;
    opts->max_bumps = 5;
    opts->gas_margin_pct = 25;
}

static void hash_hex(char out[67], const ovt_hash *h)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, h->b, 32);
}

int chain_txm_init(chain_txm *m, chain_rpc *rpc, const chain_privkey *key, const chain_txm_opts *opts)
{
    memset(m, 0, sizeof *m);
    m->rpc = rpc;
    if (opts)
        m->opts = *opts;
    else
        chain_txm_opts_default(&m->opts);
    if (m->opts.confirmations == 0)
        m->opts.confirmations = 1;
    if (m->opts.poll_ms <= 0)
        m->opts.poll_ms = 250;
    int rc = chain_key_address(&m->from, key);
    if (rc == 0)
        rc = chain_rpc_chain_id(rpc, &m->chain_id);
    if (rc) {
        memset(m, 0, sizeof *m);
        return rc;
    }
    m->key = *key;
    return 0;
}

void chain_txm_free(chain_txm *m)
{
    ovt_wipe(&m->key, sizeof m->key);
    memset(m, 0, sizeof *m);
}

void chain_txm_pending_free(chain_txm_pending *p)
{
    free(p->data);
    memset(p, 0, sizeof *p);
}

/* The node's last error message, lower-cased, for matching the wordings of
 * different clients ("nonce too low", "already known", "underpriced"). */
static int node_said(const chain_txm *m, const char *needle)
{
    const chain_rpc_error *e = chain_rpc_last_error(m->rpc);
    if (!e->is_node_error)
        return 0;
    char lower[256];
    size_t i;
    for (i = 0; e->message[i] && i + 1 < sizeof lower; i++)
        lower[i] = (char)tolower((unsigned char)e->message[i]);
    lower[i] = '\0';
    return strstr(lower, needle) != NULL;
}

/* Fees for the next block: tip = max(eth_maxPriorityFeePerGas, fee-history
 * median, floor); cap = 2 * next base fee + tip. */
static int market_fees(chain_txm *m, uint64_t *max_fee, uint64_t *tip)
{
    uint64_t base, hist_tip, node_tip = 0;
    int rc = chain_rpc_fee_history(m->rpc, &base, &hist_tip, 5, 50.0);
    if (rc)
        return ovt_fail_wrap(rc, "reading fees");
    if (chain_rpc_max_priority_fee(m->rpc, &node_tip) != 0)
        node_tip = 0; /* optional method: the fee history suffices */
    *tip = node_tip > hist_tip ? node_tip : hist_tip;
    if (*tip < m->opts.min_priority_fee)
        *tip = m->opts.min_priority_fee;
    if (base > (UINT64_MAX - *tip) / 2)
        return ovt_fail(OVT_EFORMAT, "node reports an absurd base fee %llu", (unsigned long long)base);
    *max_fee = 2 * base + *tip;
    if (m->opts.max_fee_cap && *max_fee > m->opts.max_fee_cap) {
        if (*tip > m->opts.max_fee_cap || base > m->opts.max_fee_cap - *tip)
            return ovt_fail(OVT_EINVAL, "fees (base %llu + tip %llu wei/gas) exceed the cap of %llu",
                            (unsigned long long)base, (unsigned long long)*tip,
                            (unsigned long long)m->opts.max_fee_cap);
        *max_fee = m->opts.max_fee_cap;
    }
    ovt_err_clear();
    return 0;
}

int chain_txm_prepare(chain_txm *m, chain_txm_pending *p, const chain_address *to, const chain_u256 *value,
                      const uint8_t *data, size_t len)
{
    memset(p, 0, sizeof *p);
    chain_u256 zero = chain_u256_from_u64(0);
    if (!value)
        value = &zero;
    if (len) {
        p->data = malloc(len);
        if (!p->data)
            return ovt_fail(OVT_ENOMEM, "out of memory");
        memcpy(p->data, data, len);
    }
    chain_call_msg msg = {&m->from, to, value, data, len, 0};
    chain_buf ret;
    chain_buf_init(&ret);
    /* A revert now costs nothing and tells us why. */
    int rc = chain_rpc_eth_call(m->rpc, &ret, &msg, "pending");
    chain_buf_free(&ret);
    uint64_t gas = 0, pending_nonce = 0;
    if (rc == 0)
        rc = chain_rpc_estimate_gas(m->rpc, &gas, &msg);
    if (rc == 0)
        rc = market_fees(m, &p->tx.max_fee_per_gas, &p->tx.max_priority_fee_per_gas);
    if (rc == 0)
        rc = chain_rpc_nonce(m->rpc, &pending_nonce, &m->from, "pending");
    if (rc) {
        chain_txm_pending_free(p);
        return rc;
    }
    p->tx.type = CHAIN_TX_EIP1559;
    p->tx.chain_id = m->chain_id;
    p->tx.nonce = pending_nonce > m->next_nonce ? pending_nonce : m->next_nonce;
    p->tx.gas_limit = gas + gas / 100 * m->opts.gas_margin_pct + (gas % 100) * m->opts.gas_margin_pct / 100;
    p->tx.has_to = to != NULL;
    if (to)
        p->tx.to = *to;
    p->tx.value = *value;
    p->tx.data = p->data;
    p->tx.data_len = len;
    return 0;
}

/* Whether the node has the transaction with hash h (pending or mined):
 * eth_getTransactionByHash answers non-null. */
static int node_knows(chain_txm *m, const ovt_hash *h)
{
    char hex[67];
    json_t *res;
    hash_hex(hex, h);
    if (chain_rpc_call(m->rpc, &res, "eth_getTransactionByHash", json_pack("[s]", hex)) != 0)
        return 0;
    int known = json_is_object(res);
    json_decref(res);
    return known;
}

/* Signs and sends the current version once. *nonce_used is set when the node
 * says the nonce is taken by another transaction (for a replacement: an
 * earlier version won). When it is taken by this very transaction (an
 * earlier attempt whose answer was lost, then mined), that counts as sent. */
static int send_version(chain_txm *m, chain_txm_pending *p, int *nonce_used)
{
    *nonce_used = 0;
    if (p->nversions == CHAIN_TXM_MAX_VERSIONS)
        return ovt_fail(OVT_EINVAL, "too many versions of one transaction");
    chain_buf raw;
    ovt_hash h, node_hash;
    chain_buf_init(&raw);
    int rc = chain_tx_sign(&raw, &h, &p->tx, &m->key);
    if (rc == 0) {
        rc = chain_rpc_send_raw(m->rpc, &node_hash, raw.data, raw.len);
        if (rc && node_said(m, "already known")) {
            rc = 0; /* the node has exactly this transaction */
            ovt_err_clear();
        } else if (rc && (node_said(m, "nonce too low") || node_said(m, "nonce has already been used"))) {
            char said[512];
            snprintf(said, sizeof said, "%s", ovt_errmsg());
            if (node_knows(m, &h)) {
                rc = 0;
                ovt_err_clear();
            } else {
                *nonce_used = 1;
                ovt_fail(rc, "%s", said);
            }
        } else if (rc == 0 && memcmp(node_hash.b, h.b, 32) != 0) {
            rc = ovt_fail(OVT_EFORMAT, "node returned a different transaction hash than the one signed");
        }
    }
    chain_buf_free(&raw);
    if (rc == 0) {
        p->hashes[p->nversions++] = h;
        p->last_send_ms = chain_now_ms();
        if (p->tx.nonce >= m->next_nonce)
            m->next_nonce = p->tx.nonce + 1;
    }
    return rc;
}

int chain_txm_submit(chain_txm *m, chain_txm_pending *p)
{
    int nonce_used;
    int rc = send_version(m, p, &nonce_used);
    if (rc && nonce_used && p->nversions == 0) {
        /* Someone else used this account: read the nonce again, once. */
        uint64_t nonce;
        int rc2 = chain_rpc_nonce(m->rpc, &nonce, &m->from, "pending");
        if (rc2)
            return rc2;
        if (nonce > p->tx.nonce) {
            p->tx.nonce = nonce;
            rc = send_version(m, p, &nonce_used);
        }
    }
    ovt_metrics_add(rc ? OVT_METRIC_TX_FAILED : OVT_METRIC_TX_SENT, 1);
    return rc;
}

/* v * 9/8 rounded up, so the raise is at least 12.5%; +1 so 0 moves too. */
static uint64_t raised(uint64_t v)
{
    uint64_t r = v + (v + 7) / 8;
    return r <= v ? v + 1 : r;
}

int chain_txm_bump(chain_txm *m, chain_txm_pending *p)
{
    uint64_t max_fee, tip;
    int rc = market_fees(m, &max_fee, &tip);
    if (rc)
        return rc;
    const chain_tx sent = p->tx; /* the version the node has now */
    uint64_t cur_tip = sent.max_priority_fee_per_gas, cur_max = sent.max_fee_per_gas;
    for (;;) {
        if (p->bumps >= m->opts.max_bumps) {
            p->tx = sent;
            return ovt_fail(OVT_ETIMEOUT, "transaction nonce %llu still unmined after %u fee bumps",
                            (unsigned long long)sent.nonce, p->bumps);
        }
        uint64_t new_tip = raised(cur_tip), new_max = raised(cur_max);
        if (tip > new_tip)
            new_tip = tip;
        if (max_fee > new_max)
            new_max = max_fee;
        if (new_max < new_tip)
            new_max = new_tip;
        if (m->opts.max_fee_cap && new_max > m->opts.max_fee_cap) {
            p->tx = sent;
            return ovt_fail(OVT_EINVAL, "replacing nonce %llu needs %llu wei/gas, above the cap %llu",
                            (unsigned long long)sent.nonce, (unsigned long long)new_max,
                            (unsigned long long)m->opts.max_fee_cap);
        }
        p->tx.max_priority_fee_per_gas = new_tip;
        p->tx.max_fee_per_gas = new_max;
        p->bumps++;
        int nonce_used;
        rc = send_version(m, p, &nonce_used);
        if (rc == 0) {
            ovt_metrics_add(OVT_METRIC_TX_BUMPED, 1);
            return 0;
        }
        if (nonce_used) {
            /* An earlier version was mined meanwhile: the wait will find it. */
            p->tx = sent;
            ovt_err_clear();
            return 0;
        }
        if (!node_said(m, "underpriced")) {
            p->tx = sent;
            return ovt_fail_wrap(rc, "replacement of nonce %llu", (unsigned long long)sent.nonce);
        }
        /* The node wants a larger raise than ours: raise again from here. */
        cur_tip = new_tip;
        cur_max = new_max;
    }
}

/* Replays a reverted transaction with eth_call at its block for the reason. */
static int revert_reason(chain_txm *m, const chain_txm_pending *p, const chain_receipt *r)
{
    char block[24], h[67];
    snprintf(block, sizeof block, "0x%llx", (unsigned long long)r->block_number);
    hash_hex(h, &r->tx_hash);
    chain_call_msg msg = {&m->from, p->tx.has_to ? &p->tx.to : NULL, &p->tx.value, p->tx.data, p->tx.data_len,
                          p->tx.gas_limit};
    chain_buf ret;
    chain_buf_init(&ret);
    int rc = chain_rpc_eth_call(m->rpc, &ret, &msg, block);
    chain_buf_free(&ret);
    if (rc == OVT_EREVERT)
        return ovt_fail_wrap(OVT_EREVERT, "transaction %s reverted in block %llu", h,
                             (unsigned long long)r->block_number);
    if (r->gas_used >= p->tx.gas_limit)
        return ovt_fail(OVT_EREVERT,
                        "transaction %s ran out of gas in block %llu (it used all of its limit, %llu): the call "
                        "took a costlier path than when its gas was estimated",
                        h, (unsigned long long)r->block_number, (unsigned long long)p->tx.gas_limit);
    return ovt_fail(OVT_EREVERT, "transaction %s reverted in block %llu (no reason recovered)", h,
                    (unsigned long long)r->block_number);
}

int chain_txm_wait(chain_txm *m, chain_txm_pending *p, chain_receipt *out)
{
    memset(out, 0, sizeof *out);
    if (p->nversions == 0)
        return ovt_fail(OVT_EINVAL, "transaction was never sent");
    long long deadline = chain_now_ms() + m->opts.receipt_timeout_ms;
    char h[67];
    for (;;) {
        for (size_t i = p->nversions; i-- > 0;) {
            int found;
            hash_hex(h, &p->hashes[i]);
            int rc = chain_rpc_receipt(m->rpc, out, &found, &p->hashes[i]);
            if (rc)
                return ovt_fail_wrap(rc, "waiting for transaction %s", h);
            if (!found)
                continue;
            uint64_t head;
            rc = chain_rpc_block_number(m->rpc, &head);
            if (rc) {
                chain_receipt_free(out);
                return ovt_fail_wrap(rc, "waiting for confirmations of %s", h);
            }
            if (head >= out->block_number && head - out->block_number + 1 >= m->opts.confirmations) {
                if (out->status == 0) {
                    ovt_metrics_add(OVT_METRIC_TX_FAILED, 1);
                    return revert_reason(m, p, out);
                }
                return 0;
            }
            chain_receipt_free(out);
            break; /* mined, not yet confirmed deeply enough */
        }
        if (chain_now_ms() >= deadline) {
            hash_hex(h, &p->hashes[p->nversions - 1]);
            ovt_metrics_add(OVT_METRIC_TX_FAILED, 1);
            return ovt_fail(OVT_ETIMEOUT, "transaction %s (nonce %llu) not confirmed within %ld ms", h,
                            (unsigned long long)p->tx.nonce, m->opts.receipt_timeout_ms);
        }
        if (m->opts.bump_after_ms > 0 && chain_now_ms() - p->last_send_ms >= m->opts.bump_after_ms) {
            int rc = chain_txm_bump(m, p);
            if (rc)
                return rc;
        }
        chain_sleep_ms(m->opts.poll_ms);
    }
}

int chain_txm_send_extra(chain_txm *m, chain_receipt *out, const chain_address *to, const chain_u256 *value,
                         const uint8_t *data, size_t len, uint64_t extra_gas)
{
    chain_txm_pending p;
    memset(out, 0, sizeof *out);
    int rc = chain_txm_prepare(m, &p, to, value, data, len);
    if (rc)
        return rc;
    p.tx.gas_limit += extra_gas;
    rc = chain_txm_submit(m, &p);
    if (rc == 0)
        rc = chain_txm_wait(m, &p, out);
    chain_txm_pending_free(&p);
    return rc;
}

int chain_txm_send(chain_txm *m, chain_receipt *out, const chain_address *to, const chain_u256 *value,
                   const uint8_t *data, size_t len)
{
    return chain_txm_send_extra(m, out, to, value, data, len, 0);
}
