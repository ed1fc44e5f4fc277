/* fgload -- a small HTTP load generator for the serve integration tests.
 *
 *   fgload [-m POST] [-H 'Name: value']... [-n TOTAL | -d MS] [-c CONC]
 *          [-r PER_SECOND] URL [URL...]
 *
 * Keeps CONC requests in flight (at most PER_SECOND a second when given), each
 * on its own connection, the URLs taken in turn (to spread a burst over several
 * servers). Prints one line: sent=N s200=A s429=B s503=C s4xx=D other=E
 * errors=F bad_headers=G max_us=M p99_us=P p999_us=Q served_by=id:n,...
 * bad_headers counts answers to a decision (200/403/429) missing the
 * RateLimit headers or X-Served-By, and 429s without a whole-second
 * Retry-After of at least 1.
 * Each error (no answer) is also told on stderr: what libevent saw, errno,
 * when (ms since the start), the request's age and its local port, to be
 * matched with the servers' logs. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_URLS 16
#define MAX_HDRS 8
#define MAX_IDS  16

static struct event_base *base;
static struct evhttp_uri *uris[MAX_URLS];
static int nurls;
static const char *hdr_name[MAX_HDRS], *hdr_value[MAX_HDRS];
static int nhdrs;
static enum evhttp_cmd_type method = EVHTTP_REQ_POST;
static long total = 100, conc = 10, duration_ms = 0, rate = 0;
static struct event *pace_ev;
static long sent, done, inflight;
static long s200, s429, s503, s4xx, other, errors, bad_headers;
static uint64_t *lat;
static size_t nlat, caplat;
static uint64_t start_us;
static char ids[MAX_IDS][64];
static long idn[MAX_IDS];

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

typedef struct rq {
    struct evhttp_connection *conn;
    uint64_t t0;
    int lport;
} rq;

static const char *const err_kind[] = {
    "timeout", "eof", "invalid_header", "buffer_error", "cancel", "too_long"};

static void on_error(enum evhttp_request_error e, void *arg)
{
    rq *r = arg;
    int err = errno; /* what the failing socket call left */
    uint64_t now = now_us();
    fprintf(stderr,
            "fgload: error %s errno=\"%s\" t_ms=%llu age_us=%llu "
            "lport=%d\n",
            (unsigned)e < 6 ? err_kind[e] : "other", strerror(err),
            (unsigned long long)((now - start_us) / 1000),
            (unsigned long long)(now - r->t0), r->lport);
}

/* The local port of the connection of 'r', 0 when it has no socket. */
static int local_port(const rq *r)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd =
        bufferevent_getfd(evhttp_connection_get_bufferevent(r->conn));
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void fire(void);

static void count_id(const char *id)
{
    for (int i = 0; i < MAX_IDS; i++) {
        if (ids[i][0] == '\0') {
            snprintf(ids[i], sizeof(ids[i]), "%s", id);
            idn[i] = 1;
            return;
        }
        if (strcmp(ids[i], id) == 0) {
            idn[i]++;
            return;
        }
    }
}

static void on_done(struct evhttp_request *req, void *arg)
{
    rq *r = arg;
    uint64_t us = now_us() - r->t0;
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 1024;
        lat = realloc(lat, caplat * sizeof(*lat));
        if (!lat)
            abort();
    }
    lat[nlat++] = us;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (code == 0) {
        errors++;
    } else {
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        const char *id = evhttp_find_header(h, "X-Served-By");
        if (id)
            count_id(id);
        if (code == 200)
            s200++;
        else if (code == 429)
            s429++;
        else if (code == 503)
            s503++;
        else if (code >= 400 && code < 500)
            s4xx++;
        else
            other++;
        if (code == 200 || code == 429 || code == 403) {
            const char *ra = evhttp_find_header(h, "Retry-After");
            int bad = !id || !evhttp_find_header(h, "RateLimit") ||
                      !evhttp_find_header(h, "RateLimit-Policy");
            if (code != 200) {
                char *end = NULL;
                long v = ra ? strtol(ra, &end, 10) : 0;
                if (!ra || *end != '\0' || v < 1)
                    bad = 1;
            }
            bad_headers += bad;
        }
    }
    done++;
    inflight--;
    free(r); /* the connection frees itself once this returns */
    fire();
}

static void fire(void)
{
    for (;;) {
        if (inflight >= conc)
            return;
        if (duration_ms ? now_us() - start_us >= (uint64_t)duration_ms * 1000
                        : sent >= total) {
            if (inflight == 0)
                event_base_loopbreak(base);
            return;
        }
        if (rate > 0 && (uint64_t)sent * 1000000 >=
                            (now_us() - start_us) * (uint64_t)rate) {
            struct timeval tv = {0, 200};
            if (!evtimer_pending(pace_ev, NULL))
                evtimer_add(pace_ev, &tv);
            return;
        }
        struct evhttp_uri *u = uris[sent % nurls];
        rq *r = calloc(1, sizeof(*r));
        if (!r)
            abort();
        int port = evhttp_uri_get_port(u);
        r->conn = evhttp_connection_base_new(base, NULL, evhttp_uri_get_host(u),
                                             port > 0 ? port : 80);
        evhttp_connection_set_timeout(r->conn, 5);
        struct evhttp_request *req = evhttp_request_new(on_done, r);
        evhttp_request_set_error_cb(req, on_error);
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        evhttp_add_header(oh, "Host", evhttp_uri_get_host(u));
        evhttp_add_header(oh, "Connection", "close");
        for (int i = 0; i < nhdrs; i++)
            evhttp_add_header(oh, hdr_name[i], hdr_value[i]);
        char target[2048];
        const char *q = evhttp_uri_get_query(u);
        snprintf(target, sizeof(target), "%s%s%s",
                 evhttp_uri_get_path(u) ? evhttp_uri_get_path(u) : "/",
                 q ? "?" : "", q ? q : "");
        r->t0 = now_us();
        sent++;
        inflight++;
        if (evhttp_make_request(r->conn, req, method, target) != 0) {
            /* The request was freed; the connection is ours to free. */
            errors++;
            inflight--;
            done++;
            evhttp_connection_free(r->conn);
            free(r);
            continue;
        }
        evhttp_connection_free_on_completion(r->conn);
        r->lport = local_port(r);
    }
}

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    fire();
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            i++;
            method = !strcmp(argv[i], "GET") ? EVHTTP_REQ_GET : EVHTTP_REQ_POST;
        } else if (!strcmp(argv[i], "-H") && i + 1 < argc && nhdrs < MAX_HDRS) {
            char *h = strdup(argv[++i]);
            char *colon = h ? strchr(h, ':') : NULL;
            if (!colon) {
                fprintf(stderr, "fgload: bad header %s\n", argv[i]);
                return 2;
            }
            *colon = '\0';
            hdr_name[nhdrs] = h;
            hdr_value[nhdrs++] = colon + 1 + (colon[1] == ' ');
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            total = atol(argv[++i]);
        } else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            conc = atol(argv[++i]);
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            rate = atol(argv[++i]);
        } else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            duration_ms = atol(argv[++i]);
        } else if (nurls < MAX_URLS) {
            uris[nurls] = evhttp_uri_parse(argv[i]);
            if (!uris[nurls]) {
                fprintf(stderr, "fgload: bad URL %s\n", argv[i]);
                return 2;
            }
            nurls++;
        }
    }
    if (nurls == 0 || conc < 1) {
        fprintf(stderr, "usage: fgload [-m M] [-H H] [-n N|-d MS] [-c C] "
                        "URL...\n");
        return 2;
    }
    base = event_base_new();
    pace_ev = evtimer_new(base, on_pace, NULL);
    start_us = now_us();
    fire();
    event_base_dispatch(base);
    qsort(lat, nlat, sizeof(*lat), cmp);
    uint64_t max = nlat ? lat[nlat - 1] : 0;
    uint64_t p99 = nlat ? lat[nlat * 99 / 100] : 0;
    uint64_t p999 = nlat ? lat[nlat * 999 / 1000] : 0;
    printf("sent=%ld s200=%ld s429=%ld s503=%ld s4xx=%ld other=%ld "
           "errors=%ld bad_headers=%ld max_us=%llu p99_us=%llu p999_us=%llu "
           "served_by=",
           sent, s200, s429, s503, s4xx, other, errors, bad_headers,
           (unsigned long long)max, (unsigned long long)p99,
           (unsigned long long)p999);
    for (int i = 0; i < MAX_IDS && ids[i][0]; i++)
        printf("%s%s:%ld", i ? "," : "", ids[i], idn[i]);
    printf("\n");
    free(lat);
    for (int i = 0; i < nurls; i++)
        evhttp_uri_free(uris[i]);
    for (int i = 0; i < nhdrs; i++)
        free((char *)hdr_name[i]);
    event_free(pace_ev);
    event_base_free(base);
    return 0;
}
