/* `ovt block`: the third level of a dispute (docs/arbiter.md, "One block
 * of one site"): a party packs one block of one site of a step with what
 * it reads and their proofs (arbiter/block_file.h), the arbiter checks the
 * package and re-executes the block (arbiter/block.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block.h"
#include "arbiter/block_chunk.h"
#include "arbiter/block_file.h"
#include "chain/narrow.h"
#include "chain/parse.h"
#include "chain/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "common/fileio.h"
#include "common/parse.h"
#include "common/tree.h"
#include "kernels/rlog.h"
#include "trainer/check.h"
#include "trainer/fault.h"
#include "trainer/rundata.h"
#include "trainer/step.h"

/* A package is at most this long (the slices of one block; a block of an
 * op that needs every row of a large batch can be long). */
#define BLOCK_FILE_MAX ((size_t)4 << 30)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt block pack RUNDIR --step K --site S --leaf L --out FILE [--chunk C] [--data FILE]\n"
            "                      [--threads N] [--inject-fault flip-output --fault-element E]\n"
            "                      [--element E]\n"
            "       ovt block chain RUNDIR --step K --site S --leaf L [--out FILE] [--data FILE] [--json]\n"
            "                      [--threads N] [--inject-fault flip-output --fault-element E]\n"
            "       ovt block check FILE [--trace-root HEX] [--config-hash HEX] [--chain-root HEX]\n"
            "                      [--trainer-leaf HEX] [--auditor-leaf HEX] [--trainer-node HEX] [--auditor-node HEX]\n"
            "                      [--log LOGFILE] [--threads N] [--json]\n"
            "\n"
            "The third level of a dispute (docs/arbiter.md, \"One block of one site\"): once step K,\n"
            "site S of its trace and leaf L of S's output (16384 elements) are fixed, a party packs\n"
            "what that block reads (slices of earlier sites' outputs, of state tensors and of the\n"
            "batch, each with its Merkle proof; the site's record and the records it reads from with\n"
            "their proofs against the trace root; the trainer's log entries for the rows computed)\n"
            "and its claimed leaf, and the arbiter re-executes only that block (docs/formats.md,\n"
            "\"Block package\").\n"
            "\n"
            "pack: re-executes step K of RUNDIR from its checkpoint and log with the trace and\n"
            "writes the package to FILE (temporary file, fsync, rename).\n"
            "  --inject-fault flip-output --fault-element E   testing only: the package of a party\n"
            "                whose step K flipped bit 22 of element E of site S (a deep fault)\n"
            "  --element E   an element package: element E (0..16383) of leaf L alone, with only the\n"
            "                rows it needs (level 4 of a one-value-per-row site, docs/contract.md)\n"
            "check: verifies every proof, re-executes the block and says which claim its leaf\n"
            "matches: the package's own, and --trainer-leaf / --auditor-leaf (the parties' leaf\n"
            "hashes from the chain) when given; --trace-root: the agreed trace root the package\n"
            "must be bound to; --config-hash: the run's configHash its run config must hash to;\n"
            "--log: the trainer's rounding log of step K (the run directory's logs/ file, whose\n"
            "SHA-256 is logHash_K): the block rounds with its entries of the site over the rows\n"
            "computed, not the package's, and the check says whether the package's differed.\n"
            "An element package: the recomputed element's node, SHA-256(0x00 || value, 4 bytes LE),\n"
            "compared with --trainer-node / --auditor-node (the two element leaves on chain).\n"
            "\n"
            "The fourth level (docs/arbiter.md, \"The reduction's chunks\"), for a site that sums over\n"
            "the batch (matmul.bwd.dweight, conv.bwd.dweight, matmul.bwd.dbias, bias.bwd) or over\n"
            "every gradient (gradnorm.sumsq): its leaf's canonical chain, one leaf per chunk of 128\n"
            "rows (the exact partial sums) and the output leaf last.\n"
            "chain: prints the chain's leaf count (C + 1) and root; --out writes its leaves, one hex\n"
            "hash a line; its last leaf is the party's own output leaf (with --inject-fault, the\n"
            "faulty party's), and it says whether its exact sums round to it.\n"
            "pack --chunk C: the package of chain leaf C: the chunk's rows (or, for the last leaf,\n"
            "the old gradient and the log entries), the state before it with its path in the packing\n"
            "party's chain. check of such a package: its chain must have the record's count, its\n"
            "state's path must climb to its chain root (--chain-root: the root the party posted),\n"
            "and --trainer-node / --auditor-node (else the -leaf flags) are the parties' chain nodes\n"
            "at C.\n"
            "Status 1 when the package is refused (a proof fails, an input is missing, a slice\n"
            "was changed, another trace root or run config) or the block cannot be computed.\n");
}

enum {
    O_STEP = 256, O_SITE, O_LEAF, O_OUT, O_DATA, O_THREADS, O_FAULT, O_FAULT_ELEMENT, O_TRACE_ROOT,
    O_TRAINER_LEAF, O_AUDITOR_LEAF, O_JSON, O_CONFIG_HASH, O_LOG,
    O_ELEMENT, O_TRAINER_NODE, O_AUDITOR_NODE, O_CHUNK, O_CHAIN_ROOT
};

struct block_args {
    uint64_t step, site, leaf, element, chunk;
    bool have_step, have_site, have_leaf, have_element, json, have_root, have_trainer, have_auditor, have_config;
    bool have_chunk, have_chain_root;
    const char *out, *data, *fault, *log;
    int threads;
    ovt_hash root, trainer, auditor, config, chain_root;
    uint64_t elem; /* --element: an element package; --trainer-node, --auditor-node: its two element leaves
                      (or a chunk package's two chain nodes) */
    bool have_elem, have_tnode, have_anode;
    ovt_hash tnode, anode;
};

static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct block_args *a = ctx;
    int rv = 0;
    switch (c) {
    case O_STEP: rv = ovt_parse_u64(&a->step, flag, arg, 1, UINT32_MAX); a->have_step = true; break;
    case O_SITE: rv = ovt_parse_u64(&a->site, flag, arg, 0, UINT32_MAX); a->have_site = true; break;
    case O_LEAF: rv = ovt_parse_u64(&a->leaf, flag, arg, 0, UINT64_MAX / 2); a->have_leaf = true; break;
    case O_FAULT_ELEMENT: rv = ovt_parse_u64(&a->element, flag, arg, 0, UINT64_MAX / 2); a->have_element = true; break;
    case O_OUT: a->out = arg; break;
    case O_DATA: a->data = arg; break;
    case O_LOG: a->log = arg; break;
    case O_FAULT: a->fault = arg; break;
    case O_THREADS: rv = ovt_parse_int(&a->threads, flag, arg, 0, 256); break;
    case O_TRACE_ROOT: rv = chain_parse_hash(&a->root, flag, arg); a->have_root = true; break;
    case O_TRAINER_LEAF: rv = chain_parse_hash(&a->trainer, flag, arg); a->have_trainer = true; break;
    case O_AUDITOR_LEAF: rv = chain_parse_hash(&a->auditor, flag, arg); a->have_auditor = true; break;
    case O_CONFIG_HASH: rv = chain_parse_hash(&a->config, flag, arg); a->have_config = true; break;
    case O_CHUNK: rv = ovt_parse_u64(&a->chunk, flag, arg, 0, UINT64_MAX / 2); a->have_chunk = true; break;
    case O_CHAIN_ROOT: rv = chain_parse_hash(&a->chain_root, flag, arg); a->have_chain_root = true; break;
    case O_JSON: a->json = true; break;
    case O_ELEMENT:
        rv = ovt_parse_u64(&a->elem, flag, arg, 0, CHAIN_NARROW_LEAF_ELEMENTS - 1);
        a->have_elem = true;
        break;
    case O_TRAINER_NODE: rv = chain_parse_hash(&a->tnode, flag, arg); a->have_tnode = true; break;
    case O_AUDITOR_NODE: rv = chain_parse_hash(&a->anode, flag, arg); a->have_anode = true; break;
    default: return cli_arg_unknown("block", given);
    }
    return rv ? cli_usage_fail("block") : 0;
}

/* ---- pack ---- */

/* Step K of dir re-executed with trace t (fresh), under the fault when
 * there is one; 0 or why it cannot serve a package. */
static int traced_step(const char *dir, const struct block_args *a, const trn_fault *fault, krn_trace *t,
                       ovt_hash *root)
{
    trn_step_trace tr = {.backend = KRN_BACKEND_CPU, .fault = fault, .trace = t};
    trn_step_check s;
    int rv = trn_step_check_traced(&s, dir, a->data, a->step, a->threads, &tr);
    if (!rv && s.verdict == TRN_CHECK_FRAUD)
        rv = ovt_fail(OVT_EFRAUD, "step %llu: %s", (unsigned long long)a->step, s.fraud);
    if (!rv && tr.trace_rc)
        rv = ovt_fail(tr.trace_rc, "the trace of step %llu failed: %s", (unsigned long long)a->step,
                      krn_trace_error(t));
    *root = tr.root;
    return rv;
}

/* Two passes over step K: the first finds the site's record and what its
 * block reads, the second keeps only those outputs (not the whole step's)
 * into *t, with the step's trace root, run config and log. */
static int step_kept(const char *dir, const struct block_args *a, trn_run_config *rc, krn_trace **t, ovt_hash *root,
                     krn_rlog *log)
{
    ovt_hash config_hash, root2;
    trn_fault fault = {.kind = TRN_FAULT_FLIP_OUTPUT, .step = a->step, .site = (uint32_t)a->site,
                       .element = a->element};
    const trn_fault *f = a->fault ? &fault : NULL;
    krn_trace *first = NULL;
    char path[4096];
    *t = NULL;
    int rv = 0;
    if (!(rv = trn_run_load_config(dir, rc, &config_hash)) && !(rv = krn_trace_new(&first, false)))
        rv = traced_step(dir, a, f, first, root);
    if (!rv && a->site >= krn_trace_count(first))
        rv = ovt_fail(OVT_EINVAL, "--site %llu: step %llu has %zu sites (0..%zu)", (unsigned long long)a->site,
                      (unsigned long long)a->step, krn_trace_count(first), krn_trace_count(first) - 1);
    if (!rv && !(rv = krn_trace_new(t, false)) &&
        !(rv = arb_block_keep_for(*t, first, (size_t)a->site, rc, a->step, a->leaf)))
        rv = traced_step(dir, a, f, *t, &root2);
    if (!rv && memcmp(root->b, root2.b, 32) != 0)
        rv = ovt_fail(OVT_EINVAL, "step %llu re-executed twice gave two traces: not a deterministic step",
                      (unsigned long long)a->step);
    if (!rv && !(rv = trn_run_path(path, sizeof path, dir, "logs", a->step, "rlog")))
        rv = krn_rlog_read_file(log, path);
    krn_trace_free(first);
    if (rv) {
        krn_trace_free(*t);
        *t = NULL;
    }
    return rv;
}

static int pack(const char *dir, const struct block_args *a)
{
    trn_run_config rc;
    ovt_hash root;
    krn_trace *t = NULL;
    krn_rlog *log = krn_rlog_new();
    uint8_t *buf = NULL;
    size_t len = 0;
    int rv = log ? step_kept(dir, a, &rc, &t, &root, log) : ovt_fail(OVT_ENOMEM, "out of memory");
    if (!rv)
        rv = a->have_chunk  ? arb_chunk_package_make(&buf, &len, &rc, t, &root, a->step, (size_t)a->site, a->leaf,
                                                     log, a->chunk)
             : a->have_elem ? arb_block_element_package_make(&buf, &len, &rc, t, &root, a->step, (size_t)a->site,
                                                             a->leaf, log, a->elem)
                            : arb_block_package_make(&buf, &len, &rc, t, &root, a->step, (size_t)a->site, a->leaf, log);
    if (!rv)
        rv = ovt_write_atomic(a->out, buf, len, 0644);
    if (!rv) {
        const krn_trace_record *r = krn_trace_record_at(t, (size_t)a->site);
        char hex[67], chunk[48] = "";
        chain_hash_hex(hex, &root);
        if (a->have_chunk)
            snprintf(chunk, sizeof chunk, ", chunk %llu", (unsigned long long)a->chunk);
        printf("block package %s: step %llu, site %llu (%s, %llu elements), leaf %llu of %zu%s; %zu bytes; trace "
               "root %s\n",
               a->out, (unsigned long long)a->step, (unsigned long long)a->site, r->op, (unsigned long long)r->n,
               (unsigned long long)a->leaf, ovt_tree_leaves(r->n * 4), chunk, len, hex);
        if (a->have_elem)
            printf("  element %llu of the leaf (output element %llu) alone\n", (unsigned long long)a->elem,
                   (unsigned long long)(a->leaf * CHAIN_NARROW_LEAF_ELEMENTS + a->elem));
    }
    free(buf);
    krn_rlog_free(log);
    krn_trace_free(t);
    return rv ? cli_fail("block pack") : 0;
}

/* Prints o as one line of JSON (and frees it), with "verdict" (null when
 * there is none) when has_verdict. */
static void print_json(json_t *o, bool has_verdict, const char *verdict)
{
    if (has_verdict)
        json_object_set_new(o, "verdict", verdict ? json_string(verdict) : json_null());
    char *text = json_dumps(o, 0);
    json_decref(o);
    printf("%s\n", text ? text : "{}");
    free(text);
}

/* ---- chain ---- */

/* The leaves, one hex hash a line, to path (temporary file, fsync, rename). */
static int write_leaves(const char *path, const arb_chunk_chain *ch)
{
    size_t n = ch->info.chunks + 1;
    char *text = malloc(n * 67 + 1);
    if (text == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for the chain's leaves");
    for (size_t k = 0; k < n; k++) {
        chain_hash_hex(text + 67 * k, &ch->leaves[k]);
        text[67 * k + 66] = '\n';
    }
    int rv = ovt_write_atomic(path, text, n * 67, 0644);
    free(text);
    return rv;
}

static void print_chain(const struct block_args *a, const krn_trace_record *r, const arb_chunk_chain *ch,
                        bool differs)
{
    char root[67], last[67];
    chain_hash_hex(root, &ch->root);
    chain_hash_hex(last, &ch->leaves[ch->info.chunks]);
    if (a->json) {
        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:b}", "step", (json_int_t)a->step,
                              "site", (json_int_t)a->site, "op", r->op, "leaf", (json_int_t)a->leaf, "rows",
                              (json_int_t)ch->info.rows, "chunks", (json_int_t)ch->info.chunks, "leaves",
                              (json_int_t)(ch->info.chunks + 1), "chain_root", root, "output_leaf", last,
                              "state_bytes", (json_int_t)ch->info.partial_len, "output_recomputed",
                              !differs);
        print_json(o, false, NULL);
        return;
    }
    printf("step %llu, site %llu (%s), leaf %llu: %llu rows in %llu chunks, a chain of %llu leaves (states of %zu "
           "bytes)\n",
           (unsigned long long)a->step, (unsigned long long)a->site, r->op, (unsigned long long)a->leaf,
           (unsigned long long)ch->info.rows, (unsigned long long)ch->info.chunks,
           (unsigned long long)(ch->info.chunks + 1), ch->info.partial_len);
    printf("  chain root  %s\n  output leaf %s (its last leaf)%s\n", root, last,
           differs ? "; NOT the leaf its exact sums round to: this party's output is wrong" : "");
}

static int chain(const char *dir, const struct block_args *a)
{
    trn_run_config rc;
    ovt_hash root;
    krn_trace *t = NULL;
    krn_rlog *log = krn_rlog_new();
    arb_block_task task = {.config = &rc, .step = a->step, .threads = a->threads};
    arb_chunk_chain ch;
    bool differs = false;
    memset(&ch, 0, sizeof ch);
    int rv = log ? step_kept(dir, a, &rc, &t, &root, log) : ovt_fail(OVT_ENOMEM, "out of memory");
    if (!rv)
        rv = arb_chunk_chain_from_trace(&ch, &task, t, (size_t)a->site, log, a->leaf, &differs);
    if (!rv && a->out)
        rv = write_leaves(a->out, &ch);
    if (!rv)
        print_chain(a, krn_trace_record_at(t, (size_t)a->site), &ch, differs);
    arb_chunk_chain_free(&ch);
    krn_rlog_free(log);
    krn_trace_free(t);
    return rv ? cli_fail("block chain") : 0;
}

/* ---- check ---- */

/* The verdict on a recomputed leaf (or chain node) given the parties'; NULL
 * without them. */
static const char *whose(const ovt_hash *leaf, const struct block_args *a)
{
    bool have_t = a->have_tnode || a->have_trainer, have_u = a->have_anode || a->have_auditor;
    const ovt_hash *th = a->have_tnode ? &a->tnode : &a->trainer, *uh = a->have_anode ? &a->anode : &a->auditor;
    bool t = have_t && !memcmp(leaf->b, th->b, 32);
    bool u = have_u && !memcmp(leaf->b, uh->b, 32);
    if (!have_t && !have_u)
        return NULL;
    return t ? "trainer-right" : u ? "auditor-right" : "neither";
}

/* What the block rounded with: the package's entries (no --log), the
 * log's equal to them, or the log's in place of different ones. */
typedef enum { ENTRIES_PACKAGE, ENTRIES_LOG_SAME, ENTRIES_LOG_REPLACED } entries_from;

static void print_check(const arb_block_package *p, const arb_block_result *r, const struct block_args *a,
                        entries_from from)
{
    static const char *const from_name[] = {"package", "log", "log-replaced"};
    const arb_block_task *t = &p->task;
    char leaf[67], claim[67], root[67];
    chain_hash_hex(leaf, &r->leaf);
    chain_hash_hex(claim, &p->claim);
    chain_hash_hex(root, &p->trace_root);
    bool claim_ok = !memcmp(r->leaf.b, p->claim.b, 32);
    const char *verdict = whose(&r->leaf, a);
    if (a->json) {
        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:I, s:s, s:s, s:b, s:s, s:I, s:I, s:I, s:b, s:I, s:I}", "step",
                              (json_int_t)t->step, "site", (json_int_t)t->site, "op", t->op, "n", (json_int_t)t->n,
                              "leaf", (json_int_t)t->leaf, "recomputed_leaf", leaf, "claimed_leaf", claim,
                              "claim_matches", claim_ok, "trace_root", root, "rows", (json_int_t)r->plan.rows,
                              "row_lo", (json_int_t)r->plan.row_lo, "row_hi", (json_int_t)r->plan.row_hi,
                              "whole_rows", r->plan.whole, "slices", (json_int_t)t->nslices, "entries",
                              (json_int_t)t->nentries);
        json_object_set_new(o, "entries_from", json_string(from_name[from]));
        print_json(o, true, verdict);
        return;
    }
    printf("step %llu, site %u (%s), leaf %llu: re-executed rows %llu..%llu of %llu%s from %zu proven slices and "
           "%zu log entries\n",
           (unsigned long long)t->step, t->site, t->op, (unsigned long long)t->leaf,
           (unsigned long long)r->plan.row_lo, (unsigned long long)r->plan.row_hi, (unsigned long long)r->plan.rows,
           r->plan.whole ? " (the op needs every row)" : "", t->nslices, t->nentries);
    if (from == ENTRIES_LOG_REPLACED)
        printf("  the package's log entries differ from the trainer's log: replaced by the log's\n");
    else if (from == ENTRIES_LOG_SAME)
        printf("  the package's log entries are the trainer's log's\n");
    else
        printf("  log entries as the package gives them (not checked: no --log)\n");
    printf("  recomputed leaf %s\n", leaf);
    printf("  package's claim %s  %s\n", claim, claim_ok ? "matches" : "DIFFERS: the packing party's block is wrong");
    printf("  trace root      %s\n", root);
    if (verdict)
        printf("verdict: %s\n", verdict);
}

/* The package's entries replaced by the trainer's log file's (--log). */
static int entries_of_log(arb_block_package *p, const char *path, entries_from *from)
{
    krn_rlog *log = krn_rlog_new();
    bool differed = false;
    int rv = log ? krn_rlog_read_file(log, path) : ovt_fail(OVT_ENOMEM, "out of memory");
    if (!rv && (rv = arb_block_entries_from_log(&p->task, &p->own, log, &differed)) < 0)
        rv = ovt_fail_wrap(rv, "--log %s", path);
    krn_rlog_free(log);
    *from = differed ? ENTRIES_LOG_REPLACED : ENTRIES_LOG_SAME;
    return rv;
}

/* An element package's result: the element's value and node, and whose
 * element leaf on chain it is. */
static void print_element_check(const arb_block_package *p, const arb_block_result *r, const struct block_args *a)
{
    const arb_block_task *t = &p->task;
    ovt_hash node;
    chain_narrow_element_leaves(&node, &r->values[0], 1);
    char hex[67], root[67];
    chain_hash_hex(hex, &node);
    chain_hash_hex(root, &p->trace_root);
    uint32_t bits;
    memcpy(&bits, &r->values[0], 4);
    bool tr = a->have_tnode && !memcmp(node.b, a->tnode.b, 32), au = a->have_anode && !memcmp(node.b, a->anode.b, 32);
    const char *verdict = !a->have_tnode && !a->have_anode ? NULL : tr ? "trainer-right" : au ? "auditor-right"
                                                                                              : "neither";
    uint64_t e = t->span_first - t->leaf * CHAIN_NARROW_LEAF_ELEMENTS;
    if (a->json) {
        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:f, s:I, s:s, s:s, s:I, s:I, s:I, s:I}", "step",
                              (json_int_t)t->step, "site", (json_int_t)t->site, "op", t->op, "n", (json_int_t)t->n,
                              "leaf", (json_int_t)t->leaf, "element", (json_int_t)e, "output_element",
                              (json_int_t)t->span_first, "value", (double)r->values[0], "value_bits",
                              (json_int_t)bits, "element_node", hex, "trace_root", root, "row_lo",
                              (json_int_t)r->plan.row_lo, "row_hi", (json_int_t)r->plan.row_hi, "slices",
                              (json_int_t)t->nslices, "entries", (json_int_t)t->nentries);
        print_json(o, true, verdict);
        return;
    }
    printf("step %llu, site %u (%s), leaf %llu, element %llu (output element %llu): re-executed rows %llu..%llu of "
           "%llu from %zu proven slices and %zu log entries\n",
           (unsigned long long)t->step, t->site, t->op, (unsigned long long)t->leaf, (unsigned long long)e,
           (unsigned long long)t->span_first, (unsigned long long)r->plan.row_lo, (unsigned long long)r->plan.row_hi,
           (unsigned long long)r->plan.rows, t->nslices, t->nentries);
    printf("  value           %.9g (bits 0x%08x)\n", (double)r->values[0], bits);
    printf("  element node    %s\n", hex);
    printf("  trace root      %s\n", root);
    if (verdict)
        printf("verdict: %s\n", verdict);
}

static void print_chunk(const arb_block_package *p, const ovt_hash *leaf, const char *verdict, bool json)
{
    const arb_block_task *t = &p->task;
    const arb_chunk_part *ck = &p->chunk;
    char node[67], claim[67], root[67], troot[67];
    chain_hash_hex(node, leaf);
    chain_hash_hex(claim, &ck->node);
    chain_hash_hex(root, &ck->root);
    chain_hash_hex(troot, &p->trace_root);
    bool claim_ok = !memcmp(leaf->b, ck->node.b, 32);
    if (json) {
        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:b, s:s, s:s, s:I, s:I}", "step",
                              (json_int_t)t->step, "site", (json_int_t)t->site, "op", t->op, "n", (json_int_t)t->n,
                              "leaf", (json_int_t)t->leaf, "chunk", (json_int_t)ck->chunk, "chain_leaves",
                              (json_int_t)ck->leaves, "recomputed_node", node, "claimed_node", claim,
                              "claim_matches", claim_ok, "chain_root", root, "trace_root", troot, "slices",
                              (json_int_t)t->nslices, "entries", (json_int_t)t->nentries);
        print_json(o, true, verdict);
        return;
    }
    printf("step %llu, site %u (%s), leaf %llu, chunk %llu of a chain of %llu leaves: %s from %zu proven slices%s "
           "and the state before it\n",
           (unsigned long long)t->step, t->site, t->op, (unsigned long long)t->leaf, (unsigned long long)ck->chunk,
           (unsigned long long)ck->leaves, ck->chunk + 1 == ck->leaves ? "the output leaf" : "the exact sums",
           t->nslices, ck->chunk + 1 == ck->leaves ? " and the leaf's log entries" : "");
    printf("  recomputed node %s\n", node);
    printf("  package's node  %s  %s\n", claim, claim_ok ? "matches" : "DIFFERS: the packing party's chain is wrong");
    printf("  chain root      %s\n  trace root      %s\n", root, troot);
    if (verdict)
        printf("verdict: %s\n", verdict);
}

/* A chunk package (version 2): its chain root against --chain-root, then
 * chain leaf `chunk` recomputed. */
static int check_chunk(const char *file, const arb_block_package *p, const struct block_args *a)
{
    if (a->have_chain_root && memcmp(a->chain_root.b, p->chunk.root.b, 32) != 0) {
        char have[67];
        chain_hash_hex(have, &p->chunk.root);
        return ovt_fail(OVT_EFRAUD, "%s: its state's path is in a chain of root %s, not the one --chain-root names: "
                                    "refused",
                        file, have);
    }
    ovt_hash leaf;
    int rv = arb_chunk_package_run(p, &leaf, NULL);
    if (rv < 0)
        return ovt_fail_wrap(rv, "%s: refused", file);
    print_chunk(p, &leaf, whose(&leaf, a), a->json);
    return 0;
}

static int check(const char *file, const struct block_args *a)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    arb_block_package p;
    arb_block_result r;
    int rv = ovt_read_file(file, &buf, &len, BLOCK_FILE_MAX);
    if (!rv && (rv = arb_block_package_read(&p, buf, len)) < 0)
        rv = ovt_fail_wrap(rv, "%s", file);
    free(buf);
    if (rv)
        return cli_fail("block check");
    p.task.threads = a->threads;
    if (a->have_root && memcmp(a->root.b, p.trace_root.b, 32) != 0) {
        char have[67];
        chain_hash_hex(have, &p.trace_root);
        rv = ovt_fail(OVT_EFRAUD, "%s is bound to trace root %s, not the agreed one given by --trace-root", file,
                      have);
    }
    ovt_hash config_hash;
    trn_config_hash(&config_hash, &p.config);
    if (!rv && a->have_config && memcmp(a->config.b, config_hash.b, 32) != 0)
        rv = ovt_fail(OVT_EFRAUD, "%s carries another run config than the one --config-hash names", file);
    entries_from from = ENTRIES_PACKAGE;
    if (!rv && p.version != ARB_BLOCK_VERSION_CHUNK && p.task.span_count == 0 && (a->have_tnode || a->have_anode))
        rv = ovt_fail(OVT_EINVAL, "%s is a leaf package: --trainer-node / --auditor-node compare an element "
                                  "package's element or a chunk package's chain nodes (use --trainer-leaf / "
                                  "--auditor-leaf)", file);
    if (!rv && a->log)
        rv = entries_of_log(&p, a->log, &from);
    if (!rv && p.version == ARB_BLOCK_VERSION_CHUNK)
        rv = check_chunk(file, &p, a);
    else if (!rv && (rv = arb_block_run(&p.task, &r)) < 0)
        rv = ovt_fail_wrap(rv, "%s: refused", file);
    else if (!rv && p.task.span_count == 1) {
        print_element_check(&p, &r, a);
        arb_block_result_free(&r);
    } else if (!rv) {
        print_check(&p, &r, a, from);
        arb_block_result_free(&r);
    }
    arb_block_package_free(&p);
    return rv ? cli_fail("block check") : 0;
}

int cmd_block(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"step", required_argument, NULL, O_STEP},
        {"site", required_argument, NULL, O_SITE},
        {"leaf", required_argument, NULL, O_LEAF},
        {"out", required_argument, NULL, O_OUT},
        {"data", required_argument, NULL, O_DATA},
        {"threads", required_argument, NULL, O_THREADS},
        {"inject-fault", required_argument, NULL, O_FAULT},
        {"fault-element", required_argument, NULL, O_FAULT_ELEMENT},
        {"trace-root", required_argument, NULL, O_TRACE_ROOT},
        {"config-hash", required_argument, NULL, O_CONFIG_HASH},
        {"trainer-leaf", required_argument, NULL, O_TRAINER_LEAF},
        {"auditor-leaf", required_argument, NULL, O_AUDITOR_LEAF},
        {"chunk", required_argument, NULL, O_CHUNK},
        {"chain-root", required_argument, NULL, O_CHAIN_ROOT},
        {"json", no_argument, NULL, O_JSON},
        {"log", required_argument, NULL, O_LOG},
        {"element", required_argument, NULL, O_ELEMENT},
        {"trainer-node", required_argument, NULL, O_TRAINER_NODE},
        {"auditor-node", required_argument, NULL, O_AUDITOR_NODE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    if (argc < 2 || (strcmp(argv[1], "pack") && strcmp(argv[1], "check") && strcmp(argv[1], "chain"))) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
            usage(stdout);
            return 0;
        }
        return cli_usage_error("block", "expected the subcommand 'pack', 'chain' or 'check'");
    }
    bool is_pack = !strcmp(argv[1], "pack"), is_chain = !strcmp(argv[1], "chain");
    struct block_args a = {0};
    int rv = cli_getopt(argc - 1, argv + 1, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (optind + 1 >= argc)
        return cli_usage_error("block", is_pack || is_chain ? "pack and chain need RUNDIR" : "check needs FILE");
    const char *operand = argv[1 + optind];
    optind++;
    if (cli_arg_none_left("block", argc - 1, argv + 1))
        return 2;
    if (is_chain) {
        if (!a.have_step || !a.have_site || !a.have_leaf || a.have_chunk)
            return cli_usage_error("block", "chain needs --step, --site and --leaf (and takes --out, --data, "
                                            "--threads, --json, --inject-fault)");
        if (a.fault && (strcmp(a.fault, "flip-output") || !a.have_element))
            return cli_usage_error("block", "--inject-fault takes flip-output, with --fault-element E");
        return chain(operand, &a);
    }
    if (is_pack) {
        if (!a.have_step || !a.have_site || !a.have_leaf || !a.out)
            return cli_usage_error("block", "pack needs --step, --site, --leaf and --out");
        if (a.fault && (strcmp(a.fault, "flip-output") || !a.have_element))
            return cli_usage_error("block", "--inject-fault takes flip-output, with --fault-element E");
        if (a.log)
            return cli_usage_error("block", "--log is check's: pack reads step K's log from RUNDIR");
        return pack(operand, &a);
    }
    if (a.out || a.have_step || a.have_site || a.have_leaf || a.fault || a.have_elem || a.have_chunk)
        return cli_usage_error("block", "check takes FILE and --trace-root, --config-hash, --chain-root, "
                                        "--trainer-leaf, --auditor-leaf, --trainer-node, --auditor-node, --log, "
                                        "--threads, --json");
    return check(operand, &a);
}
