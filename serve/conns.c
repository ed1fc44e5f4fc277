/* conns.c -- the connections of one worker, and their request deadline.
 *
 * evhttp's own timeout is an inactivity timeout: a client dripping one byte
 * a second would hold its connection for hours. Here a connection must
 * deliver each whole request within request_timeout of being accepted or of
 * its previous answer; the clock stops while the request is answered. Past
 * the deadline the connection is shut down, and evhttp frees it.
 *
 * evhttp gives no hook when it frees a connection, so each bufferevent is
 * created here (evhttp_set_bevcb) with one extra reference: when evhttp
 * frees it, it stays allocated (its callbacks cleared) until the sweep
 * notices and drops the last reference. A small hash table finds a
 * request's connection. */
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "server.h"

#define NBUCKETS 4096

struct fg__conn {
    struct fg__conn *prev, *next; /* every connection of the worker */
    struct fg__conn *hnext;       /* hash chain */
    struct bufferevent *bev;
    uint64_t deadline_us; /* 0: a request is being answered */
    int answered;         /* a request of this connection was answered */
};

static size_t bucket(const struct bufferevent *bev)
{
    uintptr_t p = (uintptr_t)bev;
    return (size_t)((p >> 4) ^ (p >> 16)) % NBUCKETS;
}

static uint64_t deadline(fg__worker *w)
{
    return fg__mono_precise_us() +
           (uint64_t)w->cur->g->cfg.request_timeout_ms * 1000;
}

struct bufferevent *fg__conns_bevcb(struct event_base *base, void *arg)
{
    fg__worker *w = arg;
    struct bufferevent *bev =
        bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    if (!w->conn_hash) {
        w->conn_hash = calloc(NBUCKETS, sizeof(*w->conn_hash));
        if (!w->conn_hash)
            return bev; /* served all the same, without a deadline */
    }
    fg__conn *c = calloc(1, sizeof(*c));
    if (!c)
        return bev;
    c->bev = bev;
    c->deadline_us = deadline(w);
    bufferevent_incref(bev);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    size_t b = bucket(bev);
    c->hnext = w->conn_hash[b];
    w->conn_hash[b] = c;
    w->nconns++;
    return bev;
}

static fg__conn *find(fg__worker *w, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (!evcon || !w->conn_hash)
        return NULL;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    for (fg__conn *c = w->conn_hash[bucket(bev)]; c; c = c->hnext)
        if (c->bev == bev)
            return c;
    return NULL;
}

void fg__conns_request(fg__worker *w, struct evhttp_request *req, int done)
{
    fg__conn *c = find(w, req);
    if (c) {
        c->deadline_us = done ? deadline(w) : 0;
        c->answered |= done;
    }
}

unsigned fg__conns_unanswered(fg__worker *w)
{
    unsigned n = 0;
    for (fg__conn *c = w->conns; c; c = c->next) {
        bufferevent_data_cb r = NULL, wr = NULL;
        bufferevent_event_cb e = NULL;
        bufferevent_getcb(c->bev, &r, &wr, &e, NULL);
        n += !c->answered && (r || wr || e);
    }
    return n;
}

static void release(fg__worker *w, fg__conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    fg__conn **pp = &w->conn_hash[bucket(c->bev)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    w->nconns--;
    bufferevent_decref(c->bev); /* evhttp let go: this frees it */
    free(c);
}

void fg__conns_sweep(fg__worker *w)
{
    uint64_t now = fg__mono_precise_us();
    fg__conn *c = w->conns;
    while (c) {
        fg__conn *next = c->next;
        bufferevent_data_cb r = NULL, wr = NULL;
        bufferevent_event_cb e = NULL;
        bufferevent_getcb(c->bev, &r, &wr, &e, NULL);
        if (!r && !wr && !e) {
            release(w, c);
        } else if (c->deadline_us && now >= c->deadline_us) {
            /* Too slow: the end of the stream makes evhttp close the
             * connection and free it. */
            c->deadline_us = 0;
            evutil_socket_t fd = bufferevent_getfd(c->bev);
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            FG_INC(w->m->slow_closed);
        }
        c = next;
    }
}

void fg__conns_free_all(fg__worker *w)
{
    while (w->conns)
        release(w, w->conns);
    free(w->conn_hash);
    w->conn_hash = NULL;
}
