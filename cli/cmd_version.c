/* `ovt version`: the version ovt was built as, and the processor it was
 * built for (an aarch64 or s390x build says so under qemu too: that is how
 * `ovt devnet --arbiter-cmd` shows which build the arbiter ran). */
#include <stdio.h>

#include "cli/commands.h"
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

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ovt %s\n", OVT_VERSION);
    printf("built for %s, %s-endian\n", OVT_TARGET_CPU, OVT_HOST_BIG_ENDIAN ? "big" : "little");
    return 0;
}
