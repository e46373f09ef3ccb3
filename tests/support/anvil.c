/* Starting and stopping a test anvil (see anvil.h). */
#include "support/anvil.h"

#include "examples/devnet/node.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int tsup_free_port(void)
{
    return devnet_free_port();
}

/* Sends a raw eth_chainId request and checks for a JSON-RPC result. */
static int answers(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        const char body[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_chainId\",\"params\":[]}";
        char req[256];
        int n = snprintf(req, sizeof req,
                         "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                         sizeof body - 1, body);
        if (write(fd, req, (size_t)n) == n) {
            char resp[1024];
            ssize_t got, total = 0;
            while (total < (ssize_t)sizeof resp - 1 &&
                   (got = read(fd, resp + total, sizeof resp - 1 - (size_t)total)) > 0)
                total += got;
            resp[total] = '\0';
            ok = strstr(resp, "\"result\"") != NULL;
        }
    }
    close(fd);
    return ok;
}

/* Starts anvil on port: 0 when it answers, 1 when it exited (the port was
 * most likely taken meanwhile), -1 on failure. */
static int spawn(tsup_anvil *a, const char *anvil, int port, const char *const *extra_args)
{
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    const char *argv[40] = {anvil, "--host", "127.0.0.1", "--port", port_s, "--silent"};
    int n = 6;
    for (int i = 0; extra_args && extra_args[i] && n < 39; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        execv(anvil, (char *const *)argv);
        _exit(127);
    }
    a->pid = pid;
    a->port = port;
    snprintf(a->url, sizeof a->url, "http://127.0.0.1:%d", port);
    for (int waited = 0; waited < 20000; waited += 50) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            a->pid = 0;
            return 1;
        }
        if (answers(port))
            return 0;
        sleep_ms(50);
    }
    tsup_anvil_stop(a);
    fprintf(stderr, "anvil did not answer on port %d within 20 s\n", port);
    return -1;
}

static const char *anvil_path(void)
{
    const char *anvil = getenv("OVT_ANVIL");
    if (!anvil || !*anvil) {
        fprintf(stderr, "OVT_ANVIL is not set (run `npm ci`, then reconfigure)\n");
        return NULL;
    }
    return anvil;
}

int tsup_anvil_start(tsup_anvil *a, const char *const *extra_args)
{
    memset(a, 0, sizeof *a);
    const char *anvil = anvil_path();
    if (!anvil)
        return -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = tsup_free_port();
        if (port < 0)
            continue;
        int rv = spawn(a, anvil, port, extra_args);
        if (rv <= 0)
            return rv;
    }
    fprintf(stderr, "anvil would not start (5 attempts)\n");
    return -1;
}

int tsup_anvil_restart(tsup_anvil *a, const char *const *extra_args)
{
    const char *anvil = anvil_path();
    if (!anvil || a->pid > 0)
        return -1;
    for (int attempt = 0; attempt < 20; attempt++) {
        int rv = spawn(a, anvil, a->port, extra_args);
        if (rv <= 0)
            return rv;
        sleep_ms(250); /* the old listener may still hold the port */
    }
    fprintf(stderr, "anvil would not restart on port %d\n", a->port);
    return -1;
}

static void reap(tsup_anvil *a, int first_signal)
{
    if (a->pid <= 0)
        return;
    kill(a->pid, first_signal);
    for (int waited = 0; waited < 2000; waited += 20) {
        if (waitpid(a->pid, NULL, WNOHANG) == a->pid) {
            a->pid = 0;
            return;
        }
        sleep_ms(20);
    }
    kill(a->pid, SIGKILL);
    waitpid(a->pid, NULL, 0);
    a->pid = 0;
}

void tsup_anvil_stop(tsup_anvil *a)
{
    reap(a, SIGTERM);
}

void tsup_anvil_kill(tsup_anvil *a)
{
    reap(a, SIGKILL);
}
