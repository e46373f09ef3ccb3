#ifndef OVT_CPUS_H
#define OVT_CPUS_H

/* The number of CPUs this process may run on (its affinity mask, as
 * sched_getaffinity reports it; at least 1): what a thread count of 0
 * (`--threads` not given) means. */
int ovt_cpu_count(void);

/* The processor kind and byte order this build was compiled for
 * ("aarch64, little-endian"): an aarch64 or s390x build says so under qemu
 * too, so `ovt version` and the arbiter's log show which build ran. */
const char *ovt_built_for(void);

#endif
