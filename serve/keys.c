/* keys.c -- key sources, trusted proxies and query decoding (pure). */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "floodgate.h"
#include "keys.h"
#include "store.h"

static int seterr(char *err, size_t errlen, const char *msg, const char *arg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s%s", msg, arg ? arg : "");
    return FG_EINVAL;
}

/* A header or parameter name: the HTTP token characters, so that a name
 * never needs quoting and never carries a separator. */
static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && !strchr("!#$%&'*+-.^_`|~", ch))
            return 0;
    }
    return 1;
}

int fg__keysrc_parse(const char *s, fg__keysrc *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (strcmp(s, "ip") == 0) {
        out->kind = FG_KEYSRC_IP;
        return 0;
    }
    const char *name;
    if (strncmp(s, "header:", 7) == 0) {
        out->kind = FG_KEYSRC_HEADER;
        name = s + 7;
    } else if (strncmp(s, "query:", 6) == 0) {
        out->kind = FG_KEYSRC_QUERY;
        name = s + 6;
    } else {
        return seterr(err, errlen,
                      "key must be header:NAME, ip or query:NAME, not ", s);
    }
    if (!valid_name(name))
        return seterr(err, errlen, "bad name in key = ", s);
    memcpy(out->name, name, strlen(name) + 1);
    return 0;
}

int fg__cidr_parse(const char *s, fg__cidr *out)
{
    char buf[INET6_ADDRSTRLEN + 8];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(buf))
        return FG_EINVAL;
    memcpy(buf, s, n + 1);
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        if (!isdigit((unsigned char)slash[1]))
            return FG_EINVAL;
        bits = strtol(slash + 1, &end, 10);
        if (*end != '\0')
            return FG_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        if (bits > 32)
            return FG_EINVAL;
        out->bits = bits < 0 ? 32 : (unsigned)bits;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        if (bits > 128)
            return FG_EINVAL;
        out->bits = bits < 0 ? 128 : (unsigned)bits;
    } else {
        return FG_EINVAL;
    }
    return 0;
}

static int in_block(const fg__cidr *c, const uint8_t *a)
{
    unsigned full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(c->addr, a, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (c->addr[full] & mask) == (a[full] & mask);
}

int fg__cidr_match(const fg__cidr *set, unsigned n, const char *ip)
{
    uint8_t a4[4], a6[16];
    int is4 = inet_pton(AF_INET, ip, a4) == 1;
    int is6 = !is4 && inet_pton(AF_INET6, ip, a6) == 1;
    if (!is4 && !is6)
        return 0;
    for (unsigned i = 0; i < n; i++) {
        if (is4 && set[i].family == AF_INET && in_block(&set[i], a4))
            return 1;
        if (is6 && set[i].family == AF_INET6 && in_block(&set[i], a6))
            return 1;
        /* An IPv4 peer seen through a dual-stack socket (::ffff:a.b.c.d)
         * matches IPv4 blocks. */
        if (is6 && set[i].family == AF_INET && a6[10] == 0xff &&
            a6[11] == 0xff && memcmp(a6, "\0\0\0\0\0\0\0\0\0\0", 10) == 0 &&
            in_block(&set[i], a6 + 12))
            return 1;
    }
    return 0;
}

static int valid_ip(const char *s)
{
    uint8_t a[16];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static void copy_out(char *out, size_t outlen, const char *s, size_t n)
{
    if (outlen == 0)
        return;
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

void fg__client_ip(const char *peer, const char *xff, const fg__cidr *trusted,
                   unsigned ntrusted, char *out, size_t outlen)
{
    char best[INET6_ADDRSTRLEN];
    copy_out(best, sizeof(best), peer, strlen(peer));
    if (!xff || !fg__cidr_match(trusted, ntrusted, peer)) {
        copy_out(out, outlen, best, strlen(best));
        return;
    }
    /* Walk from the right: each hop appended the address it saw. The first
     * address not added by one of our proxies is the client. */
    size_t end = strlen(xff);
    for (;;) {
        size_t start = end;
        while (start > 0 && xff[start - 1] != ',')
            start--;
        size_t a = start, b = end;
        while (a < b && (xff[a] == ' ' || xff[a] == '\t'))
            a++;
        while (b > a && (xff[b - 1] == ' ' || xff[b - 1] == '\t'))
            b--;
        char hop[INET6_ADDRSTRLEN];
        if (b - a == 0 || b - a >= sizeof(hop))
            break;
        memcpy(hop, xff + a, b - a);
        hop[b - a] = '\0';
        if (!valid_ip(hop))
            break;
        memcpy(best, hop, b - a + 1);
        if (!fg__cidr_match(trusted, ntrusted, hop))
            break;
        if (start == 0)
            break;
        end = start - 1;
    }
    copy_out(out, outlen, best, strlen(best));
}

const char *fg__key_check(const char *key, size_t len, size_t max)
{
    if (len == 0)
        return "key is empty";
    if (len > max)
        return "key too long";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch < 0x20 || ch == 0x7f)
            return "key contains control characters";
    }
    return NULL;
}

long fg__query_get(const char *query, const char *name, char *out,
                   size_t outlen)
{
    if (!query)
        return -1;
    size_t nlen = strlen(name);
    const char *p = query;
    while (*p) {
        const char *amp = strchr(p, '&');
        const char *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *kend = eq ? eq : end;
        if ((size_t)(kend - p) == nlen && memcmp(p, name, nlen) == 0) {
            const char *v = eq ? eq + 1 : end;
            size_t o = 0;
            while (v < end) {
                int ch = (unsigned char)*v;
                if (ch == '%') {
                    if (end - v < 3)
                        return -3;
                    int h = fg__hexval(v[1]), l = fg__hexval(v[2]);
                    if (h < 0 || l < 0)
                        return -3;
                    ch = h * 16 + l;
                    v += 3;
                } else {
                    if (ch == '+')
                        ch = ' ';
                    v++;
                }
                if (o + 1 >= outlen)
                    return -2;
                out[o++] = (char)ch;
            }
            if (outlen == 0)
                return -2;
            out[o] = '\0';
            return (long)o;
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    return -1;
}
