/* `ovt train` as the GPU check drives it (bench/gpu-check.sh): a run recorded
 * on one backend and replayed with --replay on another has the same
 * stateHash at every step (--print-state); a log that belongs to another step
 * fails the replay as fraud; --nearest runs without logs; --replay and
 * --nearest together are a usage error; --backend cuda says clearly why it is
 * unavailable where it is. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "support/proc.h"
#include "trn_helpers.h"

static char ovt[4096], data[4200];

/* Runs ovt with a shell command line tail; stdout into *out. */
static int run(char **out, const char *args)
{
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "%s train --model gpt2-tiny --data %s --steps 3 --batch 2 --seq 16 --every 0 %s",
             ovt, data, args);
    return tsup_runl(out, "/bin/sh", "-c", cmd, NULL);
}

int main(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    char dir[] = "/tmp/ovt-replay-cli-XXXXXX";
    if (!bin || !mkdtemp(dir)) {
        fprintf(stderr, "OVT_BINARY_DIR unset or mkdtemp failed\n");
        return 1;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    snprintf(data, sizeof data, "%s/text", dir);
    char text[6000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('a' + (i * 7 + i / 13) % 26);
    CHECK(ovt_write_atomic(data, text, sizeof text, 0644) == 0);

    char args[8192], *rec = NULL, *rep = NULL, *near = NULL, *out = NULL;
    static char s_rec[4096], s_rep[4096], s_near[4096];
    snprintf(args, sizeof args, "--backend ref --print-state --out %s/rec", dir);
    CHECK(run(&rec, args) == 0);
    snprintf(args, sizeof args, "--backend cpu --print-state --replay %s/rec --out %s/rep", dir, dir);
    CHECK(run(&rep, args) == 0);
    snprintf(args, sizeof args, "--backend cpu --print-state --nearest --out %s/near --json", dir);
    CHECK(run(&near, args) == 0);
    trn_test_state_lines(s_rec, sizeof s_rec, rec);
    trn_test_state_lines(s_rep, sizeof s_rep, rep);
    trn_test_state_lines(s_near, sizeof s_near, near);
    CHECK(strlen(s_rec) > 3 * 70); /* three "state N <64 hex>" lines */
    CHECK_MSG(strcmp(s_rec, s_rep) == 0, "record:\n%s\nreplay:\n%s", s_rec, s_rep);
    CHECK(near && strstr(near, "\"log_entries_this_session\": 0") != NULL);

    /* step 2's log replaced by step 1's: the replay fails as fraud at step 2 */
    char p1[4200], p2[4200];
    snprintf(p1, sizeof p1, "%s/rec/logs/step-00000001.rlog", dir);
    snprintf(p2, sizeof p2, "%s/rec/logs/step-00000002.rlog", dir);
    uint8_t *bytes = NULL;
    size_t len = 0;
    CHECK(ovt_read_file(p1, &bytes, &len, 1 << 24) == 0);
    CHECK(bytes && ovt_write_atomic(p2, bytes, len, 0644) == 0);
    free(bytes);
    snprintf(args, sizeof args, "--backend cpu --replay %s/rec --out %s/rep2 2>&1", dir, dir);
    CHECK(run(&out, args) == 1);
    CHECK_MSG(out && strstr(out, "for step 1, not step 2") != NULL, "%s", out ? out : "");
    free(out);

    snprintf(args, sizeof args, "--replay %s/rec --nearest --out %s/x 2>&1", dir, dir);
    CHECK(run(&out, args) == 2);
    free(out);
    snprintf(args, sizeof args, "--backend cuda --out %s/cuda 2>&1", dir);
    int rc = run(&out, args);
    /* where a device works the run succeeds; otherwise a clear reason */
    CHECK(rc == 0 || (rc == 1 && out && (strstr(out, "built without CUDA") || strstr(out, "no usable CUDA device"))));
    free(out);

    free(rec);
    free(rep);
    free(near);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return check_done();
}
