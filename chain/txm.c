/* Transaction lifecycle (see txm.h). */
#include "chain/txm.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/clock.h"
#include "common/metrics.h"

void chain_txm_opts_default(chain_txm_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->confirmations = 1;
    opts->receipt_timeout_ms = 0;
    opts->min_stall_ms = 60000;
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
    if (m->opts.min_stall_ms <= 0)
        m->opts.min_stall_ms = 60000;
    m->legacy = -1;
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
 * different clients ("nonce too low", "already known", "underpriced"). Only a
 * hint: what happened is decided by looking at the chain. */
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

/* Wordings that say the node already holds this very transaction: geth and
 * anvil "already known", Hardhat "Known transaction", ganache "already
 * imported" / "transaction already". */
static int said_known(const chain_txm *m)
{
    return node_said(m, "already known") || node_said(m, "known transaction") || node_said(m, "already imported");
}

/* Wordings that say the nonce is taken (geth, anvil, Hardhat; ganache "the
 * tx doesn't have the correct nonce"). */
static int said_nonce_taken(const chain_txm *m)
{
    return node_said(m, "nonce too low") || node_said(m, "nonce has already been used") ||
           node_said(m, "doesn't have the correct nonce") || node_said(m, "nonce is too low");
}

/* Whether the node speaks EIP-1559: baseFeePerGas in the latest block. */
static int detect_fee_market(chain_txm *m)
{
    if (m->legacy >= 0)
        return 0;
    chain_block_header h;
    int found;
    int rc = chain_rpc_block_header(m->rpc, &h, &found, "latest");
    if (rc)
        return ovt_fail_wrap(rc, "reading the latest block");
    m->legacy = found && !h.has_base_fee;
    return 0;
}

static int gas_price(chain_txm *m, uint64_t *out)
{
    json_t *res;
    int rc = chain_rpc_call(m->rpc, &res, "eth_gasPrice", NULL);
    if (rc)
        return ovt_fail_wrap(rc, "reading the gas price");
    rc = json_is_string(res) ? chain_hexq_u64(out, json_string_value(res)) : OVT_EFORMAT;
    json_decref(res);
    return rc ? ovt_fail(OVT_EFORMAT, "eth_gasPrice: not a quantity") : 0;
}

/* Fees for the next block: tip = max(eth_maxPriorityFeePerGas, fee-history
 * median, floor), at most the tip cap; cap = 2 * next base fee + tip, at
 * most the fee cap. A legacy node: *max_fee = *tip = eth_gasPrice. */
static int market_fees(chain_txm *m, uint64_t *max_fee, uint64_t *tip)
{
    int rc = detect_fee_market(m);
    if (rc)
        return rc;
    uint64_t base = 0, hist_tip = 0, node_tip = 0;
    if (!m->legacy) {
        rc = chain_rpc_fee_history(m->rpc, &base, &hist_tip, 5, 50.0);
        if (rc && chain_rpc_last_error(m->rpc)->is_node_error) {
            m->legacy = 1; /* a node without eth_feeHistory: legacy gas price */
            ovt_err_clear();
        } else if (rc) {
            return ovt_fail_wrap(rc, "reading fees");
        }
    }
    if (m->legacy) {
        uint64_t price;
        if ((rc = gas_price(m, &price)))
            return rc;
        if (price < m->opts.min_priority_fee)
            price = m->opts.min_priority_fee;
        if (m->opts.max_fee_cap && price > m->opts.max_fee_cap)
            return ovt_fail(OVT_EINVAL,
                            "the node's gas price %llu wei/gas is above the cap --max-fee-per-gas %llu: raise the "
                            "cap or wait for cheaper gas",
                            (unsigned long long)price, (unsigned long long)m->opts.max_fee_cap);
        *max_fee = *tip = price;
        ovt_err_clear();
        return 0;
    }
    if (chain_rpc_max_priority_fee(m->rpc, &node_tip) != 0)
        node_tip = 0; /* optional method: the fee history suffices */
    *tip = node_tip > hist_tip ? node_tip : hist_tip;
    if (*tip < m->opts.min_priority_fee)
        *tip = m->opts.min_priority_fee;
    if (m->opts.max_tip_cap && *tip > m->opts.max_tip_cap)
        *tip = m->opts.max_tip_cap;
    if (base > (UINT64_MAX - *tip) / 2)
        return ovt_fail(OVT_EFORMAT, "node reports an absurd base fee %llu", (unsigned long long)base);
    *max_fee = 2 * base + *tip;
    if (m->opts.max_fee_cap && *max_fee > m->opts.max_fee_cap) {
        if (*tip > m->opts.max_fee_cap || base > m->opts.max_fee_cap - *tip)
            return ovt_fail(OVT_EINVAL,
                            "fees (base %llu + tip %llu wei/gas) exceed the cap --max-fee-per-gas %llu: raise the "
                            "cap or wait for a lower base fee",
                            (unsigned long long)base, (unsigned long long)*tip,
                            (unsigned long long)m->opts.max_fee_cap);
        *max_fee = m->opts.max_fee_cap;
    }
    ovt_err_clear();
    return 0;
}

static void set_fees(chain_tx *tx, int legacy, uint64_t max_fee, uint64_t tip)
{
    if (legacy) {
        tx->type = CHAIN_TX_LEGACY;
        tx->gas_price = max_fee;
        tx->max_fee_per_gas = tx->max_priority_fee_per_gas = 0;
    } else {
        tx->type = CHAIN_TX_EIP1559;
        tx->max_fee_per_gas = max_fee;
        tx->max_priority_fee_per_gas = tip;
        tx->gas_price = 0;
    }
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
    uint64_t gas = 0, pending_nonce = 0, max_fee = 0, tip = 0;
    if (rc == 0)
        rc = chain_rpc_estimate_gas(m->rpc, &gas, &msg);
    if (rc == 0)
        rc = market_fees(m, &max_fee, &tip);
    if (rc == 0)
        rc = chain_rpc_nonce(m->rpc, &pending_nonce, &m->from, "pending");
    if (rc) {
        chain_txm_pending_free(p);
        return rc;
    }
    set_fees(&p->tx, m->legacy == 1, max_fee, tip);
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

/* What a look at the chain says about a version that the node refused or
 * whose answer was lost. */
enum { LOOK_NOT_SENT, LOOK_SENT, LOOK_MINED, LOOK_NONCE_TAKEN };

/* Looks: a receipt for h or any version already sent -> MINED; the node
 * holds h -> SENT; the account's latest nonce is past ours -> NONCE_TAKEN
 * (by a transaction that is none of ours); else NOT_SENT. *mined_h tells
 * whether h itself is the mined one. A failed look is NOT_SENT. */
static int look(chain_txm *m, const chain_txm_pending *p, const ovt_hash *h, int *mined_h)
{
    chain_receipt r;
    int found;
    *mined_h = 0;
    if (chain_rpc_receipt(m->rpc, &r, &found, h) == 0 && found) {
        chain_receipt_free(&r);
        *mined_h = 1;
        return LOOK_MINED;
    }
    for (size_t i = 0; i < p->nversions; i++) {
        if (chain_rpc_receipt(m->rpc, &r, &found, &p->hashes[i]) == 0 && found) {
            chain_receipt_free(&r);
            return LOOK_MINED;
        }
    }
    if (node_knows(m, h))
        return LOOK_SENT;
    uint64_t latest;
    if (chain_rpc_nonce(m->rpc, &latest, &m->from, "latest") == 0 && latest > p->tx.nonce)
        return LOOK_NONCE_TAKEN;
    return LOOK_NOT_SENT;
}

/* Test-only fault injection: OVT_TEST_EXIT_AFTER_SEND=N ends the process
 * (exit status 86) right after the Nth version this process handed to a
 * node, as if it were killed before hearing of the receipt. */
static void maybe_exit_after_send(void)
{
    static unsigned sent;
    const char *e = getenv("OVT_TEST_EXIT_AFTER_SEND");
    sent++;
    if (e && *e && strtoul(e, NULL, 10) == sent) {
        fflush(NULL);
        _exit(86);
    }
}

static void record(chain_txm *m, chain_txm_pending *p, const ovt_hash *h)
{
    p->hashes[p->nversions++] = *h;
    p->last_send_ms = chain_now_ms();
    if (p->tx.nonce >= m->next_nonce)
        m->next_nonce = p->tx.nonce + 1;
    m->sends++;
    maybe_exit_after_send();
}

/* Signs and sends the current version once. On a failure the chain is
 * looked at: this version held or mined counts as sent (0); an earlier
 * version mined sets *earlier_mined (0, nothing recorded); a nonce taken by
 * another transaction sets *nonce_used (error). Otherwise the node's error,
 * with its wording in the last-error for the caller's hints. */
static int send_version(chain_txm *m, chain_txm_pending *p, int *nonce_used, int *earlier_mined, int *underpriced)
{
    *nonce_used = 0;
    *earlier_mined = 0;
    *underpriced = 0;
    if (p->nversions == CHAIN_TXM_MAX_VERSIONS)
        return ovt_fail(OVT_EINVAL, "too many versions of one transaction");
    chain_buf raw;
    ovt_hash h, node_hash;
    chain_buf_init(&raw);
    int rc = chain_tx_sign(&raw, &h, &p->tx, &m->key);
    if (rc) {
        chain_buf_free(&raw);
        return rc;
    }
    if (m->on_send)
        m->on_send(m->on_send_ctx, &p->tx, &h);
    rc = chain_rpc_send_raw(m->rpc, &node_hash, raw.data, raw.len);
    chain_buf_free(&raw);
    if (rc == 0) {
        if (memcmp(node_hash.b, h.b, 32) != 0)
            return ovt_fail(OVT_EFORMAT, "node returned a different transaction hash than the one signed");
        record(m, p, &h);
        return 0;
    }
    /* Refused, or the answer was lost: look rather than believe words. */
    char said[512];
    snprintf(said, sizeof said, "%s", ovt_errmsg());
    int known_hint = said_known(m), taken_hint = said_nonce_taken(m), mined_h;
    *underpriced = node_said(m, "underpriced") || node_said(m, "gas price too low") || node_said(m, "fee too low");
    int state = look(m, p, &h, &mined_h);
    int out = 0;
    switch (state) {
    case LOOK_MINED:
        if (mined_h)
            record(m, p, &h);
        else
            *earlier_mined = 1;
        break;
    case LOOK_SENT: record(m, p, &h); break;
    case LOOK_NONCE_TAKEN:
        *nonce_used = 1;
        out = ovt_fail(rc, "%s", said);
        break;
    default:
        if (known_hint) {
            /* A node that holds it but does not show its pool by hash. */
            record(m, p, &h);
        } else if (taken_hint) {
            out = ovt_fail(rc, "%s (the nonce %llu is not used on chain yet: another transaction of this account "
                               "holds it in the node's pool)", said, (unsigned long long)p->tx.nonce);
        } else {
            out = ovt_fail(rc, "%s", said);
        }
    }
    if (out == 0)
        ovt_err_clear();
    return out;
}

int chain_txm_submit(chain_txm *m, chain_txm_pending *p)
{
    int nonce_used, earlier, underpriced;
    int rc = send_version(m, p, &nonce_used, &earlier, &underpriced);
    if (rc && nonce_used && p->nversions == 0) {
        /* Someone else used this account: read the nonce again, once. */
        uint64_t nonce;
        int rc2 = chain_rpc_nonce(m->rpc, &nonce, &m->from, "pending");
        if (rc2)
            return rc2;
        if (nonce > p->tx.nonce) {
            p->tx.nonce = nonce;
            rc = send_version(m, p, &nonce_used, &earlier, &underpriced);
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

static uint64_t cur_max_fee(const chain_tx *t)
{
    return t->type == CHAIN_TX_LEGACY ? t->gas_price : t->max_fee_per_gas;
}

static uint64_t cur_tip(const chain_tx *t)
{
    return t->type == CHAIN_TX_LEGACY ? t->gas_price : t->max_priority_fee_per_gas;
}

int chain_txm_bump(chain_txm *m, chain_txm_pending *p)
{
    if (p->capped)
        return 0;
    uint64_t max_fee, tip;
    int rc = market_fees(m, &max_fee, &tip);
    if (rc == OVT_EINVAL) /* the market is above the cap: a raise cannot help either */
        max_fee = tip = 0, ovt_err_clear();
    else if (rc)
        return rc;
    const chain_tx sent = p->tx; /* the version the node has now */
    int legacy = sent.type == CHAIN_TX_LEGACY;
    uint64_t c_tip = cur_tip(&sent), c_max = cur_max_fee(&sent);
    for (;;) {
        if (p->bumps >= m->opts.max_bumps) {
            p->tx = sent;
            return ovt_fail(OVT_ETIMEOUT, "transaction nonce %llu still unmined after %u fee bumps",
                            (unsigned long long)sent.nonce, p->bumps);
        }
        uint64_t new_tip = raised(c_tip), new_max = raised(c_max);
        if (tip > new_tip)
            new_tip = tip;
        if (max_fee > new_max)
            new_max = max_fee;
        if (new_max < new_tip)
            new_max = new_tip;
        if ((m->opts.max_fee_cap && new_max > m->opts.max_fee_cap) ||
            (!legacy && m->opts.max_tip_cap && new_tip > m->opts.max_tip_cap)) {
            p->tx = sent;
            p->capped = 1;
            snprintf(p->cap_note, sizeof p->cap_note,
                     "replacing nonce %llu needs %llu wei/gas (tip %llu), above the cap (max fee %llu, tip %llu)",
                     (unsigned long long)sent.nonce, (unsigned long long)new_max, (unsigned long long)new_tip,
                     (unsigned long long)m->opts.max_fee_cap, (unsigned long long)m->opts.max_tip_cap);
            return 0;
        }
        set_fees(&p->tx, legacy, new_max, new_tip);
        p->bumps++;
        int nonce_used, earlier, underpriced;
        rc = send_version(m, p, &nonce_used, &earlier, &underpriced);
        if (rc == 0 && earlier)
            p->tx = sent; /* an earlier version was mined meanwhile: the wait finds it */
        if (rc == 0) {
            if (!earlier)
                ovt_metrics_add(OVT_METRIC_TX_BUMPED, 1);
            return 0;
        }
        if (nonce_used) {
            p->tx = sent;
            return ovt_fail_wrap(rc, "nonce %llu was used by a transaction that is none of the %zu sent for it",
                                 (unsigned long long)sent.nonce, p->nversions);
        }
        if (!underpriced) {
            p->tx = sent;
            return ovt_fail_wrap(rc, "replacement of nonce %llu", (unsigned long long)sent.nonce);
        }
        /* The node wants a larger raise than ours: raise again from here. */
        c_tip = new_tip;
        c_max = new_max;
    }
}

/* Replays a reverted transaction with eth_call at its block for the reason. */
static int revert_reason(chain_txm *m, const chain_txm_pending *p, const chain_receipt *r)
{
    char block[24], h[67];
    snprintf(block, sizeof block, "0x%llx", (unsigned long long)r->block_number);
    hash_hex(h, &r->tx_hash);
    if (p->tx.gas_limit == 0) /* waited on by hash: the fields are not known */
        return ovt_fail(OVT_EREVERT, "transaction %s reverted in block %llu", h, (unsigned long long)r->block_number);
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

/* The chain's block interval from the timestamps of the last 8 blocks
 * (at least 1 s: an automining devnet stamps blocks a second apart or less). */
static long block_interval(chain_txm *m)
{
    if (m->block_interval_ms > 0)
        return m->block_interval_ms;
    long ms = 1000;
    chain_block_header head, old;
    int found_h = 0, found_o = 0;
    if (chain_rpc_block_header(m->rpc, &head, &found_h, "latest") == 0 && found_h && head.number >= 1) {
        uint64_t back = head.number < 8 ? head.number : 8;
        char tag[24];
        snprintf(tag, sizeof tag, "0x%llx", (unsigned long long)(head.number - back));
        if (chain_rpc_block_header(m->rpc, &old, &found_o, tag) == 0 && found_o && head.timestamp > old.timestamp) {
            uint64_t per = (head.timestamp - old.timestamp) * 1000 / back;
            if (per > 1000)
                ms = per > 3600000 ? 3600000 : (long)per;
        }
    }
    ovt_err_clear();
    m->block_interval_ms = ms;
    return ms;
}

static long max_l(long a, long b)
{
    return a > b ? a : b;
}

int chain_txm_wait(chain_txm *m, chain_txm_pending *p, chain_receipt *out)
{
    memset(out, 0, sizeof *out);
    if (p->nversions == 0)
        return ovt_fail(OVT_EINVAL, "transaction was never sent");
    long interval = block_interval(m);
    long stall_ms = max_l(m->opts.min_stall_ms, 10 * interval);
    long bump_ms = m->opts.bump_after_ms > 0 ? max_l(m->opts.bump_after_ms, 3 * interval) : 0;
    long unmined_ms = max_l(bump_ms ? bump_ms : m->opts.min_stall_ms, 3 * interval);
    long long start = chain_now_ms();
    long long hard = m->opts.receipt_timeout_ms > 0 ? start + m->opts.receipt_timeout_ms : 0;
    long long head_seen_ms = start;
    uint64_t last_head = 0;
    int have_head = 0;
    char h[67];
    for (;;) {
        uint64_t head;
        int rc = chain_rpc_block_number(m->rpc, &head);
        if (rc) {
            hash_hex(h, &p->hashes[p->nversions - 1]);
            return ovt_fail_wrap(rc, "waiting for transaction %s (nonce %llu)", h, (unsigned long long)p->tx.nonce);
        }
        long long now = chain_now_ms();
        if (!have_head || head != last_head) {
            have_head = 1;
            last_head = head;
            head_seen_ms = now;
        }
        int mined = 0;
        for (size_t i = p->nversions; i-- > 0;) {
            int found;
            hash_hex(h, &p->hashes[i]);
            rc = chain_rpc_receipt(m->rpc, out, &found, &p->hashes[i]);
            if (rc)
                return ovt_fail_wrap(rc, "waiting for transaction %s", h);
            if (!found)
                continue;
            mined = 1;
            if (head >= out->block_number && head - out->block_number + 1 >= m->opts.confirmations) {
                if (out->status == 0) {
                    ovt_metrics_add(OVT_METRIC_TX_FAILED, 1);
                    return revert_reason(m, p, out);
                }
                return 0;
            }
            if (now - head_seen_ms >= stall_ms) {
                uint64_t have = head >= out->block_number ? head - out->block_number + 1 : 0;
                rc = ovt_fail(OVT_ETIMEOUT,
                              "transaction %s is mined in block %llu but has %llu of %u confirmations, and the "
                              "node made no new block for %ld s (an automining devnet makes blocks only for "
                              "transactions: use --confirmations 1 there); run the command again to keep waiting",
                              h, (unsigned long long)out->block_number, (unsigned long long)have,
                              m->opts.confirmations, (long)((now - head_seen_ms) / 1000));
                chain_receipt_free(out);
                return rc;
            }
            chain_receipt_free(out);
            break; /* mined, not yet confirmed deeply enough: never bumped */
        }
        if (hard && now >= hard) {
            hash_hex(h, &p->hashes[p->nversions - 1]);
            ovt_metrics_add(OVT_METRIC_TX_FAILED, 1);
            return ovt_fail(OVT_ETIMEOUT, "transaction %s (nonce %llu) not confirmed within %ld ms", h,
                            (unsigned long long)p->tx.nonce, m->opts.receipt_timeout_ms);
        }
        if (!mined) {
            int can_bump = bump_ms > 0 && !p->capped && p->bumps < m->opts.max_bumps;
            if (can_bump && now - p->last_send_ms >= bump_ms) {
                rc = chain_txm_bump(m, p);
                if (rc)
                    return rc;
            } else if (!can_bump && now - p->last_send_ms >= unmined_ms) {
                hash_hex(h, &p->hashes[p->nversions - 1]);
                return ovt_fail(OVT_ETIMEOUT,
                                "transaction %s (nonce %llu) still unmined %ld s after its last version (%u fee "
                                "bump(s)%s%s); it may still be mined: run the command again to keep waiting, or "
                                "raise --max-fee-per-gas",
                                h, (unsigned long long)p->tx.nonce, (long)((now - p->last_send_ms) / 1000),
                                p->bumps, p->capped ? "; " : "", p->capped ? p->cap_note : "");
            }
        }
        chain_sleep_ms(m->opts.poll_ms);
    }
}

int chain_txm_wait_hash(chain_txm *m, const ovt_hash *hash, chain_receipt *out)
{
    memset(out, 0, sizeof *out);
    chain_txm_pending p;
    memset(&p, 0, sizeof p);
    p.hashes[0] = *hash;
    p.nversions = 1;
    p.capped = 1; /* fields unknown: never replaced */
    p.last_send_ms = chain_now_ms();
    chain_receipt r;
    int found;
    int rc = chain_rpc_receipt(m->rpc, &r, &found, hash);
    if (rc)
        return rc;
    if (found)
        chain_receipt_free(&r);
    else if (!node_knows(m, hash)) {
        char h[67];
        hash_hex(h, hash);
        return ovt_fail(OVT_ENOTFOUND, "the node knows no transaction %s", h);
    }
    return chain_txm_wait(m, &p, out);
}

int chain_txm_settle(chain_txm *m)
{
    long interval = block_interval(m);
    long limit = max_l(m->opts.bump_after_ms > 0 ? m->opts.bump_after_ms : 0, 3 * interval);
    limit = max_l(limit, m->opts.min_stall_ms) * (long)(m->opts.max_bumps + 3);
    long long start = chain_now_ms();
    for (;;) {
        uint64_t latest, pending;
        int rc = chain_rpc_nonce(m->rpc, &latest, &m->from, "latest");
        if (rc == 0)
            rc = chain_rpc_nonce(m->rpc, &pending, &m->from, "pending");
        if (rc)
            return ovt_fail_wrap(rc, "reading the account's nonces");
        if (latest >= pending)
            return 0;
        if (chain_now_ms() - start >= limit)
            return ovt_fail(OVT_ETIMEOUT,
                            "the account has %llu transaction(s) pending at the node (nonces %llu..%llu) that were "
                            "not mined within %ld s; wait for them (or replace them) and run the command again",
                            (unsigned long long)(pending - latest), (unsigned long long)latest,
                            (unsigned long long)(pending - 1), limit / 1000);
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
