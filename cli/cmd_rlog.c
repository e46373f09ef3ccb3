/* `ovt rlog FILE`: shows what a rounding-log file holds, after checking it
 * completely (krn_rlog_read_file), with its SHA-256 (the logHash of the
 * step's Merkle leaf). The run-directory form (RUNDIR --step K [--sites])
 * is cmd_rlog's (cli/cmd_step.c), which replays the step. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/fileio.h"
#include "kernels/rlog.h"
#include "cli/commands.h"

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
            "An exact site (zero band, never logged) shows - in the last three columns.\n"
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

/* The full help of `ovt rlog` (the replay form is cli/cmd_step.c's). */
void cmd_rlog_usage(FILE *out)
{
    usage(out);
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

static void print_json(const krn_rlog *log, const char *hash, size_t bytes, uint64_t values,
                       int entries)
{
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
                             (json_int_t)bytes, "entries", (json_int_t)krn_rlog_nentries(log),
                             "values", (json_int_t)values, "sites", sites);
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

static void print_text(const krn_rlog *log, const char *path, const char *hash, size_t bytes,
                       uint64_t values, int entries)
{
    uint64_t n = krn_rlog_nentries(log);
    printf("rounding log %s\n", path);
    printf("  step     %llu\n", (unsigned long long)krn_rlog_step(log));
    printf("  sha256   %s\n", hash);
    printf("  bytes    %zu\n", bytes);
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

int cmd_rlog_file(int argc, char **argv)
{
    static const struct option opts[] = {
        {"entries", no_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int entries = 0, json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'e': entries = 1; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ovt rlog: expected one FILE\n");
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, (size_t)1 << 31) < 0) {
        fprintf(stderr, "ovt rlog: %s\n", ovt_errmsg());
        return 1;
    }
    krn_rlog *log = krn_rlog_new();
    int rc = krn_rlog_decode(log, buf, len);
    if (rc < 0) {
        fprintf(stderr, "ovt rlog: %s: %s\n", path, ovt_errmsg());
        free(buf);
        krn_rlog_free(log);
        return 1;
    }
    ovt_hash h;
    ovt_sha256(&h, buf, len);
    char hash[65];
    ovt_hex_encode(hash, h.b, sizeof h.b);
    free(buf);
    uint64_t values = 0;
    for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        for (size_t k = 0; k < s->count; k++)
            values += s->entries[k].dir == KRN_DIR_VALUE;
    }
    if (json)
        print_json(log, hash, len, values, entries);
    else
        print_text(log, path, hash, len, values, entries);
    krn_rlog_free(log);
    return 0;
}
