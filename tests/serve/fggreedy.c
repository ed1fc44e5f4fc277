/* fggreedy -- a client that pipelines requests and does not read the
 * answers, for the backpressure test of floodgate serve
 * (tests/integration/serve_backpressure.sh).
 *
 *   fggreedy -p PORT [-m METHOD] [-u TARGET] [-b BATCH] [-s SEND_MS]
 *            [-w WAIT_MS] [-r RCVBUF] [-S SNDBUF] [-o]
 *
 * One connection to 127.0.0.1:PORT with a small receive buffer (SO_RCVBUF
 * set before connect, so the window offered is small from the start; 4 KB
 * by default) and a bounded send buffer (64 KB by default: what the kernel
 * takes of the requests once the server stops reading, so that reading
 * the answers later takes a moment, not minutes).
 * For SEND_MS it sends the request "METHOD TARGET HTTP/1.1", BATCH per
 * send(), and reads nothing; then it waits WAIT_MS, still reading nothing,
 * and watches whether the server closes the connection; then it reads
 * every answer owed (finishing a request the last send() cut), each a
 * status line, headers and a body of its Content-Length. With -o every
 * answer must carry a JSON "remaining" one less than the one before (a
 * limit's answers in the order asked). Prints one line:
 *
 *   sent=N answered=N ok=N inorder=1 closed_ms=-1 error=none
 *
 * ok counts 200 answers; closed_ms is when (from the start) the server
 * closed a connection it had not answered in full, -1 if it did not.
 * Exit status 0 when every request sent was answered with 200 (and in
 * order, with -o), 1 otherwise, 2 on a usage error. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <fcntl.h>

#define READ_MS 20000 /* the longest the reading phase may take */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(void)
{
    fprintf(stderr, "usage: fggreedy -p PORT [-m METHOD] [-u TARGET] "
                    "[-b BATCH] [-s SEND_MS] [-w WAIT_MS] [-r RCVBUF] "
                    "[-S SNDBUF] [-o]\n");
    exit(2);
}

/* The answers read so far, parsed as they complete. */
typedef struct answers {
    char *buf;
    size_t len, cap;
    uint64_t n, ok;
    int inorder, ordered;
    long long last_remaining;
    int bad; /* an answer that does not parse */
} answers;

/* Parse the complete answers at the start of 'a->buf'; keep the rest. */
static void parse_answers(answers *a)
{
    size_t off = 0;
    for (;;) {
        char *s = a->buf + off;
        size_t left = a->len - off;
        char *end = memmem(s, left, "\r\n\r\n", 4);
        if (!end)
            break;
        size_t head = (size_t)(end - s) + 4;
        if (left < 12 || memcmp(s, "HTTP/1.1 ", 9) != 0) {
            a->bad = 1;
            break;
        }
        int status = atoi(s + 9);
        long long cl = -1;
        for (char *l = memchr(s, '\n', head); l && l < end;
             l = memchr(l + 1, '\n', (size_t)(end - l))) {
            if (!strncasecmp(l + 1, "Content-Length:", 15))
                cl = atoll(l + 16);
        }
        if (cl < 0) {
            a->bad = 1;
            break;
        }
        if (left < head + (size_t)cl)
            break;
        a->n++;
        a->ok += status == 200;
        if (a->ordered) {
            /* The body is JSON of at most a few hundred bytes. */
            char body[1024];
            size_t bl =
                (size_t)cl < sizeof(body) - 1 ? (size_t)cl : sizeof(body) - 1;
            memcpy(body, s + head, bl);
            body[bl] = '\0';
            char *r = strstr(body, "\"remaining\":");
            long long rem = r ? atoll(r + 12) : -1;
            if (!r || (a->n > 1 && rem != a->last_remaining - 1))
                a->inorder = 0;
            a->last_remaining = rem;
        }
        off += head + (size_t)cl;
    }
    memmove(a->buf, a->buf + off, a->len - off);
    a->len -= off;
}

int main(int argc, char **argv)
{
    int port = 0, batch = 1000, ordered = 0, rcvbuf = 4096, sndbuf = 65536;
    long send_ms = 3000, wait_ms = 0;
    const char *method = "GET", *target = "/healthz";
    int opt;
    while ((opt = getopt(argc, argv, "p:m:u:b:s:w:r:S:o")) != -1) {
        switch (opt) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'm':
            method = optarg;
            break;
        case 'u':
            target = optarg;
            break;
        case 'b':
            batch = atoi(optarg);
            break;
        case 's':
            send_ms = atol(optarg);
            break;
        case 'w':
            wait_ms = atol(optarg);
            break;
        case 'r':
            rcvbuf = atoi(optarg);
            break;
        case 'S':
            sndbuf = atoi(optarg);
            break;
        case 'o':
            ordered = 1;
            break;
        default:
            usage();
        }
    }
    if (port <= 0 || port > 65535 || batch < 1 || send_ms < 0 || wait_ms < 0)
        usage();

    char req[1024];
    int reqlen = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\n\r\n",
                          method, target);
    if (reqlen <= 0 || (size_t)reqlen >= sizeof(req))
        usage();
    size_t blen = (size_t)reqlen * (size_t)batch;
    char *out = malloc(blen);
    answers a = {.cap = 1 << 20, .inorder = 1, .ordered = ordered};
    a.buf = malloc(a.cap);
    if (!out || !a.buf) {
        fprintf(stderr, "fggreedy: out of memory\n");
        return 2;
    }
    for (int i = 0; i < batch; i++)
        memcpy(out + (size_t)i * (size_t)reqlen, req, (size_t)reqlen);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) != 0) {
        perror("fggreedy: socket");
        return 2;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        perror("fggreedy: connect");
        return 2;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

    int64_t t0 = now_ms(), closed_ms = -1;
    uint64_t sent_bytes = 0;
    const char *error = "none";

    /* Sending, reading nothing. */
    while (now_ms() - t0 < send_ms) {
        size_t off = (size_t)(sent_bytes % blen);
        ssize_t n = send(fd, out + off, blen - off, MSG_NOSIGNAL);
        if (n > 0) {
            sent_bytes += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
            errno != EINTR) {
            closed_ms = now_ms() - t0;
            error = errno == ECONNRESET ? "reset" : "send";
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int left = (int)(send_ms - (now_ms() - t0));
        if (left > 0 && poll(&p, 1, left) > 0 &&
            (p.revents & (POLLERR | POLLHUP))) {
            closed_ms = now_ms() - t0;
            error = "closed";
            break;
        }
    }
    /* Waiting, still reading nothing: does the server give up on us? */
    while (closed_ms < 0 && now_ms() - t0 < send_ms + wait_ms) {
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};
        int left = (int)(send_ms + wait_ms - (now_ms() - t0));
        if (poll(&p, 1, left > 0 ? left : 0) > 0 &&
            (p.revents & (POLLERR | POLLHUP | POLLRDHUP))) {
            closed_ms = now_ms() - t0;
            error = "closed";
        }
    }
    /* Reading every answer owed, and the rest of a request cut short. */
    uint64_t owed = (sent_bytes + (uint64_t)reqlen - 1) / (uint64_t)reqlen;
    uint64_t want_bytes = owed * (uint64_t)reqlen;
    int64_t r0 = now_ms();
    while (closed_ms < 0 && a.n < owed && !a.bad) {
        if (now_ms() - r0 > READ_MS) {
            error = "read_timeout";
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (sent_bytes < want_bytes)
            p.events |= POLLOUT;
        if (poll(&p, 1, 1000) <= 0)
            continue;
        if (p.revents & POLLOUT) {
            size_t off = (size_t)(sent_bytes % blen);
            size_t n = (size_t)(want_bytes - sent_bytes);
            ssize_t w = send(fd, out + off, n, MSG_NOSIGNAL);
            if (w > 0)
                sent_bytes += (uint64_t)w;
        }
        if (!(p.revents & (POLLIN | POLLERR | POLLHUP)))
            continue;
        if (a.len == a.cap) {
            char *nb = realloc(a.buf, a.cap * 2);
            if (!nb) {
                error = "out_of_memory";
                break;
            }
            a.buf = nb;
            a.cap *= 2;
        }
        ssize_t n = recv(fd, a.buf + a.len, a.cap - a.len, 0);
        if (n > 0) {
            a.len += (size_t)n;
            parse_answers(&a);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            closed_ms = now_ms() - t0;
            error = n == 0 ? "eof" : errno == ECONNRESET ? "reset" : "recv";
        }
    }
    if (a.bad)
        error = "bad_answer";
    printf("sent=%llu answered=%llu ok=%llu inorder=%d closed_ms=%lld "
           "error=%s\n",
           (unsigned long long)owed, (unsigned long long)a.n,
           (unsigned long long)a.ok, a.inorder, (long long)closed_ms, error);
    close(fd);
    free(out);
    free(a.buf);
    return a.n == owed && a.ok == owed && a.inorder && closed_ms < 0 ? 0 : 1;
}
