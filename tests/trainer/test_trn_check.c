/* The trainer's user-facing checks, through the built binary:
 * - gpt2-tiny's loss falls on a real text (GPL-3 as byte tokens), and
 *   loss.csv / loss.svg are written and parse (the SVG with python3's
 *   xml.etree);
 * - `ovt step` reproduces steps.bin's stateHash for a step whose previous
 *   state is a checkpoint and for one replayed from an earlier checkpoint,
 *   reports a forged log entry as fraud and a corrupted log as an error;
 * - `ovt verify` accepts a receipt signed like `ovt commit` signs it, and
 *   rejects a changed root, a wrong signature, a changed config.bin and a
 *   different dataset;
 * - a diverging step (an activation beyond FP32) is a clear error and
 *   leaves no file of that step. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "chain/keys.h"
#include "chain/session.h"
#include "check.h"
#include "common/fileio.h"
#include "party/commit.h"
#include "data/dataset.h"
#include "trainer/checkpoint.h"
#include "trainer/plot.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/state.h"
#include "trainer/runner.h"
#include "trainer/step.h"
#include "support/cli_fixture.h"

static int copy_file(const char *from, const char *to)
{
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(from, &buf, &len, (size_t)1 << 30);
    if (!rv) {
        rv = ovt_write_atomic(to, buf, len, 0644);
        free(buf);
    }
    return rv;
}

static void check_loss_files(const char *run, uint64_t steps, int real_text)
{
    char path[512], cmd[1024];
    trn_loss_row *rows;
    size_t n;
    snprintf(path, sizeof path, "%s/loss.csv", run);
    CHECK(trn_loss_csv_read(path, &rows, &n) == 0);
    CHECK_EQ_U64(n, steps);
    for (size_t i = 0; i < n; i++)
        CHECK(rows[i].step == i + 1 && isfinite(rows[i].loss));
    if (real_text && n >= 10) {
        /* Byte tokens start near uniform: loss ln(256) = 5.545 (an
         * independent figure); on English text it must fall well below. */
        CHECK_MSG(fabs(rows[0].loss - log(256.0)) < 0.3, "first loss %g, not near ln 256", rows[0].loss);
        double head = 0, tail = 0;
        for (size_t i = 0; i < 5; i++) {
            head += rows[i].loss / 5;
            tail += rows[n - 5 + i].loss / 5;
        }
        CHECK_MSG(tail < head - 1.0, "loss did not fall: first five %g, last five %g", head, tail);
    }
    free(rows);
    if (system("python3 -c 'pass' 2>/dev/null") != 0) {
        printf("python3 absent: loss.svg not parsed\n");
        return;
    }
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import sys, xml.etree.ElementTree as E; r = E.parse('%s/loss.svg').getroot(); "
             "ns = '{http://www.w3.org/2000/svg}'; p = r.find(ns + 'polyline'); "
             "t = [x.text for x in r.iter(ns + 'text')]; "
             "sys.exit(0 if r.tag == ns + 'svg' and len(p.get('points').split()) == %llu and 'step' in t "
             "and 'training loss' in t else 1)\"",
             run, (unsigned long long)steps);
    CHECK_MSG(system(cmd) == 0, "%s/loss.svg is not a well-formed chart of %llu points", run,
              (unsigned long long)steps);
}

/* ovt step --json: the exit status and the reported stateHash against
 * steps.bin's, read here. */
static void check_step(const char *run, const char *data, const trn_step_table *t, uint64_t k, uint64_t ckpt)
{
    CHECK(run_ovt("step --run %s --step %llu --data %s --json", run, (unsigned long long)k, data) == 0);
    char want[80], from[64];
    chain_hash_hex(want, &t->steps[k].state_hash);
    CHECK(output_has("\"result\": \"match\""));
    CHECK(output_has(want));
    snprintf(from, sizeof from, "\"from_checkpoint\": %llu", (unsigned long long)ckpt);
    CHECK(output_has(from));
}

static const char *anvil_keys[] = {"0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
                                   "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"};

/* Writes RUN/receipt.json as `ovt commit` would, signed with key `signer`
 * but naming anvil key 0 as the trainer; root_flip changes the root,
 * bond_change the auditor's bond after the runId was derived. */
static void write_receipt_terms(const char *run, const char *data, const trn_step_table *t, int signer,
                                int root_flip, unsigned bond_change)
{
    party_receipt r;
    memset(&r, 0, sizeof r);
    r.chain_id = 31337;
    CHECK(chain_address_from_string(&r.contract, "0x5fbdb2315678afecb367f032d93f642f64180aa3") == 0);
    chain_privkey key, trainer_key;
    CHECK(chain_key_from_hex(&trainer_key, anvil_keys[0]) == 0);
    CHECK(chain_key_from_hex(&key, anvil_keys[signer]) == 0);
    CHECK(chain_key_address(&r.params.trainer, &trainer_key) == 0);
    trn_run_config rc;
    ovt_hash ch;
    CHECK(trn_run_load_config(run, &rc, &ch) == 0);
    r.params.config_hash = ch;
    r.params.dataset_hash = rc.dataset_hash;
    r.params.steps = t->count - 1;
    CHECK(chain_address_from_string(&r.params.auditor, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8") == 0);
    CHECK(chain_address_from_string(&r.params.arbiters[0], "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC") == 0);
    r.params.commit_timeout = 600;
    r.params.move_timeout = 300;
    r.params.arbiter_timeout = 900;
    r.params.trainer_bond = chain_u256_from_u64(1000000000000000000ull);
    r.params.auditor_bond = chain_u256_from_u64(500000000000000000ull);
    r.params.nonce = 18446744073709551557ull; /* above 2^53: the receipt keeps it exact */
    /* The contract's own derivation (pinned against it in tests/contract). */
    chain_arb_run_id(&r.run_id, r.chain_id, &r.contract, &r.params);
    r.params.auditor_bond = chain_u256_from_u64(500000000000000000ull + bond_change);
    CHECK(trn_step_table_root(&r.root, t, &r.run_id) == 0);
    r.root.b[7] ^= (uint8_t)root_flip;
    CHECK(chain_arb_sign_commitment(r.signature, &key, r.chain_id, &r.contract, &r.run_id, &r.root, &r.params) == 0);
    r.data = data;
    char *text, path[512];
    CHECK(party_receipt_json(&r, &text) == 0);
    snprintf(path, sizeof path, "%s/receipt.json", run);
    CHECK(ovt_write_atomic(path, text, strlen(text), 0644) == 0);
    free(text);
}

static void write_receipt(const char *run, const char *data, const trn_step_table *t, int signer, int root_flip)
{
    write_receipt_terms(run, data, t, signer, root_flip, 0);
}

static void check_verify(const char *run, const char *data, const trn_step_table *t)
{
    char receipt[512], path[512], saved[512];
    snprintf(receipt, sizeof receipt, "%s/receipt.json", run);
    write_receipt(run, data, t, 0, 0);
    CHECK(run_ovt("verify %s --replay 3", receipt) == 0);
    CHECK(output_has("verified"));
    CHECK(output_has("ok   signature recovers to the trainer 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"));
    CHECK(output_has("ok   step 1 "));
    CHECK(output_has("ok   step 30 "));
    CHECK(output_has("ok   run_id "));
    CHECK(run_ovt("verify %s --json", receipt) == 0);
    CHECK(output_has("\"ok\": true"));
    /* the run directory names its receipt (it once was "not a regular file") */
    CHECK(run_ovt("verify %s --json", run) == 0);
    CHECK(output_has("\"ok\": true") && output_has("receipt.json"));
    /* ovt step now names the leaf (the receipt has a runId). */
    CHECK(run_ovt("step --run %s --step 20", run) == 0);
    CHECK(output_has("leaf      0x"));

    write_receipt(run, data, t, 0, 1);
    CHECK(run_ovt("verify %s", receipt) == 1);
    CHECK(output_has("FAIL steps     the 31 leaves hash to root"));
    CHECK(output_has("NOT verified"));

    /* Terms changed after the runId was derived: the signature still holds
     * (it does not cover the bonds), the runId does not. */
    write_receipt_terms(run, data, t, 0, 0, 1);
    CHECK(run_ovt("verify %s", receipt) == 1);
    CHECK(output_has("ok   signature"));
    CHECK(output_has("FAIL run_id"));

    write_receipt(run, data, t, 1, 0);
    CHECK(run_ovt("verify %s", receipt) == 1);
    CHECK(output_has("FAIL signature recovers to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8, not to the trainer"));

    /* A config.bin of another seed. */
    write_receipt(run, data, t, 0, 0);
    trn_run_config rc;
    ovt_hash ch;
    CHECK(trn_run_load_config(run, &rc, &ch) == 0);
    rc.seed += 1;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t enc_len = trn_config_encode(enc, &rc);
    snprintf(path, sizeof path, "%s/config.bin", run);
    snprintf(saved, sizeof saved, "%s/config.saved", dir);
    CHECK(copy_file(path, saved) == 0);
    CHECK(ovt_write_atomic(path, enc, enc_len, 0644) == 0);
    CHECK(run_ovt("verify %s --replay 2", receipt) == 1);
    CHECK(output_has("FAIL config"));
    CHECK(output_has("the receipt says"));
    CHECK(output_has("not attempted"));
    CHECK(copy_file(saved, path) == 0);

    /* Another dataset. */
    CHECK(run_ovt("verify %s --data %s", receipt, path) == 1);
    CHECK(output_has("FAIL dataset"));
    CHECK(run_ovt("step --run %s --step 3 --data %s", run, path) == 1);
    CHECK(output_has("dataset"));
    CHECK(run_ovt("verify %s", receipt) == 0);
    CHECK(run_ovt("verify") == 2);
    CHECK(run_ovt("verify %s/nonexistent.json", dir) == 1);
}

/* A run with a forged log entry at step 5 (the devnet's fault): step 5 is
 * fraud, and so is step 6, replayed through step 5 from checkpoint 3; then
 * a truncated log and a corrupted checkpoint. */
static void check_fraud(const char *data)
{
    char run[256], path[512];
    snprintf(run, sizeof run, "%s/forged", dir);
    CHECK(run_ovt("train --data %s --out %s --steps 6 --batch 2 --seq 16 --every 0 --checkpoint-every 3 "
                  "--inject-fault forged-log --fault-step 5",
                  data, run) == 0);
    CHECK(run_ovt("step --run %s --step 5 --data %s", run, data) == 1);
    CHECK(output_has("FRAUD"));
    CHECK(run_ovt("step --run %s --step 6 --data %s", run, data) == 1);
    CHECK(output_has("FRAUD: re-executing step 5"));
    CHECK(run_ovt("step --run %s --step 4 --data %s", run, data) == 0);
    /* A tampered moment in checkpoint 3 with step 4 of the table rewritten to
     * what the tampered state gives: ovt step must not start from a state the
     * table does not name for step 3. */
    char tampered[256], ckpt[512], table_path[512];
    snprintf(tampered, sizeof tampered, "%s/tampered", dir);
    CHECK(run_ovt("train --data %s --out %s --steps 6 --batch 2 --seq 16 --every 0 --checkpoint-every 3", data,
                  tampered) == 0);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt/step-00000003.ckpt", tampered);
    snprintf(table_path, sizeof table_path, "%s/steps.bin", tampered);
    trn_state *st = NULL;
    trn_step_table t = {0};
    trn_run_data rd;
    memset(&rd, 0, sizeof rd);
    trn_runner *r4 = NULL;
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = 1};
    CHECK(trn_checkpoint_read(&st, ckpt) == 0 && trn_step_table_read(&t, table_path) == 0);
    CHECK(trn_run_data_load(&rd, data, &st->config, 0) == 0);
    if (st && t.count == 7) {
        st->m[0] = st->m[0] == 0.0f ? 1.0f : -st->m[0];
        CHECK(trn_checkpoint_write(st, ckpt) == 0);
        snprintf(path, sizeof path, "%s/logs/step-00000004.rlog", tampered);
        trn_runner_result res;
        CHECK(trn_runner_open(&r4, &st->config, &rd, &ro) == 0 && trn_runner_adopt(r4, &st) == 0);
        CHECK(krn_rlog_read_file(trn_runner_log(r4), path) == 0 && trn_runner_step(r4, &res) == 0);
        t.steps[4].state_hash = res.state_hash;
        CHECK(trn_step_table_write(&t, table_path) == 0);
    }
    CHECK(run_ovt("step --run %s --step 4 --data %s", tampered, data) == 1);
    CHECK(output_has("is not the state the step table claims for step 3"));
    /* A steps.bin of another configHash. */
    t.config_hash.b[0] ^= 1;
    CHECK(trn_step_table_write(&t, table_path) == 0);
    CHECK(run_ovt("step --run %s --step 2 --data %s", tampered, data) == 1);
    CHECK(output_has("belongs to another run config"));
    trn_state_free(st);
    trn_step_table_free(&t);
    trn_run_data_free(&rd);
    trn_runner_free(r4);
    /* Truncated log. */
    uint8_t *buf;
    size_t len;
    snprintf(path, sizeof path, "%s/logs/step-00000004.rlog", run);
    CHECK(ovt_read_file(path, &buf, &len, 1 << 24) == 0);
    CHECK(ovt_write_atomic(path, buf, len / 2, 0644) == 0);
    free(buf);
    CHECK(run_ovt("step --run %s --step 4 --data %s", run, data) == 1);
    CHECK(output_has("step-00000004.rlog"));
    /* Corrupted checkpoint. */
    snprintf(path, sizeof path, "%s/ckpt/step-00000003.ckpt", run);
    CHECK(ovt_read_file(path, &buf, &len, 1 << 24) == 0);
    buf[len / 2] ^= 0x40;
    CHECK(ovt_write_atomic(path, buf, len, 0644) == 0);
    free(buf);
    CHECK(run_ovt("step --run %s --step 4 --data %s", run, data) == 1);
    CHECK(output_has("checkpoint"));
    CHECK(output_has("step-00000003.ckpt"));
    CHECK(run_ovt("step --run %s --step 99 --data %s", run, data) == 1);
    CHECK(output_has("not step 99"));
    CHECK(run_ovt("step --run %s", run) == 2);
}

/* A sharded run whose step 2 log carries a false shard table (false-table:
 * shard 1's gradient hash with one bit flipped, the step itself honest):
 * `ovt step` rules it fraud and names no shard, where it used to say
 * "match" with a note blaming shard 1; the auditor too. A flipped shard
 * gradient (bitflip-shard) still names its shard: the state differs. */
static void check_false_table(const char *data)
{
    char run[256], audit[256];
    snprintf(run, sizeof run, "%s/false-table", dir);
    CHECK(run_ovt("train --data %s --out %s --steps 3 --batch 2 --seq 16 --shards 2 --every 0 --checkpoint-every 1 "
                  "--inject-fault false-table --fault-step 2 --fault-shard 1",
                  data, run) == 0);
    CHECK(run_ovt("step --run %s --step 1 --data %s", run, data) == 0);
    CHECK(run_ovt("step --run %s --step 2 --data %s", run, data) == 1);
    CHECK(output_has("FRAUD") && output_has("shard table is false") && output_has("shard 1"));
    CHECK(run_ovt("step --run %s --step 2 --data %s --json", run, data) == 1);
    CHECK(output_has("\"shard_differs\": null"));
    snprintf(audit, sizeof audit, "%s/false-table-audit", dir);
    CHECK(run_ovt("audit %s --data %s --out %s", run, data, audit) != 0);
    CHECK(output_has("shard table is false"));
    CHECK(run_ovt("train --data %s --out %s/one --steps 2 --batch 2 --seq 16 --inject-fault false-table --fault-step 1",
                  data, dir) != 0);
    CHECK(output_has("needs a sharded run"));
    snprintf(run, sizeof run, "%s/flipped-shard", dir);
    CHECK(run_ovt("train --data %s --out %s --steps 3 --batch 2 --seq 16 --shards 2 --every 0 --checkpoint-every 1 "
                  "--inject-fault bitflip-shard --fault-step 2 --fault-shard 1",
                  data, run) == 0);
    CHECK(run_ovt("step --run %s --step 2 --data %s", run, data) == 1);
    CHECK(!output_has("FRAUD") && output_has("shard 1"));
}

/* MLP samples with features of magnitude 2^127: the first matmul's
 * results pass FP32's range, and the step must fail with a clear error. */
static void check_divergence(void)
{
    data_samples s;
    CHECK(data_samples_synthetic(&s, 3, 64, 128, 32, 32) == 0);
    for (size_t i = 0; i < (size_t)s.count * s.dim; i++)
        s.x[i] = copysignf(0x1p127f, s.x[i]);
    uint8_t *buf;
    size_t len;
    char data[256], run[256], path[512];
    CHECK(data_samples_encode(&s, &buf, &len) == 0);
    data_samples_free(&s);
    snprintf(data, sizeof data, "%s/huge.smp", dir);
    CHECK(ovt_write_atomic(data, buf, len, 0644) == 0);
    free(buf);
    snprintf(run, sizeof run, "%s/diverge", dir);
    CHECK(run_ovt("train --model mlp-demo --data %s --out %s --steps 3 --batch 8", data, run) == 1);
    CHECK(output_has("step 1 diverged"));
    snprintf(path, sizeof path, "%s/logs/step-00000001.rlog", run);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/run.json", run);
    CHECK(access(path, F_OK) != 0);
}

int main(void)
{
    if (cli_setup("trn-check"))
        return 1;
    const char *gpl = "/usr/share/common-licenses/GPL-3";
    char data[256], run[256];
    int real_text = access(gpl, R_OK) == 0;
    if (real_text) {
        snprintf(data, sizeof data, "%s", gpl);
    } else {
        printf("SKIP the falling-loss check: %s is absent (using a short built-in text)\n", gpl);
        snprintf(data, sizeof data, "%s/text.txt", dir);
        const char *text = "every value is computed in fp64 and rounded to the grid; the few near a midpoint "
                           "are logged so that any machine replays the step bit for bit. ";
        CHECK(ovt_write_atomic(data, text, strlen(text), 0644) == 0);
    }
    snprintf(run, sizeof run, "%s/run", dir);
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s --steps 30 --batch 4 --seq 32 --lr 0.003 "
                  "--checkpoint-every 10 --every 10",
                  data, run) == 0);
    CHECK(output_has("steps/s"));
    CHECK_RUN(check_loss_files(run, 30, real_text));

    trn_step_table t;
    char path[512];
    snprintf(path, sizeof path, "%s/steps.bin", run);
    CHECK(trn_step_table_read(&t, path) == 0);
    CHECK_EQ_U64(t.count, 31);
    if (t.count == 31) {
        check_step(run, data, &t, 11, 10); /* state 10 is a checkpoint */
        check_step(run, data, &t, 17, 10); /* states 11..16 replayed first */
        CHECK_RUN(check_verify(run, data, &t));
    }
    trn_step_table_free(&t);
    CHECK_RUN(check_fraud(data));
    CHECK_RUN(check_false_table(data));
    CHECK_RUN(check_divergence());

    cli_cleanup();
    return check_done();
}
