/* `ovt rlog`: a rounding-log file shown after checking it completely
 * (krn_rlog_inspect_file), with its SHA-256 (the logHash of the step's
 * Merkle leaf): FILE, or RUNDIR --step K for the run's log of step K; and
 * RUNDIR --step K --sites, step K re-executed and counted per site
 * (trn_step_sites, trainer/check.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/merkle.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "common/bytes.h"
#include "kernels/rlog.h"
#include "trainer/check.h"
#include "trainer/rundata.h"

static const char *const kind_names[] = {"down", "up", "value"};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt rlog [--entries] [--json] FILE\n"
            "       ovt rlog RUNDIR --step K [--entries] [--json]\n"
            "       ovt rlog RUNDIR --step K --sites [--data FILE] [--threads N] [--json]\n"
            "\n"
            "Checks a rounding-log file (one step's log, docs/formats.md; with --step, the\n"
            "run's RUNDIR/logs/step-K.rlog) and shows its step, SHA-256 (the step's logHash),\n"
            "sizes and entry counts. Every malformation is reported and the command fails.\n"
            "\n"
            "An entry is an element the trainer saw within its band tau of a grid\n"
            "midpoint (contract version 2, docs/numeric-contract.md: tau = 2*M*delta): a\n"
            "direction where tau <= s/16, else the value. How many elements of a site sit\n"
            "within tau/2 (those a verifier requires an entry for) depends on the values,\n"
            "which the log does not hold: --sites re-executes step K from the run directory\n"
            "(cpu backend, REPLAY mode with the run's logs, as `ovt step` does) and prints\n"
            "one row per site step K executed:\n"
            "  site      the site number (execution order within the step)\n"
            "  op        the op that rounds there\n"
            "  n         elements of the site\n"
            "  entries   entries the log holds for the site\n"
            "  <=tau/2   elements whose own distance d' to the nearest midpoint is at most\n"
            "            tau'/2 (the replay's own values and band): a verifier requires an\n"
            "            entry for each, and an unlogged one is a missing entry\n"
            "  <=tau     elements with d' <= tau': those an honest trainer with these very\n"
            "            values logs (replayed on the trainer's backend, entries equals it)\n"
            "  free r2   elements with d' <= tau'/2 + delta' (delta' = tau'/(2M)): those a log\n"
            "            may round either way unchallenged under band rules 1 (rule 2: an\n"
            "            auditor follows a direction it cannot prove wrong)\n"
            "  free r3   elements with d' <= delta': the same under band rules 2 (rule 3, the\n"
            "            canonical view; this re-execution is that view)\n"
            "An exact site (zero band, never logged) shows - in the last five columns.\n"
            "Then the totals. A log that fails the check ends the table at the failing site\n"
            "and the command says why (status 1); `ovt step` and `ovt audit` name the element.\n"
            "\n"
            "  --entries      also list every entry: site, element index, kind (down, up,\n"
            "                 value) and, for values, the FP32 value and its bits\n"
            "  --json         print one JSON object instead of text\n"
            "  --step K       the log of step K of the run in RUNDIR\n"
            "  --sites        replay step K and count per site (needs --step)\n"
            "  --data FILE    --sites: the dataset (default: the path in RUNDIR/receipt.json)\n"
            "  --threads N    --sites: cpu threads (default: the backend's)\n"
            "  -h, --help     show this help\n");
}

/* A JSON integer, or a decimal string past JSON's signed 64-bit range. */
static json_t *json_u64(uint64_t v)
{
    if (v <= INT64_MAX)
        return json_integer((json_int_t)v);
    char dec[24];
    snprintf(dec, sizeof dec, "%llu", (unsigned long long)v);
    return json_string(dec);
}

static json_t *entry_json(const krn_rlog_entry *e)
{
    json_t *o = json_pack("{s:o, s:s}", "index", json_u64(e->index), "kind", kind_names[e->dir]);
    if (e->dir == KRN_DIR_VALUE) {
        uint32_t bits;
        memcpy(&bits, &e->value, sizeof bits);
        char hex[11];
        snprintf(hex, sizeof hex, "0x%08x", bits);
        json_object_set_new(o, "value", json_real(e->value));
        json_object_set_new(o, "bits", json_string(hex));
    }
    return o;
}

static void print_json(const krn_rlog *log, const krn_rlog_file_info *info, bool entries)
{
    char hash[65];
    ovt_hex_encode(hash, info->sha256.b, 32);
    json_t *sites = json_array();
    for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        json_t *so = json_pack("{s:I, s:o, s:I}", "site", (json_int_t)s->site, "n", json_u64(s->n),
                               "count", (json_int_t)s->count);
        if (entries) {
            json_t *list = json_array();
            for (size_t k = 0; k < s->count; k++)
                json_array_append_new(list, entry_json(&s->entries[k]));
            json_object_set_new(so, "entries", list);
        }
        json_array_append_new(sites, so);
    }
    json_t *root = json_pack("{s:o, s:s, s:I, s:I, s:I, s:o}", "step",
                             json_u64(krn_rlog_step(log)), "sha256", hash, "bytes",
                             (json_int_t)info->bytes, "entries", (json_int_t)krn_rlog_nentries(log),
                             "values", (json_int_t)info->values, "sites", sites);
    json_t *shards = json_array();
    for (uint32_t j = 0; j < krn_rlog_nshards(log); j++) {
        char h[65];
        ovt_hex_encode(h, krn_rlog_shard_hash(log, j)->b, 32);
        json_array_append_new(shards, json_string(h));
    }
    json_object_set_new(root, "shard_hashes", shards);
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    fputc('\n', stdout);
    json_decref(root);
}

static void print_text(const krn_rlog *log, const char *path, const krn_rlog_file_info *info, bool entries)
{
    uint64_t n = krn_rlog_nentries(log), values = info->values;
    char hash[65];
    ovt_hex_encode(hash, info->sha256.b, 32);
    printf("rounding log %s\n", path);
    printf("  step     %llu\n", (unsigned long long)krn_rlog_step(log));
    printf("  sha256   %s\n", hash);
    printf("  bytes    %zu\n", info->bytes);
    printf("  sites    %zu with entries\n", krn_rlog_nsites(log));
    printf("  entries  %llu (%llu directions, %llu values)\n", (unsigned long long)n,
           (unsigned long long)(n - values), (unsigned long long)values);
    for (uint32_t j = 0; j < krn_rlog_nshards(log); j++) {
        char h[65];
        ovt_hex_encode(h, krn_rlog_shard_hash(log, j)->b, 32);
        printf("  shard %-3u gradient sha256 %s\n", j, h);
    }
    if (!entries)
        return;
    for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        printf("site %u (n = %llu, %zu entries)\n", s->site, (unsigned long long)s->n, s->count);
        for (size_t k = 0; k < s->count; k++) {
            const krn_rlog_entry *e = &s->entries[k];
            if (e->dir == KRN_DIR_VALUE)
                printf("  %llu value %.9g (%a)\n", (unsigned long long)e->index, (double)e->value,
                       (double)e->value);
            else
                printf("  %llu %s\n", (unsigned long long)e->index, kind_names[e->dir]);
        }
    }
}

/* The file form: the log at path, checked and shown. */
static int rlog_file(const char *path, bool entries, bool json)
{
    krn_rlog *log = krn_rlog_new();
    if (!log) {
        ovt_fail(OVT_ENOMEM, "out of memory");
        return cli_fail("rlog");
    }
    krn_rlog_file_info info;
    if (krn_rlog_inspect_file(log, &info, path)) {
        krn_rlog_free(log);
        return cli_fail("rlog");
    }
    if (json)
        print_json(log, &info, entries);
    else
        print_text(log, path, &info, entries);
    krn_rlog_free(log);
    return 0;
}

static void print_sites_json(const krn_site_stats *rows, size_t n, uint64_t k, const char *error)
{
    json_t *sites = json_array();
    for (size_t i = 0; i < n; i++) {
        const krn_site_stats *r = &rows[i];
        json_array_append_new(sites, json_pack("{s:I, s:s, s:I, s:b, s:I, s:I, s:I, s:I, s:I}", "site",
                                               (json_int_t)r->site, "op", r->op, "n", (json_int_t)r->n, "banded",
                                               r->banded, "entries", (json_int_t)r->entries, "within_half_tau",
                                               (json_int_t)r->within_half, "within_tau", (json_int_t)r->within_tau,
                                               "free_rule2", (json_int_t)r->free_v2, "free_rule3",
                                               (json_int_t)r->free_v3));
    }
    krn_site_stats tot;
    trn_site_totals(&tot, rows, n);
    json_t *o = json_pack("{s:I, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I}}", "step", (json_int_t)k, "sites", sites,
                          "totals", "n", (json_int_t)tot.n, "entries", (json_int_t)tot.entries, "within_half_tau",
                          (json_int_t)tot.within_half, "within_tau", (json_int_t)tot.within_tau, "free_rule2",
                          (json_int_t)tot.free_v2, "free_rule3", (json_int_t)tot.free_v3);
    json_object_set_new(o, "result", json_string(error ? "fraud" : "ok"));
    if (error)
        json_object_set_new(o, "error", json_string(error));
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    printf("%s\n", text ? text : "{}");
    free(text);
}

static void print_sites_text(const krn_site_stats *rows, size_t n, uint64_t k, const char *dir)
{
    printf("step %llu of %s, re-executed (cpu, REPLAY with the run's logs): %zu sites\n", (unsigned long long)k,
           dir, n);
    printf("%6s  %-28s %10s %9s %9s %9s %9s %9s\n", "site", "op", "n", "entries", "<=tau/2", "<=tau", "free r2",
           "free r3");
    for (size_t i = 0; i < n; i++) {
        const krn_site_stats *r = &rows[i];
        if (r->banded)
            printf("%6u  %-28s %10llu %9llu %9llu %9llu %9llu %9llu\n", r->site, r->op, (unsigned long long)r->n,
                   (unsigned long long)r->entries, (unsigned long long)r->within_half,
                   (unsigned long long)r->within_tau, (unsigned long long)r->free_v2,
                   (unsigned long long)r->free_v3);
        else
            printf("%6u  %-28s %10llu %9s %9s %9s %9s %9s\n", r->site, r->op, (unsigned long long)r->n, "-", "-", "-",
                   "-", "-");
    }
    krn_site_stats tot;
    trn_site_totals(&tot, rows, n);
    printf("%6s  %-28s %10llu %9llu %9llu %9llu %9llu %9llu\n", "total", "", (unsigned long long)tot.n,
           (unsigned long long)tot.entries, (unsigned long long)tot.within_half, (unsigned long long)tot.within_tau,
           (unsigned long long)tot.free_v2, (unsigned long long)tot.free_v3);
}

/* RUNDIR --step K --sites: step K re-executed and counted per site; a log
 * that fails the check ends the table (status 1). */
static int rlog_sites(const char *dir, uint64_t k, const char *data, int threads, bool json)
{
    krn_site_stats *rows;
    size_t nrows;
    int rv = trn_step_sites(&rows, &nrows, dir, data, k, threads);
    if (rv && (rv != OVT_EFRAUD || nrows == 0)) {
        free(rows);
        return cli_fail("rlog");
    }
    char err[1024];
    snprintf(err, sizeof err, "%s", rv ? ovt_errmsg() : "");
    if (json) {
        print_sites_json(rows, nrows, k, rv ? err : NULL);
    } else {
        print_sites_text(rows, nrows, k, dir);
        if (rv)
            printf("step %llu: FRAUD: %s\n", (unsigned long long)k, err);
    }
    free(rows);
    return rv ? 1 : 0;
}

enum { O_STEP = 256, O_SITES, O_DATA, O_THREADS, O_JSON, O_ENTRIES };

struct rlog_args {
    const char *data;
    uint64_t k;
    int threads;
    bool json, entries, sites, have_k;
    bool run_form; /* a flag of RUNDIR --step K given */
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct rlog_args *a = ctx;
    int rv = 0;
    a->run_form = a->run_form || c == O_STEP || c == O_SITES || c == O_DATA || c == O_THREADS;
    switch (c) {
    case O_STEP: rv = ovt_parse_u64(&a->k, flag, arg, 1, CHAIN_MERKLE_MAX_STEPS); a->have_k = true; break;
    case O_SITES: a->sites = true; break;
    case O_DATA: a->data = arg; break;
    case O_THREADS: rv = ovt_parse_int(&a->threads, flag, arg, 0, 256); break;
    case O_JSON: a->json = true; break;
    case O_ENTRIES: a->entries = true; break;
    default: return cli_arg_unknown("rlog", given);
    }
    return rv ? cli_usage_fail("rlog") : 0;
}

/* What the flags of RUNDIR --step K leave unsaid or say against each other
 * (one_operand: a single RUNDIR follows them), or NULL. */
static const char *run_form_problem(const struct rlog_args *a, bool one_operand)
{
    if (!a->have_k)
        return "--sites, --data and --threads need RUNDIR --step K";
    if (!one_operand)
        return "expected one RUNDIR";
    if (a->sites && a->entries)
        return "--entries lists a log file's entries; --sites counts per site";
    if (!a->sites && (a->data || a->threads))
        return "--data and --threads go with --sites";
    return NULL;
}

int cmd_rlog(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"step", required_argument, NULL, O_STEP},       {"sites", no_argument, NULL, O_SITES},
        {"data", required_argument, NULL, O_DATA},       {"threads", required_argument, NULL, O_THREADS},
        {"json", no_argument, NULL, O_JSON},             {"entries", no_argument, NULL, O_ENTRIES},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    struct rlog_args a = {0};
    int rv = cli_getopt(argc, argv, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (!a.run_form)
        return optind == argc - 1 ? rlog_file(argv[optind], a.entries, a.json)
                                  : cli_usage_error("rlog", "expected one FILE");
    const char *why = run_form_problem(&a, optind == argc - 1);
    if (why)
        return cli_usage_error("rlog", "%s", why);
    const char *dir = argv[optind];
    if (a.sites)
        return rlog_sites(dir, a.k, a.data, a.threads, a.json);
    char path[4096];
    if (trn_run_path(path, sizeof path, dir, "logs", a.k, "rlog"))
        return cli_fail("rlog");
    return rlog_file(path, a.entries, a.json);
}
