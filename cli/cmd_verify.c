/* `ovt verify`: a commitment receipt checked offline against its run
 * directory (party_verify, party/verify.h); the command prints each check
 * and the verdict. */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/fileio.h"
#include "party/verify.h"

static void verify_usage(FILE *f)
{
    fprintf(f, "usage: ovt verify RUNDIR[/receipt.json] [--data FILE] [--replay K] [--threads N] [--json]\n"
               "       ovt verify --model FILE RECEIPT [--json]\n"
               "\n"
               "Checks a commitment receipt offline, against the run directory it lies in (RUNDIR\n"
               "alone names its receipt.json; `ovt commit` writes it, so a run not committed has none):\n"
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

/* Where the checks go: a JSON list, and with text a line each as it is made. */
typedef struct {
    json_t *list;
    bool json;
} verify_out;

static void print_check(void *arg, const party_check *c)
{
    verify_out *v = arg;
    json_array_append_new(v->list, json_pack("{s:s, s:b, s:s}", "check", c->name, "ok", c->ok, "detail", c->detail));
    if (!v->json)
        printf("%-4s %-9s %s\n", c->ok ? "ok" : "FAIL", c->name, c->detail);
}

enum { O_DATA = 256, O_REPLAY, O_THREADS, O_JSON, O_MODEL };

struct verify_args {
    party_verify_opts o;
    verify_out v;
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct verify_args *a = ctx;
    int rv = 0;
    switch (c) {
    case O_DATA: a->o.data = arg; break;
    case O_REPLAY: rv = ovt_parse_u64(&a->o.replay, flag, arg, 0, 1000000); break;
    case O_THREADS: rv = ovt_parse_int(&a->o.threads, flag, arg, 0, 256); break;
    case O_JSON: a->v.json = true; break;
    case O_MODEL: a->o.model = arg; break;
    default: return cli_arg_unknown("verify", given);
    }
    return rv ? cli_usage_fail("verify") : 0;
}

int cmd_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},       {"replay", required_argument, NULL, O_REPLAY},
        {"threads", required_argument, NULL, O_THREADS}, {"json", no_argument, NULL, O_JSON},
        {"model", required_argument, NULL, O_MODEL},     {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    struct verify_args a = {.o = {.on_check = print_check}};
    a.o.arg = &a.v;
    int rv = cli_getopt(argc, argv, longopts, verify_usage, take, &a);
    if (rv >= 0)
        return rv;
    if (optind != argc - 1)
        return cli_usage_error("verify", "expects one receipt: RUNDIR or RUNDIR/receipt.json");
    if (a.o.model && (a.o.data || a.o.replay))
        return cli_usage_error("verify", "--model checks a file against the receipt alone; --data and --replay "
                                         "go with the run directory's checks");
    a.o.receipt = argv[optind];
    char rbuf[4096];
    struct stat sb;
    if (stat(a.o.receipt, &sb) == 0 && S_ISDIR(sb.st_mode) &&
        !ovt_path_join(rbuf, sizeof rbuf, a.o.receipt, "receipt.json"))
        a.o.receipt = rbuf; /* the receipt or its run directory */
    a.v.list = json_array();
    party_verify_result res;
    if (party_verify(&a.o, &res)) {
        json_decref(a.v.list);
        return cli_fail("verify");
    }
    if (a.v.json) {
        json_t *j = json_pack("{s:s, s:b, s:o}", "receipt", a.o.receipt, "ok", res.ok, "checks", a.v.list);
        char *text = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        printf("%s\n", text ? text : "{}");
        free(text);
        return res.ok ? 0 : 1;
    }
    json_decref(a.v.list);
    if (a.o.model)
        printf("%s: %s\n", a.o.model, res.ok ? "verified: its tensors are the parameters the receipt's root commits "
                                              "to (not checked: anything on chain, whether the training steps are right)"
                                            : "NOT verified");
    else if (!res.ok)
        printf("%s: NOT verified\n", a.o.receipt);
    else if (a.o.replay)
        printf("%s: verified: the receipt is consistent and %llu of its %llu steps, re-executed, match; not "
               "checked: the other steps, and anything on chain (what root was committed, the game)\n",
               a.o.receipt, (unsigned long long)(a.o.replay < res.steps ? a.o.replay : res.steps),
               (unsigned long long)res.steps);
    else
        printf("%s: receipt consistent (checked: the signature, runId, root, config and dataset above); NOT "
               "checked: whether any training step is right (none was re-executed: a lying trainer's receipt "
               "passes this; add --replay K or run `ovt audit`), and anything on chain\n",
               a.o.receipt);
    return res.ok ? 0 : 1;
}
