/* keys.h -- where a limit's key comes from, and checks on it (pure).
 *
 * A key is a header value, a query parameter, or the client's IP address;
 * the IP is read from X-Forwarded-For only when the peer is a trusted
 * proxy. Nothing here touches a socket: the HTTP layer passes strings. */
#ifndef FG_SERVE_KEYS_H
#define FG_SERVE_KEYS_H

#include <stddef.h>
#include <stdint.h>

typedef enum fg__keysrc_kind {
    FG_KEYSRC_HEADER = 0,
    FG_KEYSRC_IP = 1,
    FG_KEYSRC_QUERY = 2
} fg__keysrc_kind;

typedef struct fg__keysrc {
    fg__keysrc_kind kind;
    char name[64];    /* header or parameter name; empty for ip */
    unsigned v6_bits; /* ip/N: an IPv6 client counts as its /N; 0: whole */
} fg__keysrc;

/* An address block: "10.0.0.0/8", "::1", "127.0.0.1". */
typedef struct fg__cidr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    unsigned bits;
} fg__cidr;

/* Parse "header:NAME", "ip", "ip/N" (N 1 to 128: an IPv6 address counts as
 * its /N block) or "query:NAME". FG_OK or FG_EINVAL with the reason in
 * 'err'. */
int fg__keysrc_parse(const char *s, fg__keysrc *out, char *err, size_t errlen);

/* Parse one address or block. FG_OK, or FG_EINVAL with the reason in 'err'
 * (may be NULL): a block with host bits set ("10.0.0.1/8") is refused. */
int fg__cidr_parse(const char *s, fg__cidr *out, char *err, size_t errlen);

/* 1 when the textual address 'ip' lies in one of the 'n' blocks. */
int fg__cidr_match(const fg__cidr *set, unsigned n, const char *ip);

enum { FG_IP_OK = 0, FG_IP_BAD = 1, FG_IP_AMBIGUOUS = 2 };

/* The canonical text of one address as proxies write it in
 * X-Forwarded-For ('n' bytes at 's'): "1.2.3.4", "1.2.3.4:80",
 * "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:443". IPv6 is written as
 * inet_ntop does; an IPv4-mapped IPv6 address as its IPv4 address. The
 * port is dropped. 'out' holds at least INET6_ADDRSTRLEN bytes. FG_IP_OK,
 * FG_IP_BAD (not an address), or FG_IP_AMBIGUOUS (an IPv4 form that
 * parsers read differently: leading zeros, hex, fewer than four parts). */
int fg__ip_canon(const char *s, size_t n, char *out, size_t outlen);

/* An IPv6 address in canonical text ('ip', 'outlen' bytes) replaced by
 * its /'bits' block, "2001:db8:1:2::/64"; an IPv4 address is left whole.
 * 0, or -1 when it does not fit. */
int fg__ip_block(char *ip, size_t outlen, unsigned bits);

/* The client address of a request that came from 'peer' with the
 * X-Forwarded-For value 'xff' (NULL when absent), in canonical form: 'peer'
 * itself unless it is trusted; then the rightmost address of 'xff' that is
 * not trusted (or the leftmost when all are). An entry that is not an
 * address stops the walk at the last good address. NULL, or the reason to
 * refuse the request when the walk meets an ambiguous address. Writes at
 * most 'outlen' bytes with the NUL. */
const char *fg__client_ip(const char *peer, const char *xff,
                          const fg__cidr *trusted, unsigned ntrusted, char *out,
                          size_t outlen);

/* NULL when 'key' ('len' bytes) is acceptable as a key of at most 'max'
 * bytes, else a one-line reason (a key too long: written in 'buf', with
 * 'max'; 'key' is not read then). */
const char *fg__key_check(const char *key, size_t len, size_t max, char *buf,
                          size_t buflen);

/* Find parameter 'name' in the raw query string 'query' (no '?') and
 * percent-decode its value ('+' is a space) into 'out' (at most 'outlen'
 * bytes, NUL added). Names are compared decoded. Returns the decoded
 * length, -1 when absent, -2 when the value does not fit, -3 when its
 * encoding is malformed, -4 when the parameter is given more than once. */
long fg__query_get(const char *query, const char *name, char *out,
                   size_t outlen);

#endif
