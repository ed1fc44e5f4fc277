/* test_serve_config.c -- the INI configuration of floodgate serve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../serve/config.h"
#include "../harness.h"

static fg__serve_config cfg;
static char err[512];

static int parse(const char *text)
{
    fg__config_defaults(&cfg);
    err[0] = '\0';
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    if (!f)
        return -100;
    int rc = fg__config_parse(f, "t.ini", &cfg, err, sizeof(err));
    fclose(f);
    return rc;
}

/* 1 when 'err' starts with "t.ini:LINE: " and contains 'what'. */
static int err_is(int line, const char *what)
{
    char head[32];
    snprintf(head, sizeof(head), "t.ini:%d: ", line);
    int ok = strncmp(err, head, strlen(head)) == 0 && strstr(err, what);
    if (!ok)
        fprintf(stderr, "  got: %s\n", err);
    return ok;
}

/* 'text' is refused at 'line', the reason containing 'what'. */
static void refused(const char *text, int line, const char *what)
{
    int rc = parse(text);
    CHECK_EQ(rc, FG_EINVAL);
    int ok = err_is(line, what);
    CHECK(ok);
    if (rc != FG_EINVAL || !ok)
        fprintf(stderr, "  in: %s\n", text);
}

static void test_example(void)
{
    fg__config_defaults(&cfg);
    int rc =
        fg__config_load("examples/gatepass.ini", 0, &cfg, err, sizeof(err));
    if (rc)
        fprintf(stderr, "  %s\n", err);
    CHECK_EQ(rc, 0);
    CHECK_EQ(cfg.nlimits, 3);
    CHECK_EQ(cfg.workers, 2);
    CHECK_STR(cfg.id, "gatepass-1");
    CHECK_EQ(cfg.demo_api, 1);
    CHECK_EQ(cfg.demo_nchain, 2);
    int b = fg__config_find(&cfg, "bookings", 8);
    int o = fg__config_find(&cfg, "otp", 3);
    int ip = fg__config_find(&cfg, "per_ip", 6);
    CHECK(b >= 0 && o >= 0 && ip >= 0);
    if (b < 0 || o < 0 || ip < 0)
        return;
    CHECK_EQ(cfg.demo_chain[0], ip);
    CHECK_EQ(cfg.demo_chain[1], b);
    CHECK_EQ(cfg.limits[b].lim.limit, 10);
    CHECK_EQ(cfg.limits[b].lim.period_us, 1000000);
    CHECK_EQ(cfg.limits[b].lim.algorithm, FG_TOKEN_BUCKET);
    CHECK_EQ(cfg.limits[b].lim.on_failure, FG_FAIL_OPEN);
    CHECK_EQ(cfg.limits[b].key.kind, FG_KEYSRC_HEADER);
    CHECK_STR(cfg.limits[b].key.name, "X-User-Id");
    CHECK_EQ(cfg.limits[o].lim.limit, 5);
    CHECK_EQ(cfg.limits[o].lim.period_us, 900000000ULL);
    CHECK_EQ(cfg.limits[o].lim.algorithm, FG_FIXED_WINDOW);
    CHECK_EQ(cfg.limits[o].lim.on_failure, FG_FAIL_CLOSED);
    CHECK_EQ(cfg.limits[ip].key.kind, FG_KEYSRC_IP);
    CHECK_EQ(cfg.limits[ip].lim.limit, 100);
    CHECK_EQ(cfg.nproxies, 2);
    CHECK_EQ(cfg.limits[b].lim.timeout_ms, 5);
}

static void test_defaults_and_order(void)
{
    /* [store] timeout applies to limits defined before it too; a limit's
     * own timeout wins. Keys in any order: rate resets nothing after. */
    CHECK_EQ(parse("[limit a]\nalgorithm = fixed_window\nrate = 3/min\n"
                   "key = query:u\non_failure = local\nfallback_servers = 4\n"
                   "[limit b]\nrate = 1/s\nkey = ip\ntimeout = 20ms\n"
                   "[store]\ntimeout = 7ms\nurl = redis://h:1\n"),
             0);
    CHECK_EQ(cfg.nlimits, 2);
    CHECK_EQ(cfg.limits[0].lim.algorithm, FG_FIXED_WINDOW);
    CHECK_EQ(cfg.limits[0].lim.limit, 3);
    CHECK_EQ(cfg.limits[0].lim.on_failure, FG_FAIL_LOCAL);
    CHECK_EQ(cfg.limits[0].lim.fallback_servers, 4);
    CHECK_EQ(cfg.limits[0].lim.timeout_ms, 7);
    CHECK_EQ(cfg.limits[1].lim.timeout_ms, 20);
    CHECK_EQ(cfg.limits[0].key.kind, FG_KEYSRC_QUERY);
    CHECK_STR(cfg.store_url, "redis://h:1");
    CHECK_EQ(cfg.limits[0].lim.durable, 0);
    /* durable = replica, before or after the rate (a Redis store only:
     * checked once --store is applied, tests/integration/serve_basic.sh). */
    CHECK_EQ(parse("[limit a]\ndurable = replica\nrate = 3/min\nkey = ip\n"
                   "[limit b]\nrate = 3/min\nkey = ip\ndurable = off\n"
                   "[store]\nurl = redis://h:1\n"),
             0);
    CHECK_EQ(cfg.limits[0].lim.durable, 1);
    CHECK_EQ(cfg.limits[1].lim.durable, 0);
    CHECK_EQ(cfg.limits[0].durable_line, 2);
    CHECK_EQ(cfg.limits[1].durable_line, 0);
    CHECK_EQ(parse("[limit a]\nrate = 3/min\nkey = ip\ndurable = yes\n"),
             FG_EINVAL);
    CHECK(err_is(4, "durable must be off or replica"));
    CHECK_STR(cfg.listen, "127.0.0.1:8080");
    CHECK_EQ(cfg.demo_api, 0);
}

static void test_errors(void)
{
    CHECK_EQ(parse("[server]\nworkers = 0\n"), FG_EINVAL);
    CHECK(err_is(2, "workers"));
    CHECK_EQ(parse("[server]\nlisten = 1.2.3.4:80\nbogus = 1\n"), FG_EINVAL);
    CHECK(err_is(3, "unknown key 'bogus'"));
    CHECK_EQ(parse("; c\n\n[nope]\nx = 1\n"), FG_EINVAL);
    CHECK(err_is(3, "unknown section"));
    CHECK_EQ(parse("[limit a]\nrate = ten/s\n"), FG_EINVAL);
    CHECK(err_is(2, "rate"));
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = cookie:x\n"), FG_EINVAL);
    CHECK(err_is(3, "key must be"));
    /* The approximate modes; a chunk above the limit is refused at the
     * mode's line, as is durable with a mode. */
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\nmode = sync:200ms\n"), 0);
    CHECK_EQ(cfg.limits[0].lim.mode, FG_MODE_SYNC);
    CHECK_EQ(cfg.limits[0].lim.sync_ms, 200);
    CHECK_EQ(cfg.limits[0].lim.on_failure, FG_FAIL_LOCAL); /* sync's default */
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\nmode = sync\n"
                   "on_failure = closed\n"),
             0);
    CHECK_EQ(cfg.limits[0].lim.on_failure, FG_FAIL_CLOSED);
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nmode = lease:4\n"), 0);
    CHECK_EQ(cfg.limits[0].lim.on_failure, FG_FAIL_OPEN);
    CHECK_EQ(cfg.limits[0].lim.mode, FG_MODE_LEASE);
    CHECK_EQ(cfg.limits[0].lim.lease_chunk, 4);
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nmode = lease:40\n"),
             FG_EINVAL);
    CHECK(err_is(4, "above the limit"));
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nmode = sync:1ms\n"),
             FG_EINVAL);
    CHECK(err_is(4, "10ms to 10s"));
    CHECK_EQ(parse("[store]\nurl = redis://h:1\n"
                   "[limit a]\nrate = 10/s\nkey = ip\nmode = sync\n"
                   "durable = replica\n"),
             FG_EINVAL);
    CHECK(err_is(6, "durable = replica needs mode exact"));
    /* local_keys: a mode's table, 1..2^40; an exact limit has none. */
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nmode = sync\n"
                   "local_keys = 5000\n"),
             0);
    CHECK_EQ(cfg.limits[0].local_keys, 5000);
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nmode = lease\n"), 0);
    CHECK_EQ(cfg.limits[0].local_keys, 0);
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nlocal_keys = 5\n"),
             FG_EINVAL);
    CHECK(err_is(4, "local_keys needs mode = sync or lease"));
    CHECK_EQ(parse("[limit a]\nrate = 10/s\nkey = ip\nmode = sync\n"
                   "local_keys = 0\n"),
             FG_EINVAL);
    CHECK(err_is(5, "local_keys must be 1..2^40"));
    /* Shards and cluster: each node URL is checked. */
    CHECK_EQ(parse("[store]\nurl = shards=redis://a:1,redis://b:2\n"), 0);
    CHECK_EQ(parse("[store]\nurl = shards=redis://a:1,redis://a:1\n"),
             FG_EINVAL);
    CHECK(err_is(2, "url: shards: node a:1/0 is listed twice"));
    CHECK_EQ(parse("[store]\nurl = shards=redis://a:1,http://b\n"), FG_EINVAL);
    CHECK(err_is(2, "url: shards: node 2 is not a redis:// or unix:// URL"));
    CHECK_EQ(parse("[store]\nurl = cluster=redis://a:1,redis://b:2\n"), 0);
    CHECK_EQ(parse("[store]\nurl = cluster=redis://a:1/3\n"), FG_EINVAL);
    CHECK(err_is(2, "url: cluster: Redis Cluster has database 0 only"));
    CHECK_EQ(parse("[store]\nurl = cluster=unix:///x.sock\n"), FG_EINVAL);
    CHECK(err_is(2, "url: cluster: node 1 is not a redis:// URL"));
    CHECK_EQ(parse("[store]\nurl = cluster=redis://a:1,\n"), FG_EINVAL);
    CHECK(err_is(2, "url: cluster: node 2: empty or too long URL"));
    /* The drain grace: a duration, 500 ms by default, at most a minute. */
    CHECK_EQ(parse("[server]\nid = x\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 500);
    CHECK_EQ(parse("[server]\ndrain_grace = 2s\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 2000);
    CHECK_EQ(parse("[server]\ndrain_grace = 0\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 0);
    CHECK_EQ(parse("[server]\ndrain_grace = 0ms\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 0);
    CHECK_EQ(parse("[server]\ndrain_grace = 0s\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 0);
    CHECK_EQ(parse("[server]\ndrain_grace = 0min\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 0);
    CHECK_EQ(parse("[server]\ndrain_grace = 0h\n"), 0);
    CHECK_EQ(cfg.drain_grace_ms, 0);
    refused("[server]\ndrain_grace =\n", 2, "drain_grace must be");
    refused("[store]\ntimeout = 61s\n", 2, "from 1ms to 60s");
    refused("[limit a]\nkey = ip\nrate = 1/s\ntimeout = 2h\n", 4,
            "from 1ms to 60s");
    /* A NUL byte is said as such, with its line. */
    static const char nul[] = "[server]\nid = a\0b\n";
    fg__config_defaults(&cfg);
    FILE *f = fmemopen((void *)nul, sizeof(nul) - 1, "r");
    CHECK(f != NULL);
    CHECK_EQ(fg__config_parse(f, "t.ini", &cfg, err, sizeof(err)), FG_EINVAL);
    fclose(f);
    CHECK(strstr(err, "t.ini:2: a NUL byte in the line") != NULL);
    /* The same on a last line with no newline. */
    static const char nul2[] = "[server]\nid = a\0b";
    fg__config_defaults(&cfg);
    f = fmemopen((void *)nul2, sizeof(nul2) - 1, "r");
    CHECK(f != NULL);
    CHECK_EQ(fg__config_parse(f, "t.ini", &cfg, err, sizeof(err)), FG_EINVAL);
    fclose(f);
    CHECK(strstr(err, "t.ini:2: a NUL byte in the line") != NULL);
    /* A burst up to 2^53, as the library takes. */
    CHECK_EQ(parse("[limit a]\nkey = ip\nrate = 9007199254740992/day\n"
                   "burst = 9007199254740992\n"),
             0);
    refused("[limit a]\nkey = ip\nrate = 1/s\nburst = 9007199254740993\n", 4,
            "burst must be a whole number, 1..2^53");
    CHECK_EQ(parse("[server]\ndrain_grace = 2min\n"), FG_EINVAL);
    CHECK(err_is(2, "drain_grace"));
    CHECK_EQ(parse("[server]\ndrain_grace = soon\n"), FG_EINVAL);
    CHECK(err_is(2, "drain_grace"));
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\nmode = fast\n"),
             FG_EINVAL);
    CHECK(err_is(4, "mode"));
    /* What a whole section lacks is reported at its header. */
    CHECK_EQ(parse("[limit a]\nkey = ip\n"), FG_EINVAL);
    CHECK(err_is(1, "rate is required"));
    CHECK_EQ(parse("[server]\nid = x\n\n[limit a]\nrate = 1/s\n"), FG_EINVAL);
    CHECK(err_is(4, "key is required"));
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\n[server]\nid = x\n"
                   "[limit a]\nburst = 2\n"),
             FG_EINVAL);
    CHECK(err_is(6, "defined twice"));
    CHECK_EQ(parse("[limit a b]\nrate = 1/s\n"), FG_EINVAL);
    CHECK(err_is(1, "limit name"));
    CHECK_EQ(parse("[server]\ndemo_api = on\n"), FG_EINVAL);
    CHECK(err_is(2, "bookings"));
    CHECK_EQ(parse("[server]\ndemo_api = maybe\n"), FG_EINVAL);
    CHECK(err_is(2, "demo_api"));
    CHECK_EQ(parse("[server]\ntrusted_proxies = 10.0.0.0/33\n"), FG_EINVAL);
    CHECK(err_is(2, "10.0.0.0/33"));
    CHECK_EQ(parse("[store]\ntimeout = 5 parsecs\n"), FG_EINVAL);
    CHECK(err_is(2, "timeout"));
    CHECK_EQ(parse("[server]\nthis line has no equals sign\n"), FG_EINVAL);
    CHECK(err_is(2, "syntax"));
    CHECK_EQ(parse("x = 1\n"), FG_EINVAL);
    CHECK(err_is(1, "outside any section"));
    CHECK_EQ(parse("[server]\nmax_key_bytes = 5000\n"), FG_EINVAL);
    CHECK(err_is(2, "max_key_bytes"));
    /* burst 0 and a cost/limit the algorithm refuses. */
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\nburst = 0\n"), FG_EINVAL);
    CHECK(err_is(4, "burst"));
    /* A line longer than inih's buffer is refused, not split in two. */
    char big[600];
    snprintf(big, sizeof(big), "[server]\nid = %0400d\n", 7);
    CHECK_EQ(parse(big), FG_EINVAL);
    CHECK(err_is(2, "too long"));
    /* At most 198 characters; the line too long is the one named. */
    char line[200];
    memset(line, 'x', sizeof(line));
    line[0] = ';';
    line[198] = '\0';
    snprintf(big, sizeof(big), "[server]\n%s\nid = a\n", line);
    CHECK_EQ(parse(big), 0);
    line[198] = 'x';
    line[199] = '\0';
    snprintf(big, sizeof(big), "[server]\n%s\nid = a\n", line);
    CHECK_EQ(parse(big), FG_EINVAL);
    CHECK(err_is(2, "line too long (at most 198 characters)"));
    /* A comment: a line that starts with ; or #, or ; after a blank. */
    CHECK_EQ(parse("# c\n[server]\n; c\nid = x ; c\n"), 0);
    CHECK_STR(cfg.id, "x");
}

/* Nothing given twice: a section opened again, even right after itself,
 * and a key repeated in its section are refused at the second. */
static void test_duplicates(void)
{
    refused("[limit a]\nrate = 10/s\nkey = ip\n[limit a]\n"
            "rate = 5/s\n",
            4, "[limit a] defined twice");
    refused("[limit a]\nrate = 10/s\nrate = 2/s\nkey = ip\n", 3,
            "'rate' given twice in [limit a] (first on line 2)");
    refused("[server]\nworkers = 1\n; c\nworkers = 2\n", 4,
            "'workers' given twice in [server]");
    refused("[store]\ntimeout = 5ms\n[server]\nid = x\n[store]\n"
            "timeout = 6ms\n",
            6, "'timeout' given twice in [store] (first on line 2)");
    /* An indented line continues the value above (inih): refused as such,
     * an indented "[section]" after a key too. */
    refused("[server]\nid = a\n  b\n", 3,
            "an indented line continues the value of 'id' (line 2)");
    refused("[limit a]\nrate = 1/s\nkey = ip\n  [limit b]\n", 4,
            "indented line continues the value of 'key'");
    /* But [store] url goes on over indented lines, joined as they are
     * (a long shards= list), and is checked whole, at its first line. */
    CHECK_EQ(parse("[store]\nurl = shards=redis://127.0.0.1:1,\n"
                   "  redis://127.0.0.1:2,\n\tredis://127.0.0.1:3\n"
                   "timeout = 5ms\n[limit a]\nrate = 1/s\nkey = ip\n"),
             0);
    CHECK_STR(cfg.store_url, "shards=redis://127.0.0.1:1,redis://"
                             "127.0.0.1:2,redis://127.0.0.1:3");
    refused("[store]\nurl = shards=redis://127.0.0.1:1,\n  bogus://x\n", 2,
            "url: shards: node 2");
    refused("[store]\nurl = redis://127.0.0.1:1\nprefix = a\n  b\n", 4,
            "continues the value of 'prefix'");
    /* Under a [store] header of its own, an indented url is a second url,
     * not more of the first. */
    refused("[store]\nurl = redis://127.0.0.1:1\n[store]\n  url = /1\n", 4,
            "'url' given twice in [store] (first on line 2)");
    /* trusted_proxies and demo_limits go on over indented lines too, a
     * line end parting entries (with or without a comma before it), so
     * that all 32 proxies fit; a comma that ends the list is still a typo,
     * reported at the list's first line. */
    static char px[32 * 24 + 128];
    size_t pn = (size_t)snprintf(px, sizeof(px),
                                 "[server]\ntrusted_proxies = 10.0.0.1,\n");
    for (int i = 1; i < 32; i++)
        pn += (size_t)snprintf(px + pn, sizeof(px) - pn, "  10.0.%d.1%s\n", i,
                               i % 2 ? "," : "");
    snprintf(px + pn, sizeof(px) - pn, "id = x\n");
    refused(px, 2, "trusted_proxies: an empty entry");
    px[pn - 2] = '\n';
    px[pn - 1] = '\0';
    CHECK_EQ(parse(px), 0);
    CHECK_EQ(cfg.nproxies, 32);
    snprintf(px + pn - 1, sizeof(px) - pn + 1, "  ::1\n");
    refused(px, 2, "too many or too long proxies (at most 32)");
    refused("[server]\ntrusted_proxies = 10.0.0.1\n  10.0.0.300\n", 2,
            "trusted_proxies: '10.0.0.300'");
    CHECK_EQ(parse("[server]\ndemo_limits = a,\n  b\n  c\n[limit a]\nrate = "
                   "1/s\nkey = ip\n[limit b]\nrate = 1/s\nkey = ip\n"
                   "[limit c]\nrate = 1/s\nkey = ip\n"),
             0);
    CHECK_EQ(cfg.demo_nchain, 3);
    /* A list may start on the line after its key; a key indented under a
     * list is said to be one, not read as an entry. */
    CHECK_EQ(parse("[server]\ntrusted_proxies =\n  10.0.0.1,\n  10.0.0.2\n"),
             0);
    CHECK_EQ(cfg.nproxies, 2);
    CHECK_EQ(parse("[server]\ndemo_limits =\n  a, b\n[limit a]\nrate = 1/s\n"
                   "key = ip\n[limit b]\nrate = 1/s\nkey = ip\n"),
             0);
    CHECK_EQ(cfg.demo_nchain, 2);
    refused("[server]\ntrusted_proxies = 10.0.0.1\n  id = x\n", 3,
            "an indented line continues the list of 'trusted_proxies' "
            "(line 2): a key goes at the start of its line");
    /* Indented keys right under their header are plain keys. */
    CHECK_EQ(parse("[server]\n  id = a\n"), 0);
    CHECK_STR(cfg.id, "a");
    /* A byte order mark hides no header: the line of a limit stays its. */
    refused("\xef\xbb\xbf[limit a]\nkey = ip\n", 1, "rate is required");
    /* Every key of the most limits a file may hold is checked, each limit
     * with all eleven of its keys (704 keys before the repeat). */
    static char many[64 * 400 + 64];
    size_t at = 0;
    for (int i = 0; i < 64; i++)
        at += (size_t)snprintf(many + at, sizeof(many) - at,
                               "[limit l%d]\nrate = 1/s\nkey = ip\n"
                               "algorithm = token_bucket\nburst = 1\n"
                               "on_failure = open\ntimeout = 5ms\n"
                               "shadow = off\nmode = exact\n"
                               "fallback_servers = 1\ndurable = off\n"
                               "clock = redis\n",
                               i);
    snprintf(many + at, sizeof(many) - at, "rate = 2/s\n");
    CHECK_EQ(parse(many), FG_EINVAL);
    CHECK(strstr(err, "'rate' given twice in [limit l63]") != NULL);
    /* The same key in two limits is no repeat. */
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\n[limit b]\nrate = 2/s\n"
                   "key = ip\n"),
             0);
    CHECK_EQ(cfg.nlimits, 2);
}

/* The line at fault: a bad store URL at its own, a burst the algorithm
 * refuses at the burst's, a rate the algorithm refuses at the rate's. */
static void test_lines(void)
{
    refused("[server]\nid = x\n[store]\nurl = redis://127.0.0.1:abc\n", 4,
            "url: redis url: port");
    refused("[store]\nurl = http://x\n", 2,
            "url: unknown store 'http' (use memory, redis://");
    CHECK_EQ(parse("[store]\nurl = memory\n"), 0);
    CHECK_EQ(parse("[store]\nurl = redis://127.0.0.1:6380/2\n"), 0);
    refused("[limit a]\nrate = 10/s\nkey = ip\nalgorithm = "
            "fixed_window\nburst = 50\n",
            5, "burst applies to token_bucket only");
    refused("[limit a]\nkey = ip\nrate = 9007199254740993/s\n", 3, "rate:");
}

/* What is wrong with a section header is reported at the header's own
 * line, whether or not a key follows; a header inih cannot read is not
 * passed over (inih would leave the keys below it in the section above). */
static void test_headers(void)
{
    refused("[server]\nid = x\n[limit a\nrate = 1/s\nkey = ip\n", 3,
            "section header without ']'");
    refused("[server]\nid = x\n[limit a\n", 3, "section header without ']'");
    refused("[server\nid = x\n", 1, "section header without ']'");
    /* An inline comment ends the header as inih reads it. */
    refused("[limit a ;]\nrate = 1/s\nkey = ip\n", 1,
            "section header without ']'");
    refused("[limits a]\nrate = 1/s\nkey = ip\n", 1,
            "unknown section [limits a]");
    /* inih drops what follows ']': a setting there is refused, not lost. */
    refused("[server] workers = 4\n[limit a]\nrate = 1/s\nkey = ip\n", 1,
            "text after ']' in a section header");
    refused("[server]]\n", 1, "text after ']' in a section header");
    /* A CR ends a line only before its LF: one alone hides no setting. */
    refused("[server]\rworkers = 4\n[limit a]\nrate = 1/s\nkey = ip\n", 1,
            "text after ']' in a section header");
    CHECK_EQ(parse("[server]\r\nid = x\r\n"), 0);
    CHECK_EQ(parse("[server]\r"), 0);
    CHECK_EQ(parse("[server]  ; the server\nid = x\n"), 0);
    refused("[limit a ]\nrate = 1/s\nkey = ip\n", 1,
            "a blank after the limit name (write [limit a])");
    /* A control byte in a value is shown escaped. */
    refused("[server]\nid = a\rb\n", 2, "(read: 'a\\rb')");
    refused("[limits a]\n", 1, "unknown section [limits a]");
    refused("[server]\nid = x\n\n[limit a:b]\nrate = 1/s\nkey = ip\n", 4,
            "limit name must be");
    refused("[limit a:b]\n", 1, "limit name must be");
    refused("[limit]\nrate = 1/s\nkey = ip\n", 1, "[limit] without a name");
    refused("[server]\nid = x\n[limit]\n", 3, "[limit] without a name");
    refused("[limit a]\nrate = 1/s\nkey = ip\n[limit a]\n", 4,
            "[limit a] defined twice");
    /* inih keeps 49 bytes of a section name: longer is refused, not cut
     * into another limit's name. */
    refused("[limit "
            "aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeee]\nrate = 1/s\n"
            "key = ip\n",
            1, "section name longer than 49 characters");
    CHECK_EQ(parse("[limit aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeee]\n"
                   "rate = 1/s\nkey = ip\n"),
             0);
    CHECK_STR(cfg.limits[0].lim.name,
              "aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeee");
    /* A line that is not a header, a key or a comment, before a key that
     * fails for its own reason: the first is reported. */
    refused("[server]\nnonsense\nworkers = 0\n", 2, "syntax error");
    /* The rate's line is kept, for errors found when the limit is built. */
    CHECK_EQ(parse("[limit a]\nkey = ip\n\nrate = 1/s\n"), 0);
    CHECK_EQ(cfg.limits[0].line, 1);
    CHECK_EQ(cfg.limits[0].rate_line, 4);
    /* Comments, blank and CRLF lines, indented keys under a header. */
    CHECK_EQ(parse("; c\r\n\r\n[server] ; the server\r\n  id = x\r\n"
                   "# c\n  ; c\n[limit a]\nrate : 1/s\nkey = ip\n"),
             0);
    CHECK_STR(cfg.id, "x");
}

/* trusted_proxies: a block with host bits set is a typo, refused with the
 * block it would be, and so is an empty entry; a Redis URL with its db twice is
 * refused at its line. */
static void test_values_given_ambiguously(void)
{
    refused("[server]\ntrusted_proxies = 127.0.0.1, 10.0.0.1/8\n", 2,
            "'10.0.0.1/8': host bits set; did you mean 10.0.0.0/8?");
    CHECK_EQ(parse("[server]\ntrusted_proxies = 127.0.0.1, 10.0.0.0/8\n"), 0);
    CHECK_EQ(cfg.nproxies, 2);
    CHECK_EQ(parse("[server]\ntrusted_proxies = 127.0.0.1 10.0.0.0/8\n"), 0);
    CHECK_EQ(cfg.nproxies, 2);
    static const char *empty[] = {"127.0.0.1,,10.0.0.0/8", "127.0.0.1 , ",
                                  ", 127.0.0.1", ","};
    for (size_t i = 0; i < sizeof empty / sizeof *empty; i++) {
        char t[200];
        snprintf(t, sizeof t, "[server]\ntrusted_proxies = %s\n", empty[i]);
        refused(t, 2, "trusted_proxies: an empty entry");
    }
    refused("[server]\nid = x\n[store]\nurl = redis://127.0.0.1:6379/1?db=2\n",
            4, "db given twice");
}

/* A listen address: HOST:PORT, the port digits of 0 to 65535. */
static void test_listen(void)
{
    static const char *bad[] = {"127.0.0.1:99999",
                                "127.0.0.1:65536",
                                "127.0.0.1:-1",
                                "127.0.0.1:8x",
                                "127.0.0.1:",
                                "127.0.0.1",
                                ":",
                                "127.0.0.1:123456"};
    char text[128];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "[server]\nlisten = %s\n", bad[i]);
        CHECK_EQ(parse(text), FG_EINVAL);
        CHECK(err_is(2, "expected HOST:PORT, the port 0..65535"));
    }
    CHECK_EQ(parse("[server]\nlisten = unix:///run/fg.sock\n"), FG_EINVAL);
    CHECK(err_is(2, "(a unix socket is not supported: TCP only)"));
    CHECK_EQ(parse("[server]\nadmin_listen = /run/fg.sock\n"), FG_EINVAL);
    CHECK(err_is(2, "(a unix socket is not supported: TCP only)"));
    /* An IP literal: a name is not looked up, and 999.1.1.1 is no
     * address. */
    static const struct {
        const char *v, *why;
    } names[] = {
        {"999.1.1.1:80", "the host must be an IP address"},
        {"localhost:80", "the host must be an IP address"},
        {"::1:80", "IPv6 goes in brackets"},
        {"[127.0.0.1]:80", "not an IPv6 address inside [ ]"},
        {"[]:80", "not an IPv6 address"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(text, sizeof(text), "[server]\nid = x\nlisten = %s\n",
                 names[i].v);
        refused(text, 3, names[i].why);
    }
    static const char *good[] = {"127.0.0.1:0", "0.0.0.0:8080", "[::1]:8080",
                                 "[::]:80"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(text, sizeof(text), "[server]\nlisten = %s\n", good[i]);
        CHECK_EQ(parse(text), 0);
        CHECK_STR(cfg.listen, good[i]);
    }
    CHECK_EQ(parse("[server]\nlisten = 127.0.0.1:65535\n"), 0);
    CHECK_EQ(parse("[server]\nlisten = 0.0.0.0:0\n"), 0);
    char host[64], port[8];
    CHECK_EQ(
        fg__listen_split("[::1]:8080", host, sizeof(host), port, sizeof(port)),
        0);
    CHECK_STR(host, "::1");
    CHECK_STR(port, "8080");
    CHECK_EQ(fg__listen_split(":80", host, sizeof(host), port, sizeof(port)),
             FG_EINVAL);
    CHECK_EQ(
        fg__listen_split("h:70000", host, sizeof(host), port, sizeof(port)),
        FG_EINVAL);
    /* Not a file: refused, not read as an empty configuration. */
    fg__config_defaults(&cfg);
    CHECK_EQ(fg__config_load("tests", 0, &cfg, err, sizeof(err)), FG_EINVAL);
    CHECK(strstr(err, "tests: a folder, not a file") != NULL);
}

static void test_chain_and_durations(void)
{
    CHECK_EQ(parse("[limit a]\nrate = 1/s\nkey = ip\n[limit b]\nrate = 2/s\n"
                   "key = ip\n[server]\ndemo_api = on\ndemo_limits = b, a\n"),
             0);
    CHECK_EQ(cfg.demo_nchain, 2);
    CHECK_EQ(cfg.demo_chain[0], 1);
    CHECK_EQ(cfg.demo_chain[1], 0);
    unsigned idx[FG_SERVE_MAX_CHAIN], n;
    char why[100];
    CHECK_EQ(fg__config_chain(&cfg, "a,c", idx, &n, why, sizeof(why)),
             FG_EINVAL);
    CHECK(strstr(why, "'c'") != NULL);
    /* Empty names, or names without commas, are refused. */
    static const char *const bad_lists[] = {"a,,b", "a,", ",a", "a b", " , "};
    for (size_t i = 0; i < sizeof(bad_lists) / sizeof(*bad_lists); i++)
        CHECK_EQ(
            fg__config_chain(&cfg, bad_lists[i], idx, &n, why, sizeof(why)),
            FG_EINVAL);
    CHECK_EQ(fg__config_chain(&cfg, " a , b ", idx, &n, why, sizeof(why)),
             FG_OK);
    CHECK_EQ(n, 2);
    /* A limit twice in one request would count the request twice. */
    CHECK_EQ(fg__config_chain(&cfg, "a,b,a", idx, &n, why, sizeof(why)),
             FG_EINVAL);
    CHECK(strstr(why, "limit 'a' listed twice") != NULL);
    refused("[limit a]\nrate = 1/s\nkey = ip\n[server]\ndemo_api = on\n"
            "demo_limits = a,,a\n",
            6, "empty name in 'a,,a'");
    /* Checked when given, demo_api off too. */
    refused("[limit a]\nrate = 1/s\nkey = ip\n[server]\ndemo_limits = b\n", 5,
            "demo_limits: unknown limit 'b'");
    uint32_t ms = 0;
    CHECK_EQ(fg__parse_duration_ms("5ms", &ms), 0);
    CHECK_EQ(ms, 5);
    CHECK_EQ(fg__parse_duration_ms("2s", &ms), 0);
    CHECK_EQ(ms, 2000);
    CHECK_EQ(fg__parse_duration_ms("1min", &ms), 0);
    CHECK_EQ(ms, 60000);
    CHECK_EQ(fg__parse_duration_ms("15", &ms), 0);
    CHECK_EQ(ms, 15);
    CHECK_EQ(fg__parse_duration_ms("0ms", &ms), FG_EINVAL);
    CHECK_EQ(fg__parse_duration_ms("-1s", &ms), FG_EINVAL);
    CHECK_EQ(fg__parse_duration_ms("99999999h", &ms), FG_EINVAL);
}

/* Shadow mode per limit and for the whole server; the admin keys. */
static void test_shadow_and_admin(void)
{
    CHECK_EQ(parse("[limit a]\nkey = ip\nrate = 1/s\nshadow = on\n"
                   "[limit b]\nkey = ip\nrate = 1/s\n"),
             0);
    CHECK_EQ(cfg.limits[0].lim.shadow, 1);
    CHECK_EQ(cfg.limits[1].lim.shadow, 0);
    CHECK_EQ(cfg.shadow, 0);
    /* [server] shadow covers every limit, even one that says off. */
    CHECK_EQ(parse("[limit a]\nkey = ip\nrate = 1/s\nshadow = off\n"
                   "[server]\nshadow = on\n"),
             0);
    CHECK_EQ(cfg.limits[0].lim.shadow, 1);
    refused("[limit a]\nkey = ip\nrate = 1/s\nshadow = maybe\n", 4,
            "shadow must be on or off");
    refused("[server]\nshadow = 2\n", 2, "shadow must be on or off");
    refused("[limit a]\nkey = ip\nrate = 1/s\nshadow = on\nshadow = off\n", 5,
            "given twice");
    /* Admin: off by default; a listen address and a token file. */
    CHECK_EQ(parse("[server]\n"), 0);
    CHECK_EQ(cfg.admin_listen[0], '\0');
    CHECK_EQ(parse("[server]\nadmin_listen = 127.0.0.1:8081\n"
                   "admin_token_file = /etc/fg.token\n"),
             0);
    CHECK_STR(cfg.admin_listen, "127.0.0.1:8081");
    CHECK_STR(cfg.admin_token_file, "/etc/fg.token");
    CHECK_EQ(cfg.admin_token_line, 3);
    CHECK_EQ(parse("[server]\nadmin_listen = off\n"), 0);
    CHECK_EQ(cfg.admin_listen[0], '\0');
    refused("[server]\nadmin_listen = 127.0.0.1:8081\n", 2,
            "admin_listen needs admin_token_file");
    refused("[server]\nadmin_listen = localhost:8081\n"
            "admin_token_file = /t\n",
            2, "admin_listen = localhost:8081");
    refused("[server]\nlisten = 127.0.0.1:9000\n"
            "admin_listen = 127.0.0.1:9000\nadmin_token_file = /t\n",
            3, "admin_listen must differ from listen");
    /* Two ':0' are two free ports. */
    CHECK_EQ(parse("[server]\nlisten = 127.0.0.1:0\n"
                   "admin_listen = 127.0.0.1:0\nadmin_token_file = /t\n"),
             0);
    refused("[server]\nadmin_token_file =\n", 2, "admin_token_file must be");
}

int main(void)
{
    test_shadow_and_admin();
    test_example();
    test_defaults_and_order();
    test_errors();
    test_duplicates();
    test_lines();
    test_headers();
    test_values_given_ambiguously();
    test_listen();
    test_chain_and_durations();
    return TEST_DONE();
}
