/* test_dns.c -- looking up names on a loop (dns.c), on loopback only: a
 * numeric address (either family) and a name of /etc/hosts are answered at
 * once; the address preference of getaddrinfo()'s answers (the first IPv4
 * one, else the first IPv6 one); a resolver freed while a lookup it gave up
 * is still being finished by evdns is freed once the loop has finished it
 * (no use after free under ASan); a resolv.conf that is missing or names no
 * nameserver still gives a resolver; and with a nameserver that never
 * answers listed first, every lookup is answered by the next one within
 * FG__DNS_TIMEOUT_MS (a nameserver of libevent's evdns server on a
 * loopback port). The resolv.conf files are written here, nameservers on
 * 127.0.0.1 ports: nothing is asked of this machine's own. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>

#include "../harness.h"
#include "dns.h"
#include "floodgate.h"

static int answers;

/* A UDP socket on a free loopback port; its port in '*port'. */
static int udp_socket(int *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len))
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* A resolv.conf of these lines in a temp file; its path in 'path'. */
static void write_conf(char path[64], const char *text)
{
    snprintf(path, 64, "/tmp/fg-test-dns-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static void on_answer(int rc, const char *addr, const char *why, void *data)
{
    (void)rc;
    (void)addr;
    (void)why;
    (void)data;
    answers++;
}

static void test_at_once(void)
{
    struct event_base *evb = event_base_new();
    fg__dns *d = fg__dns_new(evb);
    fg__dns_q *q = (fg__dns_q *)1;
    char addr[INET6_ADDRSTRLEN] = "", why[200] = "";
    CHECK(d != NULL);
    CHECK_EQ(fg__dns_lookup(d, "127.0.0.1", NULL, on_answer, NULL, &q, addr,
                            why, sizeof why),
             FG_OK);
    CHECK_STR(addr, "127.0.0.1");
    CHECK(q == NULL);
    CHECK_EQ(fg__dns_lookup(d, "::1", NULL, on_answer, NULL, &q, addr, why,
                            sizeof why),
             FG_OK);
    CHECK_STR(addr, "::1");
    /* evdns reads /etc/hosts (where localhost is, or it adds it). */
    addr[0] = '\0';
    CHECK_EQ(fg__dns_lookup(d, "localhost", NULL, on_answer, NULL, &q, addr,
                            why, sizeof why),
             FG_OK);
    CHECK(!strcmp(addr, "127.0.0.1") || !strcmp(addr, "::1"));
    CHECK_EQ(answers, 0); /* answered by the return value, not 'cb' */
    fg__dns_free(d);
    event_base_free(evb);
}

static void test_pick(void)
{
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    struct sockaddr_in v4a = {.sin_family = AF_INET}, v4b = v4a;
    inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr);
    inet_pton(AF_INET, "10.0.0.1", &v4a.sin_addr);
    inet_pton(AF_INET, "10.0.0.2", &v4b.sin_addr);
    struct addrinfo c = {.ai_family = AF_INET, .ai_addr = (void *)&v4b};
    struct addrinfo b = {
        .ai_family = AF_INET, .ai_addr = (void *)&v4a, .ai_next = &c};
    struct addrinfo a = {
        .ai_family = AF_INET6, .ai_addr = (void *)&v6, .ai_next = &b};
    char addr[INET6_ADDRSTRLEN];
    CHECK(fg__dns_pick(&a, addr));
    CHECK_STR(addr, "10.0.0.1");
    b.ai_next = NULL;
    b.ai_family = AF_UNIX; /* neither: skipped */
    CHECK(fg__dns_pick(&a, addr));
    CHECK_STR(addr, "2001:db8::1");
    CHECK(!fg__dns_pick(&b, addr));
    CHECK(!fg__dns_pick(NULL, addr));
}

/* A name under .invalid, asked of a nameserver that never answers:
 * cancelled at once and the resolver freed; the loop then finishes the
 * lookup and frees the resolver, calling no one. */
static void test_free_while_cancelled(void)
{
    struct event_base *evb = event_base_new();
    int port, dead = udp_socket(&port);
    char conf[64], text[80];
    snprintf(text, sizeof text, "nameserver 127.0.0.1:%d\n", port);
    write_conf(conf, text);
    fg__dns *d = fg__dns_new_conf(evb, conf);
    fg__dns_q *q = NULL;
    char addr[INET6_ADDRSTRLEN], why[200];
    int rc = fg__dns_lookup(d, "fg-test.invalid", NULL, on_answer, NULL, &q,
                            addr, why, sizeof why);
    CHECK(rc == 1 || rc == FG_EBACKEND);
    if (rc == 1) {
        fg__dns_cancel(q);
        fg__dns_free(d);
        event_base_loop(evb, EVLOOP_NONBLOCK);
        event_base_loop(evb, EVLOOP_NONBLOCK);
    } else {
        fg__dns_free(d);
    }
    CHECK_EQ(answers, 0);
    event_base_free(evb);
    close(dead);
    unlink(conf);
}

static void test_no_nameserver(void)
{
    static const char *const texts[] = {"", "# none\n", "search example\n"};
    char addr[INET6_ADDRSTRLEN], why[200];
    fg__dns_q *q;
    struct event_base *evb = event_base_new();
    fg__dns *d = fg__dns_new_conf(evb, "/nonexistent/resolv.conf");
    CHECK(d != NULL);
    if (d)
        CHECK_EQ(fg__dns_lookup(d, "127.0.0.1", NULL, on_answer, NULL, &q, addr,
                                why, sizeof why),
                 FG_OK);
    fg__dns_free(d);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char conf[64];
        write_conf(conf, texts[i]);
        d = fg__dns_new_conf(evb, conf);
        CHECK(d != NULL);
        fg__dns_free(d);
        unlink(conf);
    }
    event_base_free(evb);
}

/* The nameserver of the test: A of any name is 127.0.0.1; AAAA none. */
static void serve_question(struct evdns_server_request *req, void *data)
{
    (void)data;
    for (int i = 0; i < req->nquestions; i++)
        if (req->questions[i]->type == EVDNS_TYPE_A) {
            uint32_t a = htonl(INADDR_LOOPBACK);
            evdns_server_request_add_a_reply(req, req->questions[i]->name, 1,
                                             &a, 10);
        }
    evdns_server_request_respond(req, 0);
}

static int dead_first_ok, dead_first_done;

static void on_dead_first(int rc, const char *addr, const char *why, void *data)
{
    (void)why;
    (void)data;
    dead_first_done++;
    dead_first_ok += rc == FG_OK && !strcmp(addr, "127.0.0.1");
}

static void test_dead_nameserver_first(void)
{
    struct event_base *evb = event_base_new();
    int dport, lport, dead = udp_socket(&dport), live = udp_socket(&lport);
    CHECK(dead >= 0 && live >= 0);
    evutil_make_socket_nonblocking(live);
    struct evdns_server_port *sp =
        evdns_add_server_port_with_base(evb, live, 0, serve_question, NULL);
    char conf[64], text[120];
    snprintf(text, sizeof text,
             "nameserver 127.0.0.1:%d\nnameserver 127.0.0.1:%d\n", dport,
             lport);
    write_conf(conf, text);
    fg__dns *d = fg__dns_new_conf(evb, conf);
    char addr[INET6_ADDRSTRLEN], why[200];
    fg__dns_q *q[8];
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d.fg-test", i);
        CHECK_EQ(fg__dns_lookup(d, name, NULL, on_dead_first, NULL, &q[i], addr,
                                why, sizeof why),
                 1);
    }
    /* Real time: each lookup is answered, or given up, within 1 s. */
    struct timeval tv = {2, 0};
    event_base_loopexit(evb, &tv);
    while (dead_first_done < 8 && !event_base_got_exit(evb))
        event_base_loop(evb, EVLOOP_ONCE);
    CHECK_EQ(dead_first_done, 8);
    CHECK_EQ(dead_first_ok, 8);
    fg__dns_free(d);
    evdns_close_server_port(sp);
    event_base_loop(evb, EVLOOP_NONBLOCK);
    event_base_free(evb);
    close(dead);
    close(live);
    unlink(conf);
}

/* A name of two addresses, 10.0.0.1 then 10.0.0.2 (the nameserver's
 * order): the first, unless the one to keep is among them. */
static void serve_two(struct evdns_server_request *req, void *data)
{
    (void)data;
    for (int i = 0; i < req->nquestions; i++)
        if (req->questions[i]->type == EVDNS_TYPE_A) {
            uint32_t a[2] = {htonl(0x0a000001), htonl(0x0a000002)};
            evdns_server_request_add_a_reply(req, req->questions[i]->name, 2, a,
                                             10);
        }
    evdns_server_request_respond(req, 0);
}

static char kept_addr[INET6_ADDRSTRLEN];
static int kept_done;

static void on_kept(int rc, const char *addr, const char *why, void *data)
{
    (void)why;
    (void)data;
    kept_done++;
    snprintf(kept_addr, sizeof kept_addr, "%s", rc == FG_OK ? addr : "-");
}

static void test_keep(void)
{
    static const char *const keep[] = {NULL, "10.0.0.2", "10.0.0.9"};
    static const char *const want[] = {"10.0.0.1", "10.0.0.2", "10.0.0.1"};
    struct event_base *evb = event_base_new();
    int port, sock = udp_socket(&port);
    evutil_make_socket_nonblocking(sock);
    struct evdns_server_port *sp =
        evdns_add_server_port_with_base(evb, sock, 0, serve_two, NULL);
    char conf[64], text[80];
    snprintf(text, sizeof text, "nameserver 127.0.0.1:%d\n", port);
    write_conf(conf, text);
    fg__dns *d = fg__dns_new_conf(evb, conf);
    for (int i = 0; i < 3; i++) {
        char addr[INET6_ADDRSTRLEN], why[200];
        fg__dns_q *q;
        kept_done = 0;
        CHECK_EQ(fg__dns_lookup(d, "two.fg-test", keep[i], on_kept, NULL, &q,
                                addr, why, sizeof why),
                 1);
        struct timeval tv = {2, 0};
        event_base_loopexit(evb, &tv);
        while (!kept_done && !event_base_got_exit(evb))
            event_base_loop(evb, EVLOOP_ONCE);
        CHECK_STR(kept_addr, want[i]);
    }
    fg__dns_free(d);
    evdns_close_server_port(sp);
    event_base_loop(evb, EVLOOP_NONBLOCK);
    event_base_free(evb);
    close(sock);
    unlink(conf);
}

int main(void)
{
    test_at_once();
    test_pick();
    test_free_while_cancelled();
    test_no_nameserver();
    test_dead_nameserver_first();
    test_keep();
    return TEST_DONE();
}
