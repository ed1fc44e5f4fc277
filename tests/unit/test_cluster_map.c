/* test_cluster_map.c -- Redis Cluster's key space (cluster_map.c): CRC16
 * and key slots with hash tags against the specification's examples and
 * the values redis-server's CLUSTER KEYSLOT gives; CLUSTER SLOTS replies
 * (read from RESP text by hiredis's own reader) into a slot map; MOVED and
 * ASK. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "../harness.h"
#include "cluster_map.h"
#include "floodgate.h"

static unsigned slot_of(const char *k)
{
    return fg__cluster_keyslot(k, strlen(k));
}

static void test_keyslot(void)
{
    /* The specification's check value of its CRC16. */
    CHECK_EQ(fg__crc16("123456789", 9), 0x31C3);
    /* CLUSTER KEYSLOT of redis-server 7.0. */
    CHECK_EQ(slot_of("foo"), 12182);
    CHECK_EQ(slot_of("bar"), 5061);
    CHECK_EQ(slot_of("hello"), 866);
    CHECK_EQ(slot_of("123456789"), 12739);
    CHECK_EQ(slot_of(""), 0);
    /* Hash tags, the specification's cases. */
    CHECK_EQ(slot_of("{user1000}.following"), 3443);
    CHECK_EQ(slot_of("{user1000}.followers"), 3443);
    CHECK_EQ(slot_of("user1000"), 3443);
    CHECK_EQ(slot_of("foo{}{bar}"), 8363);    /* empty tag: the whole key */
    CHECK_EQ(slot_of("foo{{bar}}zap"), 4015); /* the tag is "{bar" */
    CHECK_EQ(slot_of("{bar"), 4015);
    CHECK_EQ(slot_of("foo{bar}{zap}"), 5061); /* the first tag: "bar" */
    /* floodgate's own keys: the user key is the tag. */
    CHECK_EQ(slot_of("fg:tb:{user:81}"), 2822);
    CHECK_EQ(slot_of("user:81"), 2822);
    /* Binary keys. */
    CHECK_EQ(fg__cluster_keyslot("a{\0b}c", 6), fg__cluster_keyslot("\0b", 2));
}

static redisReply *parse_resp(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    redisReaderFeed(rd, resp, strlen(resp));
    CHECK_EQ(redisReaderGetReply(rd, &r), REDIS_OK);
    redisReaderFree(rd);
    return r;
}

static void test_slots(void)
{
    fg__cluster_map m;
    /* Three masters (one with a replica), slots 0-5460, 5461-10922,
     * 10923-16383, as redis-cli --cluster create makes them. */
    redisReply *r = parse_resp(
        "*3\r\n"
        "*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
        "*3\r\n$9\r\n127.0.0.1\r\n:7004\r\n$2\r\nid\r\n"
        "*3\r\n:5461\r\n:10922\r\n*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$"
        "2\r\nid\r\n"
        "*3\r\n:10923\r\n:16383\r\n*3\r\n$0\r\n\r\n:7003\r\n$2\r\nid\r\n");
    CHECK_EQ(fg__cluster_map_parse(&m, r, "10.0.0.9"), FG_OK);
    CHECK_EQ(m.nmasters, 3);
    CHECK_STR(m.master[0], "127.0.0.1:7001");
    CHECK_STR(m.master[2], "10.0.0.9:7003"); /* "" is the node asked */
    CHECK_EQ(m.slot[0], 0);
    CHECK_EQ(m.slot[5460], 0);
    CHECK_EQ(m.slot[5461], 1);
    CHECK_EQ(m.slot[16383], 2);
    CHECK_EQ(fg__cluster_map_find(&m, "127.0.0.1:7002"), 1);
    CHECK_EQ(fg__cluster_map_find(&m, "127.0.0.1:7004"), -1);
    freeReplyObject(r);

    /* A gap: slots no master serves. */
    r = parse_resp("*1\r\n*3\r\n:100\r\n:200\r\n*2\r\n$1\r\nh\r\n:1\r\n");
    CHECK_EQ(fg__cluster_map_parse(&m, r, "x"), FG_OK);
    CHECK_EQ(m.slot[99], 255);
    CHECK_EQ(m.slot[100], 0);
    CHECK_EQ(m.slot[201], 255);
    freeReplyObject(r);

    /* A null host (cluster-preferred-endpoint-type unknown-endpoint) is
     * the node asked; "?" (a host name the node lacks) is no address:
     * those slots are left to MOVED. An address of 72 bytes. */
    r = parse_resp(
        "*3\r\n"
        "*3\r\n:0\r\n:99\r\n*2\r\n$-1\r\n:7001\r\n"
        "*3\r\n:100\r\n:199\r\n*2\r\n$1\r\n?\r\n:7002\r\n"
        "*3\r\n:200\r\n:299\r\n*2\r\n$67\r\n"
        "redis-cluster-0.redis-cluster-headless.production.svc.cluster.local"
        "\r\n:6379\r\n");
    CHECK_EQ(fg__cluster_map_parse(&m, r, "10.0.0.9"), FG_OK);
    CHECK_EQ(m.nmasters, 2);
    CHECK_STR(m.master[0], "10.0.0.9:7001");
    CHECK_EQ(m.slot[150], 255);
    CHECK_EQ(m.slot[250], 1);
    CHECK_STR(m.master[1], "redis-cluster-0.redis-cluster-headless.production."
                           "svc.cluster.local:6379");
    freeReplyObject(r);

    /* Not a slot map. */
    const char *bad[] = {
        /* A host that is not one: it would go into a URL as it is. */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$8\r\nx?user=a\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$5\r\na@b/c\r\n:1\r\n",
        "-ERR This instance has cluster support disabled\r\n",
        "*0\r\n",
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",
        "*1\r\n*2\r\n:0\r\n:1\r\n",
        "$3\r\nabc\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = parse_resp(bad[i]);
        CHECK_EQ(fg__cluster_map_parse(&m, r, "x"), FG_EPROTO);
        freeReplyObject(r);
    }
    CHECK_EQ(fg__cluster_map_parse(&m, NULL, "x"), FG_EPROTO);
}

static void test_redirect(void)
{
    fg__cluster_redirect rd;
    const char *s = "MOVED 3999 127.0.0.1:6381";
    fg__cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd);
    CHECK_EQ(rd.kind, FG__CLUSTER_MOVED);
    CHECK_EQ(rd.slot, 3999);
    CHECK_STR(rd.addr, "127.0.0.1:6381");
    s = "ASK 12 10.1.2.3:7000";
    fg__cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd);
    CHECK_EQ(rd.kind, FG__CLUSTER_ASK);
    CHECK_EQ(rd.slot, 12);
    CHECK_STR(rd.addr, "10.1.2.3:7000");
    /* IPv6, as Redis sends it (unbracketed): bracketed, as in the map. */
    s = "MOVED 7 ::1:6379";
    fg__cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd);
    CHECK_EQ(rd.kind, FG__CLUSTER_MOVED);
    CHECK_STR(rd.addr, "[::1]:6379");
    s = "ASK 7 2001:db8::1:7001";
    fg__cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd);
    CHECK_EQ(rd.kind, FG__CLUSTER_ASK);
    CHECK_STR(rd.addr, "[2001:db8::1]:7001");
    s = "MOVED 7 [::1]:6379";
    fg__cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd);
    CHECK_STR(rd.addr, "[::1]:6379");
    /* No host (Redis's unknown endpoint): the host of the node that
     * answered, bracketed when it is IPv6. */
    s = "MOVED 7 :6381";
    fg__cluster_redirect_parse(s, strlen(s), "10.0.0.9", &rd);
    CHECK_EQ(rd.kind, FG__CLUSTER_MOVED);
    CHECK_STR(rd.addr, "10.0.0.9:6381");
    fg__cluster_redirect_parse(s, strlen(s), "::1", &rd);
    CHECK_STR(rd.addr, "[::1]:6381");
    fg__cluster_redirect_parse(s, strlen(s), "", &rd);
    CHECK_EQ(rd.kind, 0);
    const char *bad[] = {"MOVED",
                         "MOVED 1 a:",
                         "MOVED 1 :",
                         "MOVED x 1.2.3.4:5",
                         "MOVED 16384 a:1",
                         "MOVED 1 ",
                         "MOVED 1 nocolon",
                         "ERR MOVED 1 a:1",
                         "MOVED 1 x?lazy=0:7000",
                         "ASK 1 a@b:7000",
                         "MOVED 1 127[::1]1:6381",
                         "MOVED 1 [::1:6381",
                         "MOVED 1 ::1]:6381",
                         "MOVED 1 []:6381",
                         "MOVED 1 a:b0",
                         "MOVED 1 a:0",
                         "MOVED 1 a:65536",
                         "MOVED 1 a:+80",
                         "TRYAGAIN Multiple keys request during rehashing"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fg__cluster_redirect_parse(bad[i], strlen(bad[i]), "10.0.0.9", &rd);
        CHECK_EQ(rd.kind, 0);
    }
}

int main(void)
{
    test_keyslot();
    test_slots();
    test_redirect();
    return TEST_DONE();
}
