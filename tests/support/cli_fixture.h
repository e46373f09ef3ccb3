#ifndef OVT_TESTS_SUPPORT_CLI_FIXTURE_H
#define OVT_TESTS_SUPPORT_CLI_FIXTURE_H

/* Shared by the suites that drive the built `ovt` binary: each run's output
 * goes to DIR/out.txt, where output_has looks for a string. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/err.h"
#include "common/fileio.h"

static char ovt[1024], dir[64];

/* Sets ovt (from OVT_BINARY_DIR) and makes dir, /tmp/ovt-NAME-XXXXXX. */
static int cli_setup(const char *name)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    snprintf(ovt, sizeof ovt, "%s/ovt", bin ? bin : ".");
    snprintf(dir, sizeof dir, "/tmp/ovt-%s-XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Removes dir and everything in it. */
static void cli_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* Runs `ovt ARGS` (printf-style); returns the exit status. */
static int run_ovt(const char *fmt, ...) OVT_PRINTF(1, 2);
static int run_ovt(const char *fmt, ...)
{
    char args[3072], cmd[5200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s > %s/out.txt 2>&1", ovt, args, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Writes `lines` lines of "the quick brown fox ..." to DIR/t.txt and makes
 * them a token file at tok (`ovt data text`, bytes); its exit status. */
static inline int cli_fox_tokens(const char *tok, int lines)
{
    char text[128];
    snprintf(text, sizeof text, "%s/t.txt", dir);
    FILE *f = fopen(text, "w");
    if (f == NULL)
        return -1;
    for (int i = 0; i < lines; i++)
        fprintf(f, "the quick brown fox jumps over the lazy dog %d\n", i);
    fclose(f);
    return run_ovt("data text %s --out %s", text, tok);
}

static int output_has(const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return 0;
    int found = strstr((char *)buf, needle) != NULL;
    if (!found)
        fprintf(stderr, "output lacks '%s':\n%s\n", needle, (char *)buf);
    free(buf);
    return found;
}

#endif
