/* `ovt devnet --arbiter-cmd CMD` (label devnet): the arbiter's watcher run
 * by another command, as an aarch64 build under qemu is
 * (scripts/cross-devnet.sh; its ctest entry is test_devnet_cross_arbiter).
 * The case is the argument, so ctest runs them side by side:
 *   errors   no words or too many (usage: exit 2); a program not on $PATH,
 *            a missing file after it, a program that is not ovt (exit 1,
 *            before anvil starts, the message naming the command)
 *   wrapper  a 16-step gpt2-tiny bitflip dispute whose arbiter runs through
 *            a shell wrapper that records each command it runs: auditor-right
 *            at step 8, and the wrapper ran both `ovt version` and
 *            `ovt arbiter watch` */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "devnet_result.h"
#include "support/proc.h"

static char ovt[4096];

/* ovt devnet --fault bitflip --arbiter-cmd CMD, stdout and stderr together. */
static int devnet_with(const char *cmd, char **out)
{
    char *argv[] = {"/bin/sh", "-c", "\"$0\" devnet --fault bitflip --steps 16 --arbiter-cmd \"$1\" 2>&1", ovt,
                    (char *)cmd, NULL};
    return tsup_run(argv, out);
}

static void errors(void)
{
    static const struct {
        const char *cmd;
        int status;
        const char *says; /* in the message, besides the command */
    } cases[] = {
        {"", 2, "needs 1 to 16 words"},
        {"  ", 2, "needs 1 to 16 words"},
        {"a b c d e f g h i j k l m n o p q", 2, "got 17"},
        {"ovt-test-no-such-program x", 1, "not found on $PATH"},
        {"/bin/sh /nonexistent/build-cross-aarch64/ovt", 1, "no file /nonexistent/build-cross-aarch64/ovt"},
        {"/bin/echo", 1, "not ovt's version"},
        {"/bin/false", 1, "failed to run `version`"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        int st = devnet_with(cases[i].cmd, &out);
        const char *o = out ? out : "";
        CHECK_MSG(st == cases[i].status, "'%s': exit %d, not %d: %s", cases[i].cmd, st, cases[i].status, o);
        CHECK_MSG(strstr(o, cases[i].says) != NULL, "'%s': no \"%s\" in: %s", cases[i].cmd, cases[i].says, o);
        if (cases[i].status == 1) {
            CHECK_MSG(strstr(o, cases[i].cmd) != NULL, "'%s': the message does not name it: %s", cases[i].cmd, o);
            CHECK_MSG(strstr(o, "anvil (pid") == NULL, "'%s': anvil started before the check: %s", cases[i].cmd, o);
        }
        free(out);
    }
    char *help[] = {ovt, "devnet", "--help", NULL};
    char *out = NULL;
    CHECK_EQ_U64(tsup_run(help, &out), 0);
    CHECK(out && strstr(out, "--arbiter-cmd") && strstr(out, "qemu-aarch64-static"));
    free(out);
}

/* Whether the file has a line starting with prefix. */
static bool has_line(const char *path, const char *prefix)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strncmp(line, prefix, strlen(prefix)) == 0;
    if (f)
        fclose(f);
    return found;
}

static void wrapper(const char *work)
{
    char wrap[4200], marker[4200], cmd[8600];
    snprintf(wrap, sizeof wrap, "%s/wrap.sh", work);
    snprintf(marker, sizeof marker, "%s/ran", work);
    FILE *f = fopen(wrap, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "echo \"$*\" >> '%s'\nexec \"$@\"\n", marker);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/bin/sh %s %s", wrap, ovt);
    char *argv[] = {ovt, "devnet", "--json", "--fault", "bitflip", "--steps", "16", "--at", "8", "--arbiter-cmd",
                    cmd, "--timeout", "600", NULL};
    char *text = NULL;
    int st = tsup_run(argv, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    CHECK_MSG(st == 0 && j, "ovt devnet exited %d: %s", st, text ? text : "(no output)");
    free(text);
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(j, "outcome"), "auditor-right"), "outcome %s", str(j, "outcome"));
    CHECK(json_integer_value(json_object_get(j, "step")) == 8);
    CHECK(json_is_true(json_object_get(j, "as_expected")));
    CHECK(!strcmp(str(j, "arbiter_cmd"), cmd));
    CHECK_MSG(!strncmp(str(j, "arbiter_version"), "ovt ", 4) && strstr(str(j, "arbiter_version"), "; built for "),
              "arbiter_version '%s'", str(j, "arbiter_version"));
    CHECK_MSG(strstr(str(j, "arbiter_built_for"), "-endian") != NULL, "arbiter_built_for '%s'",
              str(j, "arbiter_built_for"));
    CHECK(!strncmp(str(j, "arbiter_saw"), "settled: auditor-right", 22));
    json_decref(j);
    /* the wrapper's record: the probe, then the watcher (argv after the prefix) */
    char want[4200];
    snprintf(want, sizeof want, "%s version\n", ovt);
    CHECK_MSG(has_line(marker, want), "%s: no line '%s version'", marker, ovt);
    snprintf(want, sizeof want, "%s arbiter watch --rpc-url http://127.0.0.1:", ovt);
    CHECK_MSG(has_line(marker, want), "%s: no line '%s'", marker, want);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_devnet_arbiter_cmd errors|wrapper\n");
        return 2;
    }
    const char *bin = getenv("OVT_BINARY_DIR");
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    char work[4096];
    snprintf(work, sizeof work, "%s/test_devnet_arbiter_cmd.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(work))
        return 1;
    if (!strcmp(argv[1], "errors")) {
        CHECK_RUN(errors());
    } else if (!strcmp(argv[1], "wrapper")) {
        CHECK_RUN(wrapper(work));
    } else {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    return tsup_finish_dir(work, check_done());
}
