/* web.c -- `floodgate lab --web`: the interactive page and its JSON API.
 *
 *   GET /                 the page (files embedded from lab/web/)
 *   GET /api/defaults     the starting values and slider ranges
 *   GET /api/run?strategy=S&servers=N&burst=B&rtt=MS[&spread=MS][&sync=MS]
 *                         one real run of S, Redis-down included
 *   GET /api/sweep?servers=N&burst=B[&sync=MS]
 *                         allowed by RTT (0,1,2,5,10,20) for every strategy
 *
 * A run happens inside the request's callback: the server answers one run
 * at a time, which is what the page wants (it debounces and waits). The
 * processes stay up between runs and are replaced only when the server count
 * or the balance changes.
 *
 * The page starts processes for whoever reaches it: it listens on loopback
 * only, and answers only requests whose Host names loopback on its port
 * (another site's page, its name turned to 127.0.0.1 by DNS rebinding,
 * names its own). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "../serve/config.h"
#include "lab.h"

/* The page's sliders (lab/web/index.html): the defaults it is given are
 * kept within them and on their steps, so that the page shows what runs. */
#define PAGE_SERVERS_MAX 16
#define PAGE_BURST_MIN   10
#define PAGE_BURST_MAX   200
#define PAGE_RTT_MAX_MS  20
#define PAGE_SYNC_MIN_MS 10
#define PAGE_SYNC_MAX_MS 1000
#define PAGE_SYNC_STEP   10

/* A request's body and headers: the API takes none of the first, and a
 * browser sends a few kB of the second. */
#define MAX_BODY    4096
#define MAX_HEADERS 32768

typedef struct web {
    fg__lab *lab;
    fg__lab_params defaults;
    struct event_base *base;
    unsigned runs;
    int port; /* the port bound, which a Host header must name */
} web;

int fg__lab_loopback_host(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcasecmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* 1 when the request's Host header is a loopback host ("127.0.0.1",
 * "[::1]", "localhost") on the port the page listens on (or none, on port
 * 80). */
static int host_ok(const web *w, struct evhttp_request *req)
{
    const char *h =
        evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
    char host[128];
    const char *rest;
    size_t n;
    if (!h)
        return 0;
    if (h[0] == '[') {
        const char *end = strchr(h, ']');
        if (!end)
            return 0;
        h++;
        n = (size_t)(end - h);
        rest = end + 1;
    } else {
        n = strcspn(h, ":");
        rest = h + n;
    }
    if (n >= sizeof host)
        return 0;
    memcpy(host, h, n);
    host[n] = '\0';
    if (*rest == '\0')
        return w->port == 80 && fg__lab_loopback_host(host);
    if (*rest != ':' || rest[1] == '\0' ||
        strspn(rest + 1, "0123456789") != strlen(rest + 1) ||
        strlen(rest + 1) > 5 || atoi(rest + 1) != w->port)
        return 0;
    return fg__lab_loopback_host(host);
}

static void reply_json(struct evhttp_request *req, int code, const char *body,
                       size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Cache-Control", "no-store");
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add(b, body, len);
    evhttp_send_reply(req, code, code == 200 ? "OK" : "Error", b);
    evbuffer_free(b);
}

static void reply_error(struct evhttp_request *req, int code, const char *msg)
{
    char body[640];
    /* Messages are ours (no quotes or backslashes) but keep the JSON valid
     * whatever a log tail holds. */
    char clean[512];
    size_t j = 0;
    for (size_t i = 0; msg[i] && j < sizeof clean - 1; i++)
        clean[j++] =
            (msg[i] == '"' || msg[i] == '\\' || (unsigned char)msg[i] < 32)
                ? ' '
                : msg[i];
    clean[j] = '\0';
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\"}", clean);
    reply_json(req, code, body, (size_t)n);
}

/* The whole decimal number 'name' of the query, lo..hi, into 'out' (left
 * alone when absent). Digits only: no sign, point, exponent, "nan" or
 * "inf", which a range check would let through or mistake. */
static int qint(struct evkeyvalq *q, const char *name, int lo, int hi, int *out)
{
    const char *v = evhttp_find_header(q, name);
    if (!v)
        return 0;
    size_t n = strlen(v);
    if (n == 0 || n > 9 || strspn(v, "0123456789") != n)
        return -1;
    long d = strtol(v, NULL, 10);
    if (d < lo || d > hi)
        return -1;
    *out = (int)d;
    return 0;
}

/* A parameter the query gives twice, or NULL: refused, not first-wins. */
static const char *repeated(const struct evkeyvalq *q)
{
    const struct evkeyval *a, *b;
    TAILQ_FOREACH(a, q, next)
    {
        for (b = TAILQ_NEXT(a, next); b; b = TAILQ_NEXT(b, next))
            if (strcmp(a->key, b->key) == 0)
                return a->key;
    }
    return NULL;
}

/* Parameters from the query, on top of the defaults. */
static int read_params(web *w, struct evkeyvalq *q, fg__lab_params *p,
                       char *err, size_t errlen)
{
    *p = w->defaults;
    int servers = p->servers, burst = p->burst;
    int rtt_ms = (int)(p->rtt_us / 1000),
        spread_ms = (int)(p->spread_us / 1000);
    if (qint(q, "servers", 1, 16, &servers) < 0) {
        snprintf(err, errlen, "servers must be a whole number, 1..16");
        return -1;
    }
    if (qint(q, "burst", 1, FG__LAB_WEB_MAX_BURST, &burst) < 0) {
        snprintf(err, errlen, "burst must be a whole number, 1..%d",
                 FG__LAB_WEB_MAX_BURST);
        return -1;
    }
    if (qint(q, "rtt", 0, 50, &rtt_ms) < 0) {
        snprintf(err, errlen, "rtt must be a whole number of ms, 0..50");
        return -1;
    }
    if (qint(q, "spread", 0, 1000, &spread_ms) < 0) {
        snprintf(err, errlen, "spread must be a whole number of ms, 0..1000");
        return -1;
    }
    if (qint(q, "sync", 10, 10000, &p->sync_ms) < 0) {
        snprintf(err, errlen, "sync must be a whole number of ms, 10..10000");
        return -1;
    }
    const char *bal = evhttp_find_header(q, "balance");
    if (bal && strcmp(bal, "random") != 0 && strcmp(bal, "roundrobin") != 0) {
        snprintf(err, errlen, "balance must be roundrobin or random");
        return -1;
    }
    if (bal)
        p->balance_random = strcmp(bal, "random") == 0;
    p->servers = servers;
    p->burst = burst;
    p->rtt_us = (int64_t)rtt_ms * 1000;
    p->spread_us = (int64_t)spread_ms * 1000;
    return 0;
}

static void api_run(web *w, struct evhttp_request *req, struct evkeyvalq *q)
{
    char err[512] = "";
    fg__lab_params p;
    const char *sname = evhttp_find_header(q, "strategy");
    int s = sname ? fg__lab_strategy_parse(sname) : -1;
    if (s < 0) {
        reply_error(req, 400,
                    "strategy must be local, split, naive, atomic, sync or "
                    "lease");
        return;
    }
    if (read_params(w, q, &p, err, sizeof err) < 0) {
        reply_error(req, 400, err);
        return;
    }
    int64_t t0 = fg__lab_now_us();
    int warm = fg__lab_warm(w->lab, s, &p);
    fg__lab_retire(w->lab, &p);
    fg__lab_result r[FG__LAB_NSTRATEGIES];
    memset(r, 0, sizeof r);
    if (fg__lab_measure(w->lab, s, &p, &r[s], err, sizeof err) < 0 ||
        fg__lab_measure_down(w->lab, 1u << s, r, err, sizeof err) < 0) {
        /* Cut short by a signal: the lab stops, nothing failed. */
        reply_error(req, fg__lab_stop ? 503 : 500,
                    fg__lab_stop ? "the lab is stopping" : err);
        return;
    }
    int64_t took = fg__lab_now_us() - t0;
    w->runs++;
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (!f) {
        reply_error(req, 500, "out of memory");
        return;
    }
    fprintf(f, "{\"run\":%u,\"warm\":%s,\"took_ms\":%.1f,\"result\":", w->runs,
            warm ? "true" : "false", took / 1000.0);
    fg__lab_print_json(f, &r[s]);
    fprintf(f, "}");
    if (fclose(f) != 0 || !body) {
        free(body);
        reply_error(req, 500, "out of memory");
        return;
    }
    reply_json(req, 200, body, len);
    free(body);
}

static void api_sweep(web *w, struct evhttp_request *req, struct evkeyvalq *q)
{
    char err[512] = "";
    fg__lab_params p;
    if (read_params(w, q, &p, err, sizeof err) < 0) {
        reply_error(req, 400, err);
        return;
    }
    int rtts[] = {0, 1, 2, 5, 10, 20};
    int n = (int)(sizeof rtts / sizeof rtts[0]);
    fg__lab_result *rs = calloc((size_t)n * FG__LAB_NSTRATEGIES, sizeof *rs);
    if (!rs) {
        reply_error(req, 500, "out of memory");
        return;
    }
    int64_t t0 = fg__lab_now_us();
    fg__lab_retire(w->lab, &p);
    unsigned all = (1u << FG__LAB_NSTRATEGIES) - 1;
    int rc = fg__lab_ensure_many(w->lab, all, &p, err, sizeof err);
    for (int v = 0; v < n && rc == 0; v++) {
        p.rtt_us = (int64_t)rtts[v] * 1000;
        for (int s = 0; s < FG__LAB_NSTRATEGIES && rc == 0; s++)
            rc =
                fg__lab_measure(w->lab, s, &p, &rs[v * FG__LAB_NSTRATEGIES + s],
                                err, sizeof err);
    }
    if (rc < 0) {
        free(rs);
        reply_error(req, fg__lab_stop ? 503 : 500,
                    fg__lab_stop ? "the lab is stopping" : err);
        return;
    }
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (!f) {
        free(rs);
        reply_error(req, 500, "out of memory");
        return;
    }
    fprintf(f,
            "{\"param\":\"rtt\",\"limit\":%llu,\"took_ms\":%.1f,\"values\":[",
            (unsigned long long)p.limit, (fg__lab_now_us() - t0) / 1000.0);
    for (int v = 0; v < n; v++)
        fprintf(f, "%s%d", v ? "," : "", rtts[v]);
    fprintf(f, "],\"sync_ms\":%d,\"allowed\":{", p.sync_ms);
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++) {
        fprintf(f, "%s\"%s\":[", s ? "," : "", fg__lab_strategy_name(s));
        for (int v = 0; v < n; v++)
            fprintf(f, "%s%d", v ? "," : "",
                    rs[v * FG__LAB_NSTRATEGIES + s].allowed);
        fprintf(f, "]");
    }
    /* The approximate modes' stated bounds, per round trip. */
    fprintf(f, "},\"bound\":{");
    for (int s = FG__LAB_SYNC; s < FG__LAB_NSTRATEGIES; s++) {
        fprintf(f, "%s\"%s\":[", s > FG__LAB_SYNC ? "," : "",
                fg__lab_strategy_name(s));
        for (int v = 0; v < n; v++)
            fprintf(f, "%s%llu", v ? "," : "",
                    (unsigned long long)rs[v * FG__LAB_NSTRATEGIES + s]
                        .bound.bound);
        fprintf(f, "]");
    }
    fprintf(f, "},\"redis_calls_per_request\":{");
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++) {
        fprintf(f, "%s\"%s\":[", s ? "," : "", fg__lab_strategy_name(s));
        for (int v = 0; v < n; v++)
            fprintf(f, "%s%.2f", v ? "," : "",
                    rs[v * FG__LAB_NSTRATEGIES + s].calls_per_request);
        fprintf(f, "]");
    }
    fprintf(f, "}}");
    free(rs);
    if (fclose(f) != 0 || !body) {
        free(body);
        reply_error(req, 500, "out of memory");
        return;
    }
    reply_json(req, 200, body, len);
    free(body);
}

static void api_defaults(web *w, struct evhttp_request *req)
{
    char body[1024];
    const fg__lab_params *p = &w->defaults;
    int n = snprintf(
        body, sizeof body,
        "{\"servers\":%d,\"burst\":%d,\"rtt_ms\":%.10g,\"spread_ms\":%.10g,"
        "\"limit\":%llu,\"period_ms\":%llu,\"balance\":\"%s\","
        "\"sync_ms\":%d,\"chunk\":%llu,"
        "\"ranges\":{\"servers\":[1,%d],\"burst\":[%d,%d],\"rtt\":[0,%d],"
        "\"sync\":[%d,%d]},"
        "\"policies\":{\"local\":\"%s\",\"split\":\"%s\",\"naive\":\"%s\","
        "\"atomic\":\"%s\",\"sync\":\"%s\",\"lease\":\"%s\"}}",
        p->servers, p->burst, p->rtt_us / 1000.0, p->spread_us / 1000.0,
        (unsigned long long)p->limit, (unsigned long long)p->period_ms,
        p->balance_random ? "random" : "roundrobin", p->sync_ms,
        (unsigned long long)p->chunk, PAGE_SERVERS_MAX, PAGE_BURST_MIN,
        PAGE_BURST_MAX, PAGE_RTT_MAX_MS, PAGE_SYNC_MIN_MS, PAGE_SYNC_MAX_MS,
        fg__lab_policy_text(FG__LAB_LOCAL), fg__lab_policy_text(FG__LAB_SPLIT),
        fg__lab_policy_text(FG__LAB_NAIVE), fg__lab_policy_text(FG__LAB_ATOMIC),
        fg__lab_policy_text(FG__LAB_SYNC), fg__lab_policy_text(FG__LAB_LEASE));
    reply_json(req, 200, body, (size_t)n);
}

/* Whether an API request comes from this page, or from no page at all (an
 * address typed in, curl). Another page, even one served on loopback,
 * could else start runs in the user's browser: an <img> or a form aimed
 * here. The browser says where a request comes from in Sec-Fetch-Site
 * (same-site covers another port of the same host) and, for scripts, in
 * Origin, which must name the Host this request was sent to. */
static int origin_ok(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *site = evhttp_find_header(in, "Sec-Fetch-Site");
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
        return 0;
    const char *origin = evhttp_find_header(in, "Origin");
    const char *host = evhttp_find_header(in, "Host");
    return !origin || (host && strncasecmp(origin, "http://", 7) == 0 &&
                       strcasecmp(origin + 7, host) == 0);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    web *w = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path) {
        evhttp_send_error(req, 400, "bad request");
        return;
    }
    /* libevent answers other methods 501 (evhttp_set_allowed_methods). */
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (!host_ok(w, req)) {
        reply_error(req, 403,
                    "the Host header must name this page on loopback "
                    "(127.0.0.1, [::1] or localhost, with its port)");
        return;
    }
    if (strncmp(path, "/api/", 5) == 0 && !origin_ok(req)) {
        reply_error(req, 403,
                    "asked by another page: only this page (or the address "
                    "typed in) starts runs");
        return;
    }
    if (strncmp(path, "/api/", 5) == 0) {
        /* A run is not a thing to HEAD: only the page's files are. */
        if (cmd == EVHTTP_REQ_HEAD) {
            evhttp_send_error(req, 405, "method not allowed");
            return;
        }
        struct evkeyvalq q;
        TAILQ_INIT(&q);
        const char *qs = evhttp_uri_get_query(uri);
        /* A NUL byte would end a decoded value early ("5%009": 5). */
        if (qs && strcasestr(qs, "%00")) {
            reply_error(req, 400, "a parameter holds a NUL byte (%00)");
            return;
        }
        if (qs && evhttp_parse_query_str(qs, &q) < 0) {
            reply_error(req, 400, "bad query string");
            return;
        }
        const char *twice = repeated(&q);
        if (twice) {
            char why[120];
            snprintf(why, sizeof why, "%.60s given twice", twice);
            reply_error(req, 400, why);
            evhttp_clear_headers(&q);
            return;
        }
        if (strcmp(path, "/api/run") == 0)
            api_run(w, req, &q);
        else if (strcmp(path, "/api/sweep") == 0)
            api_sweep(w, req, &q);
        else if (strcmp(path, "/api/defaults") == 0)
            api_defaults(w, req);
        else
            reply_error(req, 404, "no such API route");
        evhttp_clear_headers(&q);
        return;
    }
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    for (size_t i = 0; i < fg__lab_nassets; i++) {
        const fg__lab_asset *a = &fg__lab_assets[i];
        if (strcmp(path, a->path) != 0)
            continue;
        struct evbuffer *b = evbuffer_new();
        if (!b) {
            evhttp_send_error(req, 500, "out of memory");
            return;
        }
        /* The files live in the binary for as long as it runs. */
        evbuffer_add_reference(b, a->data, a->len, NULL, NULL);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", a->type);
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
        return;
    }
    evhttp_send_error(req, 404, "not found");
}

/* 'given' (in 'unit') on the page's slider of 'name': within lo..hi, on
 * its steps. Says so when it moves. */
static int page_value(const char *name, double given, int lo, int hi, int step,
                      const char *unit)
{
    double c = given < lo ? lo : given > hi ? hi : given;
    int v = lo + (int)((c - lo) / step + 0.5) * step;
    if (v > hi)
        v -= step;
    if (v != given)
        fprintf(stderr,
                "floodgate lab: the page's %s slider takes %d%s to %d%s in "
                "steps of %d: it starts at %d%s, not %g%s\n",
                name, lo, unit, hi, unit, step, v, unit, given, unit);
    return v;
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    web *w = arg;
    if (fg__lab_stop)
        event_base_loopbreak(w->base);
}

int fg__lab_web(fg__lab *lab, const char *listen, const fg__lab_params *p)
{
    char host[128], pt[8];
    if (fg__listen_split(listen, host, sizeof host, pt, sizeof pt) != 0) {
        fprintf(stderr, "floodgate lab: --listen wants HOST:PORT, got '%s'\n",
                listen);
        return -1;
    }
    int port = atoi(pt);
    web w;
    memset(&w, 0, sizeof w);
    w.lab = lab;
    w.defaults = *p;
    fg__lab_params *d = &w.defaults;
    d->servers = page_value("servers", d->servers, 1, PAGE_SERVERS_MAX, 1, "");
    d->burst =
        page_value("burst", d->burst, PAGE_BURST_MIN, PAGE_BURST_MAX, 1, "");
    d->rtt_us = (int64_t)page_value("rtt", (double)d->rtt_us / 1000, 0,
                                    PAGE_RTT_MAX_MS, 1, " ms") *
                1000;
    d->sync_ms = page_value("sync", d->sync_ms, PAGE_SYNC_MIN_MS,
                            PAGE_SYNC_MAX_MS, PAGE_SYNC_STEP, " ms");
    int rc = -1;
    struct evhttp *http = NULL;
    struct event *check = NULL;
    w.base = event_base_new();
    if (w.base)
        http = evhttp_new(w.base);
    if (!http) {
        fprintf(stderr, "floodgate lab: out of memory\n");
        goto done;
    }
    errno = 0;
    struct evhttp_bound_socket *bs =
        evhttp_bind_socket_with_handle(http, host, (unsigned short)port);
    if (!bs) {
        fprintf(stderr, "floodgate lab: cannot listen on %s: %s\n", listen,
                errno ? strerror(errno) : "refused");
        goto done;
    }
    evhttp_set_gencb(http, on_request, &w);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_max_body_size(http, MAX_BODY);
    evhttp_set_max_headers_size(http, MAX_HEADERS);
    check = event_new(w.base, -1, EV_PERSIST, on_check, &w);
    struct timeval every = {0, 100000};
    if (!check || event_add(check, &every) < 0) {
        fprintf(stderr, "floodgate lab: out of memory\n");
        goto done;
    }
    /* Print the port really bound (--listen 127.0.0.1:0 picks a free one). */
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss,
                    &sslen) == 0) {
        if (ss.ss_family == AF_INET)
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    w.port = port;
    /* An IPv6 address goes in brackets in a URL. */
    int v6 = strchr(host, ':') != NULL;
    printf("floodgate lab: open http://%s%s%s:%d/  (Ctrl-C stops it and "
           "everything it started)\n",
           v6 ? "[" : "", host, v6 ? "]" : "", port);
    fflush(stdout);
    event_base_dispatch(w.base);
    rc = 0;
done:
    if (check)
        event_free(check);
    if (http)
        evhttp_free(http);
    if (w.base)
        event_base_free(w.base);
    return rc;
}
