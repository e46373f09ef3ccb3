#ifndef OVT_TESTS_SUPPORT_ANVIL_H
#define OVT_TESTS_SUPPORT_ANVIL_H

/* A real anvil for a test: started from OVT_ANVIL on 127.0.0.1 on a free
 * port with --silent, ready when it answers eth_chainId, stopped by PID.
 * The child is also tied to the test process (PR_SET_PDEATHSIG), so a test
 * that crashes does not leave it running. */

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char url[64]; /* http://127.0.0.1:PORT */
} tsup_anvil;

/* Starts anvil with the given extra arguments (NULL-terminated list, may be
 * NULL), e.g. {"--block-time", "1", NULL}. Returns 0, or -1 with a message on
 * stderr (OVT_ANVIL unset, or anvil not answering within 20 s). */
int tsup_anvil_start(tsup_anvil *a, const char *const *extra_args);

/* Starts a stopped anvil again on the same port (a->port), with the given
 * arguments (e.g. {"--state", FILE, NULL} to reload what it dumped). */
int tsup_anvil_restart(tsup_anvil *a, const char *const *extra_args);

/* Stops it (SIGTERM, then SIGKILL after 2 s) and reaps it. Safe to call twice. */
void tsup_anvil_stop(tsup_anvil *a);

/* Kills it with SIGKILL at once (to test a node that goes away). */
void tsup_anvil_kill(tsup_anvil *a);

/* Returns a free TCP port on 127.0.0.1 (bound and released), or -1. */
int tsup_free_port(void);

#endif
