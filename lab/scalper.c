/* scalper.c -- one user's burst, fired through the load balancer.
 *
 * Request i leaves at i * spread / (burst - 1), each on its own connection,
 * without waiting for earlier answers: the scalper's script does not wait
 * either. The answer's X-Served-By names the server that decided. */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "lab.h"

typedef struct shot shot;

typedef struct volley {
    struct event_base *base;
    int port;
    const char *user;
    fg__lab_answer *out;
    shot *shots;
    int burst;
    int pending; /* sent and not answered, or not sent yet */
    int64_t t0_us;
    int64_t last_us;
    int64_t give_up_us; /* from t0: the last send, then 10 s for answers */
} volley;

struct shot {
    volley *v;
    int i;
    struct event *timer;
    struct evhttp_connection *conn;
};

/* "api-3" -> 2; anything else -> -1. */
static int server_index(const char *id)
{
    if (!id || strncmp(id, "api-", 4) != 0)
        return -1;
    char *end;
    long n = strtol(id + 4, &end, 10);
    if (*end != '\0' || n < 1 || n > FG__LAB_MAX_SERVERS)
        return -1;
    return (int)n - 1;
}

/* Whether the JSON answer says the failure policy decided ("source" local,
 * fail_open or fail_closed): the store did not answer in time. */
static int by_fallback(struct evhttp_request *req)
{
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(b);
    const char *body = (const char *)evbuffer_pullup(b, -1);
    static const char *const fb[] = {"\"source\":\"local\"",
                                     "\"source\":\"fail_open\"",
                                     "\"source\":\"fail_closed\""};
    for (int k = 0; body && k < 3; k++)
        if (memmem(body, n, fb[k], strlen(fb[k])))
            return 1;
    return 0;
}

static void on_answer(struct evhttp_request *req, void *arg)
{
    shot *s = arg;
    volley *v = s->v;
    fg__lab_answer *a = &v->out[s->i];
    a->at_us = fg__lab_now_us() - v->t0_us;
    if (req) {
        a->status = evhttp_request_get_response_code(req);
        a->server = server_index(evhttp_find_header(
            evhttp_request_get_input_headers(req), "X-Served-By"));
        a->fallback = by_fallback(req);
    }
    v->last_us = fg__lab_now_us();
    if (--v->pending == 0)
        event_base_loopbreak(v->base);
}

static void on_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    shot *s = arg;
    volley *v = s->v;
    s->conn = evhttp_connection_base_new(v->base, NULL, "127.0.0.1",
                                         (unsigned short)v->port);
    struct evhttp_request *req =
        s->conn ? evhttp_request_new(on_answer, s) : NULL;
    if (!req) {
        if (--v->pending == 0)
            event_base_loopbreak(v->base);
        return;
    }
    evhttp_connection_set_timeout(s->conn, 10);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", "lab");
    evhttp_add_header(h, "X-User-Id", v->user);
    evhttp_add_header(h, "Content-Length", "0");
    /* On failure libevent has freed 'req' and calls no callback. */
    if (evhttp_make_request(s->conn, req, EVHTTP_REQ_POST, "/bookings") < 0) {
        if (--v->pending == 0)
            event_base_loopbreak(v->base);
    }
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    volley *v = arg;
    if (fg__lab_stop || fg__lab_now_us() - v->t0_us > v->give_up_us)
        event_base_loopbreak(v->base);
}

int fg__lab_fire(int port, const char *user, int burst, int64_t spread_us,
                 fg__lab_answer *out, int64_t *elapsed_us, char *err,
                 size_t errlen)
{
    int rc = -1;
    volley v;
    memset(&v, 0, sizeof v);
    v.port = port;
    v.user = user;
    v.out = out;
    v.burst = burst;
    for (int i = 0; i < burst; i++)
        out[i] = (fg__lab_answer){0, -1, 0, 0};
    struct event *check = NULL;
    struct event_config *cfg = event_config_new();
    if (cfg) {
        /* Half a millisecond between shots needs timers finer than epoll's
         * millisecond timeout. */
        event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
        v.base = event_base_new_with_config(cfg);
        event_config_free(cfg);
    }
    v.shots = calloc((size_t)burst, sizeof *v.shots);
    if (!v.base || !v.shots) {
        snprintf(err, errlen, "scalper: out of memory");
        goto done;
    }
    v.t0_us = fg__lab_now_us();
    v.give_up_us = spread_us + 10000000;
    for (int i = 0; i < burst; i++) {
        shot *s = &v.shots[i];
        s->v = &v;
        s->i = i;
        s->timer = evtimer_new(v.base, on_fire, s);
        if (!s->timer) {
            snprintf(err, errlen, "scalper: out of memory");
            goto done;
        }
        int64_t at = burst > 1 ? spread_us * i / (burst - 1) : 0;
        struct timeval tv = {(time_t)(at / 1000000),
                             (suseconds_t)(at % 1000000)};
        evtimer_add(s->timer, &tv);
    }
    v.pending = burst;
    check = event_new(v.base, -1, EV_PERSIST, on_check, &v);
    struct timeval every = {0, 20000};
    if (!check || event_add(check, &every) < 0) {
        snprintf(err, errlen, "scalper: out of memory");
        goto done;
    }
    event_base_dispatch(v.base);
    if (fg__lab_stop) {
        snprintf(err, errlen, "interrupted");
        goto done;
    }
    *elapsed_us = (v.last_us ? v.last_us : fg__lab_now_us()) - v.t0_us;
    rc = 0;
done:
    if (check)
        event_free(check);
    if (v.shots) {
        for (int i = 0; i < burst; i++) {
            if (v.shots[i].timer)
                event_free(v.shots[i].timer);
            /* Frees a request still in flight without calling back. */
            if (v.shots[i].conn)
                evhttp_connection_free(v.shots[i].conn);
        }
        free(v.shots);
    }
    if (v.base)
        event_base_free(v.base);
    return rc;
}

typedef struct probe {
    struct event_base *base;
    int status;
    char *body;
    size_t len;
} probe;

static void on_probe(struct evhttp_request *req, void *arg)
{
    probe *pr = arg;
    if (req) {
        pr->status = evhttp_request_get_response_code(req);
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        ev_ssize_t n = evbuffer_copyout(in, pr->body, pr->len - 1);
        pr->body[n > 0 ? n : 0] = '\0';
    }
    event_base_loopbreak(pr->base);
}

int fg__lab_post(int port, const char *path, char *body, size_t len)
{
    probe pr = {NULL, 0, body, len};
    body[0] = '\0';
    struct evhttp_connection *conn = NULL;
    pr.base = event_base_new();
    if (pr.base)
        conn = evhttp_connection_base_new(pr.base, NULL, "127.0.0.1",
                                          (unsigned short)port);
    struct evhttp_request *req =
        conn ? evhttp_request_new(on_probe, &pr) : NULL;
    if (req) {
        evhttp_connection_set_timeout(conn, 2);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Host", "lab");
        evhttp_add_header(h, "Content-Length", "0");
        if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, path) == 0)
            event_base_dispatch(pr.base);
    }
    if (conn)
        evhttp_connection_free(conn);
    if (pr.base)
        event_base_free(pr.base);
    return pr.status;
}
