/* `ovt state-proof`: the proof of a leaf range of one tensor of a run's
 * state against its tree stateHash, and its offline check
 * (trainer/state_proof.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/fileio.h"
#include "trainer/checkpoint.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/state.h"
#include "trainer/state_proof.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt state-proof RUNDIR --step K --tensor NAME [--section params|m|v]\n"
            "                       --leaves A[:B] [--json] [--out FILE]\n"
            "       ovt state-proof --verify FILE [--state-hash HEX]\n"
            "\n"
            "A run with the tree stateHash (`ovt train --state-hash 3`, the default) hashes each\n"
            "tensor as a Merkle tree of 64 KiB leaves of its little-endian bytes (docs/formats.md,\n"
            "\"State and stateHash\"). The first form reads step K's checkpoint in RUNDIR and prints\n"
            "the hashes of leaves A to B-1 of the tensor's section, the sibling hashes that climb\n"
            "from them to the tensor's root, every tensor root the stateHash combines, and the\n"
            "stateHash; it says whether that is the stateHash the run's steps.bin holds for step K.\n"
            "The second form checks such a proof (--json output) offline: its run config fixes\n"
            "the layout, the leaves must climb to the tensor's root and the roots, configHash\n"
            "and step must give the stated stateHash (and HEX, when given: the one you trust,\n"
            "from the run's steps.bin or its Merkle proof on chain). Status 1 when it fails.\n"
            "\n"
            "  --step K          the state after step K (its checkpoint must exist)\n"
            "  --tensor NAME     a tensor of the layout (wte, fcw, w0, ...)\n"
            "  --section S       params (default), m or v\n"
            "  --leaves A[:B]    leaves A to B-1 (B exclusive; A alone: one leaf)\n"
            "  --json            print the proof as one JSON object\n"
            "  --out FILE        write the JSON proof to FILE (temporary file and rename)\n"
            "  --verify FILE     check a JSON proof\n"
            "  --state-hash HEX  --verify: the stateHash the proof must end at\n"
            "  -h, --help        show this help\n");
}

enum { O_STEP = 256, O_TENSOR, O_SECTION, O_LEAVES, O_JSON, O_OUT, O_VERIFY, O_STATE_HASH };

struct proof_args {
    uint64_t step;
    bool have_step, json, have_want;
    const char *tensor, *out, *verify;
    int section;
    size_t first, count;
    ovt_hash want;
};

static const char *const section_names[3] = {"params", "m", "v"};

static int parse_leaves(struct proof_args *a, const char *flag, const char *v)
{
    char *end;
    unsigned long long lo = strtoull(v, &end, 10), hi = lo + 1;
    if (end != v && *end == ':')
        hi = strtoull(end + 1, &end, 10);
    if (end == v || *end || hi <= lo)
        return ovt_fail(OVT_EINVAL, "%s expects A or A:B with A < B, got '%s'", flag, v);
    a->first = (size_t)lo;
    a->count = (size_t)(hi - lo);
    return 0;
}

static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct proof_args *a = ctx;
    int rv = 0;
    switch (c) {
    case O_STEP: rv = ovt_parse_u64(&a->step, flag, arg, 0, UINT64_MAX); a->have_step = true; break;
    case O_TENSOR: a->tensor = arg; break;
    case O_SECTION:
        a->section = !strcmp(arg, "params") ? 0 : !strcmp(arg, "m") ? 1 : !strcmp(arg, "v") ? 2 : -1;
        if (a->section < 0)
            rv = ovt_fail(OVT_EINVAL, "%s expects params, m or v, got '%s'", flag, arg);
        break;
    case O_LEAVES: rv = parse_leaves(a, flag, arg); break;
    case O_JSON: a->json = true; break;
    case O_OUT: a->out = arg; break;
    case O_VERIFY: a->verify = arg; break;
    case O_STATE_HASH:
        rv = ovt_hex_decode(a->want.b, 32, arg[0] == '0' && arg[1] == 'x' ? arg + 2 : arg);
        if (rv)
            rv = ovt_fail(OVT_EINVAL, "%s expects 64 hex digits, got '%s'", flag, arg);
        a->have_want = true;
        break;
    default: return cli_arg_unknown("state-proof", given);
    }
    return rv ? cli_usage_fail("state-proof") : 0;
}

static json_t *hash_json(const ovt_hash *h)
{
    char hex[65];
    ovt_hex_encode(hex, h->b, 32);
    return json_string(hex);
}

static json_t *hashes_json(const ovt_hash *h, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, hash_json(&h[i]));
    return a;
}

static char *proof_text(const trn_state_proof *p, const char *tensor, int section)
{
    char cfg[2 * TRN_CONFIG_ENC_MAX + 1];
    ovt_hex_encode(cfg, p->config, p->config_len);
    json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "config", cfg, "step",
                          (json_int_t)p->step, "tensor", tensor, "section", section_names[section], "digest",
                          (json_int_t)p->digest, "leaves_total", (json_int_t)p->leaves_total, "first",
                          (json_int_t)p->first, "leaves", hashes_json(p->leaves, p->count), "proof",
                          hashes_json(p->proof, p->proof_len), "roots", hashes_json(p->roots, p->ndigests),
                          "state_hash", hash_json(&p->state_hash));
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    return text;
}

static void print_hashes(const char *what, const ovt_hash *h, size_t n, size_t first)
{
    for (size_t i = 0; i < n; i++) {
        char hex[65];
        ovt_hex_encode(hex, h[i].b, 32);
        printf("%-7s %4zu  %s\n", what, first + i, hex);
    }
}

static void print_proof(const trn_state_proof *p, const trn_state *st, int section, int in_table)
{
    char hex[65];
    const trn_tensor_info *t = &st->layout.t[p->digest % st->layout.count];
    printf("step %llu, tensor %s (%s), %zu bytes in %zu leaves; leaves %zu to %zu\n",
           (unsigned long long)p->step, t->name, section_names[section], t->size * sizeof(float), p->leaves_total,
           p->first, p->first + p->count - 1);
    print_hashes("leaf", p->leaves, p->count, p->first);
    print_hashes("proof", p->proof, p->proof_len, 0);
    for (size_t d = 0; d < p->ndigests; d++) {
        ovt_hex_encode(hex, p->roots[d].b, 32);
        printf("root    %s.%s  %s\n", section_names[d / st->layout.count], st->layout.t[d % st->layout.count].name,
               hex);
    }
    ovt_hex_encode(hex, p->state_hash.b, 32);
    printf("stateHash %s (%s)\n", hex,
           in_table > 0    ? "the run's steps.bin holds it for this step"
           : in_table == 0 ? "NOT the one the run's steps.bin holds for this step"
                           : "the run has no steps.bin entry for this step");
}

/* 1: the step table holds h for the step, 0: another hash, -1: no entry. */
static int in_step_table(const char *dir, uint64_t step, const ovt_hash *h)
{
    char path[4096];
    trn_step_table t;
    if (trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin") || trn_step_table_read(&t, path))
        return -1;
    int in = step < t.count ? memcmp(t.steps[step].state_hash.b, h->b, 32) == 0 : -1;
    trn_step_table_free(&t);
    return in;
}

static int prove(const char *dir, const struct proof_args *a)
{
    char path[4096];
    trn_state *st = NULL;
    trn_state_proof p = {0};
    int rv = trn_run_path(path, sizeof path, dir, "ckpt", a->step, "ckpt");
    if (!rv)
        rv = trn_checkpoint_read(&st, path);
    const trn_tensor_info *t = rv ? NULL : trn_layout_find(&st->layout, a->tensor);
    if (!rv && !t)
        rv = ovt_fail(OVT_EINVAL, "the run's layout has no tensor %s", a->tensor);
    if (!rv)
        rv = trn_state_proof_make(&p, st, (size_t)a->section * st->layout.count + (size_t)(t - st->layout.t),
                                  a->first, a->count);
    char *text = rv || !(a->json || a->out) ? NULL : proof_text(&p, a->tensor, a->section);
    if (!rv && (a->json || a->out) && !text)
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the proof's JSON");
    if (!rv && a->out)
        rv = ovt_write_atomic(a->out, text, strlen(text), 0644);
    if (!rv && a->json)
        printf("%s\n", text);
    else if (!rv)
        print_proof(&p, st, a->section, in_step_table(dir, a->step, &p.state_hash));
    free(text);
    trn_state_proof_free(&p);
    trn_state_free(st);
    return rv ? cli_fail("state-proof") : 0;
}

/* The hashes of a JSON array of hex strings into out (at most cap). */
static int hashes_from(ovt_hash *out, size_t *n, size_t cap, const json_t *a, const char *what)
{
    *n = json_array_size(a);
    if (!json_is_array(a) || *n > cap)
        return ovt_fail(OVT_EFORMAT, "the proof's \"%s\" is not an array of at most %zu hashes", what, cap);
    for (size_t i = 0; i < *n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s || ovt_hex_decode(out[i].b, 32, s))
            return ovt_fail(OVT_EFORMAT, "the proof's \"%s\" entry %zu is not 64 hex digits", what, i);
    }
    return 0;
}

static int proof_from_json(trn_state_proof *p, json_t *o)
{
    json_int_t step, digest, total, first;
    const char *cfg, *sh;
    json_t *leaves, *proof, *roots;
    if (json_unpack(o, "{s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:s}", "config", &cfg, "step", &step, "digest",
                    &digest, "leaves_total", &total, "first", &first, "leaves", &leaves, "proof", &proof, "roots",
                    &roots, "state_hash", &sh) ||
        step < 0 || digest < 0 || total < 1 || first < 0)
        return ovt_fail(OVT_EFORMAT, "not a state proof (config, step, digest, leaves_total, first, leaves, "
                                     "proof, roots, state_hash)");
    size_t cfg_len = strlen(cfg) / 2;
    if (strlen(cfg) % 2 || cfg_len > TRN_CONFIG_ENC_MAX || ovt_hex_decode(p->config, cfg_len, cfg) ||
        ovt_hex_decode(p->state_hash.b, 32, sh))
        return ovt_fail(OVT_EFORMAT, "the proof's config or stateHash is not hex of the right length");
    p->config_len = cfg_len;
    p->step = (uint64_t)step;
    p->digest = (size_t)digest;
    p->leaves_total = (size_t)total;
    p->first = (size_t)first;
    p->count = json_array_size(leaves);
    if (p->count < 1 || p->count > p->leaves_total)
        return ovt_fail(OVT_EFORMAT, "the proof's \"leaves\" holds %zu hashes", p->count);
    p->leaves = malloc(p->count * sizeof(ovt_hash));
    if (!p->leaves)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaf hashes", p->count);
    size_t n;
    int rv = hashes_from(p->leaves, &n, p->count, leaves, "leaves");
    if (!rv)
        rv = hashes_from(p->proof, &p->proof_len, OVT_TREE_MAX_PROOF, proof, "proof");
    if (!rv)
        rv = hashes_from(p->roots, &p->ndigests, 3 * TRN_MAX_TENSORS, roots, "roots");
    return rv;
}

static int verify(const struct proof_args *a)
{
    json_error_t err;
    json_t *o = json_load_file(a->verify, 0, &err);
    trn_state_proof p = {0};
    int rv = o ? proof_from_json(&p, o) : ovt_fail(OVT_EFORMAT, "%s: %s (line %d)", a->verify, err.text, err.line);
    if (!rv)
        rv = trn_state_proof_check(&p);
    if (!rv && a->have_want && memcmp(p.state_hash.b, a->want.b, 32) != 0)
        rv = ovt_fail(OVT_EFORMAT, "the proof ends at another stateHash than --state-hash");
    if (!rv) {
        char hex[65];
        ovt_hex_encode(hex, p.state_hash.b, 32);
        printf("ok: leaves %zu to %zu of tensor %zu are part of stateHash %s at step %llu%s\n", p.first,
               p.first + p.count - 1, p.digest, hex, (unsigned long long)p.step,
               a->have_want ? " (the one given)" : "");
    }
    trn_state_proof_free(&p);
    json_decref(o);
    return rv ? cli_fail("state-proof") : 0;
}

int cmd_state_proof(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"step", required_argument, NULL, O_STEP},       {"tensor", required_argument, NULL, O_TENSOR},
        {"section", required_argument, NULL, O_SECTION}, {"leaves", required_argument, NULL, O_LEAVES},
        {"json", no_argument, NULL, O_JSON},             {"out", required_argument, NULL, O_OUT},
        {"verify", required_argument, NULL, O_VERIFY},   {"state-hash", required_argument, NULL, O_STATE_HASH},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    struct proof_args a = {0};
    int rv = cli_getopt(argc, argv, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (a.verify)
        return optind == argc ? verify(&a) : cli_usage_error("state-proof", "--verify takes no RUNDIR");
    if (optind != argc - 1 || !a.have_step || !a.tensor || !a.count)
        return cli_usage_error("state-proof", "expected RUNDIR, --step, --tensor and --leaves (or --verify FILE)");
    return prove(argv[optind], &a);
}
