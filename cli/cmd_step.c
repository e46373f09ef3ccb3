/* `ovt step`: one step of a run re-executed and compared with the step
 * table and its leaf (trn_step_check_run, trainer/check.h); the command
 * prints what it found. */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "common/fileio.h"
#include "kernels/trace.h"
#include "trainer/check.h"

static void step_usage(FILE *f)
{
    fprintf(f, "usage: ovt step --run DIR --step K [--data FILE] [--backend cpu] [--threads N] [--json]\n"
               "                [--trace [--backend cpu|ref|shuffle] [--trace-out FILE]]\n"
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
               "  --backend B   cpu, the arbiter's (REPLAY mode, its strict rule); with --trace also\n"
               "                ref or shuffle (step K follows the log as an auditor does)\n"
               "  --threads N   cpu threads (default: the backend's)\n"
               "  --json        the result as JSON (with --trace: every record of the trace)\n"
               "  --trace       also the step's trace (docs/formats.md, \"Step trace\"): for every\n"
               "                rounding site of step K, in order, the tree root of its output and\n"
               "                what it read; prints the trace root. Changes no bit of the step; an\n"
               "                honest step's trace is the same on cpu, ref and shuffle; a trace that\n"
               "                cannot be made (a read it cannot name) exits 1\n"
               "  --trace-out F with --trace: the trace file written to F (atomically)\n"
               "  -h, --help    this help\n");
}

static const char *verdict_name(trn_check_verdict v)
{
    return v == TRN_CHECK_FRAUD ? "fraud" : v == TRN_CHECK_MATCH ? "match" : "mismatch";
}

/* The hashes a result shows, in hex. */
typedef struct {
    char state[67], batch[67], log[67], table_state[67], leaf[67], table_leaf[67];
} step_hex;

static void step_hex_of(step_hex *h, const trn_step_check *s)
{
    chain_hash_hex(h->state, &s->got.state_hash);
    chain_hash_hex(h->batch, &s->got.batch_hash);
    chain_hash_hex(h->log, &s->got.log_hash);
    chain_hash_hex(h->table_state, &s->want.state_hash);
    chain_hash_hex(h->leaf, &s->leaf);
    chain_hash_hex(h->table_leaf, &s->table_leaf);
}

enum { O_RUN = 256, O_STEP, O_DATA, O_BACKEND, O_THREADS, O_JSON, O_TRACE, O_TRACE_OUT };

struct step_args {
    const char *dir, *data, *trace_out;
    uint64_t k;
    int threads;
    krn_backend_kind backend;
    bool json, have_k, trace;
};

static const char *const trace_kinds[] = {"site", "state", "batch", "zero"};

/* The trace as JSON: its root, size and every record with its reads. */
static json_t *trace_json(const trn_step_trace *tr)
{
    if (tr->trace_rc)
        return json_pack("{s:s}", "error", krn_trace_error(tr->trace));
    const krn_trace *t = tr->trace;
    char hex[67];
    chain_hash_hex(hex, &tr->root);
    json_t *records = json_array();
    for (size_t i = 0; i < krn_trace_count(t); i++) {
        const krn_trace_record *r = krn_trace_record_at(t, i);
        const krn_trace_src *rd = krn_trace_reads_of(t, i);
        json_t *reads = json_array();
        for (size_t k = 0; k < r->nreads; k++) {
            json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:I}", "input", (json_int_t)rd[k].input, "dst",
                                  (json_int_t)rd[k].dst, "kind", trace_kinds[rd[k].kind], "offset",
                                  (json_int_t)rd[k].offset, "count", (json_int_t)rd[k].count);
            if (rd[k].rows > 1) {
                json_object_set_new(o, "rows", json_integer(rd[k].rows));
                json_object_set_new(o, "src_step", json_integer((json_int_t)rd[k].src_step));
                json_object_set_new(o, "dst_step", json_integer((json_int_t)rd[k].dst_step));
            }
            if (rd[k].kind == KRN_TRACE_SITE)
                json_object_set_new(o, "site", json_integer(rd[k].site));
            else if (rd[k].kind != KRN_TRACE_ZERO)
                json_object_set_new(o, "name", json_string(krn_trace_region_name(t, rd[k].region)));
            json_array_append_new(reads, o);
        }
        char root[67], hash[67];
        chain_hash_hex(root, &r->root);
        chain_hash_hex(hash, &r->hash);
        json_array_append_new(records, json_pack("{s:I, s:s, s:I, s:s, s:s, s:o}", "site", (json_int_t)r->site,
                                                 "op", r->op, "n", (json_int_t)r->n, "output_root", root,
                                                 "record_hash", hash, "reads", reads));
    }
    return json_pack("{s:s, s:I, s:I, s:o}", "root", hex, "sites", (json_int_t)krn_trace_count(t), "bytes",
                     (json_int_t)krn_trace_bytes(t), "records", records);
}

/* After a traced step: the trace file (--trace-out); the exit status, 1
 * when the trace failed or could not be written. */
static int trace_done(const struct step_args *a, const trn_step_check *s, trn_step_trace *tr, int rv)
{
    if (tr->trace_rc || s->verdict == TRN_CHECK_FRAUD)
        return 1;
    if (!a->trace_out)
        return rv;
    uint8_t *buf;
    size_t len;
    if (krn_trace_file(tr->trace, a->k, &tr->root, &buf, &len)) {
        fprintf(stderr, "ovt step: %s\n", ovt_errmsg());
        return 1;
    }
    int wr = ovt_write_atomic(a->trace_out, buf, len, 0644);
    free(buf);
    if (wr) {
        fprintf(stderr, "ovt step: %s\n", ovt_errmsg());
        return 1;
    }
    return rv;
}

static void print_json(const trn_step_check *s, uint64_t k, const trn_step_trace *tr)
{
    const trn_replay_result *r = &s->replay;
    step_hex h;
    step_hex_of(&h, s);
    json_t *o = json_pack("{s:I, s:I, s:s, s:b, s:b, s:b}", "step", (json_int_t)k, "from_checkpoint",
                          (json_int_t)r->from_checkpoint, "result", verdict_name(s->verdict), "state_matches",
                          s->state_matches, "batch_matches", s->batch_matches, "log_matches", s->log_matches);
    if (s->verdict == TRN_CHECK_FRAUD) {
        json_object_set_new(o, "error", json_string(s->fraud));
    } else {
        json_object_set_new(o, "state_hash", json_string(h.state));
        json_object_set_new(o, "table_state_hash", json_string(h.table_state));
        json_object_set_new(o, "batch_hash", json_string(h.batch));
        json_object_set_new(o, "log_hash", json_string(h.log));
        json_object_set_new(o, "leaf", s->has_run_id ? json_string(h.leaf) : json_null());
        json_object_set_new(o, "table_leaf", s->has_run_id ? json_string(h.table_leaf) : json_null());
    }
    json_object_set_new(o, "shards", json_integer(r->shards));
    if (r->shard_differs >= 0) {
        json_t *sd = json_pack("{s:I}", "shard", (json_int_t)r->shard_differs);
        json_object_set_new(sd, "rank", s->has_owner ? json_integer(s->owner.rank) : json_null());
        json_object_set_new(sd, "host", s->has_owner ? json_string(s->owner.host) : json_null());
        json_object_set_new(sd, "owner_bound", json_boolean(s->has_owner && s->owner.bound));
        json_object_set_new(sd, "owner_note", s->has_owner ? json_null() : json_string(s->owner_note));
        json_object_set_new(o, "shard_differs", sd);
    } else {
        json_object_set_new(o, "shard_differs", json_null());
    }
    if (tr)
        json_object_set_new(o, "trace", trace_json(tr));
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    printf("%s\n", text ? text : "{}");
    free(text);
}

static void print_text(const trn_step_check *s, uint64_t k, const trn_step_trace *tr)
{
    const trn_replay_result *r = &s->replay;
    if (s->verdict == TRN_CHECK_FRAUD) {
        printf("step %llu: FRAUD: %s\n", (unsigned long long)k, s->fraud);
        return;
    }
    step_hex h;
    step_hex_of(&h, s);
    printf("step %llu re-executed from checkpoint %llu\n", (unsigned long long)k,
           (unsigned long long)r->from_checkpoint);
    printf("  stateHash %s  %s\n", h.state, s->state_matches ? "matches" : "DIFFERS");
    if (!s->state_matches)
        printf("  table has %s\n", h.table_state);
    printf("  batchHash %s  %s\n", h.batch, s->batch_matches ? "matches" : "DIFFERS");
    printf("  logHash   %s  %s\n", h.log, s->log_matches ? "matches" : "DIFFERS");
    if (tr && tr->trace_rc == 0) {
        char hex[67];
        chain_hash_hex(hex, &tr->root);
        printf("  trace     %s  (%zu sites, %zu bytes of records)\n", hex, krn_trace_count(tr->trace),
               krn_trace_bytes(tr->trace));
    }
    if (s->has_run_id)
        printf("  leaf      %s  %s\n", h.leaf, !memcmp(s->leaf.b, s->table_leaf.b, 32) ? "matches" : "DIFFERS");
    else
        printf("  leaf      (no runId yet: the run was not opened on chain)\n");
    if (r->shard_differs >= 0 && s->has_owner)
        printf("  shard %lld of %u: its gradient DIFFERS from the log's shard table (computed by rank %u on "
               "host %s, per ranks.json%s)\n",
               (long long)r->shard_differs, r->shards, s->owner.rank, s->owner.host,
               s->owner.bound ? "" : ", which no ranks.json.sha256 binds: a run from before it");
    else if (r->shard_differs >= 0)
        printf("  shard %lld of %u: its gradient DIFFERS from the log's shard table (its process is not known: "
               "%s)\n",
               (long long)r->shard_differs, r->shards, s->owner_note);
    else if (r->shards > 1)
        printf("  shards    all %u gradients match the log's shard table\n", r->shards);
    printf("step %llu: %s\n", (unsigned long long)k,
           s->verdict == TRN_CHECK_MATCH ? "matches the step table" : "does NOT match the step table");
}


/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct step_args *a = ctx;
    int rv = 0;
    switch (c) {
    case O_RUN: a->dir = arg; break;
    case O_STEP: rv = ovt_parse_u64(&a->k, flag, arg, 1, CHAIN_MERKLE_MAX_STEPS); a->have_k = true; break;
    case O_DATA: a->data = arg; break;
    case O_BACKEND:
        rv = krn_backend_parse(&a->backend, arg);
        if (!rv && a->backend == KRN_BACKEND_CUDA)
            rv = ovt_fail(OVT_EINVAL, "--backend cuda: `ovt step` re-executes on cpu (or, traced, ref or shuffle)");
        break;
    case O_TRACE: a->trace = true; break;
    case O_TRACE_OUT: a->trace_out = arg; break;
    case O_THREADS: rv = ovt_parse_int(&a->threads, flag, arg, 0, 256); break;
    case O_JSON: a->json = true; break;
    default: return cli_arg_unknown("step", given);
    }
    return rv ? cli_usage_fail("step") : 0;
}

int cmd_step(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"run", required_argument, NULL, O_RUN},         {"step", required_argument, NULL, O_STEP},
        {"data", required_argument, NULL, O_DATA},       {"backend", required_argument, NULL, O_BACKEND},
        {"threads", required_argument, NULL, O_THREADS}, {"json", no_argument, NULL, O_JSON},
        {"trace", no_argument, NULL, O_TRACE},           {"trace-out", required_argument, NULL, O_TRACE_OUT},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    struct step_args a = {0};
    int rv = cli_getopt(argc, argv, longopts, step_usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("step", argc, argv))
        return 2;
    if (!a.dir || !a.have_k)
        return cli_usage_error("step", "--run and --step are required");
    if (!a.trace && (a.backend != KRN_BACKEND_CPU || a.trace_out))
        return cli_usage_error("step", "--backend ref|shuffle and --trace-out need --trace");
    trn_step_check s;
    trn_step_trace tr = {.backend = a.backend};
    if (a.trace && krn_trace_new(&tr.trace, false))
        return cli_fail("step");
    if (trn_step_check_traced(&s, a.dir, a.data, a.k, a.threads, a.trace ? &tr : NULL)) {
        krn_trace_free(tr.trace);
        return cli_fail("step");
    }
    rv = s.verdict == TRN_CHECK_MATCH ? 0 : 1;
    if (a.json)
        print_json(&s, a.k, a.trace ? &tr : NULL);
    else
        print_text(&s, a.k, a.trace ? &tr : NULL);
    if (a.trace && (rv = trace_done(&a, &s, &tr, rv)) != 0 && tr.trace_rc)
        fprintf(stderr, "ovt step: the trace of step %llu failed: %s\n", (unsigned long long)a.k,
                krn_trace_error(tr.trace));
    krn_trace_free(tr.trace);
    return rv;
}
