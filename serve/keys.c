/* keys.c -- key sources, trusted proxies and query decoding (pure). */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "floodgate.h"
#include "keys.h"

/* The value of hex digit 'c', or -1. */
static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

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
    if (strncmp(s, "ip/", 3) == 0) {
        char *end;
        unsigned long b =
            isdigit((unsigned char)s[3]) ? strtoul(s + 3, &end, 10) : 0;
        if (b < 1 || b > 128 || *end || (s[3] == '0'))
            return seterr(err, errlen,
                          "key = ip/N takes an IPv6 prefix length N of 1 to "
                          "128, not ",
                          s);
        out->kind = FG_KEYSRC_IP;
        out->v6_bits = b == 128 ? 0 : (unsigned)b;
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
        if (err && errlen)
            snprintf(err, errlen,
                     "key must be header:NAME, query:NAME, ip or ip/N%s%s%s",
                     *s ? ", not '" : "", s, *s ? "'" : "");
        return FG_EINVAL;
    }
    if (!valid_name(name)) {
        if (err && errlen)
            snprintf(err, errlen,
                     *name ? "bad name in key = %s (1 to 63 of A-Z a-z 0-9 "
                             "and !#$%%&'*+-.^_`|~)"
                           : "key = %s needs a name after the colon",
                     s);
        return FG_EINVAL;
    }
    memcpy(out->name, name, strlen(name) + 1);
    return 0;
}

/* Clear all but the first 'bits' bits of the 'len' bytes at 'a'. */
static void keep_bits(uint8_t *a, unsigned len, unsigned bits)
{
    for (unsigned i = 0; i < len; i++) {
        unsigned keep = bits >= 8 * (i + 1) ? 8
                        : bits > 8 * i      ? bits - 8 * i
                                            : 0;
        a[i] &= (uint8_t)(0xff00u >> keep);
    }
}

/* 1 when the IPv6 address 'a' is IPv4-mapped (::ffff:a.b.c.d): the IPv4
 * address in its last 4 bytes, as a dual-stack socket shows IPv4 peers. */
static int is_mapped(const uint8_t *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, prefix, sizeof(prefix)) == 0;
}

int fg__cidr_parse(const char *s, fg__cidr *out, char *err, size_t errlen)
{
    char buf[INET6_ADDRSTRLEN + 8];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(buf))
        return seterr(err, errlen, "not an address or block", NULL);
    memcpy(buf, s, n + 1);
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        if (!isdigit((unsigned char)slash[1]))
            return seterr(err, errlen, "no prefix length after '/'", NULL);
        bits = strtol(slash + 1, &end, 10);
        if (*end != '\0')
            return seterr(err, errlen, "bad prefix length", NULL);
    }
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        if (bits > 32)
            return seterr(err, errlen, "prefix length above 32", NULL);
        out->bits = bits < 0 ? 32 : (unsigned)bits;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        if (bits > 128)
            return seterr(err, errlen, "prefix length above 128", NULL);
        out->bits = bits < 0 ? 128 : (unsigned)bits;
    } else {
        return seterr(err, errlen, "not an IP address", NULL);
    }
    /* "10.0.0.1/8" is most likely a typo for a host or for 10.0.0.0/8:
     * which one was meant cannot be told, so it is refused with the
     * block it would be. */
    unsigned len = out->family == AF_INET ? 4 : 16;
    uint8_t net[16];
    memcpy(net, out->addr, len);
    keep_bits(net, len, out->bits);
    if (memcmp(net, out->addr, len) != 0) {
        char text[INET6_ADDRSTRLEN];
        inet_ntop(out->family, net, text, sizeof(text));
        if (err && errlen)
            snprintf(err, errlen, "host bits set; did you mean %s/%u?", text,
                     out->bits);
        return FG_EINVAL;
    }
    /* An IPv4 block written mapped (::ffff:a.b.c.d/N, N >= 96) is that
     * IPv4 block: a peer is matched in its IPv4 form. */
    if (out->family == AF_INET6 && out->bits >= 96 && is_mapped(out->addr)) {
        out->family = AF_INET;
        memmove(out->addr, out->addr + 12, 4);
        memset(out->addr + 4, 0, 12);
        out->bits -= 96;
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
        if (is6 && set[i].family == AF_INET && is_mapped(a6) &&
            in_block(&set[i], a6 + 12))
            return 1;
    }
    return 0;
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

/* A port after an address: 1 to 5 digits, at most 65535. */
static int valid_port(const char *s, size_t n)
{
    if (n == 0 || n > 5 || strspn(s, "0123456789") < n)
        return 0;
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (unsigned long)(s[i] - '0');
    return v <= 65535;
}

/* The canonical text of an IPv4 address in dotted decimal, 'host' being
 * NUL-terminated. inet_pton takes only four decimal octets without leading
 * zeros; what inet_aton reads besides ("010.0.0.1" as 8.0.0.1, "127.1",
 * "0x7f.0.0.1", "2130706433") means another address to a parser that reads
 * octal or hex than to one that reads decimal, so it is ambiguous. */
static int canon_v4(const char *host, char *out, size_t outlen)
{
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) == 1) {
        inet_ntop(AF_INET, &a, out, (socklen_t)outlen);
        return FG_IP_OK;
    }
    if (strspn(host, "0123456789abcdefABCDEFxX.") == strlen(host) &&
        inet_aton(host, &a) != 0)
        return FG_IP_AMBIGUOUS;
    return FG_IP_BAD;
}

/* IPv6 as inet_ntop writes it (lower case, the longest run of zero groups
 * compressed), so that one address is one key whatever its spelling. An
 * IPv4-mapped address (::ffff:a.b.c.d) is the IPv4 address: a dual-stack
 * socket shows IPv4 clients so, and the same client must be one key. */
static int canon_v6(const char *host, char *out, size_t outlen)
{
    uint8_t a[16];
    if (inet_pton(AF_INET6, host, a) != 1)
        return FG_IP_BAD;
    if (is_mapped(a))
        inet_ntop(AF_INET, a + 12, out, (socklen_t)outlen);
    else
        inet_ntop(AF_INET6, a, out, (socklen_t)outlen);
    return FG_IP_OK;
}

int fg__ip_block(char *ip, size_t outlen, unsigned bits)
{
    uint8_t a[16];
    if (!bits || bits >= 128 || !strchr(ip, ':') ||
        inet_pton(AF_INET6, ip, a) != 1)
        return 0;
    keep_bits(a, 16, bits);
    char text[INET6_ADDRSTRLEN];
    if (!inet_ntop(AF_INET6, a, text, sizeof(text)))
        return -1;
    int n = snprintf(ip, outlen, "%s/%u", text, bits);
    return n > 0 && (size_t)n < outlen ? 0 : -1;
}

int fg__ip_canon(const char *s, size_t n, char *out, size_t outlen)
{
    char host[INET6_ADDRSTRLEN + 8];
    if (outlen < INET6_ADDRSTRLEN)
        return FG_IP_BAD;
    if (n == 0 || n >= sizeof(host))
        return FG_IP_BAD;
    if (s[0] == '[') {
        /* "[v6]" or "[v6]:port" (RFC 3986's form, as proxies write it). */
        const char *close = memchr(s, ']', n);
        if (!close)
            return FG_IP_BAD;
        size_t hl = (size_t)(close - s) - 1;
        size_t rest = n - (size_t)(close - s) - 1;
        if (rest > 0 && (close[1] != ':' || !valid_port(close + 2, rest - 1)))
            return FG_IP_BAD;
        memcpy(host, s + 1, hl);
        host[hl] = '\0';
        return canon_v6(host, out, outlen);
    }
    const char *colon = memchr(s, ':', n);
    const char *colon2 =
        colon ? memchr(colon + 1, ':', n - (size_t)(colon - s) - 1) : NULL;
    if (colon && !colon2) {
        /* One colon: IPv4 with a port. (Bare IPv6 has at least two; a bare
         * IPv6 address followed by a port cannot be told from an address,
         * and is read as the address, as written.) */
        size_t hl = (size_t)(colon - s);
        if (!valid_port(colon + 1, n - hl - 1))
            return FG_IP_BAD;
        memcpy(host, s, hl);
        host[hl] = '\0';
        return canon_v4(host, out, outlen);
    }
    memcpy(host, s, n);
    host[n] = '\0';
    return colon ? canon_v6(host, out, outlen) : canon_v4(host, out, outlen);
}

const char *fg__client_ip(const char *peer, const char *xff,
                          const fg__cidr *trusted, unsigned ntrusted, char *out,
                          size_t outlen)
{
    char best[INET6_ADDRSTRLEN];
    if (fg__ip_canon(peer, strlen(peer), best, sizeof(best)) != FG_IP_OK)
        copy_out(best, sizeof(best), peer, strlen(peer));
    if (!xff || !fg__cidr_match(trusted, ntrusted, best)) {
        copy_out(out, outlen, best, strlen(best));
        return NULL;
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
        /* An empty element is no hop (an HTTP list may hold them). */
        int rc =
            a == b ? FG_IP_OK : fg__ip_canon(xff + a, b - a, hop, sizeof(hop));
        /* Where the client should be, what is not an address is refused
         * rather than read one way: an ambiguous one names a client that
         * depends on the reader, and falling back to the proxy's address
         * ("unknown", a zone ID, a name) would lump every such client
         * under one key. */
        if (rc == FG_IP_AMBIGUOUS)
            return "X-Forwarded-For: an IPv4 address with leading zeros or "
                   "in a short or hex form is ambiguous (read as octal or "
                   "hex by some parsers)";
        if (rc != FG_IP_OK)
            return "X-Forwarded-For: where the client is, a hop that is not "
                   "an IP address (such as 'unknown', a name, or an IPv6 "
                   "zone ID)";
        if (a == b) {
            if (start == 0)
                break;
            end = start - 1;
            continue;
        }
        memcpy(best, hop, strlen(hop) + 1);
        if (!fg__cidr_match(trusted, ntrusted, hop))
            break;
        if (start == 0)
            break;
        end = start - 1;
    }
    copy_out(out, outlen, best, strlen(best));
    return NULL;
}

const char *fg__key_check(const char *key, size_t len, size_t max, char *buf,
                          size_t buflen)
{
    if (len == 0)
        return "key is empty";
    if (len > max) {
        snprintf(buf, buflen, "key too long: at most %zu bytes (max_key_bytes)",
                 max);
        return buf;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch < 0x20 || ch == 0x7f)
            return "key contains control characters";
    }
    return NULL;
}

/* Percent-decode [v, end) ('+' is a space) into 'out' (at most 'outlen'
 * bytes with the NUL). The length, -2 when it does not fit, -3 when the
 * encoding is malformed. */
static long decode(const char *v, const char *end, char *out, size_t outlen)
{
    size_t o = 0;
    while (v < end) {
        int ch = (unsigned char)*v;
        if (ch == '%') {
            if (end - v < 3)
                return -3;
            int h = hexval(v[1]), l = hexval(v[2]);
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

long fg__query_get(const char *query, const char *name, char *out,
                   size_t outlen)
{
    if (!query)
        return -1;
    size_t nlen = strlen(name);
    const char *p = query, *found = NULL, *found_end = NULL;
    while (*p) {
        const char *amp = strchr(p, '&');
        const char *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *kend = eq ? eq : end;
        /* Names are compared decoded ("k%65y" is "key"), as an application
         * behind us would read them, so a spelling cannot slip a second
         * value past the check below. */
        size_t rawlen = (size_t)(kend - p);
        int match;
        if (!memchr(p, '%', rawlen) && !memchr(p, '+', rawlen)) {
            /* Nothing to decode: the common case, compared as it is. */
            match = rawlen == nlen && memcmp(p, name, nlen) == 0;
        } else {
            char nbuf[80];
            long kn = decode(p, kend, nbuf,
                             nlen + 2 < sizeof(nbuf) ? nlen + 2 : sizeof(nbuf));
            match =
                kn >= 0 && (size_t)kn == nlen && memcmp(nbuf, name, nlen) == 0;
        }
        if (match) {
            /* Given twice, a parameter would mean whichever value the
             * reader takes (first, last, or both): refused, not guessed. */
            if (found)
                return -4;
            found = eq ? eq + 1 : end;
            found_end = end;
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    if (!found)
        return -1;
    return decode(found, found_end, out, outlen);
}
