/* store_redis.c -- the Redis store: counters shared by every server.
 *
 * Two clients share one URL, one set of scripts and one backoff:
 *   - blocking (fg_check): a small pool of hiredis contexts, each used by one
 *     thread at a time; sends never block and every wait is a ppoll()
 *     bounded by the check's own deadline, so no check waits longer than
 *     its limit's timeout;
 *   - asynchronous (fg_check_async): one hiredis async context on the
 *     caller's libevent loop. Commands are appended as checks arrive and
 *     written together when the loop next runs (one write per iteration);
 *     token bucket checks wait for that moment and go out as one EVALSHA
 *     of up to BATCH_MAX checks, which Redis runs in order, as if each were
 *     its own call (the script's call overhead, TIME, and a hot key's GET
 *     and SET are then paid once per batch); deadlines are one libevent
 *     timer, since hiredis 0.14 has none.
 * A context whose I/O or protocol failed, or whose deadline passed, is
 * freed, never reused (error replies leave it in step). After a connect,
 * I/O or protocol failure (not a mere passed deadline) a new one is made
 * only after a jittered, growing backoff during which checks fail at once.
 * Host names are resolved once, at open: hiredis 0.14 would resolve with a
 * blocking getaddrinfo() on every connect.
 * Commands are formatted on the stack (fg__redis_format).
 *
 * Per algorithm (DESIGN.md 3), one round trip each:
 *   fixed_window   INCRBY k cost; PEXPIRE k ttl NX   (pipelined, no Lua)
 *   sliding_window EVALSHA sliding 1 base period limit cost now
 *   token_bucket   EVALSHA token 1 k scale unit_us unit_frac depth_us
 *                  depth_frac t_scaled cost now
 *                  (async: EVALSHA token n k1..kn, then the eight per check)
 *   naive_get_set  GET k, then SET k n PX ttl        (two round trips)
 * Refunds (fg_refund): EVALSHA refund 1 k kind cost now p1 [p2 p3], one
 * script for the three atomic algorithms; naive_get_set has none.
 * Keys: prefix + name + ":{" + key + "}" + ":" window, binary-safe. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "redis_proto.h"
#include "redis_store.h"
#include "redis_url.h"
#include "store.h"

#define POOL_MAX       16
#define BACKOFF_MIN_US 5000u
#define BACKOFF_MAX_US 200000u
/* A connection whose oldest unanswered command is this far past its
 * deadline is presumed dead and replaced. */
#define STALL_US 1000000u
/* Deadline timers are armed this much early, and expire what is due within
 * it, to absorb the loop's dispatch overhead. Precision otherwise comes from
 * the caller's event base: libevent's default clock is
 * CLOCK_MONOTONIC_COARSE (often 4 ms ticks); EVENT_BASE_FLAG_PRECISE_TIMER
 * makes deadlines exact (README, "The Redis store"). */
#define TIMER_SLACK_US 100u
/* The most token bucket checks one EVALSHA carries. The batch's keys must
 * live on one node: true of a single Redis (sharding and Cluster would
 * batch per node). */
#define BATCH_MAX 64

/* Why a blocking context must not be reused. */
enum { SC_OK, SC_LATE, SC_FAILED };

typedef struct sconn {
    redisContext *c;
    /* SC_LATE: a deadline passed with a reply outstanding; the server was
     * reachable, so the next connection need not wait. SC_FAILED: I/O or
     * protocol failure, which does start the backoff. */
    int broken;
    /* Replies owed to commands sent without waiting (the DECRBY give-back):
     * the next exchange reads and drops them first. */
    int skip;
} sconn;

struct aconn;

typedef struct redis_store {
    fg_store base;
    fg__redis_url url;
    char where[200]; /* host:port db N, for messages */
    /* The host resolved once, at open: every (re)connect uses this numeric
     * address, so no check waits on DNS (hiredis 0.14 resolves with a
     * blocking getaddrinfo in every connect). */
    char addr[INET6_ADDRSTRLEN];
    fg_clock_fn clock;
    void *clock_ctx;

    /* SHA1s of the scripts, learnt from SCRIPT LOAD; 'sha_known' is set
     * once, after the buffer is written. */
    char sha[FG__LUA_COUNT][41];
    atomic_int sha_known;

    pthread_mutex_t mu; /* guards what follows, up to the async part */
    sconn idle[POOL_MAX];
    int nidle;
    unsigned fails;    /* consecutive connection failures */
    uint64_t retry_at; /* no connection attempt before (monotonic us) */
    uint64_t rng;
    char errstr[512];
    /* The code 'errstr' reports for a failed check, 0 when it says
     * something else: repeated failures (an outage) write it once instead
     * of taking 'mu' and formatting on every check. */
    atomic_int err_code;
    atomic_ulong err_writes; /* times 'errstr' was written, for tests */

    /* Asynchronous client (base != NULL); used by the loop's thread only. */
    struct event_base *evb;
    struct aconn *conn;
    struct event *timer;
    uint64_t timer_at;         /* 0: not armed */
    struct aslot *head, *tail; /* awaiting replies, oldest first */
    struct aslot *free_slots;
    struct rfund *free_refunds; /* records of refunds no longer in flight */
    struct aconn *flushing;     /* in ev_flush: writes left over wait on fd */
    char *bbuf;                 /* a batch's command, formatted */
    size_t bcap;
    int closing;
} redis_store;

/* Per limiter: the key prefix and the limit's fixed script arguments. */
typedef struct rlim {
    int script; /* FG__LUA_* or -1 */
    int nstatic;
    char stat[6][21];
    size_t statlen[6];
    size_t kplen;
    char kp[]; /* prefix + name + ":{" */
} rlim;

typedef struct aconn {
    redis_store *st;
    redisAsyncContext *ac;
    struct event *rev, *wev, *flush;
    int reading, writing, flush_pending;
    int dead;    /* takes no more commands */
    int fail_rc; /* what its unanswered checks fail with */
    int hs_left; /* handshake replies still awaited */
    /* Token bucket checks waiting for the next write, in order. */
    struct aslot *bhead, *btail;
    int bn;
    int bflight; /* batches sent and not answered */
} aconn;

typedef struct aslot {
    struct aslot *prev, *next;
    fg__req *req; /* NULL once completed early (deadline passed) */
    aconn *conn;
    uint64_t now_us;      /* the time sent; 0: Redis TIME */
    uint64_t deadline_us; /* monotonic, kept after the check completes */
    int eval;             /* NOSCRIPT seen: sent again with EVAL */
    int stage;            /* naive_get_set: 0 GET, 1 SET */
    fg_decision d;        /* naive_get_set: decided after GET */
    struct aslot *bnext;  /* the next check of the same batch */
    int bcount;           /* in a batch's first slot: its checks */
} aslot;

static const fg__store_ops redis_ops, redis_async_ops;

static uint64_t wall_clock(void *ctx)
{
    (void)ctx;
    return fg__wall_us();
}

/* Call with 'mu' held, after writing 'errstr'. */
static void error_written_locked(redis_store *st, int code)
{
    atomic_store_explicit(&st->err_code, code, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->err_writes, 1, memory_order_relaxed);
}

/* Write 'fmt' (with the store's address and 'detail') as the store's error,
 * the reason of checks that fail with 'code' (0: of none in particular). */
static void set_error_as(redis_store *st, int code, const char *fmt,
                         const char *detail)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, st->where, detail);
    pthread_mutex_lock(&st->mu);
    memcpy(st->errstr, msg, sizeof msg);
    error_written_locked(st, code);
    pthread_mutex_unlock(&st->mu);
}

static void set_error(redis_store *st, const char *fmt, const char *detail)
{
    set_error_as(st, 0, fmt, detail);
}

/* A check failed with 'rc': say so, unless that is what 'errstr' already
 * says. The relaxed read costs nothing; a race at worst writes twice. */
static void check_error(redis_store *st, int rc)
{
    if (atomic_load_explicit(&st->err_code, memory_order_relaxed) == rc)
        return;
    char msg[512];
    snprintf(msg, sizeof msg, "redis %.200s: check failed: %.200s", st->where,
             fg_strerror(rc));
    pthread_mutex_lock(&st->mu);
    memcpy(st->errstr, msg, sizeof msg);
    error_written_locked(st, rc);
    pthread_mutex_unlock(&st->mu);
}

/* Note a failed connection: the next attempt waits a random time in
 * [d/2, d], d doubling from BACKOFF_MIN_US to BACKOFF_MAX_US, so that many
 * servers do not reconnect in step. Call with 'mu' held. */
static void backoff_locked(redis_store *st)
{
    uint64_t d = BACKOFF_MIN_US;
    for (unsigned i = 0; i < st->fails && d < BACKOFF_MAX_US; i++)
        d *= 2;
    if (d > BACKOFF_MAX_US)
        d = BACKOFF_MAX_US;
    st->rng = st->rng * 6364136223846793005u + 1442695040888963407u;
    st->retry_at =
        fg__mono_precise_us() + d / 2 + (st->rng >> 33) % (d / 2 + 1);
    if (st->fails < 64)
        st->fails++;
}

static void backoff(redis_store *st)
{
    pthread_mutex_lock(&st->mu);
    backoff_locked(st);
    pthread_mutex_unlock(&st->mu);
}

static void connected(redis_store *st)
{
    pthread_mutex_lock(&st->mu);
    st->fails = 0;
    st->retry_at = 0;
    pthread_mutex_unlock(&st->mu);
}

static void learn_sha(redis_store *st, int i, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
        return;
    pthread_mutex_lock(&st->mu);
    if (!(atomic_load(&st->sha_known) & (1 << i))) {
        memcpy(st->sha[i], r->str, 40);
        st->sha[i][40] = '\0';
        atomic_fetch_or(&st->sha_known, 1 << i);
    }
    pthread_mutex_unlock(&st->mu);
}

static int sha_ready(redis_store *st, int i)
{
    return (atomic_load_explicit(&st->sha_known, memory_order_acquire) >> i) &
           1;
}

/* ---- Commands ---------------------------------------------------------- */

/* One command in argv form, with room for the values it formats. */
typedef struct cmd {
    int argc;
    const char *argv[14];
    size_t len[14];
    char key[FG__REDIS_KEY_MAX];
    size_t keylen;
    char cost[21], now[21], ttl[21], n[21];
} cmd;

static void arg(cmd *c, const char *s, size_t n)
{
    c->argv[c->argc] = s;
    c->len[c->argc++] = n;
}

#define ARG_LIT(c, lit) arg((c), (lit), sizeof(lit) - 1)

/* Build the key of 'l' for 'key' into 'c->key'. FG_OK or FG_EKEY. */
static int build_key(cmd *c, const fg_limiter *l, const char *key,
                     size_t keylen, uint64_t now_us)
{
    const rlim *rl = l->store_data;
    int64_t w = l->p.algorithm == FG_SLIDING_WINDOW ? -1
                : l->p.algorithm == FG_TOKEN_BUCKET
                    ? -2
                    : (int64_t)(now_us / l->p.period_us);
    c->keylen =
        fg__redis_key(c->key, rl->kp, rl->kplen, key, keylen, w < 0 ? -1 : w);
    if (!c->keylen)
        return FG_EKEY;
    if (w == -2)
        c->keylen--; /* the token bucket's key ends at the hash tag */
    return FG_OK;
}

/* The script call for 'l': EVALSHA, or EVAL when 'eval' or the SHA is not
 * known yet. 'now_us' 0 lets the script read Redis TIME. */
static void script_cmd(redis_store *st, const fg_limiter *l, cmd *c,
                       uint64_t cost, uint64_t now_us, int eval)
{
    const rlim *rl = l->store_data;
    c->argc = 0;
    if (!eval && sha_ready(st, rl->script)) {
        ARG_LIT(c, "EVALSHA");
        arg(c, st->sha[rl->script], 40);
    } else {
        const char *s = fg__redis_lua[rl->script];
        ARG_LIT(c, "EVAL");
        arg(c, s, strlen(s));
    }
    ARG_LIT(c, "1");
    arg(c, c->key, c->keylen);
    for (int i = 0; i < rl->nstatic; i++)
        arg(c, rl->stat[i], rl->statlen[i]);
    arg(c, c->cost, fg__redis_u64(c->cost, cost));
    if (now_us)
        arg(c, c->now, fg__redis_u64(c->now, now_us));
    else
        arg(c, "", 0);
}

/* A refund: the refund script's arguments, kept whole so that a NOSCRIPT
 * answer can be sent again with EVAL. On the stack for the blocking client;
 * for the asynchronous one a record recycled through 'free_refunds', so
 * that a refund in flight allocates nothing once the loop is warm. */
typedef struct rfund {
    struct rfund *next; /* in 'free_refunds' */
    redis_store *st;
    int eval; /* NOSCRIPT seen: sent again with EVAL */
    char kind[2];
    size_t nowlen, p1len, p2len, p3len;
    char p1[21], p2[21], p3[21];
    cmd k; /* key, cost and now; its argv is rebuilt for each send */
} rfund;

/* Fill 'rf' for refunding 'cost' of 'key' at 'now_us' (0: Redis TIME).
 * FG_OK, FG_EKEY or FG_ENOTSUP (naive_get_set). */
static int refund_prepare(rfund *rf, const fg_limiter *l, const char *key,
                          size_t keylen, uint64_t cost, uint64_t now_us)
{
    int rc = build_key(&rf->k, l, key, keylen, now_us);
    if (rc != FG_OK)
        return rc;
    rf->eval = 0;
    rf->p2len = rf->p3len = 0;
    switch (l->p.algorithm) {
    case FG_FIXED_WINDOW:
        rf->kind[0] = 'f';
        rf->p1len = fg__redis_u64(rf->p1, l->p.limit);
        break;
    case FG_SLIDING_WINDOW:
        rf->kind[0] = 's';
        rf->p1len = fg__redis_u64(rf->p1, l->p.period_us);
        break;
    case FG_TOKEN_BUCKET:
        rf->kind[0] = 't';
        rf->p1len = fg__redis_u64(rf->p1, l->p.scale);
        rf->p2len = fg__redis_u64(rf->p2, l->p.unit_us);
        rf->p3len = fg__redis_u64(rf->p3, l->p.unit_frac);
        break;
    default:
        return FG_ENOTSUP;
    }
    rf->kind[1] = '\0';
    fg__redis_u64(rf->k.cost, cost);
    rf->nowlen = now_us ? fg__redis_u64(rf->k.now, now_us) : 0;
    return FG_OK;
}

/* The refund script's call for 'rf' into 'rf->k': EVALSHA, or EVAL after
 * NOSCRIPT or while the SHA is not known. */
static void refund_cmd(redis_store *st, rfund *rf)
{
    cmd *c = &rf->k;
    c->argc = 0;
    if (!rf->eval && sha_ready(st, FG__LUA_REFUND)) {
        ARG_LIT(c, "EVALSHA");
        arg(c, st->sha[FG__LUA_REFUND], 40);
    } else {
        const char *s = fg__redis_lua[FG__LUA_REFUND];
        ARG_LIT(c, "EVAL");
        arg(c, s, strlen(s));
    }
    ARG_LIT(c, "1");
    arg(c, c->key, c->keylen);
    arg(c, rf->kind, 1);
    arg(c, c->cost, strlen(c->cost));
    arg(c, c->now, rf->nowlen);
    arg(c, rf->p1, rf->p1len);
    if (rf->p2len)
        arg(c, rf->p2, rf->p2len);
    if (rf->p3len)
        arg(c, rf->p3, rf->p3len);
}

/* INCRBY or DECRBY ('verb') by 'cost'; INCR for the usual cost of 1,
 * which Redis parses a little faster. */
static void incrby_cmd(cmd *c, const char *verb, size_t vlen, uint64_t cost)
{
    c->argc = 0;
    if (cost == 1 && verb[0] == 'I') {
        ARG_LIT(c, "INCR");
        arg(c, c->key, c->keylen);
        return;
    }
    arg(c, verb, vlen);
    arg(c, c->key, c->keylen);
    arg(c, c->cost, fg__redis_u64(c->cost, cost));
}

static void pexpire_cmd(cmd *c, uint64_t ttl_ms)
{
    c->argc = 0;
    ARG_LIT(c, "PEXPIRE");
    arg(c, c->key, c->keylen);
    arg(c, c->ttl, fg__redis_u64(c->ttl, ttl_ms));
    ARG_LIT(c, "NX");
}

static void get_cmd(cmd *c)
{
    c->argc = 0;
    ARG_LIT(c, "GET");
    arg(c, c->key, c->keylen);
}

static void set_cmd(cmd *c, uint64_t count, uint64_t ttl_ms)
{
    c->argc = 0;
    ARG_LIT(c, "SET");
    arg(c, c->key, c->keylen);
    arg(c, c->n, fg__redis_u64(c->n, count));
    ARG_LIT(c, "PX");
    arg(c, c->ttl, fg__redis_u64(c->ttl, ttl_ms));
}

/* Append 'k' to the blocking connection 'sc', formatted on the stack (no
 * allocation, no printf) when it fits, else by hiredis. FG_OK, or
 * FG_ENOMEM with the connection marked broken (its buffer may hold part). */
static int sync_append(sconn *sc, cmd *k)
{
    char buf[4096];
    size_t n = fg__redis_format(buf, sizeof buf, k->argc, k->argv, k->len);
    int rc = n ? redisAppendFormattedCommand(sc->c, buf, n)
               : redisAppendCommandArgv(sc->c, k->argc, k->argv, k->len);
    if (rc == REDIS_OK)
        return FG_OK;
    sc->broken = SC_FAILED;
    return FG_ENOMEM;
}

/* The same for an async context; REDIS_OK or REDIS_ERR. */
static int async_append(redisAsyncContext *ac, redisCallbackFn *fn, void *priv,
                        cmd *k)
{
    char buf[4096];
    size_t n = fg__redis_format(buf, sizeof buf, k->argc, k->argv, k->len);
    if (n)
        return redisAsyncFormattedCommand(ac, fn, priv, buf, n);
    return redisAsyncCommandArgv(ac, fn, priv, k->argc, k->argv, k->len);
}

/* The time a check sends: the caller's clock for windows and
 * 'clock_client' limits, else 0 (the script reads Redis TIME). */
static uint64_t check_now(redis_store *st, const fg_limiter *l)
{
    if (l->p.algorithm == FG_FIXED_WINDOW ||
        l->p.algorithm == FG_NAIVE_GET_SET || l->lim.clock_client) {
        uint64_t t = st->clock(st->clock_ctx);
        return t ? t : 1;
    }
    return 0;
}

/* An integer reply (INCRBY), or a bulk string holding one (GET), or nil. */
static int reply_count(const redisReply *r, uint64_t *out)
{
    if (r->type == REDIS_REPLY_ERROR)
        return fg__redis_error_code(r->str, r->len);
    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
        return FG_OK;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        /* Below zero only when a refund (which counts a window above its
         * limit as full) crossed a refused check's DECRBY give-back still
         * on its way: the window is empty. */
        *out = r->integer < 0 ? 0 : (uint64_t)r->integer;
        return FG_OK;
    }
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len <= 19) {
        uint64_t v = 0;
        for (size_t i = 0; i < r->len; i++) {
            if (r->str[i] < '0' || r->str[i] > '9')
                return FG_EPROTO;
            v = v * 10 + (uint64_t)(r->str[i] - '0');
        }
        *out = v;
        return FG_OK;
    }
    return FG_EPROTO;
}

/* ---- Blocking client --------------------------------------------------- */

/* Wait until 'fd' is ready for 'events' or 'deadline' (monotonic us)
 * passes: 1 ready (or failed: the read or send that follows says which),
 * 0 deadline, -1 error. ppoll takes the exact time left; poll's whole
 * milliseconds could overrun the deadline by up to one. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = fg__mono_precise_us();
        if (now >= deadline)
            return 0;
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000u),
                              (long)(left % 1000000u) * 1000};
        struct pollfd pfd = {fd, events, 0};
        int pr = ppoll(&pfd, 1, &ts, NULL);
        if (pr > 0)
            return 1;
        if (pr < 0 && errno != EINTR)
            return -1;
    }
}

/* Send what is buffered in 'c' by 'deadline', or, with 'deadline' 0, what
 * the socket takes now (the rest goes out with the next exchange). Sends
 * never block (MSG_DONTWAIT), so every wait is wait_fd() against the
 * check's own deadline, and MSG_NOSIGNAL makes a peer that went away an
 * error, not a SIGPIPE for the whole process. */
static int sync_flush(redisContext *c, uint64_t deadline)
{
    while (sdslen(c->obuf) > 0) {
        ssize_t n =
            send(c->fd, c->obuf, sdslen(c->obuf), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            sdsrange(c->obuf, n, -1);
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return FG_EBACKEND;
        if (!deadline)
            return FG_OK;
        int w = wait_fd(c->fd, POLLOUT, deadline);
        if (w <= 0)
            return w == 0 ? FG_ETIMEOUT : FG_EBACKEND;
    }
    return FG_OK;
}

/* Send the commands appended to 'c' and read 'n' replies into 'r' before
 * 'deadline' (monotonic us). Every wait is a ppoll() bounded by the
 * deadline; a check costs one send, one ppoll and one read per round trip.
 * On failure the replies read so far are freed and the context must not be
 * used again. */
static int sync_exchange(sconn *sc, int n, redisReply **r, uint64_t deadline)
{
    redisContext *c = sc->c;
    int rc = sync_flush(c, deadline), i;
    for (i = 0; i < n && rc == FG_OK; i++) {
        void *rep = NULL;
        for (;;) {
            if (redisGetReplyFromReader(c, &rep) != REDIS_OK) {
                rc = FG_EPROTO;
                break;
            }
            if (rep && sc->skip > 0) {
                /* The answer to a give-back nobody waited for. */
                sc->skip--;
                freeReplyObject(rep);
                rep = NULL;
                continue;
            }
            if (rep)
                break;
            int w = wait_fd(c->fd, POLLIN, deadline);
            if (w == 0) {
                rc = FG_ETIMEOUT;
                break;
            }
            /* Readable: the blocking read() returns at once. */
            if (w < 0 || redisBufferRead(c) != REDIS_OK) {
                rc = FG_EBACKEND;
                break;
            }
        }
        r[i] = rep;
    }
    if (rc != FG_OK) {
        sc->broken = rc == FG_ETIMEOUT ? SC_LATE : SC_FAILED;
        while (i-- > 0) {
            freeReplyObject(r[i]);
            r[i] = NULL;
        }
    }
    return rc;
}

/* The handshake of a new connection: AUTH, SELECT and the scripts not yet
 * loaded, sent together ahead of any check. 'kind' says what each is:
 * 'a'uth, 's'elect, '0' + script. */
typedef struct handshake {
    int n;
    struct {
        char kind;
        int argc;
        const char *argv[3];
        size_t len[3];
    } c[2 + FG__LUA_COUNT];
    char db[21];
} handshake;

static void handshake_build(redis_store *st, handshake *h)
{
    h->n = 0;
    if (st->url.password) {
        int k = 0;
        h->c[h->n].argv[k] = "AUTH";
        h->c[h->n].len[k++] = 4;
        if (st->url.user) {
            h->c[h->n].argv[k] = st->url.user;
            h->c[h->n].len[k++] = strlen(st->url.user);
        }
        h->c[h->n].argv[k] = st->url.password;
        h->c[h->n].len[k++] = strlen(st->url.password);
        h->c[h->n].argc = k;
        h->c[h->n++].kind = 'a';
    }
    if (st->url.db) {
        h->c[h->n].argv[0] = "SELECT";
        h->c[h->n].len[0] = 6;
        h->c[h->n].argv[1] = h->db;
        h->c[h->n].len[1] = fg__redis_u64(h->db, st->url.db);
        h->c[h->n].argc = 2;
        h->c[h->n++].kind = 's';
    }
    for (int i = 0; i < FG__LUA_COUNT; i++) {
        if (sha_ready(st, i))
            continue;
        h->c[h->n].argv[0] = "SCRIPT";
        h->c[h->n].len[0] = 6;
        h->c[h->n].argv[1] = "LOAD";
        h->c[h->n].len[1] = 4;
        h->c[h->n].argv[2] = fg__redis_lua[i];
        h->c[h->n].len[2] = strlen(fg__redis_lua[i]);
        h->c[h->n].argc = 3;
        h->c[h->n++].kind = (char)('0' + i);
    }
}

/* Judge one handshake reply. FG_OK, or the code with the reason in 'err'
 * (the password is never part of it: Redis does not echo it). */
static int handshake_reply(redis_store *st, char kind, const redisReply *r,
                           char *err, size_t errlen)
{
    if (r->type == REDIS_REPLY_ERROR && kind != 'a' &&
        strncmp(r->str, "NOAUTH", 6) == 0)
        return fg__seterr(err, errlen, FG_EAUTH,
                          "redis %s: the server requires a password "
                          "(redis://user:password@host:port)",
                          st->where);
    if (kind >= '0' && kind < '0' + FG__LUA_COUNT) {
        /* Not fatal (BUSY, LOADING ...): checks fall back to EVAL, which
         * meets the same error and reports it as its own. */
        learn_sha(st, kind - '0', r);
        return FG_OK;
    }
    if (r->type != REDIS_REPLY_ERROR)
        return FG_OK;
    if (kind == 'a')
        return fg__seterr(err, errlen, FG_EAUTH,
                          "redis %s: authentication failed (%.200s)", st->where,
                          r->str);
    return fg__seterr(err, errlen, fg__redis_error_code(r->str, r->len),
                      "redis %s: cannot select database %u (%.200s)", st->where,
                      st->url.db, r->str);
}

/* Connect a new blocking context by 'deadline' and run the handshake. */
static int sync_connect(redis_store *st, uint64_t deadline, sconn *out,
                        char *err, size_t errlen)
{
    uint64_t now = fg__mono_precise_us();
    uint64_t left = deadline > now ? deadline - now : 1;
    struct timeval tv = {(time_t)(left / 1000000),
                         (suseconds_t)(left % 1000000)};
    redisContext *c = st->url.path
                          ? redisConnectUnixWithTimeout(st->url.path, tv)
                          : redisConnectWithTimeout(st->addr, st->url.port, tv);
    redisReply *r[2 + FG__LUA_COUNT] = {0};
    handshake h;
    int rc = FG_OK;
    if (!c)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    if (c->err) {
        int to = c->err == REDIS_ERR_IO &&
                 (errno == ETIMEDOUT || errno == EINPROGRESS);
        rc = fg__seterr(err, errlen, to ? FG_ETIMEOUT : FG_EBACKEND,
                        "redis %.200s: cannot connect: %.200s", st->where,
                        to ? "timed out" : c->errstr);
        redisFree(c);
        return rc;
    }
    /* No socket timeouts: sends never block and every wait is wait_fd()
     * against the deadline of the check at hand. */
    handshake_build(st, &h);
    for (int i = 0; i < h.n; i++)
        if (redisAppendCommandArgv(c, h.c[i].argc, h.c[i].argv, h.c[i].len) !=
            REDIS_OK) {
            redisFree(c);
            return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        }
    if (h.n) {
        sconn sc = {c, SC_OK, 0};
        rc = sync_exchange(&sc, h.n, r, deadline);
        if (rc == FG_EPROTO)
            fg__seterr(err, errlen, rc,
                       "redis %s: protocol error during handshake (%.200s): "
                       "is a Redis server listening there?",
                       st->where, c->errstr);
        else if (rc != FG_OK)
            fg__seterr(err, errlen, rc, "redis %s: %s during handshake",
                       st->where,
                       rc == FG_ETIMEOUT ? "timed out" : "connection lost");
        for (int i = 0; i < h.n && rc == FG_OK; i++)
            rc = handshake_reply(st, h.c[i].kind, r[i], err, errlen);
        for (int i = 0; i < h.n; i++)
            freeReplyObject(r[i]);
    }
    if (rc != FG_OK) {
        redisFree(c);
        return rc;
    }
    out->c = c;
    out->broken = SC_OK;
    out->skip = 0;
    return FG_OK;
}

/* A connection for one blocking check: an idle one, or a new one unless the
 * backoff says not yet. */
static int pool_get(redis_store *st, uint64_t deadline, sconn *out)
{
    char err[256];
    int rc;
    pthread_mutex_lock(&st->mu);
    if (st->nidle > 0) {
        *out = st->idle[--st->nidle];
        pthread_mutex_unlock(&st->mu);
        return FG_OK;
    }
    if (st->retry_at && fg__mono_precise_us() < st->retry_at) {
        pthread_mutex_unlock(&st->mu);
        return FG_EBACKEND;
    }
    pthread_mutex_unlock(&st->mu);
    rc = sync_connect(st, deadline, out, err, sizeof err);
    pthread_mutex_lock(&st->mu);
    if (rc == FG_OK) {
        st->fails = 0;
        st->retry_at = 0;
    } else {
        snprintf(st->errstr, sizeof st->errstr, "%s", err);
        error_written_locked(st, 0);
        backoff_locked(st);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* Return a connection after a check: kept when every exchange completed
 * (Redis may have answered with an error), freed otherwise: a timed-out
 * command may still answer, and hiredis contexts are not reused after an
 * error. Only an I/O or protocol failure starts the backoff: a check whose
 * deadline passed on a working connection (one slow reply) must not make
 * the checks behind it fail at once. */
static void pool_put(redis_store *st, sconn *c)
{
    if (c->broken == SC_FAILED) {
        pthread_mutex_lock(&st->mu);
        backoff_locked(st);
        pthread_mutex_unlock(&st->mu);
    } else if (c->broken == SC_OK) {
        pthread_mutex_lock(&st->mu);
        if (st->nidle < POOL_MAX) {
            st->idle[st->nidle++] = *c;
            c = NULL;
        }
        pthread_mutex_unlock(&st->mu);
    }
    if (c)
        redisFree(c->c);
}

/* PEXPIRE ... NX answered with an error: Redis before 7.0 has no NX, and
 * window keys would then never expire. Say so loudly. */
static int pexpire_error(redis_store *st, const redisReply *r)
{
    int rc = fg__redis_error_code(r->str, r->len);
    if (rc == FG_EPROTO)
        set_error(st,
                  "redis %.200s: PEXPIRE NX refused (%.200s); "
                  "fixed_window needs Redis 7.0 or later",
                  r->str);
    return rc;
}

static int sync_window(redis_store *st, sconn *c, fg_limiter *l, cmd *k,
                       uint64_t cost, uint64_t now, uint64_t deadline,
                       fg_decision *d)
{
    redisReply *r[2] = {0};
    uint64_t count;
    int rc;
    incrby_cmd(k, "INCRBY", 6, cost);
    if (sync_append(c, k) != FG_OK)
        return FG_ENOMEM;
    pexpire_cmd(k, fg__redis_window_ttl_ms(&l->p, now));
    if (sync_append(c, k) != FG_OK)
        return FG_ENOMEM;
    rc = sync_exchange(c, 2, r, deadline);
    if (rc != FG_OK)
        return rc;
    rc = reply_count(r[0], &count);
    if (rc == FG_OK && r[1]->type == REDIS_REPLY_ERROR)
        rc = pexpire_error(st, r[1]);
    freeReplyObject(r[0]);
    freeReplyObject(r[1]);
    if (rc != FG_OK)
        return rc;
    uint64_t before = count >= cost ? count - cost : 0;
    fg__redis_window_decision(&l->p, now, before, cost, d);
    if (!d->allowed && before < l->p.limit) {
        /* Give back what cannot be admitted, so the refusal consumes
         * nothing (DESIGN.md 3). Sent without waiting, so the decision
         * never spends what is left of the deadline on it (nor fails when
         * that runs out): the next exchange on this connection drops its
         * reply. If it is lost the refusal stands and the window only
         * over-refuses until it ends. */
        incrby_cmd(k, "DECRBY", 6, cost);
        if (sync_append(c, k) == FG_OK) {
            c->skip++;
            if (sync_flush(c->c, 0) == FG_EBACKEND)
                c->broken = SC_FAILED;
        }
    }
    return FG_OK;
}

static int sync_naive(sconn *c, fg_limiter *l, cmd *k, uint64_t cost,
                      uint64_t now, uint64_t deadline, fg_decision *d)
{
    redisReply *r = NULL;
    uint64_t count;
    int rc;
    get_cmd(k);
    if (sync_append(c, k) != FG_OK)
        return FG_ENOMEM;
    rc = sync_exchange(c, 1, &r, deadline);
    if (rc != FG_OK)
        return rc;
    rc = reply_count(r, &count);
    freeReplyObject(r);
    if (rc != FG_OK)
        return rc;
    fg__redis_window_decision(&l->p, now, count, cost, d);
    if (!d->allowed)
        return FG_OK;
    /* The broken part, on purpose: another server may have written
     * between our GET and this SET. */
    set_cmd(k, count + cost, fg__redis_window_ttl_ms(&l->p, now));
    if (sync_append(c, k) != FG_OK)
        return FG_ENOMEM;
    rc = sync_exchange(c, 1, &r, deadline);
    if (rc != FG_OK)
        return rc;
    rc = r->type == REDIS_REPLY_ERROR ? fg__redis_error_code(r->str, r->len)
                                      : FG_OK;
    freeReplyObject(r);
    return rc;
}

static int sync_script(redis_store *st, sconn *c, fg_limiter *l, cmd *k,
                       uint64_t cost, uint64_t now, uint64_t deadline,
                       fg_decision *d)
{
    for (int eval = 0; eval < 2; eval++) {
        redisReply *r = NULL;
        int rc;
        script_cmd(st, l, k, cost, now, eval);
        if (sync_append(c, k) != FG_OK)
            return FG_ENOMEM;
        rc = sync_exchange(c, 1, &r, deadline);
        if (rc != FG_OK)
            return rc;
        rc = fg__redis_script_reply(
            r, l->p.algorithm == FG_TOKEN_BUCKET ? l->p.burst : l->p.limit, d);
        freeReplyObject(r);
        /* The script cache was flushed or the server restarted: EVAL once,
         * which also caches the script again. */
        if (rc != FG__REDIS_NOSCRIPT)
            return rc;
    }
    return FG_EPROTO;
}

static int redis_check(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen, uint64_t cost, fg_decision *d)
{
    redis_store *st = (redis_store *)s;
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)l->lim.timeout_ms * 1000u;
    uint64_t now = check_now(st, l);
    sconn c;
    cmd k;
    int rc = build_key(&k, l, key, keylen, now);
    if (rc != FG_OK)
        return rc;
    rc = pool_get(st, deadline, &c);
    if (rc != FG_OK)
        return rc;
    switch (l->p.algorithm) {
    case FG_FIXED_WINDOW:
        rc = sync_window(st, &c, l, &k, cost, now, deadline, d);
        break;
    case FG_NAIVE_GET_SET:
        rc = sync_naive(&c, l, &k, cost, now, deadline, d);
        break;
    default:
        rc = sync_script(st, &c, l, &k, cost, now, deadline, d);
        break;
    }
    pool_put(st, &c);
    if (rc != FG_OK)
        check_error(st, rc);
    return rc;
}

/* Give back 'cost' units of 'key' on a blocking connection, waiting for
 * the reply within the limit's timeout: one round trip (two after
 * NOSCRIPT). */
static int redis_refund(fg_store *s, fg_limiter *l, const char *key,
                        size_t keylen, uint64_t cost)
{
    redis_store *st = (redis_store *)s;
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)l->lim.timeout_ms * 1000u;
    sconn c;
    rfund rf;
    int rc = refund_prepare(&rf, l, key, keylen, cost, check_now(st, l));
    if (rc != FG_OK)
        return rc;
    rc = pool_get(st, deadline, &c);
    if (rc != FG_OK)
        return rc;
    for (rf.eval = 0; rf.eval < 2; rf.eval++) {
        redisReply *r = NULL;
        refund_cmd(st, &rf);
        rc = sync_append(&c, &rf.k);
        if (rc == FG_OK)
            rc = sync_exchange(&c, 1, &r, deadline);
        if (rc != FG_OK)
            break;
        rc = r->type == REDIS_REPLY_ERROR ? fg__redis_error_code(r->str, r->len)
             : r->type == REDIS_REPLY_INTEGER ? FG_OK
                                              : FG_EPROTO;
        freeReplyObject(r);
        if (rc != FG__REDIS_NOSCRIPT)
            break;
        rc = FG_EPROTO; /* NOSCRIPT after EVAL */
    }
    pool_put(st, &c);
    return rc;
}

/* ---- Asynchronous client ---------------------------------------------- */

/* hiredis asks for read and write interest; libevent delivers it.
 *
 * Reads: one persistent event, added once, so a busy connection costs no
 * epoll_ctl per reply. Writes: appending a command asks for a flush, which
 * runs as an activated event after the callbacks already due in this loop
 * iteration, so every check submitted meanwhile goes out in one write(),
 * again without epoll_ctl. Only while connecting, or when the socket buffer
 * is full, does hiredis wait for the socket itself to become writable. */
static void ev_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisAsyncHandleRead(((aconn *)arg)->ac);
}

static void batch_flush(aconn *cn);

static void ev_write(evutil_socket_t fd, short what, void *arg)
{
    aconn *cn = arg;
    (void)fd;
    (void)what;
    cn->writing = 0; /* a fired EV_WRITE is no longer pending */
    batch_flush(cn);
    redisAsyncHandleWrite(cn->ac);
}

static void ev_flush(evutil_socket_t fd, short what, void *arg)
{
    aconn *cn = arg;
    redis_store *st = cn->st;
    (void)fd;
    (void)what;
    /* The batch is appended while 'flush_pending' still says a write is
     * coming: it asks for no second one. */
    batch_flush(cn);
    cn->flush_pending = 0;
    /* hiredis may free the context (and 'cn') inside; 'flushing' lives in
     * the store. */
    st->flushing = cn;
    redisAsyncHandleWrite(cn->ac);
    st->flushing = NULL;
}

static void hook_add_read(void *p)
{
    aconn *cn = p;
    if (!cn->reading) {
        cn->reading = 1;
        event_add(cn->rev, NULL);
    }
}

static void hook_del_read(void *p)
{
    aconn *cn = p;
    if (cn->reading) {
        cn->reading = 0;
        event_del(cn->rev);
    }
}

static void hook_add_write(void *p)
{
    aconn *cn = p;
    if (!(cn->ac->c.flags & REDIS_CONNECTED) || cn->st->flushing == cn) {
        /* Connecting, or a write left data behind: wait for the socket. */
        if (!cn->writing) {
            cn->writing = 1;
            event_add(cn->wev, NULL);
        }
    } else if (!cn->flush_pending && !cn->writing) {
        cn->flush_pending = 1;
        event_active(cn->flush, EV_WRITE, 0);
    }
}

static void hook_del_write(void *p)
{
    aconn *cn = p;
    if (cn->writing) {
        cn->writing = 0;
        event_del(cn->wev);
    }
}

/* Mark 'cn' as finished: no new commands, its unanswered checks fail with
 * 'rc', and the next connection waits for the backoff. */
static void conn_kill(aconn *cn, int rc)
{
    redis_store *st = cn->st;
    if (cn->dead)
        return;
    if (rc == FG_EBACKEND && cn->ac->c.err == REDIS_ERR_PROTOCOL) {
        /* Not lost: what answered does not speak Redis's protocol. */
        rc = FG_EPROTO;
        set_error_as(st, rc,
                     "redis %.200s: protocol error (%.200s): is a Redis "
                     "server listening there?",
                     cn->ac->c.errstr);
    }
    cn->dead = 1;
    cn->fail_rc = rc;
    if (st->conn == cn)
        st->conn = NULL;
    backoff(st);
}

/* hiredis frees the context: every callback has run (with NULL replies for
 * the unanswered), so nothing refers to 'cn' any more. */
static void chain_fail(redis_store *st, aslot *s, int rc);

static void hook_cleanup(void *p)
{
    aconn *cn = p;
    aslot *batch = cn->bhead;
    if (!cn->dead)
        conn_kill(cn, FG_EBACKEND);
    /* Checks still waiting for the batch's write never went out. */
    cn->bhead = cn->btail = NULL;
    cn->bn = 0;
    chain_fail(cn->st, batch, cn->fail_rc);
    event_free(cn->rev);
    event_free(cn->wev);
    event_free(cn->flush);
    cn->ac->ev.data = NULL;
    cn->ac->data = NULL;
    fg__free(cn);
}

static void slot_unlink(redis_store *st, aslot *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        st->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        st->tail = s->prev;
    s->next = st->free_slots;
    st->free_slots = s;
}

/* Complete the check of 's' (if still waiting) and release the slot. */
static void slot_finish(redis_store *st, aslot *s, int rc, fg_decision *d)
{
    fg__req *req = s->req;
    s->req = NULL;
    slot_unlink(st, s);
    if (req)
        fg__req_done(req, rc, d);
}

/* Make the timer fire by 'at' (monotonic us; 'now' is the time now). */
static void timer_arm(redis_store *st, uint64_t at, uint64_t now)
{
    if (st->timer_at && st->timer_at <= at)
        return;
    now += TIMER_SLACK_US;
    uint64_t d = at > now ? at - now : 0;
    struct timeval tv = {(time_t)(d / 1000000), (suseconds_t)(d % 1000000)};
    st->timer_at = at;
    evtimer_add(st->timer, &tv);
}

/* Deadlines: fail every check whose deadline has passed (its late reply
 * will be dropped), and replace a connection that stopped answering. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    redis_store *st = arg;
    uint64_t now = fg__mono_precise_us(), next = 0, due = now + TIMER_SLACK_US;
    (void)fd;
    (void)what;
    st->timer_at = 0;
    for (aslot *s = st->head; s; s = s->next) {
        if (!s->req)
            continue;
        if (s->req->deadline_us <= due) {
            fg__req *req = s->req;
            s->req = NULL;
            fg__req_done(req, FG_ETIMEOUT, NULL);
        } else if (!next || s->req->deadline_us < next) {
            next = s->req->deadline_us;
        }
    }
    /* The oldest unanswered command tells whether the server stalled
     * (stopped, partitioned): then its connection is replaced. */
    aslot *old = st->head;
    if (old && old->conn == st->conn && !old->conn->dead) {
        if (old->deadline_us + STALL_US <= now) {
            aconn *cn = st->conn;
            set_error(st, "redis %.200s: %.200s",
                      "no reply for 1 s, reconnecting");
            conn_kill(cn, FG_ETIMEOUT);
            redisAsyncFree(cn->ac);
            old = st->head;
        }
    }
    if (old && !old->req && (!next || old->deadline_us + STALL_US < next))
        next = old->deadline_us + STALL_US;
    if (next)
        timer_arm(st, next, fg__mono_precise_us());
}

static int async_send_script(redis_store *st, aslot *s);
static void on_reply(redisAsyncContext *ac, void *reply, void *priv);
static void batch_add(aslot *s);

/* The reply to a fixed window's PEXPIRE NX: only an error matters. */
static void on_pexpire(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *r = reply;
    aconn *cn = ac->data;
    (void)priv;
    if (r && cn && r->type == REDIS_REPLY_ERROR)
        pexpire_error(cn->st, r);
}

/* Queue the commands of 's' on its connection. FG_OK; a negative code when
 * nothing was queued (the caller completes the check); or 1 when the check
 * was handed to the connection's teardown, which completes it. */
static int async_send(redis_store *st, aslot *s)
{
    fg__req *req = s->req;
    fg_limiter *l = req->l;
    redisAsyncContext *ac = s->conn->ac;
    cmd k;
    int rc;
    if (l->p.algorithm == FG_TOKEN_BUCKET) {
        batch_add(s);
        return FG_OK;
    }
    rc = build_key(&k, l, req->key, req->keylen, s->now_us);
    if (rc != FG_OK)
        return rc;
    switch (l->p.algorithm) {
    case FG_FIXED_WINDOW:
        incrby_cmd(&k, "INCRBY", 6, req->cost);
        if (async_append(ac, on_reply, s, &k))
            return FG_EBACKEND;
        pexpire_cmd(&k, fg__redis_window_ttl_ms(&l->p, s->now_us));
        if (async_append(ac, on_pexpire, NULL, &k) != REDIS_OK) {
            /* The INCRBY is queued but its expiry is not: sent alone it
             * could leave a key that never expires. Drop the connection
             * with its unsent buffer; freeing it answers the INCRBY's
             * callback with no reply, which fails this check. */
            conn_kill(s->conn, FG_EBACKEND);
            redisAsyncFree(ac);
            return 1;
        }
        return FG_OK;
    case FG_NAIVE_GET_SET:
        get_cmd(&k);
        if (async_append(ac, on_reply, s, &k))
            return FG_EBACKEND;
        return FG_OK;
    default:
        return async_send_script(st, s);
    }
}

static int async_send_script(redis_store *st, aslot *s)
{
    fg__req *req = s->req;
    cmd k;
    int rc = build_key(&k, req->l, req->key, req->keylen, s->now_us);
    if (rc != FG_OK)
        return rc;
    script_cmd(st, req->l, &k, req->cost, s->now_us, s->eval);
    if (async_append(s->conn->ac, on_reply, s, &k))
        return FG_EBACKEND;
    return FG_OK;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    aconn *cn = s->conn;
    redis_store *st = cn->st;
    redisReply *r = reply;
    fg_decision d;
    uint64_t count;
    int rc;
    (void)ac;
    if (!r) {
        /* The connection is going away: its error decides. */
        conn_kill(cn, FG_EBACKEND);
        slot_finish(st, s, cn->fail_rc, NULL);
        return;
    }
    if (!s->req) {
        slot_finish(st, s, FG_OK, NULL); /* answered after its deadline */
        return;
    }
    fg_limiter *l = s->req->l;
    switch (l->p.algorithm) {
    case FG_FIXED_WINDOW:
        rc = reply_count(r, &count);
        if (rc != FG_OK)
            break;
        {
            uint64_t cost = s->req->cost;
            uint64_t before = count >= cost ? count - cost : 0;
            fg__redis_window_decision(&l->p, s->now_us, before, cost, &d);
            if (!d.allowed && before < l->p.limit) {
                cmd k;
                build_key(&k, l, s->req->key, s->req->keylen, s->now_us);
                incrby_cmd(&k, "DECRBY", 6, cost);
                async_append(cn->ac, NULL, NULL, &k);
            }
        }
        break;
    case FG_NAIVE_GET_SET:
        if (s->stage == 1) {
            d = s->d;
            rc = r->type == REDIS_REPLY_ERROR
                     ? fg__redis_error_code(r->str, r->len)
                     : FG_OK;
            break;
        }
        rc = reply_count(r, &count);
        if (rc != FG_OK)
            break;
        fg__redis_window_decision(&l->p, s->now_us, count, s->req->cost, &d);
        if (d.allowed && !cn->dead) {
            cmd k;
            build_key(&k, l, s->req->key, s->req->keylen, s->now_us);
            set_cmd(&k, count + s->req->cost,
                    fg__redis_window_ttl_ms(&l->p, s->now_us));
            s->stage = 1;
            s->d = d;
            if (async_append(cn->ac, on_reply, s, &k) == REDIS_OK)
                return;
            rc = FG_EBACKEND;
        }
        break;
    default:
        rc = fg__redis_script_reply(
            r, l->p.algorithm == FG_TOKEN_BUCKET ? l->p.burst : l->p.limit, &d);
        if (rc == FG__REDIS_NOSCRIPT && !s->eval && !cn->dead) {
            s->eval = 1;
            if (async_send_script(st, s) == FG_OK)
                return;
            rc = FG_EBACKEND;
        } else if (rc == FG__REDIS_NOSCRIPT) {
            rc = FG_EPROTO;
        }
        break;
    }
    if (rc != FG_OK)
        check_error(st, rc);
    slot_finish(st, s, rc, rc == FG_OK ? &d : NULL);
}

/* ---- Token bucket batches --------------------------------------------- */

static void on_batch(redisAsyncContext *ac, void *reply, void *priv);

/* Complete every check of the batch chain at 's' with the error 'rc'. */
static void chain_fail(redis_store *st, aslot *s, int rc)
{
    if (s)
        check_error(st, rc);
    while (s) {
        aslot *next = s->bnext; /* 's' is recycled by slot_finish */
        slot_finish(st, s, rc, NULL);
        s = next;
    }
}

/* Format the token script's call for the 'n' checks of the chain at
 * 'first' into 'st->bbuf' (grown as needed, then reused): EVALSHA (EVAL
 * when 'eval' or the SHA is not known), n, the n keys, then the limit's
 * six arguments, cost and now per check. Its length, or 0 when out of
 * memory. */
static size_t batch_format(redis_store *st, aslot *first, int n, int eval)
{
    int sha = !eval && sha_ready(st, FG__LUA_TOKEN);
    const char *script =
        sha ? st->sha[FG__LUA_TOKEN] : fg__redis_lua[FG__LUA_TOKEN];
    size_t slen = sha ? 40 : strlen(script);
    size_t need = 24 + 3 * FG__REDIS_BULK_OVER + 7 + slen + 20, len = 0;
    char num[21], *b;
    for (aslot *s = first; s; s = s->bnext) {
        const rlim *rl = s->req->l->store_data;
        need += 9 * FG__REDIS_BULK_OVER + rl->kplen + s->req->keylen + 2 +
                6 * 20 + 2 * 20;
    }
    if (need > st->bcap) {
        if (!(b = fg__malloc(need)))
            return 0;
        fg__free(st->bbuf);
        st->bbuf = b;
        st->bcap = need;
    }
    b = st->bbuf;
    len = fg__redis_head(b, '*', 3 + 9 * (uint64_t)n);
    len += sha ? fg__redis_bulk(b + len, "EVALSHA", 7)
               : fg__redis_bulk(b + len, "EVAL", 4);
    len += fg__redis_bulk(b + len, script, slen);
    len += fg__redis_bulk(b + len, num, fg__redis_u64(num, (uint64_t)n));
    for (aslot *s = first; s; s = s->bnext) {
        /* The key as build_key makes it: the layout's "}:" less the ':'
         * (the limiter has checked its length). */
        const rlim *rl = s->req->l->store_data;
        size_t kl = rl->kplen + s->req->keylen + 1;
        len += fg__redis_head(b + len, '$', kl);
        fg__redis_key(b + len, rl->kp, rl->kplen, s->req->key, s->req->keylen,
                      -1);
        len += kl;
        b[len++] = '\r';
        b[len++] = '\n';
    }
    for (aslot *s = first; s; s = s->bnext) {
        const rlim *rl = s->req->l->store_data;
        for (int i = 0; i < rl->nstatic; i++)
            len += fg__redis_bulk(b + len, rl->stat[i], rl->statlen[i]);
        len += fg__redis_bulk(b + len, num, fg__redis_u64(num, s->req->cost));
        len += s->now_us
                   ? fg__redis_bulk(b + len, num, fg__redis_u64(num, s->now_us))
                   : fg__redis_bulk(b + len, "", 0);
    }
    return len;
}

/* Send the chain at 'first' as one call of the token script; on_batch
 * completes its checks. A check whose deadline already passed is dropped
 * from it. */
static void batch_emit(redis_store *st, aconn *cn, aslot *first, int eval)
{
    aslot *live = NULL, **tail = &live;
    int n = 0;
    while (first) {
        aslot *next = first->bnext;
        if (first->req) {
            *tail = first;
            tail = &first->bnext;
            n++;
        } else {
            slot_finish(st, first, FG_OK, NULL);
        }
        first = next;
    }
    *tail = NULL;
    if (!live)
        return;
    if (cn->dead) {
        chain_fail(st, live, cn->fail_rc);
        return;
    }
    size_t len = batch_format(st, live, n, eval);
    if (!len) {
        chain_fail(st, live, FG_ENOMEM);
        return;
    }
    live->bcount = n;
    live->eval = eval;
    if (redisAsyncFormattedCommand(cn->ac, on_batch, live, st->bbuf, len) !=
        REDIS_OK) {
        conn_kill(cn, FG_EBACKEND); /* hiredis refused: it is closing */
        chain_fail(st, live, FG_EBACKEND);
        return;
    }
    cn->bflight++;
}

/* Send the checks waiting on 'cn': when no batch is in flight, or when
 * they fill one. */
static void batch_flush(aconn *cn)
{
    aslot *first = cn->bhead;
    if (!first || (cn->bflight > 0 && cn->bn < BATCH_MAX))
        return;
    cn->bhead = cn->btail = NULL;
    cn->bn = 0;
    batch_emit(cn->st, cn, first, 0);
}

/* Make the batch waiting on 'cn' go out with the loop's next write (once
 * the batch in flight is answered, unless it is full). */
static void batch_want(aconn *cn)
{
    if (cn->bn >= BATCH_MAX) {
        batch_flush(cn);
    } else if (cn->bflight == 0 && !cn->flush_pending && !cn->writing) {
        /* (With a batch in flight, on_batch asks again.) */
        cn->flush_pending = 1;
        event_active(cn->flush, EV_WRITE, 0);
    }
}

/* Queue the token bucket check of 's' on its connection. Checks that
 * arrive while a batch is in flight wait for its answer and then go
 * together (group commit): under load a call carries more checks, and
 * Redis's per-call cost is paid less often; an idle connection sends at
 * the loop's next write, as before. */
static void batch_add(aslot *s)
{
    aconn *cn = s->conn;
    s->bnext = NULL;
    if (cn->btail)
        cn->btail->bnext = s;
    else
        cn->bhead = s;
    cn->btail = s;
    if (cn->bn++ == 0 || cn->bn >= BATCH_MAX)
        batch_want(cn);
}

/* The reply to a batch: four integers per check, in order. */
static void on_batch(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    aconn *cn = s->conn;
    redis_store *st = cn->st;
    redisReply *r = reply;
    int rc = FG_OK;
    (void)ac;
    cn->bflight--;
    if (!r) {
        /* The connection is going away: its error decides. */
        conn_kill(cn, FG_EBACKEND);
        rc = cn->fail_rc;
    } else if (r->type == REDIS_REPLY_ERROR) {
        rc = fg__redis_error_code(r->str, r->len);
    } else if (r->type != REDIS_REPLY_ARRAY ||
               r->elements != 4 * (size_t)s->bcount) {
        rc = FG_EPROTO;
    }
    if (rc == FG__REDIS_NOSCRIPT && !s->eval && !cn->dead) {
        batch_emit(st, cn, s, 1); /* first: the checks stay in order */
        s = NULL;
    }
    /* Checks queued behind this batch go now (none in flight). */
    if (r && cn->bflight == 0 && cn->bhead)
        batch_want(cn);
    if (!s)
        return;
    if (rc == FG__REDIS_NOSCRIPT)
        rc = FG_EPROTO;
    if (rc != FG_OK) {
        chain_fail(st, s, rc);
        return;
    }
    for (size_t i = 0; s; i++) {
        aslot *next = s->bnext;
        fg_decision d;
        int drc = FG_OK;
        if (s->req) {
            drc = fg__redis_script_values(r, i, s->req->l->p.burst, &d);
            if (drc != FG_OK)
                check_error(st, drc);
        }
        slot_finish(st, s, drc, drc == FG_OK ? &d : NULL);
        s = next;
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    aconn *cn = ac->data;
    if (!cn)
        return;
    if (status != REDIS_OK) {
        set_error(cn->st, "redis %.200s: cannot connect: %.200s", ac->errstr);
        conn_kill(cn, FG_EBACKEND);
    } else if (cn->hs_left == 0) {
        connected(cn->st);
    }
}

static void on_handshake(redisAsyncContext *ac, void *reply, void *priv)
{
    aconn *cn = ac->data;
    char err[256];
    int rc;
    if (!cn || !reply)
        return;
    rc = handshake_reply(cn->st, (char)(intptr_t)priv, reply, err, sizeof err);
    if (rc != FG_OK) {
        pthread_mutex_lock(&cn->st->mu);
        snprintf(cn->st->errstr, sizeof cn->st->errstr, "%s", err);
        error_written_locked(cn->st, 0);
        pthread_mutex_unlock(&cn->st->mu);
        conn_kill(cn, rc);
        /* In a callback hiredis defers this until the callback returns;
         * then every check queued behind fails with 'rc'. */
        redisAsyncFree(ac);
        return;
    }
    if (--cn->hs_left == 0 && (ac->c.flags & REDIS_CONNECTED))
        connected(cn->st);
}

/* The live connection, or a new one; NULL with '*rc' set while the backoff
 * runs or when a connection cannot even be started. */
static aconn *conn_get(redis_store *st, int *rc)
{
    if (st->conn && !st->conn->dead)
        return st->conn;
    pthread_mutex_lock(&st->mu);
    int wait = st->retry_at && fg__mono_precise_us() < st->retry_at;
    pthread_mutex_unlock(&st->mu);
    if (wait) {
        *rc = FG_EBACKEND;
        return NULL;
    }
    redisAsyncContext *ac = st->url.path
                                ? redisAsyncConnectUnix(st->url.path)
                                : redisAsyncConnect(st->addr, st->url.port);
    aconn *cn = NULL;
    if (!ac) {
        *rc = FG_ENOMEM;
        return NULL;
    }
    if (ac->err) {
        set_error(st, "redis %.200s: cannot connect: %.200s", ac->errstr);
        goto fail;
    }
    cn = fg__calloc(1, sizeof *cn);
    if (!cn)
        goto fail;
    cn->st = st;
    cn->ac = ac;
    cn->rev = event_new(st->evb, ac->c.fd, EV_READ | EV_PERSIST, ev_read, cn);
    cn->wev = event_new(st->evb, ac->c.fd, EV_WRITE, ev_write, cn);
    cn->flush = event_new(st->evb, -1, 0, ev_flush, cn);
    if (!cn->rev || !cn->wev || !cn->flush)
        goto fail;
    ac->data = cn;
    ac->ev.data = cn;
    ac->ev.addRead = hook_add_read;
    ac->ev.delRead = hook_del_read;
    ac->ev.addWrite = hook_add_write;
    ac->ev.delWrite = hook_del_write;
    ac->ev.cleanup = hook_cleanup;
    /* The connect completes when the socket turns writable. */
    hook_add_read(cn);
    hook_add_write(cn);
    redisAsyncSetConnectCallback(ac, on_connect);
    {
        /* The handshake goes first on the wire; checks queue behind it. */
        handshake h;
        handshake_build(st, &h);
        for (int i = 0; i < h.n; i++)
            if (redisAsyncCommandArgv(
                    ac, on_handshake, (void *)(intptr_t)h.c[i].kind,
                    h.c[i].argc, h.c[i].argv, h.c[i].len) != REDIS_OK)
                goto fail_attached;
        cn->hs_left = h.n;
    }
    st->conn = cn;
    return cn;

fail_attached:
    /* The hooks own 'cn' now: freeing the context frees it. */
    st->conn = cn;
    conn_kill(cn, FG_ENOMEM);
    redisAsyncFree(ac);
    *rc = FG_ENOMEM;
    return NULL;
fail:
    if (cn) {
        if (cn->rev)
            event_free(cn->rev);
        if (cn->wev)
            event_free(cn->wev);
        if (cn->flush)
            event_free(cn->flush);
        fg__free(cn);
    }
    redisAsyncFree(ac);
    backoff(st);
    *rc = FG_EBACKEND;
    return NULL;
}

static void redis_check_async(fg_store *s, fg__req *req)
{
    redis_store *st = (redis_store *)s;
    int rc = FG_EBACKEND;
    aconn *cn = st->closing ? NULL : conn_get(st, &rc);
    aslot *sl;
    if (!cn) {
        fg__req_done(req, rc, NULL);
        return;
    }
    sl = st->free_slots;
    if (sl)
        st->free_slots = sl->next;
    else if (!(sl = fg__malloc(sizeof *sl))) {
        fg__req_done(req, FG_ENOMEM, NULL);
        return;
    }
    memset(sl, 0, sizeof *sl);
    sl->req = req;
    sl->conn = cn;
    sl->now_us = check_now(st, req->l);
    uint64_t t0 = fg__mono_precise_us();
    req->deadline_us = t0 + (uint64_t)req->l->lim.timeout_ms * 1000u;
    sl->deadline_us = req->deadline_us;
    sl->prev = st->tail;
    if (st->tail)
        st->tail->next = sl;
    else
        st->head = sl;
    st->tail = sl;
    /* Armed first: a full batch is sent, and may complete, inside
     * async_send. A check completed early leaves a timer that finds
     * nothing to do. */
    timer_arm(st, sl->deadline_us, t0);
    rc = async_send(st, sl);
    if (rc > 0 || rc == FG_OK)
        return;
    if (rc == FG_EBACKEND) /* hiredis refused: the context is closing */
        conn_kill(cn, rc);
    slot_finish(st, sl, rc, NULL);
}

/* The reply to a queued refund: nobody waits for it. NOSCRIPT sends it
 * again with EVAL on the same connection; anything else (a NULL reply from
 * a connection going away included) just recycles the record. Refunds have
 * no slot: the in-order matching of checks, their deadlines and the stall
 * detection never see them. */
static void on_refund(redisAsyncContext *ac, void *reply, void *priv)
{
    rfund *rf = priv;
    redis_store *st = rf->st;
    redisReply *r = reply;
    aconn *cn = ac->data;
    if (r && cn && !cn->dead && !rf->eval && r->type == REDIS_REPLY_ERROR &&
        fg__redis_error_code(r->str, r->len) == FG__REDIS_NOSCRIPT) {
        rf->eval = 1;
        refund_cmd(st, rf);
        if (async_append(ac, on_refund, rf, &rf->k) == REDIS_OK)
            return;
    }
    rf->next = st->free_refunds;
    st->free_refunds = rf;
}

/* Queue a refund with the checks: written with the next batch, its reply
 * read and dropped by on_refund. */
static int redis_refund_async(fg_store *s, fg_limiter *l, const char *key,
                              size_t keylen, uint64_t cost)
{
    redis_store *st = (redis_store *)s;
    int rc = FG_EBACKEND;
    aconn *cn;
    rfund *rf;
    if (l->p.algorithm == FG_NAIVE_GET_SET)
        return FG_ENOTSUP;
    cn = st->closing ? NULL : conn_get(st, &rc);
    if (!cn)
        return rc;
    rf = st->free_refunds;
    if (rf)
        st->free_refunds = rf->next;
    else if (!(rf = fg__malloc(sizeof *rf)))
        return FG_ENOMEM;
    rf->st = st;
    rc = refund_prepare(rf, l, key, keylen, cost, check_now(st, l));
    if (rc == FG_OK) {
        refund_cmd(st, rf);
        if (async_append(cn->ac, on_refund, rf, &rf->k) == REDIS_OK)
            return FG_OK;
        rc = FG_EBACKEND; /* hiredis refused: the context is closing */
        conn_kill(cn, rc);
    }
    rf->next = st->free_refunds;
    st->free_refunds = rf;
    return rc;
}

/* ---- Store ------------------------------------------------------------- */

static int redis_limiter_init(fg_store *s, fg_limiter *l, void **out, char *err,
                              size_t errlen)
{
    redis_store *st = (redis_store *)s;
    size_t namelen = strnlen(l->lim.name, FG_NAME_MAX);
    rlim *rl;
    rl = fg__calloc(1, sizeof *rl + st->url.prefixlen + namelen + 3);
    if (!rl)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    memcpy(rl->kp, st->url.prefix, st->url.prefixlen);
    memcpy(rl->kp + st->url.prefixlen, l->lim.name, namelen);
    memcpy(rl->kp + st->url.prefixlen + namelen, ":{", 2);
    rl->kplen = st->url.prefixlen + namelen + 2;
    rl->script = -1;
    if (l->p.algorithm == FG_SLIDING_WINDOW) {
        rl->script = FG__LUA_SLIDING;
        rl->nstatic = 2;
        rl->statlen[0] = fg__redis_u64(rl->stat[0], l->p.period_us);
        rl->statlen[1] = fg__redis_u64(rl->stat[1], l->p.limit);
    } else if (l->p.algorithm == FG_TOKEN_BUCKET) {
        rl->script = FG__LUA_TOKEN;
        const uint64_t v[6] = {l->p.scale,    l->p.unit_us,    l->p.unit_frac,
                               l->p.depth_us, l->p.depth_frac, l->p.t_scaled};
        rl->nstatic = 6;
        for (int i = 0; i < 6; i++)
            rl->statlen[i] = fg__redis_u64(rl->stat[i], v[i]);
    }
    *out = rl;
    return FG_OK;
}

static void redis_limiter_free(fg_store *s, fg_limiter *l, void *data)
{
    (void)s;
    (void)l;
    fg__free(data);
}

static uint64_t redis_keys(fg_store *s)
{
    (void)s;
    return 0;
}

static void redis_close(fg_store *s)
{
    redis_store *st = (redis_store *)s;
    if (!st)
        return;
    st->closing = 1;
    if (st->conn) {
        aconn *cn = st->conn;
        conn_kill(cn, FG_EBACKEND);
        /* Runs every unanswered callback (each check completes once),
         * then the cleanup hook. */
        redisAsyncFree(cn->ac);
    }
    while (st->head) /* slots of connections already gone */
        slot_finish(st, st->head, FG_EBACKEND, NULL);
    while (st->free_slots) {
        aslot *n = st->free_slots->next;
        fg__free(st->free_slots);
        st->free_slots = n;
    }
    while (st->free_refunds) { /* all back: the connections are gone */
        rfund *n = st->free_refunds->next;
        fg__free(st->free_refunds);
        st->free_refunds = n;
    }
    if (st->timer)
        event_free(st->timer);
    fg__free(st->bbuf);
    for (int i = 0; i < st->nidle; i++)
        redisFree(st->idle[i].c);
    pthread_mutex_destroy(&st->mu);
    fg__redis_url_free(&st->url);
    fg__free(st);
}

/* Resolve the URL's host into 'st->addr', once: the first IPv4 address,
 * else the first IPv6 one (hiredis's own preference). A numeric host
 * resolves without DNS. */
static int resolve(redis_store *st, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL, *pick = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(st->url.host, NULL, &hints, &res);
    if (gai != 0)
        return fg__seterr(err, errlen, FG_EBACKEND,
                          "redis %s: cannot resolve the host: %s", st->where,
                          gai_strerror(gai));
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET || (!pick && a->ai_family == AF_INET6)) {
            pick = a;
            if (a->ai_family == AF_INET)
                break;
        }
    const void *in =
        !pick ? NULL
        : pick->ai_family == AF_INET
            ? (const void *)&((struct sockaddr_in *)pick->ai_addr)->sin_addr
            : (const void *)&((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr;
    int ok = in && inet_ntop(pick->ai_family, in, st->addr, sizeof st->addr);
    freeaddrinfo(res);
    if (!ok)
        return fg__seterr(err, errlen, FG_EBACKEND,
                          "redis %s: the host has no IPv4 or IPv6 address",
                          st->where);
    return FG_OK;
}

fg_store *fg__store_redis_open(const char *url, struct event_base *base,
                               char *err, size_t errlen)
{
    redis_store *st = fg__calloc(1, sizeof *st);
    if (!st) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    if (fg__redis_url_parse(url, &st->url, err, errlen) != FG_OK) {
        fg__free(st);
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    st->base.ops = base ? &redis_async_ops : &redis_ops;
    st->clock = wall_clock;
    st->evb = base;
    st->rng = fg__mono_precise_us() ^ (uint64_t)(uintptr_t)st;
    fg__redis_url_where(&st->url, st->where, sizeof st->where);
    if (!st->url.path && resolve(st, err, errlen) != FG_OK) {
        redis_close(&st->base);
        return NULL;
    }
    if (base) {
        st->timer = evtimer_new(base, on_timer, st);
        if (!st->timer) {
            fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
            redis_close(&st->base);
            return NULL;
        }
    }
    if (!st->url.lazy) {
        /* Probe now: a wrong password, database or address is a clear
         * error at start rather than a failure policy at every check. It
         * also loads the scripts, so checks can use EVALSHA at once. */
        sconn c;
        uint64_t deadline = fg__mono_precise_us() +
                            (uint64_t)st->url.connect_timeout_ms * 1000u;
        if (sync_connect(st, deadline, &c, err, errlen) != FG_OK) {
            redis_close(&st->base);
            return NULL;
        }
        if (base)
            redisFree(c.c);
        else
            st->idle[st->nidle++] = c;
    }
    return &st->base;
}

int fg__store_redis_set_clock(fg_store *s, fg_clock_fn clock, void *ctx)
{
    redis_store *st = (redis_store *)s;
    if (!s || (s->ops != &redis_ops && s->ops != &redis_async_ops))
        return FG_EINVAL;
    st->clock = clock ? clock : wall_clock;
    st->clock_ctx = ctx;
    return FG_OK;
}

unsigned long fg__store_redis_error_writes(fg_store *s)
{
    if (!s || (s->ops != &redis_ops && s->ops != &redis_async_ops))
        return 0;
    return atomic_load(&((redis_store *)s)->err_writes);
}

const char *fg__store_redis_last_error(fg_store *s)
{
    if (!s || (s->ops != &redis_ops && s->ops != &redis_async_ops))
        return "";
    return ((redis_store *)s)->errstr;
}

static const fg__store_ops redis_ops = {
    .scheme = "redis",
    .limiter_init = redis_limiter_init,
    .limiter_free = redis_limiter_free,
    .check = redis_check,
    .refund = redis_refund,
    .keys = redis_keys,
    .close = redis_close,
};

static const fg__store_ops redis_async_ops = {
    .scheme = "redis",
    .limiter_init = redis_limiter_init,
    .limiter_free = redis_limiter_free,
    .check = redis_check,
    .check_async = redis_check_async,
    .refund = redis_refund_async,
    .keys = redis_keys,
    .close = redis_close,
};
