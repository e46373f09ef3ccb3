/* A party's policy on a committee (party/policy.h), with no chain: a run of
 * n arbiters is accepted only when at least its threshold m of them are on
 * the allow-list, and the arbiter bond and the verdict timeout are bounded
 * as the policy says. Every expected answer is worked out by hand from the
 * terms below. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/err.h"
#include "party/policy.h"

static chain_address member(int k)
{
    chain_address a;
    memset(a.b, 0, sizeof a.b);
    a.b[19] = (uint8_t)(0x10 + k);
    return a;
}

/* A run of n arbiters (members 0..n-1) and threshold m; trainer 0xa1,
 * auditor 0xa2, bonds and timeouts inside the default policy. */
static chain_arb_params run_of(unsigned n, unsigned m)
{
    chain_arb_params p;
    memset(&p, 0, sizeof p);
    p.trainer.b[19] = 0xa1;
    p.auditor.b[19] = 0xa2;
    for (unsigned k = 0; k < n; k++)
        p.arbiters[k] = member((int)k);
    p.threshold = m;
    p.steps = 100;
    p.commit_timeout = p.move_timeout = 600;
    p.arbiter_timeout = 3600;
    return p;
}

static int check(const party_policy *pol, const chain_arb_params *p, const char *want)
{
    chain_address contract = {{0}};
    ovt_err_clear();
    int rv = party_policy_check(pol, p, 31337, &contract, 0);
    if (!want)
        return rv == 0;
    return rv == OVT_EINVAL && strstr(ovt_errmsg(), want) != NULL;
}

static void test_committee_threshold(void)
{
    party_policy pol;
    party_policy_init(&pol);
    pol.arbiters[pol.n_arbiters++] = member(0);
    chain_arb_params p = run_of(3, 2);
    /* one of three trusted, two needed */
    CHECK_MSG(check(&pol, &p, "only 1 of the committee's 3 arbiters are accepted, and 2 matching"), "%s",
              ovt_errmsg());
    /* the untrusted ones are named */
    CHECK(check(&pol, &p, "0x0000000000000000000000000000000000000011,0x0000000000000000000000000000000000000012"));
    pol.arbiters[pol.n_arbiters++] = member(2);
    CHECK_MSG(check(&pol, &p, NULL), "%s", ovt_errmsg());
    /* the same two are too few when all three must agree */
    p = run_of(3, 3);
    CHECK(check(&pol, &p, "only 2 of the committee's 3"));
    /* a majority of five (0 = fill in: 3) with three trusted */
    p = run_of(5, 0);
    pol.arbiters[pol.n_arbiters++] = member(4);
    CHECK_MSG(check(&pol, &p, NULL), "%s", ovt_errmsg());
    pol.n_arbiters = 2;
    CHECK(check(&pol, &p, "only 2 of the committee's 5 arbiters are accepted, and 3 matching"));
    /* one arbiter, not trusted: today's message */
    party_policy_init(&pol);
    pol.arbiters[pol.n_arbiters++] = member(7);
    p = run_of(1, 0);
    CHECK(check(&pol, &p, "is not an accepted arbiter"));
    /* a member that is also a party */
    pol.arbiters[pol.n_arbiters++] = member(0);
    pol.arbiters[pol.n_arbiters++] = member(1);
    p = run_of(3, 2);
    p.arbiters[2] = p.auditor;
    CHECK(check(&pol, &p, "is also a party of the run"));
}

static void test_arbiter_bond_and_deadline(void)
{
    party_policy pol;
    party_policy_init(&pol);
    pol.arbiters[pol.n_arbiters++] = member(0);
    chain_arb_params p = run_of(1, 1);
    CHECK(party_policy_set(&pol, PARTY_TERM_MIN_ARBITER_BOND, "--min-arbiter-bond", "1000") == 0);
    CHECK(party_policy_set(&pol, PARTY_TERM_MAX_ARBITER_BOND, "--max-arbiter-bond", "5000") == 0);
    CHECK(party_policy_set(&pol, PARTY_TERM_MAX_VERDICT_TIMEOUT, "--max-verdict-timeout", "7200") == 0);
    p.arbiter_bond = chain_u256_from_u64(999);
    CHECK(check(&pol, &p, "arbiter bond 999 wei is below --min-arbiter-bond 1000"));
    p.arbiter_bond = chain_u256_from_u64(1000);
    CHECK_MSG(check(&pol, &p, NULL), "%s", ovt_errmsg());
    p.arbiter_bond = chain_u256_from_u64(5000);
    CHECK_MSG(check(&pol, &p, NULL), "%s", ovt_errmsg());
    p.arbiter_bond = chain_u256_from_u64(5001);
    CHECK(check(&pol, &p, "arbiter bond 5001 wei exceeds --max-arbiter-bond 5000"));
    p.arbiter_bond = chain_u256_from_u64(2000);
    p.arbiter_timeout = 7201;
    CHECK(check(&pol, &p, "verdict timeout 7201 s exceeds --max-verdict-timeout 7200"));
    p.arbiter_timeout = 7200;
    CHECK_MSG(check(&pol, &p, NULL), "%s", ovt_errmsg());
}

static void test_policy_file_keys(void)
{
    char path[] = "/tmp/ovt-policy-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    static const char text[] = "{\"accept_arbiters\": [\"0x0000000000000000000000000000000000000010\"], "
                               "\"min_arbiter_bond\": \"10\", \"max_arbiter_bond\": 20, \"max_verdict_timeout\": 900}";
    CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    party_policy pol;
    party_policy_init(&pol);
    CHECK_MSG(party_policy_load(&pol, path) == 0, "%s", ovt_errmsg());
    unlink(path);
    CHECK(pol.n_arbiters == 1 && pol.max_verdict_timeout == 900 && pol.have_max_arbiter_bond);
    CHECK(chain_u256_cmp(&pol.min_arbiter_bond, &(chain_u256){{[31] = 10}}) == 0);
    CHECK(chain_u256_cmp(&pol.max_arbiter_bond, &(chain_u256){{[31] = 20}}) == 0);
}

int main(void)
{
    CHECK_RUN(test_committee_threshold());
    CHECK_RUN(test_arbiter_bond_and_deadline());
    CHECK_RUN(test_policy_file_keys());
    return check_done();
}
