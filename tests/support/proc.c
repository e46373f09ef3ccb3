/* Child-process helpers for tests (see proc.h). */
#include "support/proc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int tsup_run(char *const argv[], char **out)
{
    int fds[2] = {-1, -1};
    if (out) {
        *out = NULL;
        if (pipe(fds) != 0)
            return -1;
    }
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (out) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
        }
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (out) {
        close(fds[1]);
        for (;;) {
            if (cap - len < 4096) {
                cap = cap ? cap * 2 : 8192;
                char *p = realloc(buf, cap);
                if (!p)
                    break;
                buf = p;
            }
            ssize_t n = read(fds[0], buf + len, cap - len - 1);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            len += (size_t)n;
        }
        close(fds[0]);
        if (buf) {
            while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\r'))
                len--;
            buf[len] = '\0';
        }
        *out = buf;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int tsup_runl(char **out, const char *prog, ...)
{
    char *argv[64];
    int n = 0;
    va_list ap;
    va_start(ap, prog);
    argv[n++] = (char *)prog;
    for (const char *a; n < 63 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return tsup_run(argv, out);
}

int tsup_finish_dir(const char *dir, int rv)
{
    if (rv == 0) {
        char *rm[] = {"/bin/rm", "-rf", (char *)dir, NULL};
        if (tsup_run(rm, NULL) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    } else {
        fprintf(stderr, "kept %s\n", dir);
    }
    return rv;
}
