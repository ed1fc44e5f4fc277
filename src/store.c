/* store.c -- opening and closing stores by URL. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "process.h"
#include "redis_store.h"
#include "redis_url.h"
#include "store.h"
#include "error.h"

/* "memory" or "memory?max_keys=N" into 'opt'. FG_OK or FG_EINVAL. */
static int parse_memory(const char *url, fg_memory_options *opt, char *err,
                        size_t errlen)
{
    memset(opt, 0, sizeof(*opt));
    const char *q = url + strlen("memory");
    if (*q == '?') {
        const char *v = q + 1;
        if (strncmp(v, "max_keys=", 9) != 0)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "memory store: unknown option in '%s' (known: "
                              "max_keys=N)",
                              url);
        v += 9;
        if (strstr(v, "max_keys="))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "memory store: max_keys given twice");
        if (strchr(v, '&'))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "memory store: unknown option after max_keys "
                              "(known: max_keys=N)");
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (*v < '0' || *v > '9' || *end || errno || n == 0 ||
            n > FG__MEMORY_MAX_KEYS)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "memory store: max_keys must be 1..%llu",
                              (unsigned long long)FG__MEMORY_MAX_KEYS);
        opt->max_keys = n;
    } else if (*q) {
        return fg__seterr(err, errlen, FG_EINVAL, "unknown store '%.40s'", url);
    }
    return FG_OK;
}

static fg_store *open_memory(const char *url, char *err, size_t errlen)
{
    fg_memory_options opt;
    if (parse_memory(url, &opt, err, errlen) != FG_OK)
        return NULL;
    return fg__store_memory_open(&opt, err, errlen);
}

/* Say which scheme was not understood, but never echo the rest: a URL may
 * carry a password. */
static int unknown_scheme(const char *url, char *err, size_t errlen)
{
    const char *colon = strchr(url, ':');
    int n = colon ? (int)(colon - url) : (int)strlen(url);
    return fg__seterr(err, errlen, FG_EINVAL,
                      "unknown store '%.*s' (use memory, redis://host:port, "
                      "unix:///path, shards=URL,URL,..., cluster=URL,... or "
                      "sentinel://host:port,.../master)",
                      n > 40 ? 40 : n, url);
}

static int is_redis(const char *url)
{
    return strncmp(url, "redis://", 8) == 0 || strncmp(url, "unix://", 7) == 0;
}

static int is_shards(const char *url)
{
    return strncmp(url, "shards=", 7) == 0;
}

static int is_cluster(const char *url)
{
    return strncmp(url, "cluster=", 8) == 0;
}

static int is_sentinel(const char *url)
{
    return strncmp(url, "sentinel://", 11) == 0;
}

int fg_store_url_check(const char *url, char *err, size_t errlen)
{
    if (!url || !*url)
        return fg__seterr(err, errlen, FG_EINVAL, "no store URL given");
    if (strncmp(url, "memory", 6) == 0) {
        fg_memory_options opt;
        return parse_memory(url, &opt, err, errlen);
    }
    if (is_redis(url)) {
        fg__redis_url u;
        int rc = fg__redis_url_parse(url, &u, err, errlen);
        if (rc == FG_OK)
            fg__redis_url_free(&u);
        return rc;
    }
    if (is_shards(url))
        return fg__store_shards_url_check(url, err, errlen);
    if (is_cluster(url))
        return fg__store_cluster_url_check(url, err, errlen);
    if (is_sentinel(url))
        return fg__store_sentinel_url_check(url, err, errlen);
    return unknown_scheme(url, err, errlen);
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
    if (is_redis(url))
        return fg__store_redis_open(url, base, err, errlen);
    if (is_shards(url))
        return fg__store_shards_open(url, base, err, errlen);
    if (is_cluster(url))
        return fg__store_cluster_open(url, base, err, errlen);
    if (is_sentinel(url))
        return fg__store_sentinel_open(url, base, err, errlen);
    unknown_scheme(url, err, errlen);
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
    fg_store *st = open_any(url, base, err, errlen);
    if (st)
        st->base = base;
    return st;
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
    if (st && strcmp(st->ops->scheme, "shards") == 0)
        return fg__store_shards_last_error(st);
    if (st && strcmp(st->ops->scheme, "cluster") == 0)
        return fg__store_cluster_last_error(st);
    if (st && strcmp(st->ops->scheme, "sentinel") == 0)
        return fg__store_sentinel_last_error(st);
    return "";
}

unsigned fg_store_nodes(fg_store *st)
{
    return st ? st->nodes : 0;
}

unsigned fg_store_node_of(fg_store *st, const char *key, size_t keylen)
{
    if (!st || (!key && keylen) || keylen > FG_MAX_KEY)
        return 0;
    return fg__store_node_of(st, key, keylen);
}

const char *fg_store_node_name(fg_store *st, unsigned node)
{
    if (!st || node >= st->nodes)
        return NULL;
    return st->ops->node_name ? st->ops->node_name(st, node) : st->ops->scheme;
}

const char *fg_store_node_addr(fg_store *st, unsigned node)
{
    if (!st || node >= st->nodes)
        return NULL;
    return st->ops->node_addr ? st->ops->node_addr(st, node)
                              : fg_store_node_name(st, node);
}

const char *fg_store_node_error(fg_store *st, unsigned node)
{
    if (!st || node >= st->nodes)
        return NULL;
    return st->ops->node_error ? st->ops->node_error(st, node) : "";
}

const char *fg_store_warning(fg_store *st)
{
    return st && st->ops->warning ? st->ops->warning(st) : NULL;
}

uint64_t fg_store_keys(fg_store *st)
{
    return st && st->ops->keys ? st->ops->keys(st) : 0;
}

uint64_t fg_store_evicted(fg_store *st)
{
    return st && st->ops->evicted ? st->ops->evicted(st) : 0;
}

/* Another process's store (a parent's, before fork) is left as it is:
 * its sockets and threads are the parent's, and freeing the copy of its
 * memory would gain nothing. */
void fg_store_close(fg_store *st)
{
    if (st && !fg__process_other(st->process))
        st->ops->close(st);
}

uint64_t fg__store_now(fg_store *st)
{
    return st->ops->now ? st->ops->now(st) : fg__mono_precise_us();
}

unsigned fg__store_busy(fg_store *st)
{
    return st && st->ops->busy ? st->ops->busy(st) : 0;
}
