#ifndef OVT_TESTS_SUPPORT_PROC_H
#define OVT_TESTS_SUPPORT_PROC_H

/* Running helper programs (cast, solcjs) from tests. */

/* Runs argv (argv[0] a path, NULL-terminated) and waits for it. If out is
 * not NULL, its stdout is captured into *out (malloc'd, NUL-terminated,
 * trailing whitespace removed). stderr passes through. Returns the exit
 * status, or -1 if it could not run or was killed by a signal. */
int tsup_run(char *const argv[], char **out);

/* Like tsup_run with a printf-built list: tsup_runf(&out, prog, arg1, ..., NULL). */
int tsup_runl(char **out, const char *prog, ...);

/* A test's temporary folder at its end: removed when the checks passed
 * (rv == 0), else kept for a look and its path printed. Returns rv. */
int tsup_finish_dir(const char *dir, int rv);

#endif
