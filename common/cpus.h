#ifndef OVT_CPUS_H
#define OVT_CPUS_H

/* The number of CPUs this process may run on (its affinity mask, as
 * sched_getaffinity reports it; at least 1): what a thread count of 0
 * (`--threads` not given) means. */
int ovt_cpu_count(void);

#endif
