#ifndef OVT_EXAMPLES_DEVNET_CHILDREN_H
#define OVT_EXAMPLES_DEVNET_CHILDREN_H

/* The processes `ovt devnet` starts (anvil, the parties' commands) and stops
 * again, each by its PID: on success, on failure and on SIGINT/SIGTERM.
 * Every child writes stdout and stderr to its own log file, and is tied to
 * the devnet process (PR_SET_PDEATHSIG) so that a devnet killed outright
 * does not leave it running. */

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/err.h"

#define DEVNET_MAX_CHILDREN 16

typedef struct {
    char name[32];      /* "anvil", "trainer-agent", ... */
    pid_t pid;          /* 0 once reaped */
    bool exited;        /* reaped: status is valid */
    int status;         /* exit status, or 128 + signal */
    char log_path[4096];
} devnet_child;

typedef struct {
    devnet_child c[DEVNET_MAX_CHILDREN];
    int n;
} devnet_children;

/* Installs handlers for SIGINT and SIGTERM that only set a flag (read with
 * devnet_interrupted), so every loop of the devnet can stop cleanly. */
void devnet_catch_signals(void);
bool devnet_interrupted(void);

/* Sleeps ms milliseconds (returns early when interrupted). */
void devnet_sleep_ms(long ms);

/* Starts argv[0] (a path) with argv, output appended to log_path.
 * *child points into kids. Fails if the registry is full or fork fails. */
int devnet_spawn(devnet_children *kids, devnet_child **child, const char *name, char *const argv[],
                 const char *log_path) OVT_MUST_USE;

/* Reaps every child that has exited (no blocking). */
void devnet_reap(devnet_children *kids);

/* Waits for child to exit, at most timeout_s seconds; OVT_ETIMEOUT when it
 * has not (it is then still running), OVT_EINVAL when interrupted. On 0,
 * child->status holds its exit status. */
int devnet_wait(devnet_children *kids, devnet_child *child, double timeout_s) OVT_MUST_USE;

/* Stops a child: SIGTERM, then SIGKILL after grace_ms; reaps it. */
void devnet_stop(devnet_child *child, long grace_ms);

/* Stops every child still running, the last started first. */
void devnet_stop_all(devnet_children *kids);

/* Prints the last `lines` lines of a child's log to f, indented. */
void devnet_print_log_tail(FILE *f, const devnet_child *child, int lines);

#endif
