#ifndef OVT_TESTS_CONTRACT_FIXTURE_H
#define OVT_TESTS_CONTRACT_FIXTURE_H

/* A real anvil with the arbitration contract and the narrowing contract
 * bound to it deployed (chain_narrow_deploy_pair), nine funded accounts
 * (opener, trainer, auditor, arbiter, outsider: anvil's dev keys 0..4; four
 * more arbiters for committees: keys 5..8), and
 * the helpers the game suites share: runs with random histories, both
 * parties playing from their own Merkle trees, reverts read back by name. */
#include "chain/arbitration.h"
#include "chain/narrow.h"
#include "support/anvil.h"

enum {
    FX_OPENER,
    FX_TRAINER,
    FX_AUDITOR,
    FX_ARBITER, /* seat 0 of every run fx_params makes */
    FX_OUTSIDER,
    FX_ARBITER2, /* seats 1..4 of a committee */
    FX_ARBITER3,
    FX_ARBITER4,
    FX_ARBITER5,
    FX_NACCOUNTS
};

typedef struct {
    tsup_anvil node;
    chain_rpc *rpc;
    chain_privkey key[FX_NACCOUNTS];
    chain_address addr[FX_NACCOUNTS];
    chain_txm txm[FX_NACCOUNTS];
    chain_arb arb;
    chain_narrow narrow; /* OvtNarrow, bound to arb */
    uint64_t next_nonce; /* run nonces */
} fx_env;

/* Starts anvil, opens the RPC client, deploys the two contracts. 0 or -1. */
int fx_start(fx_env *env);
/* The same with extra anvil arguments (e.g. {"--state", FILE, NULL}). */
int fx_start_with(fx_env *env, const char *const *anvil_args);
void fx_stop(fx_env *env);

/* One party's history: preimages of leaves 0..steps and its tree. */
typedef struct {
    uint64_t steps;
    chain_merkle_preimage *pre; /* steps + 1 */
    ovt_hash *leaves;           /* steps + 1 (plus any extra padding leaves the test forges) */
    chain_merkle *tree;
} fx_history;

/* A run: its params, id, and the two parties' histories. A challenge's
 * game (issue 43) has its own id and the run's leaves: tree_id is the run's
 * id (zero: run_id). */
typedef struct {
    chain_arb_params params;
    ovt_hash run_id;
    ovt_hash tree_id;
    int challenger; /* a challenge's challenger account (it plays the auditor's side); 0: the run's auditor */
    fx_history trainer, auditor;
} fx_run;

/* Reseeds the generator the fixture draws histories and the order of moves
 * from (util.h's state is per file: tc_seed in a test does not reach it). */
void fx_seed(uint64_t seed);

/* Default params for steps: timeouts in seconds, bonds in wei. */
void fx_params(fx_env *env, chain_arb_params *p, uint64_t steps, uint32_t move_timeout, uint64_t trainer_bond,
               uint64_t auditor_bond);

/* Opens the run on chain (gas_used may be NULL). */
int fx_open(fx_env *env, fx_run *run, const chain_arb_params *p, uint64_t *gas_used);

/* A random honest history for the run; the auditor's copy differs from the
 * trainer's first at leaf `first_diff` (none if first_diff > steps), and at
 * a few random leaves after it. Builds both trees. */
int fx_histories(fx_run *run, uint64_t first_diff);
void fx_history_free(fx_history *h);
void fx_run_free(fx_run *run);

/* Builds h->tree over h->leaves (nleaves of them). */
int fx_build_tree(fx_history *h, size_t nleaves);

/* Account `who` (not FX_OPENER) challenges the trainer's root of run with
 * the root of `hist` (challenge(), the run's auditor bond): *c is the
 * challenge's game, with the run's trainer history and a copy of hist.
 * gas (may be NULL) gets challenge()'s. */
int fx_challenge(fx_env *env, fx_run *c, const fx_run *run, int who, const fx_history *hist, uint64_t *gas);

/* Both parties commit their roots; the gas of each commit (may be NULL). */
int fx_commit_both(fx_env *env, fx_run *run, uint64_t gas[2]);

/* Plays the bisection and the reveal from both trees until the game leaves
 * Bisecting/Revealing (the auditor's side: run->challenger if set). gas_log (may be NULL) is called with
 * every move's receipt. Returns 0 or the failing move's code. */
typedef void (*fx_gas_fn)(void *ctx, const chain_arb_move *move, int first_in_round, uint64_t gas);
int fx_play(fx_env *env, fx_run *run, fx_gas_fn gas_log, void *ctx);

/* One move of one party (FX_TRAINER or FX_AUDITOR) in the current state;
 * *moved says whether a move was due. */
int fx_move(fx_env *env, fx_run *run, int party, int *moved, uint64_t *gas);

/* A chain_arb_preimage_fn over an fx_history (ctx). */
int fx_preimage(void *ctx, uint64_t index, chain_merkle_preimage *out);

/* The move party would make in the game's current state (kind NONE when
 * none is due). */
int fx_plan(fx_env *env, fx_run *run, int party, chain_arb_move *mv);

/* eth_call of calldata from account `who` with value (may be NULL) to the
 * arbitration contract: returns the name of the custom error it reverts with
 * ("" if it does not revert). */
const char *fx_revert_name(fx_env *env, int who, const chain_u256 *value, const chain_buf *calldata);

/* The same to the contract at `to`, whose custom errors `namer` names
 * (chain_arb_revert_name, chain_narrow_revert_name). */
typedef void (*fx_revert_namer)(char *out, size_t cap, const uint8_t *data, size_t len);
const char *fx_revert_name_at(fx_env *env, int who, const chain_address *to, const chain_u256 *value,
                              const chain_buf *calldata, fx_revert_namer namer);

/* CHECKs that calldata from account `who` reverts with the custom error
 * `name` ("": does not revert); needs check.h. */
#define FX_CHECK_REVERT(env, who, value, buf, name)                                  \
    do {                                                                             \
        const char *got_ = fx_revert_name((env), (who), (value), (buf));             \
        CHECK_MSG(strcmp(got_, (name)) == 0, "expected %s, got '%s'", (name), got_); \
    } while (0)

/* The run's game (zeroed, with a message on stderr, if it cannot be read). */
chain_arb_game fx_game(fx_env *env, const fx_run *run);

/* A raw JSON-RPC call whose result is ignored (evm_increaseTime, ...). */
int fx_raw(fx_env *env, const char *method, json_t *params);

/* Advances the chain's clock by seconds and mines a block. */
int fx_warp(fx_env *env, uint64_t seconds);

/* The contract's balance in wei (UINT64_MAX, with a message, if unreadable). */
uint64_t fx_balance(fx_env *env);

/* The latest block's timestamp (0, with the error printed, on failure). */
uint64_t fx_now(fx_env *env);

/* Credit of an account (low 64 bits; fails the check if it is larger). */
uint64_t fx_credit(fx_env *env, int who);

#endif
