/* `ovt devnet --fault bitflip-shard` on a sharded run (label devnet): the
 * trainer (gpt2-tiny, 8 steps, --shards 4) flips one bit of shard J's
 * gradient in step K = 5; the dispute ends auditor-right at step 5, and the
 * arbiter names shard J and the rank and host that computed it, which must
 * be the ones the trainer's own RUNDIR/ranks.json gives (dp_ranks_owner_in).
 * The case is the argument, so ctest runs them side by side:
 *   ranks1  the trainer in one process (J = 2: rank 0)
 *   ranks2  the trainer as `mpirun -np 2` (J = 2: rank 1); exits 77 (skip)
 *           in a build without MPI
 *   ranks2-resnet  the same with resnet-mini on MNIST
 *   errors  the usage errors of --shards, --ranks and --fault-shard
 *   false-table  an honest 4-shard run whose log 5 gives shard 2 a false
 *           gradient hash (issue 42: blame from the re-execution, not from
 *           the trainer's word): fraudulent-log at step 5, no shard named
 *           by the arbiter or in its eval.json */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "devnet_result.h"
#include "support/mpirun.h"
#include "support/proc.h"
#include "dp/ranks.h"

static char ovt[4096];

static void usage_errors(void)
{
    static const char *const cases[][12] = {
        {"--fault", "bitflip-shard", NULL},                                         /* needs --shards >= 2 */
        {"--fault", "bitflip-shard", "--shards", "3", NULL},                       /* 3 does not divide batch 4 */
        {"--fault", "bitflip-shard", "--shards", "4", "--ranks", "3", NULL},       /* R must divide S */
        {"--fault", "bitflip-shard", "--shards", "4", "--fault-shard", "4", NULL}, /* J in 0..S-1 */
        {"--fault", "bitflip", "--fault-shard", "1", NULL},                        /* only with bitflip-shard */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[16] = {ovt, "devnet"};
        int n = 2;
        for (int k = 0; cases[i][k]; k++)
            argv[n++] = (char *)cases[i][k];
        argv[n] = NULL;
        char *out = NULL;
        int st = tsup_run(argv, &out);
        CHECK_MSG(st == 2, "usage case %zu: exit %d", i, st);
        free(out);
    }
    char *help[] = {ovt, "devnet", "--help", NULL};
    char *out = NULL;
    CHECK_EQ_U64(tsup_run(help, &out), 0);
    CHECK(out && strstr(out, "bitflip-shard") && strstr(out, "--ranks") && strstr(out, "--fault-shard"));
    free(out);
}

/* Reads a whole small file (NULL if it cannot). */
static json_t *load_json(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", path, e.text);
    return j;
}

static void dispute(const char *label, const char *ranks, const char *model, const char *work)
{
    char keep[4200];
    snprintf(keep, sizeof keep, "%s/devnet", work);
    char *argv[] = {ovt,           "devnet",  "--json", "--fault", "bitflip-shard", "--shards", "4",
                    "--ranks",     (char *)ranks, "--steps", "8",  "--at",          "5",        "--keep",
                    keep,          "--timeout", "600",  "--model", (char *)model,   NULL};
    char *text = NULL;
    int st = tsup_run(argv, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    CHECK_MSG(st == 0 && j, "%s: ovt devnet exited %d: %s", label, st, text ? text : "(no output)");
    free(text);
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(j, "outcome"), "auditor-right"), "%s: outcome %s", label, str(j, "outcome"));
    CHECK(!strcmp(str(j, "wrong_party"), "trainer"));
    CHECK(json_integer_value(json_object_get(j, "step")) == 5);
    CHECK(json_is_true(json_object_get(j, "as_expected")));
    CHECK(json_integer_value(json_object_get(j, "fault_shard")) == 2);
    CHECK(json_integer_value(json_object_get(j, "shards")) == 4);

    /* who computed shard 2 of step 5, by the trainer's own record */
    char run_dir[4300];
    snprintf(run_dir, sizeof run_dir, "%s/trainer", keep);
    dp_shard_owner want;
    CHECK_MSG(dp_ranks_owner_in(&want, run_dir, 5, 2) == 0, "%s: %s/ranks.json: %s", label, run_dir, ovt_errmsg());
    CHECK_EQ_U64(want.rank, strcmp(ranks, "1") == 0 ? 0 : 1); /* rank r of R computes shards r*S/R.. */

    /* the devnet's report of what the arbiter named */
    json_t *named = json_object_get(j, "arbiter_shard");
    CHECK_MSG(json_is_object(named), "%s: the arbiter named no shard", label);
    CHECK(json_integer_value(json_object_get(named, "shard")) == 2);
    CHECK(json_integer_value(json_object_get(named, "shards")) == 4);
    CHECK(json_is_integer(json_object_get(named, "rank")) &&
          json_integer_value(json_object_get(named, "rank")) == (json_int_t)want.rank);
    CHECK_MSG(!strcmp(str(named, "host"), want.host), "%s: host %s, ranks.json says %s", label, str(named, "host"),
              want.host);

    /* the arbiter's own state: eval.json of the game */
    char eval_path[4600];
    snprintf(eval_path, sizeof eval_path, "%s/arbiter/games/%s/eval.json", keep, str(j, "run_id") + 2);
    json_t *ev = load_json(eval_path);
    json_t *sd = json_object_get(ev, "shard_differs");
    CHECK(json_integer_value(json_object_get(ev, "shards")) == 4);
    CHECK(json_integer_value(json_object_get(sd, "shard")) == 2);
    CHECK(json_integer_value(json_object_get(sd, "rank")) == (json_int_t)want.rank);
    CHECK(!strcmp(str(sd, "host"), want.host));
    CHECK_MSG(strstr(str(sd, "owner_source"), "not committed") != NULL, "%s: owner_source '%s'", label,
              str(sd, "owner_source"));
    json_decref(ev);

    /* the arbiter warm: its re-execution was prepared while the game was
     * still bisecting, before it evaluated the step */
    char log_path[4300];
    snprintf(log_path, sizeof log_path, "%s/arbiter.log", keep);
    FILE *lf = fopen(log_path, "r");
    CHECK(lf != NULL);
    char line[8192];
    long prepared = -1, evaluated = -1, n = 0;
    while (lf && fgets(line, sizeof line, lf)) {
        if (prepared < 0 && strstr(line, "\"event\":\"prepare\"") && strstr(line, "\"ready\":true"))
            prepared = n;
        if (evaluated < 0 && strstr(line, "\"event\":\"evaluate\""))
            evaluated = n;
        n++;
    }
    if (lf)
        fclose(lf);
    CHECK_MSG(prepared >= 0 && evaluated > prepared, "%s: prepared at line %ld, evaluated at %ld", label, prepared,
              evaluated);

    /* the manifest names ranks.json */
    char man_path[4600];
    snprintf(man_path, sizeof man_path, "%s/store/run/%s.json", keep, str(j, "run_id") + 2);
    json_t *man = load_json(man_path);
    CHECK(strlen(str(man, "ranks")) == 64);
    json_decref(man);
    printf("%s: auditor-right at step 5, the arbiter named shard 2, rank %u on host %s\n", label, want.rank,
           want.host);
    json_decref(j);
}

static void false_table(const char *work)
{
    char keep[4200];
    snprintf(keep, sizeof keep, "%s/devnet", work);
    char *argv[] = {ovt,      "devnet", "--json",  "--fault", "false-table", "--shards", "4",   "--fault-shard", "2",
                    "--steps", "8",     "--at",    "5",       "--keep",      keep,       "--timeout", "600", NULL};
    char *text = NULL;
    int st = tsup_run(argv, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    CHECK_MSG(st == 0 && j, "false-table: ovt devnet exited %d: %s", st, text ? text : "(no output)");
    free(text);
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(j, "outcome"), "fraudulent-log"), "false-table: outcome %s", str(j, "outcome"));
    CHECK(!strcmp(str(j, "wrong_party"), "trainer"));
    CHECK(json_integer_value(json_object_get(j, "step")) == 5);
    CHECK(json_is_true(json_object_get(j, "as_expected")));
    CHECK_MSG(!json_is_object(json_object_get(j, "arbiter_shard")), "false-table: the arbiter named a shard");
    char eval_path[4600];
    snprintf(eval_path, sizeof eval_path, "%s/arbiter/games/%s/eval.json", keep, str(j, "run_id") + 2);
    json_t *ev = load_json(eval_path);
    CHECK(!json_is_object(json_object_get(ev, "shard_differs")));
    json_decref(ev);
    printf("false-table: fraudulent-log at step 5, no shard named\n");
    json_decref(j);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_devnet_shard ranks1|ranks2|ranks2-resnet|errors|false-table\n");
        return 2;
    }
    const char *bin = getenv("OVT_BINARY_DIR");
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    char work[4096];
    snprintf(work, sizeof work, "%s/test_devnet_shard.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(work))
        return 1;
    int skip = 0;
    if (!strcmp(argv[1], "errors")) {
        CHECK_RUN(usage_errors());
    } else if (!strcmp(argv[1], "false-table")) {
        CHECK_RUN(false_table(work));
    } else if (!strcmp(argv[1], "ranks1")) {
        CHECK_RUN(dispute("ranks1", "1", "gpt2-tiny", work));
    } else if (!strcmp(argv[1], "ranks2") || !strcmp(argv[1], "ranks2-resnet")) {
        /* ranks2-resnet: the ResNet, whose shards normalise with their own
         * batch statistics (docs/decisions.md) */
        if (!tsup_mpirun_path()) {
            fprintf(stderr, "SKIP %s: this build has no MPI (OVT_MPIRUN is empty)\n", argv[1]);
            skip = 1;
        } else {
            CHECK_RUN(dispute(argv[1], "2", strcmp(argv[1], "ranks2") ? "resnet-mini" : "gpt2-tiny", work));
        }
    } else {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    char *rm[] = {"/bin/rm", "-rf", work, NULL};
    char *o = NULL;
    if (tsup_run(rm, &o) != 0)
        fprintf(stderr, "could not remove %s\n", work);
    free(o);
    if (skip)
        return check_failures ? 1 : 77;
    return check_done();
}
