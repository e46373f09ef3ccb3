#ifndef OVT_COMMON_SIGNALS_H
#define OVT_COMMON_SIGNALS_H

/* Installs handler for SIGINT and SIGTERM, the two ways a person or a
 * supervisor asks a long-running command (agent, arbiter daemon, devnet) to
 * stop. No SA_RESTART: a sleep or a blocking call returns early, so the
 * command's loop sees the flag its handler sets soon after the signal. */
void ovt_on_stop_signals(void (*handler)(int));

#endif
