/* `ovt version`: the version ovt was built as, and the processor it was
 * built for (`ovt devnet --arbiter-cmd` shows it for the arbiter's build). */
#include <stdio.h>

#include "cli/commands.h"
#include "common/cpus.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ovt %s\n", OVT_VERSION);
    printf("built for %s\n", ovt_built_for());
    return 0;
}
