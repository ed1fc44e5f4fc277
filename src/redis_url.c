/* redis_url.c -- parsing of Redis store URLs (see redis_url.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/un.h>

#include "redis_url.h"
#include "store.h"
#include "alloc.h"
#include "error.h"

/* The value of hexadecimal digit 'ch', or -1 (for %-decoding). */
static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

long fg__redis_pct_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int h, l;
            if (i + 2 >= n)
                return -1;
            h = hexval(s[i + 1]);
            l = hexval(s[i + 2]);
            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return -1;
            out[o++] = (char)(h * 16 + l);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return (long)o;
}

/* Whether [s, end) reads as addresses, up to a '/': HOST or HOST:PORT,
 * comma-separated, a port all digits (so "user:password" does not). */
static int looks_like_hosts(const char *s, const char *end)
{
    const char *slash = memchr(s, '/', (size_t)(end - s));
    if (slash)
        end = slash;
    if (s == end)
        return 0;
    for (const char *p = s; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *colon = NULL;
        for (const char *c = p; c < e; c++)
            if (*c == ':')
                colon = c;
        if (colon && e > p && p[0] == '[' &&
            memchr(colon, ']', (size_t)(e - colon)))
            colon = NULL; /* inside [IPv6] */
        if (colon) {
            if (colon + 1 == e)
                return 0;
            for (const char *d = colon + 1; d < e; d++)
                if (*d < '0' || *d > '9')
                    return 0;
        }
        p = e + (comma != NULL);
    }
    return 1;
}

int fg__url_userinfo_end(const char *rest, const char **at)
{
    static const char *const names[] = {
        "prefix", "db",       "connect_timeout_ms", "lazy",
        "user",   "password", "sentinel_user",      "sentinel_password"};
    *at = strrchr(rest, '@');
    for (const char *q = strchr(rest, '?'); q; q = strchr(q + 1, '?'))
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t n = strlen(names[i]);
            if (strncmp(q + 1, names[i], n) != 0 || q[1 + n] != '=')
                continue;
            if (!*at || *at < q)
                return FG_OK; /* no '@' in the query: the last one */
            /* An '@' in the query: the password's, in "u:pw?prefix=x@h"
             * ("u:pw" is no address, and no '@' ends a user info before
             * the '?'); else either reading could be meant. */
            int before = memchr(rest, '@', (size_t)(q - rest)) != NULL;
            return before || looks_like_hosts(rest, q) ? FG_EINVAL : FG_OK;
        }
    return FG_OK;
}

/* A percent-decoded copy of 's' ('n' bytes) in '*out'. */
static int dup_decoded(const char *s, size_t n, char **out)
{
    char *p = fg__malloc(n + 1);
    if (!p)
        return FG_ENOMEM;
    if (fg__redis_pct_decode(s, n, p) < 0) {
        fg__free(p);
        return FG_EINVAL;
    }
    fg__free(*out);
    *out = p;
    return FG_OK;
}

/* A decimal in 's' ('n' bytes), at most 'max'. */
static int parse_uint(const char *s, size_t n, unsigned long max,
                      unsigned long *out)
{
    unsigned long v = 0;
    if (n == 0 || n > 10)
        return FG_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return FG_EINVAL;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > max)
        return FG_EINVAL;
    *out = v;
    return FG_OK;
}

/* What a URL has given already, to refuse a second value for the same
 * thing: which one applies (first, last) would be a guess. */
enum {
    GIVEN_PREFIX = 1,
    GIVEN_DB = 2,
    GIVEN_TIMEOUT = 4,
    GIVEN_LAZY = 8,
    GIVEN_USER = 16,
    GIVEN_PASSWORD = 32
};

/* One "name=value" of the query string. Values are never echoed for
 * 'password', which may be given here too. 'given' holds the GIVEN_ bits
 * of what the URL said before. */
static int parse_param(fg__redis_url *u, const char *s, size_t n,
                       unsigned *given, char *err, size_t errlen)
{
    const char *eq = memchr(s, '=', n);
    /* After a password, what looks like a parameter may be the rest of
     * it (an '&' not written %26): not echoed. */
    if (!eq && (*given & GIVEN_PASSWORD))
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: a parameter after the password has no "
                          "value (an '&' in a password is written %%26)");
    if (!eq)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: parameter '%.*s' has no value",
                          (int)(n > 40 ? 40 : n), s);
    size_t kl = (size_t)(eq - s), vl = n - kl - 1;
    const char *v = eq + 1;
    unsigned long x;
#define KEY_IS(lit) (kl == sizeof(lit) - 1 && memcmp(s, lit, kl) == 0)
    unsigned bit = KEY_IS("prefix")               ? GIVEN_PREFIX
                   : KEY_IS("db")                 ? GIVEN_DB
                   : KEY_IS("connect_timeout_ms") ? GIVEN_TIMEOUT
                   : KEY_IS("lazy")               ? GIVEN_LAZY
                   : KEY_IS("user")               ? GIVEN_USER
                   : KEY_IS("password")           ? GIVEN_PASSWORD
                                                  : 0;
    if (bit & *given) {
        if (bit == GIVEN_DB)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: db given twice (in the path and "
                              "as ?db=, or as ?db= twice): give it once");
        if (bit == GIVEN_USER || bit == GIVEN_PASSWORD)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: %s given twice (before '@' and as "
                              "a parameter, or as a parameter twice)",
                              bit == GIVEN_USER ? "user" : "password");
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: parameter '%.*s' given twice", (int)kl,
                          s);
    }
    *given |= bit;
    if (KEY_IS("prefix")) {
        char tmp[FG__REDIS_PREFIX_MAX + 1];
        long dl;
        if (vl > FG__REDIS_PREFIX_MAX)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: prefix longer than %d bytes",
                              FG__REDIS_PREFIX_MAX);
        dl = fg__redis_pct_decode(v, vl, tmp);
        if (dl < 0)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: bad %%-escape in prefix");
        memcpy(u->prefix, tmp, (size_t)dl + 1);
        u->prefixlen = (size_t)dl;
    } else if (KEY_IS("db")) {
        if (parse_uint(v, vl, 1000000, &x) != FG_OK)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: db must be a number");
        u->db = (unsigned)x;
    } else if (KEY_IS("connect_timeout_ms")) {
        if (parse_uint(v, vl, 600000, &x) != FG_OK || x == 0)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: connect_timeout_ms must be 1 .. "
                              "600000");
        u->connect_timeout_ms = (uint32_t)x;
    } else if (KEY_IS("lazy")) {
        if (parse_uint(v, vl, 1, &x) != FG_OK)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: lazy must be 0 or 1");
        u->lazy = (int)x;
    } else if (KEY_IS("user") || KEY_IS("password")) {
        int rc = dup_decoded(v, vl, KEY_IS("user") ? &u->user : &u->password);
        if (rc == FG_ENOMEM)
            return fg__seterr(err, errlen, rc, "out of memory");
        if (rc != FG_OK)
            return fg__seterr(err, errlen, rc, "redis url: bad %%-escape in %s",
                              KEY_IS("user") ? "user" : "password");
    } else if (*given & GIVEN_PASSWORD) {
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: an unknown parameter after the "
                          "password (known: prefix, db, connect_timeout_ms, "
                          "lazy, user, password; an '&' in a password is "
                          "written %%26)");
    } else {
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: unknown parameter '%.*s' (known: "
                          "prefix, db, connect_timeout_ms, lazy, user, "
                          "password)",
                          (int)(kl > 40 ? 40 : kl), s);
    }
#undef KEY_IS
    return FG_OK;
}

static int parse_query(fg__redis_url *u, const char *q, unsigned given,
                       char *err, size_t errlen)
{
    if (u->user)
        given |= GIVEN_USER;
    if (u->password)
        given |= GIVEN_PASSWORD;
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        if (n) {
            int rc = parse_param(u, q, n, &given, err, errlen);
            if (rc != FG_OK)
                return rc;
        }
        q += n + (amp != NULL);
    }
    return FG_OK;
}

/* "user:password", ":password" or "user" ('n' bytes). */
static int parse_userinfo(fg__redis_url *u, const char *s, size_t n, char *err,
                          size_t errlen)
{
    const char *colon = memchr(s, ':', n);
    size_t ul = colon ? (size_t)(colon - s) : n;
    int rc = FG_OK;
    if (ul)
        rc = dup_decoded(s, ul, &u->user);
    if (rc == FG_OK && colon)
        rc = dup_decoded(colon + 1, n - ul - 1, &u->password);
    if (rc == FG_ENOMEM)
        return fg__seterr(err, errlen, rc, "out of memory");
    if (rc != FG_OK)
        return fg__seterr(err, errlen, rc,
                          "redis url: bad %%-escape in user or password");
    return FG_OK;
}

/* "host", "host:port", "[v6]" or "[v6]:port" ('n' bytes). */
static int parse_hostport(fg__redis_url *u, const char *s, size_t n, char *err,
                          size_t errlen)
{
    const char *h = s, *port = NULL;
    size_t hl;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: unclosed '[' in host");
        h = s + 1;
        hl = (size_t)(rb - h);
        if (rb + 1 < s + n) {
            if (rb[1] != ':')
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "redis url: expected ':' after ']'");
            port = rb + 2;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: an IPv6 address goes in brackets: "
                              "redis://[::1]:6379");
        hl = colon ? (size_t)(colon - s) : n;
        if (colon)
            port = colon + 1;
    }
    if (hl == 0)
        return fg__seterr(err, errlen, FG_EINVAL, "redis url: no host");
    if (h != s && memchr(h, '%', hl))
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: an IPv6 zone ID (%%) is not supported: "
                          "give a global or loopback address");
    if (port) {
        unsigned long p;
        if (parse_uint(port, (size_t)(s + n - port), 65535, &p) != FG_OK ||
            p == 0)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: port must be 1 .. 65535, not "
                              "'%.*s'",
                              (int)(s + n - port < 40 ? s + n - port : 40),
                              port);
        u->port = (int)p;
    }
    u->host = fg__strndup(h, hl);
    if (!u->host)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    /* An IPv6 address is named as inet_ntop writes it, an IPv4-mapped one
     * as IPv4: one node has one name (a shard's place on the ring, and
     * "listed twice"), however it was spelled. */
    struct in6_addr a6;
    char canon[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET6, u->host, &a6) == 1) {
        if (IN6_IS_ADDR_V4MAPPED(&a6))
            inet_ntop(AF_INET, a6.s6_addr + 12, canon, sizeof(canon));
        else
            inet_ntop(AF_INET6, &a6, canon, sizeof(canon));
        char *c = fg__strndup(canon, strlen(canon));
        if (!c)
            return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        fg__free(u->host);
        u->host = c;
    }
    return FG_OK;
}

static int parse_tcp(fg__redis_url *u, const char *rest, char *err,
                     size_t errlen)
{
    const char *at;
    if (fg__url_userinfo_end(rest, &at) != FG_OK)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "redis url: an '@' after a parameter's '?NAME=' "
                          "may end a password or be part of the parameter: "
                          "write '@' in a password or a parameter as %%40");
    const char *q = strchr(at ? at : rest, '?');
    size_t n = q ? (size_t)(q - rest) : strlen(rest);
    int rc;
    if (at) {
        rc = parse_userinfo(u, rest, (size_t)(at - rest), err, errlen);
        if (rc != FG_OK)
            return rc;
        n -= (size_t)(at + 1 - rest);
        rest = at + 1;
    }
    const char *slash = memchr(rest, '/', n);
    size_t hn = slash ? (size_t)(slash - rest) : n;
    rc = parse_hostport(u, rest, hn, err, errlen);
    if (rc != FG_OK)
        return rc;
    unsigned given = 0;
    if (slash && hn + 1 < n) {
        unsigned long db;
        if (parse_uint(slash + 1, n - hn - 1, 1000000, &db) != FG_OK)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "redis url: db after '/' must be a number "
                              "from 0 to 1000000");
        u->db = (unsigned)db;
        given |= GIVEN_DB;
    }
    return q ? parse_query(u, q + 1, given, err, errlen) : FG_OK;
}

static int parse_unix(fg__redis_url *u, const char *rest, char *err,
                      size_t errlen)
{
    const char *q = strchr(rest, '?');
    size_t n = q ? (size_t)(q - rest) : strlen(rest);
    if (n < 2 || rest[0] != '/')
        return fg__seterr(err, errlen, FG_EINVAL,
                          "unix url: expected unix:///absolute/path.sock");
    int rc = dup_decoded(rest, n, &u->path);
    if (rc == FG_ENOMEM)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    if (rc != FG_OK)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "unix url: bad percent-encoding in the path");
    /* The kernel's limit: a longer path would be cut to another one. */
    size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
    if (strlen(u->path) > max)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "unix url: the socket path is %zu bytes, over the "
                          "system's %zu",
                          strlen(u->path), max);
    return q ? parse_query(u, q + 1, 0, err, errlen) : FG_OK;
}

int fg__redis_url_parse(const char *url, fg__redis_url *u, char *err,
                        size_t errlen)
{
    int rc;
    memset(u, 0, sizeof(*u));
    u->port = 6379;
    memcpy(u->prefix, "fg:", 4);
    u->prefixlen = 3;
    u->connect_timeout_ms = 1000;
    if (!url)
        return fg__seterr(err, errlen, FG_EINVAL, "redis url: missing");
    if (strncmp(url, "redis://", 8) == 0)
        rc = parse_tcp(u, url + 8, err, errlen);
    else if (strncmp(url, "unix://", 7) == 0)
        rc = parse_unix(u, url + 7, err, errlen);
    else
        rc = fg__seterr(err, errlen, FG_EINVAL,
                        "redis url: expected redis:// or unix://");
    if (rc != FG_OK)
        fg__redis_url_free(u);
    return rc;
}

void fg__redis_url_free(fg__redis_url *u)
{
    fg__free(u->host);
    fg__free(u->path);
    fg__free(u->user);
    if (u->password) {
        /* Do not leave the secret in freed memory. */
        volatile char *p = u->password;
        while (*p)
            *p++ = 0;
    }
    fg__free(u->password);
    u->host = u->path = u->user = u->password = NULL;
}

void fg__redis_url_name(const fg__redis_url *u, char *buf, size_t n)
{
    if (u->path)
        snprintf(buf, n, "%s/%u", u->path, u->db);
    else if (strchr(u->host ? u->host : "", ':'))
        snprintf(buf, n, "[%s]:%d/%u", u->host, u->port, u->db);
    else
        snprintf(buf, n, "%s:%d/%u", u->host ? u->host : "?", u->port, u->db);
}

/* Append 's' ('len' bytes) to 'buf' at '*o', percent-encoding all but
 * unreserved characters. */
static void pct_encode(char *buf, size_t n, size_t *o, const char *s,
                       size_t len)
{
    for (size_t i = 0; i < len && *o + 4 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || strchr("-._~", c))
            buf[(*o)++] = (char)c;
        else
            *o += (size_t)snprintf(buf + *o, n - *o, "%%%02X", c);
    }
    buf[*o] = '\0';
}

int fg__redis_host_ok(const char *h)
{
    for (const char *c = h; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr(".-_:", *c))
            return 0;
    return *h != '\0';
}

int fg__redis_url_for(const fg__redis_url *u, const char *addr, char *buf,
                      size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "redis://");
    if (u->user)
        pct_encode(buf, n, &o, u->user, strlen(u->user));
    if (u->password) {
        if (o + 1 < n)
            buf[o++] = ':';
        pct_encode(buf, n, &o, u->password, strlen(u->password));
    }
    if ((u->user || u->password) && o + 1 < n)
        buf[o++] = '@';
    int w = snprintf(buf + o, n - o,
                     "%s?lazy=1&connect_timeout_ms=%u&prefix=", addr,
                     (unsigned)u->connect_timeout_ms);
    if (w < 0 || (size_t)w >= n - o)
        return FG_ERANGE;
    o += (size_t)w;
    pct_encode(buf, n, &o, u->prefix, u->prefixlen);
    return o + 8 < n ? FG_OK : FG_ERANGE;
}

void fg__redis_url_where(const fg__redis_url *u, char *buf, size_t n)
{
    if (u->path)
        snprintf(buf, n, "%s db %u", u->path, u->db);
    else if (strchr(u->host ? u->host : "", ':'))
        snprintf(buf, n, "[%s]:%d db %u", u->host, u->port, u->db);
    else
        snprintf(buf, n, "%s:%d db %u", u->host ? u->host : "?", u->port,
                 u->db);
}
