/* mpirun for tests (see mpirun.h). */
#include "support/mpirun.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tsup_mpirun_path(void)
{
    const char *p = getenv("OVT_MPIRUN");
    return p != NULL && p[0] != '\0' ? p : NULL;
}

static char *read_all(int fd)
{
    size_t len = 0, cap = 8192;
    char *buf = malloc(cap);
    if (buf == NULL)
        return NULL;
    for (;;) {
        if (cap - len < 4096) {
            char *p = realloc(buf, cap *= 2);
            if (p == NULL)
                break;
            buf = p;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

int tsup_mpirun(int np, char *const extra[], char *const argv[], char **out)
{
    *out = NULL;
    const char *mpirun = tsup_mpirun_path();
    if (mpirun == NULL)
        return -1;
    char npbuf[16];
    snprintf(npbuf, sizeof npbuf, "%d", np);
    const char *fixed[] = {mpirun, "-np", npbuf, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                           "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
                           "--mca", "oob_tcp_if_include", "lo"};
    size_t nfixed = sizeof fixed / sizeof fixed[0], nextra = 0, nargv = 0;
    while (extra != NULL && extra[nextra] != NULL)
        nextra++;
    while (argv[nargv] != NULL)
        nargv++;
    char **args = calloc(nfixed + nextra + nargv + 1, sizeof *args);
    if (args == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < nfixed; i++)
        args[k++] = (char *)fixed[i];
    for (size_t i = 0; i < nextra; i++)
        args[k++] = extra[i];
    for (size_t i = 0; i < nargv; i++)
        args[k++] = argv[i];
    args[k] = NULL;

    /* the output goes to an unlinked file, read after mpirun exits: a pipe
     * would tie the test to the last rank that holds it open */
    char path[] = "/tmp/ovt-mpirun-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        free(args);
        return -1;
    }
    unlink(path);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        free(args);
        return -1;
    }
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        /* Open MPI refuses root without both of these (or the flag above) */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        execv(args[0], args);
        fprintf(stderr, "cannot run %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    free(args);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    if (lseek(fd, 0, SEEK_SET) == 0)
        *out = read_all(fd);
    close(fd);
    if (*out != NULL)
        fprintf(stderr, "--- mpirun -np %d output ---\n%s--- end ---\n", np, *out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
