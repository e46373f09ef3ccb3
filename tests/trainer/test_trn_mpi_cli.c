/* `mpirun ovt train` through the built binary (cli/cmd_train.c, trainer/loop.c with
 * dp/mpi.c): one rank under mpirun writes the same run directory,
 * byte for byte (steps.bin, every log, the last checkpoint), as a run without
 * mpirun; a run of S = 4 shards on R = 1, 2 and 4 processes writes the
 * one-process run's steps.bin, logs and checkpoints byte for byte (only rank 0
 * writing), and so does one resumed with another R; a bit flipped in shard 3's
 * gradient on R = 2 is named by `ovt step` with its rank (1); a rank killed
 * mid-run ends the job naming it, and --resume on another R finishes the run
 * byte for byte; a hung rank is named within the rank timeout; R that does not
 * divide S is refused; a failure on rank 0 stops both ranks with rank 0's
 * message; --rank-timeout is checked and documented. Skipped (77) without
 * MPI. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "support/mpirun.h"
#include "dp/dp.h"
#include "dp/ranks.h"
#include "support/cli_fixture.h"

static const char *flags = "--model gpt2-tiny --steps 3 --batch 4 --seq 16 --lr 0.003 --every 0 --threads 1";

static int same_file(const char *a, const char *b)
{
    uint8_t *x = NULL, *y = NULL;
    size_t xl = 0, yl = 0;
    int same = ovt_read_file(a, &x, &xl, 1 << 26) == 0 && ovt_read_file(b, &y, &yl, 1 << 26) == 0 && xl == yl &&
               memcmp(x, y, xl) == 0;
    if (!same)
        fprintf(stderr, "%s and %s differ\n", a, b);
    free(x);
    free(y);
    return same;
}

/* The files of a sharded run that must be the same bytes whatever the
 * process count. */
static const char *sfiles[] = {"steps.bin", "config.bin", "logs/step-00000001.rlog", "logs/step-00000002.rlog",
                               "logs/step-00000003.rlog", "ckpt/step-00000003.ckpt"};

/* Whether run directory dir/y holds dir/x's files, byte for byte. */
static int same_run(const char *x, const char *y)
{
    char a[512], b[512];
    int same = 1;
    for (size_t i = 0; i < sizeof sfiles / sizeof sfiles[0]; i++) {
        snprintf(a, sizeof a, "%s/%s/%s", dir, x, sfiles[i]);
        snprintf(b, sizeof b, "%s/%s/%s", dir, y, sfiles[i]);
        same &= same_file(a, b);
    }
    return same;
}

/* Runs `mpirun -np np ovt train FLAGS --data DATA EXTRA`; the output in *out. */
static int mpi_train(int np, const char *data, const char *extra, char **out)
{
    char line[2048];
    snprintf(line, sizeof line, "%s --data %s %s", flags, data, extra);
    char *argv[64];
    int n = 0;
    argv[n++] = ovt;
    argv[n++] = "train";
    for (char *tok = strtok(line, " "); tok != NULL && n < 63; tok = strtok(NULL, " "))
        argv[n++] = tok;
    argv[n] = NULL;
    return tsup_mpirun(np, NULL, argv, out);
}

int main(void)
{
    if (!dp_available() || tsup_mpirun_path() == NULL) {
        printf("skipped: this build has no MPI (install libopenmpi-dev, scripts/setup.sh)\n");
        return 77;
    }
    if (cli_setup("trn-mpi"))
        return 1;
    char text[256], data[256], a[512], b[512], extra[512];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(data, sizeof data, "%s/tokens.bin", dir);
    FILE *f = fopen(text, "w");
    if (f == NULL)
        return 1;
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d: the quick brown fox jumps over the lazy dog %d times.\n", i, i * 7 % 13);
    fclose(f);
    CHECK(run_ovt("data text %s --out %s", text, data) == 0);

    /* one rank under mpirun = no mpirun, byte for byte */
    CHECK(run_ovt("train %s --data %s --out %s/one", flags, data, dir) == 0);
    char *out = NULL;
    snprintf(extra, sizeof extra, "--out %s/r1", dir);
    CHECK(mpi_train(1, data, extra, &out) == 0);
    CHECK(out != NULL && strstr(out, "1 processes (mpirun), this one rank 0") != NULL);
    free(out);
    const char *files[] = {"steps.bin", "config.bin", "logs/step-00000001.rlog", "logs/step-00000002.rlog",
                           "logs/step-00000003.rlog", "ckpt/step-00000003.ckpt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(a, sizeof a, "%s/one/%s", dir, files[i]);
        snprintf(b, sizeof b, "%s/r1/%s", dir, files[i]);
        CHECK_MSG(same_file(a, b), "%s", files[i]);
    }

    /* S = 4 shards: one process, then R = 1, 2, 4 processes, byte for byte */
    CHECK(run_ovt("train %s --shards 4 --data %s --out %s/s4", flags, data, dir) == 0);
    for (int R = 1; R <= 4; R *= 2) {
        snprintf(extra, sizeof extra, "--shards 4 --out %s/s4-r%d", dir, R);
        CHECK_MSG(mpi_train(R, data, extra, &out) == 0, "R = %d: %s", R, out ? out : "");
        free(out);
        snprintf(a, sizeof a, "s4-r%d", R);
        CHECK_MSG(same_run("s4", a), "R = %d", R);
    }
    /* ranks.json: R = 4 put shard 3 on rank 3 */
    dp_shard_owner owner;
    snprintf(a, sizeof a, "%s/s4-r4", dir);
    CHECK(dp_ranks_owner_in(&owner, a, 2, 3) == 0 && owner.rank == 3);

    /* a resumed run on another R: 2 steps on R = 2, then step 3 on R = 4 */
    {
        char line[1024];
        snprintf(line, sizeof line, "--shards 4 --checkpoint-every 1 --out %s/s4-resume", dir);
        /* a run that stopped after step 2 (its last checkpoint): 3 steps
         * on R = 2 with step 3's checkpoint removed; --resume then does step
         * 3 again, on R = 4 */
        CHECK(mpi_train(2, data, line, &out) == 0);
        free(out);
        CHECK(run_ovt("rlog %s/s4-resume/logs/step-00000003.rlog", dir) == 0);
        char rm[1024];
        snprintf(rm, sizeof rm, "rm -f %s/s4-resume/ckpt/step-00000003.ckpt", dir);
        CHECK(system(rm) == 0);
        snprintf(line, sizeof line, "--shards 4 --checkpoint-every 1 --resume --out %s/s4-resume", dir);
        CHECK_MSG(mpi_train(4, data, line, &out) == 0, "%s", out ? out : "");
        free(out);
        CHECK_MSG(same_run("s4", "s4-resume"), "resumed on another R");
        /* steps 1-2 on 2 processes, step 3 on 4 */
        snprintf(a, sizeof a, "%s/s4-resume", dir);
        CHECK(dp_ranks_owner_in(&owner, a, 2, 3) == 0 && owner.rank == 1);
        CHECK(dp_ranks_owner_in(&owner, a, 3, 3) == 0 && owner.rank == 3);
    }

    /* rank 1 of 2 dies (SIGKILL) as step 3 begins: the job ends with an error
     * naming it, the run stays at its step-2 checkpoint, and --resume on
     * R = 4 finishes it, byte for byte the one-process run */
    snprintf(extra, sizeof extra,
             "--shards 4 --checkpoint-every 1 --inject-fault kill-rank --fault-rank 1 --fault-step 3 --out %s/killed",
             dir);
    CHECK(mpi_train(2, data, extra, &out) != 0);
    CHECK_MSG(out != NULL && strstr(out, "rank 1") != NULL && strstr(out, "signal 9") != NULL, "%s", out ? out : "");
    free(out);
    snprintf(a, sizeof a, "%s/killed/ckpt/step-00000002.ckpt", dir);
    CHECK(access(a, F_OK) == 0);
    snprintf(a, sizeof a, "%s/killed/ckpt/step-00000003.ckpt", dir);
    CHECK(access(a, F_OK) != 0);
    snprintf(extra, sizeof extra, "--shards 4 --checkpoint-every 1 --resume --out %s/killed", dir);
    CHECK_MSG(mpi_train(4, data, extra, &out) == 0, "%s", out ? out : "");
    free(out);
    CHECK_MSG(same_run("s4", "killed"), "killed and resumed");

    /* rank 1 of 2 hangs at step 2: rank 0 names it within the rank timeout
     * and the job ends (mpirun exits: this call returns). The short timeout
     * (--fault-timeout 8) starts with step 2: the start of both ranks, step 1
     * and rank 0's writes keep the default 600 s, so a loaded machine cannot
     * make a slow but live rank the one named (with --rank-timeout 8 for the
     * whole run, rank 0 writing the step-0 checkpoint more than 16 s after rank
     * 1 arrived, or the two starting more than 16 s apart, ended the job
     * naming rank 0 or neither) */
    snprintf(extra, sizeof extra,
             "--shards 4 --inject-fault hang-rank --fault-rank 1 --fault-step 2 --fault-timeout 8 --out %s/hung", dir);
    CHECK(mpi_train(2, data, extra, &out) != 0);
    CHECK_MSG(out != NULL && strstr(out, "step 2: rank 1 (host") != NULL && strstr(out, "did not arrive") != NULL &&
                  strstr(out, "within the rank timeout of 8 s") != NULL,
              "%s", out ? out : "");
    free(out);

    /* a bit flipped in shard 3's gradient at step 2 on R = 2: rank 1 computed it */
    snprintf(extra, sizeof extra, "--shards 4 --inject-fault bitflip-shard --fault-shard 3 --fault-step 2 --out %s/flip",
             dir);
    CHECK(mpi_train(2, data, extra, &out) == 0);
    free(out);
    CHECK(run_ovt("step --run %s/flip --step 1 --data %s", dir, data) == 0);
    CHECK(run_ovt("step --run %s/flip --step 2 --data %s", dir, data) == 1);
    CHECK(output_has("stateHash") && output_has("DIFFERS"));
    CHECK(output_has("shard 3 of 4: its gradient DIFFERS") && output_has("computed by rank 1 on host"));
    /* the auditor's replay on another backend: divergent at step 2, shard 3, rank 1 */
    CHECK(run_ovt("audit %s/flip --data %s --backend ref", dir, data) == 3);
    CHECK(output_has("divergent at step 2") && output_has("step 2: shard 3's gradient differs") &&
          output_has("computed by rank 1 on host"));
    /* its ranks.json with rank 1's host name edited, the file otherwise
     * valid: ranks.json.sha256 no longer binds it, and both name no host */
    {
        char path[1024];
        uint8_t *buf;
        size_t len;
        snprintf(path, sizeof path, "%s/flip/ranks.json", dir);
        CHECK(ovt_read_file(path, &buf, &len, 1 << 20) == 0);
        char *last = strrchr((char *)buf, '"');           /* the end of the last host name */
        char *first = last ? last - 1 : NULL;
        while (first && first > (char *)buf && first[-1] != '"')
            first--;
        CHECK(first != NULL && first < last);
        if (first && first < last) {
            first[0] = first[0] == 'x' ? 'y' : 'x';
            CHECK(ovt_write_atomic(path, buf, len, 0644) == 0);
        }
        free(buf);
        CHECK(run_ovt("step --run %s/flip --step 2 --data %s", dir, data) == 1);
        CHECK(output_has("shard 3 of 4: its gradient DIFFERS") && output_has("its process is not known") &&
              output_has("ranks.json.sha256 binds the run to") && !output_has("computed by rank"));
        CHECK(run_ovt("audit %s/flip --data %s --backend ref", dir, data) == 3);
        CHECK(output_has("step 2: shard 3's gradient differs") && output_has("ranks.json.sha256 binds the run to") &&
              !output_has("computed by rank"));
    }

    /* R must divide S */
    snprintf(extra, sizeof extra, "--shards 4 --out %s/bad-r3", dir);
    CHECK(mpi_train(3, data, extra, &out) != 0);
    CHECK(out != NULL && strstr(out, "must divide --shards") != NULL);
    free(out);

    /* a failure on rank 0 only (the directory holds a run): both stop with its message */
    snprintf(extra, sizeof extra, "--shards 2 --nearest --out %s/s4-r2", dir);
    CHECK(mpi_train(2, data, extra, &out) != 0);
    CHECK(out != NULL && strstr(out, "rank 0 (host") != NULL && strstr(out, "already holds a run") != NULL);
    free(out);

    CHECK(run_ovt("train %s --data %s --out %s/bad --rank-timeout 0", flags, data, dir) == 2);
    CHECK(output_has("--rank-timeout"));
    CHECK(run_ovt("train %s --data %s --out %s/bad --fault-timeout 5", flags, data, dir) == 2);
    CHECK(output_has("--fault-timeout goes with --inject-fault hang-rank"));
    CHECK(run_ovt("train --help") == 0);
    CHECK(output_has("--rank-timeout S"));
    CHECK(output_has("mpirun -np R ovt train"));

    int rv = check_done();
    if (rv == 0)
        cli_cleanup();
    else
        fprintf(stderr, "kept %s\n", dir);
    return rv;
}
