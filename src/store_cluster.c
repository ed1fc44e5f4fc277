/* store_cluster.c -- "cluster=redis://HOST:PORT[,redis://HOST:PORT...]":
 * Redis Cluster.
 *
 * A key's counters live in the slot of its hash tag (the user's key: every
 * key of a check, both windows of a sliding window included, is
 * "prefix name:{key}..."), on the master that serves the slot. Each master
 * is a whole Redis store (store_redis.c: connections, pipeline, batches,
 * backoff), opened when the slot map first names it; this store keeps the
 * map and routes. A token bucket batch holds the keys of many slots of one
 * master, which declared keys may not: in cluster mode the Redis store
 * passes them as arguments (redis_scripts.c), and a master that lost one
 * of the slots refuses the whole batch before writing anything.
 *
 * The map comes from CLUSTER SLOTS: at open (blocking, from the URL's
 * nodes in turn), and again after MOVED, READONLY, CLUSTERDOWN or a failed
 * node. Replies that redirect a check are followed, within its deadline
 * and at most MAX_HOPS times: MOVED (the slot's master changed: the map is
 * fixed and read again), ASK (a slot being migrated: once, with ASKING),
 * TRYAGAIN (a multi-key check during a migration: again a moment later),
 * READONLY and CLUSTERDOWN (a failover: again once the map is read anew).
 * A check that cannot be placed fails with FG_EBACKEND, which its limit's
 * failure policy answers.
 *
 * Masters named by host name (cluster-preferred-endpoint-type hostname):
 * at open, and in a blocking store, the name is resolved by getaddrinfo();
 * an async store, once open, looks it up with evdns (dns.c), never
 * blocking its loop: until the answer (at most FG__DNS_TIMEOUT_MS) that
 * master is unknown, its slots' checks fail (their limits' policy), and
 * the map is read again once it is known.
 *
 * Threads: blocking checks may run on many threads; the map is bytes read
 * and written with relaxed atomics, and the table of masters only grows,
 * under 'mu'. An async store belongs to its loop's thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "process.h"
#include "cluster_map.h"
#include "dns.h"
#include "redis_store.h"
#include "redis_url.h"
#include "store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

#define MAX_HOPS        5
#define RETRY_US        2000u   /* TRYAGAIN, READONLY, CLUSTERDOWN: again */
#define REFRESH_MIN_US  100000u /* between two readings of the map */
#define REFRESH_IDLE_US 1000000u
#define REFRESH_WAIT_US 1000000u /* for a node's CLUSTER SLOTS answer */
#define NO_NODE         255
#define LOOKUPS_MAX     8 /* masters' names looked up at once */

typedef struct cluster_store {
    fg_store base;
    struct event_base *evb;
    fg__redis_url url; /* the first node's: user, password, prefix */

    pthread_mutex_t mu; /* guards the growth of 'node' and 'addr' */
    atomic_uint nnodes;
    char addr[FG__CLUSTER_NODES_MAX][FG__CLUSTER_ADDR_MAX];
    fg_store *_Atomic node[FG__CLUSTER_NODES_MAX];
    _Atomic uint8_t slot[FG__CLUSTER_SLOTS]; /* index into 'node' */

    atomic_ullong refreshed_us; /* the last reading of the map (asked) */
    atomic_int refreshing;      /* a reading in flight or running */
    /* Blocking: 1 + a node whose check failed too late to read the map
     * then (a silent death times out at the deadline); the next check
     * reads it first, asking the other nodes. 0: none. */
    atomic_int stale;
    unsigned next_ask; /* the node to ask next */
    unsigned asked;    /* the node the last CLUSTER SLOTS went to */
    /* The 'priv' of a CLUSTER SLOTS sent to node i: its answer names it. */
    struct slots_ask {
        struct cluster_store *st;
        unsigned i;
    } ask[FG__CLUSTER_NODES_MAX];

    /* Async: checks waiting to be sent again, and the loop's timer for
     * them and for reading the map. */
    fg__req *retry_head, *retry_tail;
    struct event *timer;
    uint64_t timer_at;       /* when it fires (monotonic us); 0: not armed */
    uint64_t err_seen;       /* the nodes' errors at the last reading */
    uint64_t err_changed_us; /* when they last changed */
    int closing;
    /* Async, once open: the masters' names being looked up. */
    int on_loop;
    fg__dns *dns;
    struct name_lookup {
        struct cluster_store *st;
        fg__dns_q *q; /* NULL: a free entry */
        char addr[FG__CLUSTER_ADDR_MAX];
    } look[LOOKUPS_MAX];
    /* Why the last lookup of a master's name failed ("" since one
     * succeeded): the reason its slots have no master (the loop's). */
    char dns_why[400];
    /* A seed passed over at open (its name did not resolve), for
     * fg_store_warning; "" when none. */
    char seed_why[1100];
} cluster_store;

static const fg__store_ops cluster_ops, cluster_async_ops;
static int on_redirect(void *owner, fg__req *req, const char *s, size_t len);

/* The slot of 'key': its hash tag is the key up to its first '}'. A key
 * whose tag would be empty (an empty key, or one that begins with '}')
 * would spread a sliding window's two keys over two slots: -1. */
static int key_slot(const char *key, size_t keylen)
{
    const char *close = memchr(key, '}', keylen);
    size_t n = close ? (size_t)(close - key) : keylen;
    if (n == 0)
        return -1;
    return (int)(fg__crc16(key, n) & (FG__CLUSTER_SLOTS - 1));
}

/* The index of the master at 'addr' among those known, or -1. */
static int node_known(cluster_store *st, const char *addr)
{
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(st->addr[i], addr) == 0)
            return (int)i;
    return -1;
}

/* The host of 'addr' ("host:port", "[v6]:port"), and its port. */
static void addr_host(const char *addr, char *host, size_t n);

/* Open the store of the master 'addr' ("host:port"), connecting to 'num'
 * (the numeric address of its host, looked up already; NULL: the store
 * resolves it), unless it is known: its index, or -1 when the table is
 * full or the store cannot be made. A store of a host name looks it up
 * again when its connections fail (a restarted pod). */
static int node_add_why(cluster_store *st, const char *addr, const char *num,
                        char *why, size_t whylen)
{
    pthread_mutex_lock(&st->mu);
    int found = node_known(st, addr);
    unsigned n = atomic_load(&st->nnodes);
    if (found < 0 && n < FG__CLUSTER_NODES_MAX &&
        strlen(addr) < FG__CLUSTER_ADDR_MAX) {
        char url[1024];
        fg_store *nd = NULL;
        if (fg__redis_url_for(&st->url, addr, url, sizeof url) != FG_OK)
            snprintf(why, whylen, "cluster: node %s: address too long", addr);
        else
            nd = num ? fg__store_redis_open_num(url, num, st->evb, why, whylen)
                     : fg__store_redis_open(url, st->evb, why, whylen);
        if (nd) {
            fg__store_redis_set_cluster(nd, on_redirect, st);
            strcpy(st->addr[n], addr);
            atomic_store(&st->node[n], nd);
            atomic_store(&st->nnodes, n + 1);
            found = (int)n;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return found;
}

static int node_add(cluster_store *st, const char *addr, const char *num)
{
    char why[256];
    return node_add_why(st, addr, num, why, sizeof why);
}

static void refresh_async(cluster_store *st);

/* A master's name looked up: its store is opened, and the map read again
 * to give it its slots. */
static void on_node_addr(int rc, const char *num, const char *why, void *data)
{
    struct name_lookup *l = data;
    cluster_store *st = l->st;
    l->q = NULL;
    if (st->closing)
        return;
    if (rc != FG_OK) {
        /* Asked again when a map or MOVED names it. */
        snprintf(st->dns_why, sizeof st->dns_why,
                 "cluster: master %.100s: %.200s", l->addr, why);
        return;
    }
    st->dns_why[0] = '\0';
    if (node_add(st, l->addr, num) >= 0) {
        st->err_changed_us = fg__mono_us(NULL);
        refresh_async(st);
    }
}

/* The index of the master at 'addr', opening its store when new; -1 when
 * the table is full or the store cannot be made, or (async, once open)
 * while its name is looked up. */
static int node_for(cluster_store *st, const char *addr)
{
    char host[FG__CLUSTER_ADDR_MAX], num[INET6_ADDRSTRLEN], why[200];
    unsigned char buf[sizeof(struct in6_addr)];
    int k = node_known(st, addr);
    if (k >= 0)
        return k;
    addr_host(addr, host, sizeof host);
    if (!st->on_loop || inet_pton(AF_INET, host, buf) == 1 ||
        inet_pton(AF_INET6, host, buf) == 1)
        return node_add(st, addr, NULL); /* getaddrinfo(), if a name */
    struct name_lookup *l = NULL;
    for (unsigned i = 0; i < LOOKUPS_MAX; i++) {
        if (st->look[i].q && !strcmp(st->look[i].addr, addr))
            return -1; /* on its way */
        if (!st->look[i].q && !l)
            l = &st->look[i];
    }
    if (!l || strlen(addr) >= sizeof l->addr)
        return -1;
    strcpy(l->addr, addr);
    l->st = st;
    int rc = fg__dns_lookup(st->dns, host, NULL, on_node_addr, l, &l->q, num,
                            why, sizeof why);
    if (rc < 0)
        snprintf(st->dns_why, sizeof st->dns_why,
                 "cluster: master %.100s: %.200s", addr, why);
    if (rc != FG_OK)
        return -1; /* on its way (1), or not found */
    return node_add(st, addr, num);
}

/* Take the slot map 'm' (read from node 'from') as the cluster's. */
static void map_apply(cluster_store *st, const fg__cluster_map *m)
{
    int idx[FG__CLUSTER_NODES_MAX];
    for (unsigned i = 0; i < m->nmasters; i++)
        idx[i] = node_for(st, m->master[i]);
    for (unsigned s = 0; s < FG__CLUSTER_SLOTS; s++) {
        int k = m->slot[s] == 255 ? -1 : idx[m->slot[s]];
        atomic_store_explicit(&st->slot[s], k < 0 ? NO_NODE : (uint8_t)k,
                              memory_order_relaxed);
    }
}

/* The host of 'addr' ("host:port"), for a node that names itself "". */
static void addr_host(const char *addr, char *host, size_t n)
{
    const char *colon = strrchr(addr, ':');
    size_t len = colon ? (size_t)(colon - addr) : strlen(addr);
    if (len && addr[0] == '[') /* "[v6]:port" */
        addr++, len -= 2;
    snprintf(host, n, "%.*s", (int)len, addr);
}

/* Read the map from node 'i' by 'deadline' (blocking). FG_OK, or the
 * reason in 'err'. */
static int refresh_from(cluster_store *st, unsigned i, uint64_t deadline,
                        char *err, size_t errlen)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    int rc;
    fg_store *nd = atomic_load(&st->node[i]);
    redisReply *r = fg__store_redis_command(nd, deadline, 2, argv, &rc);
    if (!r) {
        /* The node's own words when it has some (a refused password). */
        const char *why = fg__store_redis_last_error(nd);
        return fg__seterr(err, errlen, rc, "cluster: %s: %s", st->addr[i],
                          why && why[0] ? why : fg_strerror(rc));
    }
    fg__cluster_map *m = fg__malloc(sizeof *m);
    char host[FG__CLUSTER_ADDR_MAX];
    addr_host(st->addr[i], host, sizeof host);
    if (!m)
        rc = fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    else if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6))
        rc = fg__seterr(err, errlen, FG_EINVAL,
                        "cluster: %s refuses CLUSTER SLOTS to this user "
                        "(%.120s): it needs +cluster|slots",
                        st->addr[i], r->str);
    else if (r->type == REDIS_REPLY_ERROR)
        rc = fg__seterr(err, errlen, FG_EINVAL,
                        "cluster: %s is not a cluster node (%.120s)",
                        st->addr[i], r->str);
    else if ((rc = fg__cluster_map_parse(m, r, host)) != FG_OK)
        fg__seterr(err, errlen, rc,
                   rc == FG_ERANGE ? "cluster: %s: more than 64 masters"
                                   : "cluster: %s: CLUSTER SLOTS answered "
                                     "something else than a slot map",
                   st->addr[i]);
    else
        map_apply(st, m);
    fg__free(m);
    freeReplyObject(r);
    return rc;
}

/* 1 when the map 'm' names a master of the map in use (one that holds a
 * slot): the same cluster, seen from another node. */
static int shares_master(cluster_store *st, const fg__cluster_map *m)
{
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned x = 0; x < m->nmasters; x++)
        for (unsigned k = 0; k < n; k++) {
            if (strcmp(st->addr[k], m->master[x]) != 0)
                continue;
            for (unsigned s = 0; s < FG__CLUSTER_SLOTS; s++)
                if (atomic_load_explicit(&st->slot[s], memory_order_relaxed) ==
                    k)
                    return 1;
        }
    return 0;
}

/* At open, once seed 'first' gave the map: each later seed that answers
 * CLUSTER SLOTS by 'deadline' (each its share) must be of the same
 * cluster, or the store would move to another cluster whenever it reads
 * the map from that seed. FG_OK, or FG_EINVAL with the reason. A seed
 * that does not answer, or answers something else, is left to the checks
 * (as a seed that is down). */
static int seeds_agree(cluster_store *st, unsigned first, unsigned nseeds,
                       uint64_t deadline, char *err, size_t errlen)
{
    fg__cluster_map *m = fg__malloc(sizeof *m);
    if (!m)
        return FG_OK; /* nothing learnt, nothing refused */
    int rc = FG_OK;
    for (unsigned j = first + 1; j < nseeds && rc == FG_OK; j++) {
        uint64_t now = fg__mono_precise_us();
        uint64_t mine =
            now < deadline ? now + (deadline - now) / (nseeds - j) : now;
        const char *argv[] = {"CLUSTER", "SLOTS"};
        int qrc;
        redisReply *r = fg__store_redis_command(atomic_load(&st->node[j]), mine,
                                                2, argv, &qrc);
        char host[FG__CLUSTER_ADDR_MAX];
        addr_host(st->addr[j], host, sizeof host);
        if (r && fg__cluster_map_parse(m, r, host) == FG_OK &&
            m->nmasters > 0 && !shares_master(st, m))
            rc = fg__seterr(err, errlen, FG_EINVAL,
                            "cluster: the seeds %s and %s belong to different "
                            "clusters (no master in common)",
                            st->addr[first], st->addr[j]);
        if (r)
            freeReplyObject(r);
    }
    fg__free(m);
    return rc;
}

/* Read the map again (blocking clients) by the check's 'deadline', from
 * the nodes in turn but 'skip' (the one that just failed; -1: none), at
 * most once per REFRESH_MIN_US and by one thread at a time. */
static void refresh_blocking(cluster_store *st, uint64_t deadline, int skip)
{
    uint64_t t = fg__mono_us(NULL);
    if (t < atomic_load(&st->refreshed_us) + REFRESH_MIN_US ||
        fg__mono_precise_us() >= deadline)
        return;
    if (atomic_exchange(&st->refreshing, 1))
        return;
    atomic_store(&st->refreshed_us, t);
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned k = 0; k < n; k++) {
        unsigned i = (st->next_ask + k) % n;
        if ((int)i == skip)
            continue;
        if (refresh_from(st, i, deadline, NULL, 0) == FG_OK) {
            st->next_ask = i;
            break;
        }
        st->next_ask = i + 1; /* a hung node is not asked first again */
    }
    atomic_store(&st->refreshing, 0);
}

/* The node of a check of 'key', or -1 (with '*rc'). */
static int route(cluster_store *st, const char *key, size_t keylen, int *rc)
{
    int slot = key_slot(key, keylen);
    if (slot < 0) {
        *rc = FG_EKEY;
        return -1;
    }
    uint8_t k = atomic_load_explicit(&st->slot[slot], memory_order_relaxed);
    if (k == NO_NODE) {
        *rc = FG_EBACKEND;
        return -1;
    }
    return k;
}

static int starts(const char *s, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && memcmp(s, p, n) == 0;
}

/* What to do after node 'from' answered the error reply 's': follow a
 * redirection (FG__CLUSTER_MOVED or _ASK in 'rd'), try again after a
 * while (1: the map may be wrong), or not at all (0). */
static int judge(cluster_store *st, unsigned from, const char *s, size_t len,
                 fg__cluster_redirect *rd)
{
    char host[FG__CLUSTER_ADDR_MAX] = "";
    if (from < atomic_load(&st->nnodes))
        addr_host(st->addr[from], host, sizeof host);
    fg__cluster_redirect_parse(s, len, host, rd);
    if (rd->kind == FG__CLUSTER_MOVED) {
        int k = node_for(st, rd->addr);
        if (k >= 0)
            atomic_store_explicit(&st->slot[rd->slot], (uint8_t)k,
                                  memory_order_relaxed);
        return 0;
    }
    if (rd->kind)
        return 0;
    return starts(s, len, "TRYAGAIN") || starts(s, len, "READONLY") ||
           starts(s, len, "CLUSTERDOWN") ||
           memmem(s, len, "while the cluster is down", 25) != NULL ||
           memmem(s, len, "non local key", 13) != NULL;
}

/* ---- Blocking ----------------------------------------------------------- */

static int cluster_check(fg_store *s, fg_limiter *l, const char *key,
                         size_t keylen, uint64_t cost, uint64_t age_us,
                         fg_decision *d)
{
    cluster_store *st = (cluster_store *)s;
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)l->lim.timeout_ms * 1000u;
    int stale = atomic_exchange(&st->stale, 0);
    if (stale)
        refresh_blocking(st, deadline, stale - 1);
    int rc, asking = 0, k = route(st, key, keylen, &rc);
    /* Every hop within the check's one deadline. */
    for (int hop = 0; k >= 0 && hop < MAX_HOPS; hop++) {
        char err[200] = "";
        fg__cluster_redirect rd;
        rc = fg__store_redis_check_ex(atomic_load(&st->node[k]), l, key, keylen,
                                      cost, age_us, asking, deadline, d, err,
                                      sizeof err);
        if (rc == FG_OK)
            return rc;
        if (!err[0]) {
            /* The node failed (down, slow): perhaps a failover. Too late
             * to read the map now, the next check does. */
            if (fg__mono_precise_us() >= deadline)
                atomic_store(&st->stale, k + 1);
            else
                refresh_blocking(st, deadline, k);
            return rc;
        }
        int again = judge(st, (unsigned)k, err, strlen(err), &rd);
        asking = rd.kind == FG__CLUSTER_ASK;
        if (rd.kind) {
            if (!asking)
                refresh_blocking(st, deadline, -1);
            k = node_for(st, rd.addr);
            continue;
        }
        if (!again)
            return rc;
        refresh_blocking(st, deadline, -1);
        uint64_t now = fg__mono_precise_us();
        if (now + RETRY_US >= deadline)
            return rc;
        struct timespec ts = {0, RETRY_US * 1000};
        nanosleep(&ts, NULL);
        k = route(st, key, keylen, &rc);
    }
    if (k < 0)
        refresh_blocking(st, deadline, -1);
    return rc;
}

static int cluster_refund(fg_store *s, fg_limiter *l, const char *key,
                          size_t keylen, uint64_t cost, const fg__taken *t)
{
    cluster_store *st = (cluster_store *)s;
    int rc, k = route(st, key, keylen, &rc);
    if (k < 0)
        return rc;
    fg_store *nd = atomic_load(&st->node[k]);
    /* A refund whose slot moved meanwhile is lost: the key stays counted,
     * which can refuse a request too many, never admit one. */
    return nd->ops->refund(nd, l, key, keylen, cost, t);
}

/* An operator's peek or reset goes to the master of the key's slot as
 * the map has it. A slot that moved answers MOVED, and a master gone does
 * not answer: a blocking store then reads the map again and asks once
 * more (the new master, when the slot has one) while the limit's timeout
 * since the call has not passed; past it, the next call reads the map
 * first. (A blocking store that only peeks and resets, such as serve's
 * admin routes, has no checks to read the map for it.) An asynchronous
 * store's map is read again on its loop. Not followed through ASK: a
 * slot half moved fails, and is asked again by the caller. */
static int again_after_map(cluster_store *st, int k, int rc, uint64_t deadline)
{
    if (!fg__is_store_failure(rc) || st->evb)
        return 0;
    if (fg__mono_precise_us() >= deadline) {
        /* As a check's: the node that failed + 1 (none: past them all). */
        atomic_store(&st->stale, k >= 0 ? k + 1 : FG__CLUSTER_NODES_MAX + 2);
        return 0;
    }
    refresh_blocking(st, deadline, k);
    return 1;
}

/* The deadline of an operator's call, the map read first when a call
 * before it found it stale. */
static uint64_t op_deadline(cluster_store *st, const fg_limiter *l)
{
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)l->lim.timeout_ms * 1000u;
    int stale = st->evb ? 0 : atomic_exchange(&st->stale, 0);
    if (stale)
        refresh_blocking(st, deadline, stale - 1);
    return deadline;
}

/* A peek (into 'd') or, with 'd' NULL, a reset of 'key' on its master. */
static int at_master(fg_store *s, fg_limiter *l, const char *key, size_t keylen,
                     fg_decision *d)
{
    cluster_store *st = (cluster_store *)s;
    uint64_t deadline = op_deadline(st, l);
    int rc = FG_OK;
    for (int round = 0; round < 2; round++) {
        int k = route(st, key, keylen, &rc);
        if (k >= 0) {
            fg_store *nd = atomic_load(&st->node[k]);
            rc = d ? nd->ops->peek(nd, l, key, keylen, d)
                   : nd->ops->reset(nd, l, key, keylen);
        }
        if (round || !again_after_map(st, k, rc, deadline))
            break;
    }
    return rc;
}

static int cluster_peek(fg_store *s, fg_limiter *l, const char *key,
                        size_t keylen, fg_decision *d)
{
    return at_master(s, l, key, keylen, d);
}

static int cluster_reset(fg_store *s, fg_limiter *l, const char *key,
                         size_t keylen)
{
    return at_master(s, l, key, keylen, NULL);
}

/* ---- Asynchronous ------------------------------------------------------- */

/* Send 'req' to node 'k', whose breaker its outcome settles. */
static void send_to(cluster_store *st, int k, fg__req *req)
{
    fg_store *nd = atomic_load(&st->node[k]);
    fg__req_move(req, (unsigned)k);
    nd->ops->check_async(nd, req);
}

static void cluster_check_async(fg_store *s, fg__req *req)
{
    cluster_store *st = (cluster_store *)s;
    int rc, k = route(st, req->key, req->keylen, &rc);
    if (k < 0 || st->closing) {
        st->err_changed_us = fg__mono_us(NULL); /* read the map soon */
        fg__req_done(req, k < 0 ? rc : FG_EBACKEND, NULL);
        return;
    }
    send_to(st, k, req);
}

/* Make the timer fire within 'us', unless it fires sooner already: armed
 * again at every retryable reply, it would otherwise keep moving away
 * while they come faster than 'us', and the checks it retries (or fails at
 * their deadlines) would wait as long. */
static void timer_arm(cluster_store *st, uint64_t us)
{
    uint64_t at = fg__mono_us(NULL) + us;
    if (st->timer_at && st->timer_at <= at)
        return;
    st->timer_at = at;
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    evtimer_add(st->timer, &tv);
}

/* The reply to CLUSTER SLOTS, asked on node 'priv->i'. The answer of a
 * node given up on (on_timer) leaves the reading now in flight alone. */
static void on_slots(redisAsyncContext *ac, void *reply, void *priv)
{
    struct slots_ask *a = priv;
    cluster_store *st = a->st;
    redisReply *r = reply;
    (void)ac;
    int current = a->i == st->asked && atomic_load(&st->refreshing);
    if (current)
        atomic_store(&st->refreshing, 0);
    if (st->closing || !r || r->type != REDIS_REPLY_ARRAY) {
        if (current)
            st->next_ask++; /* ask another node next time */
        return;
    }
    fg__cluster_map *m = fg__malloc(sizeof *m);
    if (!m)
        return;
    char host[FG__CLUSTER_ADDR_MAX];
    addr_host(st->addr[a->i], host, sizeof host);
    if (fg__cluster_map_parse(m, r, host) == FG_OK)
        map_apply(st, m);
    else if (current)
        st->next_ask++; /* a map it cannot give (a node just reset) */
    fg__free(m);
}

/* Ask a node for the map, without waiting. */
static void refresh_async(cluster_store *st)
{
    unsigned n = atomic_load(&st->nnodes);
    if (!n || atomic_exchange(&st->refreshing, 1))
        return;
    atomic_store(&st->refreshed_us, fg__mono_us(NULL));
    for (unsigned t = 0; t < n; t++) {
        unsigned i = st->next_ask % n;
        st->ask[i] = (struct slots_ask){st, i};
        if (fg__store_redis_command_async(atomic_load(&st->node[i]), on_slots,
                                          &st->ask[i],
                                          "CLUSTER SLOTS") == FG_OK) {
            st->asked = i;
            return;
        }
        st->next_ask++;
    }
    atomic_store(&st->refreshing, 0);
}

/* The sum of the nodes' error counts: it moves when a node fails. */
static uint64_t errors_now(cluster_store *st)
{
    uint64_t sum = 0;
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned i = 0; i < n; i++)
        sum += fg__store_redis_error_seq(atomic_load(&st->node[i]));
    return sum;
}

/* Every RETRY_US while checks wait, else every REFRESH_MIN_US: send the
 * waiting checks again (or fail those past their deadline), and read the
 * map when a node failed since the last reading, or once a second. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    cluster_store *st = arg;
    (void)fd;
    (void)what;
    st->timer_at = 0;
    uint64_t now = fg__mono_us(NULL), e = errors_now(st);
    if (e != st->err_seen) {
        st->err_seen = e;
        st->err_changed_us = now;
    }
    /* While nodes fail (for 3 s after a new error), as often as allowed:
     * a promoted replica is found within REFRESH_MIN_US. */
    uint64_t every =
        now < st->err_changed_us + 3000000u ? REFRESH_MIN_US : REFRESH_IDLE_US;
    /* A node that does not answer CLUSTER SLOTS (hung, and no check
     * waits on it to find out) is given up: another is asked. Should its
     * answer come later, the map it gives is followed as any other: a
     * slot it gives wrongly is corrected by MOVED. */
    if (atomic_load(&st->refreshing) &&
        now >= atomic_load(&st->refreshed_us) + REFRESH_WAIT_US) {
        st->next_ask = st->asked + 1;
        atomic_store(&st->refreshing, 0);
    }
    if (now >= atomic_load(&st->refreshed_us) + every)
        refresh_async(st);
    fg__req *q = st->retry_head;
    st->retry_head = st->retry_tail = NULL;
    uint64_t pnow = fg__mono_precise_us();
    while (q) {
        fg__req *next = q->next;
        int rc, k = route(st, q->key, q->keylen, &rc);
        q->next = NULL;
        if (pnow >= q->deadline_us) {
            fg__req_done(q, FG_ETIMEOUT, NULL);
        } else if (k < 0) {
            fg__req_move(q, FG__CLUSTER_NODES_MAX); /* as cluster_node_of */
            fg__req_done(q, rc, NULL);
        } else {
            send_to(st, k, q);
        }
        q = next;
    }
    timer_arm(st, st->retry_head ? RETRY_US : REFRESH_MIN_US);
}

/* A node answered 'req' with the error 's'. */
static int on_redirect(void *owner, fg__req *req, const char *s, size_t len)
{
    cluster_store *st = owner;
    fg__cluster_redirect rd;
    if (!st->evb || st->closing || ++req->redirects > MAX_HOPS)
        return 0;
    int again = judge(st, req->node, s, len, &rd);
    if (rd.kind) {
        int k = node_for(st, rd.addr);
        if (k < 0)
            return 0;
        req->asking = rd.kind == FG__CLUSTER_ASK;
        if (!req->asking) /* read the whole map soon */
            st->err_changed_us = fg__mono_us(NULL);
        send_to(st, k, req);
        return 1;
    }
    if (!again)
        return 0;
    st->err_changed_us = fg__mono_us(NULL);
    req->next = NULL;
    if (st->retry_tail)
        st->retry_tail->next = req;
    else
        st->retry_head = req;
    st->retry_tail = req;
    timer_arm(st, RETRY_US);
    return 1;
}

/* ---- Store ------------------------------------------------------------- */

static int cluster_limiter_init(fg_store *s, fg_limiter *l, void **out,
                                char *err, size_t errlen)
{
    fg_store *first = atomic_load(&((cluster_store *)s)->node[0]);
    return first->ops->limiter_init(first, l, out, err, errlen);
}

static unsigned cluster_busy(fg_store *s)
{
    cluster_store *st = (cluster_store *)s;
    unsigned n = 0, nodes = atomic_load(&st->nnodes);
    for (unsigned i = 0; i < nodes; i++)
        n += fg__store_busy(atomic_load(&st->node[i]));
    return n;
}

static void cluster_close(fg_store *s)
{
    cluster_store *st = (cluster_store *)s;
    st->closing = 1;
    for (unsigned i = 0; i < LOOKUPS_MAX; i++)
        fg__dns_cancel(st->look[i].q);
    fg__dns_free(st->dns);
    while (st->retry_head) {
        fg__req *q = st->retry_head;
        st->retry_head = q->next;
        fg__req_done(q, FG_EBACKEND, NULL);
    }
    if (st->timer)
        event_free(st->timer);
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned i = 0; i < n; i++)
        fg_store_close(atomic_load(&st->node[i]));
    fg__redis_url_free(&st->url);
    pthread_mutex_destroy(&st->mu);
    fg__free(st);
}

/* A key whose slot has no master known now (a failover under way) is
 * counted apart, on a node of its own past the masters: its failures
 * must not open the breaker of a master that answers. */
static unsigned cluster_node_of(fg_store *s, const char *key, size_t keylen)
{
    int rc, k = route((cluster_store *)s, key, keylen, &rc);
    return k < 0 ? FG__CLUSTER_NODES_MAX : (unsigned)k;
}

static const char *cluster_node_name(fg_store *s, unsigned node)
{
    cluster_store *st = (cluster_store *)s;
    return node < atomic_load(&st->nnodes) ? st->addr[node] : NULL;
}

static const char *cluster_node_error(fg_store *s, unsigned node)
{
    cluster_store *st = (cluster_store *)s;
    if (node == FG__CLUSTER_NODES_MAX)
        return st->dns_why[0]
                   ? st->dns_why
                   : "cluster: no master known for the key's slot (the slot "
                     "map names none, or could not be read; read again while "
                     "keys fail)";
    if (node >= atomic_load(&st->nnodes))
        return NULL;
    return fg__store_redis_last_error(atomic_load(&st->node[node]));
}

const char *fg__store_cluster_last_error(fg_store *s)
{
    cluster_store *st = (cluster_store *)s;
    uint64_t best = 0;
    const char *e = "";
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned i = 0; i < n; i++) {
        fg_store *nd = atomic_load(&st->node[i]);
        uint64_t seq = fg__store_redis_error_seq(nd);
        if (seq > best) {
            best = seq;
            e = fg__store_redis_last_error(nd);
        }
    }
    return e;
}

/* The node URLs of "cluster=URL,URL,...", each checked, into 'addrs';
 * the first one's options into 'u'. */
static int parse(const char *url, fg__redis_url *u, char (*addrs)[256],
                 unsigned *n, char *err, size_t errlen)
{
    const char *p = url + strlen("cluster=");
    *n = 0;
    memset(u, 0, sizeof(*u));
    for (;;) { /* an empty part (",,", a ',' at the end) is refused */
        size_t len = strcspn(p, ",");
        char one[2048], why[256];
        fg__redis_url v;
        if (*n == 16)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "cluster: more than 16 node URLs");
        if (len == 0 || len >= sizeof one)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "cluster: node %u: empty or too long URL",
                              *n + 1);
        memcpy(one, p, len);
        one[len] = '\0';
        if (strncmp(one, "redis://", 8))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "cluster: node %u is not a redis:// URL", *n + 1);
        if (fg__redis_url_parse(one, &v, why, sizeof why) != FG_OK)
            return fg__seterr(err, errlen, FG_EINVAL, "cluster: node %u: %s",
                              *n + 1, why);
        int bad = v.db != 0 ? 1
                  : memchr(v.prefix, '{', v.prefixlen) ||
                          memchr(v.prefix, '}', v.prefixlen)
                      ? 2
                      : 0;
        snprintf(addrs[*n], sizeof addrs[0],
                 strchr(v.host, ':') ? "[%s]:%d" : "%s:%d", v.host, v.port);
        if (*n == 0)
            *u = v;
        else
            fg__redis_url_free(&v);
        (*n)++;
        if (bad == 1)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "cluster: Redis Cluster has database 0 only");
        if (bad == 2)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "cluster: the prefix may not hold '{' or '}' "
                              "(it would change the keys' hash tag)");
        p += len;
        if (*p == ',')
            p++;
        else
            break;
    }
    return FG_OK;
}

int fg__store_cluster_url_check(const char *url, char *err, size_t errlen)
{
    fg__redis_url u;
    char addrs[16][256];
    unsigned n;
    int rc = parse(url, &u, addrs, &n, err, errlen);
    if (n)
        fg__redis_url_free(&u);
    return rc;
}

static const char *masters_warning(cluster_store *st);

/* None of the 'n' seeds did 'what': each failed alike, most often, so the
 * last one's reason 'why' is given. */
static void seeds_failed(char *err, size_t errlen, int rc, unsigned n,
                         const char *what, const char *why)
{
    const char *last = strncmp(why, "cluster: ", 9) ? why : why + 9;
    if (n > 1)
        fg__seterr(err, errlen, rc,
                   "cluster: none of the %u seeds %s (the "
                   "last, %s)",
                   n, what, last);
    else
        fg__seterr(err, errlen, rc, "cluster: %s", last);
}

fg_store *fg__store_cluster_open(const char *url, struct event_base *base,
                                 char *err, size_t errlen)
{
    cluster_store *st = fg__calloc(1, sizeof *st);
    char addrs[16][256];
    unsigned n = 0;
    if (!st) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    st->base.ops = base ? &cluster_async_ops : &cluster_ops;
    st->base.nodes = FG__CLUSTER_NODES_MAX + 1; /* and keys of no master */
    st->base.process = fg__process_mark();
    st->evb = base;
    for (unsigned s = 0; s < FG__CLUSTER_SLOTS; s++)
        atomic_init(&st->slot[s], NO_NODE);
    if (parse(url, &st->url, addrs, &n, err, errlen) != FG_OK) {
        if (!n)
            memset(&st->url, 0, sizeof st->url);
        goto fail;
    }
    /* The seeds are opened as given (their names resolved now, as a Redis
     * store's are); one that cannot be (a name that does not resolve) is
     * passed over while another can. */
    char last_why[256] = ""; /* of the last seed passed over */
    for (unsigned i = 0; i < n; i++)
        if (node_add_why(st, addrs[i], NULL, last_why, sizeof last_why) < 0 &&
            last_why[0])
            snprintf(st->seed_why, sizeof st->seed_why,
                     "cluster: seed %u passed over: %s", i + 1, last_why);
    if (atomic_load(&st->nnodes) == 0) {
        seeds_failed(err, errlen, FG_EBACKEND, n, "could be opened", last_why);
        goto fail;
    }
    if (base) {
        st->timer = evtimer_new(base, on_timer, st);
        st->dns = fg__dns_new(base);
        if (!st->timer || !st->dns) {
            fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
            goto fail;
        }
        timer_arm(st, REFRESH_MIN_US);
    }
    /* The map now, from the first node that gives one; a node not in
     * cluster mode is a clear error at once. Unreachable: a lazy store
     * starts and reads it later, as a Redis store would connect later. */
    char why[300] = "";
    int rc = FG_EBACKEND;
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)st->url.connect_timeout_ms * 1000u;
    /* The seeds are the nodes so far (a seed given twice is one node). */
    unsigned nseeds = atomic_load(&st->nnodes), first = 0;
    for (unsigned i = 0; i < nseeds && rc != FG_OK; i++) {
        /* Each node its share of the time left: a hung one does not keep
         * the next from being asked. */
        uint64_t now = fg__mono_precise_us();
        uint64_t mine =
            now < deadline ? now + (deadline - now) / (nseeds - i) : now;
        rc = refresh_from(st, i, mine, why, sizeof why);
        first = i;
        if (rc == FG_EINVAL || rc == FG_ERANGE) {
            fg__seterr(err, errlen, rc, "%s", why);
            goto fail;
        }
    }
    atomic_store(&st->refreshed_us, fg__mono_us(NULL));
    if (rc != FG_OK && !st->url.lazy) {
        seeds_failed(err, errlen, rc, nseeds, "answered", why);
        goto fail;
    }
    if (rc == FG_OK &&
        seeds_agree(st, first, nseeds,
                    fg__mono_precise_us() +
                        (uint64_t)st->url.connect_timeout_ms * 1000u,
                    err, errlen) != FG_OK)
        goto fail;
    if (rc == FG_OK && !st->url.lazy) {
        /* Each node the map named is asked whether it evicts keys
         * (fg_store_warning), within the connect timeout in all. */
        unsigned nn = atomic_load(&st->nnodes);
        deadline = fg__mono_precise_us() +
                   (uint64_t)st->url.connect_timeout_ms * 1000u;
        for (unsigned i = 0; i < nn; i++) {
            uint64_t now = fg__mono_precise_us();
            uint64_t mine =
                now < deadline ? now + (deadline - now) / (nn - i) : now;
            fg__store_redis_settings_probe(atomic_load(&st->node[i]), mine);
        }
    }
    if (st->seed_why[0]) {
        /* The seed passed over, then what a master says (written at open
         * only: read by any thread after). */
        const char *w = masters_warning(st);
        size_t o = strlen(st->seed_why);
        if (w)
            snprintf(st->seed_why + o, sizeof st->seed_why - o, "; %s", w);
    }
    st->on_loop = base != NULL; /* from now on, names without blocking */
    return &st->base;
fail:
    cluster_close(&st->base);
    return NULL;
}

/* The first master's warning that has one (each written once, when
 * opened). */
static const char *masters_warning(cluster_store *st)
{
    unsigned n = atomic_load(&st->nnodes);
    for (unsigned i = 0; i < n; i++) {
        const char *w = fg_store_warning(atomic_load(&st->node[i]));
        if (w)
            return w;
    }
    return NULL;
}

/* A seed passed over at open (and the masters' warning after it), else
 * the masters'. */
static const char *cluster_warning(fg_store *s)
{
    cluster_store *st = (cluster_store *)s;
    return st->seed_why[0] ? st->seed_why : masters_warning(st);
}

#define CLUSTER_OPS_COMMON                                                     \
    .scheme = "cluster", .limiter_init = cluster_limiter_init,                 \
    .check = cluster_check, .refund = cluster_refund, .close = cluster_close,  \
    .peek = cluster_peek, .reset = cluster_reset, .node_of = cluster_node_of,  \
    .node_name = cluster_node_name, .node_error = cluster_node_error,          \
    .warning = cluster_warning

static const fg__store_ops cluster_ops = {CLUSTER_OPS_COMMON};
static const fg__store_ops cluster_async_ops = {
    CLUSTER_OPS_COMMON, .check_async = cluster_check_async,
    .busy = cluster_busy};
