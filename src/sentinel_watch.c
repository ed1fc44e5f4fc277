/* sentinel_watch.c -- the async Sentinel store's watch, on its event loop.
 *
 * A lookup asks the sentinels in turn for the master's address (hiredis
 * async, one question at a time, each with a deadline by timer), then asks
 * the candidate its ROLE before installing it. Sentinel may name the
 * candidate by host name (announce-hostnames): it is looked up by evdns
 * (dns.c), and connected to by its numeric address, as is its store: hiredis
 * would resolve the name with a blocking getaddrinfo(). One connection a
 * sentinel subscribes to +switch-master and the promotion event, so that a
 * failover is followed as it starts. A tick closes retired stores, restarts
 * lost subscriptions, retries a lookup while checks fail, and asks again
 * every RECHECK_US. Nothing here blocks the loop. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "sentinel_store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

typedef fg__sentinel_store sentinel_store;
typedef fg__sentinel_inner inner;

/* How long a replica told to become the master is given to say it is one,
 * and how often it is asked meanwhile. */
#define PROMOTION_WAIT_US 1000000u
#define PROMOTION_POLL_US 10000u
/* How long, after following a promotion event, the old master is not gone
 * back to (Sentinel's failover takes about a second to see it). */
#define PREV_HOLD_US 5000000u
/* The async store's housekeeping period: retired stores, subscription,
 * retries. */
#define TICK_US 50000u

/* hiredis's events on the store's loop (allocation checked, unlike the
 * adapter hiredis ships). */
typedef struct evpair {
    struct event *rev, *wev;
} evpair;

static void ev_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisAsyncHandleRead(arg);
}

static void ev_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    redisAsyncHandleWrite(arg);
}

static void ev_add_read(void *p)
{
    event_add(((evpair *)p)->rev, NULL);
}

static void ev_del_read(void *p)
{
    event_del(((evpair *)p)->rev);
}

static void ev_add_write(void *p)
{
    event_add(((evpair *)p)->wev, NULL);
}

static void ev_del_write(void *p)
{
    event_del(((evpair *)p)->wev);
}

static void ev_cleanup(void *p)
{
    evpair *e = p;
    event_free(e->rev);
    event_free(e->wev);
    fg__free(e);
}

/* Connect to 'host':'port' on the loop, AUTH when 'password', and send
 * 'argv' with 'cb'. NULL when it cannot even start. */
static redisAsyncContext *async_ask(sentinel_store *st, const char *host,
                                    int port, const char *user,
                                    const char *password, int argc,
                                    const char **argv, redisCallbackFn *cb)
{
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    evpair *e = NULL;
    if (!ac)
        return NULL;
    if (ac->err)
        goto fail;
    e = fg__calloc(1, sizeof *e);
    if (!e)
        goto fail;
    e->rev = event_new(st->evb, ac->c.fd, EV_READ, ev_read, ac);
    e->wev = event_new(st->evb, ac->c.fd, EV_WRITE, ev_write, ac);
    if (!e->rev || !e->wev) {
        if (e->rev)
            event_free(e->rev);
        if (e->wev)
            event_free(e->wev);
        fg__free(e);
        goto fail;
    }
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    ac->ev.data = e;
    event_add(e->rev, NULL);
    event_add(e->wev, NULL);
    if (password && *password) {
        const char *a[3] = {"AUTH", user, password};
        int n = user && *user ? 3 : 2;
        if (n == 2)
            a[1] = password;
        if (redisAsyncCommandArgv(ac, NULL, NULL, n, a, NULL) != REDIS_OK)
            goto fail;
    }
    if (redisAsyncCommandArgv(ac, cb, st, argc, argv, NULL) != REDIS_OK)
        goto fail;
    return ac;
fail:
    redisAsyncFree(ac); /* runs ev_cleanup when attached */
    return NULL;
}

/* Drop the question in flight (its callbacks then see another context),
 * or the candidate's lookup. */
static void q_drop(sentinel_store *st)
{
    redisAsyncContext *ac = st->q;
    st->q = NULL;
    fg__dns_cancel(st->q_dns);
    st->q_dns = NULL;
    evtimer_del(st->q_timer);
    if (ac)
        redisAsyncFree(ac); /* deferred by hiredis inside its callback */
}

static void ask_next(sentinel_store *st);

static void lookup_end(sentinel_store *st)
{
    st->q_phase = 0;
    st->q_hint = 0;
    st->q_end_us = fg__mono_precise_us();
    if (st->q_again && !st->closing) {
        st->q_again = 0;
        fg__sentinel_lookup_start(st);
    }
}

void fg__sentinel_lookup_start(sentinel_store *st)
{
    if (st->closing)
        return;
    if (st->q_phase) {
        st->q_again = 1;
        return;
    }
    st->q_idx = 0;
    ask_next(st);
}

static void arm_q_timer(sentinel_store *st)
{
    struct timeval tv = {0, ASK_TIMEOUT_MS * 1000};
    evtimer_add(st->q_timer, &tv);
}

static void on_role(redisAsyncContext *ac, void *reply, void *priv);
static void on_addr(redisAsyncContext *ac, void *reply, void *priv);
static void verify_cand(sentinel_store *st);

/* Ask the next sentinel, from 'q_idx' on, or end the lookup. */
static void ask_next(sentinel_store *st)
{
    const char *argv[] = {"SENTINEL", "get-master-addr-by-name", st->u.master};
    char where[300];
    while (st->q_idx < st->u.n) {
        unsigned i = st->q_idx;
        st->q = async_ask(st, st->addr[i], st->u.s[i].port, st->u.sentinel_user,
                          st->u.sentinel_password, 3, argv, on_addr);
        if (st->q) {
            st->q_phase = 1;
            arm_q_timer(st);
            return;
        }
        fg__sentinel_hostport(st->u.s[i].host, st->u.s[i].port, where,
                              sizeof where);
        fg__sentinel_set_error(st, "sentinel %s: cannot connect", where);
        st->q_idx++;
    }
    lookup_end(st);
}

/* Check the replica being promoted again after PROMOTION_POLL_US. */
static void poll_hint(sentinel_store *st)
{
    struct timeval tv = {0, PROMOTION_POLL_US};
    st->q_phase = 3;
    evtimer_add(st->q_timer, &tv);
}

/* A question failed (no answer, or not a useful one; 'why' the
 * connection's error, or NULL): the next sentinel. */
static void ask_failed(sentinel_store *st, const char *why)
{
    char where[300];
    if (st->q_phase == 1 && st->q_idx < st->u.n) {
        fg__sentinel_hostport(st->u.s[st->q_idx].host, st->u.s[st->q_idx].port,
                              where, sizeof where);
        fg__sentinel_set_error(st, "sentinel %s: %s", where,
                               why && *why ? why : "no answer");
    }
    q_drop(st);
    if (st->q_hint && fg__mono_precise_us() < st->hint_wait_us) {
        /* The replica being promoted did not answer: Sentinel's
         * promotion ends with CLIENT KILL TYPE normal, which may close
         * our question to it. Ask again shortly. */
        poll_hint(st);
        return;
    }
    st->q_idx++;
    ask_next(st);
}

static void on_addr(redisAsyncContext *ac, void *reply, void *priv)
{
    sentinel_store *st = priv;
    char e[256], where[300];
    if (ac != st->q)
        return; /* a question dropped already */
    if (!reply) {
        st->q = NULL; /* hiredis frees it */
        ask_failed(st, ac->errstr);
        return;
    }
    int rc = fg__sentinel_addr_reply(reply, st->cand, sizeof st->cand,
                                     &st->cand_port, e, sizeof e);
    if (rc == FG_OK) /* a promotion followed that it has not seen yet */
        fg__sentinel_moved_to(st, st->cand, sizeof st->cand, &st->cand_port);
    q_drop(st);
    if (rc != FG_OK) {
        fg__sentinel_hostport(st->u.s[st->q_idx].host, st->u.s[st->q_idx].port,
                              where, sizeof where);
        fg__sentinel_set_error(st, "sentinel %s: %s", where, e);
        st->q_idx++;
        ask_next(st);
        return;
    }
    if (fg__sentinel_same_master(st, st->cand, st->cand_port) ||
        (st->cand_port == st->prev_port && !strcmp(st->cand, st->prev) &&
         fg__mono_precise_us() < st->prev_until_us)) {
        /* No failover (yet), or not seen by the sentinel. A sentinel that
         * names the master in use clears what the others said. */
        if (fg__sentinel_same_master(st, st->cand, st->cand_port))
            fg__sentinel_clear_error(st);
        lookup_end(st);
        return;
    }
    st->cand_addr[0] = '\0';
    verify_cand(st);
}

/* The candidate's name looked up: ask it its ROLE; not found or too late:
 * as a question that failed. */
static void on_cand_addr(int rc, const char *addr, const char *why, void *data)
{
    sentinel_store *st = data;
    char m[300];
    st->q_dns = NULL;
    if (rc != FG_OK) {
        fg__sentinel_hostport(st->cand, st->cand_port, m, sizeof m);
        fg__sentinel_set_error(st, "sentinel: master %s: %s", m, why);
        ask_failed(st, NULL);
        return;
    }
    snprintf(st->cand_addr, sizeof st->cand_addr, "%s", addr);
    verify_cand(st);
}

/* Ask 'cand' for its ROLE (on_role), once its address is known. */
static void verify_cand(sentinel_store *st)
{
    const char *argv[] = {"ROLE"};
    char why[200], m[300];
    if (!st->cand_addr[0]) {
        int rc = fg__dns_lookup(st->dns, st->cand, NULL, on_cand_addr, st,
                                &st->q_dns, st->cand_addr, why, sizeof why);
        if (rc == 1) {
            st->q_phase = 4; /* until on_cand_addr */
            return;
        }
        if (rc != FG_OK) {
            fg__sentinel_hostport(st->cand, st->cand_port, m, sizeof m);
            fg__sentinel_set_error(st, "sentinel: master %s: %s", m, why);
            st->q_idx++;
            ask_next(st);
            return;
        }
    }
    st->q = async_ask(st, st->cand_addr, st->cand_port, st->r.user,
                      st->r.password, 1, argv, on_role);
    if (!st->q) {
        st->q_idx++;
        ask_next(st);
        return;
    }
    st->q_phase = 2;
    arm_q_timer(st);
}

static void on_role(redisAsyncContext *ac, void *reply, void *priv)
{
    sentinel_store *st = priv;
    char why[400], m[300];
    if (ac != st->q)
        return;
    if (!reply) {
        st->q = NULL;
        ask_failed(st, NULL);
        return;
    }
    int role = fg__sentinel_role_reply(reply);
    q_drop(st);
    fg__sentinel_hostport(st->cand, st->cand_port, m, sizeof m);
    if (role == 0 && st->q_hint && fg__mono_precise_us() < st->hint_wait_us) {
        /* Told to become the master, not one yet: ask again shortly. */
        poll_hint(st);
        return;
    }
    if (role != 1) {
        /* A sentinel that has not seen the failover, or a node that does
         * not say it is a master (an error, LOADING): ask the next, as
         * the blocking lookup installs only a node that says so. */
        if (role == 0)
            fg__sentinel_set_error(
                st, "sentinel: %s is named master of '%s' but is not one", m,
                st->u.master);
        else
            fg__sentinel_set_error(
                st,
                "sentinel: %s, named master of '%s', did not answer ROLE "
                "as one",
                m, st->u.master);
        st->q_idx++;
        ask_next(st);
        return;
    }
    inner *old = st->cur;
    inner *in = fg__sentinel_inner_open(st, st->cand, st->cand_port,
                                        st->cand_addr, 1, why, sizeof why);
    if (in) {
        if (st->q_hint && old) {
            snprintf(st->prev, sizeof st->prev, "%s", old->host);
            st->prev_port = old->port;
            st->prev_until_us = fg__mono_precise_us() + PREV_HOLD_US;
            /* And for the stores this process opens meanwhile. */
            fg__sentinel_moved(st, old->host, old->port, st->cand,
                               st->cand_port);
        }
        fg__sentinel_install(st, in);
        st->q_again = 0; /* what asked for a lookup is answered */
    } else {
        fg__sentinel_set_error(st, "sentinel: master %s: %s", m, why);
    }
    lookup_end(st);
}

static void on_q_timer(evutil_socket_t fd, short what, void *arg)
{
    sentinel_store *st = arg;
    (void)fd;
    (void)what;
    if (st->q)
        ask_failed(st, NULL);
    else if (st->q_phase == 3)
        verify_cand(st);
}

/* A replica is being promoted: check it and switch to it at once, rather
 * than when Sentinel has seen the promotion (its next INFO, up to a second
 * later), during which the old master would still take writes that the
 * new one never sees. */
static void follow_promotion(sentinel_store *st, const char *host, int port)
{
    if (fg__sentinel_same_master(st, host, port))
        return;
    q_drop(st);
    snprintf(st->cand, sizeof st->cand, "%s", host);
    st->cand_port = port;
    st->cand_addr[0] = '\0';
    st->q_hint = 1;
    st->q_idx = st->u.n; /* if it fails, the lookup ends */
    st->hint_wait_us = fg__mono_precise_us() + PROMOTION_WAIT_US;
    verify_cand(st);
}

/* The subscription: a "+switch-master" for our master starts a lookup,
 * which checks the new master before switching to it; a promotion event
 * has its replica checked and followed at once. */
static void on_sub(redisAsyncContext *ac, void *reply, void *priv)
{
    sentinel_store *st = priv;
    char host[FG__SENTINEL_HOST_MAX];
    int port;
    redisReply *r = reply;
    unsigned i = 0;
    while (i < st->u.n && st->sub[i] != ac)
        i++;
    if (i == st->u.n)
        return;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        if (r) {
            redisAsyncFree(ac);
        }
        st->sub[i] = NULL;
        st->sub_retry_us[i] = fg__mono_precise_us() + RETRY_US;
        return;
    }
    int ev = fg__sentinel_event(r, st->u.master, host, sizeof host, &port);
    if (ev == FG__SENTINEL_PROMOTING && !st->closing) {
        follow_promotion(st, host, port);
    } else if (ev == FG__SENTINEL_SWITCH &&
               !fg__sentinel_same_master(st, host, port)) {
        st->prev_until_us = 0; /* the sentinels have seen it now */
        fg__sentinel_moved_seen(st);
        if (st->q_phase)
            st->q_again = 1;
        else
            fg__sentinel_lookup_start(st);
    }
}

static void sub_start(sentinel_store *st)
{
    const char *argv[] = {"SUBSCRIBE", "+switch-master",
                          "+failover-state-wait-promotion"};
    if (st->closing)
        return;
    uint64_t now = fg__mono_precise_us();
    for (unsigned i = 0; i < st->u.n; i++) {
        if (st->sub[i] || now < st->sub_retry_us[i])
            continue;
        st->sub[i] =
            async_ask(st, st->addr[i], st->u.s[i].port, st->u.sentinel_user,
                      st->u.sentinel_password, 3, argv, on_sub);
        if (!st->sub[i])
            st->sub_retry_us[i] = now + RETRY_US;
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    sentinel_store *st = arg;
    (void)fd;
    (void)what;
    fg__sentinel_reap(st, 0);
    sub_start(st);
    uint64_t since = fg__mono_precise_us() - st->q_end_us;
    if (st->q_phase == 0 && (since >= RECHECK_US ||
                             (atomic_load(&st->suspect) && since >= RETRY_US)))
        fg__sentinel_lookup_start(st);
}

int fg__sentinel_watch_init(sentinel_store *st)
{
    st->tick = event_new(st->evb, -1, EV_PERSIST, on_tick, st);
    st->q_timer = evtimer_new(st->evb, on_q_timer, st);
    st->dns = fg__dns_new(st->evb);
    return st->tick && st->q_timer && st->dns ? FG_OK : FG_ENOMEM;
}

void fg__sentinel_watch_start(sentinel_store *st)
{
    struct timeval tv = {0, TICK_US};
    event_add(st->tick, &tv);
    sub_start(st);
}
