/* A party's policy on run terms (see policy.h). */
#include "party/policy.h"

#include <stdarg.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"
#include "common/fileio.h"
#include "common/parse.h"

void party_policy_init(party_policy *p)
{
    memset(p, 0, sizeof *p);
    p->max_bond = chain_u256_from_u64(1000000000000000000ULL); /* 1 ETH */
    p->min_commit_timeout = 60;
    p->min_move_timeout = 60;
    p->min_verdict_timeout = 600;
}

int party_policy_set(party_policy *p, party_policy_term term, const char *what, const char *text)
{
    switch (term) {
    case PARTY_TERM_MAX_BOND: return chain_parse_wei(&p->max_bond, what, text, 96);
    case PARTY_TERM_MAX_OTHER_BOND:
        p->have_max_other_bond = 1;
        return chain_parse_wei(&p->max_other_bond, what, text, 96);
    case PARTY_TERM_MIN_OTHER_BOND: return chain_parse_wei(&p->min_other_bond, what, text, 96);
    case PARTY_TERM_MIN_COMMIT_TIMEOUT: return ovt_parse_u32(&p->min_commit_timeout, what, text, 0, UINT32_MAX);
    case PARTY_TERM_MIN_MOVE_TIMEOUT: return ovt_parse_u32(&p->min_move_timeout, what, text, 0, UINT32_MAX);
    case PARTY_TERM_MIN_VERDICT_TIMEOUT: return ovt_parse_u32(&p->min_verdict_timeout, what, text, 0, UINT32_MAX);
    case PARTY_TERM_MAX_STEPS: return ovt_parse_u64(&p->max_steps, what, text, 0, UINT64_MAX);
    case PARTY_TERM_CHAIN_ID: return ovt_parse_u64(&p->chain_id, what, text, 0, UINT64_MAX);
    case PARTY_TERM_CONFIG_HASH:
        p->have_config = 1;
        return chain_parse_hash(&p->config_hash, what, text);
    case PARTY_TERM_DATASET_HASH:
        p->have_dataset = 1;
        return chain_parse_hash(&p->dataset_hash, what, text);
    case PARTY_TERM_MAX_VERDICT_TIMEOUT: return ovt_parse_u32(&p->max_verdict_timeout, what, text, 0, UINT32_MAX);
    case PARTY_TERM_MIN_ARBITER_BOND: return chain_parse_wei(&p->min_arbiter_bond, what, text, 96);
    case PARTY_TERM_MAX_ARBITER_BOND:
        p->have_max_arbiter_bond = 1;
        return chain_parse_wei(&p->max_arbiter_bond, what, text, 96);
    default: return ovt_fail(OVT_EINVAL, "internal: policy term %d", (int)term);
    }
}

static const struct {
    const char *key;
    party_policy_term term;
} file_keys[] = {
    {"max_bond", PARTY_TERM_MAX_BOND},
    {"max_other_bond", PARTY_TERM_MAX_OTHER_BOND},
    {"min_other_bond", PARTY_TERM_MIN_OTHER_BOND},
    {"min_commit_timeout", PARTY_TERM_MIN_COMMIT_TIMEOUT},
    {"min_move_timeout", PARTY_TERM_MIN_MOVE_TIMEOUT},
    {"min_verdict_timeout", PARTY_TERM_MIN_VERDICT_TIMEOUT},
    {"max_steps", PARTY_TERM_MAX_STEPS},
    {"chain_id", PARTY_TERM_CHAIN_ID},
    {"config_hash", PARTY_TERM_CONFIG_HASH},
    {"dataset_hash", PARTY_TERM_DATASET_HASH},
    {"max_verdict_timeout", PARTY_TERM_MAX_VERDICT_TIMEOUT},
    {"min_arbiter_bond", PARTY_TERM_MIN_ARBITER_BOND},
    {"max_arbiter_bond", PARTY_TERM_MAX_ARBITER_BOND},
};

int party_policy_load(party_policy *p, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, 1 << 16);
    if (rv)
        return ovt_fail_wrap(rv, "--policy");
    json_error_t err;
    json_t *j = json_loadb((const char *)buf, len, 0, &err);
    free(buf);
    if (!json_is_object(j)) {
        json_decref(j);
        return ovt_fail(OVT_EFORMAT, "--policy %s: not a JSON object (line %d: %s)", path, err.line, err.text);
    }
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val)
    {
        char flag[300], num[32];
        snprintf(flag, sizeof flag, "%s: \"%s\"", path, key);
        if (!strcmp(key, "accept_arbiters")) {
            size_t i;
            json_t *e;
            if (!json_is_array(val) || json_array_size(val) > PARTY_POLICY_MAX_ARBITERS) {
                rv = ovt_fail(OVT_EFORMAT, "%s must be an array of at most %d addresses", flag,
                              PARTY_POLICY_MAX_ARBITERS);
                break;
            }
            p->n_arbiters = 0;
            json_array_foreach(val, i, e)
            {
                const char *s = json_string_value(e);
                if (!s || chain_address_from_string(&p->arbiters[p->n_arbiters++], s)) {
                    rv = ovt_fail(OVT_EFORMAT, "%s: entry %zu is not an address", flag, i);
                    break;
                }
            }
            if (rv)
                break;
            continue;
        }
        if (!strcmp(key, "contract")) {
            const char *s = json_string_value(val);
            if (!s || chain_address_from_string(&p->contract, s)) {
                rv = ovt_fail(OVT_EFORMAT, "%s is not an address", flag);
                break;
            }
            p->have_contract = 1;
            continue;
        }
        int term = -1;
        for (size_t k = 0; k < sizeof file_keys / sizeof file_keys[0]; k++)
            if (!strcmp(key, file_keys[k].key))
                term = (int)file_keys[k].term;
        if (term < 0) {
            rv = ovt_fail(OVT_EFORMAT, "%s is not a policy term (docs/agent.md lists them)", flag);
            break;
        }
        const char *text = json_string_value(val);
        if (!text && json_is_integer(val) && json_integer_value(val) >= 0) {
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(val));
            text = num;
        }
        if (!text) {
            rv = ovt_fail(OVT_EFORMAT, "%s must be a string or a non-negative integer", flag);
            break;
        }
        if ((rv = party_policy_set(p, (party_policy_term)term, flag, text)))
            break;
    }
    json_decref(j);
    return rv;
}

/* Appends one refusal line to the message being built. */
static void refuse(char *msg, size_t cap, int *n, const char *fmt, ...) OVT_PRINTF(4, 5);
static void refuse(char *msg, size_t cap, int *n, const char *fmt, ...)
{
    size_t used = strlen(msg);
    if (used + 4 >= cap)
        return;
    snprintf(msg + used, cap - used, "\n  ");
    used = strlen(msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + used, cap - used, fmt, ap);
    va_end(ap);
    (*n)++;
}

static bool allowed(const party_policy *pol, const chain_address *who)
{
    for (unsigned i = 0; i < pol->n_arbiters; i++)
        if (chain_address_eq(&pol->arbiters[i], who))
            return true;
    return false;
}

/* At least m of the committee's n on the allow-list, none a party. */
static void check_committee(const party_policy *pol, const chain_arb_params *p, char *msg, size_t cap, int *n)
{
    unsigned count = chain_arb_arbiter_count(p), m = chain_arb_threshold(p), trusted = 0;
    char a[43], others[CHAIN_ARB_MAX_ARBITERS * 44 + 1] = "", list[PARTY_POLICY_MAX_ARBITERS * 44 + 1] = "";
    for (unsigned k = 0; k < count; k++) {
        chain_address_to_string(a, &p->arbiters[k]);
        if (allowed(pol, &p->arbiters[k])) {
            trusted++;
        } else {
            strcat(others, others[0] ? "," : "");
            strcat(others, a);
        }
        if (chain_address_eq(&p->arbiters[k], &p->trainer) || chain_address_eq(&p->arbiters[k], &p->auditor))
            refuse(msg, cap, n, "arbiter %s is also a party of the run", a);
    }
    if (trusted >= m)
        return;
    for (unsigned i = 0; i < pol->n_arbiters; i++) {
        chain_address_to_string(a, &pol->arbiters[i]);
        strcat(list, i ? "," : "");
        strcat(list, a);
    }
    if (count == 1)
        refuse(msg, cap, n, "arbiter %s is not an accepted arbiter (--accept-arbiter: %s)", others, list);
    else
        refuse(msg, cap, n,
               "only %u of the committee's %u arbiters are accepted, and %u matching verdicts settle the run "
               "(not accepted: %s; --accept-arbiter: %s)",
               trusted, count, m, others, list);
}

int party_policy_check(const party_policy *pol, const chain_arb_params *p, uint64_t chain_id,
                       const chain_address *contract, int is_trainer)
{
    char msg[4096] = "", a[43], b[43], x[80], y[80];
    int n = 0;
    const char *own = is_trainer ? "trainer" : "auditor", *other = is_trainer ? "auditor" : "trainer";
    const chain_u256 *own_bond = is_trainer ? &p->trainer_bond : &p->auditor_bond;
    const chain_u256 *other_bond = is_trainer ? &p->auditor_bond : &p->trainer_bond;
    check_committee(pol, p, msg, sizeof msg, &n);
    if (chain_address_eq(&p->trainer, &p->auditor))
        refuse(msg, sizeof msg, &n, "the trainer and the auditor are the same address");
    chain_u256_to_dec(x, own_bond);
    chain_u256_to_dec(y, &pol->max_bond);
    if (chain_u256_cmp(own_bond, &pol->max_bond) > 0)
        refuse(msg, sizeof msg, &n, "%s bond (this party's) %s wei exceeds --max-bond %s", own, x, y);
    chain_u256_to_dec(x, other_bond);
    if (pol->have_max_other_bond && chain_u256_cmp(other_bond, &pol->max_other_bond) > 0) {
        chain_u256_to_dec(y, &pol->max_other_bond);
        refuse(msg, sizeof msg, &n, "%s bond %s wei exceeds --max-other-bond %s", other, x, y);
    }
    if (chain_u256_cmp(other_bond, &pol->min_other_bond) < 0) {
        chain_u256_to_dec(y, &pol->min_other_bond);
        refuse(msg, sizeof msg, &n, "%s bond %s wei is below --min-other-bond %s", other, x, y);
    }
    if (p->commit_timeout < pol->min_commit_timeout)
        refuse(msg, sizeof msg, &n, "commit timeout %u s is below --min-commit-timeout %u", p->commit_timeout,
               pol->min_commit_timeout);
    if (p->move_timeout < pol->min_move_timeout)
        refuse(msg, sizeof msg, &n, "move timeout %u s is below --min-move-timeout %u", p->move_timeout,
               pol->min_move_timeout);
    if (p->arbiter_timeout < pol->min_verdict_timeout)
        refuse(msg, sizeof msg, &n, "verdict timeout %u s is below --min-verdict-timeout %u", p->arbiter_timeout,
               pol->min_verdict_timeout);
    if (pol->max_verdict_timeout && p->arbiter_timeout > pol->max_verdict_timeout)
        refuse(msg, sizeof msg, &n, "verdict timeout %u s exceeds --max-verdict-timeout %u", p->arbiter_timeout,
               pol->max_verdict_timeout);
    chain_u256_to_dec(x, &p->arbiter_bond);
    if (chain_u256_cmp(&p->arbiter_bond, &pol->min_arbiter_bond) < 0) {
        chain_u256_to_dec(y, &pol->min_arbiter_bond);
        refuse(msg, sizeof msg, &n, "arbiter bond %s wei is below --min-arbiter-bond %s", x, y);
    }
    if (pol->have_max_arbiter_bond && chain_u256_cmp(&p->arbiter_bond, &pol->max_arbiter_bond) > 0) {
        chain_u256_to_dec(y, &pol->max_arbiter_bond);
        refuse(msg, sizeof msg, &n, "arbiter bond %s wei exceeds --max-arbiter-bond %s", x, y);
    }
    if (pol->max_steps && p->steps > pol->max_steps)
        refuse(msg, sizeof msg, &n, "steps %llu exceeds --max-steps %llu", (unsigned long long)p->steps,
               (unsigned long long)pol->max_steps);
    if (pol->chain_id && chain_id != pol->chain_id)
        refuse(msg, sizeof msg, &n, "chain id %llu is not --expect-chain-id %llu", (unsigned long long)chain_id,
               (unsigned long long)pol->chain_id);
    if (pol->have_contract && !chain_address_eq(contract, &pol->contract)) {
        chain_address_to_string(a, contract);
        chain_address_to_string(b, &pol->contract);
        refuse(msg, sizeof msg, &n, "contract %s is not the policy's contract %s", a, b);
    }
    char h1[67], h2[67];
    if (pol->have_config && memcmp(p->config_hash.b, pol->config_hash.b, 32) != 0) {
        chain_hash_hex(h1, &p->config_hash);
        chain_hash_hex(h2, &pol->config_hash);
        refuse(msg, sizeof msg, &n, "configHash %s is not --expect-config %s", h1, h2);
    }
    if (pol->have_dataset && memcmp(p->dataset_hash.b, pol->dataset_hash.b, 32) != 0) {
        chain_hash_hex(h1, &p->dataset_hash);
        chain_hash_hex(h2, &pol->dataset_hash);
        refuse(msg, sizeof msg, &n, "datasetHash %s is not --expect-dataset %s", h1, h2);
    }
    if (!n)
        return 0;
    return ovt_fail(OVT_EINVAL,
                    "the run's terms are outside this party's policy; nothing was sent and no bond moved "
                    "(%d term%s):%s",
                    n, n == 1 ? "" : "s", msg);
}
