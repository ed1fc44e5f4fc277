/* store.c -- opening and closing stores by URL. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "redis_store.h"
#include "store.h"

/* "memory" or "memory?max_keys=N". */
static fg_store *open_memory(const char *url, char *err, size_t errlen)
{
    fg_memory_options opt = {0};
    const char *q = url + strlen("memory");
    if (*q == '?') {
        const char *v = q + 1;
        if (strncmp(v, "max_keys=", 9) != 0) {
            fg__seterr(err, errlen, FG_EINVAL,
                       "memory store: unknown option in '%s' (known: "
                       "max_keys=N)",
                       url);
            return NULL;
        }
        v += 9;
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (*v < '0' || *v > '9' || *end || errno || n == 0) {
            fg__seterr(err, errlen, FG_EINVAL,
                       "memory store: max_keys must be a positive integer");
            return NULL;
        }
        opt.max_keys = n;
    } else if (*q) {
        fg__seterr(err, errlen, FG_EINVAL, "unknown store '%.40s'", url);
        return NULL;
    }
    return fg__store_memory_open(&opt, err, errlen);
}

static fg_store *open_any(const char *url, struct event_base *base, char *err,
                          size_t errlen)
{
    if (!url || !*url) {
        fg__seterr(err, errlen, FG_EINVAL, "no store URL given");
        return NULL;
    }
    if (strncmp(url, "memory", 6) == 0)
        return open_memory(url, err, errlen);
    if (strncmp(url, "redis://", 8) == 0 || strncmp(url, "unix://", 7) == 0)
        return fg__store_redis_open(url, base, err, errlen);
    /* Say which scheme was not understood, but never echo the rest: a URL
     * may carry a password. */
    const char *colon = strchr(url, ':');
    int n = colon ? (int)(colon - url) : (int)strlen(url);
    fg__seterr(err, errlen, FG_EINVAL,
               "unknown store '%.*s' (use memory, redis://host:port or "
               "unix:///path)",
               n > 40 ? 40 : n, url);
    return NULL;
}

fg_store *fg_store_open(const char *url, char *err, size_t errlen)
{
    return open_any(url, NULL, err, errlen);
}

fg_store *fg_store_open_async(const char *url, struct event_base *base,
                              char *err, size_t errlen)
{
    if (!base) {
        fg__seterr(err, errlen, FG_EINVAL, "no event base given");
        return NULL;
    }
    return open_any(url, base, err, errlen);
}

fg_store *fg_store_open_memory(const fg_memory_options *opt, char *err,
                               size_t errlen)
{
    return fg__store_memory_open(opt, err, errlen);
}

const char *fg_store_last_error(fg_store *st)
{
    if (st && strcmp(st->ops->scheme, "redis") == 0)
        return fg__store_redis_last_error(st);
    return "";
}

uint64_t fg_store_keys(fg_store *st)
{
    return st && st->ops->keys ? st->ops->keys(st) : 0;
}

void fg_store_close(fg_store *st)
{
    if (st)
        st->ops->close(st);
}
