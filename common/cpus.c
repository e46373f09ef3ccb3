/* The CPUs this process may run on (cpus.h). */
#include "common/cpus.h"

#include <sched.h>

#include "common/bytes.h"

#if defined(__x86_64__)
#define OVT_TARGET_CPU "x86-64"
#elif defined(__aarch64__)
#define OVT_TARGET_CPU "aarch64"
#elif defined(__s390x__)
#define OVT_TARGET_CPU "s390x"
#else
#define OVT_TARGET_CPU "another processor"
#endif
#if OVT_HOST_BIG_ENDIAN
#define OVT_TARGET_ORDER "big-endian"
#else
#define OVT_TARGET_ORDER "little-endian"
#endif

int ovt_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        return n > 0 ? n : 1;
    }
    return 1;
}

const char *ovt_built_for(void)
{
    return OVT_TARGET_CPU ", " OVT_TARGET_ORDER;
}
