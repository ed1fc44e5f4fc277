/* faultproxy -- a TCP proxy that injects network faults, for the fault
 * catalogue (tests/integration/faults_*.sh) and any test that needs a bad
 * network between a client and a server on loopback.
 *
 *   faultproxy -u UPSTREAM_PORT [-l LISTEN_PORT] [-c CONTROL_PORT]
 *
 * Listens on 127.0.0.1:LISTEN_PORT (0 or none: any free port) and forwards
 * each connection to 127.0.0.1:UPSTREAM_PORT. A second loopback port,
 * CONTROL_PORT (again 0 or none: any), takes commands, one per line, each
 * answered "ok" or "err REASON" on a line of its own:
 *
 *   latency MS JITTER_MS  every reply chunk (upstream to client) waits MS
 *                         plus a uniform 0..JITTER_MS more; order is kept.
 *                         "latency 0 0" ends it.
 *   blackhole on|off      accept connections and read from both sides, but
 *                         forward nothing (held, not lost); off releases
 *                         what was held, as a healed network would.
 *   reset on|off          every reply chunk is cut: its first half is
 *                         forwarded, then the client's connection is reset
 *                         (RST) and the upstream one closed.
 *   trickle BYTES_PER_S   both directions at most that many bytes a second;
 *                         0 ends it.
 *   refuse on|off         close the listening socket (connects are refused)
 *                         and reset every open connection, as a server that
 *                         went away; off listens again on the same port.
 *   drop                  reset every open connection now (once).
 *   clear                 end every fault.
 *   stats                 "ok conns=N accepted=N resets=N".
 *
 * On start it prints one line, "listen=PORT control=PORT", on stdout.
 * Faults may be combined. One thread, one libevent loop; loopback only. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

/* Bytes read from one side, due on the other side at 'due_us'. */
typedef struct chunk {
    struct chunk *next;
    uint64_t due_us;
    struct evbuffer *buf;
} chunk;

typedef struct pair pair;

/* One direction of a pair: bytes read from 'from', written to 'to'. */
typedef struct dir {
    pair *p;
    struct bufferevent *from, *to;
    chunk *head, *tail;
    struct event *timer;
    int reply;          /* upstream to client */
    uint64_t credit_us; /* trickle: when the next byte may go */
} dir;

struct pair {
    pair *prev, *next;
    struct bufferevent *client, *upstream;
    dir up, down;
    int up_connected;
    int closing; /* one side ended: close once the other has all */
};

/* The faults in force, as the control port set them. */
static struct {
    uint64_t latency_us, jitter_us;
    int blackhole, reset, refuse;
    uint64_t trickle_bps;
} f;

static struct event_base *base;
static struct evconnlistener *lis, *ctl;
static struct sockaddr_in listen_addr, upstream_addr;
static pair *pairs;
static long nconns, accepted, resets;
static uint32_t rng = 2463534242u;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static void dir_free(dir *d)
{
    chunk *c = d->head;
    while (c) {
        chunk *n = c->next;
        evbuffer_free(c->buf);
        free(c);
        c = n;
    }
    d->head = d->tail = NULL;
    if (d->timer)
        event_free(d->timer);
    d->timer = NULL;
}

/* Close both sides of 'p'. With 'rst', the client's side is reset rather
 * than closed: SO_LINGER with a zero timeout makes close() send an RST. */
static void pair_close(pair *p, int rst)
{
    if (rst && p->client) {
        struct linger lg = {1, 0};
        evutil_socket_t fd = bufferevent_getfd(p->client);
        if (fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        resets++;
    }
    dir_free(&p->up);
    dir_free(&p->down);
    if (p->client)
        bufferevent_free(p->client);
    if (p->upstream)
        bufferevent_free(p->upstream);
    if (p->prev)
        p->prev->next = p->next;
    else
        pairs = p->next;
    if (p->next)
        p->next->prev = p->prev;
    nconns--;
    free(p);
}

static void pump(dir *d);

/* After an end of file on one side, the pair closes once everything due to
 * the other side has been written (a server's last error reply, as
 * "max number of clients reached", reaches the client). */
static void maybe_finish(pair *p)
{
    if (!p->closing || p->up.head || p->down.head ||
        evbuffer_get_length(bufferevent_get_output(p->client)) ||
        evbuffer_get_length(bufferevent_get_output(p->upstream)))
        return;
    pair_close(p, 0);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pump(arg);
}

static void arm(dir *d, uint64_t at_us, uint64_t now)
{
    uint64_t wait = at_us > now ? at_us - now : 0;
    struct timeval tv = {(time_t)(wait / 1000000),
                         (suseconds_t)(wait % 1000000)};
    evtimer_add(d->timer, &tv);
}

/* Forward what is due in 'd', under the faults in force. May free the
 * pair (a reset); the caller must not touch it afterwards. */
static void pump(dir *d)
{
    pair *p = d->p;
    uint64_t now = now_us();
    if (f.blackhole || (!d->reply && !p->up_connected))
        return;
    while (d->head) {
        chunk *c = d->head;
        if (c->due_us > now) {
            arm(d, c->due_us, now);
            return;
        }
        size_t len = evbuffer_get_length(c->buf);
        if (d->reply && f.reset) {
            /* The first half straight into the socket (on loopback it is
             * in the peer's buffer when send returns), then the reset. */
            char half[4096];
            size_t n = len / 2 ? len / 2 : 1;
            if (n > sizeof half)
                n = sizeof half;
            if (evbuffer_get_length(bufferevent_get_output(p->client))) {
                arm(d, now + 1000, now); /* what went before goes first */
                return;
            }
            evbuffer_remove(c->buf, half, n);
            /* A failed send (the client gone already) needs nothing more:
             * the reset follows either way. */
            evutil_socket_t fd = bufferevent_getfd(p->client);
            if (fd >= 0)
                (void)send(fd, half, n, MSG_NOSIGNAL);
            pair_close(p, 1);
            return;
        }
        if (f.trickle_bps) {
            /* 'credit_us' is when the next byte may go; an idle direction
             * saves up at most 10 ms of bytes. */
            uint64_t per_byte = 1000000 / f.trickle_bps;
            if (per_byte == 0)
                per_byte = 1;
            if (d->credit_us + 10000 < now)
                d->credit_us = now - 10000;
            if (d->credit_us > now) {
                arm(d, d->credit_us, now);
                return;
            }
            size_t n = (size_t)((now - d->credit_us) / per_byte) + 1;
            if (n > len)
                n = len;
            evbuffer_remove_buffer(c->buf, bufferevent_get_output(d->to), n);
            d->credit_us += n * per_byte;
            if (n < len) {
                arm(d, d->credit_us, now);
                return;
            }
        } else {
            bufferevent_write_buffer(d->to, c->buf);
        }
        d->head = c->next;
        if (!d->head)
            d->tail = NULL;
        evbuffer_free(c->buf);
        free(c);
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    maybe_finish(arg);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    pair *p = arg;
    dir *d = bev == p->client ? &p->up : &p->down;
    chunk *c = calloc(1, sizeof *c);
    if (!c || !(c->buf = evbuffer_new())) {
        free(c);
        pair_close(p, 0);
        return;
    }
    evbuffer_add_buffer(c->buf, bufferevent_get_input(bev));
    uint64_t now = now_us();
    c->due_us = now;
    if (d->reply && f.latency_us + f.jitter_us)
        c->due_us +=
            f.latency_us + (f.jitter_us ? rnd() % (f.jitter_us + 1) : 0);
    /* Order is kept: a chunk is never due before the one ahead of it. */
    if (d->tail && c->due_us < d->tail->due_us)
        c->due_us = d->tail->due_us;
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    pump(d);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    pair *p = arg;
    if (bev == p->upstream && (what & BEV_EVENT_CONNECTED)) {
        p->up_connected = 1;
        pump(&p->up);
        return;
    }
    if (what & BEV_EVENT_ERROR) {
        /* A reset or a refused connect: what is due is lost, as it would
         * be on the wire. */
        pair_close(p, 0);
    } else if (what & BEV_EVENT_EOF) {
        p->closing = 1;
        bufferevent_disable(bev, EV_READ);
        maybe_finish(p);
    }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int salen, void *arg)
{
    (void)l;
    (void)sa;
    (void)salen;
    (void)arg;
    pair *p = calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return;
    }
    p->client = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    p->upstream = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    p->up = (dir){p, p->client, p->upstream, NULL, NULL, NULL, 0, 0};
    p->down = (dir){p, p->upstream, p->client, NULL, NULL, NULL, 1, 0};
    p->up.timer = evtimer_new(base, on_timer, &p->up);
    p->down.timer = evtimer_new(base, on_timer, &p->down);
    p->next = pairs;
    if (pairs)
        pairs->prev = p;
    pairs = p;
    nconns++;
    accepted++;
    if (!p->client || !p->upstream || !p->up.timer || !p->down.timer) {
        pair_close(p, 0);
        return;
    }
    bufferevent_setcb(p->client, on_read, on_write, on_event, p);
    bufferevent_setcb(p->upstream, on_read, on_write, on_event, p);
    bufferevent_enable(p->client, EV_READ);
    bufferevent_enable(p->upstream, EV_READ);
    if (bufferevent_socket_connect(p->upstream,
                                   (struct sockaddr *)&upstream_addr,
                                   sizeof upstream_addr) < 0)
        pair_close(p, 1);
}

static void drop_all(void)
{
    while (pairs)
        pair_close(pairs, 1);
}

static int listen_on(void)
{
    lis = evconnlistener_new_bind(
        base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 128,
        (struct sockaddr *)&listen_addr, sizeof listen_addr);
    if (!lis)
        return -1;
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    getsockname(evconnlistener_get_fd(lis), (struct sockaddr *)&a, &alen);
    listen_addr.sin_port = a.sin_port; /* the same port when listening again */
    return 0;
}

/* Everything held or delayed goes out under the faults now in force. */
static void pump_all(void)
{
    pair *p = pairs;
    while (p) {
        pair *n = p->next;
        pump(&p->up); /* never frees 'p': only a reply is reset */
        pump(&p->down);
        p = n;
    }
}

static int onoff(const char *s, int *out)
{
    if (!strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* Run one control line; the answer goes to 'out'. */
static void command(char *line, struct evbuffer *out)
{
    char w[4][32] = {{0}};
    int n = sscanf(line, "%31s %31s %31s %31s", w[0], w[1], w[2], w[3]);
    int v = 0;
    if (n < 1) {
        evbuffer_add_printf(out, "err empty\n");
        return;
    }
    if (!strcmp(w[0], "latency") && n == 3) {
        f.latency_us = strtoull(w[1], NULL, 10) * 1000;
        f.jitter_us = strtoull(w[2], NULL, 10) * 1000;
    } else if (!strcmp(w[0], "blackhole") && n == 2 && !onoff(w[1], &v)) {
        f.blackhole = v;
        if (!v)
            pump_all();
    } else if (!strcmp(w[0], "reset") && n == 2 && !onoff(w[1], &v)) {
        f.reset = v;
    } else if (!strcmp(w[0], "trickle") && n == 2) {
        f.trickle_bps = strtoull(w[1], NULL, 10);
        if (!f.trickle_bps)
            pump_all();
    } else if (!strcmp(w[0], "refuse") && n == 2 && !onoff(w[1], &v)) {
        if (v && !f.refuse) {
            evconnlistener_free(lis);
            lis = NULL;
            drop_all();
        } else if (!v && f.refuse && listen_on() < 0) {
            evbuffer_add_printf(out, "err cannot listen again: %s\n",
                                strerror(errno));
            return;
        }
        f.refuse = v;
    } else if (!strcmp(w[0], "drop") && n == 1) {
        drop_all();
    } else if (!strcmp(w[0], "clear") && n == 1) {
        int was_refusing = f.refuse;
        memset(&f, 0, sizeof f);
        if (was_refusing && listen_on() < 0) {
            f.refuse = 1;
            evbuffer_add_printf(out, "err cannot listen again: %s\n",
                                strerror(errno));
            return;
        }
        pump_all();
    } else if (!strcmp(w[0], "stats") && n == 1) {
        evbuffer_add_printf(out, "ok conns=%ld accepted=%ld resets=%ld\n",
                            nconns, accepted, resets);
        return;
    } else {
        evbuffer_add_printf(out, "err unknown command\n");
        return;
    }
    evbuffer_add_printf(out, "ok\n");
}

static void ctl_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    char *line;
    size_t n;
    while ((line = evbuffer_readln(bufferevent_get_input(bev), &n,
                                   EVBUFFER_EOL_CRLF))) {
        command(line, bufferevent_get_output(bev));
        free(line);
    }
}

static void ctl_event(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        bufferevent_free(bev);
}

static void ctl_accept(struct evconnlistener *l, evutil_socket_t fd,
                       struct sockaddr *sa, int salen, void *arg)
{
    (void)l;
    (void)sa;
    (void)salen;
    (void)arg;
    struct bufferevent *bev =
        bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        close(fd);
        return;
    }
    bufferevent_setcb(bev, ctl_read, NULL, ctl_event, NULL);
    bufferevent_enable(bev, EV_READ);
}

static void loopback(struct sockaddr_in *a, int port)
{
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons((uint16_t)port);
}

int main(int argc, char **argv)
{
    int lport = 0, cport = 0, uport = 0, o;
    /* A write to a peer that has gone is an error to handle, not the
     * proxy's end (SIGPIPE killed it in a trickle after a reset). */
    signal(SIGPIPE, SIG_IGN);
    while ((o = getopt(argc, argv, "l:c:u:")) != -1) {
        if (o == 'l')
            lport = atoi(optarg);
        else if (o == 'c')
            cport = atoi(optarg);
        else if (o == 'u')
            uport = atoi(optarg);
        else
            goto usage;
    }
    if (uport <= 0 || uport > 65535 || lport < 0 || cport < 0)
        goto usage;
    loopback(&listen_addr, lport);
    loopback(&upstream_addr, uport);
    struct event_config *cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base || listen_on() < 0) {
        fprintf(stderr, "faultproxy: cannot listen: %s\n", strerror(errno));
        return 1;
    }
    struct sockaddr_in ca;
    loopback(&ca, cport);
    ctl = evconnlistener_new_bind(base, ctl_accept, NULL,
                                  LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
                                  (struct sockaddr *)&ca, sizeof ca);
    if (!ctl) {
        fprintf(stderr, "faultproxy: cannot listen: %s\n", strerror(errno));
        return 1;
    }
    socklen_t alen = sizeof ca;
    getsockname(evconnlistener_get_fd(ctl), (struct sockaddr *)&ca, &alen);
    printf("listen=%d control=%d\n", ntohs(listen_addr.sin_port),
           ntohs(ca.sin_port));
    fflush(stdout);
    event_base_dispatch(base);
    return 0;
usage:
    fprintf(stderr, "usage: faultproxy -u UPSTREAM_PORT [-l LISTEN_PORT] "
                    "[-c CONTROL_PORT]\n");
    return 2;
}
