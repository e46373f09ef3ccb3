/* `ovt version`: the version ovt was built as. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ovt %s\n", OVT_VERSION);
    return 0;
}
