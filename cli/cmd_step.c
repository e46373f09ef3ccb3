/* `ovt step` and `ovt verify` (trainer/check.h). */
#include "cli/commands.h"

#include <getopt.h>
#include <jansson.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chain/arbitration.h"
#include "chain/keys.h"
#include "chain/merkle.h"
#include "chain/session.h"
#include "common/fileio.h"
#include "cli/commands.h"
#include "kernels/site.h"
#include "cli/args.h"
#include "trainer/run.h"
#include "dp/ranks.h"
#include "party/model_check.h"
#include "trainer/rundata.h"
#include "trainer/step.h"

/* A JSON file of the run directory, or NULL (no error) when it is absent. */
static json_t *load_json(const char *dir, const char *name)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    if (ovt_path_join(path, sizeof path, dir, name) || ovt_read_file(path, &buf, &len, 1 << 24))
        return NULL;
    json_t *j = json_loadb((const char *)buf, len, 0, NULL);
    free(buf);
    return j;
}

static int json_hash(ovt_hash *out, json_t *o, const char *key, const char *what)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s)
        return ovt_fail(OVT_EFORMAT, "%s has no \"%s\"", what, key);
    return chain_parse_hash(out, key, s) ? ovt_fail_wrap(OVT_EFORMAT, "%s", what) : 0;
}

/* The run's runId: run.json's when not zero, else receipt.json's. */
static bool run_id_of(const char *dir, ovt_hash *id)
{
    static const ovt_hash zero;
    const char *files[] = {"run.json", "receipt.json"};
    for (int f = 0; f < 2; f++) {
        json_t *j = load_json(dir, files[f]);
        bool ok = j && json_hash(id, j, "run_id", files[f]) == 0 && memcmp(id->b, zero.b, 32) != 0;
        json_decref(j);
        if (ok)
            return true;
    }
    return false;
}

/* The dataset: --data, else the path receipt.json names. Loaded against the
 * run's config (its datasetHash must match). */
static int load_data(trn_run_data *d, const char *dir, const char *data, trn_run_config *rc)
{
    char path[4096] = "";
    if (data) {
        snprintf(path, sizeof path, "%s", data);
    } else {
        json_t *j = load_json(dir, "receipt.json");
        const char *s = json_string_value(json_object_get(j, "data"));
        if (s)
            snprintf(path, sizeof path, "%s", s);
        json_decref(j);
        if (!path[0])
            return ovt_fail(OVT_EINVAL, "no dataset: pass --data FILE (the run's receipt.json names none)");
    }
    ovt_hash ch;
    int rv = trn_run_load_config(dir, rc, &ch);
    if (!rv && (rv = trn_run_data_load(d, path, rc, 0)))
        rv = ovt_fail_wrap(rv, "dataset %s", path);
    return rv;
}

static void hex(char out[67], const ovt_hash *h)
{
    chain_hash_hex(out, h);
}

/* ---- ovt step ---------------------------------------------------------- */

static void step_usage(FILE *f)
{
    fprintf(f, "usage: ovt step --run DIR --step K [--data FILE] [--backend cpu] [--threads N] [--json]\n"
               "\n"
               "Re-executes step K of the run in DIR from the state after step K-1 (replaying from\n"
               "the nearest checkpoint before it when that state is not stored), in REPLAY mode with\n"
               "the trainer's rounding logs, so a log entry far from its midpoint is reported as a\n"
               "fraudulent log. Prints the stateHash, batchHash and logHash (and leaf K when the run\n"
               "has a runId in run.json or receipt.json) and whether they match DIR/steps.bin.\n"
               "Exit status: 0 match, 1 mismatch, fraud or error, 2 usage.\n"
               "\n"
               "options:\n"
               "  --run DIR     the run directory (`ovt train --out DIR`)\n"
               "  --step K      the step, 1..N\n"
               "  --data FILE   the dataset (default: the path in DIR/receipt.json)\n"
               "  --backend cpu the arbiter's backend (the only one; REPLAY mode)\n"
               "  --threads N   cpu threads (default: the backend's)\n"
               "  --json        the result as JSON\n"
               "  -h, --help    this help\n");
}

enum { O_RUN = 256, O_STEP, O_DATA, O_BACKEND, O_THREADS, O_JSON, O_REPLAY, O_MODEL };

int cmd_step(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"run", required_argument, NULL, O_RUN},         {"step", required_argument, NULL, O_STEP},
        {"data", required_argument, NULL, O_DATA},       {"backend", required_argument, NULL, O_BACKEND},
        {"threads", required_argument, NULL, O_THREADS}, {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    const char *dir = NULL, *data = NULL;
    uint64_t k = 0, v;
    int threads = 0, c;
    bool json = false, have_k = false;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        switch (c) {
        case 'h': step_usage(stdout); return 0;
        case O_RUN: dir = optarg; break;
        case O_STEP:
            if (cli_arg_u64("step", flag, optarg, 1, CHAIN_MERKLE_MAX_STEPS, &k)) return 2;
            have_k = true;
            break;
        case O_DATA: data = optarg; break;
        case O_BACKEND:
            if (strcmp(optarg, "cpu")) {
                fprintf(stderr, "ovt step: --backend must be cpu (the arbiter's), got '%s'\n", optarg);
                return 2;
            }
            break;
        case O_THREADS:
            if (cli_arg_u64("step", flag, optarg, 0, 256, &v)) return 2;
            threads = (int)v;
            break;
        case O_JSON: json = true; break;
        default: return cli_arg_unknown("step", argv[optind - 1]);
        }
    }
    if (cli_arg_none_left("step", argc, argv))
        return 2;
    if (!dir || !have_k) {
        fprintf(stderr, "ovt step: --run and --step are required; see `ovt step --help`\n");
        return 2;
    }
    trn_run_config rc;
    trn_run_data d;
    memset(&d, 0, sizeof d);
    trn_step_table table = {0};
    char path[4096];
    int rv = load_data(&d, dir, data, &rc);
    if (!rv && !(rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")))
        rv = trn_step_table_read(&table, path);
    if (!rv && k >= table.count)
        rv = ovt_fail(OVT_EINVAL, "the run in %s has steps 1..%zu, not step %llu", dir,
                      table.count ? table.count - 1 : 0, (unsigned long long)k);
    if (rv) {
        fprintf(stderr, "ovt step: %s\n", ovt_errmsg());
        trn_step_table_free(&table);
        trn_run_data_free(&d);
        return 1;
    }
    trn_replay_result r;
    rv = trn_step_replay_run(dir, &d, k, threads, &r);
    trn_run_data_free(&d);
    char why[1024];
    snprintf(why, sizeof why, "%s", rv ? ovt_errmsg() : "");
    if (rv && rv != OVT_EFRAUD) {
        fprintf(stderr, "ovt step: %s\n", ovt_errmsg());
        trn_step_table_free(&table);
        return 1;
    }
    const chain_merkle_preimage *want = &table.steps[k];
    ovt_hash run_id, leaf, want_leaf;
    bool have_id = run_id_of(dir, &run_id);
    chain_merkle_preimage got = {.state_hash = r.state_hash, .batch_hash = r.batch_hash, .log_hash = r.log_hash};
    if (have_id) {
        chain_merkle_leaf_hash(&leaf, &run_id, k, &got);
        chain_merkle_leaf_hash(&want_leaf, &run_id, k, want);
    }
    bool match_state = !memcmp(got.state_hash.b, want->state_hash.b, 32);
    bool match_batch = !memcmp(got.batch_hash.b, want->batch_hash.b, 32);
    bool match_log = !memcmp(got.log_hash.b, want->log_hash.b, 32);
    dp_shard_owner owner = {0};
    bool have_owner = r.shard_differs >= 0 &&
                      dp_ranks_owner_in(&owner, dir, k, (uint32_t)r.shard_differs) == 0;
    const char *result = rv == OVT_EFRAUD                          ? "fraud"
                         : match_state && match_batch && match_log ? "match"
                                                                    : "mismatch";
    char sh[67], bh[67], lh[67], wsh[67], lf[67], wlf[67];
    hex(sh, &got.state_hash);
    hex(bh, &got.batch_hash);
    hex(lh, &got.log_hash);
    hex(wsh, &want->state_hash);
    hex(lf, &leaf);
    hex(wlf, &want_leaf);
    if (json) {
        json_t *o = json_pack("{s:I, s:I, s:s, s:b, s:b, s:b}", "step", (json_int_t)k, "from_checkpoint",
                              (json_int_t)r.from_checkpoint, "result", result, "state_matches", match_state,
                              "batch_matches", match_batch, "log_matches", match_log);
        if (rv == OVT_EFRAUD) {
            json_object_set_new(o, "error", json_string(why));
        } else {
            json_object_set_new(o, "state_hash", json_string(sh));
            json_object_set_new(o, "table_state_hash", json_string(wsh));
            json_object_set_new(o, "batch_hash", json_string(bh));
            json_object_set_new(o, "log_hash", json_string(lh));
            json_object_set_new(o, "leaf", have_id ? json_string(lf) : json_null());
            json_object_set_new(o, "table_leaf", have_id ? json_string(wlf) : json_null());
        }
        json_object_set_new(o, "shards", json_integer(r.shards));
        if (r.shard_differs >= 0) {
            json_t *sd = json_pack("{s:I}", "shard", (json_int_t)r.shard_differs);
            json_object_set_new(sd, "rank", have_owner ? json_integer(owner.rank) : json_null());
            json_object_set_new(sd, "host", have_owner ? json_string(owner.host) : json_null());
            json_object_set_new(o, "shard_differs", sd);
        } else {
            json_object_set_new(o, "shard_differs", json_null());
        }
        char *text = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
        printf("%s\n", text ? text : "{}");
        free(text);
    } else if (rv == OVT_EFRAUD) {
        printf("step %llu: FRAUD: %s\n", (unsigned long long)k, why);
    } else {
        printf("step %llu re-executed from checkpoint %llu\n", (unsigned long long)k,
               (unsigned long long)r.from_checkpoint);
        printf("  stateHash %s  %s\n", sh, match_state ? "matches" : "DIFFERS");
        if (!match_state)
            printf("  table has %s\n", wsh);
        printf("  batchHash %s  %s\n", bh, match_batch ? "matches" : "DIFFERS");
        printf("  logHash   %s  %s\n", lh, match_log ? "matches" : "DIFFERS");
        if (have_id)
            printf("  leaf      %s  %s\n", lf, !memcmp(leaf.b, want_leaf.b, 32) ? "matches" : "DIFFERS");
        else
            printf("  leaf      (no runId yet: the run was not opened on chain)\n");
        if (r.shard_differs >= 0 && have_owner)
            printf("  shard %lld of %u: its gradient DIFFERS from the log's shard table (computed by rank %u on "
                   "host %s, per ranks.json)\n",
                   (long long)r.shard_differs, r.shards, owner.rank, owner.host);
        else if (r.shard_differs >= 0)
            printf("  shard %lld of %u: its gradient DIFFERS from the log's shard table (no ranks.json names its "
                   "process)\n",
                   (long long)r.shard_differs, r.shards);
        else if (r.shards > 1)
            printf("  shards    all %u gradients match the log's shard table\n", r.shards);
        printf("step %llu: %s\n", (unsigned long long)k, !strcmp(result, "match") ? "matches the step table" : "does NOT match the step table");
    }
    trn_step_table_free(&table);
    return strcmp(result, "match") ? 1 : 0;
}

/* ---- ovt verify -------------------------------------------------------- */

static void verify_usage(FILE *f)
{
    fprintf(f, "usage: ovt verify RUNDIR/receipt.json [--data FILE] [--replay K] [--threads N] [--json]\n"
               "       ovt verify --model FILE RECEIPT [--json]\n"
               "\n"
               "Checks a commitment receipt offline, against the run directory it lies in:\n"
               "  signature  the EIP-712 Commitment signature recovers to the receipt's trainer\n"
               "  run_id     the runId derives from the receipt's chain, contract, parties,\n"
               "             deadlines, bonds and nonce (as the contract derives it)\n"
               "  steps      steps.bin has the receipt's step count and configHash, and its leaves\n"
               "             (with the receipt's runId) hash to the receipt's root\n"
               "  config     SHA-256 of config.bin is the receipt's configHash\n"
               "  dataset    the dataset file hashes to the receipt's datasetHash, as does the config's\n"
               "  replay     (--replay K) K steps spread evenly over the run, re-executed with their\n"
               "             logs on cpu, each stateHash, batchHash and logHash equal to steps.bin's\n"
               "With --model FILE (a safetensors file of `ovt export`) the checks are the signature,\n"
               "the runId and the model, from FILE and the receipt alone (RECEIPT: the file or its\n"
               "RUNDIR): the tensors are exactly the parameters of the state committed as leaf K of\n"
               "the receipt's root (party/model_check.h).\n"
               "Every failed check names what differs. Exit status: 0 all checks pass, 1 a check\n"
               "fails or the receipt cannot be read, 2 usage.\n"
               "\n"
               "options:\n"
               "  --data FILE   the dataset (default: the path in the receipt)\n"
               "  --replay K    re-execute K steps (default 0)\n"
               "  --model FILE  check a model file against the receipt instead of the run directory\n"
               "  --threads N   cpu threads for --replay (default: the backend's)\n"
               "  --json        the checks as JSON\n"
               "  -h, --help    this help\n");
}

typedef struct {
    json_t *list;
    bool all_ok;
    bool json;
} checks;

static void check_add(checks *c, const char *name, bool ok, const char *fmt, ...) OVT_PRINTF(4, 5);
static void check_add(checks *c, const char *name, bool ok, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    c->all_ok = c->all_ok && ok;
    json_array_append_new(c->list, json_pack("{s:s, s:b, s:s}", "check", name, "ok", ok, "detail", detail));
    if (!c->json)
        printf("%-4s %-9s %s\n", ok ? "ok" : "FAIL", name, detail);
}

typedef struct {
    uint64_t chain_id;
    chain_address contract;
    chain_arb_params p; /* trainer, configHash, datasetHash, steps always; the rest when has_params */
    bool has_params;    /* version 2: every RunParams field, the nonce included */
    ovt_hash run_id, root;
    uint8_t sig[65];
    char data[4096];
} receipt;

/* The RunParams fields beyond those the signature covers (receipt version 2):
 * with them the runId can be derived as the contract derives it. */
static int receipt_read_params(receipt *r, json_t *j, const char *path)
{
    const char *addr[] = {"auditor", "arbiter"}, *wei[] = {"trainer_bond", "auditor_bond"},
               *secs[] = {"commit_timeout", "move_timeout", "verdict_timeout"};
    chain_address *addr_out[] = {&r->p.auditor, &r->p.arbiter};
    chain_u256 *wei_out[] = {&r->p.trainer_bond, &r->p.auditor_bond};
    uint32_t *secs_out[] = {&r->p.commit_timeout, &r->p.move_timeout, &r->p.arbiter_timeout};
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_object_get(j, addr[i]));
        if (!s || chain_address_from_string(addr_out[i], s))
            return ovt_fail(OVT_EFORMAT, "%s: \"%s\" must be an address", path, addr[i]);
        s = json_string_value(json_object_get(j, wei[i]));
        if (!s || chain_u256_from_dec(wei_out[i], s))
            return ovt_fail(OVT_EFORMAT, "%s: \"%s\" must be a decimal string of wei", path, wei[i]);
    }
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(j, secs[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
            return ovt_fail(OVT_EFORMAT, "%s: \"%s\" must be a number of seconds", path, secs[i]);
        *secs_out[i] = (uint32_t)json_integer_value(v);
    }
    const char *nonce = json_string_value(json_object_get(j, "nonce"));
    char *end = NULL;
    errno = 0;
    unsigned long long n = nonce && *nonce >= '0' && *nonce <= '9' ? strtoull(nonce, &end, 10) : 0;
    if (!end || *end || errno)
        return ovt_fail(OVT_EFORMAT, "%s: \"nonce\" must be a decimal string", path);
    r->p.nonce = n;
    return 0;
}

static int receipt_read(receipt *r, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, 1 << 20);
    if (rv)
        return rv;
    json_error_t err;
    json_t *j = json_loadb((const char *)buf, len, 0, &err);
    free(buf);
    if (!json_is_object(j)) {
        json_decref(j);
        return ovt_fail(OVT_EFORMAT, "%s is not a JSON object (line %d: %s)", path, err.line, err.text);
    }
    memset(r, 0, sizeof *r);
    json_t *cid = json_object_get(j, "chain_id"), *steps = json_object_get(j, "steps");
    const char *contract = json_string_value(json_object_get(j, "contract"));
    const char *trainer = json_string_value(json_object_get(j, "trainer"));
    const char *sig = json_string_value(json_object_get(j, "signature"));
    const char *data = json_string_value(json_object_get(j, "data"));
    if (!json_is_integer(cid) || json_integer_value(cid) < 1 || !json_is_integer(steps) ||
        json_integer_value(steps) < 1) {
        rv = ovt_fail(OVT_EFORMAT, "%s: \"chain_id\" and \"steps\" must be positive integers", path);
    } else if (!contract || !trainer || !sig) {
        rv = ovt_fail(OVT_EFORMAT, "%s lacks \"contract\", \"trainer\" or \"signature\"", path);
    } else if ((rv = chain_address_from_string(&r->contract, contract)) ||
               (rv = chain_address_from_string(&r->p.trainer, trainer))) {
        rv = ovt_fail_wrap(OVT_EFORMAT, "%s", path);
    } else if (ovt_hex_decode(r->sig, 65, sig + (strncmp(sig, "0x", 2) ? 0 : 2))) {
        rv = ovt_fail(OVT_EFORMAT, "%s: \"signature\" must be 65 bytes of hex", path);
    } else if (!(rv = json_hash(&r->run_id, j, "run_id", path)) && !(rv = json_hash(&r->root, j, "root", path)) &&
               !(rv = json_hash(&r->p.config_hash, j, "config_hash", path)) &&
               !(rv = json_hash(&r->p.dataset_hash, j, "dataset_hash", path))) {
        json_t *version = json_object_get(j, "version");
        r->has_params = json_is_integer(version) && json_integer_value(version) >= 2;
        if (r->has_params)
            rv = receipt_read_params(r, j, path);
    }
    r->chain_id = (uint64_t)json_integer_value(cid);
    r->p.steps = (uint64_t)json_integer_value(steps);
    if (data)
        snprintf(r->data, sizeof r->data, "%s", data);
    json_decref(j);
    return rv;
}

static void check_signature(checks *c, const receipt *r)
{
    ovt_hash digest;
    chain_arb_commitment_digest(&digest, r->chain_id, &r->contract, &r->run_id, &r->root, &r->p);
    chain_sig sig;
    chain_address who;
    char want[43], got[43];
    chain_address_to_string(want, &r->p.trainer);
    if (chain_sig_from_rsv(&sig, r->sig) || chain_recover_address(&who, &sig, &digest)) {
        check_add(c, "signature", false, "the signature is not a valid secp256k1 signature: %s", ovt_errmsg());
        return;
    }
    chain_address_to_string(got, &who);
    if (chain_address_eq(&who, &r->p.trainer))
        check_add(c, "signature", true, "recovers to the trainer %s", want);
    else
        check_add(c, "signature", false, "recovers to %s, not to the trainer %s", got, want);
}

/* The signature covers runId but not the parties, deadlines and bonds; the
 * runId does (the contract derives it from all of RunParams), so a receipt
 * whose runId is re-derived from its own fields names the run's real terms. */
static void check_run_id(checks *c, const receipt *r)
{
    if (!r->has_params) {
        check_add(c, "run_id", false, "receipt version 1 has no nonce: the runId cannot be derived");
        return;
    }
    ovt_hash id;
    char want[67], got[67];
    chain_arb_run_id(&id, r->chain_id, &r->contract, &r->p);
    chain_hash_hex(want, &r->run_id);
    chain_hash_hex(got, &id);
    if (memcmp(id.b, r->run_id.b, 32) == 0)
        check_add(c, "run_id", true, "%s derives from the receipt's chain, contract, parties, terms and nonce", want);
    else
        check_add(c, "run_id", false, "the receipt's chain, contract, parties, terms and nonce derive %s, not %s", got,
                  want);
}

static void check_steps(checks *c, const receipt *r, const trn_step_table *t)
{
    char a[67], b[67];
    hex(a, &t->config_hash);
    hex(b, &r->p.config_hash);
    if (t->count != r->p.steps + 1) {
        check_add(c, "steps", false, "steps.bin holds %zu steps, the receipt %llu", t->count - 1,
                  (unsigned long long)r->p.steps);
        return;
    }
    if (memcmp(t->config_hash.b, r->p.config_hash.b, 32)) {
        check_add(c, "steps", false, "steps.bin is for configHash %s, the receipt for %s", a, b);
        return;
    }
    ovt_hash root;
    if (trn_step_table_root(&root, t, &r->run_id)) {
        check_add(c, "steps", false, "%s", ovt_errmsg());
        return;
    }
    hex(a, &root);
    hex(b, &r->root);
    if (memcmp(root.b, r->root.b, 32))
        check_add(c, "steps", false, "the %zu leaves hash to root %s, the receipt says %s", t->count, a, b);
    else
        check_add(c, "steps", true, "%zu leaves hash to the receipt's root %s", t->count, b);
}

static void check_file_hash(checks *c, const char *name, const char *path, const ovt_hash *want)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, SIZE_MAX / 2)) {
        check_add(c, name, false, "%s", ovt_errmsg());
        return;
    }
    ovt_hash h;
    ovt_sha256(&h, buf, len);
    free(buf);
    char a[67], b[67];
    hex(a, &h);
    hex(b, want);
    if (memcmp(h.b, want->b, 32))
        check_add(c, name, false, "%s hashes to %s, the receipt says %s", path, a, b);
    else
        check_add(c, name, true, "%s hashes to %s", path, a);
}

/* Step j of k (0-based) of a replay spread over steps 1..n: evenly from 1
 * to n, both ends included. */
static uint64_t spread_step(uint64_t j, uint64_t k, uint64_t n)
{
    if (k <= 1)
        return n;
    return 1 + (j * (n - 1)) / (k - 1);
}

static void check_replay(checks *c, const char *dir, const char *data, const trn_step_table *t, uint64_t k,
                         int threads)
{
    trn_run_config rc;
    trn_run_data d;
    memset(&d, 0, sizeof d);
    if (load_data(&d, dir, data, &rc)) {
        check_add(c, "replay", false, "%s", ovt_errmsg());
        return;
    }
    uint64_t n = t->count - 1, last = 0;
    if (k > n)
        k = n;
    for (uint64_t j = 0; j < k; j++) {
        uint64_t s = spread_step(j, k, n);
        if (s == last)
            continue;
        last = s;
        trn_replay_result r;
        char name[32];
        snprintf(name, sizeof name, "step %llu", (unsigned long long)s);
        if (trn_step_replay_run(dir, &d, s, threads, &r)) {
            check_add(c, name, false, "%s", ovt_errmsg());
            continue;
        }
        const chain_merkle_preimage *w = &t->steps[s];
        const char *what = memcmp(r.state_hash.b, w->state_hash.b, 32)   ? "stateHash"
                           : memcmp(r.batch_hash.b, w->batch_hash.b, 32) ? "batchHash"
                           : memcmp(r.log_hash.b, w->log_hash.b, 32)     ? "logHash"
                                                                          : NULL;
        char a[67];
        hex(a, &r.state_hash);
        if (what)
            check_add(c, name, false, "re-executed from checkpoint %llu: its %s differs from steps.bin's",
                      (unsigned long long)r.from_checkpoint, what);
        else
            check_add(c, name, true, "re-executed from checkpoint %llu: stateHash %s as in steps.bin",
                      (unsigned long long)r.from_checkpoint, a);
    }
    trn_run_data_free(&d);
}

static void checks_print_json(checks *c, const char *rpath)
{
    json_t *o = json_pack("{s:s, s:b, s:o}", "receipt", rpath, "ok", c->all_ok, "checks", c->list);
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    printf("%s\n", text ? text : "{}");
    free(text);
}

/* --model FILE: the model file against the receipt (party/model_check.h),
 * after the signature and runId checks. */
static int verify_model(checks *c, const receipt *r, const char *rpath, const char *model)
{
    party_model_anchor a = {.chain_id = r->chain_id, .contract = r->contract, .trainer = r->p.trainer,
                            .run_id = r->run_id, .root = r->root, .config_hash = r->p.config_hash,
                            .dataset_hash = r->p.dataset_hash, .steps = r->p.steps};
    party_model_report m;
    bool ok = party_model_check(model, &a, &m) == 0;
    check_add(c, "model", ok, "%s: %s", model, ok ? m.summary : ovt_errmsg());
    if (c->json) {
        checks_print_json(c, rpath); /* takes the list */
    } else {
        json_decref(c->list);
        printf("%s: %s\n", model, c->all_ok ? "verified: its tensors are the parameters the receipt's root commits to "
                                             "(not checked: anything on chain, whether the training steps are right)"
                                           : "NOT verified");
    }
    return c->all_ok ? 0 : 1;
}

int cmd_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},       {"replay", required_argument, NULL, O_REPLAY},
        {"threads", required_argument, NULL, O_THREADS}, {"json", no_argument, NULL, O_JSON},
        {"model", required_argument, NULL, O_MODEL},     {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *data = NULL, *model = NULL;
    uint64_t replay = 0, v;
    int threads = 0, c;
    checks ck = {.all_ok = true};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        switch (c) {
        case 'h': verify_usage(stdout); return 0;
        case O_DATA: data = optarg; break;
        case O_REPLAY:
            if (cli_arg_u64("verify", flag, optarg, 0, 1000000, &replay)) return 2;
            break;
        case O_THREADS:
            if (cli_arg_u64("verify", flag, optarg, 0, 256, &v)) return 2;
            threads = (int)v;
            break;
        case O_JSON: ck.json = true; break;
        case O_MODEL: model = optarg; break;
        default: return cli_arg_unknown("verify", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ovt verify: expects one receipt file (RUNDIR/receipt.json); see `ovt verify --help`\n");
        return 2;
    }
    if (model && (data || replay))
        return cli_usage_error("verify", "--model checks a file against the receipt alone; --data and --replay "
                                         "go with the run directory's checks");
    const char *rpath = argv[optind];
    char rbuf[4096];
    struct stat sb;
    if (model && stat(rpath, &sb) == 0 && S_ISDIR(sb.st_mode) && !ovt_path_join(rbuf, sizeof rbuf, rpath, "receipt.json"))
        rpath = rbuf; /* --model takes the receipt or its run directory */
    receipt r;
    if (receipt_read(&r, rpath)) {
        fprintf(stderr, "ovt verify: %s\n", ovt_errmsg());
        return 1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", rpath);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    if (!data && r.data[0])
        data = r.data;
    ck.list = json_array();
    check_signature(&ck, &r);
    check_run_id(&ck, &r);
    if (model)
        return verify_model(&ck, &r, rpath, model);
    char path[4096];
    trn_step_table t = {0};
    bool have_table = false;
    if (trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin") || trn_step_table_read(&t, path))
        check_add(&ck, "steps", false, "%s", ovt_errmsg());
    else
        have_table = true;
    if (have_table)
        check_steps(&ck, &r, &t);
    if (!trn_run_path(path, sizeof path, dir, NULL, 0, "config.bin"))
        check_file_hash(&ck, "config", path, &r.p.config_hash);
    trn_run_config rc;
    ovt_hash ch;
    if (trn_run_load_config(dir, &rc, &ch))
        check_add(&ck, "dataset", false, "%s", ovt_errmsg());
    else if (memcmp(rc.dataset_hash.b, r.p.dataset_hash.b, 32))
        check_add(&ck, "dataset", false, "config.bin names another datasetHash than the receipt");
    else if (!data)
        check_add(&ck, "dataset", false, "no dataset to check: pass --data FILE (the receipt names none)");
    else
        check_file_hash(&ck, "dataset", data, &r.p.dataset_hash);
    if (replay && have_table && ck.all_ok)
        check_replay(&ck, dir, data, &t, replay, threads);
    else if (replay)
        check_add(&ck, "replay", false, "not attempted: an earlier check failed");
    trn_step_table_free(&t);
    if (ck.json) {
        checks_print_json(&ck, rpath);
    } else {
        json_decref(ck.list);
        if (!ck.all_ok)
            printf("%s: NOT verified\n", rpath);
        else if (replay)
            printf("%s: verified: the receipt is consistent and %llu of its %llu steps, re-executed, match; not "
                   "checked: the other steps, and anything on chain (what root was committed, the game)\n",
                   rpath, (unsigned long long)(replay < r.p.steps ? replay : r.p.steps), (unsigned long long)r.p.steps);
        else
            printf("%s: receipt consistent (checked: the signature, runId, root, config and dataset above); NOT "
                   "checked: whether any training step is right (none was re-executed: a lying trainer's receipt "
                   "passes this; add --replay K or run `ovt audit`), and anything on chain\n",
                   rpath);
    }
    return ck.all_ok ? 0 : 1;
}

/* ---- ovt rlog RUNDIR --step K [--sites] -------------------------------- */

/* True if argv uses an option of the run-directory form. */
static bool rlog_run_form(int argc, char **argv)
{
    static const char *const names[] = {"--step", "--sites", "--data", "--threads"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            size_t len = strlen(names[k]);
            if (!strncmp(argv[i], names[k], len) && (argv[i][len] == 0 || argv[i][len] == '='))
                return true;
        }
    }
    return false;
}

static void rlog_sites_json(const krn_site_stats *rows, size_t n, uint64_t k, const char *error)
{
    json_t *sites = json_array();
    uint64_t tot[4] = {0};
    for (size_t i = 0; i < n; i++) {
        const krn_site_stats *r = &rows[i];
        json_array_append_new(sites, json_pack("{s:I, s:s, s:I, s:b, s:I, s:I, s:I}", "site", (json_int_t)r->site,
                                               "op", r->op, "n", (json_int_t)r->n, "banded", r->banded,
                                               "entries", (json_int_t)r->entries, "within_half_tau",
                                               (json_int_t)r->within_half, "within_tau",
                                               (json_int_t)r->within_tau));
        tot[0] += r->n;
        tot[1] += r->entries;
        tot[2] += r->within_half;
        tot[3] += r->within_tau;
    }
    json_t *o = json_pack("{s:I, s:o, s:{s:I, s:I, s:I, s:I}}", "step", (json_int_t)k, "sites", sites, "totals", "n",
                          (json_int_t)tot[0], "entries", (json_int_t)tot[1], "within_half_tau", (json_int_t)tot[2],
                          "within_tau", (json_int_t)tot[3]);
    json_object_set_new(o, "result", json_string(error ? "fraud" : "ok"));
    if (error)
        json_object_set_new(o, "error", json_string(error));
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    printf("%s\n", text ? text : "{}");
    free(text);
}

static void rlog_sites_text(const krn_site_stats *rows, size_t n, uint64_t k, const char *dir)
{
    uint64_t tot[4] = {0};
    printf("step %llu of %s, re-executed (cpu, REPLAY with the run's logs): %zu sites\n", (unsigned long long)k,
           dir, n);
    printf("%6s  %-28s %10s %9s %9s %9s\n", "site", "op", "n", "entries", "<=tau/2", "<=tau");
    for (size_t i = 0; i < n; i++) {
        const krn_site_stats *r = &rows[i];
        if (r->banded)
            printf("%6u  %-28s %10llu %9llu %9llu %9llu\n", r->site, r->op, (unsigned long long)r->n,
                   (unsigned long long)r->entries, (unsigned long long)r->within_half,
                   (unsigned long long)r->within_tau);
        else
            printf("%6u  %-28s %10llu %9s %9s %9s\n", r->site, r->op, (unsigned long long)r->n, "-", "-", "-");
        tot[0] += r->n;
        tot[1] += r->entries;
        tot[2] += r->within_half;
        tot[3] += r->within_tau;
    }
    printf("%6s  %-28s %10llu %9llu %9llu %9llu\n", "total", "", (unsigned long long)tot[0],
           (unsigned long long)tot[1], (unsigned long long)tot[2], (unsigned long long)tot[3]);
}

enum { R_STEP = 256, R_SITES, R_DATA, R_THREADS, R_JSON, R_ENTRIES };

int cmd_rlog(int argc, char **argv)
{
    if (!rlog_run_form(argc, argv))
        return cmd_rlog_file(argc, argv);
    static const struct option longopts[] = {
        {"step", required_argument, NULL, R_STEP},       {"sites", no_argument, NULL, R_SITES},
        {"data", required_argument, NULL, R_DATA},       {"threads", required_argument, NULL, R_THREADS},
        {"json", no_argument, NULL, R_JSON},             {"entries", no_argument, NULL, R_ENTRIES},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    const char *data = NULL;
    uint64_t k = 0, v;
    int threads = 0, c;
    bool json = false, entries = false, sites = false, have_k = false;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        switch (c) {
        case 'h': cmd_rlog_usage(stdout); return 0;
        case R_STEP:
            if (cli_arg_u64("rlog", flag, optarg, 1, CHAIN_MERKLE_MAX_STEPS, &k)) return 2;
            have_k = true;
            break;
        case R_SITES: sites = true; break;
        case R_DATA: data = optarg; break;
        case R_THREADS:
            if (cli_arg_u64("rlog", flag, optarg, 0, 256, &v)) return 2;
            threads = (int)v;
            break;
        case R_JSON: json = true; break;
        case R_ENTRIES: entries = true; break;
        default: return cli_arg_unknown("rlog", argv[optind - 1]);
        }
    }
    const char *why = !have_k                        ? "--sites, --data and --threads need RUNDIR --step K"
                      : optind != argc - 1           ? "expected one RUNDIR"
                      : sites && entries             ? "--entries lists a log file's entries; --sites counts per site"
                      : !sites && (data || threads)  ? "--data and --threads go with --sites"
                                                     : NULL;
    if (why) {
        fprintf(stderr, "ovt rlog: %s; see `ovt rlog --help`\n", why);
        return 2;
    }
    const char *dir = argv[optind];
    char path[4096];
    if (!sites) {
        if (trn_run_path(path, sizeof path, dir, "logs", k, "rlog")) {
            fprintf(stderr, "ovt rlog: %s\n", ovt_errmsg());
            return 1;
        }
        char name[] = "rlog", fe[] = "--entries", fj[] = "--json";
        char *args[5];
        int n = 0;
        args[n++] = name;
        if (entries)
            args[n++] = fe;
        if (json)
            args[n++] = fj;
        args[n++] = path;
        args[n] = NULL;
        return cmd_rlog_file(n, args);
    }
    trn_run_config rc;
    trn_run_data d;
    memset(&d, 0, sizeof d);
    trn_step_table table = {0};
    int rv = load_data(&d, dir, data, &rc);
    if (!rv && !(rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")))
        rv = trn_step_table_read(&table, path);
    if (!rv && k >= table.count)
        rv = ovt_fail(OVT_EINVAL, "the run in %s has steps 1..%zu, not step %llu", dir,
                      table.count ? table.count - 1 : 0, (unsigned long long)k);
    trn_step_table_free(&table);
    if (rv) {
        fprintf(stderr, "ovt rlog: %s\n", ovt_errmsg());
        trn_run_data_free(&d);
        return 1;
    }
    trn_replay_result r;
    krn_site_stats *rows = NULL;
    size_t nrows = 0;
    rv = trn_step_replay_sites(dir, &d, k, threads, &r, &rows, &nrows);
    trn_run_data_free(&d);
    char err[1024];
    snprintf(err, sizeof err, "%s", rv ? ovt_errmsg() : "");
    if (rv && (rv != OVT_EFRAUD || nrows == 0)) {
        fprintf(stderr, "ovt rlog: %s\n", err);
        free(rows);
        return 1;
    }
    if (json) {
        rlog_sites_json(rows, nrows, k, rv ? err : NULL);
    } else {
        rlog_sites_text(rows, nrows, k, dir);
        if (rv)
            printf("step %llu: FRAUD: %s\n", (unsigned long long)k, err);
    }
    free(rows);
    return rv ? 1 : 0;
}
