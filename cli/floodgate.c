/* floodgate.c -- the floodgate command: dispatch to a subcommand. */
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "floodgate.h"

static const char usage[] =
    "usage: floodgate <command> [options]\n"
    "\n"
    "A rate limiter whose counters are shared by every server.\n"
    "\n"
    "commands:\n"
    "  check     check a key against a limit (memory or Redis store)\n"
    "  serve     run the HTTP sidecar daemon\n"
    "  lab       run the many-servers experiment with real processes\n"
    "  bench     run the benchmark programs of a build tree (not installed)\n"
    "  version   print the version and the libraries in use\n"
    "\n"
    "Run 'floodgate <command> --help' (or 'floodgate help <command>') for a\n"
    "command's options.\n";

static int cmd_version(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: floodgate version\n\n"
               "Print floodgate's version and those of hiredis and "
               "libevent.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "floodgate version: unexpected argument '%s'\n",
                argv[1]);
        return 2;
    }
    printf("floodgate %s (hiredis %d.%d.%d, libevent %s)\n", FG_VERSION,
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, event_get_version());
    return 0;
}

static const struct {
    const char *name;
    int (*run)(int, char **);
} commands[] = {
    {"check", fg_cmd_check}, {"serve", fg_cmd_serve},  {"lab", fg_cmd_lab},
    {"bench", fg_cmd_bench}, {"version", cmd_version},
};

int main(int argc, char **argv)
{
    /* "floodgate help COMMAND" is "floodgate COMMAND --help". */
    if (argc >= 3 && !strcmp(argv[1], "help")) {
        for (size_t i = 0;
             argc == 3 && i < sizeof(commands) / sizeof(commands[0]); i++)
            if (!strcmp(argv[2], commands[i].name)) {
                char *args[] = {argv[2], "--help", NULL};
                return commands[i].run(2, args);
            }
        fprintf(stderr, "floodgate help: %s '%s'\n\n%s",
                argc == 3 ? "unknown command" : "unexpected argument",
                argv[argc == 3 ? 2 : 3], usage);
        return 2;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version"))
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "floodgate: unknown command '%s'\n\n%s", argv[1], usage);
    return 2;
}
