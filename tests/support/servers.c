#include "support/servers.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *tsup_find_exe(const char *const *candidates)
{
    for (size_t i = 0; candidates[i]; i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return NULL;
}

pid_t tsup_spawn(char *const argv[], const char *log_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (in >= 0)
            dup2(in, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

int tsup_exited(pid_t pid, int *status)
{
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r != pid)
        return 0;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return 1;
}

void tsup_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void tsup_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    int st;
    if (kill(pid, SIGTERM) != 0) {
        waitpid(pid, &st, WNOHANG);
        return;
    }
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return;
        tsup_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
}

struct sink {
    char *p;
    size_t len, cap;
};

static size_t on_data(char *d, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t k = size * n;
    size_t room = s->cap - 1 - s->len;
    size_t c = k < room ? k : room;
    memcpy(s->p + s->len, d, c);
    s->len += c;
    s->p[s->len] = '\0';
    return k;
}

long tsup_http_get(const char *url, char *body, size_t cap)
{
    body[0] = '\0';
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    struct sink s = {body, 0, cap};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}
