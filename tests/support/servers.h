#ifndef OVT_TESTS_SUPPORT_SERVERS_H
#define OVT_TESTS_SUPPORT_SERVERS_H

/* Real servers from Debian for tests (prometheus, nginx): started as child
 * processes tied to the test (PR_SET_PDEATHSIG), stopped by PID, and a
 * plain HTTP GET to talk to them. */

#include <stddef.h>
#include <sys/types.h>

/* The first of the given paths that is an executable file, else NULL. */
const char *tsup_find_exe(const char *const *candidates);

/* Starts argv (argv[0] a path) in the background with stdout and stderr
 * appended to log_path (NULL: /dev/null). Returns the PID, or -1. */
pid_t tsup_spawn(char *const argv[], const char *log_path);

/* Whether the child has exited (reaps it; *status gets its exit status,
 * or -1 when killed by a signal). 0 while it runs. */
int tsup_exited(pid_t pid, int *status);

/* Sends SIGTERM, waits up to 10 s, then SIGKILL; reaps. pid <= 0 is a no-op. */
void tsup_stop(pid_t pid);

/* GET url into body (NUL-terminated, truncated to cap-1); returns the HTTP
 * status, or 0 when there was no answer. */
long tsup_http_get(const char *url, char *body, size_t cap);

/* Sleeps ms milliseconds (between polls of an event). */
void tsup_sleep_ms(long ms);

#endif
