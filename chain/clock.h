#ifndef OVT_CHAIN_CLOCK_H
#define OVT_CHAIN_CLOCK_H

/* Monotonic milliseconds and a sleep that resumes after signals, for the
 * RPC backoff and the transaction manager's polling. */

long long chain_now_ms(void);
void chain_sleep_ms(long ms);

#endif
