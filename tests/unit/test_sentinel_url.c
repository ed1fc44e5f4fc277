/* test_sentinel_url.c -- Sentinel store URLs (forms, bad input, passwords
 * kept out of errors), the masters' URLs made from them, and the Sentinel
 * replies the store reads. */
#include <stdlib.h>

#include "../harness.h"
#include "sentinel.h"
#include "store.h"

static void test_forms(void)
{
    fg__sentinel_url u;
    char err[256], mu[2048];

    CHECK_EQ(fg__sentinel_url_parse("sentinel://127.0.0.1:26379/mymaster", &u,
                                    err, sizeof err),
             FG_OK);
    CHECK_EQ(u.n, 1);
    CHECK_STR(u.s[0].host, "127.0.0.1");
    CHECK_EQ(u.s[0].port, 26379);
    CHECK_STR(u.master, "mymaster");
    CHECK_STR(u.sentinel_password, "");
    CHECK_EQ(fg__sentinel_master_url(&u, "10.0.0.5", 6380, 0, mu, sizeof mu),
             FG_OK);
    CHECK_STR(mu, "redis://10.0.0.5:6380");

    CHECK_EQ(fg__sentinel_url_parse(
                 "sentinel://al:p%40ss@a:1,[::1]:2,c.example:3/m-1.x?"
                 "prefix=rl%3A&sentinel_password=s%26cret&db=2&lazy=0",
                 &u, err, sizeof err),
             FG_OK);
    CHECK_EQ(u.n, 3);
    CHECK_STR(u.s[1].host, "::1");
    CHECK_EQ(u.s[1].port, 2);
    CHECK_STR(u.s[2].host, "c.example");
    CHECK_STR(u.master, "m-1.x");
    CHECK_STR(u.sentinel_password, "s&cret");
    CHECK_STR(u.sentinel_user, "");
    /* The Redis user, password and parameters go to every master; lazy
     * gives way to lazy=1 when the store follows a failover. */
    CHECK_EQ(fg__sentinel_master_url(&u, "10.0.0.5", 6380, 0, mu, sizeof mu),
             FG_OK);
    CHECK_STR(mu, "redis://al:p%40ss@10.0.0.5:6380?prefix=rl%3A&db=2&lazy=0");
    CHECK_EQ(fg__sentinel_master_url(&u, "fe80::1", 7, 1, mu, sizeof mu),
             FG_OK);
    CHECK_STR(mu, "redis://al:p%40ss@[fe80::1]:7?prefix=rl%3A&db=2&lazy=1");
    CHECK_EQ(fg__sentinel_master_url(&u, "h", 7, 0, mu, 20), FG_EINVAL);
    fg__sentinel_url_wipe(&u);
    CHECK_STR(u.sentinel_password, "");
    CHECK_STR(u.userinfo, "");

    CHECK_EQ(fg__sentinel_url_parse("sentinel://h:1/m?sentinel_user=bob&"
                                    "sentinel_password=x",
                                    &u, err, sizeof err),
             FG_OK);
    CHECK_STR(u.sentinel_user, "bob");
    CHECK_EQ(fg_store_url_check("sentinel://h:1,h:2/m", err, sizeof err),
             FG_OK);

    /* A raw '@' in a parameter's value that could end a user info is
     * refused, quoting neither reading; written %40 it reads one way. */
    CHECK_EQ(fg__sentinel_url_parse("sentinel://h:1/m?sentinel_password=S@x:2",
                                    &u, err, sizeof err),
             FG_EINVAL);
    CHECK(strstr(err, "as %40") != NULL);
    CHECK(strstr(err, "S@x") == NULL && strstr(err, "x:2") == NULL);
    CHECK_EQ(
        fg__sentinel_url_parse("sentinel://h:1/m?sentinel_password=S%40x:2", &u,
                               err, sizeof err),
        FG_OK);
    CHECK_EQ(u.n, 1);
    CHECK_STR(u.s[0].host, "h");
    CHECK_STR(u.master, "m");
    CHECK_STR(u.sentinel_password, "S@x:2");
}

static void test_bad(void)
{
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"sentinel://h:1", "no master name"},
        {"sentinel://h:1/", "no master name"},
        {"sentinel:///m", "no sentinel address"},
        {"sentinel://", "no sentinel address"},
        {"sentinel://h/m", "expected host:port"},
        {"sentinel://h:0/m", "port must be 1 .. 65535"},
        {"sentinel://h:65536/m", "port must be 1 .. 65535"},
        {"sentinel://h:x/m", "port must be 1 .. 65535"},
        {"sentinel://h:1,,h:2/m", "sentinel 2: empty address"},
        {"sentinel://h:1,/m", "sentinel 2: empty address"},
        {"sentinel://:1/m", "no host"},
        {"sentinel://h:1,H:1/m", "sentinel 2 is sentinel 1 again"},
        {"sentinel://h:1,h:2,[::1]:3,[::1]:3/m", "sentinel 4 is sentinel 3"},
        {"sentinel://[::1/m", "expected [address]:port"},
        {"sentinel://::1:26379/m", "an IPv6 address goes in brackets"},
        {"sentinel://[fe80::1%eth0]:1/m", "zone ID (%) is not supported"},
        {"sentinel://h:1/a/b", "may hold only"},
        {"sentinel://h:1/m/3", "a database is given as ?db=N"},
        {"sentinel://h:1/m!x", "may hold only A-Z a-z 0-9 . _ -"},
        {"sentinel://h:1/m?bogus=1", "unknown parameter 'bogus'"},
        {"sentinel://h:1/m?db=x", "db must be a number"},
        {"sentinel://h:1/m?sentinel_password=a&sentinel_password=b",
         "sentinel_password given twice"},
        {"sentinel://h:1/m?sentinel_user=a", "needs sentinel_password"},
        {"sentinel://h:1/m?sentinel_password=%zz", "bad %-escape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fg__sentinel_url u;
        char err[256] = "";
        int rc = fg__sentinel_url_parse(bad[i].url, &u, err, sizeof err);
        CHECK_EQ(rc, FG_EINVAL);
        if (!strstr(err, bad[i].why))
            fprintf(stderr, "%s: '%s' lacks '%s'\n", bad[i].url, err,
                    bad[i].why);
        CHECK(strstr(err, bad[i].why) != NULL);
        CHECK_EQ(fg_store_url_check(bad[i].url, err, sizeof err), FG_EINVAL);
    }
    /* Seventeen sentinels: one too many. */
    char many[512] = "sentinel://";
    for (int i = 0; i < 17; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sh:%d",
                 i ? "," : "", i + 1);
    strcat(many, "/m");
    fg__sentinel_url u;
    char err[256];
    CHECK_EQ(fg__sentinel_url_parse(many, &u, err, sizeof err), FG_EINVAL);
    CHECK(strstr(err, "more than 16") != NULL);
}

static void test_no_password_in_errors(void)
{
    fg__sentinel_url u;
    char err[256];
    CHECK_EQ(fg__sentinel_url_parse("sentinel://u:SECRET1@h:1/m?"
                                    "sentinel_password=SECRET2&bogus=1",
                                    &u, err, sizeof err),
             FG_EINVAL);
    CHECK(!strstr(err, "SECRET1") && !strstr(err, "SECRET2"));
    CHECK_EQ(fg__sentinel_url_parse("sentinel://u:SECRET1@h:0/m", &u, err,
                                    sizeof err),
             FG_EINVAL);
    CHECK(!strstr(err, "SECRET1"));
}

/* Replies, built by hand as hiredis would give them. */
static redisReply str(const char *s)
{
    redisReply r = {0};
    r.type = REDIS_REPLY_STRING;
    r.str = (char *)s;
    r.len = strlen(s);
    return r;
}

static void test_replies(void)
{
    char host[FG__SENTINEL_HOST_MAX], err[256];
    int port = 0;
    redisReply e[3] = {str("10.1.2.3"), str("6390"), str("")};
    redisReply *ep[3] = {&e[0], &e[1], &e[2]};
    redisReply arr = {0};
    arr.type = REDIS_REPLY_ARRAY;
    arr.elements = 2;
    arr.element = ep;
    CHECK_EQ(fg__sentinel_addr_reply(&arr, host, sizeof host, &port, err,
                                     sizeof err),
             FG_OK);
    CHECK_STR(host, "10.1.2.3");
    CHECK_EQ(port, 6390);
    e[1] = str("0");
    CHECK_EQ(fg__sentinel_addr_reply(&arr, host, sizeof host, &port, err,
                                     sizeof err),
             FG_EPROTO);
    /* A host that would not stay a host in the master's URL: refused,
     * not connected to somewhere else. */
    static const char *const bad_hosts[] = {"a@evil.example", "h:1/5",
                                            "10.0.0.5?db=7&x=", "a%40b", "a b"};
    e[1] = str("6390");
    for (size_t i = 0; i < sizeof bad_hosts / sizeof *bad_hosts; i++) {
        e[0] = str(bad_hosts[i]);
        CHECK_EQ(fg__sentinel_addr_reply(&arr, host, sizeof host, &port, err,
                                         sizeof err),
                 FG_EPROTO);
    }
    e[0] = str("redis-1.example");
    CHECK_EQ(fg__sentinel_addr_reply(&arr, host, sizeof host, &port, err,
                                     sizeof err),
             FG_OK);
    e[0] = str("::1");
    CHECK_EQ(fg__sentinel_addr_reply(&arr, host, sizeof host, &port, err,
                                     sizeof err),
             FG_OK);

    redisReply nil = {0};
    nil.type = REDIS_REPLY_NIL;
    CHECK_EQ(fg__sentinel_addr_reply(&nil, host, sizeof host, &port, err,
                                     sizeof err),
             FG__SENTINEL_ENOTFOUND);
    redisReply er = str("ERR unknown command 'SENTINEL', with args beginning "
                        "with: 'get-master-addr-by-name'");
    er.type = REDIS_REPLY_ERROR;
    CHECK_EQ(
        fg__sentinel_addr_reply(&er, host, sizeof host, &port, err, sizeof err),
        FG__SENTINEL_ENOTSENTINEL);
    CHECK(strstr(err, "not a sentinel") != NULL);
    er = str("NOAUTH Authentication required.");
    er.type = REDIS_REPLY_ERROR;
    CHECK_EQ(
        fg__sentinel_addr_reply(&er, host, sizeof host, &port, err, sizeof err),
        FG_EAUTH);

    /* ROLE */
    e[0] = str("master");
    arr.elements = 3;
    CHECK_EQ(fg__sentinel_role_reply(&arr), 1);
    e[0] = str("slave");
    CHECK_EQ(fg__sentinel_role_reply(&arr), 0);
    e[0] = str("sentinel");
    CHECK_EQ(fg__sentinel_role_reply(&arr), 0);
    er = str("NOPERM this user has no permissions");
    er.type = REDIS_REPLY_ERROR;
    CHECK_EQ(fg__sentinel_role_reply(&er), -1);

    /* Events, as Sentinel publishes them. */
    e[0] = str("message");
    e[1] = str("+switch-master");
    e[2] = str("mymaster 127.0.0.1 6379 127.0.0.1 6380");
    CHECK_EQ(fg__sentinel_event(&arr, "mymaster", host, sizeof host, &port),
             FG__SENTINEL_SWITCH);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ(port, 6380);
    e[2] = str("mymaster 127.0.0.1 6379 a@evil.example 6380");
    CHECK_EQ(fg__sentinel_event(&arr, "mymaster", host, sizeof host, &port), 0);
    e[2] = str("mymaster 127.0.0.1 6379 127.0.0.1 6380");
    CHECK_EQ(fg__sentinel_event(&arr, "other", host, sizeof host, &port), 0);
    CHECK_EQ(fg__sentinel_event(&arr, "mymast", host, sizeof host, &port), 0);
    e[1] = str("+failover-state-wait-promotion");
    e[2] = str("slave 10.0.0.9:6381 10.0.0.9 6381 @ mymaster 127.0.0.1 6379");
    CHECK_EQ(fg__sentinel_event(&arr, "mymaster", host, sizeof host, &port),
             FG__SENTINEL_PROMOTING);
    CHECK_STR(host, "10.0.0.9");
    CHECK_EQ(port, 6381);
    /* A master name of the longest length (64) is not matched by a longer
     * name that begins with it, in either message. */
    char m64[65], msg[256];
    memset(m64, 'm', 64);
    m64[64] = '\0';
    snprintf(msg, sizeof msg,
             "slave 10.0.0.9:6381 10.0.0.9 6381 @ %sX 127.0.0.1 6379", m64);
    e[2] = str(msg);
    CHECK_EQ(fg__sentinel_event(&arr, m64, host, sizeof host, &port), 0);
    snprintf(msg, sizeof msg,
             "slave 10.0.0.9:6381 10.0.0.9 6381 @ %s 127.0.0.1 6379", m64);
    e[2] = str(msg);
    CHECK_EQ(fg__sentinel_event(&arr, m64, host, sizeof host, &port),
             FG__SENTINEL_PROMOTING);
    e[1] = str("+switch-master");
    snprintf(msg, sizeof msg, "%sX 127.0.0.1 6379 127.0.0.1 6380", m64);
    e[2] = str(msg);
    CHECK_EQ(fg__sentinel_event(&arr, m64, host, sizeof host, &port), 0);
    snprintf(msg, sizeof msg, "%s 127.0.0.1 6379 127.0.0.1 6380", m64);
    e[2] = str(msg);
    CHECK_EQ(fg__sentinel_event(&arr, m64, host, sizeof host, &port),
             FG__SENTINEL_SWITCH);
    e[1] = str("+sdown");
    CHECK_EQ(fg__sentinel_event(&arr, "mymaster", host, sizeof host, &port), 0);
    e[0] = str("subscribe");
    e[1] = str("+switch-master");
    CHECK_EQ(fg__sentinel_event(&arr, "mymaster", host, sizeof host, &port), 0);
}

int main(void)
{
    test_forms();
    test_bad();
    test_no_password_in_errors();
    test_replies();
    return TEST_DONE();
}
