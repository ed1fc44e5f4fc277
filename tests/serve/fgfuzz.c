/* fgfuzz -- feed `floodgate serve` mutated HTTP requests, for the tests.
 *
 *   fgfuzz [-n ITERATIONS] [-s SEED] HOST PORT
 *
 * Each iteration takes a valid request (or two, pipelined), mutates it the
 * ways a broken client or an attacker would (a byte changed, a CR, LF, NUL
 * or 0xff put in, a piece cut out or doubled, the end cut off), sends it in
 * one to three writes on a new connection, closes its sending side and
 * reads until the server closes. The server must close every such
 * connection promptly (it has the whole request and knows no more is
 * coming), and whatever it sends must be HTTP answers. Every 50 iterations
 * GET /healthz on a fresh connection must be 200. Prints one line of
 * counts; exits 1 on any failure, with the request that caused it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char *const templates[] = {
    "POST /v1/check?limit=l&key=k1 HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /v1/check?limit=l&key=k%20two&cost=2 HTTP/1.1\r\nHost: x\r\n"
    "Content-Length: 5\r\n\r\nhello",
    "GET /v1/auth?limit=u HTTP/1.1\r\nHost: x\r\nX-User-Id: ann\r\n"
    "X-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n\r\n",
    "POST /bookings HTTP/1.1\r\nHost: x\r\nX-User-Id: bob\r\n"
    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "HEAD /v1/auth?limit=u HTTP/1.0\r\nX-User-Id: cy\r\n\r\n",
    "POST /v1/check?limit=l&key=p1 HTTP/1.1\r\nHost: x\r\n\r\n"
    "POST /v1/check?limit=l&key=p2 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST http://x/v1/check?limit=l&key=abs HTTP/1.1\r\nHost: x\r\n"
    "Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
};

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static size_t mutate(char *buf, size_t len, size_t cap)
{
    static const char special[] = {'\0', '\r',   '\n', ' ', ':',
                                   '%',  '\xff', '\t', '?', '&'};
    unsigned rounds = 1 + rnd(4);
    for (unsigned r = 0; r < rounds && len > 0; r++) {
        size_t at = rnd((uint32_t)len);
        switch (rnd(6)) {
        case 0: /* one byte changed */
            buf[at] = (char)rnd(256);
            break;
        case 1: /* a special byte put in */
            if (len < cap) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = special[rnd(sizeof(special))];
                len++;
            }
            break;
        case 2: { /* a piece cut out */
            size_t n = 1 + rnd(8);
            if (at + n > len)
                n = len - at;
            memmove(buf + at, buf + at + n, len - at - n);
            len -= n;
            break;
        }
        case 3: { /* a piece doubled */
            size_t n = 1 + rnd(16);
            if (at + n > len)
                n = len - at;
            if (len + n <= cap) {
                memmove(buf + at + n, buf + at, len - at);
                len += n;
            }
            break;
        }
        case 4: /* the end cut off */
            len = at;
            break;
        default: /* a digit made huge (lengths, chunk sizes, costs) */
            if (buf[at] >= '0' && buf[at] <= '9' && len + 12 <= cap) {
                memmove(buf + at + 12, buf + at, len - at);
                memcpy(buf + at, "999999999999", 12);
                len += 12;
            }
        }
    }
    return len;
}

static int connect_to(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read until the server closes: 0, or -1 on a timeout. */
static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + *len, cap - *len, 0);
        if (n > 0) {
            *len += (size_t)n;
            if (*len == cap)
                *len = 0; /* only the start is checked */
            continue;
        }
        if (n == 0 || errno == ECONNRESET)
            return 0;
        if (errno == EINTR)
            continue;
        return -1;
    }
}

static void dump(const char *what, const char *req, size_t len)
{
    fprintf(stderr, "fgfuzz: %s; request (%zu bytes): \"", what, len);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)req[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
            fputc(ch, stderr);
        else
            fprintf(stderr, "\\x%02x", ch);
    }
    fprintf(stderr, "\"\n");
}

static int healthz(const struct sockaddr_in *sa)
{
    int fd = connect_to(sa);
    if (fd < 0)
        return -1;
    static const char req[] =
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char buf[4096];
    size_t len;
    int ok = send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) ==
                 (ssize_t)(sizeof(req) - 1) &&
             read_all(fd, buf, sizeof(buf), &len) == 0 && len >= 12 &&
             !memcmp(buf, "HTTP/1.1 200", 12);
    close(fd);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    long iterations = 2000;
    rng = 0x9e3779b97f4a7c15ull;
    int opt;
    while ((opt = getopt(argc, argv, "n:s:")) != -1) {
        if (opt == 'n')
            iterations = atol(optarg);
        else if (opt == 's')
            rng ^= strtoull(optarg, NULL, 10) * 0x2545f4914f6cdd1dull;
        else
            return 2;
    }
    if (optind + 2 != argc) {
        fprintf(stderr, "usage: fgfuzz [-n ITERATIONS] [-s SEED] HOST PORT\n");
        return 2;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port =
                                 htons((uint16_t)atoi(argv[optind + 1]))};
    if (inet_pton(AF_INET, argv[optind], &sa.sin_addr) != 1) {
        fprintf(stderr, "fgfuzz: bad address %s\n", argv[optind]);
        return 2;
    }
    long answered = 0, closed_silent = 0, refused_4xx = 0, ok_2xx = 0;
    char req[2048], resp[65536];
    for (long it = 0; it < iterations; it++) {
        const char *t = templates[rnd(sizeof(templates) / sizeof(*templates))];
        size_t len = strlen(t);
        memcpy(req, t, len);
        len = mutate(req, len, sizeof(req));
        int fd = connect_to(&sa);
        if (fd < 0) {
            fprintf(stderr, "fgfuzz: cannot connect (iteration %ld)\n", it);
            return 1;
        }
        /* One to three writes. */
        size_t cut1 = len ? rnd((uint32_t)len + 1) : 0;
        size_t cut2 = cut1 + (len - cut1 ? rnd((uint32_t)(len - cut1) + 1) : 0);
        size_t cuts[4] = {0, cut1, cut2, len};
        for (int k = 0; k < 3; k++)
            if (cuts[k + 1] > cuts[k])
                (void)send(fd, req + cuts[k], cuts[k + 1] - cuts[k],
                           MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        size_t rlen;
        if (read_all(fd, resp, sizeof(resp), &rlen) != 0) {
            dump("the server kept a finished connection open for 2 s", req,
                 len);
            return 1;
        }
        close(fd);
        if (rlen == 0) {
            closed_silent++;
        } else if (rlen < 12 || memcmp(resp, "HTTP/1.1 ", 9) != 0) {
            dump("the answer is not HTTP", req, len);
            return 1;
        } else {
            answered++;
            if (resp[9] == '2')
                ok_2xx++;
            else if (resp[9] == '4')
                refused_4xx++;
        }
        if (it % 50 == 49 && healthz(&sa) != 0) {
            dump("healthz failed after", req, len);
            return 1;
        }
    }
    if (healthz(&sa) != 0) {
        fprintf(stderr, "fgfuzz: healthz failed at the end\n");
        return 1;
    }
    printf("iterations=%ld answered=%ld 2xx=%ld 4xx=%ld closed_silent=%ld\n",
           iterations, answered, ok_2xx, refused_4xx, closed_silent);
    return 0;
}
