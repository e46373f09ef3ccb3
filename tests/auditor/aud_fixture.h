#ifndef OVT_TESTS_AUDITOR_FIXTURE_H
#define OVT_TESTS_AUDITOR_FIXTURE_H

/* Shared by the auditor suites: a scratch directory, the built `ovt` run as a
 * child process, and a small gpt2-tiny run trained by it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "support/proc.h"

static char af_ovt[512];
static char af_dir[256];
static char af_text[512]; /* the dataset */

/* Creates the scratch directory and the dataset. 0 or -1. */
static inline int af_init(const char *name)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    snprintf(af_ovt, sizeof af_ovt, "%s/ovt", bin ? bin : ".");
    snprintf(af_dir, sizeof af_dir, "/tmp/ovt-%s-XXXXXX", name);
    if (!mkdtemp(af_dir))
        return -1;
    snprintf(af_text, sizeof af_text, "%s/text.txt", af_dir);
    char text[4096];
    size_t n = 0;
    static const char *words[] = {"the ", "grid ", "value ", "step ", "log ", "replay ", "round ", "midpoint "};
    uint64_t x = 7;
    while (n + 10 < sizeof text) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *w = words[(x >> 33) % 8];
        memcpy(text + n, w, strlen(w));
        n += strlen(w);
    }
    return ovt_write_atomic(af_text, text, n, 0644) == 0 ? 0 : -1;
}

/* Runs `ovt ARGS...` (NULL-terminated); *out (may be NULL) gets stdout. */
static inline int af_ovt_run(char **out, ...)
{
    char *argv[64];
    int n = 0;
    argv[n++] = af_ovt;
    va_list ap;
    va_start(ap, out);
    for (char *a; n < 63 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return tsup_run(argv, out);
}

/* Trains a gpt2-tiny run of `steps` steps into af_dir/NAME (checkpoints
 * every 8 steps). 0 or the exit status. */
static inline int af_train(const char *name, int steps, char *run_dir, size_t cap)
{
    snprintf(run_dir, cap, "%s/%s", af_dir, name);
    char s[16];
    snprintf(s, sizeof s, "%d", steps);
    char *out = NULL;
    int rv = af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", run_dir, "--steps", s,
                      "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--json", NULL);
    free(out);
    return rv;
}

static inline void af_cleanup(void)
{
    if (!getenv("OVT_KEEP_TMP"))
        (void)!tsup_runl(NULL, "/bin/rm", "-rf", af_dir, NULL);
}

#endif
