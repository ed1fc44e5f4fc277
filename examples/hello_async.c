/* hello_async.c -- hello.c on a libevent loop: four checks of a limit of 3
 * a second, sent together (pipelined on one Redis connection) and answered
 * by callbacks.
 *
 *   cc hello_async.c $(pkg-config --cflags --libs floodgate libevent)
 *   ./a.out redis://127.0.0.1:6379/0 */
#include <event2/event.h>
#include <floodgate.h>
#include <signal.h>
#include <stdio.h>

struct hello {
    struct event_base *base;
    int pending; /* checks whose callback has not run yet */
};

/* Runs once per accepted check, from the loop (or at once, when the store
 * needs no I/O); 'd' is valid only during the call. */
static void on_decision(int rc, const fg_decision *d, void *data)
{
    struct hello *h = data;
    if (rc != FG_OK) {
        /* Decided by the limit's on_failure: 'remaining' and the waits
         * say nothing of the key. */
        fprintf(stderr, "hello_async: store: %s\n", fg_strerror(rc));
        printf("%s source=%s\n", d->allowed ? "allowed" : "limited",
               fg_source_name(d->source));
    } else {
        printf("%s remaining=%llu retry_after_ms=%llu source=%s\n",
               d->allowed ? "allowed" : "limited",
               (unsigned long long)d->remaining,
               (unsigned long long)d->retry_after_ms,
               fg_source_name(d->source));
    }
    if (--h->pending == 0)
        event_base_loopexit(h->base, NULL);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "memory";
    char err[256] = "";
    /* hiredis writes with write(2): a connection Redis closed must not
     * end the program. */
    signal(SIGPIPE, SIG_IGN);
    fg_limit lim;
    fg_store *st = NULL;
    fg_limiter *l = NULL;
    int status = 2;
    /* A precise timer, or libevent's coarse clock may stretch the store's
     * 5 ms deadline. */
    struct event_config *cfg = event_config_new();
    struct hello h = {NULL, 0};
    if (cfg && event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER) == 0)
        h.base = event_base_new_with_config(cfg);
    if (!h.base) {
        fprintf(stderr, "hello_async: no event base\n");
        goto out;
    }
    st = fg_store_open_async(url, h.base, err, sizeof err);
    if (st && fg_limit_parse_err("3/s", &lim, err, sizeof err) == FG_OK)
        l = fg_limiter_new(st, &lim, err, sizeof err);
    if (!l) {
        fprintf(stderr, "hello_async: %s\n", err);
        goto out;
    }
    /* Counted before they are sent: a callback may run before
     * fg_check_async returns, and the loop must stop only after the last. A
     * check that is not accepted never calls back. */
    h.pending = 4;
    for (int i = 0; i < 4; i++) {
        int rc = fg_check_async(l, "user81", 6, 1, on_decision, &h);
        if (rc != FG_OK) {
            fprintf(stderr, "hello_async: check: %s\n", fg_strerror(rc));
            h.pending--;
        }
    }
    if (h.pending > 0)
        event_base_dispatch(h.base);
    status = 0;
out:
    fg_limiter_free(l);
    fg_store_close(st);
    if (h.base)
        event_base_free(h.base);
    if (cfg)
        event_config_free(cfg);
    return status;
}
