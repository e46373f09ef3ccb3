/* `mpirun ovt train` through the built binary (trainer/train_cli.c with
 * trainer/dp_mpi.c): one rank under mpirun writes the same run directory,
 * byte for byte (steps.bin, every log, the last checkpoint), as a run without
 * mpirun; two ranks that each compute the whole step (--nearest, no logs to
 * merge) write the one-process run's steps.bin, only rank 0 writing; a
 * failure on rank 0 stops both ranks with rank 0's message; --rank-timeout is
 * checked and documented. Skipped (77) without MPI.
 *
 * Once trn_train_step takes the dp (issue 13, --shards), the sharded runs
 * with R = 1, 2, 4 against the one-process run of the same S belong here. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "support/mpirun.h"
#include "trainer/dp.h"
#include "trn_cli_helpers.h"

static const char *flags = "--model gpt2-tiny --steps 3 --batch 2 --seq 16 --lr 0.003 --every 0 --threads 1";

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
    if (!trn_dp_available() || tsup_mpirun_path() == NULL) {
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

    /* two ranks, each computing the whole step without logs: the same states
     * (checked after every step by the ranks), written once */
    CHECK(run_ovt("train %s --nearest --data %s --out %s/one-nearest", flags, data, dir) == 0);
    snprintf(extra, sizeof extra, "--nearest --out %s/r2-nearest", dir);
    CHECK(mpi_train(2, data, extra, &out) == 0);
    CHECK(out != NULL && strstr(out, "2 processes (mpirun)") != NULL);
    free(out);
    snprintf(a, sizeof a, "%s/one-nearest/steps.bin", dir);
    snprintf(b, sizeof b, "%s/r2-nearest/steps.bin", dir);
    CHECK(same_file(a, b));

    /* a failure on rank 0 only (the directory holds a run): both stop with its message */
    snprintf(extra, sizeof extra, "--nearest --out %s/r2-nearest", dir);
    CHECK(mpi_train(2, data, extra, &out) != 0);
    CHECK(out != NULL && strstr(out, "rank 0 (host") != NULL && strstr(out, "already holds a run") != NULL);
    free(out);

    CHECK(run_ovt("train %s --data %s --out %s/bad --rank-timeout 0", flags, data, dir) == 2);
    CHECK(output_has("--rank-timeout"));
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
