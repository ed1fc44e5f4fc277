/* test_dns.c -- looking up names on a loop (dns.c), with no network: a
 * numeric address (either family) and a name of /etc/hosts are answered at
 * once; the address preference of getaddrinfo()'s answers (the first IPv4
 * one, else the first IPv6 one); a resolver freed while a lookup it gave up
 * is still being finished by evdns is freed once the loop has finished it
 * (no use after free under ASan). */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "../harness.h"
#include "dns.h"
#include "floodgate.h"

static int answers;

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
    CHECK_EQ(fg__dns_lookup(d, "127.0.0.1", on_answer, NULL, &q, addr, why,
                            sizeof why),
             FG_OK);
    CHECK_STR(addr, "127.0.0.1");
    CHECK(q == NULL);
    CHECK_EQ(
        fg__dns_lookup(d, "::1", on_answer, NULL, &q, addr, why, sizeof why),
        FG_OK);
    CHECK_STR(addr, "::1");
    /* evdns reads /etc/hosts (where localhost is, or it adds it). */
    addr[0] = '\0';
    CHECK_EQ(fg__dns_lookup(d, "localhost", on_answer, NULL, &q, addr, why,
                            sizeof why),
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

/* A name under .invalid, asked of a nameserver of resolv.conf (an answer,
 * or none, does not matter): cancelled at once and the resolver freed; the
 * loop then finishes the lookup and frees the resolver, calling no one. */
static void test_free_while_cancelled(void)
{
    struct event_base *evb = event_base_new();
    fg__dns *d = fg__dns_new(evb);
    fg__dns_q *q = NULL;
    char addr[INET6_ADDRSTRLEN], why[200];
    int rc = fg__dns_lookup(d, "fg-test.invalid", on_answer, NULL, &q, addr,
                            why, sizeof why);
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
}

int main(void)
{
    test_at_once();
    test_pick();
    test_free_while_cancelled();
    return TEST_DONE();
}
