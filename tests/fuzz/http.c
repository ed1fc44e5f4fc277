/* http.c -- fuzz target: bytes from a client, through `floodgate serve`'s
 * HTTP layer (serve/http.c) and routes (serve/routes.c) on a memory store.
 *
 * One server for the process, built as serve/worker.c builds a worker: a
 * configuration loaded by fg__gen_load from an INI text (a memfd, read
 * through /proc/self/fd), the worker's copy of it, its metrics, and
 * fg__http_new. Each input is one connection, a socketpair whose server
 * end fg__http_adopt hands over as if accepted from 127.0.0.1 (so the ip
 * keys and X-Forwarded-For are read; TCP on loopback would leave millions
 * of sockets in TIME_WAIT). The client sends the input, shuts its side
 * for writing and reads every answer until the server closes; the loop
 * runs without blocking meanwhile. The server must have closed the
 * connection by then, leaving nothing behind for the next input. The
 * memory store's clock is a fake one that moves a day per input: every
 * limit starts over, and a run does not depend on the time. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

static const char ini[] = "[server]\n"
                          "id = fuzz\n"
                          "demo_api = on\n"
                          "demo_limits = per_ip, bookings\n"
                          "trusted_proxies = 127.0.0.1, ::1, 10.0.0.0/8\n"
                          "max_header_bytes = 2048\n"
                          "max_key_bytes = 64\n"
                          "request_timeout = 10s\n"
                          "blocked_cache = 0\n"
                          "[store]\n"
                          "url = memory?max_keys=1000\n"
                          "[limit per_ip]\n"
                          "key = ip\n"
                          "algorithm = token_bucket\n"
                          "rate = 100/s\n"
                          "burst = 200\n"
                          "[limit bookings]\n"
                          "key = header:X-User-Id\n"
                          "algorithm = fixed_window\n"
                          "rate = 5/s\n"
                          "on_failure = closed\n"
                          "[limit api]\n"
                          "key = query:user\n"
                          "algorithm = sliding_window\n"
                          "rate = 3/min\n"
                          "[limit naive]\n"
                          "key = header:X-Key\n"
                          "algorithm = naive_get_set\n"
                          "rate = 2/s\n"
                          "[limit block]\n"
                          "key = ip/64\n"
                          "algorithm = fixed_window\n"
                          "rate = 2/s\n"
                          "shadow = on\n";

static fg__server srv;
static fg__worker worker;
static struct sockaddr_storage peer;
static uint64_t fake_now_us = 1;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now_us;
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz http: %s\n", what);
    abort();
}

static void setup(void)
{
    char err[512], path[64];
    signal(SIGPIPE, SIG_IGN);
    int mfd = memfd_create("fuzz.ini", 0);
    if (mfd < 0 || write(mfd, ini, sizeof(ini) - 1) != sizeof(ini) - 1)
        die("memfd");
    snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
    fg_memory_options opt = {.max_keys = 1000, .clock = fake_clock};
    srv.mem = fg_store_open_memory(&opt, err, sizeof(err));
    if (!srv.mem)
        die(err);
    srv.nworkers = 1;
    srv.w = &worker;
    srv.config_path = path;
    srv.gen = fg__gen_load(&srv, err, sizeof(err));
    if (!srv.gen)
        die(err);
    close(mfd);
    srv.config_path = NULL;

    /* A listening socket no one connects to, fg__http_new wants one: on
     * an abstract name of the kernel's choosing (autobind). */
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sa_family_t fam = AF_UNIX;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&fam, sizeof(fam)) ||
        listen(lfd, 1))
        die("listen");
    struct sockaddr_in *in = (struct sockaddr_in *)&peer;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in->sin_port = htons(40000);

    fg__worker *w = &worker;
    w->srv = &srv;
    w->fd = -1;
    w->wake_fd = -1;
    w->base = event_base_new();
    w->m = calloc(1, sizeof(*w->m));
    if (!w->base || !w->m)
        die("out of memory");
    w->http = fg__http_new(w->base, lfd, fg__routes_handle, w);
    if (!w->http)
        die("fg__http_new");
    const fg__serve_config *c = &srv.gen->cfg;
    fg__http_set_limits(w->http, c->max_header_bytes, c->request_timeout_ms);
    w->cur = fg__wgen_new(w, srv.gen, err, sizeof(err));
    if (!w->cur)
        die(err);
}

/* Read and drop what the server sent; 1 once it has closed. */
static int drain(int fd)
{
    char buf[65536];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        return 1; /* end of file, or a reset */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    fake_now_us += 86400ull * 1000000;
    fg__http *h = worker.http;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   sv) != 0)
        die("socketpair");
    int fd = sv[0];
    fg__http_adopt(h, sv[1], &peer);
    size_t off = 0;
    int shut = 0, closed = 0;
    /* Bounded: each turn moves bytes on loopback and runs what is ready. */
    for (int turn = 0; turn < 100000; turn++) {
        if (off < size) {
            ssize_t n =
                send(fd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                off = size; /* the server closed: the rest is not read */
        }
        if (off == size && !shut) {
            shutdown(fd, SHUT_WR); /* fails only once the server closed */
            shut = 1;
        }
        event_base_loop(worker.base, EVLOOP_NONBLOCK);
        closed = closed || drain(fd);
        if (closed && fg__http_connections(h) == 0)
            break;
    }
    if (!closed || fg__http_connections(h) != 0)
        die("the server did not close a connection whose client had "
            "sent all and shut its side");
    close(fd);
    return 0;
}
