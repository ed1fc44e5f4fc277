/* fg__sentinel_store.h -- the Sentinel store's state, shared by the store
 * (store_sentinel.c: open, close, operations, masters, the blocking store's
 * thread) and the async store's watch on its loop (sentinel_watch.c). */
#ifndef FG_SENTINEL_STORE_H
#define FG_SENTINEL_STORE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "dns.h"
#include "redis_url.h"
#include "sentinel.h"
#include "store.h"

/* Deadline of one question (a sentinel, or a candidate's ROLE) after open. */
#define ASK_TIMEOUT_MS 200u
/* While checks fail, how often the sentinels are asked again. */
#define RETRY_US 100000u
/* How often they are asked again while all is well: a master name moved
 * to another server (SENTINEL REMOVE, then MONITOR) publishes no
 * +switch-master, and the old master may still take writes. */
#define RECHECK_US 5000000u

/* A Redis store for one master address. */
typedef struct fg__sentinel_inner {
    struct fg__sentinel_inner *next; /* in 'retired' */
    fg_store *st;
    char host[FG__SENTINEL_HOST_MAX];
    int port;
    atomic_uint inflight; /* checks handed to it and not completed */
    uint64_t retired_us;  /* monotonic; 0 while current */
} fg__sentinel_inner;

struct fg__sentinel_store;

/* An async check on its way through an inner store: counted there, and its
 * result seen here before the caller's callback. */
typedef struct fg__sentinel_pending {
    struct fg__sentinel_pending *next; /* in 'free_pending' */
    struct fg__sentinel_store *st;
    fg__sentinel_inner *in;
    fg_check_cb cb;
    void *data;
} fg__sentinel_pending;

typedef struct fg__sentinel_store {
    fg_store base;
    fg__sentinel_url u;
    char addr[FG__SENTINELS_MAX][INET6_ADDRSTRLEN]; /* resolved at open */
    fg__redis_url r; /* the masters' options: prefix, user, password */
    char name[FG__SENTINEL_NAME_MAX + 16];

    pthread_mutex_t mu;      /* guards 'cur', 'retired' and 'errstr' */
    fg__sentinel_inner *cur; /* NULL until a master is known */
    fg__sentinel_inner *retired;
    char errstr[512];
    atomic_int suspect; /* checks failed since the last success */
    atomic_ulong switches;

    /* Blocking store: the thread that asks the sentinels. */
    pthread_t thr;
    int thr_on;
    pthread_cond_t cv;
    int wake, stop;

    /* Async store: the loop's thread only. */
    struct event_base *evb;
    struct event *tick;
    redisAsyncContext *q; /* the question in flight */
    struct event *q_timer;
    /* 0 idle, 1 asking sentinel q_idx, 2 checking 'cand', 3 waiting to
     * check it again (a promotion not done yet), 4 looking up its name */
    int q_phase;
    unsigned q_idx;
    int q_hint;            /* 'cand' comes from a promotion event */
    uint64_t hint_wait_us; /* until when a promotion is waited for */
    /* The master left on a promotion event: sentinels name it until they
     * see the promotion themselves, and it says it is a master until it is
     * demoted, so it is not gone back to before 'prev_until_us'. */
    char prev[FG__SENTINEL_HOST_MAX];
    int prev_port;
    uint64_t prev_until_us;
    int q_again;       /* asked to look up again meanwhile */
    uint64_t q_end_us; /* when the last lookup ended */
    char cand[FG__SENTINEL_HOST_MAX];
    int cand_port;
    /* The names Sentinel gives (announce-hostnames) are looked up without
     * blocking the loop, once a candidate: its address, "" until known. */
    fg__dns *dns;
    fg__dns_q *q_dns;
    char cand_addr[INET6_ADDRSTRLEN];
    /* Subscribed to +switch-master and the promotion event, one connection
     * a sentinel, each tried again RETRY_US after it failed. */
    redisAsyncContext *sub[FG__SENTINELS_MAX];
    uint64_t sub_retry_us[FG__SENTINELS_MAX];
    fg__sentinel_pending *free_pending;
    int closing;
} fg__sentinel_store;

/* The sentinels' last error, for logs (printf-style); cleared when a
 * sentinel confirms the master in use, or a new one is installed. */
void fg__sentinel_set_error(fg__sentinel_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fg__sentinel_clear_error(fg__sentinel_store *st);
/* "host:port", "[v6]:port" for messages. */
void fg__sentinel_hostport(const char *host, int port, char *buf, size_t n);

/* Open a Redis store for the master 'host':'port', connecting to 'addr'
 * (its numeric address; NULL: 'host', resolved by a blocking getaddrinfo)
 * ('lazy': without probing it). */
fg__sentinel_inner *fg__sentinel_inner_open(fg__sentinel_store *st,
                                            const char *host, int port,
                                            const char *addr, int lazy,
                                            char *err, size_t errlen);
/* Route new checks to 'in'; the old master's store retires. */
void fg__sentinel_install(fg__sentinel_store *st, fg__sentinel_inner *in);
/* Whether the current master is 'host':'port'. */
int fg__sentinel_same_master(fg__sentinel_store *st, const char *host,
                             int port);
/* Close the retired stores whose checks are done, or that waited long
 * enough ('all': every one). Not from inside one of their callbacks. */
void fg__sentinel_reap(fg__sentinel_store *st, int all);
/* The current master's store, counted as in use; NULL when none is known. */
fg__sentinel_inner *fg__sentinel_take(fg__sentinel_store *st);

/* Promotions this process followed (sentinel_moved.c), for the stores
 * of the same master name and first sentinel: fg__sentinel_moved records
 * one; fg__sentinel_moved_to reads a sentinel's answer 'host':'port'
 * naming the old master of one as naming the new (1; 0: left as it is);
 * fg__sentinel_moved_seen forgets them (the sentinels have seen the
 * switch, or the new master says it is a replica). */
void fg__sentinel_moved(const fg__sentinel_store *st, const char *from,
                        int from_port, const char *to, int to_port);
int fg__sentinel_moved_to(const fg__sentinel_store *st, char *host,
                          size_t hostlen, int *port);
void fg__sentinel_moved_seen(const fg__sentinel_store *st);

/* The async store's watch (sentinel_watch.c): its timers (FG_OK or
 * FG_ENOMEM), started once a first lookup is done; and a lookup, asking
 * the sentinels in turn which address is the master. */
int fg__sentinel_watch_init(fg__sentinel_store *st);
void fg__sentinel_watch_start(fg__sentinel_store *st);
void fg__sentinel_lookup_start(fg__sentinel_store *st);

#endif
