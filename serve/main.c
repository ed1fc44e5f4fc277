#include <stdio.h>

#include "../cli/commands.h"

int fg_cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "floodgate serve: not available in this build\n");
    return 2;
}
