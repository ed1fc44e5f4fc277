/* cluster_map.c -- see cluster_map.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_map.h"
#include "floodgate.h"
#include "redis_url.h"

uint16_t fg__crc16(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (uint16_t)(crc << 1 ^ 0x1021)
                               : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned fg__cluster_keyslot(const void *key, size_t len)
{
    const char *k = key, *open = memchr(k, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open + 1 - k);
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return fg__crc16(open + 1, (size_t)(close - open - 1)) &
                   (FG__CLUSTER_SLOTS - 1);
    }
    return fg__crc16(k, len) & (FG__CLUSTER_SLOTS - 1);
}

int fg__cluster_map_find(const fg__cluster_map *m, const char *addr)
{
    for (unsigned i = 0; i < m->nmasters; i++)
        if (strcmp(m->master[i], addr) == 0)
            return (int)i;
    return -1;
}

/* "host:port" of a node's entry {host, port, id, ...} into 'out'. A null
 * or empty host is the node asked ('self'): Redis's unknown-endpoint. A
 * host of "?" (a host name the node does not know) cannot be reached:
 * FG__CLUSTER_NO_ADDR, its slots left to MOVED. */
static int node_addr(const redisReply *e, const char *self, char *out)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
        (e->element[0]->type != REDIS_REPLY_STRING &&
         e->element[0]->type != REDIS_REPLY_NIL) ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->integer <= 0 || e->element[1]->integer > 65535)
        return FG_EPROTO;
    const char *h =
        e->element[0]->type == REDIS_REPLY_NIL ? "" : e->element[0]->str;
    if (!strcmp(h, "?"))
        return FG__CLUSTER_NO_ADDR;
    if (!*h)
        h = self;
    if (!fg__redis_host_ok(h))
        return FG_EPROTO;
    int n = snprintf(out, FG__CLUSTER_ADDR_MAX,
                     strchr(h, ':') ? "[%s]:%lld" : "%s:%lld", h,
                     e->element[1]->integer);
    return n > 0 && n < FG__CLUSTER_ADDR_MAX ? FG_OK : FG_EPROTO;
}

int fg__cluster_map_parse(fg__cluster_map *m, const redisReply *r,
                          const char *host)
{
    memset(m, 0, sizeof(*m));
    memset(m->slot, 255, sizeof(m->slot));
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return FG_EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        char addr[FG__CLUSTER_ADDR_MAX];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER)
            return FG_EPROTO;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (lo < 0 || hi < lo || hi >= FG__CLUSTER_SLOTS)
            return FG_EPROTO;
        int rc = node_addr(e->element[2], host, addr);
        if (rc == FG__CLUSTER_NO_ADDR)
            continue;
        if (rc != FG_OK)
            return FG_EPROTO;
        int k = fg__cluster_map_find(m, addr);
        if (k < 0) {
            if (m->nmasters == FG__CLUSTER_NODES_MAX)
                return FG_ERANGE;
            k = (int)m->nmasters++;
            strcpy(m->master[k], addr);
        }
        memset(m->slot + lo, k, (size_t)(hi - lo + 1));
    }
    return m->nmasters ? FG_OK : FG_EPROTO;
}

void fg__cluster_redirect_parse(const char *s, size_t len, const char *self,
                                fg__cluster_redirect *rd)
{
    char buf[FG__CLUSTER_ADDR_MAX + 32];
    unsigned slot;
    memset(rd, 0, sizeof(*rd));
    if (!s || len >= sizeof(buf))
        return;
    memcpy(buf, s, len);
    buf[len] = '\0';
    int kind = !strncmp(buf, "MOVED ", 6) ? FG__CLUSTER_MOVED
               : !strncmp(buf, "ASK ", 4) ? FG__CLUSTER_ASK
                                          : 0;
    char *p = buf + (kind == FG__CLUSTER_MOVED ? 6 : 4), *end;
    if (!kind)
        return;
    slot = (unsigned)strtoul(p, &end, 10);
    if (end == p || *end != ' ' || slot >= FG__CLUSTER_SLOTS ||
        strlen(end + 1) == 0 || strlen(end + 1) >= FG__CLUSTER_ADDR_MAX ||
        !strrchr(end + 1, ':'))
        return;
    const char *a = end + 1, *colon = strrchr(a, ':');
    /* It goes into a URL as it is: a port, and a host (bracketed or not)
     * that fg__redis_host_ok takes, or none. */
    char host[FG__CLUSTER_ADDR_MAX];
    size_t hl = (size_t)(colon - a);
    int bracketed = hl >= 2 && a[0] == '[' && a[hl - 1] == ']';
    memcpy(host, a + bracketed, hl - 2 * bracketed);
    host[hl - 2 * bracketed] = '\0';
    char *pend;
    unsigned long port = strtoul(colon + 1, &pend, 10);
    if (!isdigit((unsigned char)colon[1]) || *pend || port < 1 ||
        port > 65535 || (hl && !fg__redis_host_ok(host)))
        return;
    int n;
    if (!hl && (!self || !*self))
        return;
    if (!hl) /* no host: the node's that sent it */
        n = snprintf(rd->addr, sizeof(rd->addr),
                     strchr(self, ':') ? "[%s]:%lu" : "%s:%lu", self, port);
    else
        /* An IPv6 address, bracketed or not (as Redis sends it): bracketed,
         * as the map holds it. */
        n = snprintf(rd->addr, sizeof(rd->addr),
                     strchr(host, ':') ? "[%s]:%lu" : "%s:%lu", host, port);
    if (n < 0 || (size_t)n >= sizeof(rd->addr))
        return;
    rd->kind = kind;
    rd->slot = slot;
}
