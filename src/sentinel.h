/* sentinel.h -- the Sentinel store's URL and the Sentinel replies it reads,
 * with no I/O (sentinel_url.c); the store itself is store_sentinel.c.
 *
 *   sentinel://[user:password@]HOST:PORT[,HOST:PORT...]/MASTER[?param=...]
 *
 * HOST:PORT are the sentinels ("[v6]:port" for IPv6; the port is
 * required), MASTER the name they monitor. The user and password are the
 * Redis master's (AUTH, as in a redis:// URL); sentinel_user= and
 * sentinel_password= are the sentinels' own. Every other parameter (prefix,
 * db, connect_timeout_ms, lazy, user, password) is the Redis URL's, applied
 * to each master in turn. */
#ifndef FG_SENTINEL_H
#define FG_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#define FG__SENTINELS_MAX     16
#define FG__SENTINEL_NAME_MAX 64
#define FG__SENTINEL_HOST_MAX 256

typedef struct fg__sentinel_addr {
    char host[FG__SENTINEL_HOST_MAX]; /* without brackets */
    int port;
} fg__sentinel_addr;

typedef struct fg__sentinel_url {
    unsigned n;
    fg__sentinel_addr s[FG__SENTINELS_MAX];
    char master[FG__SENTINEL_NAME_MAX + 1];
    char sentinel_user[256];     /* "" when none */
    char sentinel_password[256]; /* "" when none (no AUTH) */
    /* What each master's redis:// URL is made of: the user info as given
     * (still %-encoded, without '@'), and the Redis parameters. */
    char userinfo[512];
    char query[1024];
} fg__sentinel_url;

/* Parse 'url' into 'u'. FG_OK, or FG_EINVAL with the reason in 'err';
 * passwords never appear in 'err'. The Redis parameters are checked as a
 * redis:// URL would check them. */
int fg__sentinel_url_parse(const char *url, fg__sentinel_url *u, char *err,
                           size_t errlen);
/* Overwrite the passwords 'u' holds. */
void fg__sentinel_url_wipe(fg__sentinel_url *u);

/* The redis:// URL of the master at 'host':'port' with the URL's user,
 * password and parameters (with 'lazy', lazy=1 in place of the URL's own),
 * into 'buf'. FG_OK, or FG_EINVAL when it does not fit. It holds the
 * password: wipe it after use. */
int fg__sentinel_master_url(const fg__sentinel_url *u, const char *host,
                            int port, int lazy, char *buf, size_t n);

/* Answers of a sentinel that are configuration errors, not outages. */
enum { FG__SENTINEL_ENOTFOUND = -1100, FG__SENTINEL_ENOTSENTINEL = -1101 };

/* The reply to SENTINEL get-master-addr-by-name: FG_OK with the address in
 * 'host' and '*port'; FG__SENTINEL_ENOTFOUND when the sentinel does not
 * monitor that name (a nil reply); FG_EAUTH when it wants a password;
 * FG__SENTINEL_ENOTSENTINEL when what answered is not a sentinel (a Redis
 * server that does not know the command); FG_EPROTO for anything else.
 * The reason is in 'err'. */
int fg__sentinel_addr_reply(const redisReply *r, char *host, size_t hostlen,
                            int *port, char *err, size_t errlen);

/* The reply to ROLE: 1 for a master, 0 for a replica or a sentinel, -1
 * when it says neither (an error such as NOPERM, or no array). */
int fg__sentinel_role_reply(const redisReply *r);

/* A message of a channel the store subscribes to, as a subscriber
 * receives it: FG__SENTINEL_SWITCH for "+switch-master" ("MASTER old-ip
 * old-port new-ip new-port"), FG__SENTINEL_PROMOTING for
 * "+failover-state-wait-promotion" ("slave NAME ip port @ MASTER ip port":
 * the replica was just told to become the master), each with the new
 * master's address, when it concerns 'master'; else 0. */
enum { FG__SENTINEL_SWITCH = 1, FG__SENTINEL_PROMOTING = 2 };
int fg__sentinel_event(const redisReply *r, const char *master, char *host,
                       size_t hostlen, int *port);

/* For tests: how many times the store switched masters (1 after an open
 * that found one); 0 when 'st' is not a Sentinel store (its master:
 * fg_store_node_addr). */
struct fg_store;
unsigned long fg__store_sentinel_switches(struct fg_store *st);

#endif
