/* test_redis_url.c -- Redis store URLs: forms, defaults, bad input, and
 * that a password never reaches an error message. */
#include <stdlib.h>

#include "../harness.h"
#include "redis_url.h"
#include "store.h"

static void test_forms(void)
{
    fg__redis_url u;
    char err[256];

    CHECK_EQ(
        fg__redis_url_parse("redis://127.0.0.1:6390/3", &u, err, sizeof err),
        FG_OK);
    CHECK_STR(u.host, "127.0.0.1");
    CHECK_EQ(u.port, 6390);
    CHECK_EQ(u.db, 3);
    CHECK(u.password == NULL && u.user == NULL && u.path == NULL);
    CHECK_STR(u.prefix, "fg:");
    CHECK_EQ(u.connect_timeout_ms, 1000);
    fg__redis_url_free(&u);

    CHECK_EQ(fg__redis_url_parse("redis://localhost", &u, err, sizeof err),
             FG_OK);
    CHECK_STR(u.host, "localhost");
    CHECK_EQ(u.port, 6379);
    CHECK_EQ(u.db, 0);
    fg__redis_url_free(&u);

    CHECK_EQ(fg__redis_url_parse("redis://alice:s%40cr%2Ft@h:1/0?prefix=rl%3A"
                                 "&lazy=1&connect_timeout_ms=250",
                                 &u, err, sizeof err),
             FG_OK);
    CHECK_STR(u.user, "alice");
    CHECK_STR(u.password, "s@cr/t");
    CHECK_STR(u.host, "h");
    CHECK_EQ(u.port, 1);
    CHECK_STR(u.prefix, "rl:");
    CHECK_EQ(u.prefixlen, 3);
    CHECK_EQ(u.lazy, 1);
    CHECK_EQ(u.connect_timeout_ms, 250);
    fg__redis_url_free(&u);

    /* A raw '@' or '/' in the password: the last '@' ends it. */
    CHECK_EQ(fg__redis_url_parse("redis://:p@ss/w@h:2", &u, err, sizeof err),
             FG_OK);
    CHECK(u.user == NULL);
    CHECK_STR(u.password, "p@ss/w");
    CHECK_STR(u.host, "h");
    CHECK_EQ(u.port, 2);
    fg__redis_url_free(&u);

    CHECK_EQ(
        fg__redis_url_parse("redis://u:pa?ss=1@h:1?db=4", &u, err, sizeof err),
        FG_OK);
    CHECK_STR(u.password, "pa?ss=1");
    CHECK_EQ(u.db, 4);
    fg__redis_url_free(&u);

    /* An '@' in the query that could end a password, or be a parameter's
     * (an address, or an '@', before the '?'): refused, quoting neither. */
    static const char *const ambiguous[] = {
        "redis://127.0.0.1:5?password=SEC@def:6",
        "redis://127.0.0.1:5?password=SEC@nohost.invalid",
        "redis://[::1]:9/3?password=SEC@b:c",
        "redis://u:SEC@tPart?prefix=x@127.0.0.1:6379",
        "redis://admin:90210?prefix=x@127.0.0.1:6379",
        "redis://u:p@w?x@h:7?user=SEC@w&lazy=1",
    };
    for (size_t i = 0; i < sizeof ambiguous / sizeof *ambiguous; i++) {
        err[0] = '\0';
        CHECK_EQ(fg__redis_url_parse(ambiguous[i], &u, err, sizeof err),
                 FG_EINVAL);
        CHECK(strstr(err, "write '@' in a password or a parameter as %40"));
        CHECK(!strstr(err, "SEC") && !strstr(err, "tPart") &&
              !strstr(err, "90210") && !strstr(err, "def"));
    }
    /* Written %40, each reads one way. */
    CHECK_EQ(fg__redis_url_parse("redis://127.0.0.1:5?password=SEC%40def:6", &u,
                                 err, sizeof err),
             FG_OK);
    CHECK_STR(u.password, "SEC@def:6");
    CHECK_STR(u.host, "127.0.0.1");
    CHECK_EQ(u.port, 5);
    fg__redis_url_free(&u);
    /* An '@' before the query only: the last one ends the user info. */
    CHECK_EQ(
        fg__redis_url_parse("redis://:p@w?x@h:7?lazy=1", &u, err, sizeof err),
        FG_OK);
    CHECK_STR(u.password, "p@w?x");
    CHECK_STR(u.host, "h");
    CHECK_EQ(u.lazy, 1);
    fg__redis_url_free(&u);
    /* What comes before the '?' is no address, and no '@': the password
     * holds the '?'. */
    CHECK_EQ(
        fg__redis_url_parse("redis://u:pw?prefix=x@h:8", &u, err, sizeof err),
        FG_OK);
    CHECK_STR(u.user, "u");
    CHECK_STR(u.password, "pw?prefix=x");
    CHECK_STR(u.host, "h");
    CHECK_EQ(u.port, 8);
    fg__redis_url_free(&u);

    CHECK_EQ(fg__redis_url_parse("redis://[::1]:7000/2", &u, err, sizeof err),
             FG_OK);
    CHECK_STR(u.host, "::1");
    CHECK_EQ(u.port, 7000);
    CHECK_EQ(u.db, 2);
    char where[128];
    fg__redis_url_where(&u, where, sizeof where);
    CHECK_STR(where, "[::1]:7000 db 2");
    fg__redis_url_free(&u);

    /* A numeric address has one name however it is spelled. */
    static const char *const spell[][2] = {
        {"redis://[0:0:0:0:0:0:0:1]:7000", "::1"},
        {"redis://[::FFFF:127.0.0.1]:7000", "127.0.0.1"},
        {"redis://[2001:DB8:0::1]:7000", "2001:db8::1"},
        {"redis://127.0.0.1:7000", "127.0.0.1"},
    };
    for (size_t i = 0; i < sizeof spell / sizeof *spell; i++) {
        CHECK_EQ(fg__redis_url_parse(spell[i][0], &u, err, sizeof err), FG_OK);
        CHECK_STR(u.host, spell[i][1]);
        fg__redis_url_free(&u);
    }
    /* Two spellings of one address, the first the shorter: one name. */
    char first[64];
    CHECK_EQ(fg__redis_url_parse("redis://[::a:b]", &u, err, sizeof err),
             FG_OK);
    snprintf(first, sizeof first, "%s", u.host);
    fg__redis_url_free(&u);
    CHECK_EQ(fg__redis_url_parse("redis://[::0.10.0.11]", &u, err, sizeof err),
             FG_OK);
    CHECK_STR(u.host, first);
    fg__redis_url_free(&u);

    CHECK_EQ(fg__redis_url_parse("unix:///run/redis.sock?db=5&prefix=x", &u,
                                 err, sizeof err),
             FG_OK);
    CHECK_STR(u.path, "/run/redis.sock");
    CHECK(u.host == NULL);
    CHECK_EQ(u.db, 5);
    CHECK_STR(u.prefix, "x");
    fg__redis_url_where(&u, where, sizeof where);
    CHECK_STR(where, "/run/redis.sock db 5");
    fg__redis_url_free(&u);

    /* A unix path is percent-decoded, as the rest of a URL is: a '?' in a
     * socket's name is %3F. */
    CHECK_EQ(fg__redis_url_parse("unix:///tmp/a%3Fb%25c.sock?db=1", &u, err,
                                 sizeof err),
             FG_OK);
    CHECK_STR(u.path, "/tmp/a?b%c.sock");
    CHECK_EQ(u.db, 1);
    fg__redis_url_free(&u);

    /* The longest path the kernel takes (107 bytes), and one byte more:
     * that one is refused, not cut to another socket's path. */
    char path[160] = "unix:///";
    memset(path + 8, 's', 106);
    CHECK_EQ(fg__redis_url_parse(path, &u, err, sizeof err), FG_OK);
    CHECK_EQ(strlen(u.path), 107);
    fg__redis_url_free(&u);
    strcat(path, "s?db=1");
    CHECK_EQ(fg__redis_url_parse(path, &u, err, sizeof err), FG_EINVAL);
    CHECK(strstr(err, "108 bytes, over the system's 107") != NULL);
    fg__redis_url_free(&u);

    /* An empty prefix is allowed: keys are then the limit name alone. */
    CHECK_EQ(fg__redis_url_parse("redis://h?prefix=", &u, err, sizeof err),
             FG_OK);
    CHECK_EQ(u.prefixlen, 0);
    fg__redis_url_free(&u);
}

static void test_refusals(void)
{
    static const char *bad[] = {
        "http://h",
        "redis://",
        "redis://:pw@",
        "redis://h:0",
        "redis://h:65536",
        "redis://h:12x",
        "redis://h/x",
        "redis://h?nope=1",
        "redis://h?prefix",
        "redis://h?lazy=2",
        "redis://h?connect_timeout_ms=0",
        "redis://[::1",
        "redis://[::1]x",
        "redis://u:%zz@h",
        "redis://u:%00@h",
        "redis://u:%4@h",
        "unix://relative.sock",
        "unix://",
        "unix:///tmp/r%zz.sock",
        "unix:///tmp/r%00.sock",
        NULL,
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fg__redis_url u;
        char err[256] = "";
        int rc = fg__redis_url_parse(bad[i], &u, err, sizeof err);
        CHECK_EQ(rc, FG_EINVAL);
        CHECK(err[0] != '\0');
        if (rc == FG_OK)
            fg__redis_url_free(&u);
    }
    /* A prefix longer than the store allows. */
    char url[400] = "redis://h?prefix=";
    memset(url + strlen(url), 'p', 200);
    fg__redis_url u;
    char err[256];
    CHECK_EQ(fg__redis_url_parse(url, &u, err, sizeof err), FG_EINVAL);
}

/* The same thing given twice is refused, not first- or last-wins: a db in
 * the path and as ?db= (even the same one), a parameter repeated, a user or
 * password before '@' and as a parameter. */
static void test_given_twice(void)
{
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"redis://h:1/2?db=3", "db given twice"},
        {"redis://h:1/0?db=0", "db given twice"},
        {"redis://h:1?db=1&db=2", "db given twice"},
        {"redis://h?prefix=a&prefix=b", "'prefix' given twice"},
        {"redis://h?lazy=1&lazy=1", "'lazy' given twice"},
        {"redis://alice:pw@h?user=bob", "user given twice"},
        {"redis://:pw@h?password=other", "password given twice"},
        {"unix:///tmp/r.sock?db=1&db=1", "db given twice"},
        {"redis://::1:6379", "an IPv6 address goes in brackets"},
        {"redis://[fe80::1%25eth0]:6379", "zone ID (%) is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fg__redis_url u;
        char err[256] = "";
        int rc = fg__redis_url_parse(bad[i].url, &u, err, sizeof err);
        CHECK_EQ(rc, FG_EINVAL);
        if (!strstr(err, bad[i].why))
            fprintf(stderr, "  %s: got \"%s\"\n", bad[i].url, err);
        CHECK(strstr(err, bad[i].why) != NULL);
        if (rc == FG_OK)
            fg__redis_url_free(&u);
    }
    /* Once each, anywhere, is fine. */
    fg__redis_url u;
    char err[256];
    CHECK_EQ(
        fg__redis_url_parse("redis://h:1?db=3&prefix=x", &u, err, sizeof err),
        FG_OK);
    CHECK_EQ(u.db, 3);
    fg__redis_url_free(&u);
    CHECK_EQ(fg__redis_url_parse("redis://h:1/4?prefix=x", &u, err, sizeof err),
             FG_OK);
    CHECK_EQ(u.db, 4);
    fg__redis_url_free(&u);
}

/* No error message carries the password, whatever went wrong after it. */
static void test_no_password_in_errors(void)
{
    static const char *bad[] = {
        "redis://u:hunter2@h:0",
        "redis://u:hunter2@h/x",
        "redis://u:hunt?er2@h:0",
        "redis://u:hunt?er2=1@h/x",
        "redis://u:hunter2@[h",
        "redis://u:hunter2%zz@h",
        "redis://u:hunter2@h?password=hunter2%",
        /* An '&' in a password given as a parameter, not written %26:
         * the rest looks like a parameter, and is not echoed. */
        "redis://h:1/0?password=hunt&er2",
        "redis://h:1/0?password=hunt&er2=x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fg__redis_url u;
        char err[256] = "";
        CHECK_EQ(fg__redis_url_parse(bad[i], &u, err, sizeof err), FG_EINVAL);
        CHECK(strstr(err, "hunter2") == NULL);
        CHECK(strstr(err, "hunt") == NULL);
        CHECK(strstr(err, "er2") == NULL);
    }
}

/* Fail the Nth allocation, for every N: a clean FG_ENOMEM and nothing
 * leaked (ASan's leak checker runs at exit under `make asan`). */
static long fail_at, allocs;
static void *failing_malloc(size_t n)
{
    return ++allocs == fail_at ? NULL : malloc(n);
}

static void test_alloc_failures(void)
{
    int clean = 0;
    for (fail_at = 1; fail_at < 20 && !clean; fail_at++) {
        fg__redis_url u;
        char err[256];
        allocs = 0;
        fg_set_allocator(failing_malloc, free);
        int rc = fg__redis_url_parse("redis://al%41ce:pw@host:1/2?prefix=x", &u,
                                     err, sizeof err);
        fg_set_allocator(NULL, NULL);
        if (rc == FG_OK) {
            clean = allocs < fail_at;
            CHECK_STR(u.user, "alAce");
            fg__redis_url_free(&u);
        } else {
            CHECK_EQ(rc, FG_ENOMEM);
            CHECK_STR(err, "out of memory");
        }
    }
    CHECK(clean);
}

/* A shards store, lazy (nothing listens): fg_store_node_of of a key it
 * cannot read says node 0, as for no store, never reads it. */
static void test_node_of_bad_key(void)
{
    char err[256];
    fg_store *st = fg_store_open(
        "shards=redis://127.0.0.1:1?lazy=1,redis://127.0.0.1:2?lazy=1", err,
        sizeof err);
    CHECK(st != NULL);
    if (!st)
        return;
    CHECK_EQ(fg_store_nodes(st), 2);
    CHECK_EQ(fg_store_node_of(st, NULL, 5), 0);
    CHECK_EQ(fg_store_node_of(st, "k", FG_MAX_KEY + 1), 0);
    CHECK(fg_store_node_of(st, "k1", 2) < 2);
    fg_store_close(st);
}

int main(void)
{
    test_alloc_failures();
    test_node_of_bad_key();
    test_forms();
    test_refusals();
    test_given_twice();
    test_no_password_in_errors();
    return TEST_DONE();
}
