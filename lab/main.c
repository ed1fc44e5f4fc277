#include <stdio.h>

#include "../cli/commands.h"

int fg_cmd_lab(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "floodgate lab: not available in this build\n");
    return 2;
}
