/* config.h -- the configuration of `floodgate serve`, parsed from INI.
 *
 * Pure: parsing reads a FILE (a real file or fmemopen()) and fills a struct;
 * it opens no store and binds no socket, so a reload can be validated in
 * full before anything running is touched. */
#ifndef FG_SERVE_CONFIG_H
#define FG_SERVE_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "floodgate.h"
#include "keys.h"

#define FG_SERVE_MAX_LIMITS  64
#define FG_SERVE_MAX_CHAIN   8
#define FG_SERVE_MAX_PROXIES 32
#define FG_SERVE_MAX_WORKERS 64

/* One [limit NAME] section. */
typedef struct fg__serve_limit {
    fg_limit lim;     /* name, rate, algorithm, policy */
    fg__keysrc key;   /* where the key comes from */
    int line;         /* the section's "[limit NAME]" line, for messages */
    int rate_line;    /* the line of its rate, for messages */
    int durable_line; /* the line of "durable = replica" (0: none) */
    int has_rate;     /* rate given */
    int has_timeout;  /* timeout given (else [store] timeout) */
    int has_key;      /* key given */
    /* local_keys (sync and lease): the most keys each worker keeps here;
     * 0: the library's default. */
    uint64_t local_keys;
} fg__serve_limit;

typedef struct fg__serve_config {
    /* [server] */
    char listen[128];
    unsigned workers;
    char id[64];
    int demo_api;
    /* Limits checked by POST /bookings, in order; the default is the
     * single limit "bookings". */
    unsigned demo_chain[FG_SERVE_MAX_CHAIN];
    unsigned demo_nchain;
    int demo_line;
    /* FG_SERVE_MAX_CHAIN names, each with ", " */
    char demo_limits[FG_SERVE_MAX_CHAIN * (FG_NAME_MAX + 2)];
    int shadow; /* every limit in shadow mode */
    /* The admin routes (/v1/peek, /v1/reset): served only on admin_listen
     * ("" = off, the default), only with the bearer token read from
     * admin_token_file (by gen.c: parsing does no I/O). */
    char admin_listen[128];
    char admin_token_file[256];
    int admin_line, admin_token_line;
    int url_line; /* [store] url's first line, 0 if none */
    fg__cidr proxies[FG_SERVE_MAX_PROXIES];
    unsigned nproxies;
    /* Caps. */
    uint32_t max_header_bytes;
    uint32_t max_key_bytes;
    uint32_t max_connections;
    uint32_t request_timeout_ms;
    uint32_t drain_timeout_ms;
    uint32_t drain_grace_ms; /* SIGTERM: still accepting, healthz 503 */
    uint32_t blocked_cache;  /* entries per worker; 0 disables */
    /* [store] */
    char store_url[4096];
    char prefix[64];
    uint32_t store_timeout_ms;
    /* [limit NAME] */
    fg__serve_limit limits[FG_SERVE_MAX_LIMITS];
    unsigned nlimits;
} fg__serve_config;

/* Fill 'c' with the defaults (listen 127.0.0.1:8080, 1 worker, memory
 * store, no limit). */
void fg__config_defaults(fg__serve_config *c);

/* Parse the INI text of 'f' (named 'name' in messages) into 'c', which must
 * hold the defaults. FG_OK, or FG_EINVAL with "name:line: reason" in
 * 'err'. */
int fg__config_parse(FILE *f, const char *name, fg__serve_config *c, char *err,
                     size_t errlen);

/* Open 'path' and fg__config_parse it. A folder is refused, and with
 * 'regular_only' (a reload) anything but a regular file. */
int fg__config_load(const char *path, int regular_only, fg__serve_config *c,
                    char *err, size_t errlen);

/* Index of the limit named 'name' ('len' bytes) or -1. */
int fg__config_find(const fg__serve_config *c, const char *name, size_t len);

/* Split a listen address, "HOST:PORT" or "[V6]:PORT", into its host and
 * its port, digits of 0 to 65535. FG_OK or FG_EINVAL. */
int fg__listen_split(const char *listen, char *host, size_t hostlen, char *port,
                     size_t portlen);

/* A listen address as serve binds it: an IP literal and a port,
 * "127.0.0.1:8080" or "[::1]:8080", never a host name. FG_OK, or FG_EINVAL
 * with the reason in 'why'. */
int fg__listen_check(const char *listen, char *why, size_t whylen);

/* 1 when 'listen' asks for any free port (":0"): two such addresses are
 * not the same socket. */
int fg__listen_port_zero(const char *listen);

/* Parse a duration "5ms", "2s", "1min", "250us" (a bare number is
 * milliseconds) into milliseconds. FG_OK or FG_EINVAL. */
int fg__parse_duration_ms(const char *s, uint32_t *out_ms);

/* Parse "a,b,c" limit names into indexes of 'c'. FG_OK or FG_EINVAL with
 * the reason in 'err'. */
int fg__config_chain(const fg__serve_config *c, const char *list, unsigned *idx,
                     unsigned *n, char *err, size_t errlen);

#endif
