/* The CPUs this process may run on (cpus.h). */
#include "common/cpus.h"

#include <sched.h>

int ovt_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        return n > 0 ? n : 1;
    }
    return 1;
}
