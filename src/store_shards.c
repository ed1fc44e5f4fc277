/* store_shards.c -- "shards=URL,URL,...": independent Redis nodes, each key
 * on one of them.
 *
 * Each node is a whole Redis store (store_redis.c) with its own
 * connections, pipeline, batches and backoff; this store only chooses the
 * node of a key (ring.c: consistent hashing of the key alone, so that all
 * of a key's limits live on one node and batch together) and hands the
 * operation over. The limiter keeps a circuit breaker per node (its
 * 'node_of'), so a node that is down sends only its own keys to the
 * failure policy. The nodes share the key prefix, so one limiter's keys are
 * named alike on every node and a limiter needs the data of one node
 * only. */
#include <stdio.h>
#include <ctype.h>
#include <string.h>

#include "process.h"
#include "redis_store.h"
#include "redis_url.h"
#include "ring.h"
#include "store.h"
#include "alloc.h"
#include "error.h"

typedef struct shards_store {
    fg_store base;
    fg__ring ring;
    unsigned n;
    fg_store *node[FG__RING_NODES_MAX];
} shards_store;

static const fg__store_ops shards_ops, shards_async_ops;

#define SHARDS_PREFIX "shards="

typedef char node_name[300];

/* The node URLs of 'url' as 'n' strings copied into 'buf', checked one by
 * one, with the names that place them on the ring. FG_OK, or FG_EINVAL
 * with the reason. */
static int split(const char *url, char *buf, size_t buflen, char **urls,
                 node_name *names, unsigned *n, char *err, size_t errlen)
{
    /* store.c found the prefix; said again here for GCC's LTO, which
     * otherwise warns of a read past a shorter constant URL. */
    if (strncmp(url, SHARDS_PREFIX, strlen(SHARDS_PREFIX)) != 0)
        return fg__seterr(err, errlen, FG_EINVAL, "shards: not a shards= URL");
    const char *list = url + strlen(SHARDS_PREFIX);
    char prefix[FG__REDIS_PREFIX_MAX + 1] = "";
    if (strlen(list) >= buflen)
        return fg__seterr(err, errlen, FG_EINVAL, "shards: URL list too long");
    strcpy(buf, list);
    *n = 0;
    for (char *p = buf, *next; p; p = next) {
        next = strchr(p, ',');
        if (next)
            *next++ = '\0';
        if (*n == FG__RING_NODES_MAX)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "shards: more than %d nodes", FG__RING_NODES_MAX);
        if (!*p)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "shards: node %u: empty URL", *n + 1);
        if (strncmp(p, "redis://", 8) && strncmp(p, "unix://", 7))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "shards: node %u is not a redis:// or "
                              "unix:// URL (%s)",
                              *n + 1,
                              isspace((unsigned char)*p)
                                  ? "it begins with a blank: the list takes "
                                    "none around its commas"
                                  : "a ',' inside a node's URL, as in a "
                                    "prefix, is written %2C");
        fg__redis_url u;
        char why[256];
        if (fg__redis_url_parse(p, &u, why, sizeof why) != FG_OK)
            return fg__seterr(err, errlen, FG_EINVAL, "shards: node %u: %s",
                              *n + 1, why);
        fg__redis_url_name(&u, names[*n], sizeof names[*n]);
        int same = *n == 0 || strcmp(prefix, u.prefix) == 0;
        if (*n == 0)
            strcpy(prefix, u.prefix);
        fg__redis_url_free(&u);
        if (!same)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "shards: node %u has another prefix than node "
                              "1 (every node must have the same; a ',' in "
                              "a prefix is written %%2C)",
                              *n + 1);
        for (unsigned i = 0; i < *n; i++)
            if (strcmp(names[i], names[*n]) == 0)
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "shards: node %s is listed twice", names[i]);
        urls[(*n)++] = p;
    }
    if (*n < 2)
        return fg__seterr(
            err, errlen, FG_EINVAL,
            "shards: give at least 2 node URLs, separated by ','");
    return FG_OK;
}

/* What splitting needs, too large for a thread's stack in a library. */
typedef struct parsed {
    char buf[8192];
    char *urls[FG__RING_NODES_MAX];
    node_name names[FG__RING_NODES_MAX];
    unsigned n;
} parsed;

static parsed *parse(const char *url, char *err, size_t errlen)
{
    parsed *p = fg__malloc(sizeof *p);
    if (!p) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    if (split(url, p->buf, sizeof p->buf, p->urls, p->names, &p->n, err,
              errlen) != FG_OK) {
        fg__free(p);
        return NULL;
    }
    return p;
}

int fg__store_shards_url_check(const char *url, char *err, size_t errlen)
{
    parsed *p = parse(url, err, errlen);
    fg__free(p);
    return p ? FG_OK : FG_EINVAL;
}

static fg_store *node_of_key(shards_store *st, const char *key, size_t keylen)
{
    return st->node[fg__ring_node(&st->ring, key, keylen)];
}

/* Every node formats a limiter's keys alike (same prefix), so the first
 * node's limiter data serves them all. */
static int shards_limiter_init(fg_store *s, fg_limiter *l, void **out,
                               char *err, size_t errlen)
{
    fg_store *first = ((shards_store *)s)->node[0];
    return first->ops->limiter_init(first, l, out, err, errlen);
}

static int shards_check(fg_store *s, fg_limiter *l, const char *key,
                        size_t keylen, uint64_t cost, uint64_t age_us,
                        fg_decision *d)
{
    fg_store *nd = node_of_key((shards_store *)s, key, keylen);
    return nd->ops->check(nd, l, key, keylen, cost, age_us, d);
}

static void shards_check_async(fg_store *s, fg__req *req)
{
    fg_store *nd = ((shards_store *)s)->node[req->node];
    nd->ops->check_async(nd, req);
}

static int shards_refund(fg_store *s, fg_limiter *l, const char *key,
                         size_t keylen, uint64_t cost, const fg__taken *t)
{
    fg_store *nd = node_of_key((shards_store *)s, key, keylen);
    return nd->ops->refund(nd, l, key, keylen, cost, t);
}

/* An operator's peek or reset goes to the key's node, as its checks. */
static int shards_peek(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen, fg_decision *d)
{
    fg_store *nd = node_of_key((shards_store *)s, key, keylen);
    return nd->ops->peek(nd, l, key, keylen, d);
}

static int shards_reset(fg_store *s, fg_limiter *l, const char *key,
                        size_t keylen)
{
    fg_store *nd = node_of_key((shards_store *)s, key, keylen);
    return nd->ops->reset(nd, l, key, keylen);
}

static unsigned shards_busy(fg_store *s)
{
    shards_store *st = (shards_store *)s;
    unsigned n = 0;
    for (unsigned i = 0; i < st->n; i++)
        n += fg__store_busy(st->node[i]);
    return n;
}

static void shards_close(fg_store *s)
{
    shards_store *st = (shards_store *)s;
    for (unsigned i = 0; i < st->n; i++)
        fg_store_close(st->node[i]);
    fg__ring_free(&st->ring);
    fg__free(st);
}

static unsigned shards_node_of(fg_store *s, const char *key, size_t keylen)
{
    return fg__ring_node(&((shards_store *)s)->ring, key, keylen);
}

static const char *shards_node_name(fg_store *s, unsigned node)
{
    fg_store *nd = ((shards_store *)s)->node[node];
    return nd->ops->node_name(nd, 0);
}

static const char *shards_node_addr(fg_store *s, unsigned node)
{
    return fg_store_node_addr(((shards_store *)s)->node[node], 0);
}

static const char *shards_node_error(fg_store *s, unsigned node)
{
    fg_store *nd = ((shards_store *)s)->node[node];
    return nd->ops->node_error(nd, 0);
}

const char *fg__store_shards_last_error(fg_store *s)
{
    shards_store *st = (shards_store *)s;
    uint64_t best = 0;
    const char *e = "";
    for (unsigned i = 0; i < st->n; i++) {
        uint64_t seq = fg__store_redis_error_seq(st->node[i]);
        if (seq > best) {
            best = seq;
            e = fg__store_redis_last_error(st->node[i]);
        }
    }
    return e;
}

fg_store *fg__store_shards_open(const char *url, struct event_base *base,
                                char *err, size_t errlen)
{
    parsed *p = parse(url, err, errlen);
    if (!p)
        return NULL;
    shards_store *st = fg__calloc(1, sizeof *st);
    const char *names[FG__RING_NODES_MAX];
    if (!st) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        goto fail;
    }
    st->base.ops = base ? &shards_async_ops : &shards_ops;
    st->base.nodes = p->n;
    st->base.process = fg__process_mark();
    for (unsigned i = 0; i < p->n; i++)
        names[i] = p->names[i];
    if (fg__ring_init(&st->ring, names, p->n) != FG_OK) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        goto fail;
    }
    /* A node that cannot be reached at open sends its own keys to their
     * failure policy until it is back; the store is unreachable only when
     * no node is. A node that answers and refuses (a password, a database)
     * is a configuration error. */
    unsigned down = 0;
    char first_why[400] = "";
    for (; st->n < p->n; st->n++) {
        char why[400];
        int unreachable;
        st->node[st->n] = fg__store_redis_open_ex(
            p->urls[st->n], base, 1, &unreachable, why, sizeof why);
        if (!st->node[st->n]) {
            fg__seterr(err, errlen, FG_EBACKEND, "shards: node %u: %s",
                       st->n + 1, why);
            goto fail;
        }
        if (unreachable && !down++)
            snprintf(first_why, sizeof first_why, "%s", why);
    }
    if (down == p->n) {
        fg__seterr(err, errlen, FG_EBACKEND,
                   "shards: no node can be reached (node 1: %s)", first_why);
        goto fail;
    }
    fg__free(p);
    return &st->base;
fail:
    if (st)
        shards_close(&st->base);
    fg__free(p);
    return NULL;
}

/* The first node's that has one. */
static const char *shards_warning(fg_store *s)
{
    shards_store *st = (shards_store *)s;
    for (unsigned i = 0; i < s->nodes; i++) {
        const char *w = fg_store_warning(st->node[i]);
        if (w)
            return w;
    }
    return NULL;
}

#define SHARDS_OPS_COMMON                                                      \
    .scheme = "shards", .limiter_init = shards_limiter_init,                   \
    .check = shards_check, .refund = shards_refund, .close = shards_close,     \
    .peek = shards_peek, .reset = shards_reset, .node_of = shards_node_of,     \
    .node_name = shards_node_name, .node_addr = shards_node_addr,              \
    .node_error = shards_node_error, .warning = shards_warning

static const fg__store_ops shards_ops = {SHARDS_OPS_COMMON};
static const fg__store_ops shards_async_ops = {
    SHARDS_OPS_COMMON, .check_async = shards_check_async, .busy = shards_busy};
