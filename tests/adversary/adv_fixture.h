#ifndef OVT_TESTS_ADVERSARY_FIXTURE_H
#define OVT_TESTS_ADVERSARY_FIXTURE_H

/* Shared by the hostile-counterparty suites: the built `ovt` run as a child
 * with its stdout and stderr captured to files and a safety bound on how
 * long it may take (so a command that hangs fails the test instead of
 * hanging it), and anvil's dev keys. */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/ovt_fixture.h"

static const char *const adv_keys[6] = {
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", /* deployer */
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", /* trainer */
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a", /* auditor */
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6", /* the honest arbiter */
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a", /* the cheat's second address */
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba", /* a stranger */
};
enum { ADV_DEPLOYER, ADV_TRAINER, ADV_AUDITOR, ADV_ARBITER, ADV_ACCOMPLICE, ADV_STRANGER };

static inline double adv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void adv_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts `ovt` with args (argv[0] is af_ovt), stdout to out_path and
 * stderr to err_path (either may be NULL: /dev/null). */
static inline pid_t adv_spawn(char *const *args, const char *out_path, const char *err_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    int o = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
        _exit(126);
    execv(af_ovt, args);
    _exit(127);
}

/* Waits for pid at most seconds (a safety bound for "did not hang"): its
 * exit status, -2 if it was killed by a signal, -1 if it had to be killed. */
static inline int adv_wait(pid_t pid, double seconds)
{
    double end = adv_now() + seconds;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
        if (adv_now() > end)
            break;
        adv_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* The whole text of a file (malloc'd; "" if unreadable). */
static inline char *adv_slurp(const char *path)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 24))
        return strdup("");
    return (char *)buf;
}

/* Runs `ovt ARGS...` (NULL-terminated) with a bound of 300 s; *err gets its
 * stderr and *out its stdout (malloc'd; either may be NULL). */
static inline int adv_ovt(char **out, char **err, ...)
{
    char *argv[80];
    int n = 0;
    argv[n++] = af_ovt;
    va_list ap;
    va_start(ap, err);
    for (char *a; n < 79 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char op[600], ep[600];
    snprintf(op, sizeof op, "%s/adv-cmd.out", af_dir);
    snprintf(ep, sizeof ep, "%s/adv-cmd.err", af_dir);
    int rv = adv_wait(adv_spawn(argv, op, ep), 300);
    char *o = adv_slurp(op), *e = adv_slurp(ep);
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
    return rv;
}

#endif
