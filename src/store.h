/* store.h -- the interface every store implements (memory, redis, ...).
 *
 * A store owns where counters live; the limiter (limiter.h, limiter.c)
 * owns policy: validation, timeouts, failure mode, circuit breaker and
 * local fallback. */
#ifndef FG_STORE_H
#define FG_STORE_H

#include "floodgate.h"
#include "limiter.h"

typedef struct fg__store_ops {
    const char *scheme;
    /* Prepare per-limiter data in '*out' (one fg__malloc block, freed with
     * the limiter, or NULL), or refuse a limit this store cannot enforce,
     * with the reason in 'err'. It may set 'l->check' (see struct
     * fg_limiter). */
    int (*limiter_init)(fg_store *st, fg_limiter *l, void **out, char *err,
                        size_t errlen);
    /* Decide 'cost' for 'key' (already validated) and fill 'd' but
     * 'd->source'. FG_OK, or a negative code when the store failed. A
     * cost with FG__COST_ADD is fg_add_at's, of units spent 'age_us' ago
     * (0 for a check). */
    int (*check)(fg_store *st, fg_limiter *l, const char *key, size_t keylen,
                 uint64_t cost, uint64_t age_us, fg_decision *d);
    /* Take ownership of 'req' and complete it with fg__req_done() exactly
     * once (possibly before returning). NULL: the store has no async form. */
    void (*check_async)(fg_store *st, fg__req *req);
    /* Give back 'cost' units of 'key' taken when 't' says (see
     * fg_refund_at; its age on the limiter's clock); on an async store,
     * queue it and return. NULL: refunds are not supported. */
    int (*refund)(fg_store *st, fg_limiter *l, const char *key, size_t keylen,
                  uint64_t cost, const fg__taken *t);
    /* fg_peek: fill 'd' (all but 'd->source') with what 'key' holds now,
     * writing nothing, blocking within the limit's timeout even on an
     * async store. fg_reset: delete every window of 'key'. Both take the
     * key as given to fg_check, so that a store that forwards each key to
     * one of several others passes them on unchanged. NULL: not
     * supported. */
    int (*peek)(fg_store *st, fg_limiter *l, const char *key, size_t keylen,
                fg_decision *d);
    int (*reset)(fg_store *st, fg_limiter *l, const char *key, size_t keylen);
    uint64_t (*keys)(fg_store *st);
    uint64_t (*evicted)(fg_store *st); /* NULL: none */
    /* Forget the keys 'l' holds (fg_limiter_free): no check can reach
     * them again. NULL: the store keeps none in this process. */
    void (*limiter_free)(fg_store *st, fg_limiter *l);
    /* The time on the clock the store decides on, for the age of a refund
     * (fg__taken). NULL: the library's clock (fg__mono_precise_us). */
    uint64_t (*now)(fg_store *st);
    void (*close)(fg_store *st);
    /* Refunds queued on an async store and not yet answered (written or
     * not): fg_limiter_pending counts them. NULL: none are kept. */
    unsigned (*busy)(fg_store *st);
    /* A store of several servers (shards): which of its 'nodes' (fixed at
     * open) holds 'key', and each node's name and last error. The limiter
     * keeps a circuit breaker per node, so that a node down sends only its
     * own keys to the failure policy. NULL: one node, the store itself. */
    unsigned (*node_of)(fg_store *st, const char *key, size_t keylen);
    const char *(*node_name)(fg_store *st, unsigned node);
    const char *(*node_error)(fg_store *st, unsigned node);
    /* Where a node's checks go now, when that can change (Sentinel: its
     * master); NULL: the node's name. */
    const char *(*node_addr)(fg_store *st, unsigned node);
    /* fg_store_warning; NULL: none. */
    const char *(*warning)(fg_store *st);
} fg__store_ops;

/* Every store begins with this header. */
struct fg_store {
    const fg__store_ops *ops;
    unsigned nodes; /* 1 unless ops->node_of */
    /* The loop of a store opened with fg_store_open_async, else NULL. */
    struct event_base *base;
    /* The process that opened it (process.h): another's calls are refused.
     * Set by each store's constructor, the inner stores of shards, Cluster
     * and Sentinel too (a child closes those it opened). */
    unsigned process;
};

/* Store constructors, by scheme. */
/* The most keys a memory store may be given (about 10^12). */
#define FG__MEMORY_MAX_KEYS ((uint64_t)1 << 40)
fg_store *fg__store_memory_open(const fg_memory_options *opt, char *err,
                                size_t errlen);
/* A memory store's max_keys; 0 for another store. */
uint64_t fg__store_memory_max_keys(fg_store *st);
/* The mean distance of a memory store's keys from their home slots, in
 * hundredths of a slot; 0 for another store. For tests. */
uint64_t fg__store_memory_probe_length(fg_store *st);
/* 'base' NULL for a blocking Redis store. */
fg_store *fg__store_redis_open(const char *url, struct event_base *base,
                               char *err, size_t errlen);
/* The same, for a host name 'url' names whose numeric address 'num' was
 * looked up already (a Cluster's master, learned on the loop). */
fg_store *fg__store_redis_open_num(const char *url, const char *num,
                                   struct event_base *base, char *err,
                                   size_t errlen);
/* The same as fg__store_redis_open; with 'keep_unreachable', a server that
 * cannot be reached at open (refused, timed out) is not an error: the store
 * opens, its error says why (also in 'err', and '*unreachable' is set), and
 * checks connect as they come. */
fg_store *fg__store_redis_open_ex(const char *url, struct event_base *base,
                                  int keep_unreachable, int *unreachable,
                                  char *err, size_t errlen);
/* "shards=URL,URL,...": Redis stores, a key on one by consistent hashing. */
fg_store *fg__store_shards_open(const char *url, struct event_base *base,
                                char *err, size_t errlen);
int fg__store_shards_url_check(const char *url, char *err, size_t errlen);
/* The error written last among the nodes'. */
const char *fg__store_shards_last_error(fg_store *st);
/* "cluster=URL,URL,...": Redis Cluster, from the first node that answers. */
fg_store *fg__store_cluster_open(const char *url, struct event_base *base,
                                 char *err, size_t errlen);
int fg__store_cluster_url_check(const char *url, char *err, size_t errlen);
const char *fg__store_cluster_last_error(fg_store *st);
/* "sentinel://HOST:PORT[,...]/MASTER": the master Sentinel names, followed
 * across failovers (store_sentinel.c). */
fg_store *fg__store_sentinel_open(const char *url, struct event_base *base,
                                  char *err, size_t errlen);
int fg__store_sentinel_url_check(const char *url, char *err, size_t errlen);
const char *fg__store_sentinel_last_error(fg_store *st);

/* 'st''s time for refund ages: see 'now' above. */
uint64_t fg__store_now(fg_store *st);
unsigned fg__store_busy(fg_store *st);

/* The node of 'key' on 'st' (0 on a store of one node). */
static inline unsigned fg__store_node_of(fg_store *st, const char *key,
                                         size_t keylen)
{
    return st->ops->node_of ? st->ops->node_of(st, key, keylen) : 0;
}

#endif
