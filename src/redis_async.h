/* redis_async.h -- the Redis store's state, and its asynchronous client
 * (redis_async.c); the blocking client and the store are store_redis.c. */
#ifndef FG_REDIS_ASYNC_H
#define FG_REDIS_ASYNC_H

#include <stdint.h>

#include <event2/event.h>

#include "redis_conn.h"
#include "redis_proto.h"
#include "redis_store.h"
#include "store.h"

typedef struct fg__redis_store {
    fg_store base;
    fg__rnode node;
    fg_clock_fn clock;
    void *clock_ctx;

    /* Asynchronous client (node.evb != NULL); the loop's thread only. */
    struct event *timer;
    uint64_t timer_at;             /* 0: not armed */
    int looked_again;              /* on_timer deferred once: it was late */
    struct fg__aslot *head, *tail; /* awaiting replies, oldest first */
    struct fg__aslot *free_slots;
    struct fg__rfund *free_refunds; /* records of refunds no longer in flight */
    unsigned refunds_out;           /* refunds queued and not yet answered */
    struct fg__rfund *rhead, *rtail; /* those, oldest first */
    char *bbuf;                      /* a batch's command, formatted */
    size_t bcap;
    int closing;

    /* A node of Redis Cluster (fg__store_redis_set_cluster). */
    fg__redis_redirect_fn redirect;
    void *redirect_owner;
} fg__redis_store;

/* A check of the async client awaiting its replies. */
struct fg__aslot {
    struct fg__aslot *prev, *next;
    fg__req *req; /* NULL once completed early (deadline passed) */
    fg__raconn *conn;
    uint64_t deadline_us;    /* monotonic, kept after the check completes */
    fg__rcheck k;            /* the check's protocol */
    struct fg__aslot *bnext; /* the next check of the same batch */
    int bcount;              /* in a batch's first slot: its checks */
    int eval;                /* in a batch's first slot: sent with EVAL */
    struct fg__aslot *wnext; /* durable: the next check of the same WAIT */
    fg_decision wd;          /* durable: the decision the WAIT confirms */
    int held;                /* durable: allowed, waiting for the WAIT */
    uint64_t sent_us;        /* monotonic: when the check was submitted */
    int asked;               /* sent with ASKING: its give-back is too */
    /* A fixed window's INCRBY and PEXPIRE: the check is decided once both
     * answered (an expiry refused fails it). 1: INCRBY's reply due; 2: it
     * came and is kept here until PEXPIRE's. */
    int expiry;
    int first_none; /* INCRBY had no reply (the connection went) */
    redisReply first;
    char first_str[200];
};

/* A refund in flight on the async client, recycled through
 * 'free_refunds', so that a refund allocates nothing once the loop is
 * warm. */
struct fg__rfund {
    struct fg__rfund *next; /* in 'free_refunds'; in flight, its connection's
                               gated refunds (fg__raconn.rghead) */
    struct fg__rfund *rprev, *rnext; /* in flight */
    uint64_t deadline_us; /* monotonic: the limit's timeout after queuing */
    fg__raconn *conn;     /* the connection it went out on */
    struct fg__redis_store *st;
    fg__rrefund r;
};

/* The time a check sends: the caller's clock for windows and
 * 'clock_client' limits, else 0 (the script reads Redis TIME). */
uint64_t fg__redis_check_now(fg__redis_store *st, const fg_limiter *l);

/* PEXPIRE ... NX answered with an error: Redis before 7.0 has no NX, and
 * window keys would then never expire. Says so in the node's error. */
int fg__redis_pexpire_error(fg__rnode *nd, const redisReply *r);

/* Durable limits (durable = replica): "WAIT 1 ms" in 'cmd', with the time
 * left before 'deadline' (at least 1 ms: 0 would wait for ever); whether
 * WAIT's reply 'w' says a replica holds the writes before it; and the
 * error of a write no replica confirmed (FG_ETIMEOUT, noted on 'nd'). */
void fg__redis_wait_cmd(fg__rcmd *cmd, uint64_t deadline);
int fg__redis_replicated(const redisReply *w);
int fg__redis_not_replicated(fg__rnode *nd);

/* Make 'st' an async store on 'base': its node's hooks and its deadline
 * timer. FG_OK or FG_ENOMEM. */
int fg__redis_async_start(fg__redis_store *st, struct event_base *base);

/* Complete every check still waiting with FG_EBACKEND, and free what the
 * async client holds. */
void fg__redis_async_close(fg__redis_store *st);

/* The store operations of the async client (fg__store_ops). */
void fg__redis_check_async(fg_store *s, fg__req *req);
int fg__redis_refund_async(fg_store *s, fg_limiter *l, const char *key,
                           size_t keylen, uint64_t cost, const fg__taken *t);
unsigned fg__redis_busy(fg_store *s);

#endif
