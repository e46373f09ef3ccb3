/* `ovt export`: a checkpoint's parameters as a safetensors file that carries
 * its commitment, as llm.c's weight file or as llama2.c's checkpoint
 * (modelio/export.h, modelio/llama2c.h, party/model_check.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/merkle.h"
#include "chain/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "modelio/export.h"
#include "modelio/llama2c.h"
#include "party/model_check.h"
#include "trainer/snapshot.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: ovt export RUNDIR [--step K] --format safetensors|llmc|llama2c [--llama2c-version 0|1]\n"
               "                  --out FILE [--json]\n"
               "\n"
               "Writes the parameters of the run's checkpoint at step K (default: the latest) as\n"
               "float32 tensors to FILE (a temporary file, fsynced, renamed):\n"
               "  safetensors  Hugging Face GPT-2's tensor names and layouts (transformer.h.N.attn.c_attn.weight,\n"
               "               ...; Conv1D weights (in, out); the head tied to wte, not stored), so\n"
               "               GPT2LMHeadModel loads it; a Llama under LlamaForCausalLM's names\n"
               "               (model.layers.N.self_attn.q_proj.weight, ...; q and k rows in Hugging\n"
               "               Face's rotary order; lm_head only when not tied); a ResNet under\n"
               "               torchvision's names (conv1.weight, layer1.0.bn1.running_mean, ...;\n"
               "               the running statistics included, num_batches_tracked not); an MLP\n"
               "               under ovt's own names (w0, b0, ...). Its\n"
               "               metadata carries the commitment: run config, step, stateHash, the moments'\n"
               "               digests, batch and log hashes, and with a runId (receipt.json, or run.json's\n"
               "               --run-id) the root and the Merkle proof of leaf K, which `ovt verify --model\n"
               "               FILE RECEIPT` checks (docs/formats.md, \"Model export\")\n"
               "  llmc         llm.c's gpt2 weight file (float32, version 3; GPT-2 only), which\n"
               "               `ovt train --init-from` reads\n"
               "  llama2c      llama2.c's checkpoint (float32; Llama only), which `ovt train --init-from`\n"
               "               reads: version 0, the legacy file llama2.c's run.c reads (7 int32 of\n"
               "               header, the weights, the rotary tables, which ovt does not read back), or\n"
               "               version 1 (export.py's: magic \"ak42\", 256-byte header, no tables)\n"
               "\n"
               "options:\n"
               "  --step K       the step (a step with a checkpoint: 0, every --checkpoint-every, the last)\n"
               "  --format F     safetensors, llmc or llama2c\n"
               "  --llama2c-version V  0 (default) or 1, with --format llama2c\n"
               "  --out FILE     the file to write\n"
               "  --json         the result as JSON\n"
               "  -h, --help     this help\n");
}

enum { O_STEP = 256, O_FORMAT, O_OUT, O_JSON, O_L2C_VERSION };

static void report(const char *dir, const char *out, const char *format, const trn_state *st,
                   const ovt_hash *state_hash, const party_model_exported *x, bool json)
{
    char sh[67], id[67], root[67];
    chain_hash_hex(sh, state_hash);
    chain_hash_hex(id, &x->run_id);
    chain_hash_hex(root, &x->root);
    bool proof = x->has_proof;
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:b}", "run", dir, "out", out, "format", format, "step",
                              (json_int_t)st->step, "parameters", (json_int_t)st->layout.nparams, "state_hash", sh,
                              "merkle_proof", proof);
        json_object_set_new(o, "run_id", proof ? json_string(id) : json_null());
        json_object_set_new(o, "root", proof ? json_string(root) : json_null());
        char *text = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
        printf("%s\n", text ? text : "{}");
        free(text);
        return;
    }
    printf("ovt export: step %llu of %s (%zu parameters, stateHash %s) -> %s (%s)\n", (unsigned long long)st->step,
           dir, st->layout.nparams, sh, out, format);
    if (strcmp(format, "safetensors") == 0 && proof)
        printf("  with the Merkle proof of leaf %llu under root %s (runId %s)\n", (unsigned long long)st->step, root,
               id);
    else if (strcmp(format, "safetensors") == 0)
        printf("  no runId yet (the run is not committed): the file carries no Merkle proof; export again after "
               "`ovt commit` for one that `ovt verify --model` accepts\n");
}

int cmd_export(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"step", required_argument, NULL, O_STEP}, {"format", required_argument, NULL, O_FORMAT},
        {"out", required_argument, NULL, O_OUT},   {"json", no_argument, NULL, O_JSON},
        {"llama2c-version", required_argument, NULL, O_L2C_VERSION},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *format = NULL, *out = NULL;
    uint64_t step = 0, l2c_version = 0;
    bool has_step = false, json = false, has_l2c_version = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return 0;
        case O_STEP:
            if (ovt_parse_u64(&step, "--step", optarg, 0, CHAIN_MERKLE_MAX_STEPS)) return cli_usage_fail("export");
            has_step = true;
            break;
        case O_FORMAT: format = optarg; break;
        case O_OUT: out = optarg; break;
        case O_JSON: json = true; break;
        case O_L2C_VERSION:
            if (ovt_parse_u64(&l2c_version, "--llama2c-version", optarg, 0, 1)) return cli_usage_fail("export");
            has_l2c_version = true;
            break;
        default: return cli_arg_unknown("export", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("export", "expects one RUNDIR");
    size_t kind = 0;
    while (format && trn_export_format_name(kind) && strcmp(format, trn_export_format_name(kind)))
        kind++;
    if (!format || !trn_export_format_name(kind))
        return cli_usage_error("export", "--format expects safetensors, llmc or llama2c, got '%s'", format ? format : "");
    if (has_l2c_version && kind != TRN_EXPORT_LLAMA2C)
        return cli_usage_error("export", "--llama2c-version goes with --format llama2c, not %s", format);
    if (!out)
        return cli_usage_error("export", "--out FILE is required");
    const char *dir = argv[optind];
    trn_state *st = NULL;
    trn_step_table table;
    party_model_exported x = {0};
    int rv = trn_snapshot_load(&st, &table, dir, has_step, step);
    if (rv)
        return cli_fail("export");
    if (kind == TRN_EXPORT_LLMC)
        rv = trn_export_llmc(out, st);
    else if (kind == TRN_EXPORT_LLAMA2C)
        rv = trn_export_llama2c(out, st, (uint32_t)l2c_version);
    else
        rv = party_model_export(out, dir, st, &table, &x);
    if (!rv)
        report(dir, out, format, st, &table.steps[st->step].state_hash, &x, json);
    trn_step_table_free(&table);
    trn_state_free(st);
    return rv ? cli_fail("export") : 0;
}
