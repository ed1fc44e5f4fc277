/* sentinel_url.c -- the Sentinel store's URL and the Sentinel replies it
 * reads (see sentinel.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "redis_url.h"
#include "sentinel.h"
#include "store.h"
#include "error.h"

#define SCHEME "sentinel://"

/* Percent-decode 's' ('n' bytes) into 'out' ('outlen' bytes with the NUL).
 * FG_OK, or FG_EINVAL for a malformed escape, a NUL, or no room. */
static int decode(const char *s, size_t n, char *out, size_t outlen)
{
    char tmp[1024];
    long len = n < sizeof tmp ? fg__redis_pct_decode(s, n, tmp) : -1;
    if (len < 0 || (size_t)len >= outlen)
        return FG_EINVAL;
    memcpy(out, tmp, (size_t)len + 1);
    return FG_OK;
}

/* A decimal port in 's' ('n' bytes): 1 .. 65535, else 0. */
static int parse_port(const char *s, size_t n)
{
    long v = 0;
    if (n == 0 || n > 5)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= 65535 ? (int)v : 0;
}

/* One sentinel, "host:port" or "[v6]:port" ('n' bytes), as the 'i'th. */
static int parse_addr(fg__sentinel_addr *a, const char *s, size_t n, unsigned i,
                      char *err, size_t errlen)
{
    const char *h = s, *colon;
    size_t hl;
    if (n == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: sentinel %u: empty address", i);
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb || rb + 1 >= s + n || rb[1] != ':')
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sentinel url: sentinel %u: expected "
                              "[address]:port",
                              i);
        h = s + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = memchr(s, ':', n);
        if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sentinel url: sentinel %u: an IPv6 address "
                              "goes in brackets: [::1]:26379",
                              i);
        if (!colon)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sentinel url: sentinel %u: expected host:port "
                              "(a sentinel has no default port)",
                              i);
        hl = (size_t)(colon - s);
    }
    size_t pl = (size_t)(s + n - colon - 1);
    if (hl == 0 || hl >= sizeof a->host)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: sentinel %u: no host or host too "
                          "long",
                          i);
    if (h != s && memchr(h, '%', hl))
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: sentinel %u: an IPv6 zone ID (%%) is "
                          "not supported",
                          i);
    a->port = parse_port(colon + 1, pl);
    if (!a->port)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: sentinel %u: port must be 1 .. 65535",
                          i);
    memcpy(a->host, h, hl);
    a->host[hl] = '\0';
    return FG_OK;
}

static int parse_hosts(fg__sentinel_url *u, const char *s, size_t n, char *err,
                       size_t errlen)
{
    const char *end = s + n;
    if (n == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: no sentinel address (expected "
                          "sentinel://host:port[,host:port...]/master)");
    for (const char *p = s;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (u->n == FG__SENTINELS_MAX)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sentinel url: more than %d sentinels",
                              FG__SENTINELS_MAX);
        int rc = parse_addr(&u->s[u->n], p, len, u->n + 1, err, errlen);
        if (rc != FG_OK)
            return rc;
        for (unsigned i = 0; i < u->n; i++)
            if (u->s[i].port == u->s[u->n].port &&
                !strcasecmp(u->s[i].host, u->s[u->n].host))
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "sentinel url: sentinel %u is sentinel %u "
                                  "again",
                                  u->n + 1, i + 1);
        u->n++;
        if (!comma)
            return FG_OK;
        p = comma + 1;
    }
}

static int parse_master(fg__sentinel_url *u, const char *s, size_t n, char *err,
                        size_t errlen)
{
    if (n == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: no master name (expected "
                          "sentinel://host:port[,host:port...]/master)");
    if (n > FG__SENTINEL_NAME_MAX)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: master name longer than %d bytes",
                          FG__SENTINEL_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || strchr("._-", ch)))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sentinel url: the master name may hold only "
                              "A-Z a-z 0-9 . _ -%s",
                              ch == '/' ? " (a database is given as ?db=N)"
                                        : "");
    }
    memcpy(u->master, s, n);
    u->master[n] = '\0';
    return FG_OK;
}

/* The query: sentinel_user= and sentinel_password= are the store's, the
 * rest goes to each master's URL as it is. */
static int parse_query(fg__sentinel_url *u, const char *q, char *err,
                       size_t errlen)
{
    size_t o = 0;
    int have_user = 0, have_pass = 0;
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        int is_user = n >= 14 && strncmp(q, "sentinel_user=", 14) == 0;
        int is_pass = n >= 18 && strncmp(q, "sentinel_password=", 18) == 0;
        if (is_user || is_pass) {
            if ((is_user && have_user) || (is_pass && have_pass))
                return fg__seterr(
                    err, errlen, FG_EINVAL, "sentinel url: %s given twice",
                    is_user ? "sentinel_user" : "sentinel_password");
            size_t k = is_user ? 14 : 18;
            char *dst = is_user ? u->sentinel_user : u->sentinel_password;
            if (decode(q + k, n - k, dst, sizeof u->sentinel_user) != FG_OK)
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "sentinel url: bad %%-escape in %s, or "
                                  "longer than 255 bytes",
                                  is_user ? "sentinel_user"
                                          : "sentinel_password");
            have_user |= is_user;
            have_pass |= is_pass;
        } else if (n) {
            if (o + n + 2 > sizeof u->query)
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "sentinel url: parameters too long");
            if (o)
                u->query[o++] = '&';
            memcpy(u->query + o, q, n);
            o += n;
            u->query[o] = '\0';
        }
        q += n + (amp != NULL);
    }
    if (have_user && !have_pass)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: sentinel_user needs "
                          "sentinel_password");
    return FG_OK;
}

int fg__sentinel_url_parse(const char *url, fg__sentinel_url *u, char *err,
                           size_t errlen)
{
    int rc;
    memset(u, 0, sizeof *u);
    if (!url || strncmp(url, SCHEME, strlen(SCHEME)) != 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: expected sentinel://");
    const char *rest = url + strlen(SCHEME);
    /* As in a redis:// URL (the password may hold ',' too). */
    const char *at;
    if (fg__url_userinfo_end(rest, &at) != FG_OK)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "sentinel url: an '@' after a parameter's '?NAME=' "
                          "may end a password or be part of the parameter: "
                          "write '@' in a password or a parameter as %%40");
    if (at) {
        size_t n = (size_t)(at - rest);
        if (n >= sizeof u->userinfo)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sentinel url: user and password too long");
        memcpy(u->userinfo, rest, n);
        u->userinfo[n] = '\0';
        rest = at + 1;
    }
    const char *q = strchr(rest, '?');
    size_t n = q ? (size_t)(q - rest) : strlen(rest);
    const char *slash = memchr(rest, '/', n);
    if (!slash)
        rc = n == 0 ? parse_hosts(u, rest, 0, err, errlen)
                    : parse_master(u, "", 0, err, errlen);
    else
        rc = parse_hosts(u, rest, (size_t)(slash - rest), err, errlen);
    if (rc == FG_OK)
        rc = parse_master(u, slash + 1, (size_t)(rest + n - slash - 1), err,
                          errlen);
    if (rc == FG_OK && q)
        rc = parse_query(u, q + 1, err, errlen);
    if (rc == FG_OK) {
        /* The Redis part is checked as the masters' URLs will be. */
        char mu[2048], why[256];
        fg__redis_url r;
        if (fg__sentinel_master_url(u, "127.0.0.1", 6379, 0, mu, sizeof mu) !=
            FG_OK) {
            rc = fg__seterr(err, errlen, FG_EINVAL, "sentinel url: too long");
        } else if ((rc = fg__redis_url_parse(mu, &r, why, sizeof why)) ==
                   FG_OK) {
            fg__redis_url_free(&r);
        } else {
            rc = fg__seterr(err, errlen, rc, "sentinel url: %s", why);
        }
        memset(mu, 0, sizeof mu);
    }
    if (rc != FG_OK)
        fg__sentinel_url_wipe(u);
    return rc;
}

void fg__sentinel_url_wipe(fg__sentinel_url *u)
{
    volatile char *p = u->userinfo;
    for (size_t i = 0; i < sizeof u->userinfo; i++)
        p[i] = 0;
    p = u->sentinel_password;
    for (size_t i = 0; i < sizeof u->sentinel_password; i++)
        p[i] = 0;
    p = u->query; /* may hold password= */
    for (size_t i = 0; i < sizeof u->query; i++)
        p[i] = 0;
}

int fg__sentinel_master_url(const fg__sentinel_url *u, const char *host,
                            int port, int lazy, char *buf, size_t n)
{
    char q[sizeof u->query + 8];
    size_t o = 0;
    /* 'lazy': the URL's own lazy= gives way to lazy=1. */
    for (const char *p = u->query; *p;) {
        size_t len = strcspn(p, "&");
        if (!lazy || strncmp(p, "lazy=", 5) != 0) {
            if (o)
                q[o++] = '&';
            memcpy(q + o, p, len);
            o += len;
        }
        p += len + (p[len] == '&');
    }
    if (lazy) {
        memcpy(q + o, o ? "&lazy=1" : "lazy=1", o ? 8 : 7);
        o += o ? 7 : 6;
    }
    q[o] = '\0';
    int v6 = strchr(host, ':') != NULL;
    int w = snprintf(buf, n, "redis://%s%s%s%s%s:%d%s%s", u->userinfo,
                     u->userinfo[0] ? "@" : "", v6 ? "[" : "", host,
                     v6 ? "]" : "", port, o ? "?" : "", q);
    memset(q, 0, sizeof q);
    return w > 0 && (size_t)w < n ? FG_OK : FG_EINVAL;
}

static int is_str(const redisReply *r)
{
    return r &&
           (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

int fg__sentinel_addr_reply(const redisReply *r, char *host, size_t hostlen,
                            int *port, char *err, size_t errlen)
{
    if (!r)
        return fg__seterr(err, errlen, FG_EPROTO, "no reply");
    if (r->type == REDIS_REPLY_NIL)
        return fg__seterr(err, errlen, FG__SENTINEL_ENOTFOUND,
                          "the sentinel monitors no master of that name");
    if (r->type == REDIS_REPLY_ERROR) {
        if (strncmp(r->str, "NOAUTH", 6) == 0 ||
            strncmp(r->str, "WRONGPASS", 9) == 0 ||
            strstr(r->str, "invalid password") || strstr(r->str, "AUTH"))
            return fg__seterr(err, errlen, FG_EAUTH,
                              "the sentinel refused: %.120s (its password "
                              "is sentinel_password=)",
                              r->str);
        if (strstr(r->str, "unknown command") ||
            strstr(r->str, "nknown subcommand"))
            return fg__seterr(err, errlen, FG__SENTINEL_ENOTSENTINEL,
                              "not a sentinel (it answers %.120s): give the "
                              "sentinels' addresses, not Redis's",
                              r->str);
        return fg__seterr(err, errlen, FG_EPROTO, "the sentinel answers %.120s",
                          r->str);
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        !is_str(r->element[0]) || !is_str(r->element[1]))
        return fg__seterr(err, errlen, FG_EPROTO,
                          "unexpected reply to SENTINEL "
                          "get-master-addr-by-name");
    int p = parse_port(r->element[1]->str, r->element[1]->len);
    if (!p || r->element[0]->len == 0 || r->element[0]->len >= hostlen ||
        strlen(r->element[0]->str) != r->element[0]->len ||
        !fg__redis_host_ok(r->element[0]->str))
        return fg__seterr(err, errlen, FG_EPROTO,
                          "the sentinel gave a bad master address");
    memcpy(host, r->element[0]->str, r->element[0]->len);
    host[r->element[0]->len] = '\0';
    *port = p;
    return FG_OK;
}

int fg__sentinel_role_reply(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        !is_str(r->element[0]))
        return -1;
    return r->element[0]->len == 6 &&
           memcmp(r->element[0]->str, "master", 6) == 0;
}

int fg__sentinel_event(const redisReply *r, const char *master, char *host,
                       size_t hostlen, int *port)
{
    /* One byte more than a master name may hold: a longer name read in
     * the message is cut to that, and then differs from 'master'. */
    char name[FG__SENTINEL_NAME_MAX + 2], h[FG__SENTINEL_HOST_MAX], fmt[80];
    unsigned p;
    int kind;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        !is_str(r->element[0]) || !is_str(r->element[1]) ||
        !is_str(r->element[2]) || strcmp(r->element[0]->str, "message") != 0)
        return 0;
    if (strcmp(r->element[1]->str, "+switch-master") == 0) {
        kind = FG__SENTINEL_SWITCH;
        snprintf(fmt, sizeof fmt, "%%%ds %%*s %%*s %%%ds %%u",
                 FG__SENTINEL_NAME_MAX + 1, FG__SENTINEL_HOST_MAX - 1);
        if (sscanf(r->element[2]->str, fmt, name, h, &p) != 3)
            return 0;
    } else if (strcmp(r->element[1]->str, "+failover-state-wait-promotion") ==
               0) {
        kind = FG__SENTINEL_PROMOTING;
        snprintf(fmt, sizeof fmt, "slave %%*s %%%ds %%u @ %%%ds",
                 FG__SENTINEL_HOST_MAX - 1, FG__SENTINEL_NAME_MAX + 1);
        if (sscanf(r->element[2]->str, fmt, h, &p, name) != 3)
            return 0;
    } else {
        return 0;
    }
    if (p == 0 || p > 65535 || strcmp(name, master) != 0 ||
        strlen(h) >= hostlen || !fg__redis_host_ok(h))
        return 0;
    strcpy(host, h);
    *port = (int)p;
    return kind;
}
