/* redis_conn.h -- connections to one Redis server: the blocking pool and
 * the asynchronous pipeline's connection, with their handshake (AUTH,
 * SELECT, SCRIPT LOAD), deadlines, backoff and error reporting. What goes
 * over them is redis_proto.h's; the stores (store_redis.c, and the shard
 * and cluster stores, one node per server) own a node each and drive it. */
#ifndef FG_REDIS_CONN_H
#define FG_REDIS_CONN_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "redis_proto.h"
#include "redis_url.h"

#define FG__RPOOL_MAX 16

/* Why a blocking context must not be reused. */
enum { FG__SC_OK, FG__SC_LATE, FG__SC_FAILED };

typedef struct fg__rsconn {
    redisContext *c;
    /* FG__SC_LATE: a deadline passed with a reply outstanding; the server
     * was reachable, so the next connection need not wait. FG__SC_FAILED:
     * I/O or protocol failure, which does start the backoff. */
    int broken;
    /* Replies owed to commands sent without waiting (the DECRBY give-back):
     * the next exchange reads and drops them first. */
    int skip;
} fg__rsconn;

struct fg__raconn;
struct fg__aslot;
struct fg__dns;
struct fg__dns_q;

/* One Redis server and the connections to it. */
typedef struct fg__rnode {
    fg__redis_url url;
    char where[200]; /* host:port db N, for messages */
    char name[300];  /* host:port/db (fg__redis_url_name) */
    /* The host resolved once, at open: every (re)connect uses this numeric
     * address, so no check waits on DNS (hiredis 0.14 resolves with a
     * blocking getaddrinfo in every connect). */
    char addr[INET6_ADDRSTRLEN];
    fg__redis_shas shas;
    /* The EVAL that answers a NOSCRIPT (the server's script cache
     * flushed, or a restart) was refused: NOPERM, a user allowed EVALSHA
     * and not EVAL. SCRIPT LOAD every script again, once, on the
     * connection used next (an EVAL that runs caches its script itself;
     * otherwise such a user would fail for good). */
    atomic_int scripts_lost;
    /* Redis refused the URL's database (SELECT): a failure of the store
     * for its checks, but a configuration error at open. */
    atomic_int db_refused;
    int in_cluster; /* a node of the Cluster store (set before any check) */
    /* Set at open, when the server would evict floodgate's keys or
     * refuses EVALSHA (fg__rnode_settings_check); "" otherwise. */
    char warning[700];

    pthread_mutex_t mu; /* guards what follows, up to the async part */
    fg__rsconn idle[FG__RPOOL_MAX];
    int nidle;
    unsigned fails;    /* consecutive connection failures */
    uint64_t retry_at; /* no connection attempt before (monotonic us) */
    uint64_t rng;
    char errstr[512];
    /* The code 'errstr' reports for a failed check, 0 when it says
     * something else: repeated failures (an outage) write it once instead
     * of taking 'mu' and formatting on every check. */
    atomic_int err_code;
    /* With 'err_code': a hash of Redis's own words 'errstr' gives, 0 when
     * it gives none (fg__rnode_reply_error). */
    atomic_ullong err_text;
    atomic_ulong err_writes; /* times 'errstr' was written, for tests */
    atomic_ullong err_seq;   /* when, among all nodes' writes (a count) */

    /* Asynchronous connection (evb != NULL); the loop's thread only. */
    struct event_base *evb;
    struct fg__raconn *conn;
    struct fg__raconn *flushing; /* in ev_flush: writes left wait on fd */
    /* A script whose SCRIPT LOAD failed (BUSY, LOADING at connect) is
     * loaded again on the live connection, at most once a second. */
    uint64_t sha_retry_at;
    /* The pipeline's hooks: before each write of a connection (to append
     * what waited for it), and when a connection is torn down (to fail
     * what still waited). */
    void (*before_write)(struct fg__raconn *cn);
    void (*teardown)(struct fg__raconn *cn);
    /* Once a connection's AUTH and SELECT are answered OK (gate_left). */
    void (*ready)(struct fg__raconn *cn);
    void *owner; /* the store, for the hooks */
    /* The URL's host is a name: an async node looks it up again (evdns,
     * at most once a second) when a connection fails or the server says
     * READONLY, and connects to its new address when it changed (a
     * managed Redis's endpoint after a failover, a restarted pod). */
    int named;
    int closing;         /* the store closes: no more lookups */
    struct fg__dns *dns; /* made at the first lookup */
    struct fg__dns_q *dq;
    uint64_t dns_next_us;
    uint64_t dns_stamp; /* fg__dns_files_stamp when 'dns' was made */
} fg__rnode;

/* The asynchronous connection. */
typedef struct fg__raconn {
    fg__rnode *st;
    redisAsyncContext *ac;
    struct event *rev, *wev, *flush;
    int reading, writing, flush_pending;
    int dead;    /* takes no more commands */
    int fail_rc; /* what its unanswered checks fail with */
    int hs_left; /* handshake replies still awaited */
    /* Its AUTH and SELECT replies still awaited: until they come, checks
     * wait here (gated), since those pipelined behind a refused SELECT or
     * AUTH would run in database 0, or as another user. */
    int gate_left;
    struct fg__aslot *ghead, *gtail;
    struct fg__rfund *rghead, *rgtail; /* refunds, likewise */
    uint64_t opened_us;                /* when its connect began (monotonic) */
    /* The pipeline's: token bucket checks waiting for the next write, in
     * order, and the batches sent and not answered. */
    struct fg__aslot *bhead, *btail;
    int bn;
    int bflight;
    /* Decided checks of durable limits waiting for the next WAIT. */
    struct fg__aslot *whead, *wtail;
} fg__raconn;

/* Set up 'st' for 'url' (the event base 'evb', NULL for blocking only),
 * resolving the host once, unless 'num' gives its numeric address (looked
 * up already, without blocking). FG_OK, or the code with the reason in
 * 'err'; either way fg__rnode_close releases it. */
int fg__rnode_init(fg__rnode *st, const char *url, const char *num,
                   struct event_base *evb, char *err, size_t errlen);
/* Free the idle blocking connections, the URL and a lookup in flight (the
 * async connection is the pipeline's to close first). */
void fg__rnode_close(fg__rnode *st);
/* An async node whose host is a name: look it up again unless it was
 * less than a second ago; when its address changed, the live connection
 * (to the old one) is dropped and the next check connects to the new one
 * at once. On the loop's thread. */
void fg__rnode_readdress(fg__rnode *st);
/* The address a node connects to now, "ADDR:PORT" ('out', 'n' bytes). */
void fg__rnode_addr(fg__rnode *st, char *out, size_t n);

/* Errors, for logs (fg__store_redis_last_error): write 'fmt' (with the
 * node's address and 'detail') as the node's error, the reason of checks
 * that fail with 'code' (0: of none in particular); a check that failed
 * with 'rc' (written once for a run of the same code); a reason already
 * formatted. */
void fg__rnode_set_error_as(fg__rnode *st, int code, const char *fmt,
                            const char *detail);
void fg__rnode_set_error(fg__rnode *st, const char *fmt, const char *detail);
/* 'text' as the node's error, with 'mu' held (redis_node_error.c). */
void fg__rnode_error_locked(fg__rnode *st, int code, const char *text);
void fg__rnode_check_error(fg__rnode *st, int rc);
/* A check that failed with 'rc' on the reply 'r' (NULL: none): when it is
 * an error, what Redis said ('said', 'len' bytes), written once for a run
 * of the same words. */
void fg__rnode_reply_error(fg__rnode *st, int rc, const redisReply *r);
void fg__rnode_said_error(fg__rnode *st, int rc, const char *said, size_t len);
/* The same for an operator's "peek" or "reset" ('op'): a reason already
 * written for the same code is kept. */
void fg__rnode_op_error(fg__rnode *st, const char *op, int rc);

/* An EVAL answering a NOSCRIPT was refused: the scripts are loaded
 * again (scripts_lost). */
void fg__rnode_scripts_lost(fg__rnode *st);

/* A blocking connection for one check, by 'deadline' (monotonic us): an
 * idle one, or a new one unless the backoff says not yet; and its return,
 * kept or freed as its 'broken' says. */
int fg__rpool_get(fg__rnode *st, uint64_t deadline, fg__rsconn *out);
void fg__rpool_put(fg__rnode *st, fg__rsconn *c);
/* Connect a new blocking context by 'deadline' and run the handshake. */
int fg__rsync_connect(fg__rnode *st, uint64_t deadline, fg__rsconn *out,
                      char *err, size_t errlen);
/* Append 'k' to 'sc' (formatted on the stack when it fits). FG_OK, or
 * FG_ENOMEM with the connection marked broken. */
int fg__rsync_append(fg__rsconn *sc, fg__rcmd *k);
/* Ask the server on 'sc' for its maxmemory settings; when it has a
 * maxmemory and a policy other than noeviction, say in 'st->warning'
 * that it evicts keys, a limit's counter among them. Anything refused
 * (a user without +config|get, a proxy) leaves no warning. Then ask it an
 * EVALSHA of no script: when it answers that there is no such command or
 * that the user may not run it (a rename-command, an ACL without
 * +evalsha), say so too: every check that runs a script would fail. */
void fg__rnode_settings_check(fg__rnode *st, fg__rsconn *sc, uint64_t deadline);
/* When the scripts could not be loaded at connect: whether the server runs
 * scripts at all (EVAL). A server that knows no EVAL (a Sentinel) is
 * FG_EINVAL with the reason in 'err'; anything else FG_OK (a proxy that
 * runs EVAL but not SCRIPT, a user without +script: checks use EVAL). */
int fg__rnode_eval_check(fg__rnode *st, fg__rsconn *sc, uint64_t deadline,
                         char *err, size_t errlen);
/* Send what is appended and read 'n' replies into 'r' by 'deadline'; on
 * failure none is left and 'sc' is marked broken. */
int fg__rsync_exchange(fg__rsconn *sc, int n, redisReply **r,
                       uint64_t deadline);
/* Send what the socket takes now, without waiting (the give-back). */
void fg__rsync_send_now(fg__rsconn *sc);

/* The live async connection, or a new one; NULL with '*rc' set while the
 * backoff runs or when a connection cannot even be started. */
fg__raconn *fg__raconn_get(fg__rnode *st, int *rc);
/* Mark 'cn' finished: no new commands, its unanswered checks fail with
 * 'rc', and the next connection waits for the backoff. */
void fg__raconn_kill(fg__raconn *cn, int rc);
/* Ask for the write that runs the before_write hook. */
void fg__raconn_want_write(fg__raconn *cn);
/* Append 'k' to 'ac' with callback 'fn'; REDIS_OK or REDIS_ERR. */
int fg__rasync_append(redisAsyncContext *ac, redisCallbackFn *fn, void *priv,
                      fg__rcmd *k);

#endif
