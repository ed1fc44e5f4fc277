/* store_redis.c -- the Redis store (placeholder until implemented). */
#include "store.h"

fg_store *fg__store_redis_open(const char *url, struct event_base *base,
                               char *err, size_t errlen)
{
    (void)url;
    (void)base;
    fg__seterr(err, errlen, FG_ENOTSUP, "redis store: not built yet");
    return NULL;
}
