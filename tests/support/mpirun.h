#ifndef OVT_TESTS_SUPPORT_MPIRUN_H
#define OVT_TESTS_SUPPORT_MPIRUN_H

/* Running ranks under Open MPI's mpirun from tests, as CI needs it: as root
 * (--allow-run-as-root), more ranks than cores (--oversubscribe, no core
 * binding), and over loopback only (TCP on lo for the data and for mpirun's
 * own wiring). CMake hands tests mpirun's path in OVT_MPIRUN (empty in a
 * build without MPI: tests then skip with 77). */

/* mpirun's path, or NULL when this build has no MPI (or OVT_MPIRUN is unset). */
const char *tsup_mpirun_path(void);

/* Runs `mpirun -np np <the options above> [extra...] argv...` (extra and argv
 * NULL-terminated; extra may be NULL), waits for mpirun to exit, and returns
 * its exit status (-1 if it could not run or died of a signal). stdout and
 * stderr of mpirun and of every rank go to a file whose text is returned in
 * *out (malloc'd, NUL-terminated) and also echoed to stderr for the test log. */
int tsup_mpirun(int np, char *const extra[], char *const argv[], char **out);

#endif
