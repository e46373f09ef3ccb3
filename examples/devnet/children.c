/* Child processes of `ovt devnet` (children.h). */
#include "examples/devnet/children.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/signals.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

void devnet_catch_signals(void)
{
    ovt_on_stop_signals(on_signal);
}

bool devnet_interrupted(void)
{
    return interrupted != 0;
}

void devnet_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !interrupted) {
    }
}

int devnet_spawn(devnet_children *kids, devnet_child **child, const char *name, char *const argv[],
                 const char *log_path)
{
    *child = NULL;
    if (kids->n == DEVNET_MAX_CHILDREN)
        return ovt_fail(OVT_EINVAL, "too many child processes (%d)", DEVNET_MAX_CHILDREN);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return ovt_fail_errno(OVT_EIO, "cannot open %s", log_path);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return ovt_fail_errno(OVT_EIO, "cannot start %s", name);
    }
    if (pid == 0) {
        /* The child: default signal handling, output to the log, and death
         * with the devnet process. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execv(argv[0], argv);
        dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    devnet_child *c = &kids->c[kids->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->log_path, sizeof c->log_path, "%s", log_path);
    c->pid = pid;
    *child = c;
    return 0;
}

static void set_status(devnet_child *c, int status)
{
    c->exited = true;
    c->pid = 0;
    c->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool reap_one(devnet_child *c, int flags)
{
    if (c->pid <= 0)
        return true;
    int status;
    pid_t r = waitpid(c->pid, &status, flags);
    if (r == c->pid) {
        set_status(c, status);
        return true;
    }
    return false;
}

void devnet_reap(devnet_children *kids)
{
    for (int i = 0; i < kids->n; i++)
        reap_one(&kids->c[i], WNOHANG);
}

int devnet_wait(devnet_children *kids, devnet_child *child, double timeout_s)
{
    (void)kids;
    for (long waited = 0; waited <= (long)(timeout_s * 1000); waited += 50) {
        if (reap_one(child, WNOHANG))
            return 0;
        if (interrupted)
            return ovt_fail(OVT_EINVAL, "interrupted");
        devnet_sleep_ms(50);
    }
    return ovt_fail(OVT_ETIMEOUT, "%s did not finish within %.0f s", child->name, timeout_s);
}

void devnet_stop(devnet_child *child, long grace_ms)
{
    if (child->pid <= 0)
        return;
    kill(child->pid, SIGTERM);
    for (long waited = 0; waited < grace_ms; waited += 20) {
        if (reap_one(child, WNOHANG))
            return;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kill(child->pid, SIGKILL);
    reap_one(child, 0);
}

void devnet_stop_all(devnet_children *kids)
{
    for (int i = kids->n - 1; i >= 0; i--)
        devnet_stop(&kids->c[i], 3000);
}

void devnet_print_log_tail(FILE *f, const devnet_child *child, int lines)
{
    FILE *in = fopen(child->log_path, "r");
    if (!in)
        return;
    char ring[32][256];
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, in)) {
        snprintf(ring[n % 32], sizeof ring[0], "%s", line);
        n++;
    }
    fclose(in);
    if (lines > 32)
        lines = 32;
    int first = n > lines ? n - lines : 0;
    fprintf(f, "  --- last lines of %s (%s) ---\n", child->name, child->log_path);
    for (int i = first; i < n; i++) {
        const char *s = ring[i % 32];
        fprintf(f, "  | %s%s", s, s[0] && s[strlen(s) - 1] == '\n' ? "" : "\n");
    }
}
