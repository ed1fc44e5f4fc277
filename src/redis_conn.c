/* redis_conn.c -- connections to one Redis server (see redis_conn.h).
 *
 * Blocking: a small pool of hiredis contexts, each used by one thread at a
 * time; sends never block and every wait is a ppoll() bounded by the
 * check's own deadline, so no check waits longer than its limit's timeout.
 * Asynchronous: one hiredis async context on the caller's libevent loop;
 * commands appended as checks arrive are written together when the loop
 * next runs (one write per iteration).
 * A context whose I/O or protocol failed, or whose deadline passed, is
 * freed, never reused (error replies leave it in step). After a connect,
 * I/O or protocol failure (not a mere passed deadline) a new one is made
 * only after a jittered, growing backoff during which checks fail at once.
 * Host names are resolved once, at open: hiredis 0.14 would resolve with a
 * blocking getaddrinfo() on every connect. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "dns.h"
#include "redis_conn.h"
#include "store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

#define BACKOFF_MIN_US 5000u
#define BACKOFF_MAX_US 200000u

/* Note a failed connection: the next attempt waits a random time in
 * [d/2, d], d doubling from BACKOFF_MIN_US to BACKOFF_MAX_US, so that many
 * servers do not reconnect in step. Call with 'mu' held. */
static void backoff_locked(fg__rnode *st)
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

static void backoff(fg__rnode *st)
{
    pthread_mutex_lock(&st->mu);
    backoff_locked(st);
    pthread_mutex_unlock(&st->mu);
}

static void connected(fg__rnode *st)
{
    pthread_mutex_lock(&st->mu);
    st->fails = 0;
    st->retry_at = 0;
    pthread_mutex_unlock(&st->mu);
}

static void learn_sha(fg__rnode *st, int i, const redisReply *r)
{
    pthread_mutex_lock(&st->mu);
    fg__redis_sha_learn(&st->shas, i, r);
    pthread_mutex_unlock(&st->mu);
}

/* Append 'k' to the blocking connection 'sc', formatted on the stack (no
 * allocation, no printf) when it fits, else by hiredis. FG_OK, or
 * FG_ENOMEM with the connection marked broken (its buffer may hold part). */
int fg__rsync_append(fg__rsconn *sc, fg__rcmd *k)
{
    char buf[4096];
    size_t n = fg__redis_format(buf, sizeof buf, k->argc, k->argv, k->len);
    int rc = n ? redisAppendFormattedCommand(sc->c, buf, n)
               : redisAppendCommandArgv(sc->c, k->argc, k->argv, k->len);
    if (rc == REDIS_OK)
        return FG_OK;
    sc->broken = FG__SC_FAILED;
    return FG_ENOMEM;
}

/* The same for an async context; REDIS_OK or REDIS_ERR. */
int fg__rasync_append(redisAsyncContext *ac, redisCallbackFn *fn, void *priv,
                      fg__rcmd *k)
{
    char buf[4096];
    size_t n = fg__redis_format(buf, sizeof buf, k->argc, k->argv, k->len);
    if (n)
        return redisAsyncFormattedCommand(ac, fn, priv, buf, n);
    return redisAsyncCommandArgv(ac, fn, priv, k->argc, k->argv, k->len);
}

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
int fg__rsync_exchange(fg__rsconn *sc, int n, redisReply **r, uint64_t deadline)
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
        sc->broken = rc == FG_ETIMEOUT ? FG__SC_LATE : FG__SC_FAILED;
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

static void handshake_build(fg__rnode *st, handshake *h)
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
        if (fg__redis_sha(&st->shas, i))
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
static int handshake_reply(fg__rnode *st, char kind, const redisReply *r,
                           char *err, size_t errlen)
{
    if (r->type == REDIS_REPLY_ERROR && kind != 'a' &&
        strncmp(r->str, "NOAUTH", 6) == 0)
        return fg__seterr(err, errlen, FG_EAUTH,
                          "redis %s: the server requires a password (%s)",
                          st->where,
                          st->url.path ? "unix:///path?password=P[&user=U]"
                                       : "redis://user:password@host:port");
    /* A server at maxclients answers the first command with its refusal,
     * and closes: that is no authentication failure, nor a bad database. */
    if (r->type == REDIS_REPLY_ERROR &&
        fg__redis_error_code(r->str, r->len) == FG_EBACKEND)
        return fg__seterr(err, errlen, FG_EBACKEND,
                          "redis %s: connection refused (%.200s)", st->where,
                          r->str);
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
    /* Out of range, or not permitted: the store cannot be used (a
     * failure, which on_failure decides), not a check's bad input; at
     * open, a configuration error (db_refused). */
    atomic_store_explicit(&st->db_refused, 1, memory_order_relaxed);
    return fg__seterr(err, errlen, FG_EBACKEND,
                      "redis %s: cannot select database %u (%.200s)", st->where,
                      st->url.db, r->str);
}

/* Connect a new blocking context by 'deadline' and run the handshake. */
int fg__rsync_connect(fg__rnode *st, uint64_t deadline, fg__rsconn *out,
                      char *err, size_t errlen)
{
    uint64_t now = fg__mono_precise_us();
    uint64_t left = deadline > now ? deadline - now : 1;
    struct timeval tv = {(time_t)(left / 1000000),
                         (suseconds_t)(left % 1000000)};
    char addr[INET6_ADDRSTRLEN];
    pthread_mutex_lock(&st->mu); /* an async node may readdress */
    memcpy(addr, st->addr, sizeof addr);
    pthread_mutex_unlock(&st->mu);
    redisContext *c = st->url.path
                          ? redisConnectUnixWithTimeout(st->url.path, tv)
                          : redisConnectWithTimeout(addr, st->url.port, tv);
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
    /* Each reply judged as it comes: a server that refuses and closes
     * (maxclients) is reported by its refusal, not by the close. */
    fg__rsconn sc = {c, FG__SC_OK, 0};
    for (int i = 0; i < h.n && rc == FG_OK; i++) {
        rc = fg__rsync_exchange(&sc, 1, &r[i], deadline);
        if (rc == FG_EPROTO)
            fg__seterr(err, errlen, rc,
                       "redis %s: protocol error during handshake (%.200s): "
                       "is a Redis server listening there?",
                       st->where, c->errstr);
        else if (rc != FG_OK)
            fg__seterr(err, errlen, rc, "redis %s: %s during handshake",
                       st->where,
                       rc == FG_ETIMEOUT ? "timed out" : "connection lost");
        else
            rc = handshake_reply(st, h.c[i].kind, r[i], err, errlen);
    }
    for (int i = 0; i < h.n; i++)
        freeReplyObject(r[i]);
    if (rc != FG_OK) {
        redisFree(c);
        return rc;
    }
    out->c = c;
    out->broken = FG__SC_OK;
    out->skip = 0;
    return FG_OK;
}

/* 1 when the server closed the idle connection 'c' (a restart: FIN or
 * RST already here). Replies it still owes ('skip') may be readable, so
 * only the end of the stream counts. */
static int idle_closed(const fg__rsconn *c)
{
    struct pollfd p = {.fd = c->c->fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 &&
           (p.revents & (POLLRDHUP | POLLERR | POLLHUP | POLLNVAL));
}

void fg__rnode_scripts_lost(fg__rnode *st)
{
    atomic_store_explicit(&st->scripts_lost, 1, memory_order_relaxed);
}

/* SCRIPT LOAD of every script on 'c', when an EVAL that answered a
 * NOSCRIPT was refused (NOPERM). On a failure the connection is freed. */
static int reload_scripts(fg__rnode *st, fg__rsconn *c, uint64_t deadline)
{
    if (!atomic_load_explicit(&st->scripts_lost, memory_order_relaxed) ||
        !atomic_exchange(&st->scripts_lost, 0))
        return FG_OK;
    int rc = FG_OK;
    for (int i = 0; i < FG__LUA_COUNT && rc == FG_OK; i++) {
        fg__rcmd k = {.argc = 3,
                      .argv = {"SCRIPT", "LOAD", fg__redis_lua[i]},
                      .len = {6, 4, strlen(fg__redis_lua[i])}};
        rc = fg__rsync_append(c, &k);
    }
    redisReply *r[FG__LUA_COUNT] = {0};
    if (rc == FG_OK)
        rc = fg__rsync_exchange(c, FG__LUA_COUNT, r, deadline);
    for (int i = 0; i < FG__LUA_COUNT; i++)
        freeReplyObject(r[i]);
    if (rc != FG_OK) {
        /* As a check's failure on this connection would have been. (Not
         * tried again: the next EVAL refused asks for it.) */
        fg__rnode_check_error(st, rc);
        if (c->broken == FG__SC_FAILED)
            backoff(st);
        redisFree(c->c);
    }
    return rc;
}

/* A connection for one blocking check: an idle one the server has not
 * closed, or a new one unless the backoff says not yet; the scripts loaded
 * on it first after a NOSCRIPT. */
int fg__rpool_get(fg__rnode *st, uint64_t deadline, fg__rsconn *out)
{
    char err[256];
    int rc;
    pthread_mutex_lock(&st->mu);
    while (st->nidle > 0) {
        *out = st->idle[--st->nidle];
        if (!idle_closed(out)) {
            pthread_mutex_unlock(&st->mu);
            return reload_scripts(st, out, deadline);
        }
        redisFree(out->c);
    }
    if (st->retry_at && fg__mono_precise_us() < st->retry_at) {
        pthread_mutex_unlock(&st->mu);
        return FG_EBACKEND;
    }
    pthread_mutex_unlock(&st->mu);
    rc = fg__rsync_connect(st, deadline, out, err, sizeof err);
    pthread_mutex_lock(&st->mu);
    if (rc == FG_OK) {
        st->fails = 0;
        st->retry_at = 0;
    } else {
        fg__rnode_error_locked(st, 0, err);
        backoff_locked(st);
    }
    pthread_mutex_unlock(&st->mu);
    return rc == FG_OK ? reload_scripts(st, out, deadline) : rc;
}

/* Return a connection after a check: kept when every exchange completed
 * (Redis may have answered with an error), freed otherwise: a timed-out
 * command may still answer, and hiredis contexts are not reused after an
 * error. Only an I/O or protocol failure starts the backoff: a check whose
 * deadline passed on a working connection (one slow reply) must not make
 * the checks behind it fail at once. */
void fg__rpool_put(fg__rnode *st, fg__rsconn *c)
{
    if (c->broken == FG__SC_FAILED) {
        pthread_mutex_lock(&st->mu);
        backoff_locked(st);
        pthread_mutex_unlock(&st->mu);
    } else if (c->broken == FG__SC_OK) {
        pthread_mutex_lock(&st->mu);
        if (st->nidle < FG__RPOOL_MAX) {
            st->idle[st->nidle++] = *c;
            c = NULL;
        }
        pthread_mutex_unlock(&st->mu);
    }
    if (c)
        redisFree(c->c);
}

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
    redisAsyncHandleRead(((fg__raconn *)arg)->ac);
}

static void ev_write(evutil_socket_t fd, short what, void *arg)
{
    fg__raconn *cn = arg;
    (void)fd;
    (void)what;
    cn->writing = 0; /* a fired EV_WRITE is no longer pending */
    cn->st->before_write(cn);
    redisAsyncHandleWrite(cn->ac);
}

static void ev_flush(evutil_socket_t fd, short what, void *arg)
{
    fg__raconn *cn = arg;
    fg__rnode *st = cn->st;
    (void)fd;
    (void)what;
    /* The batch is appended while 'flush_pending' still says a write is
     * coming: it asks for no second one. */
    cn->st->before_write(cn);
    cn->flush_pending = 0;
    /* hiredis may free the context (and 'cn') inside; 'flushing' lives in
     * the store. */
    st->flushing = cn;
    redisAsyncHandleWrite(cn->ac);
    st->flushing = NULL;
}

static void hook_add_read(void *p)
{
    fg__raconn *cn = p;
    if (!cn->reading) {
        cn->reading = 1;
        event_add(cn->rev, NULL);
    }
}

static void hook_del_read(void *p)
{
    fg__raconn *cn = p;
    if (cn->reading) {
        cn->reading = 0;
        event_del(cn->rev);
    }
}

static void hook_add_write(void *p)
{
    fg__raconn *cn = p;
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
    fg__raconn *cn = p;
    if (cn->writing) {
        cn->writing = 0;
        event_del(cn->wev);
    }
}

/* Mark 'cn' as finished: no new commands, its unanswered checks fail with
 * 'rc', and the next connection waits for the backoff. */
void fg__raconn_kill(fg__raconn *cn, int rc)
{
    fg__rnode *st = cn->st;
    if (cn->dead)
        return;
    if (rc == FG_EBACKEND && cn->ac->c.err == REDIS_ERR_PROTOCOL) {
        /* Not lost: what answered does not speak Redis's protocol. */
        rc = FG_EPROTO;
        fg__rnode_set_error_as(
            st, rc,
            "redis %.200s: protocol error (%.200s): is a Redis "
            "server listening there?",
            cn->ac->c.errstr);
    } else if (rc == FG_EBACKEND && cn->ac->c.err &&
               (cn->ac->c.flags & REDIS_CONNECTED)) {
        /* A connection that worked, closed or broken: its checks fail
         * for that, not for whatever the node said last (an OOM a minute
         * ago). */
        fg__rnode_set_error_as(st, rc, "redis %.200s: connection lost: %.200s",
                               cn->ac->c.errstr);
    }
    /* One the server closed after a second or more of use (its idle
     * timeout, CLIENT KILL, a restart) is replaced at the next check, not
     * after a backoff that would fail the checks meanwhile (and open the
     * breaker): a server that refuses the new one backs off then. */
    int closed = rc == FG_EBACKEND && cn->ac->c.err == REDIS_ERR_EOF &&
                 (cn->ac->c.flags & REDIS_CONNECTED) &&
                 fg__mono_precise_us() >= cn->opened_us + 1000000u;
    cn->dead = 1;
    cn->fail_rc = rc;
    if (st->conn == cn)
        st->conn = NULL;
    if (!closed)
        backoff(st);
    fg__rnode_readdress(st);
}

/* hiredis frees the context: every callback has run (with NULL replies for
 * the unanswered), so nothing refers to 'cn' any more. */
static void hook_cleanup(void *p)
{
    fg__raconn *cn = p;
    if (!cn->dead)
        fg__raconn_kill(cn, FG_EBACKEND);
    cn->st->teardown(cn);
    event_free(cn->rev);
    event_free(cn->wev);
    event_free(cn->flush);
    cn->ac->ev.data = NULL;
    cn->ac->data = NULL;
    fg__free(cn);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    fg__raconn *cn = ac->data;
    if (!cn)
        return;
    if (status != REDIS_OK) {
        fg__rnode_set_error(cn->st, "redis %.200s: cannot connect: %.200s",
                            ac->errstr);
        fg__raconn_kill(cn, FG_EBACKEND);
    } else if (cn->hs_left == 0) {
        connected(cn->st);
    }
}

static void on_handshake(redisAsyncContext *ac, void *reply, void *priv)
{
    fg__raconn *cn = ac->data;
    char err[256];
    int rc;
    if (!cn || !reply)
        return;
    rc = handshake_reply(cn->st, (char)(intptr_t)priv, reply, err, sizeof err);
    if (rc != FG_OK) {
        pthread_mutex_lock(&cn->st->mu);
        fg__rnode_error_locked(cn->st, rc, err); /* the reason of its checks */
        pthread_mutex_unlock(&cn->st->mu);
        fg__raconn_kill(cn, rc);
        /* In a callback hiredis defers this until the callback returns;
         * then every check queued behind fails with 'rc'. */
        redisAsyncFree(ac);
        return;
    }
    char kind = (char)(intptr_t)priv;
    if ((kind == 'a' || kind == 's') && --cn->gate_left == 0 && cn->st->ready)
        cn->st->ready(cn);
    if (--cn->hs_left == 0 && (ac->c.flags & REDIS_CONNECTED))
        connected(cn->st);
}

static void on_sha_load(redisAsyncContext *ac, void *reply, void *priv)
{
    fg__raconn *cn = ac->data;
    if (cn && reply)
        learn_sha(cn->st, (int)(intptr_t)priv, reply);
}

/* Scripts not known (their load failed at connect): checks send them whole
 * with EVAL, 2 to 3 KB each, until this loads them on 'cn'. After a
 * NOSCRIPT (scripts_lost), every script is loaded again. */
static void load_missing(fg__rnode *st, fg__raconn *cn)
{
    /* A load that failed (BUSY, LOADING) is tried again a second later;
     * one asked for by a refused EVAL at once. */
    int all = atomic_exchange(&st->scripts_lost, 0);
    uint64_t now = fg__mono_precise_us();
    if (!all && now < st->sha_retry_at)
        return;
    st->sha_retry_at = now + 1000000;
    for (int i = 0; i < FG__LUA_COUNT; i++) {
        if (!all && fg__redis_sha(&st->shas, i))
            continue;
        const char *argv[3] = {"SCRIPT", "LOAD", fg__redis_lua[i]};
        size_t len[3] = {6, 4, strlen(fg__redis_lua[i])};
        redisAsyncCommandArgv(cn->ac, on_sha_load, (void *)(intptr_t)i, 3, argv,
                              len);
    }
}

/* The live connection, or a new one; NULL with '*rc' set while the backoff
 * runs or when a connection cannot even be started. */
fg__raconn *fg__raconn_get(fg__rnode *st, int *rc)
{
    if (st->conn && !st->conn->dead) {
        if (__builtin_expect(
                (atomic_load_explicit(&st->shas.known, memory_order_relaxed) !=
                     (1 << FG__LUA_COUNT) - 1 ||
                 atomic_load_explicit(&st->scripts_lost, memory_order_relaxed)),
                0) &&
            st->conn->hs_left == 0)
            load_missing(st, st->conn);
        return st->conn;
    }
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
    fg__raconn *cn = NULL;
    if (!ac) {
        *rc = FG_ENOMEM;
        return NULL;
    }
    if (ac->err) {
        fg__rnode_set_error(st, "redis %.200s: cannot connect: %.200s",
                            ac->errstr);
        goto fail;
    }
    cn = fg__calloc(1, sizeof *cn);
    if (!cn)
        goto fail;
    cn->st = st;
    cn->ac = ac;
    cn->opened_us = fg__mono_precise_us();
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
        for (int i = 0; i < h.n; i++) {
            if (redisAsyncCommandArgv(
                    ac, on_handshake, (void *)(intptr_t)h.c[i].kind,
                    h.c[i].argc, h.c[i].argv, h.c[i].len) != REDIS_OK)
                goto fail_attached;
            cn->gate_left += h.c[i].kind == 'a' || h.c[i].kind == 's';
        }
        cn->hs_left = h.n;
    }
    st->conn = cn;
    return cn;

fail_attached:
    /* The hooks own 'cn' now: freeing the context frees it. */
    st->conn = cn;
    fg__raconn_kill(cn, FG_ENOMEM);
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

int fg__rnode_init(fg__rnode *st, const char *url, const char *num,
                   struct event_base *evb, char *err, size_t errlen)
{
    pthread_mutex_init(&st->mu, NULL);
    if (fg__redis_url_parse(url, &st->url, err, errlen) != FG_OK)
        return FG_EINVAL;
    st->evb = evb;
    st->rng = fg__mono_precise_us() ^ (uint64_t)(uintptr_t)st;
    fg__redis_url_where(&st->url, st->where, sizeof st->where);
    fg__redis_url_name(&st->url, st->name, sizeof st->name);
    if (!st->url.path && num) {
        st->named = 1;
        snprintf(st->addr, sizeof st->addr, "%s", num);
    } else if (!st->url.path) {
        unsigned char buf[sizeof(struct in6_addr)];
        st->named = inet_pton(AF_INET, st->url.host, buf) != 1 &&
                    inet_pton(AF_INET6, st->url.host, buf) != 1;
        /* Once: an async store resolves on its loop only what it was given
         * at open; the hosts it learns later (Sentinel's masters, Cluster's
         * nodes) are looked up without blocking (dns.c). */
        char why[160];
        if (fg__dns_resolve(st->url.host, st->addr, why, sizeof why) != FG_OK)
            return fg__seterr(err, errlen, FG_EBACKEND, "redis %s: %s",
                              st->where, why);
    }
    return FG_OK;
}

void fg__rnode_close(fg__rnode *st)
{
    if (st->dq)
        fg__dns_cancel(st->dq);
    fg__dns_free(st->dns);
    for (int i = 0; i < st->nidle; i++)
        redisFree(st->idle[i].c);
    pthread_mutex_destroy(&st->mu);
    fg__redis_url_free(&st->url);
}

void fg__rsync_send_now(fg__rsconn *sc)
{
    if (sync_flush(sc->c, 0) == FG_EBACKEND)
        sc->broken = FG__SC_FAILED;
}

void fg__raconn_want_write(fg__raconn *cn)
{
    if (!cn->flush_pending && !cn->writing) {
        cn->flush_pending = 1;
        event_active(cn->flush, EV_WRITE, 0);
    }
}

/* The value of 'name' in CONFIG GET's reply 'r' (pairs), or NULL. */
static const char *config_value(const redisReply *r, const char *name)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
            !strcmp(k->str, name))
            return v->str;
    }
    return NULL;
}

int fg__rnode_eval_check(fg__rnode *st, fg__rsconn *sc, uint64_t deadline,
                         char *err, size_t errlen)
{
    fg__rcmd k = {
        .argc = 3, .argv = {"EVAL", "return 1", "0"}, .len = {4, 8, 1}};
    redisReply *r = NULL;
    if (fg__redis_sha(&st->shas, 0) || fg__rsync_append(sc, &k) != FG_OK ||
        fg__rsync_exchange(sc, 1, &r, deadline) != FG_OK)
        return FG_OK;
    int rc = FG_OK;
    if (r->type == REDIS_REPLY_ERROR &&
        !strncmp(r->str, "ERR unknown command", 19))
        rc = fg__seterr(err, errlen, FG_EINVAL,
                        "redis %s: not a Redis server that runs scripts "
                        "(%.*s): a Sentinel? give "
                        "sentinel://HOST:PORT/MASTER",
                        st->where, (int)strcspn(r->str, ",\r\n"), r->str);
    freeReplyObject(r);
    return rc;
}

void fg__rnode_settings_check(fg__rnode *st, fg__rsconn *sc, uint64_t deadline)
{
    fg__rcmd k = {
        .argc = 3, .argv = {"CONFIG", "GET", "maxmemory*"}, .len = {6, 3, 10}};
    redisReply *r = NULL;
    st->warning[0] = '\0';
    if (fg__rsync_append(sc, &k) != FG_OK ||
        fg__rsync_exchange(sc, 1, &r, deadline) != FG_OK)
        return;
    if (r->type == REDIS_REPLY_ARRAY) {
        const char *max = config_value(r, "maxmemory");
        const char *policy = config_value(r, "maxmemory-policy");
        if (max && policy && strcmp(max, "0") && strcmp(policy, "noeviction"))
            snprintf(st->warning, sizeof st->warning,
                     "redis %.100s: maxmemory-policy %.40s evicts keys once "
                     "maxmemory (%.20s bytes) is reached: a limit whose "
                     "counter is evicted starts again from zero and "
                     "over-admits; set noeviction",
                     st->where, policy, max);
    }
    freeReplyObject(r);
    r = NULL;
    static const char none[] = "0000000000000000000000000000000000000000";
    fg__rcmd e = {.argc = 3,
                  .argv = {"EVALSHA", none, "0"},
                  .len = {7, sizeof none - 1, 1}};
    if (fg__rsync_append(sc, &e) != FG_OK ||
        fg__rsync_exchange(sc, 1, &r, deadline) != FG_OK)
        return;
    /* Only a refusal for good: not LOADING, BUSY or a proxy's own words. */
    if (r->type == REDIS_REPLY_ERROR &&
        (!strncmp(r->str, "NOPERM", 6) ||
         !strncmp(r->str, "ERR unknown command", 19))) {
        size_t o = strlen(st->warning);
        snprintf(st->warning + o, sizeof st->warning - o,
                 "%sredis %.100s: EVALSHA is refused (%.*s): every check of "
                 "a token_bucket or sliding_window limit fails, in every "
                 "mode (they run scripts; fixed windows run none); allow "
                 "EVALSHA and EVAL",
                 o ? "; " : "", st->where,
                 (int)(strcspn(r->str, ",\r\n") < 120 ? strcspn(r->str, ",\r\n")
                                                      : 120),
                 r->str);
    }
    freeReplyObject(r);
    r = NULL;
    /* An ACL user whose key patterns leave out the prefix: every check
     * fails with NOPERM. A GET of a key no limit uses (GET is among the
     * commands an ACL user needs; a refused command is said otherwise). */
    char key[FG__REDIS_PREFIX_MAX + 32];
    int kn = snprintf(key, sizeof key, "%sfloodgate-probe", st->url.prefix);
    fg__rcmd x = {.argc = 2, .argv = {"GET", key}, .len = {3, (size_t)kn}};
    if (fg__rsync_append(sc, &x) != FG_OK ||
        fg__rsync_exchange(sc, 1, &r, deadline) != FG_OK)
        return;
    if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6) &&
        strstr(r->str, "key")) {
        size_t o = strlen(st->warning);
        snprintf(st->warning + o, sizeof st->warning - o,
                 "%sredis %.100s: the user may not use the keys of prefix "
                 "'%.128s' (%.*s): every check fails; allow its keys in "
                 "the user's ACL (~%.128s*)",
                 o ? "; " : "", st->where, st->url.prefix,
                 (int)(strcspn(r->str, ",\r\n") < 120 ? strcspn(r->str, ",\r\n")
                                                      : 120),
                 r->str, st->url.prefix);
    }
    freeReplyObject(r);
}

/* ---- A host name's new address (async) --------------------------------- */

#define READDRESS_US 1000000u

static void on_readdress(int rc, const char *num, const char *why, void *data)
{
    fg__rnode *st = data;
    (void)why; /* a failed lookup keeps the address: asked again later */
    st->dq = NULL;
    if (rc != FG_OK || !strcmp(num, st->addr))
        return;
    st->dns_next_us = fg__mono_precise_us() + READDRESS_US;
    char was[INET6_ADDRSTRLEN + 80];
    snprintf(was, sizeof was, "now at %s (was %s)", num, st->addr);
    pthread_mutex_lock(&st->mu);
    snprintf(st->addr, sizeof st->addr, "%s", num);
    pthread_mutex_unlock(&st->mu);
    fg__rnode_set_error(st, "redis %.200s: the host name is %.200s", was);
    fg__raconn *cn = st->conn && !st->conn->dead ? st->conn : NULL;
    if (cn)
        fg__raconn_kill(cn, FG_EBACKEND);
    connected(st); /* no backoff for the new address */
    if (cn) {
        /* The connection to the old address goes, its checks in flight
         * failing (their policy decides); inside one of its own reply
         * callbacks (READONLY), hiredis frees it when that returns. Not
         * left to finish: nothing would time it out, and the store's
         * close would not know it. */
        redisAsyncFree(cn->ac);
    }
}

void fg__rnode_readdress(fg__rnode *st)
{
    if (!st->evb || !st->named || st->closing || st->dq)
        return;
    uint64_t now = fg__mono_precise_us();
    if (now < st->dns_next_us)
        return;
    st->dns_next_us = now + READDRESS_US;
    /* A new resolver when /etc/resolv.conf or /etc/hosts changed since
     * this one read them; the old one goes from the loop's next turn (evdns
     * may have queued work of its nameservers for it). */
    uint64_t stamp = fg__dns_files_stamp();
    if (st->dns && stamp != st->dns_stamp) {
        fg__dns_free_later(st->dns);
        st->dns = NULL;
    }
    if (!st->dns && !(st->dns = fg__dns_new(st->evb)))
        return;
    st->dns_stamp = stamp;
    /* The address in use, kept while the name has it among others: a
     * name of several addresses moves the store only when it left. */
    char num[INET6_ADDRSTRLEN], why[200], cur[INET6_ADDRSTRLEN];
    memcpy(cur, st->addr, sizeof cur);
    int rc = fg__dns_lookup(st->dns, st->url.host, cur, on_readdress, st,
                            &st->dq, num, why, sizeof why);
    if (rc == FG_OK)
        on_readdress(FG_OK, num, NULL, st);
}

void fg__rnode_addr(fg__rnode *st, char *out, size_t n)
{
    pthread_mutex_lock(&st->mu);
    if (st->url.path)
        snprintf(out, n, "%s", st->url.path);
    else
        snprintf(out, n, strchr(st->addr, ':') ? "[%s]:%u" : "%s:%u", st->addr,
                 (unsigned)st->url.port);
    pthread_mutex_unlock(&st->mu);
}
