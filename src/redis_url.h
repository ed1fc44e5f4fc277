/* redis_url.h -- parsing of Redis store URLs, with no I/O.
 *
 *   redis://[user:password@]host[:port][/db][?param=value&...]
 *   unix:///path/redis.sock[?db=N&param=value&...]
 *
 * Parameters: prefix (key prefix, default "fg:"), db (unix only; redis://
 * takes it from the path), connect_timeout_ms (the probe at open, default
 * 1000), lazy (1: do not probe the server at open). User, password and prefix
 * may be percent-encoded. A value given twice (a db in the path and as
 * ?db=, a parameter repeated, a user or password before '@' and as a
 * parameter) is refused. */
#ifndef FG_REDIS_URL_H
#define FG_REDIS_URL_H

#include <stddef.h>
#include <stdint.h>

#define FG__REDIS_PREFIX_MAX 128

typedef struct fg__redis_url {
    char *host;     /* NULL for a unix socket */
    int port;       /* 6379 unless given */
    char *path;     /* the unix socket path, NULL for TCP */
    char *user;     /* NULL: no ACL user (AUTH password alone) */
    char *password; /* NULL: no AUTH */
    unsigned db;    /* 0 unless given */
    char prefix[FG__REDIS_PREFIX_MAX + 1];
    size_t prefixlen;
    uint32_t connect_timeout_ms;
    int lazy;
} fg__redis_url;

/* Parse 'url' into 'u' (owning its strings; release with
 * fg__redis_url_free). FG_OK, or FG_EINVAL with the reason in 'err'; the
 * password never appears in 'err'. */
int fg__redis_url_parse(const char *url, fg__redis_url *u, char *err,
                        size_t errlen);
void fg__redis_url_free(fg__redis_url *u);

/* Percent-decode 's' ('n' bytes) into 'out' (room for 'n' + 1 bytes).
 * Returns the decoded length, or -1 for a malformed escape or a NUL. */
long fg__redis_pct_decode(const char *s, size_t n, char *out);
/* In 'rest', a URL after its "scheme://": in '*at' the '@' that ends the
 * user info (the last one), or NULL when there is none. A password may
 * hold '/', ':', '?' and '@' as they are. FG_EINVAL when an '@' comes after
 * the first '?' followed by a parameter's name and '=', and another '@' or
 * what reads as addresses (HOST[:PORT],...) comes before that '?': the
 * '@' may then end a password or be a parameter's ("h:1?password=a@b"),
 * and is refused rather than guessed (the error must quote neither). */
int fg__url_userinfo_end(const char *rest, const char **at);

/* Where 'u' points, for messages: "host:port db N" or "/path.sock db N". */
void fg__redis_url_where(const fg__redis_url *u, char *buf, size_t n);
/* The node's name, for metrics and the shards' ring: "host:port/db"
 * ("[v6]:port/db", "/path.sock/db"). */
void fg__redis_url_name(const fg__redis_url *u, char *buf, size_t n);

/* 1 when 'h', a host a server named (a Cluster node, a Sentinel's
 * master), can be one: a name, an IPv4 or an IPv6 address. It goes into a
 * URL as it is, so nothing else ('?', '@', '/', '%'...) may. */
int fg__redis_host_ok(const char *h);

/* A redis:// URL with the user, password, prefix and connect timeout of
 * 'u' for the node at 'addr' ("host:port", "[v6]:port"), lazy=1, into
 * 'buf' (percent-encoded). FG_OK, or FG_ERANGE when it does not fit. */
int fg__redis_url_for(const fg__redis_url *u, const char *addr, char *buf,
                      size_t n);

#endif
