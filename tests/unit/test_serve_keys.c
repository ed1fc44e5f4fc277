/* test_serve_keys.c -- key sources, trusted proxies, query decoding. */
#include <string.h>

#include "../../serve/keys.h"
#include "../harness.h"
#include "floodgate.h"

static void test_keysrc(void)
{
    fg__keysrc k;
    char err[128];
    CHECK_EQ(fg__keysrc_parse("ip", &k, err, sizeof(err)), 0);
    CHECK_EQ(k.kind, FG_KEYSRC_IP);
    CHECK_EQ(fg__keysrc_parse("header:X-User-Id", &k, err, sizeof(err)), 0);
    CHECK_EQ(k.kind, FG_KEYSRC_HEADER);
    CHECK_STR(k.name, "X-User-Id");
    CHECK_EQ(fg__keysrc_parse("query:user", &k, err, sizeof(err)), 0);
    CHECK_EQ(k.kind, FG_KEYSRC_QUERY);
    CHECK_STR(k.name, "user");
    CHECK_EQ(fg__keysrc_parse("header:", &k, err, sizeof(err)), FG_EINVAL);
    CHECK_EQ(fg__keysrc_parse("header:a b", &k, err, sizeof(err)), FG_EINVAL);
    CHECK_EQ(fg__keysrc_parse("cookie:x", &k, err, sizeof(err)), FG_EINVAL);
    CHECK_EQ(fg__keysrc_parse("", &k, err, sizeof(err)), FG_EINVAL);
}

static void test_client_ip(void)
{
    fg__cidr t[2];
    CHECK_EQ(fg__cidr_parse("127.0.0.1", &t[0]), 0);
    CHECK_EQ(fg__cidr_parse("10.0.0.0/8", &t[1]), 0);
    char out[64];
    /* Untrusted peer: XFF is ignored, whatever it says. */
    fg__client_ip("203.0.113.9", "1.2.3.4", t, 2, out, sizeof(out));
    CHECK_STR(out, "203.0.113.9");
    /* Trusted peer, no header. */
    fg__client_ip("127.0.0.1", NULL, t, 2, out, sizeof(out));
    CHECK_STR(out, "127.0.0.1");
    /* Trusted peer: the rightmost untrusted hop; what the client wrote
     * itself on the left is not believed. */
    fg__client_ip("127.0.0.1", "6.6.6.6, 198.51.100.7, 10.1.2.3", t, 2, out,
                  sizeof(out));
    CHECK_STR(out, "198.51.100.7");
    /* Garbage stops the walk at the last good address. */
    fg__client_ip("127.0.0.1", "198.51.100.7, nonsense", t, 2, out,
                  sizeof(out));
    CHECK_STR(out, "127.0.0.1");
    /* All trusted: the leftmost. */
    fg__client_ip("127.0.0.1", "10.0.0.1,10.0.0.2", t, 2, out, sizeof(out));
    CHECK_STR(out, "10.0.0.1");
    /* No trusted proxies at all. */
    fg__client_ip("127.0.0.1", "1.2.3.4", t, 0, out, sizeof(out));
    CHECK_STR(out, "127.0.0.1");
    fg__cidr v6;
    CHECK_EQ(fg__cidr_parse("fd00::/8", &v6), 0);
    CHECK_EQ(fg__cidr_match(&v6, 1, "fd12::1"), 1);
    CHECK_EQ(fg__cidr_match(&v6, 1, "fe80::1"), 0);
    CHECK_EQ(fg__cidr_match(t, 2, "::ffff:10.9.9.9"), 1);
    CHECK_EQ(fg__cidr_match(t, 2, "11.0.0.1"), 0);
    CHECK_EQ(fg__cidr_parse("1.2.3.4/", &v6), FG_EINVAL);
    CHECK_EQ(fg__cidr_parse("::1/129", &v6), FG_EINVAL);
    CHECK_EQ(fg__cidr_parse("example.com", &v6), FG_EINVAL);
}

static void test_key_check(void)
{
    CHECK(fg__key_check("alice", 5, 256) == NULL);
    CHECK(fg__key_check("", 0, 256) != NULL);
    CHECK(fg__key_check("a\r\nb", 4, 256) != NULL);
    CHECK(fg__key_check("a\0b", 3, 256) != NULL);
    CHECK(fg__key_check("abcdef", 6, 5) != NULL);
    CHECK(fg__key_check("abcde", 5, 5) == NULL);
}

static void test_query(void)
{
    char out[16];
    CHECK_EQ(
        fg__query_get("limit=otp&key=u%201&cost=2", "key", out, sizeof(out)),
        3);
    CHECK_STR(out, "u 1");
    CHECK_EQ(fg__query_get("limit=otp&key=a+b", "key", out, sizeof(out)), 3);
    CHECK_STR(out, "a b");
    CHECK_EQ(fg__query_get("keys=1&key=2", "key", out, sizeof(out)), 1);
    CHECK_STR(out, "2");
    CHECK_EQ(fg__query_get("a=1", "key", out, sizeof(out)), -1);
    CHECK_EQ(fg__query_get(NULL, "key", out, sizeof(out)), -1);
    CHECK_EQ(fg__query_get("key=%zz", "key", out, sizeof(out)), -3);
    CHECK_EQ(fg__query_get("key=%4", "key", out, sizeof(out)), -3);
    CHECK_EQ(fg__query_get("key=0123456789abcdef", "key", out, sizeof(out)),
             -2);
    CHECK_EQ(fg__query_get("key=", "key", out, sizeof(out)), 0);
    CHECK_EQ(fg__query_get("key", "key", out, sizeof(out)), 0);
    CHECK_EQ(fg__query_get("key=a%0D%0Ab", "key", out, sizeof(out)), 4);
    CHECK(fg__key_check(out, 4, 256) != NULL);
}

int main(void)
{
    test_keysrc();
    test_client_ip();
    test_key_check();
    test_query();
    return TEST_DONE();
}
