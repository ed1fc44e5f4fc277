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
    CHECK_EQ(fg__keysrc_parse("ip/64", &k, err, sizeof(err)), 0);
    CHECK_EQ(k.kind, FG_KEYSRC_IP);
    CHECK_EQ(k.v6_bits, 64);
    CHECK_EQ(fg__keysrc_parse("ip/128", &k, err, sizeof(err)), 0);
    CHECK_EQ(k.v6_bits, 0); /* the whole address */
    static const char *bad[] = {"ip/0",  "ip/129", "ip/",   "ip/64x",
                                "ip/-1", "ip/064", "ip/ 64"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ(fg__keysrc_parse(bad[i], &k, err, sizeof(err)), FG_EINVAL);
        CHECK(strstr(err, "IPv6 prefix length") != NULL);
    }
}

/* key = ip/N: an IPv6 client counts as its block; IPv4 stays whole. */
static void test_ip_block(void)
{
    static const struct {
        const char *in;
        unsigned bits;
        const char *out;
    } v[] = {
        {"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::/64"},
        {"2001:db8:1:2::1", 64, "2001:db8:1:2::/64"},
        {"2001:db8:1:2ff::1", 56, "2001:db8:1:200::/56"},
        {"2001:db8:ffff::1", 33, "2001:db8:8000::/33"},
        {"2001:db8::1", 1, "::/1"},
        {"ffff::1", 1, "8000::/1"},
        {"1.2.3.4", 64, "1.2.3.4"},
        {"::1", 127, "::/127"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        char ip[64];
        snprintf(ip, sizeof ip, "%s", v[i].in);
        CHECK_EQ(fg__ip_block(ip, sizeof ip, v[i].bits), 0);
        CHECK_STR(ip, v[i].out);
    }
}

static void test_client_ip(void)
{
    fg__cidr t[2];
    CHECK_EQ(fg__cidr_parse("127.0.0.1", &t[0], NULL, 0), 0);
    CHECK_EQ(fg__cidr_parse("10.0.0.0/8", &t[1], NULL, 0), 0);
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
    /* Where the client is, what is not an address is refused, not read as
     * the proxy's (every such client would share its key); left of the
     * client nothing is read. Empty elements are no hops. */
    CHECK(fg__client_ip("127.0.0.1", "198.51.100.7, nonsense", t, 2, out,
                        sizeof(out)) != NULL);
    CHECK(fg__client_ip("127.0.0.1", "unknown", t, 2, out, sizeof(out)) !=
          NULL);
    CHECK(fg__client_ip("127.0.0.1", "fe80::1%25eth0, 10.0.0.1", t, 2, out,
                        sizeof(out)) != NULL);
    CHECK(fg__client_ip("127.0.0.1", "2001:db8::1%eth0", t, 2, out,
                        sizeof(out)) != NULL);
    CHECK(fg__client_ip("127.0.0.1", "nonsense, 198.51.100.7", t, 2, out,
                        sizeof(out)) == NULL);
    CHECK_STR(out, "198.51.100.7");
    CHECK(fg__client_ip("127.0.0.1", "198.51.100.6, , 10.0.0.1,", t, 2, out,
                        sizeof(out)) == NULL);
    CHECK_STR(out, "198.51.100.6");
    CHECK(fg__client_ip("127.0.0.1", "", t, 2, out, sizeof(out)) == NULL);
    CHECK_STR(out, "127.0.0.1");
    CHECK(fg__client_ip("127.0.0.1", " , ", t, 2, out, sizeof(out)) == NULL);
    CHECK_STR(out, "127.0.0.1");
    /* All trusted: the leftmost. */
    fg__client_ip("127.0.0.1", "10.0.0.1,10.0.0.2", t, 2, out, sizeof(out));
    CHECK_STR(out, "10.0.0.1");
    /* No trusted proxies at all. */
    fg__client_ip("127.0.0.1", "1.2.3.4", t, 0, out, sizeof(out));
    CHECK_STR(out, "127.0.0.1");
    fg__cidr v6;
    CHECK_EQ(fg__cidr_parse("fd00::/8", &v6, NULL, 0), 0);
    CHECK_EQ(fg__cidr_match(&v6, 1, "fd12::1"), 1);
    CHECK_EQ(fg__cidr_match(&v6, 1, "fe80::1"), 0);
    CHECK_EQ(fg__cidr_match(t, 2, "::ffff:10.9.9.9"), 1);
    CHECK_EQ(fg__cidr_match(t, 2, "11.0.0.1"), 0);
    /* An IPv4 block written mapped is that block, for either form of the
     * peer; a mapped block with host bits set is refused as any. */
    fg__cidr m[2];
    CHECK_EQ(fg__cidr_parse("::ffff:127.0.0.1", &m[0], NULL, 0), 0);
    CHECK_EQ(fg__cidr_parse("::ffff:10.0.0.0/104", &m[1], NULL, 0), 0);
    CHECK_EQ(fg__cidr_match(m, 2, "127.0.0.1"), 1);
    CHECK_EQ(fg__cidr_match(m, 2, "::ffff:127.0.0.1"), 1);
    CHECK_EQ(fg__cidr_match(m, 2, "10.200.0.1"), 1);
    CHECK_EQ(fg__cidr_match(m, 2, "127.0.0.2"), 0);
    CHECK_EQ(fg__cidr_match(m, 2, "11.0.0.1"), 0);
    CHECK_EQ(fg__cidr_parse("::ffff:0:0/96", &m[0], NULL, 0), 0);
    CHECK_EQ(fg__cidr_match(m, 1, "192.0.2.7"), 1);
    CHECK_EQ(fg__cidr_match(m, 1, "2001:db8::1"), 0);
    CHECK_EQ(fg__cidr_parse("::ffff:10.0.0.1/104", &m[0], NULL, 0), FG_EINVAL);
    CHECK_EQ(fg__cidr_parse("1.2.3.4/", &v6, NULL, 0), FG_EINVAL);
    CHECK_EQ(fg__cidr_parse("::1/129", &v6, NULL, 0), FG_EINVAL);
    CHECK_EQ(fg__cidr_parse("example.com", &v6, NULL, 0), FG_EINVAL);
}

/* A block with host bits set is refused with the block it would be. */
static void test_host_bits(void)
{
    fg__cidr c;
    char err[128] = "";
    CHECK_EQ(fg__cidr_parse("10.0.0.1/8", &c, err, sizeof(err)), FG_EINVAL);
    CHECK_STR(err, "host bits set; did you mean 10.0.0.0/8?");
    CHECK_EQ(fg__cidr_parse("192.168.1.130/25", &c, err, sizeof(err)),
             FG_EINVAL);
    CHECK_STR(err, "host bits set; did you mean 192.168.1.128/25?");
    CHECK_EQ(fg__cidr_parse("2001:db8::1/32", &c, err, sizeof(err)), FG_EINVAL);
    CHECK_STR(err, "host bits set; did you mean 2001:db8::/32?");
    CHECK_EQ(fg__cidr_parse("10.0.0.0/8", &c, err, sizeof(err)), 0);
    CHECK_EQ(fg__cidr_parse("192.168.1.128/25", &c, err, sizeof(err)), 0);
    CHECK_EQ(fg__cidr_parse("10.0.0.1/32", &c, err, sizeof(err)), 0);
    CHECK_EQ(fg__cidr_parse("0.0.0.0/0", &c, err, sizeof(err)), 0);
    CHECK_EQ(fg__cidr_parse("1.2.3.4/0", &c, err, sizeof(err)), FG_EINVAL);
    CHECK_EQ(fg__cidr_parse("fd00::/8", &c, err, sizeof(err)), 0);
}

/* The forms proxies write, one key per address whatever its spelling. */
static void test_ip_forms(void)
{
    static const struct {
        const char *in;
        int rc;
        const char *out;
    } v[] = {
        {"7.7.7.7", FG_IP_OK, "7.7.7.7"},
        {"7.7.7.7:1234", FG_IP_OK, "7.7.7.7"},
        {"[2001:db8::1]", FG_IP_OK, "2001:db8::1"},
        {"[2001:db8::1]:443", FG_IP_OK, "2001:db8::1"},
        {"2001:DB8::1", FG_IP_OK, "2001:db8::1"},
        {"2001:db8:0:0::1", FG_IP_OK, "2001:db8::1"},
        {"[2001:db8::1]:80", FG_IP_OK, "2001:db8::1"},
        {"2001:0db8:0000:0000:0000:0000:0000:0001", FG_IP_OK, "2001:db8::1"},
        {"::ffff:1.2.3.4", FG_IP_OK, "1.2.3.4"},
        {"[::FFFF:1.2.3.4]:9", FG_IP_OK, "1.2.3.4"},
        {"::ffff:0102:0304", FG_IP_OK, "1.2.3.4"},
        {"::1", FG_IP_OK, "::1"},
        {"007.007.007.007", FG_IP_AMBIGUOUS, NULL},
        {"010.0.0.1", FG_IP_AMBIGUOUS, NULL},
        {"010.0.0.1:80", FG_IP_AMBIGUOUS, NULL},
        {"127.1", FG_IP_AMBIGUOUS, NULL},
        {"0x7f.0.0.1", FG_IP_AMBIGUOUS, NULL},
        {"2130706433", FG_IP_AMBIGUOUS, NULL},
        {"0.0.0.0", FG_IP_OK, "0.0.0.0"},
        {"7.7.7.7:", FG_IP_BAD, NULL},
        {"7.7.7.7:65536", FG_IP_BAD, NULL},
        {"7.7.7.7:x", FG_IP_BAD, NULL},
        {"[7.7.7.7]", FG_IP_BAD, NULL},
        {"[2001:db8::1", FG_IP_BAD, NULL},
        {"[2001:db8::1]443", FG_IP_BAD, NULL},
        {"[2001:db8::1]:", FG_IP_BAD, NULL},
        {"unknown", FG_IP_BAD, NULL},
        {"", FG_IP_BAD, NULL},
        {"1.2.3.4.5", FG_IP_BAD, NULL},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[64] = "";
        int rc = fg__ip_canon(v[i].in, strlen(v[i].in), out, sizeof(out));
        if (rc != v[i].rc)
            fprintf(stderr, "  '%s': %d\n", v[i].in, rc);
        CHECK_EQ(rc, v[i].rc);
        if (v[i].out)
            CHECK_STR(out, v[i].out);
    }
    fg__cidr t[1];
    CHECK_EQ(fg__cidr_parse("127.0.0.1", &t[0], NULL, 0), 0);
    char out[64];
    /* A trusted proxy's X-Forwarded-For in each form gives the client, not
     * the proxy. */
    const char *forms[][2] = {
        {"7.7.7.7:1234", "7.7.7.7"},
        {"[2001:db8::1]", "2001:db8::1"},
        {"[2001:db8::1]:443", "2001:db8::1"},
        {"2001:DB8:0::1", "2001:db8::1"},
        {"6.6.6.6, ::ffff:1.2.3.4", "1.2.3.4"},
        {"1.2.3.4, [::ffff:127.0.0.1]:5", "1.2.3.4"},
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        CHECK(fg__client_ip("127.0.0.1", forms[i][0], t, 1, out, sizeof(out)) ==
              NULL);
        CHECK_STR(out, forms[i][1]);
    }
    /* Ambiguous where the client is read: the request is refused. */
    CHECK(fg__client_ip("127.0.0.1", "007.007.007.007", t, 1, out,
                        sizeof(out)) != NULL);
    /* Left of the client, nothing is read: no refusal. */
    CHECK(fg__client_ip("127.0.0.1", "010.0.0.1, 8.8.8.8", t, 1, out,
                        sizeof(out)) == NULL);
    CHECK_STR(out, "8.8.8.8");
    /* The peer itself, when it is the client, in canonical form; an
     * IPv4-mapped peer (a dual-stack socket) is trusted as IPv4. */
    CHECK(fg__client_ip("2001:DB8::1", NULL, t, 1, out, sizeof(out)) == NULL);
    CHECK_STR(out, "2001:db8::1");
    CHECK(fg__client_ip("::ffff:1.2.3.4", NULL, t, 1, out, sizeof(out)) ==
          NULL);
    CHECK_STR(out, "1.2.3.4");
    CHECK(fg__client_ip("::ffff:127.0.0.1", "9.9.9.9", t, 1, out,
                        sizeof(out)) == NULL);
    CHECK_STR(out, "9.9.9.9");
}

static void test_key_check(void)
{
    char kb[80];
    CHECK(fg__key_check("alice", 5, 256, kb, sizeof kb) == NULL);
    CHECK(fg__key_check("", 0, 256, kb, sizeof kb) != NULL);
    CHECK(fg__key_check("a\r\nb", 4, 256, kb, sizeof kb) != NULL);
    CHECK(fg__key_check("a\0b", 3, 256, kb, sizeof kb) != NULL);
    CHECK(fg__key_check("abcdef", 6, 5, kb, sizeof kb) != NULL);
    CHECK_STR(kb, "key too long: at most 5 bytes (max_key_bytes)");
    CHECK(fg__key_check("abcde", 5, 5, kb, sizeof kb) == NULL);
}

static void test_query(void)
{
    char kb[80];
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
    CHECK(fg__key_check(out, 4, 256, kb, sizeof kb) != NULL);
    /* Given twice, a parameter is refused (-4), whatever the values, also
     * when one spelling of its name is %-encoded. */
    CHECK_EQ(fg__query_get("key=a&key=b", "key", out, sizeof(out)), -4);
    CHECK_EQ(fg__query_get("key=a&limit=x&key=a", "key", out, sizeof(out)), -4);
    CHECK_EQ(fg__query_get("key=a&key", "key", out, sizeof(out)), -4);
    CHECK_EQ(fg__query_get("k%65y=a&key=b", "key", out, sizeof(out)), -4);
    CHECK_EQ(fg__query_get("k%65y=a", "key", out, sizeof(out)), 1);
    CHECK_STR(out, "a");
    CHECK_EQ(fg__query_get("key=a&keys=b&akey=c", "key", out, sizeof(out)), 1);
    CHECK_EQ(fg__query_get("cost=1&cost=2", "cost", out, sizeof(out)), -4);
}

int main(void)
{
    test_keysrc();
    test_ip_block();
    test_client_ip();
    test_host_bits();
    test_ip_forms();
    test_key_check();
    test_query();
    return TEST_DONE();
}
