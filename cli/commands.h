/* commands.h -- the subcommands of the floodgate binary. Each takes the
 * arguments after its name (argv[0] is the subcommand's name) and returns
 * the process exit status. */
#ifndef FG_COMMANDS_H
#define FG_COMMANDS_H

int fg_cmd_check(int argc, char **argv);
int fg_cmd_serve(int argc, char **argv);
int fg_cmd_lab(int argc, char **argv);
int fg_cmd_bench(int argc, char **argv);

#endif
