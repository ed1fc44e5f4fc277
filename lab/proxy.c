/* proxy.c -- the delay proxy between the API servers and Redis.
 *
 * Loopback makes a Redis round trip take some 50 us, which hides the race of
 * a read-then-write limiter. The proxy gives the lab a data-centre network:
 * every chunk read from one side is written to the other half a round trip
 * later, in order, so each request/reply exchange costs one extra --rtt.
 * It runs in its own thread and event loop so that the scalper's timers and
 * the web server never delay it. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <hiredis/hiredis.h>

#include "lab.h"

/* Bytes read from one side, due on the other side at 'due_us'. A chunk
 * without a buffer is the end of the stream. */
typedef struct chunk {
    struct chunk *next;
    int64_t due_us;
    struct evbuffer *buf;
} chunk;

typedef struct pair pair;

/* One direction of a connection pair. */
typedef struct pipe_dir {
    pair *p;
    struct bufferevent *from;
    struct bufferevent *to;
    chunk *head, *tail;
    struct event *timer;
    int client_side; /* reads from the API server */
} pipe_dir;

struct pair {
    fg__lab_proxy *px;
    pair *prev, *next;
    struct bufferevent *client, *upstream;
    pipe_dir up, down; /* client -> redis, redis -> client */
    int last_up;       /* the client spoke last */
    redisReader *rd;   /* the client's commands, to count them */
    int closing;
};

struct fg__lab_proxy {
    struct event_base *base;
    struct evconnlistener *lis;
    pthread_t thread;
    int port;
    int upstream_port;
    _Atomic int64_t rtt_us;
    _Atomic uint64_t round_trips;
    pthread_mutex_t lock; /* guards 'sent' */
    fg__lab_cmdstats sent;
    pair *pairs;
};

static void pair_free(pair *p)
{
    pipe_dir *dirs[2] = {&p->up, &p->down};
    for (int i = 0; i < 2; i++) {
        chunk *c = dirs[i]->head;
        while (c) {
            chunk *n = c->next;
            if (c->buf)
                evbuffer_free(c->buf);
            free(c);
            c = n;
        }
        if (dirs[i]->timer)
            event_free(dirs[i]->timer);
    }
    if (p->rd)
        redisReaderFree(p->rd);
    if (p->client)
        bufferevent_free(p->client);
    if (p->upstream)
        bufferevent_free(p->upstream);
    if (p->prev)
        p->prev->next = p->next;
    else
        p->px->pairs = p->next;
    if (p->next)
        p->next->prev = p->prev;
    free(p);
}

static void close_when_drained(struct bufferevent *bev, void *arg)
{
    (void)bev;
    pair_free(arg);
}

static void close_on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    pair_free(arg);
}

/* Write every due chunk of 'd'; re-arm the timer for the next one. */
static void deliver(pipe_dir *d)
{
    int64_t now = fg__lab_now_us();
    while (d->head && d->head->due_us <= now) {
        chunk *c = d->head;
        d->head = c->next;
        if (!d->head)
            d->tail = NULL;
        if (!c->buf) {
            /* End of stream: close once what was written has left. */
            free(c);
            pair *p = d->p;
            p->closing = 1;
            if (evbuffer_get_length(bufferevent_get_output(d->to)) == 0) {
                pair_free(p);
                return;
            }
            bufferevent_setcb(d->to, NULL, close_when_drained, close_on_event,
                              p);
            bufferevent_disable(d->to, EV_READ);
            bufferevent_disable(d->from, EV_READ);
            return;
        }
        bufferevent_write_buffer(d->to, c->buf);
        evbuffer_free(c->buf);
        free(c);
    }
    if (d->head) {
        int64_t wait = d->head->due_us - now;
        struct timeval tv = {(time_t)(wait / 1000000),
                             (suseconds_t)(wait % 1000000)};
        evtimer_add(d->timer, &tv);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    deliver(arg);
}

/* Queue 'buf' (NULL: end of stream) half a round trip from now. */
static void enqueue(pipe_dir *d, struct evbuffer *buf)
{
    int64_t half = atomic_load(&d->p->px->rtt_us) / 2;
    chunk *c = calloc(1, sizeof *c);
    if (!c) {
        if (buf)
            evbuffer_free(buf);
        return;
    }
    c->due_us = fg__lab_now_us() + half;
    c->buf = buf;
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    if (!evtimer_pending(d->timer, NULL))
        deliver(d);
}

/* Feed what the API server sent to hiredis's reader (requests are RESP
 * arrays, as replies are) and count each command by name. A stream the
 * reader cannot follow is simply no longer counted. */
static void count_commands(pair *p, struct evbuffer *buf)
{
    if (!p->rd)
        return;
    struct evbuffer_iovec vec[8];
    int n = evbuffer_peek(buf, -1, NULL, vec, 8);
    for (int i = 0; i < n && i < 8; i++)
        if (redisReaderFeed(p->rd, vec[i].iov_base, vec[i].iov_len) != REDIS_OK)
            goto broken;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(p->rd, &reply) != REDIS_OK)
            goto broken;
        if (!reply)
            return;
        redisReply *r = reply;
        char name[24] = "?";
        if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING) {
            size_t len = r->element[0]->len < sizeof name - 1
                             ? r->element[0]->len
                             : sizeof name - 1;
            for (size_t k = 0; k < len; k++) {
                char c = r->element[0]->str[k];
                name[k] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
            }
            name[len] = '\0';
        }
        freeReplyObject(r);
        /* Connection set-up (script loading, handshakes) is not the cost of
         * a request. */
        static const char *const setup[] = {"script", "ping",  "auth", "select",
                                            "client", "hello", NULL};
        int skip = 0;
        for (int k = 0; setup[k]; k++)
            skip |= strcmp(name, setup[k]) == 0;
        if (skip)
            continue;
        pthread_mutex_lock(&p->px->lock);
        fg__lab_cmdstats_add(&p->px->sent, name, 1);
        pthread_mutex_unlock(&p->px->lock);
    }
broken:
    redisReaderFree(p->rd);
    p->rd = NULL;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    pipe_dir *d = arg;
    pair *p = d->p;
    if (p->closing)
        return;
    if (d->client_side) {
        if (!p->last_up)
            atomic_fetch_add(&p->px->round_trips, 1);
        p->last_up = 1;
    } else {
        p->last_up = 0;
    }
    struct evbuffer *buf = evbuffer_new();
    if (!buf) {
        pair_free(p);
        return;
    }
    bufferevent_read_buffer(bev, buf);
    if (d->client_side)
        count_commands(p, buf);
    enqueue(d, buf);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    pipe_dir *d = arg;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED)
        return;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        pair *p = d->p;
        if (p->closing) {
            pair_free(p);
            return;
        }
        /* Redis went away (or never answered the connect): the API server
         * learns it half a round trip later, as it would over a network. */
        bufferevent_disable(d->from, EV_READ);
        enqueue(d, NULL);
    }
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd,
                      struct sockaddr *sa, int salen, void *arg)
{
    (void)lis;
    (void)sa;
    (void)salen;
    fg__lab_proxy *px = arg;
    pair *p = calloc(1, sizeof *p);
    if (!p) {
        evutil_closesocket(fd);
        return;
    }
    p->px = px;
    p->next = px->pairs;
    if (px->pairs)
        px->pairs->prev = p;
    px->pairs = p;
    p->client = bufferevent_socket_new(px->base, fd, BEV_OPT_CLOSE_ON_FREE);
    p->upstream = bufferevent_socket_new(px->base, -1, BEV_OPT_CLOSE_ON_FREE);
    p->rd = redisReaderCreate();
    p->up.timer = evtimer_new(px->base, on_timer, &p->up);
    p->down.timer = evtimer_new(px->base, on_timer, &p->down);
    if (!p->client || !p->upstream || !p->up.timer || !p->down.timer) {
        if (!p->client)
            evutil_closesocket(fd);
        pair_free(p);
        return;
    }
    p->up = (pipe_dir){p, p->client, p->upstream, NULL, NULL, p->up.timer, 1};
    p->down =
        (pipe_dir){p, p->upstream, p->client, NULL, NULL, p->down.timer, 0};
    bufferevent_setcb(p->client, on_read, NULL, on_event, &p->up);
    bufferevent_setcb(p->upstream, on_read, NULL, on_event, &p->down);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)px->upstream_port);
    if (bufferevent_socket_connect(p->upstream, (struct sockaddr *)&a,
                                   sizeof a) < 0) {
        /* Redis is down: refused at once, as a dead host's port would. */
        pair_free(p);
        return;
    }
    bufferevent_enable(p->client, EV_READ);
    bufferevent_enable(p->upstream, EV_READ);
}

static void *run(void *arg)
{
    fg__lab_proxy *px = arg;
    event_base_dispatch(px->base);
    return NULL;
}

fg__lab_proxy *fg__lab_proxy_start(int upstream_port, char *err, size_t errlen)
{
    static int threads_ready;
    if (!threads_ready) {
        if (evthread_use_pthreads() < 0) {
            snprintf(err, errlen, "libevent: no thread support");
            return NULL;
        }
        threads_ready = 1;
    }
    fg__lab_proxy *px = calloc(1, sizeof *px);
    if (!px) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    px->upstream_port = upstream_port;
    pthread_mutex_init(&px->lock, NULL);
    struct event_config *cfg = event_config_new();
    if (cfg) {
        event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
        px->base = event_base_new_with_config(cfg);
        event_config_free(cfg);
    }
    if (!px->base) {
        snprintf(err, errlen, "libevent: cannot create an event loop");
        free(px);
        return NULL;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    px->lis = evconnlistener_new_bind(
        px->base, on_accept, px,
        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE, 128,
        (struct sockaddr *)&a, sizeof a);
    if (!px->lis) {
        snprintf(err, errlen, "delay proxy: cannot listen: %s",
                 strerror(errno));
        event_base_free(px->base);
        free(px);
        return NULL;
    }
    struct sockaddr_in got;
    socklen_t glen = sizeof got;
    getsockname(evconnlistener_get_fd(px->lis), (struct sockaddr *)&got, &glen);
    px->port = ntohs(got.sin_port);
    if (pthread_create(&px->thread, NULL, run, px) != 0) {
        snprintf(err, errlen, "delay proxy: cannot start its thread");
        evconnlistener_free(px->lis);
        event_base_free(px->base);
        free(px);
        return NULL;
    }
    return px;
}

int fg__lab_proxy_port(const fg__lab_proxy *px)
{
    return px->port;
}

void fg__lab_proxy_set_rtt(fg__lab_proxy *px, int64_t rtt_us)
{
    atomic_store(&px->rtt_us, rtt_us < 0 ? 0 : rtt_us);
}

uint64_t fg__lab_proxy_round_trips(const fg__lab_proxy *px)
{
    return atomic_load(&((fg__lab_proxy *)px)->round_trips);
}

void fg__lab_proxy_commands(fg__lab_proxy *px, fg__lab_cmdstats *out)
{
    pthread_mutex_lock(&px->lock);
    *out = px->sent;
    pthread_mutex_unlock(&px->lock);
}

void fg__lab_proxy_stop(fg__lab_proxy *px)
{
    if (!px)
        return;
    event_base_loopbreak(px->base);
    pthread_join(px->thread, NULL);
    while (px->pairs)
        pair_free(px->pairs);
    evconnlistener_free(px->lis);
    event_base_free(px->base);
    pthread_mutex_destroy(&px->lock);
    free(px);
}
