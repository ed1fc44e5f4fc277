/* cmd_bench.c -- `floodgate bench`: run the benchmark programs built beside
 * this binary (build/bench/), each printing its figures beside a reference
 * measured in the same run. `make bench` runs these and the HTTP and Redis
 * benchmarks, which need the source tree's scripts. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"

extern char **environ;

static const char usage[] =
    "usage: floodgate bench\n"
    "\n"
    "Run the benchmark programs built beside this binary (bench/ in its\n"
    "folder: the memory store's nanoseconds per check beside a baseline\n"
    "loop), one after the other. Benchmarks are not tests: each prints its\n"
    "figures beside a reference measured in the same run. 'make bench'\n"
    "also runs the HTTP and Redis benchmarks, which need the source tree.\n";

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder of this binary, from /proc/self/exe, into 'dir'. */
static int own_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    if (len <= 0 || (size_t)len == n - 1) /* none, or cut short */
        return -1;
    dir[len] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

/* Run 'path' and wait for it: its exit status, 128 + the signal that
 * ended it, or -1 when it could not be run. */
static int run(const char *path)
{
    pid_t pid;
    char *argv[] = {(char *)path, NULL};
    int err = posix_spawn(&pid, path, NULL, NULL, argv, environ);
    if (err) {
        fprintf(stderr, "floodgate bench: cannot run %s: %s\n", path,
                strerror(err));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int fg_cmd_bench(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "floodgate bench: unexpected argument '%s'\n\n%s",
                argv[1], usage);
        return 2;
    }
    char dir[PATH_MAX];
    if (own_dir(dir, sizeof(dir) - 8) != 0) {
        fprintf(stderr, "floodgate bench: cannot find this binary's folder\n");
        return 1;
    }
    strcat(dir, "/bench");
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr,
                "floodgate bench: no benchmark programs in %s (%s): it "
                "runs from a build tree (build them with 'make', or run "
                "'make bench'); an installed floodgate has none\n",
                dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX + 256];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 ||
            !S_ISREG(st.st_mode) || access(path, X_OK) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **more = realloc(names, cap * sizeof(*names));
            if (!more)
                break;
            names = more;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (e) {
        fprintf(stderr, "floodgate bench: out of memory\n");
        while (n)
            free(names[--n]);
        free(names);
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "floodgate bench: no benchmark programs in %s\n", dir);
        free(names);
        return 1;
    }
    qsort(names, n, sizeof(names[0]), by_name);
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        printf("== %s\n", names[i]);
        fflush(stdout);
        int rc = run(path);
        if (rc != 0) {
            fprintf(stderr, "floodgate bench: %s failed (%d)\n", names[i], rc);
            status = 1;
        }
        printf("\n");
        free(names[i]);
    }
    free(names);
    return status;
}
