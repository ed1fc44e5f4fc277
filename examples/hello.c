/* hello.c -- a limit of 3 a second, checked four times for one user.
 *
 *   cc hello.c $(pkg-config --cflags --libs floodgate) -o hello
 *   ./hello                            (counts in this process's memory)
 *   ./hello redis://127.0.0.1:6379/0   (counts in Redis, for every server) */
#include <floodgate.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "memory";
    char err[256] = "";
    fg_limit lim;
    fg_limiter *l = NULL;
    fg_store *st = fg_store_open(url, err, sizeof err);
    if (st && fg_limit_parse_err("3/s", &lim, err, sizeof err) == FG_OK)
        l = fg_limiter_new(st, &lim, err, sizeof err);
    if (!l) {
        fprintf(stderr, "hello: %s\n", err);
        fg_store_close(st);
        return 2;
    }
    for (int i = 0; i < 4; i++) {
        fg_decision d; /* always filled, even when the store fails */
        int rc = fg_check(l, "user81", 6, 1, &d);
        if (rc != FG_OK) {
            /* Decided by the limit's on_failure: 'remaining' and the
             * waits say nothing of the key. */
            fprintf(stderr, "hello: store: %s\n", fg_strerror(rc));
            printf("%s source=%s\n", d.allowed ? "allowed" : "limited",
                   fg_source_name(d.source));
            continue;
        }
        printf("%s remaining=%llu retry_after_ms=%llu source=%s\n",
               d.allowed ? "allowed" : "limited",
               (unsigned long long)d.remaining,
               (unsigned long long)d.retry_after_ms, fg_source_name(d.source));
    }
    fg_limiter_free(l);
    fg_store_close(st);
    return 0;
}
