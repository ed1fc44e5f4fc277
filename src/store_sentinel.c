/* store_sentinel.c -- "sentinel://HOST:PORT[,...]/MASTER": one Redis master
 * found through Sentinel, followed across failovers.
 *
 * The counters live on one master at a time, held by a whole Redis store
 * (store_redis.c: pool, pipeline, batches, backoff). This store asks the
 * sentinels which address is the master, checks that the address says it
 * is one (ROLE: a sentinel that has not seen the failover yet may still
 * name the old master), opens a Redis store for it and hands every
 * operation over. When the master changes it opens a store for the new
 * one, routes new checks to it and closes the old one once its checks in
 * flight are done (an async store's, after RETIRE_MAX_US at most: its
 * close completes them with an error, which the limiter turns into each
 * limit's failure policy; a blocking check is waited for).
 *
 * What makes it ask again: a "+switch-master" message (an async store
 * subscribes on every sentinel: only the one leading a failover tells of
 * the promotion as it starts it), and checks that fail with a connection
 * error, a timeout or READONLY (the old master demoted). While checks
 * fail and nothing changed, it asks again every RETRY_US.
 *
 * The lookup at open is blocking, bounded per sentinel; after that the
 * async store asks on its event loop (sentinel_watch.c), never blocking
 * it, and a blocking store asks from a thread of its own (here), so that
 * no check waits for a lookup. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "process.h"
#include "redis_proto.h"
#include "redis_store.h"
#include "redis_url.h"
#include "sentinel_store.h"
#include "store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

typedef fg__sentinel_store sentinel_store;
typedef fg__sentinel_inner inner;
typedef fg__sentinel_pending pending;
/* The lookup at open of a lazy store (serve's workers): a sentinel that
 * does not answer this fast on a loopback or LAN is taken as down. */
#define LAZY_OPEN_TIMEOUT_MS 50u
/* The longest an old master's store stays open for its checks in flight. */
#define RETIRE_MAX_US 2000000u

static const fg__store_ops sentinel_ops, sentinel_async_ops;

void fg__sentinel_set_error(sentinel_store *st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&st->mu);
    memcpy(st->errstr, msg, sizeof msg);
    pthread_mutex_unlock(&st->mu);
}

void fg__sentinel_clear_error(sentinel_store *st)
{
    pthread_mutex_lock(&st->mu);
    st->errstr[0] = '\0';
    pthread_mutex_unlock(&st->mu);
}

static int is_store_failure(int rc)
{
    return rc == FG_EBACKEND || rc == FG_ETIMEOUT || rc == FG_EREADONLY ||
           rc == FG_EPROTO || rc == FG_EBUSY;
}

/* "host:port", "[v6]:port" for messages. */
void fg__sentinel_hostport(const char *host, int port, char *buf, size_t n)
{
    snprintf(buf, n, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* ---- Blocking questions (at open, and the blocking store's thread) ---- */

static redisContext *sync_connect(const char *host, int port,
                                  uint32_t timeout_ms)
{
    struct timeval tv = {(time_t)(timeout_ms / 1000),
                         (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c && !c->err)
        redisSetTimeout(c, tv);
    return c;
}

/* Send AUTH (when 'password') and then 'argv' on 'c', and return the
 * reply to 'argv' (NULL on an I/O error), or AUTH's own when it refused
 * (WRONGPASS: a wrong password, told apart from a missing one). */
static redisReply *sync_ask(redisContext *c, const char *user,
                            const char *password, int argc, const char **argv)
{
    void *r = NULL;
    int n = 0;
    if (password && *password) {
        const char *a[3] = {"AUTH", user, password};
        int ac = user && *user ? 3 : 2;
        if (ac == 2)
            a[1] = password;
        if (redisAppendCommandArgv(c, ac, a, NULL) != REDIS_OK)
            return NULL;
        n++;
    }
    if (redisAppendCommandArgv(c, argc, argv, NULL) != REDIS_OK)
        return NULL;
    for (int i = 0; i <= n; i++) {
        if (r)
            freeReplyObject(r);
        r = NULL;
        if (redisGetReply(c, &r) != REDIS_OK)
            return NULL;
        /* A wrong password or user is the answer; another AUTH error (a
         * sentinel without a password) lets the command speak. */
        if (i < n && ((redisReply *)r)->type == REDIS_REPLY_ERROR &&
            (!strncmp(((redisReply *)r)->str, "WRONGPASS", 9) ||
             strstr(((redisReply *)r)->str, "invalid password")))
            return r;
    }
    return r;
}

/* What ROLE says of 'host':'port': 1 master, 0 not, -1 no clear answer,
 * -2 unreachable, -3 refused to the user (NOPERM: no +role). */
static int sync_role(sentinel_store *st, const char *host, int port,
                     uint32_t timeout_ms)
{
    redisContext *c = sync_connect(host, port, timeout_ms);
    int role = -2;
    if (c && !c->err) {
        const char *argv[] = {"ROLE"};
        redisReply *r = sync_ask(c, st->r.user, st->r.password, 1, argv);
        if (r)
            role = r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6)
                       ? -3
                       : fg__sentinel_role_reply(r);
        freeReplyObject(r);
    }
    redisFree(c);
    return role;
}

static int is_config_error(int rc)
{
    return rc == FG__SENTINEL_ENOTFOUND || rc == FG__SENTINEL_ENOTSENTINEL ||
           rc == FG_EAUTH;
}

/* Ask the sentinels in turn, each within 'timeout_ms', for the master's
 * address, and check it with ROLE. FG_OK with the address ('*role' says
 * what ROLE said, -2 when the master did not answer): the first one that
 * says it is a master, else the first named that gave no clear answer (a
 * sentinel may name a master that is down, or one that was, and the next
 * may know better); a configuration error (is_config_error) when a
 * sentinel that answered refused, and none gave an address; or
 * FG_EBACKEND. The reason is in 'err'. */
static int sync_lookup(sentinel_store *st, uint32_t timeout_ms, char *host,
                       int *port, int *role, char *err, size_t errlen)
{
    int cfg = FG_OK, fb_port = 0, fb_role = 0;
    char cfg_why[400] = "", why[400] = "no sentinel given";
    char fb_host[FG__SENTINEL_HOST_MAX] = "";
    unsigned unreached = 0;
    for (unsigned i = 0; i < st->u.n; i++) {
        char where[300], e[256];
        fg__sentinel_hostport(st->u.s[i].host, st->u.s[i].port, where,
                              sizeof where);
        redisContext *c =
            sync_connect(st->addr[i], st->u.s[i].port, timeout_ms);
        if (!c || c->err) {
            snprintf(why, sizeof why, "sentinel %.200s: cannot connect: %.120s",
                     where, c ? c->errstr : "out of memory");
            redisFree(c);
            unreached++;
            continue;
        }
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name",
                              st->u.master};
        redisReply *r =
            sync_ask(c, st->u.sentinel_user, st->u.sentinel_password, 3, argv);
        int rc;
        if (!r) {
            rc = c->err == REDIS_ERR_PROTOCOL ? FG__SENTINEL_ENOTSENTINEL
                                              : FG_EBACKEND;
            snprintf(e, sizeof e, "%s",
                     rc == FG_EBACKEND ? "no answer"
                                       : "not a sentinel (it does not speak "
                                         "Redis's protocol)");
        } else {
            rc = fg__sentinel_addr_reply(r, host, FG__SENTINEL_HOST_MAX, port,
                                         e, sizeof e);
            /* A promotion another store of this process followed, which
             * the sentinels have not seen yet: its new master. */
            if (rc == FG_OK)
                fg__sentinel_moved_to(st, host, FG__SENTINEL_HOST_MAX, port);
        }
        freeReplyObject(r);
        redisFree(c);
        if (rc == FG__SENTINEL_ENOTFOUND)
            snprintf(e, sizeof e, "monitors no master named '%s'",
                     st->u.master);
        if (rc == FG_OK) {
            char m[300];
            if (fb_port == *port && !strcmp(fb_host, host))
                continue; /* asked already: no clear answer */
            *role = sync_role(st, host, *port, timeout_ms);
            if (*role == 1)
                return FG_OK;
            if (*role == -3) {
                /* Without ROLE a failover could not be followed. */
                fg__sentinel_hostport(host, *port, m, sizeof m);
                return fg__seterr(err, errlen, FG_EAUTH,
                                  "sentinel: the master of '%s' at %.100s "
                                  "refuses ROLE to this user (NOPERM): it "
                                  "needs +role to follow a failover",
                                  st->u.master, m);
            }
            if (*role < 0 && !fb_port) {
                snprintf(fb_host, sizeof fb_host, "%s", host);
                fb_port = *port;
                fb_role = *role;
            }
            if (*role < 0)
                continue;
            fg__sentinel_hostport(host, *port, m, sizeof m);
            snprintf(why, sizeof why,
                     "sentinel %.100s names %.100s as the master of '%s', "
                     "but it is not a master",
                     where, m, st->u.master);
            continue;
        }
        snprintf(is_config_error(rc) && cfg == FG_OK ? cfg_why : why,
                 sizeof why, "sentinel %.120s: %.250s", where, e);
        if (is_config_error(rc) && cfg == FG_OK)
            cfg = rc;
    }
    if (fb_port) {
        snprintf(host, FG__SENTINEL_HOST_MAX, "%s", fb_host);
        *port = fb_port;
        *role = fb_role;
        return FG_OK;
    }
    if (cfg != FG_OK)
        return fg__seterr(err, errlen, cfg, "%s", cfg_why);
    if (unreached > 1 && unreached == st->u.n)
        return fg__seterr(err, errlen, FG_EBACKEND,
                          "sentinel: none of the %u sentinels answered (the "
                          "last, %s)",
                          unreached, why + strlen("sentinel "));
    return fg__seterr(err, errlen, FG_EBACKEND, "%s", why);
}

/* ---- Masters ------------------------------------------------------------ */

/* Open a Redis store for the master 'host':'port', at 'addr' when given
 * ('lazy': without probing it). */
inner *fg__sentinel_inner_open(sentinel_store *st, const char *host, int port,
                               const char *addr, int lazy, char *err,
                               size_t errlen)
{
    char url[2048];
    inner *in = fg__calloc(1, sizeof *in);
    if (!in) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    if (fg__sentinel_master_url(&st->u, addr ? addr : host, port, lazy, url,
                                sizeof url) != FG_OK) {
        fg__seterr(err, errlen, FG_EINVAL, "sentinel: master URL too long");
        fg__free(in);
        return NULL;
    }
    in->st = fg__store_redis_open(url, st->evb, err, errlen);
    memset(url, 0, sizeof url);
    if (!in->st) {
        fg__free(in);
        return NULL;
    }
    snprintf(in->host, sizeof in->host, "%s", host);
    in->port = port;
    atomic_init(&in->inflight, 0);
    return in;
}

static void inner_close(inner *in)
{
    fg_store_close(in->st);
    fg__free(in);
}

/* Route new checks to 'in'; the old master's store retires. */
void fg__sentinel_install(sentinel_store *st, inner *in)
{
    pthread_mutex_lock(&st->mu);
    inner *old = st->cur;
    st->cur = in;
    if (old) {
        old->retired_us = fg__mono_precise_us();
        old->next = st->retired;
        st->retired = old;
    }
    st->errstr[0] = '\0';
    pthread_mutex_unlock(&st->mu);
    atomic_store(&st->suspect, 0);
    atomic_fetch_add(&st->switches, 1);
}

int fg__sentinel_same_master(sentinel_store *st, const char *host, int port)
{
    pthread_mutex_lock(&st->mu);
    int same = st->cur && st->cur->port == port && !strcmp(st->cur->host, host);
    pthread_mutex_unlock(&st->mu);
    return same;
}

/* Close the retired stores whose checks are done, or, on the loop, that
 * waited long enough (closing an async store completes its checks). A
 * blocking check may still be running inside a retired store, for as long
 * as its limit's timeout: that store waits for it. Not from inside one of
 * their callbacks. */
void fg__sentinel_reap(sentinel_store *st, int all)
{
    inner *done = NULL;
    uint64_t now = fg__mono_precise_us();
    pthread_mutex_lock(&st->mu);
    for (inner **p = &st->retired; *p;) {
        inner *in = *p;
        if (all || atomic_load(&in->inflight) == 0 ||
            (st->evb && now - in->retired_us >= RETIRE_MAX_US)) {
            *p = in->next;
            in->next = done;
            done = in;
        } else {
            p = &in->next;
        }
    }
    pthread_mutex_unlock(&st->mu);
    while (done) {
        inner *n = done->next;
        inner_close(done);
        done = n;
    }
}

/* ---- The blocking store's thread ------------------------------------------
 */

static void *monitor(void *arg)
{
    sentinel_store *st = arg;
    uint64_t last = fg__mono_precise_us(); /* the open asked just now */
    pthread_mutex_lock(&st->mu);
    while (!st->stop) {
        uint64_t now = fg__mono_precise_us();
        int want =
            st->wake || atomic_load(&st->suspect) || now - last >= RECHECK_US;
        if (!want && !st->retired) {
            /* Until the next periodic question (RECHECK_US), or a wake. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts); /* the cv's clock */
            uint64_t left = last + RECHECK_US - now;
            ts.tv_sec += (time_t)(left / 1000000);
            ts.tv_nsec += (long)(left % 1000000) * 1000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&st->cv, &st->mu, &ts);
            continue;
        }
        if (!want || fg__mono_precise_us() - last < RETRY_US) {
            /* Pace the lookups, and close retired stores meanwhile. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts); /* the cv's clock */
            ts.tv_nsec += RETRY_US / 2 * 1000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&st->cv, &st->mu, &ts);
            pthread_mutex_unlock(&st->mu);
            fg__sentinel_reap(st, 0);
            pthread_mutex_lock(&st->mu);
            continue;
        }
        st->wake = 0;
        pthread_mutex_unlock(&st->mu);
        char host[FG__SENTINEL_HOST_MAX], why[400];
        int port = 0, role = -2;
        uint32_t t = st->r.connect_timeout_ms < ASK_TIMEOUT_MS
                         ? st->r.connect_timeout_ms
                         : ASK_TIMEOUT_MS;
        int rc = sync_lookup(st, t, host, &port, &role, why, sizeof why);
        last = fg__mono_precise_us();
        if (rc != FG_OK) {
            fg__sentinel_set_error(st, "%s", why);
        } else if (role == 1 && fg__sentinel_same_master(st, host, port)) {
            fg__sentinel_clear_error(st); /* the master in use, confirmed */
        } else if (role == 1) {
            inner *in = fg__sentinel_inner_open(st, host, port, NULL, 1, why,
                                                sizeof why);
            if (in)
                fg__sentinel_install(st, in);
            else
                fg__sentinel_set_error(st, "sentinel: %s", why);
        }
        fg__sentinel_reap(st, 0);
        pthread_mutex_lock(&st->mu);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* Checks fail: have the sentinels asked again. */

static void note_failure(sentinel_store *st, int on_loop, int rc)
{
    atomic_store(&st->suspect, 1);
    if (st->evb) {
        /* The master followed on a promotion event says it is a replica
         * (READONLY): a failover that aborted may give the old one back.
         * Any other failure (a timeout, a durable write with no replica
         * yet: common on a master just promoted) keeps the old one away
         * until the sentinels have seen the promotion: it still says it
         * is a master, and what it took then would be lost. */
        if (on_loop && rc == FG_EREADONLY) {
            st->prev_until_us = 0;
            fg__sentinel_moved_seen(st);
        }
        if (on_loop && !st->closing && st->q_phase == 0 &&
            fg__mono_precise_us() - st->q_end_us >= RETRY_US)
            fg__sentinel_lookup_start(st);
        return; /* else the tick sees 'suspect' */
    }
    pthread_mutex_lock(&st->mu);
    st->wake = 1;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* ---- Store operations --------------------------------------------------- */

/* The current master's store, counted as in use; NULL when none is known. */
inner *fg__sentinel_take(sentinel_store *st)
{
    pthread_mutex_lock(&st->mu);
    inner *in = st->cur;
    if (in)
        atomic_fetch_add(&in->inflight, 1);
    pthread_mutex_unlock(&st->mu);
    return in;
}

static int is_current(sentinel_store *st, const inner *in)
{
    pthread_mutex_lock(&st->mu);
    int cur = in == st->cur;
    pthread_mutex_unlock(&st->mu);
    return cur;
}

/* A check through 'in' ended with 'rc': a failure of the current master
 * has the sentinels asked again; a success ends the suspicion. */
static void settle(sentinel_store *st, inner *in, int rc, int on_loop)
{
    if (is_store_failure(rc)) {
        if (is_current(st, in))
            note_failure(st, on_loop, rc);
    } else if (rc == FG_OK &&
               atomic_load_explicit(&st->suspect, memory_order_relaxed)) {
        if (is_current(st, in))
            atomic_store(&st->suspect, 0);
    }
    atomic_fetch_sub(&in->inflight, 1);
}

static int no_master(sentinel_store *st, int on_loop)
{
    note_failure(st, on_loop, FG_EBACKEND);
    return FG_EBACKEND;
}

static int sentinel_check(fg_store *s, fg_limiter *l, const char *key,
                          size_t keylen, uint64_t cost, uint64_t age_us,
                          fg_decision *d)
{
    sentinel_store *st = (sentinel_store *)s;
    inner *in = fg__sentinel_take(st);
    if (!in)
        return no_master(st, 0);
    int rc = in->st->ops->check(in->st, l, key, keylen, cost, age_us, d);
    settle(st, in, rc, 0);
    return rc;
}

static int sentinel_refund(fg_store *s, fg_limiter *l, const char *key,
                           size_t keylen, uint64_t cost, const fg__taken *t)
{
    sentinel_store *st = (sentinel_store *)s;
    inner *in = fg__sentinel_take(st);
    if (!in)
        return no_master(st, st->evb != NULL);
    int rc = in->st->ops->refund(in->st, l, key, keylen, cost, t);
    settle(st, in, rc, st->evb != NULL);
    return rc;
}

/* An operator's peek or reset goes to the current master, blocking, as
 * a blocking check. */
static int sentinel_peek(fg_store *s, fg_limiter *l, const char *key,
                         size_t keylen, fg_decision *d)
{
    sentinel_store *st = (sentinel_store *)s;
    inner *in = fg__sentinel_take(st);
    if (!in)
        return no_master(st, 0);
    int rc = in->st->ops->peek(in->st, l, key, keylen, d);
    settle(st, in, rc, 0);
    return rc;
}

static int sentinel_reset(fg_store *s, fg_limiter *l, const char *key,
                          size_t keylen)
{
    sentinel_store *st = (sentinel_store *)s;
    inner *in = fg__sentinel_take(st);
    if (!in)
        return no_master(st, 0);
    int rc = in->st->ops->reset(in->st, l, key, keylen);
    settle(st, in, rc, 0);
    return rc;
}

static void on_done(int rc, const fg_decision *d, void *data)
{
    pending *p = data;
    sentinel_store *st = p->st;
    fg_check_cb cb = p->cb;
    void *cbdata = p->data;
    inner *in = p->in;
    p->next = st->free_pending;
    st->free_pending = p;
    settle(st, in, rc, !st->closing);
    cb(rc, d, cbdata);
}

static void sentinel_check_async(fg_store *s, fg__req *req)
{
    sentinel_store *st = (sentinel_store *)s;
    inner *in = st->closing ? NULL : st->cur;
    if (!in) {
        fg__req_done(req, no_master(st, 1), NULL);
        return;
    }
    pending *p = st->free_pending;
    if (p)
        st->free_pending = p->next;
    else if (!(p = fg__malloc(sizeof *p))) {
        fg__req_done(req, FG_ENOMEM, NULL);
        return;
    }
    p->st = st;
    p->in = in;
    p->cb = req->cb;
    p->data = req->data;
    req->cb = on_done;
    req->data = p;
    atomic_fetch_add(&in->inflight, 1);
    in->st->ops->check_async(in->st, req);
}

static int sentinel_limiter_init(fg_store *s, fg_limiter *l, void **out,
                                 char *err, size_t errlen)
{
    sentinel_store *st = (sentinel_store *)s;
    fg__rlim *rl = fg__rlim_new(&l->p, st->r.prefix, st->r.prefixlen,
                                l->lim.name, strnlen(l->lim.name, FG_NAME_MAX));
    if (!rl)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    *out = rl;
    return FG_OK;
}

static unsigned sentinel_busy(fg_store *s)
{
    sentinel_store *st = (sentinel_store *)s;
    pthread_mutex_lock(&st->mu);
    unsigned n = st->cur ? fg__store_busy(st->cur->st) : 0;
    for (inner *in = st->retired; in; in = in->next)
        n += fg__store_busy(in->st);
    pthread_mutex_unlock(&st->mu);
    return n;
}

static void sentinel_close(fg_store *s)
{
    sentinel_store *st = (sentinel_store *)s;
    if (st->thr_on) {
        pthread_mutex_lock(&st->mu);
        st->stop = 1;
        pthread_cond_signal(&st->cv);
        pthread_mutex_unlock(&st->mu);
        pthread_join(st->thr, NULL);
    }
    st->closing = 1;
    if (st->q) {
        redisAsyncContext *ac = st->q;
        st->q = NULL;
        redisAsyncFree(ac);
    }
    fg__dns_cancel(st->q_dns);
    st->q_dns = NULL;
    for (unsigned i = 0; i < st->u.n; i++) {
        if (st->sub[i]) {
            redisAsyncContext *ac = st->sub[i];
            st->sub[i] = NULL;
            redisAsyncFree(ac);
        }
    }
    /* Their close completes the checks in flight (on_done). */
    if (st->cur)
        inner_close(st->cur);
    st->cur = NULL;
    fg__sentinel_reap(st, 1);
    while (st->free_pending) {
        pending *n = st->free_pending->next;
        fg__free(st->free_pending);
        st->free_pending = n;
    }
    if (st->tick)
        event_free(st->tick);
    if (st->q_timer)
        event_free(st->q_timer);
    fg__dns_free(st->dns);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    fg__redis_url_free(&st->r);
    fg__sentinel_url_wipe(&st->u);
    fg__free(st);
}

static const char *sentinel_node_name(fg_store *s, unsigned node)
{
    (void)node;
    return ((sentinel_store *)s)->name;
}

/* The master checks go to now, copied under the lock into the caller's
 * thread's own buffer. */
static const char *sentinel_node_addr(fg_store *s, unsigned node)
{
    static _Thread_local char copy[FG__SENTINEL_HOST_MAX + 16];
    sentinel_store *st = (sentinel_store *)s;
    (void)node;
    pthread_mutex_lock(&st->mu);
    if (st->cur)
        fg__sentinel_hostport(st->cur->host, st->cur->port, copy, sizeof copy);
    else
        copy[0] = '\0';
    pthread_mutex_unlock(&st->mu);
    return copy;
}

/* The master's error and the sentinels', either or both: copied under
 * the lock (the monitor thread writes it, and retires the master), into
 * the caller's thread's own buffer. */
static const char *sentinel_node_error(fg_store *s, unsigned node)
{
    static _Thread_local char copy[1024];
    sentinel_store *st = (sentinel_store *)s;
    (void)node;
    pthread_mutex_lock(&st->mu);
    const char *m = st->cur ? fg__store_redis_last_error(st->cur->st) : "";
    snprintf(copy, sizeof copy, "%s%s%s", m, *m && st->errstr[0] ? "; " : "",
             st->errstr);
    pthread_mutex_unlock(&st->mu);
    return copy;
}

const char *fg__store_sentinel_last_error(fg_store *s)
{
    return sentinel_node_error(s, 0);
}

int fg__store_sentinel_url_check(const char *url, char *err, size_t errlen)
{
    fg__sentinel_url *u = fg__malloc(sizeof *u);
    if (!u)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    int rc = fg__sentinel_url_parse(url, u, err, errlen);
    fg__sentinel_url_wipe(u);
    fg__free(u);
    return rc;
}

/* Resolve each sentinel's host once (no check waits on DNS later), to the
 * address a redis:// URL's host would get (fg__dns_pick). */
static int resolve(sentinel_store *st, char *err, size_t errlen)
{
    for (unsigned i = 0; i < st->u.n; i++) {
        char why[160];
        if (fg__dns_resolve(st->u.s[i].host, st->addr[i], why, sizeof why) !=
            FG_OK)
            return fg__seterr(err, errlen, FG_EBACKEND, "sentinel %s: %s",
                              st->u.s[i].host, why);
    }
    return FG_OK;
}

fg_store *fg__store_sentinel_open(const char *url, struct event_base *base,
                                  char *err, size_t errlen)
{
    char mu[2048], why[400], host[FG__SENTINEL_HOST_MAX];
    int port = 0, role = -2, rc;
    uint32_t t;
    sentinel_store *st = fg__calloc(1, sizeof *st);
    if (!st) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    /* Waits paced on the monotonic clock: a wall clock stepped back would
     * stretch them by the step. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->cv, &ca);
    pthread_condattr_destroy(&ca);
    st->base.ops = base ? &sentinel_async_ops : &sentinel_ops;
    st->base.nodes = 1;
    st->base.process = fg__process_mark();
    st->evb = base;
    if (fg__sentinel_url_parse(url, &st->u, err, errlen) != FG_OK)
        goto fail;
    fg__sentinel_master_url(&st->u, "127.0.0.1", 6379, 0, mu, sizeof mu);
    rc = fg__redis_url_parse(mu, &st->r, err, errlen);
    memset(mu, 0, sizeof mu);
    if (rc != FG_OK)
        goto fail;
    snprintf(st->name, sizeof st->name, "sentinel/%s", st->u.master);
    if (resolve(st, err, errlen) != FG_OK)
        goto fail;
    if (base) {
        if (fg__sentinel_watch_init(st) != FG_OK) {
            fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
            goto fail;
        }
    }
    t = st->r.connect_timeout_ms;
    if (st->r.lazy && t > LAZY_OPEN_TIMEOUT_MS)
        t = LAZY_OPEN_TIMEOUT_MS;
    rc = sync_lookup(st, t, host, &port, &role, why, sizeof why);
    if (rc == FG_OK) {
        inner *in = fg__sentinel_inner_open(st, host, port, NULL, st->r.lazy,
                                            why, sizeof why);
        if (!in) {
            char m[300];
            fg__sentinel_hostport(host, port, m, sizeof m);
            fg__seterr(err, errlen, FG_EBACKEND,
                       "sentinel: master '%s' at %s: %s", st->u.master, m, why);
            goto fail;
        }
        fg__sentinel_install(st, in);
    } else if (is_config_error(rc) || !st->r.lazy) {
        /* A sentinel that answers and refuses is a configuration error,
         * even for a lazy store; no sentinel answering is one unless
         * lazy. */
        fg__seterr(err, errlen, is_config_error(rc) ? FG_EINVAL : rc, "%s",
                   why);
        goto fail;
    } else {
        fg__sentinel_set_error(st, "%s", why);
        atomic_store(&st->suspect, 1);
    }
    if (base) {
        fg__sentinel_watch_start(st);
    } else {
        /* The monitor takes no signal: the process's own threads do. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int trc = pthread_create(&st->thr, NULL, monitor, st);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (trc != 0) {
            fg__seterr(err, errlen, FG_ENOMEM,
                       "sentinel: cannot start its "
                       "thread");
            goto fail;
        }
        st->thr_on = 1;
    }
    return &st->base;
fail:
    sentinel_close(&st->base);
    return NULL;
}

static int is_sentinel(const fg_store *s)
{
    return s && (s->ops == &sentinel_ops || s->ops == &sentinel_async_ops);
}

unsigned long fg__store_sentinel_switches(fg_store *s)
{
    return is_sentinel(s) ? atomic_load(&((sentinel_store *)s)->switches) : 0;
}

/* The current master's, copied under the lock (a failover retires it)
 * into the caller's thread's own buffer. */
static const char *sentinel_warning(fg_store *s)
{
    static _Thread_local char copy[1024]; /* a node's warning: 700 */
    sentinel_store *st = (sentinel_store *)s;
    pthread_mutex_lock(&st->mu);
    const char *w = st->cur ? fg_store_warning(st->cur->st) : NULL;
    snprintf(copy, sizeof copy, "%s", w ? w : "");
    pthread_mutex_unlock(&st->mu);
    return copy[0] ? copy : NULL;
}

#define SENTINEL_OPS_COMMON                                                    \
    .scheme = "sentinel", .limiter_init = sentinel_limiter_init,               \
    .check = sentinel_check, .refund = sentinel_refund,                        \
    .close = sentinel_close, .peek = sentinel_peek, .reset = sentinel_reset,   \
    .node_name = sentinel_node_name, .node_error = sentinel_node_error,        \
    .node_addr = sentinel_node_addr, .warning = sentinel_warning

static const fg__store_ops sentinel_ops = {SENTINEL_OPS_COMMON};
static const fg__store_ops sentinel_async_ops = {
    SENTINEL_OPS_COMMON, .check_async = sentinel_check_async,
    .busy = sentinel_busy};
