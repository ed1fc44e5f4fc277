/* topology.c -- fuzz target: the replies that tell the Cluster and
 * Sentinel stores where to connect. The input is fed to hiredis's reader;
 * each reply it makes (up to MAX_REPLIES) is read as CLUSTER SLOTS, as a
 * MOVED or ASK error, as Sentinel's get-master-addr-by-name and ROLE
 * replies and as its +switch-master and promotion events. Whatever address
 * they accept must stay that address in the redis:// URL the store then
 * builds: parsed back, the URL names the same host and port. */
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_map.h"
#include "floodgate.h"
#include "reader.h"
#include "redis_url.h"
#include "sentinel.h"

#define MAX_REPLIES 8

static fg__sentinel_url sentinel;
static fg__cluster_map map;

/* 'h' as the URL keeps it: an IPv6 address in one spelling, an
 * IPv4-mapped one as IPv4; a name as it is. */
static void canonical(const char *h, char *out, size_t n)
{
    struct in6_addr a;
    if (inet_pton(AF_INET6, h, &a) != 1)
        snprintf(out, n, "%s", h);
    else if (IN6_IS_ADDR_V4MAPPED(&a))
        inet_ntop(AF_INET, &a.s6_addr[12], out, (socklen_t)n);
    else
        inet_ntop(AF_INET6, &a, out, (socklen_t)n);
}

static int same_host(const char *a, const char *b)
{
    char x[INET6_ADDRSTRLEN + FG__SENTINEL_HOST_MAX],
        y[INET6_ADDRSTRLEN + FG__SENTINEL_HOST_MAX];
    canonical(a, x, sizeof x);
    canonical(b, y, sizeof y);
    return strcmp(x, y) == 0;
}

/* The master URL of 'host':'port' must parse back to them. */
static void round_trip(const char *host, int port)
{
    char url[1024], err[256];
    if (fg__sentinel_master_url(&sentinel, host, port, 1, url, sizeof url) !=
        FG_OK)
        return;
    fg__redis_url u;
    if (fg__redis_url_parse(url, &u, err, sizeof err) != FG_OK)
        __builtin_trap(); /* an accepted host that breaks the URL */
    if (!u.host || !same_host(u.host, host) || u.port != port)
        __builtin_trap(); /* an accepted host that names another */
    fg__redis_url_free(&u);
}

/* "host:port" or "[v6]:port", as the cluster store writes a node. */
static void addr_round_trip(const char *addr)
{
    char host[FG__CLUSTER_ADDR_MAX];
    const char *colon = strrchr(addr, ':');
    if (!colon)
        __builtin_trap();
    size_t hl = (size_t)(colon - addr);
    if (addr[0] == '[') {
        if (hl < 2 || addr[hl - 1] != ']')
            __builtin_trap();
        memcpy(host, addr + 1, hl - 2);
        host[hl - 2] = '\0';
    } else {
        memcpy(host, addr, hl);
        host[hl] = '\0';
    }
    int port = atoi(colon + 1);
    if (port < 1 || port > 65535)
        __builtin_trap();
    round_trip(host, port);
}

static void read_reply(const redisReply *r)
{
    char host[FG__SENTINEL_HOST_MAX], err[256];
    int port;
    if (fg__cluster_map_parse(&map, r, "127.0.0.1") == FG_OK)
        for (unsigned i = 0; i < map.nmasters; i++)
            addr_round_trip(map.master[i]);
    if (r->type == REDIS_REPLY_ERROR) {
        fg__cluster_redirect rd;
        fg__cluster_redirect_parse(r->str, r->len, "127.0.0.1", &rd);
        if (rd.kind)
            addr_round_trip(rd.addr);
    }
    if (fg__sentinel_addr_reply(r, host, sizeof host, &port, err, sizeof err) ==
        FG_OK)
        round_trip(host, port);
    fg__sentinel_role_reply(r);
    if (fg__sentinel_event(r, "mymaster", host, sizeof host, &port))
        round_trip(host, port);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        char err[256];
        if (fg__sentinel_url_parse("sentinel://u:p@127.0.0.1:26379/mymaster"
                                   "?db=2&prefix=fg:",
                                   &sentinel, err, sizeof err) != FG_OK)
            abort();
        ready = 1;
    }
    redisReader *rd = fuzz_reader();
    if (!rd)
        return 0;
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        for (int n = 0; n < MAX_REPLIES; n++) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply)
                break;
            read_reply(reply);
            freeReplyObject(reply);
        }
    }
    redisReaderFree(rd);
    return 0;
}
