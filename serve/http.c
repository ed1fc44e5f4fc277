/* http.c -- connections, requests and answers of one worker (see http.h).
 *
 * Life of a connection: accepted with its buffers; each readable event is
 * one recv() appended to the input buffer, then http-parser runs over what
 * is new. Spans of the head (target, header names and values) are kept as
 * offsets, since the buffer may still grow while the head arrives; when
 * the message completes the parser pauses, the spans become NUL-terminated
 * strings in place, and the handler gets the request. Body bytes are
 * counted and dropped: no route reads a body. When the answer is given the
 * request's bytes are discarded and parsing resumes on what follows.
 *
 * Answers go to the output buffer and leave with one send(): at the end of
 * the readable event (so pipelined answers share one), or at once for an
 * answer given later (a store reply). Only when the socket is full does a
 * connection wait for writability.
 *
 * Backpressure: before each request is parsed, the unsent output is
 * checked against OUT_HELD. Past it the connection is held: nothing more is
 * parsed and the socket is not read, so a client that pipelines without
 * reading fills its own socket buffers, not our memory. The hold ends when
 * the output has all been sent. Since one request at a time is in hand,
 * this one check also covers answers that come later from the store.
 *
 * A connection closed by us after an answer while the client may still be
 * sending (an error such as 413 or 431, or requests pipelined after the
 * last answer) is not closed at once: Linux resets a socket closed with
 * unread input, and the reset can destroy the answer before the client
 * reads it. It is shut for writing (the client reads the answer and an end
 * of file) and its input read and dropped until the client closes, for at
 * most LINGER_MS or LINGER_BYTES. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <http_parser.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "headers.h"
#include "http.h"
#include "log.h"

#define IN_START     4096
#define OUT_START    1024
#define HDRS_MAX     4096
#define ACCEPT_BATCH 64
/* Unsent bytes past which a connection's next request waits (see http.h). */
#define OUT_HELD      (64 * 1024)
#define LINGER_MS     1000
#define LINGER_BYTES  (256 * 1024)
#define HEAD_TOO_LONG "request head larger than max_header_bytes"
_Static_assert(FG_HTTP_MAX_HEADERS == 64, "the 431 reason says 64");

/* The reason a 400 gives for what http-parser refused: its own words when
 * they name the fault, else what it means here. */
static const char *parse_error(enum http_errno e)
{
    switch (e) {
    case HPE_INVALID_CONSTANT:
        return "malformed request line (a space or control byte in the "
               "target?) or HTTP version";
    case HPE_INVALID_CONTENT_LENGTH:
        return "invalid Content-Length, or a chunk size too large";
    case HPE_INVALID_CHUNK_SIZE:
        return "invalid chunk size";
    default:
        return http_errno_description(e);
    }
}

struct fg__hconn {
    fg__http *h;
    fg__hconn *prev, *next;
    int fd;
    struct event *rev, *wev;
    http_parser p;
    char *in;
    size_t inlen, incap, parsed;
    /* The request being read: spans of the head as offsets into 'in'. */
    size_t url_off, url_len;
    unsigned nh;
    int in_value; /* the last span was a header value */
    size_t hn_off[FG_HTTP_MAX_HEADERS], hn_len[FG_HTTP_MAX_HEADERS];
    size_t hv_off[FG_HTTP_MAX_HEADERS], hv_len[FG_HTTP_MAX_HEADERS];
    int head_done;   /* the head is complete */
    size_t body_off; /* where body bytes start, 0 before the first */
    uint64_t body;
    uint64_t req_bytes; /* read of it, a chunked body's framing included */
    int err_status;
    const char *err;
    int complete;  /* a whole message is parsed, not yet handed over */
    int keepalive; /* of the request in hand */
    int http10;
    /* State. */
    int pending;     /* a request is with the handler */
    int in_process;  /* process() is on the stack: it resumes parsing */
    int eof;         /* the client sent everything it will send */
    int dead;        /* socket gone while a request was in hand */
    int close_after; /* close once the output is written */
    int read_off;    /* reading stopped: input full while a request waits */
    int writing;     /* waiting for writability */
    int answered;
    int begun;         /* a byte of the next request came (more than CRLFs) */
    int held;          /* parsing and reading stopped: output over OUT_HELD */
    int drain_input;   /* on close, read the client's input out first */
    int lingering;     /* shut for writing: input read and dropped */
    size_t lingered;   /* bytes dropped so far */
    uint64_t stall_us; /* when 'writing' began */
    uint64_t deadline_us; /* 0: stopped */
    uint64_t spared_us;   /* the deadline a sweep let pass once (unread) */
    uint64_t idle_us;     /* accepted, or its last answer handed over */
    char *out;
    size_t outlen, outcap, outoff;
    size_t hdrslen;
    char hdrs[HDRS_MAX];
    char peer[INET6_ADDRSTRLEN];
    fg__hreq req;
};

struct fg__http {
    struct event_base *base;
    int lfd;
    struct event *lev, *resume_ev;
    fg__http_handler handler;
    void *arg;
    uint32_t max_header_bytes, timeout_ms;
    int closing;
    fg__hconn *conns, *oldest; /* newest first */
    uint64_t nconns;
    /* Sockets open (of this server, or of all that share its cap) and
     * the cap: accepting pauses there. */
    atomic_uint_fast32_t own_open, *open;
    uint32_t max_open;
    const char *cap_why; /* for the log, at the cap */
    time_t date_t;
    char date[40];
    uint64_t next_log_us;
    /* Idle connections closed at the cap since the last line saying so. */
    uint64_t idle_closed, next_idle_log_us;
};

static http_parser_settings settings;

const char *fg__http_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* ---- connections ---- */

static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void process_and_flush(fg__hconn *c);

static uint64_t timeout_us(const fg__http *h)
{
    return (uint64_t)h->timeout_ms * 1000;
}

static void reset_request(fg__hconn *c)
{
    c->begun = 0;
    c->url_off = c->url_len = 0;
    c->nh = 0;
    c->in_value = 0;
    c->head_done = 0;
    c->body_off = 0;
    c->body = 0;
    c->req_bytes = 0;
    c->err_status = 0;
    c->err = NULL;
    c->complete = 0;
    c->hdrslen = 0;
}

/* Close the socket. The connection itself goes too, unless a request is
 * in hand: then it stays until the handler answers (into nothing), and
 * keeps its place under the cap meanwhile, so that clients who send a
 * request and go cannot pile up more memory than the cap allows while the
 * store is slow. The events go before the socket: the loop's changelist
 * (EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) then holds only a removal for
 * this number, harmless when another worker's socket takes the number
 * before this loop's next turn applies it. */
static void conn_close(fg__hconn *c)
{
    if (c->fd >= 0) {
        event_free(c->rev);
        event_free(c->wev);
        c->rev = c->wev = NULL;
        close(c->fd);
        c->fd = -1;
    }
    if (c->pending || c->in_process) {
        c->dead = 1;
        return;
    }
    fg__http *h = c->h;
    atomic_fetch_sub(h->open, 1);
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        h->oldest = c->prev;
    h->nconns--;
    free(c->in);
    free(c->out);
    free(c);
}

/* A connection on 'fd', whose slot in the cap the caller has taken (given
 * back here if the connection cannot be made). */
static void conn_new(fg__http *h, int fd, const struct sockaddr_storage *ss)
{
    fg__hconn *c = calloc(1, sizeof(*c));
    if (c) {
        c->in = malloc(IN_START);
        c->out = malloc(OUT_START);
        c->rev = event_new(h->base, fd, EV_READ | EV_PERSIST, on_read, c);
        c->wev = event_new(h->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    }
    if (!c || !c->in || !c->out || !c->rev || !c->wev ||
        event_add(c->rev, NULL) != 0) {
        if (c) {
            free(c->in);
            free(c->out);
            if (c->rev)
                event_free(c->rev);
            if (c->wev)
                event_free(c->wev);
            free(c);
        }
        close(fd);
        atomic_fetch_sub(h->open, 1);
        return;
    }
    c->h = h;
    c->fd = fd;
    c->incap = IN_START;
    c->outcap = OUT_START;
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    c->idle_us = fg_mono_us();
    c->deadline_us = c->idle_us + timeout_us(h);
    /* An IPv4 peer of a dual-stack socket (::ffff:a.b.c.d) is written as
     * IPv4, as the keys and logs name it. */
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, c->peer,
                  sizeof(c->peer));
    else if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(a6))
        inet_ntop(AF_INET, a6->s6_addr + 12, c->peer, sizeof(c->peer));
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, a6, c->peer, sizeof(c->peer));
    c->req.conn = c;
    c->req.peer = c->peer;
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    else
        h->oldest = c;
    h->conns = c;
    h->nconns++;
}

/* At the cap, a connection waiting to be accepted takes the place of the
 * oldest idle one of this worker, as nginx reuses its keep-alive
 * connections: otherwise clients who open connections and let them idle
 * would keep every other client out until request_timeout. Idle: for a
 * second or more nothing of a request came (since it was accepted, or
 * since its last answer was handed over: one just accepted may not have
 * been read yet), nothing waits to be written, and nothing waits to be
 * read (a request that came in the same loop turn: closing would reset
 * it). 1 when one was closed. The scan from the oldest passes over
 * connections busy now, at most as many as requests in progress, and
 * recent ones. */
#define IDLE_MIN_US 1000000ull

/* 1 when bytes wait in 'c''s socket that the loop has not read yet (or an
 * error its read will meet). */
static int unread_waiting(const fg__hconn *c)
{
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r > 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static int close_idle(fg__http *h)
{
    uint64_t now = fg_mono_us();
    for (fg__hconn *c = h->oldest; c; c = c->prev) {
        if (c->fd < 0 || c->pending || c->in_process || c->begun ||
            c->writing || c->held || c->lingering || c->close_after ||
            c->outoff != c->outlen || !c->deadline_us ||
            now - c->idle_us < IDLE_MIN_US)
            continue;
        if (unread_waiting(c))
            continue; /* bytes to read (or an error the read will meet) */
        conn_close(c);
        h->idle_closed++;
        if (now >= h->next_idle_log_us) {
            h->next_idle_log_us = now + 1000000;
            fg__log("idle_closed", "reason=\"%s\" connections=%llu",
                    h->cap_why ? h->cap_why : "connection cap reached",
                    (unsigned long long)h->idle_closed);
            h->idle_closed = 0;
        }
        return 1;
    }
    return 0;
}

/* ---- the listener ---- */

/* The cap of connections is reached, or accept() failed for want of
 * descriptors or memory. Stop accepting for a moment rather than spin on
 * the listening socket; pending connections wait in the kernel's
 * backlog. */
static void accept_pause(fg__http *h, const char *why)
{
    event_del(h->lev);
    struct timeval tv = {0, 50000};
    event_add(h->resume_ev, &tv);
    uint64_t now = fg_mono_us();
    if (now >= h->next_log_us) {
        h->next_log_us = now + 1000000;
        fg__log("accept_paused", "reason=\"%s\"", why);
    }
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fg__http *h = arg;
    if (h->lfd >= 0)
        event_add(h->lev, NULL);
}

/* 1 when a client waits to be accepted: on the first turn the listener
 * was readable (each worker has a socket of its own); after an accept the
 * queue's length says (a listening socket's tcpi_unacked). */
static int client_waiting(const fg__http *h, int turn)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    return turn == 0 ||
           (getsockopt(h->lfd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
            ti.tcpi_unacked > 0);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    fg__http *h = arg;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        /* A slot is taken before accept(), so that workers sharing the
         * cap never pass it together; given back if nothing comes. */
        if (atomic_fetch_add(h->open, 1) >= h->max_open) {
            atomic_fetch_sub(h->open, 1);
            if (client_waiting(h, i) && close_idle(h)) {
                if (atomic_fetch_add(h->open, 1) < h->max_open)
                    goto accept;
                atomic_fetch_sub(h->open, 1); /* another worker's now */
            }
            accept_pause(h, h->cap_why ? h->cap_why : "connection cap reached");
            return;
        }
    accept:;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            atomic_fetch_sub(h->open, 1);
            if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
                err == ENOMEM)
                accept_pause(h, strerror(err));
            return; /* EAGAIN, or a connection that went away */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn_new(h, fd, &ss);
    }
}

void fg__http_adopt(fg__http *h, int fd, const struct sockaddr_storage *peer)
{
    atomic_fetch_add(h->open, 1);
    conn_new(h, fd, peer);
}

fg__http *fg__http_new(struct event_base *base, int fd, fg__http_handler hd,
                       void *arg)
{
    /* Heads are bounded here, by max_header_bytes; the parser's own bound
     * (80 KB) must not come first. A global of the parser: setting it again
     * is harmless. */
    http_parser_set_max_header_size(UINT32_MAX);
    fg__http *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->base = base;
    h->lfd = fd;
    h->handler = hd;
    h->arg = arg;
    h->max_header_bytes = 8192;
    h->timeout_ms = 10000;
    h->open = &h->own_open;
    h->max_open = UINT32_MAX;
    h->lev = event_new(base, fd, EV_READ | EV_PERSIST, on_accept, h);
    h->resume_ev = evtimer_new(base, on_resume, h);
    if (!h->lev || !h->resume_ev || event_add(h->lev, NULL) != 0) {
        if (h->lev)
            event_free(h->lev);
        if (h->resume_ev)
            event_free(h->resume_ev);
        free(h);
        return NULL;
    }
    return h;
}

void fg__http_close_listener(fg__http *h)
{
    if (h->lfd < 0)
        return;
    event_del(h->resume_ev);
    event_free(h->lev);
    h->lev = NULL;
    close(h->lfd);
    h->lfd = -1;
}

void fg__http_free(fg__http *h)
{
    if (!h)
        return;
    fg__http_close_listener(h);
    while (h->conns) {
        fg__hconn *c = h->conns;
        c->pending = c->in_process = 0;
        conn_close(c);
    }
    event_free(h->resume_ev);
    free(h);
}

void fg__http_set_limits(fg__http *h, uint32_t max_header_bytes,
                         uint32_t request_timeout_ms)
{
    h->max_header_bytes = max_header_bytes;
    h->timeout_ms = request_timeout_ms;
}

void fg__http_set_cap(fg__http *h, atomic_uint_fast32_t *open, uint32_t max,
                      const char *why)
{
    h->open = open ? open : &h->own_open;
    h->max_open = max;
    h->cap_why = why;
}

void fg__http_set_closing(fg__http *h, int closing)
{
    h->closing = closing;
}

int fg__http_listen_fd(const fg__http *h)
{
    return h->lfd;
}

uint64_t fg__http_connections(const fg__http *h)
{
    return h->nconns;
}

/* Connections a drain waits for: a request not answered yet, its answer
 * not all sent, or a kept-alive connection's next request begun (part of
 * it came; the sweep still ends one that stalls). */
unsigned fg__http_unanswered(const fg__http *h)
{
    unsigned n = 0;
    for (const fg__hconn *c = h->conns; c; c = c->next)
        n += !c->dead &&
             (!c->answered || c->pending || c->outoff < c->outlen ||
              (c->begun && c->fd >= 0 && !c->lingering && !c->close_after));
    return n;
}

unsigned fg__http_sweep(fg__http *h)
{
    uint64_t now = fg_mono_us();
    unsigned closed = 0;
    fg__hconn *c = h->conns;
    while (c) {
        fg__hconn *next = c->next;
        if (c->fd < 0 || !c->deadline_us || now < c->deadline_us) {
            c = next;
            continue;
        }
        /* Bytes that wait for this loop to read them, on a connection it
         * reads: the loop may have been late (the process stopped, the
         * host froze), not the client. The read comes next, and the next
         * sweep judges: once a deadline (a client that floods blank lines
         * faster than they are read is closed at the next). */
        if (c->spared_us != c->deadline_us && !c->writing && !c->held &&
            !c->lingering && !c->read_off && unread_waiting(c)) {
            c->spared_us = c->deadline_us;
        } else {
            /* Slow: part of a request came and the rest is overdue. An
             * idle connection (nothing sent yet, or nothing after its last
             * answer but blank lines), a client that does not read its
             * answers, or one lingering after its last, is only closed. */
            closed += c->begun && !c->writing && !c->held && !c->lingering;
            conn_close(c);
        }
        c = next;
    }
    return closed;
}

/* ---- writing ---- */

static int out_reserve(fg__hconn *c, size_t more)
{
    if (c->outlen + more <= c->outcap)
        return 0;
    if (c->outoff) {
        memmove(c->out, c->out + c->outoff, c->outlen - c->outoff);
        c->outlen -= c->outoff;
        c->outoff = 0;
        if (c->outlen + more <= c->outcap)
            return 0;
    }
    size_t cap = c->outcap;
    while (cap < c->outlen + more)
        cap *= 2;
    char *p = realloc(c->out, cap);
    if (!p)
        return -1;
    c->out = p;
    c->outcap = cap;
    return 0;
}

static void out_put(fg__hconn *c, const char *s, size_t n)
{
    memcpy(c->out + c->outlen, s, n);
    c->outlen += n;
}

static void stop_reading(fg__hconn *c)
{
    if (!c->read_off && c->fd >= 0) {
        event_del(c->rev);
        c->read_off = 1;
    }
}

static void resume_reading(fg__hconn *c)
{
    if (c->read_off && !c->eof && c->fd >= 0) {
        c->read_off = 0;
        event_add(c->rev, NULL);
    }
}

/* The answers are written and the connection is to close. A client that
 * may still be sending gets an end of file instead of a reset: see the
 * top of this file. */
static void close_after_answers(fg__hconn *c)
{
    if (c->eof || (!c->drain_input && c->inlen == 0) ||
        shutdown(c->fd, SHUT_WR) != 0) {
        conn_close(c);
        return;
    }
    c->lingering = 1;
    c->lingered = 0;
    c->inlen = c->parsed = 0;
    c->deadline_us = fg_mono_us() + LINGER_MS * 1000ull;
    resume_reading(c);
}

/* Write what is buffered. Returns -1 when no more is to be done with the
 * connection: it is gone, or it lingers before its close. */
static int flush(fg__hconn *c)
{
    if (c->fd < 0)
        return 0;
    while (c->outoff < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->outoff += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->writing) {
                /* The client's answers must all leave within
                 * request_timeout from now: the request clock goes on
                 * while they wait (see http.h). */
                c->writing = 1;
                event_add(c->wev, NULL);
                c->stall_us = fg_mono_us();
                if (!c->pending)
                    c->deadline_us = c->stall_us + timeout_us(c->h);
            }
            return 0;
        }
        /* Kept (marked dead) while a request is in flight, else freed:
         * known before, since a freed 'c' cannot be asked. */
        int kept = c->pending || c->in_process;
        conn_close(c);
        return kept ? 0 : -1;
    }
    c->outoff = c->outlen = 0;
    if (c->writing) {
        c->writing = 0;
        event_del(c->wev);
        /* Idle from now, once its answers have all left. */
        uint64_t now = fg_mono_us();
        if (!c->pending)
            c->idle_us = now;
        c->deadline_us = c->pending ? 0 : now + timeout_us(c->h);
    }
    if (c->close_after && !c->pending) {
        close_after_answers(c);
        return -1;
    }
    return 0;
}

/* The output held for has all been sent: parse and read on. */
static void unhold(fg__hconn *c)
{
    c->held = 0;
    resume_reading(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fg__hconn *c = arg;
    if (flush(c) != 0 || c->writing || c->fd < 0)
        return;
    if (c->held)
        unhold(c);
    if (!c->pending)
        process_and_flush(c); /* requests that came or waited meanwhile */
}

static void put_date(fg__http *h, fg__hconn *c)
{
    time_t t = time(NULL);
    if (t != h->date_t) {
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(h->date, sizeof(h->date),
                 "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        h->date_t = t;
    }
    out_put(c, h->date, strlen(h->date));
}

void fg__http_add_header(fg__hreq *r, const char *name, const char *value)
{
    fg__hconn *c = r->conn;
    size_t nl = strlen(name), vl = strlen(value);
    if (c->hdrslen + nl + vl + 4 > sizeof(c->hdrs))
        return; /* not reached: the routes' headers are bounded */
    memcpy(c->hdrs + c->hdrslen, name, nl);
    c->hdrslen += nl;
    c->hdrs[c->hdrslen++] = ':';
    c->hdrs[c->hdrslen++] = ' ';
    memcpy(c->hdrs + c->hdrslen, value, vl);
    c->hdrslen += vl;
    c->hdrs[c->hdrslen++] = '\r';
    c->hdrs[c->hdrslen++] = '\n';
}

/* The request in hand is answered: drop its bytes and go on with what
 * follows. */
static void request_done(fg__hconn *c)
{
    c->pending = 0;
    c->answered = 1;
    memmove(c->in, c->in + c->parsed, c->inlen - c->parsed);
    c->inlen -= c->parsed;
    c->parsed = 0;
    reset_request(c);
    /* After an error the parser stays failed (the connection closes):
     * only a paused one resumes. */
    if (HTTP_PARSER_ERRNO(&c->p) == HPE_PAUSED)
        http_parser_pause(&c->p, 0);
    /* The next request's clock starts now, or went on since the output
     * stalled, if it did. */
    c->idle_us = fg_mono_us();
    c->deadline_us = (c->writing ? c->stall_us : c->idle_us) + timeout_us(c->h);
    resume_reading(c);
}

void fg__http_close_after(fg__hreq *r)
{
    r->conn->close_after = 1;
}

void fg__http_reply(fg__hreq *r, int status, const char *ctype,
                    const char *body, size_t len)
{
    fg__hconn *c = r->conn;
    fg__http *h = c->h;
    if (c->dead) {
        c->pending = 0;
        conn_close(c);
        return;
    }
    int head = r->method == FG_HTTP_M_HEAD;
    if (!c->keepalive || h->closing)
        c->close_after = 1;
    if (c->err_status) /* the rest of its request may still be coming */
        c->close_after = c->drain_input = 1;
    const char *reason = fg__http_reason(status);
    size_t need = 64 + strlen(reason) + strlen(ctype) + c->hdrslen + 40 + 24 +
                  (head ? 0 : len);
    if (out_reserve(c, need) != 0) {
        c->close_after = 1; /* out of memory: the client sees the close */
    } else {
        char *p = c->out + c->outlen;
        memcpy(p, "HTTP/1.1 ", 9);
        p += 9;
        p += fg__u64_digits(p, (uint64_t)status);
        *p++ = ' ';
        size_t rl = strlen(reason);
        memcpy(p, reason, rl);
        p += rl;
        memcpy(p, "\r\nContent-Type: ", 16);
        p += 16;
        size_t cl = strlen(ctype);
        memcpy(p, ctype, cl);
        p += cl;
        memcpy(p, "\r\nContent-Length: ", 18);
        p += 18;
        p += fg__u64_digits(p, len);
        *p++ = '\r';
        *p++ = '\n';
        c->outlen = (size_t)(p - c->out);
        put_date(h, c);
        out_put(c, c->hdrs, c->hdrslen);
        if (c->close_after)
            out_put(c, "Connection: close\r\n", 19);
        else if (c->http10)
            out_put(c, "Connection: keep-alive\r\n", 24);
        out_put(c, "\r\n", 2);
        if (!head)
            out_put(c, body, len);
    }
    request_done(c);
    if (c->in_process)
        return; /* process() goes on with the next request, then sends */
    process_and_flush(c);
}

/* ---- reading ---- */

static fg__hconn *conn_of(http_parser *p)
{
    return p->data;
}

/* The parser left its start state: bytes of a request came (the blank
 * lines it skips between requests do not count). */
static int on_message_begin(http_parser *p)
{
    conn_of(p)->begun = 1;
    return 0;
}

/* The head is refused (431) once it runs past max_header_bytes: 'end'
 * bytes of it read, from the request line's first. */
static int head_too_long(fg__hconn *c, size_t end)
{
    if (end <= c->h->max_header_bytes)
        return 0;
    c->err_status = 431;
    c->err = HEAD_TOO_LONG;
    return 1;
}

static int span(fg__hconn *c, size_t *off, size_t *len, const char *at,
                size_t n)
{
    if (*len == 0)
        *off = (size_t)(at - c->in);
    *len += n;
    return head_too_long(c, *off + *len);
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    fg__hconn *c = conn_of(p);
    return span(c, &c->url_off, &c->url_len, at, n);
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    fg__hconn *c = conn_of(p);
    /* The trailer of a chunked body: no route reads one, and its bytes are
     * dropped with the body's, so nothing of it is kept. */
    if (c->head_done)
        return 0;
    if (c->in_value || c->nh == 0) {
        if (c->nh == FG_HTTP_MAX_HEADERS) {
            c->err_status = 431;
            c->err = "too many header fields (at most 64)";
            return 1;
        }
        c->nh++;
        c->hn_len[c->nh - 1] = c->hv_len[c->nh - 1] = 0;
        c->in_value = 0;
    }
    return span(c, &c->hn_off[c->nh - 1], &c->hn_len[c->nh - 1], at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    fg__hconn *c = conn_of(p);
    if (c->nh == 0 || c->head_done)
        return 0;
    /* A value continued on a line that begins with a space or a tab
     * (obsolete line folding): refused, as RFC 9112 5.2 allows, rather
     * than spliced (the parser hands the continuation over apart). An
     * empty value is handed over at the start of the next line, empty. */
    const char *b = at;
    while (n && b > c->in && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    if (n && b > c->in && b[-1] == '\n') {
        c->err_status = 400;
        c->err = "a header folded over two lines (obsolete line folding)";
        return 1;
    }
    c->in_value = 1;
    return span(c, &c->hv_off[c->nh - 1], &c->hv_len[c->nh - 1], at, n);
}

static int span_is(const fg__hconn *c, size_t off, size_t len, const char *s)
{
    size_t n = strlen(s);
    while (len && (c->in[off + len - 1] == ' ' || c->in[off + len - 1] == '\t'))
        len--;
    return len == n && !strncasecmp(c->in + off, s, n);
}

static int on_headers_complete(http_parser *p)
{
    fg__hconn *c = conn_of(p);
    c->head_done = 1;
    /* Where the head ends: after the target and the version, or the last
     * header's value (its name and colon, when the value is empty), come
     * two line breaks, each CRLF or LF. */
    size_t end = c->url_off + c->url_len;
    while (end < c->inlen && c->in[end] != '\r' && c->in[end] != '\n')
        end++;
    if (c->nh) {
        unsigned last = c->nh - 1;
        end = c->hv_len[last] ? c->hv_off[last] + c->hv_len[last]
                              : c->hn_off[last] + c->hn_len[last] + 1;
    }
    for (int lf = 0; end < c->inlen && lf < 2; end++) {
        char ch = c->in[end];
        if (ch == '\n')
            lf++;
        else if (ch != '\r' && ch != ' ' && ch != '\t')
            break;
    }
    if (head_too_long(c, end))
        return -1;
    if (p->http_major != 1) {
        c->err_status = 505;
        c->err = "HTTP version not supported (HTTP/1 only)";
        return -1;
    }
    int has_body = p->content_length > 0 && p->content_length != ULLONG_MAX;
    if (has_body && p->content_length > FG_HTTP_MAX_BODY) {
        c->err_status = 413;
        c->err = "request body too large";
        return -1; /* an error: 1 would mean "no body" */
    }
    /* A client that waits for "100 Continue" before its body, of a given
     * length or chunked, gets it. */
    int chunked = (p->flags & F_CHUNKED) != 0;
    if ((has_body || chunked) && p->http_major == 1 && p->http_minor >= 1)
        for (unsigned i = 0; i < c->nh; i++)
            if (span_is(c, c->hn_off[i], c->hn_len[i], "Expect") &&
                span_is(c, c->hv_off[i], c->hv_len[i], "100-continue") &&
                out_reserve(c, 25) == 0) {
                out_put(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
                break; /* once, however often it is asked */
            }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    fg__hconn *c = conn_of(p);
    if (!c->body_off)
        c->body_off = (size_t)(at - c->in);
    c->body += n;
    if (c->body > FG_HTTP_MAX_BODY) {
        c->err_status = 413;
        c->err = "request body too large";
        return 1;
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    fg__hconn *c = conn_of(p);
    c->complete = 1;
    c->keepalive = http_should_keep_alive(p) && !p->upgrade;
    c->http10 = p->http_major == 1 && p->http_minor == 0;
    http_parser_pause(p, 1);
    return 0;
}

static http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* NUL-terminate 'len' bytes at 'off', trailing blanks trimmed. An empty
 * span (a header's empty value) is "": its offset is where the next line
 * starts, and a terminator there would cut that line's name. */
static const char *cstr(fg__hconn *c, size_t off, size_t len)
{
    if (len == 0)
        return "";
    char *s = c->in + off;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    s[len] = '\0';
    return s;
}

/* Hand the complete request over. */
static void dispatch(fg__hconn *c)
{
    fg__hreq *r = &c->req;
    c->pending = 1;
    c->deadline_us = 0;
    r->error_status = 0;
    r->error = NULL;
    r->path = r->query = NULL;
    r->nheaders = 0;
    switch (c->p.method) {
    case HTTP_GET:
        r->method = FG_HTTP_M_GET;
        break;
    case HTTP_HEAD:
        r->method = FG_HTTP_M_HEAD;
        break;
    case HTTP_POST:
        r->method = FG_HTTP_M_POST;
        break;
    default:
        r->method = FG_HTTP_M_OTHER;
    }
    /* The bytes right after every span (the space after the target, the
     * colon after a name, the CR after a value) are part of this request
     * and already parsed: they become the terminators. */
    struct http_parser_url u;
    http_parser_url_init(&u);
    const char *url = c->in + c->url_off;
    if (c->url_len == 0 || http_parser_parse_url(url, c->url_len, 0, &u) != 0 ||
        !(u.field_set & (1 << UF_PATH))) {
        r->error_status = 400;
        r->error = "bad request target";
    } else {
        size_t qoff = 0, qlen = 0;
        int hasq = (u.field_set & (1 << UF_QUERY)) != 0;
        if (hasq) {
            qoff = c->url_off + u.field_data[UF_QUERY].off;
            qlen = u.field_data[UF_QUERY].len;
        }
        r->path = cstr(c, c->url_off + u.field_data[UF_PATH].off,
                       u.field_data[UF_PATH].len);
        if (hasq) {
            c->in[qoff + qlen] = '\0';
            r->query = c->in + qoff;
        }
    }
    for (unsigned i = 0; i < c->nh; i++) {
        /* RFC 9112 5.1: no blank between a name and its colon. Read as the
         * name without it, a proxy in front and this server could take
         * different headers for the key. */
        if (memchr(c->in + c->hn_off[i], ' ', c->hn_len[i]) ||
            memchr(c->in + c->hn_off[i], '\t', c->hn_len[i])) {
            r->error_status = 400;
            r->error = "blank in a header name (or before its colon)";
        }
        r->name[i] = cstr(c, c->hn_off[i], c->hn_len[i]);
        const char *v = cstr(c, c->hv_off[i], c->hv_len[i]);
        while (*v == ' ' || *v == '\t')
            v++;
        r->value[i] = v;
    }
    r->nheaders = c->nh;
    /* A request refused as malformed closes its connection after the
     * answer, as one that could not be read does: what follows it (a body
     * this server saw no length for, say) is not read as a request. */
    if (r->error_status)
        c->err_status = r->error_status;
    c->h->handler(r, c->h->arg);
}

/* The request could not be read: the handler answers with the reason,
 * then the connection closes. */
static void dispatch_error(fg__hconn *c, int status, const char *why)
{
    fg__hreq *r = &c->req;
    c->pending = 1;
    c->err_status = status;
    c->deadline_us = 0;
    /* The parser guesses HEAD from a first 'H': only a method followed by
     * its target is one (an answer to HEAD has no body). */
    r->method = c->p.method == HTTP_HEAD && c->url_len ? FG_HTTP_M_HEAD
                                                       : FG_HTTP_M_OTHER;
    r->error_status = status;
    r->error = why;
    r->path = r->query = NULL;
    r->nheaders = 0;
    c->parsed = c->inlen; /* nothing after it is read */
    c->h->handler(r, c->h->arg);
}

/* Where the bytes dispatch() needs of a parsed head end: its last span
 * and the byte after it, the terminator. */
static size_t head_kept(const fg__hconn *c)
{
    if (c->nh == 0)
        return c->url_off + c->url_len + 1;
    unsigned last = c->nh - 1;
    return c->hv_len[last] ? c->hv_off[last] + c->hv_len[last] + 1
                           : c->hn_off[last] + c->hn_len[last] + 1;
}

/* Parse what is buffered and hand over complete requests, one at a time,
 * while each is answered at once. The caller sets in_process (an answer
 * given meanwhile then leaves the parsing to this loop) and flushes. */
static void process(fg__hconn *c)
{
    while (!c->pending && !c->close_after && !c->dead) {
        /* Empty lines before a request are ignored (RFC 9112, 2.2): not
         * counted in its head. */
        if (c->parsed == 0) {
            size_t k = 0;
            while (k < c->inlen && (c->in[k] == '\r' || c->in[k] == '\n'))
                k++;
            if (k) {
                memmove(c->in, c->in + k, c->inlen - k);
                c->inlen -= k;
            }
        }
        if (c->parsed == c->inlen) {
            if (c->eof)
                c->close_after = 1; /* all answered: flush() closes */
            break;
        }
        if (c->outlen - c->outoff > OUT_HELD) {
            /* Backpressure: the next request waits until the client has
             * read its answers. */
            c->held = 1;
            stop_reading(c);
            break;
        }
        size_t n = http_parser_execute(&c->p, &settings, c->in + c->parsed,
                                       c->inlen - c->parsed);
        c->parsed += n;
        /* A chunked body's sizes, extensions and trailer are dropped as
         * they come, like its data, but bounded all the same: at most as
         * much again as the largest body. */
        c->req_bytes += n;
        if (c->req_bytes >
                (uint64_t)c->h->max_header_bytes + 2 * FG_HTTP_MAX_BODY &&
            !c->err_status) {
            c->complete = 0;
            dispatch_error(c, 413,
                           "request too large (a chunked body's framing "
                           "beyond 64 KB)");
            break;
        }
        if (c->complete) {
            c->complete = 0;
            dispatch(c);
            continue;
        }
        if (c->err_status) {
            dispatch_error(c, c->err_status, c->err);
            break;
        }
        enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
        if (e != HPE_OK) {
            dispatch_error(c, 400, parse_error(e));
            break;
        }
        /* All that is buffered is parsed; the message is not complete. */
        if (c->body_off) {
            c->inlen = c->parsed = c->body_off; /* a body is not kept */
        } else if (c->head_done) {
            /* Nor a chunked body's framing before its data (sizes,
             * extensions, trailers): only the head and its terminators. */
            c->inlen = c->parsed = head_kept(c);
        } else if (c->parsed > c->h->max_header_bytes) {
            dispatch_error(c, 431, HEAD_TOO_LONG);
            break;
        }
        if (c->eof) {
            /* The client will send no more: no answer is owed for half a
             * request. */
            c->close_after = 1;
        }
        break;
    }
}

/* Run process() and send what it answered; again while a hold ends
 * because all of it could be sent at once. */
static void process_and_flush(fg__hconn *c)
{
    for (;;) {
        c->in_process = 1;
        process(c);
        c->in_process = 0;
        if (c->dead) {
            conn_close(c);
            return;
        }
        if (flush(c) != 0 || !c->held || c->writing)
            return;
        unhold(c);
    }
}

/* A lingering connection's input, dropped until the client's end of file,
 * an error, or LINGER_BYTES. */
static void linger_read(fg__hconn *c)
{
    ssize_t n = recv(c->fd, c->in, c->incap, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n > 0 && (c->lingered += (size_t)n) <= LINGER_BYTES)
        return;
    conn_close(c);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    fg__hconn *c = arg;
    if (c->lingering) {
        linger_read(c);
        return;
    }
    if (c->inlen == c->incap) {
        /* Full. While a request is in hand its head must not move, and
         * after an error nothing more is read: wait. Otherwise the head
         * still arriving grows the buffer, up to max_header_bytes (past
         * it, process() has answered 431). */
        size_t cap = c->incap * 2, most = (size_t)c->h->max_header_bytes + 1024;
        if (cap > most)
            cap = most;
        char *p = !c->pending && !c->close_after && cap > c->incap
                      ? realloc(c->in, cap)
                      : NULL;
        if (!p) {
            stop_reading(c);
            return;
        }
        c->in = p;
        c->incap = cap;
    }
    ssize_t n = recv(fd, c->in + c->inlen, c->incap - c->inlen, 0);
    if (n == 0) {
        c->eof = 1;
        stop_reading(c);
    } else if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        conn_close(c); /* with a request in hand: closed at its answer */
        return;
    } else {
        c->inlen += (size_t)n;
    }
    if (c->pending || c->held)
        return; /* kept for after the answer, or the hold */
    process_and_flush(c);
}

const char *fg__http_find(const fg__hreq *r, const char *name)
{
    for (unsigned i = 0; i < r->nheaders; i++)
        if (!strcasecmp(r->name[i], name))
            return r->value[i];
    return NULL;
}
