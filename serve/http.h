/* http.h -- the HTTP/1.1 server of one worker: connections on the worker's
 * libevent loop, requests parsed by http-parser (Debian's libhttp-parser).
 *
 * Built for the request path of a rate limiter: a connection owns one input
 * and one output buffer for its whole life, so a request costs no
 * allocation, one recv() and one send(). The head of a request is parsed
 * in place: the request's path, query and headers point into the input
 * buffer and stay valid until the request is answered. One request per
 * connection is in hand at a time; pipelined requests wait, unparsed, in
 * the buffer, and their answers leave in order.
 *
 * Backpressure bounds what a connection holds: once more than 64 KB of its
 * answers are unsent (its client does not read them), its next request is
 * not parsed and its socket not read until all of them have been sent. So
 * a connection's unsent output is at most 64 KB plus one answer, on every
 * route and store (an answer the store gives later is the one request in
 * hand), and its input buffer never grows past max_header_bytes + 1 KB
 * (4 KB at least); what the client sends meanwhile waits in the kernel's
 * socket buffers, and the client's own send() blocks.
 *
 * A connection must deliver each whole request within the request timeout
 * of being accepted or of its previous answer (a client that drips bytes
 * does not hold it); the clock stops while a request is answered. Answers
 * that wait for the client to read them (its socket full) must all leave
 * within the request timeout of the moment they began to wait: a client
 * that stops reading, held or not, is closed then. Only a connection
 * closed while part of a request had come counts as slow
 * (fg__http_sweep()); an idle one, or one whose answers are not read, is
 * closed without counting.
 *
 * An answer that closes the connection while the client may still be
 * sending (400, 413, 431, 505, or requests pipelined after a
 * "Connection: close") is followed by shutdown(SHUT_WR), then the input is
 * read and dropped until the client closes, for at most 256 KB and 1 s
 * (checked by fg__http_sweep(), so up to one sweep more): closing a
 * socket with unread input makes Linux send a reset, which can destroy
 * the answer before the client reads it. */
#ifndef FG_SERVE_HTTP_H
#define FG_SERVE_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

#define FG_HTTP_MAX_HEADERS 64
#define FG_HTTP_MAX_BODY    65536

enum { FG_HTTP_M_GET, FG_HTTP_M_HEAD, FG_HTTP_M_POST, FG_HTTP_M_OTHER };

typedef struct fg__http fg__http;
typedef struct fg__hconn fg__hconn;

typedef struct fg__hreq {
    fg__hconn *conn;
    int method;
    /* Nonzero: the request could not be read (400, 413, 431); 'error' says
     * why. The handler answers it, and the connection closes after. */
    int error_status;
    const char *error;
    const char *path;  /* as sent, not %-decoded */
    const char *query; /* NULL when the target has none */
    unsigned nheaders;
    const char *name[FG_HTTP_MAX_HEADERS], *value[FG_HTTP_MAX_HEADERS];
    const char *peer; /* the client's numeric address */
} fg__hreq;

typedef void (*fg__http_handler)(fg__hreq *req, void *arg);

/* Serve the listening socket 'fd' (non-blocking; owned from now on) on
 * 'base'. NULL when out of memory. */
fg__http *fg__http_new(struct event_base *base, int fd, fg__http_handler h,
                       void *arg);
/* Serve 'fd', a connected non-blocking socket accepted by other means,
 * as a connection from 'peer' (AF_INET or AF_INET6; any other family
 * leaves the client's address unknown), exactly as if the listening
 * socket had accepted it. The fuzz target hands over one end of a
 * socketpair this way: no port, no TIME_WAIT. On failure 'fd' is
 * closed. */
struct sockaddr_storage;
void fg__http_adopt(fg__http *h, int fd, const struct sockaddr_storage *peer);

/* Close every connection and the listening socket. Requests in hand must
 * have been answered. */
void fg__http_free(fg__http *h);

/* Limits read by the next request (a reload changes them). */
void fg__http_set_limits(fg__http *h, uint32_t max_header_bytes,
                         uint32_t request_timeout_ms);
/* At most 'max' sockets open at once, counted in '*open', which the
 * servers that share the cap share (NULL: this server's own count); at
 * the cap, accepting pauses and new connections wait in the kernel's
 * backlog, and the accept_paused log line gives 'why' as its reason. Set
 * before the first connection. */
void fg__http_set_cap(fg__http *h, atomic_uint_fast32_t *open, uint32_t max,
                      const char *why);
/* Every answer from now on says "Connection: close" (draining). */
void fg__http_set_closing(fg__http *h, int closing);

/* The listening socket, -1 once closed. */
int fg__http_listen_fd(const fg__http *h);
void fg__http_close_listener(fg__http *h);

/* Connections open; those not answered yet (accepted, a request in hand or
 * an answer still being written: a drain waits for them). */
uint64_t fg__http_connections(const fg__http *h);
unsigned fg__http_unanswered(const fg__http *h);
/* Close connections past their deadline (a request overdue, answers not
 * read, a lingering close over); returns how many were slow: part of a
 * request had come. */
unsigned fg__http_sweep(fg__http *h);

/* The first header 'name' (case-insensitive), or NULL. */
const char *fg__http_find(const fg__hreq *r, const char *name);

/* Add a header to the answer of 'r' (before fg__http_reply). */
void fg__http_add_header(fg__hreq *r, const char *name, const char *value);

/* The connection of 'r' closes once its answer is written (the answer
 * says "Connection: close"); requests pipelined after it are not read. */
void fg__http_close_after(fg__hreq *r);

/* Answer 'r'; 'r' and every pointer it holds are invalid afterwards. */
void fg__http_reply(fg__hreq *r, int status, const char *ctype,
                    const char *body, size_t len);

const char *fg__http_reason(int status);

#endif
