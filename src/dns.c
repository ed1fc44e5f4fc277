/* dns.c -- host names looked up without blocking an event loop (dns.h).
 *
 * libevent's evdns: evdns_base_new() with EVDNS_BASE_INITIALIZE_NAMESERVERS
 * reads /etc/resolv.conf (nameservers, search, ndots, timeout, attempts)
 * and /etc/hosts; evdns_getaddrinfo() answers a numeric address or a name of
 * /etc/hosts at once, and asks A and AAAA of the nameservers otherwise.
 *
 * Lifetimes: evdns finishes a request (answered, cancelled, or one of its
 * two questions given up) from callbacks it defers to the loop, and some of
 * them still read the evdns_base. So a lookup given up is only marked (its
 * owner's callback is not called), and the resolver is freed once evdns
 * has finished every lookup, from a callback of its own on the loop. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "floodgate.h"
#include "dns.h"
#include "alloc.h"
#include "error.h"

struct fg__dns {
    struct event_base *evb;
    struct evdns_base *base;
    unsigned live; /* lookups evdns has not finished */
    int freeing;   /* freed by its owner: gone once 'live' is 0 */
};

struct fg__dns_q {
    fg__dns *d;
    fg__dns_cb cb; /* NULL once given up */
    void *data;
    struct evdns_getaddrinfo_request *req;
    struct event *timer;
    int inside; /* within evdns_getaddrinfo(): an answer at once */
    char keep[INET6_ADDRSTRLEN]; /* "": none */
    int rc;
    char addr[INET6_ADDRSTRLEN];
    char why[160];
};

/* The numeric text of an IPv4 or IPv6 answer 'a'; 0 for another family. */
static int addr_text(const struct addrinfo *a, char addr[INET6_ADDRSTRLEN])
{
    const void *in =
        a->ai_family == AF_INET
            ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
        : a->ai_family == AF_INET6
            ? (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr
            : NULL;
    return in && inet_ntop(a->ai_family, in, addr, INET6_ADDRSTRLEN) != NULL;
}

int fg__dns_pick(const struct addrinfo *res, char addr[INET6_ADDRSTRLEN])
{
    const struct addrinfo *pick = NULL;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET || (!pick && a->ai_family == AF_INET6)) {
            pick = a;
            if (a->ai_family == AF_INET)
                break;
        }
    return pick && addr_text(pick, addr);
}

int fg__dns_resolve(const char *host, char addr[INET6_ADDRSTRLEN], char *why,
                    size_t whylen)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, NULL, &hints, &res);
    if (gai != 0)
        return fg__seterr(why, whylen, FG_EBACKEND,
                          "cannot resolve the host: %s", gai_strerror(gai));
    int ok = fg__dns_pick(res, addr);
    freeaddrinfo(res);
    if (!ok)
        return fg__seterr(why, whylen, FG_EBACKEND,
                          "the host has no IPv4 or IPv6 address");
    return FG_OK;
}

fg__dns *fg__dns_new(struct event_base *evb)
{
    return fg__dns_new_conf(evb, "/etc/resolv.conf");
}

fg__dns *fg__dns_new_conf(struct event_base *evb, const char *resolv_conf)
{
    fg__dns *d = fg__calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->evb = evb;
    /* Without DISABLE_WHEN_INACTIVE the nameservers' sockets would keep
     * the loop from ever running out of events. resolv.conf is read apart
     * from evdns_base_new: given INITIALIZE_NAMESERVERS, that fails when
     * the file is missing or names no nameserver, where glibc (and this
     * parse) falls back to 127.0.0.1; the store would not open at all. */
    d->base = evdns_base_new(evb, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (!d->base) {
        fg__free(d);
        return NULL;
    }
    (void)evdns_base_resolv_conf_parse(d->base, DNS_OPTIONS_ALL, resolv_conf);
    /* A lookup asks A of one nameserver and AAAA of the next, and gives
     * up at FG__DNS_TIMEOUT_MS: each try must time out well within it, so
     * that a nameserver that does not answer is passed over (and marked
     * down) rather than failing every lookup it takes part in. */
    if (evdns_base_set_option(d->base, "timeout:", FG__DNS_TRY_TIMEOUT) ||
        evdns_base_set_option(d->base, "attempts:", FG__DNS_TRIES)) {
        evdns_base_free(d->base, 0);
        fg__free(d);
        return NULL;
    }
    return d;
}

static void free_now(fg__dns *d)
{
    evdns_base_free(d->base, 0);
    fg__free(d);
}

static void free_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    free_now(arg);
}

void fg__dns_free(fg__dns *d)
{
    if (!d)
        return;
    d->freeing = 1;
    if (!d->live)
        free_now(d);
}

void fg__dns_free_later(fg__dns *d)
{
    if (!d)
        return;
    d->freeing = 1;
    struct timeval now = {0, 0};
    if (!d->live &&
        event_base_once(d->evb, -1, EV_TIMEOUT, free_later, d, &now))
        free_now(d); /* out of memory: the lesser risk than a leak */
}

uint64_t fg__dns_files_stamp(void)
{
    static const char *const files[] = {"/etc/resolv.conf", "/etc/hosts"};
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        uint64_t v[4] = {0, 0, 0, 0};
        if (stat(files[i], &sb) == 0) {
            v[0] = (uint64_t)sb.st_ino;
            v[1] = (uint64_t)sb.st_size;
            v[2] = (uint64_t)sb.st_ctim.tv_sec;
            v[3] = (uint64_t)sb.st_ctim.tv_nsec ^ (uint64_t)sb.st_mtim.tv_nsec;
        }
        for (int j = 0; j < 4; j++)
            h = (h ^ v[j]) * 0x100000001b3ull;
    }
    return h;
}

static void q_free(fg__dns_q *q)
{
    if (q->timer)
        event_free(q->timer);
    fg__free(q);
}

/* 1 when 'keep' is among the addresses 'res'. */
static int has_addr(const struct addrinfo *res, const char *keep)
{
    char a[INET6_ADDRSTRLEN];
    for (; keep[0] && res; res = res->ai_next)
        if (addr_text(res, a) && !strcmp(a, keep))
            return 1;
    return 0;
}

/* evdns's answer, once per lookup (EVUTIL_EAI_CANCEL for one given up). */
static void on_answer(int result, struct evutil_addrinfo *res, void *arg)
{
    fg__dns_q *q = arg;
    fg__dns *d = q->d;
    if (result == 0 && has_addr(res, q->keep)) {
        q->rc = FG_OK;
        memcpy(q->addr, q->keep, sizeof q->addr);
    } else if (result == 0 && fg__dns_pick(res, q->addr)) {
        q->rc = FG_OK;
    } else {
        q->rc = FG_EBACKEND;
        snprintf(q->why, sizeof q->why, "cannot resolve the host: %s",
                 result ? evutil_gai_strerror(result)
                        : "no IPv4 or IPv6 address");
    }
    if (res)
        evutil_freeaddrinfo(res);
    d->live--;
    if (q->inside)
        return; /* fg__dns_lookup answers */
    fg__dns_cb cb = q->cb;
    void *data = q->data;
    char addr[INET6_ADDRSTRLEN], why[sizeof q->why];
    int rc = q->rc;
    memcpy(addr, q->addr, sizeof addr);
    memcpy(why, q->why, sizeof why);
    q_free(q);
    if (d->freeing && !d->live) {
        /* Not from here: evdns may still read its base after this. */
        struct timeval now = {0, 0};
        if (event_base_once(d->evb, -1, EV_TIMEOUT, free_later, d, &now))
            free_now(d); /* out of memory: the lesser risk than a leak */
    }
    if (cb)
        cb(rc, addr, why, data);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    fg__dns_q *q = arg;
    (void)fd;
    (void)what;
    fg__dns_cb cb = q->cb;
    void *data = q->data;
    q->cb = NULL;
    evdns_getaddrinfo_cancel(q->req); /* on_answer frees 'q' later */
    if (cb)
        cb(FG_ETIMEOUT, NULL, "cannot resolve the host: no answer in time",
           data);
}

int fg__dns_lookup(fg__dns *d, const char *host, const char *keep,
                   fg__dns_cb cb, void *data, fg__dns_q **out,
                   char addr[INET6_ADDRSTRLEN], char *why, size_t whylen)
{
    struct evutil_addrinfo hints;
    fg__dns_q *q = fg__calloc(1, sizeof *q);
    *out = NULL;
    if (q)
        q->timer = evtimer_new(d->evb, on_timeout, q);
    if (!q || !q->timer) {
        if (q)
            q_free(q);
        return fg__seterr(why, whylen, FG_ENOMEM, "out of memory");
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    q->d = d;
    q->cb = cb;
    q->data = data;
    if (keep)
        snprintf(q->keep, sizeof q->keep, "%s", keep);
    q->inside = 1;
    d->live++;
    q->req = evdns_getaddrinfo(d->base, host, NULL, &hints, on_answer, q);
    q->inside = 0;
    if (!q->req) { /* answered already (on_answer ran) */
        int rc = q->rc;
        if (rc == FG_OK)
            memcpy(addr, q->addr, INET6_ADDRSTRLEN);
        else
            fg__seterr(why, whylen, rc, "%s", q->why);
        q_free(q);
        return rc;
    }
    struct timeval tv = {FG__DNS_TIMEOUT_MS / 1000,
                         (FG__DNS_TIMEOUT_MS % 1000) * 1000};
    evtimer_add(q->timer, &tv);
    *out = q;
    return 1;
}

void fg__dns_cancel(fg__dns_q *q)
{
    if (!q || !q->cb)
        return;
    q->cb = NULL;
    evtimer_del(q->timer);
    evdns_getaddrinfo_cancel(q->req);
}
