/* config.c -- parse the INI configuration of `floodgate serve` (pure).
 *
 * inih does the lexing; this file gives each key its meaning and reports the
 * first problem as "file:line: reason". Debian's inih (55) passes no line
 * numbers to the handler and does not call it for a section header
 * (INI_CALL_HANDLER_ON_NEW_SECTION is off in its build), so the reader
 * given to ini_parse_stream counts lines itself, and reads each line as
 * inih will before handing it over: a section is checked at its header,
 * and a line inih would skip with a note is reported at once. The handler
 * always runs for the line the reader returned last. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

/* What a [limit] section said, before the rate (which resets every field
 * when parsed) is combined with the other keys. */
typedef struct raw_limit {
    char rate[64];
    int rate_line, burst_line; /* for messages */
    int has_alg, has_burst, has_onf, has_fb, has_clock, shadow;
    fg_algorithm alg;
    uint64_t burst;
    fg_on_failure onf;
    uint32_t timeout_ms, fb;
    int clock_client;
    int durable, durable_line;
    int has_mode, mode_line;
    fg_limit mode; /* mode, sync_ms, lease_chunk */
    uint64_t local_keys;
    int local_keys_line;
} raw_limit;

/* Keys a file may give: every key of [server] and [store], and the
 * twelve of each limit, with room to spare (a key beyond these is refused
 * anyway). */
#define SEEN_MAX (FG_SERVE_MAX_LIMITS * 16 + 64)

/* A key given, for refusing it a second time in its section. */
typedef struct seen_key {
    char section[128];
    char key[32];
    int line;
} seen_key;

typedef struct parser {
    FILE *f;
    const char *name;
    int line;
    int too_long; /* the first line too long, 0 if none */
    fg__serve_config *c;
    raw_limit raw[FG_SERVE_MAX_LIMITS];
    char section[128]; /* the section of the previous key */
    int header_new;    /* one was read since the previous key */
    int key_seen;      /* a key since the last "[section]" line */
    int indented;      /* the line read last begins with a blank */
    int url_line;      /* [store] url's first line, 0 if none */
    /* The key an indented line would go on with (a list's), "" if none. */
    char list_key[20];
    /* trusted_proxies as given (with its indented lines), read at the end;
     * its first line, 0 if none. */
    char proxies[FG_SERVE_MAX_PROXIES * 48];
    int proxies_line;
    seen_key seen[SEEN_MAX];
    unsigned nseen;
    int failed;
    char *err;
    size_t errlen;
    /* The key and value being read, for a refusal to show what it read
     * (never a url's: it may hold a password). */
    const char *key, *value;
} parser;

static int fail(parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(parser *p, int line, const char *fmt, ...)
{
    if (p->failed)
        return 0;
    p->failed = 1;
    if (p->err && p->errlen) {
        int n = snprintf(p->err, p->errlen, "%s:%d: ", p->name, line);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
            size_t m = strlen(p->err);
            if (p->value && line == p->line && strcmp(p->key, "url") &&
                strstr(p->err, " must be ") && m < p->errlen) {
                /* Control bytes shown as \r, \xNN: a terminal would act
                 * on them. */
                char v[4 * 80 + 1];
                size_t o = 0;
                for (const char *s = p->value; *s && s < p->value + 80; s++) {
                    unsigned char ch = (unsigned char)*s;
                    if (ch == '\r')
                        o += (size_t)snprintf(v + o, sizeof v - o, "\\r");
                    else if (ch < 0x20 || ch == 0x7f)
                        o += (size_t)snprintf(v + o, sizeof v - o, "\\x%02x",
                                              ch);
                    else
                        v[o++] = (char)ch;
                }
                v[o] = '\0';
                /* (Not when the reason quotes it already.) */
                char q[sizeof v + 2];
                snprintf(q, sizeof q, "'%s'", v);
                if (!strstr(p->err, q))
                    snprintf(p->err + m, p->errlen - m, " (read: %s)", q);
            }
        }
    }
    return 0;
}

void fg__config_defaults(fg__serve_config *c)
{
    memset(c, 0, sizeof(*c));
    strcpy(c->listen, "127.0.0.1:8080");
    c->workers = 1;
    c->max_header_bytes = 8192;
    c->max_key_bytes = 256;
    c->max_connections = 10000;
    c->request_timeout_ms = 10000;
    c->drain_timeout_ms = 10000;
    c->drain_grace_ms = 500;
    c->blocked_cache = 65536;
    strcpy(c->store_url, "memory");
    strcpy(c->prefix, "fg:");
    c->store_timeout_ms = 5;
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!isdigit((unsigned char)s[0]))
        return FG_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max)
        return FG_EINVAL;
    *out = v;
    return 0;
}

int fg__parse_duration_ms(const char *s, uint32_t *out_ms)
{
    if (!isdigit((unsigned char)s[0]))
        return FG_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return FG_EINVAL;
    uint64_t mul;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mul = 1;
    else if (strcmp(end, "s") == 0)
        mul = 1000;
    else if (strcmp(end, "min") == 0)
        mul = 60000;
    else if (strcmp(end, "h") == 0)
        mul = 3600000;
    else
        return FG_EINVAL;
    if (v == 0 || v > UINT32_MAX / mul)
        return FG_EINVAL;
    *out_ms = (uint32_t)(v * mul);
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "on") || !strcmp(s, "yes") || !strcmp(s, "true") ||
        !strcmp(s, "1"))
        *out = 1;
    else if (!strcmp(s, "off") || !strcmp(s, "no") || !strcmp(s, "false") ||
             !strcmp(s, "0"))
        *out = 0;
    else
        return FG_EINVAL;
    return 0;
}

int fg__listen_split(const char *listen, char *host, size_t hostlen, char *port,
                     size_t portlen)
{
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen)
        return FG_EINVAL;
    const char *pt = colon + 1;
    size_t pl = strlen(pt);
    if (pl == 0 || pl > 5 || pl >= portlen || strspn(pt, "0123456789") != pl ||
        atoi(pt) > 65535)
        return FG_EINVAL;
    const char *h = listen;
    size_t hl = (size_t)(colon - listen);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= hostlen)
        return FG_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, pt, pl + 1);
    return 0;
}

int fg__listen_check(const char *listen, char *why, size_t whylen)
{
    char host[256], port[8];
    if (fg__listen_split(listen, host, sizeof(host), port, sizeof(port))) {
        snprintf(why, whylen, "expected HOST:PORT, the port 0..65535%s",
                 listen[0] == '/' || !strncmp(listen, "unix:", 5)
                     ? " (a unix socket is not supported: TCP only)"
                     : "");
        return FG_EINVAL;
    }
    /* An IP literal only: a name would be looked up (at start, maybe in
     * DNS, and again on every restart), and a typo such as 999.1.1.1 is
     * taken for one. */
    unsigned char a[16];
    const char *bad = NULL;
    if (listen[0] == '[') {
        if (inet_pton(AF_INET6, host, a) != 1)
            bad = "not an IPv6 address inside [ ]";
    } else if (inet_pton(AF_INET, host, a) != 1) {
        bad = host[0] == '\0' ? "no host (0.0.0.0 or [::] for every address)"
              : inet_pton(AF_INET6, host, a) == 1
                  ? "IPv6 goes in brackets, as [::1]:8080"
                  : "the host must be an IP address, IPv4 or [IPv6] (a name "
                    "is not looked up)";
    }
    if (bad) {
        snprintf(why, whylen, "%s", bad);
        return FG_EINVAL;
    }
    return FG_OK;
}

int fg__config_find(const fg__serve_config *c, const char *name, size_t len)
{
    for (unsigned i = 0; i < c->nlimits; i++)
        if (strlen(c->limits[i].lim.name) == len &&
            memcmp(c->limits[i].lim.name, name, len) == 0)
            return (int)i;
    return -1;
}

int fg__config_chain(const fg__serve_config *c, const char *list, unsigned *idx,
                     unsigned *n, char *err, size_t errlen)
{
    *n = 0;
    const char *p = list;
    while (*p) {
        /* Names, each between commas, blanks around it. */
        while (*p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        const char *next = e;
        while (*next == ' ')
            next++;
        if (e == p || (*next == ',' && !next[1])) {
            snprintf(err, errlen, "empty name in '%.64s'", list);
            return FG_EINVAL;
        }
        if (*next && *next != ',') {
            snprintf(err, errlen, "names need commas between them: '%.64s'",
                     list);
            return FG_EINVAL;
        }
        int i = fg__config_find(c, p, (size_t)(e - p));
        if (i < 0) {
            snprintf(err, errlen, "unknown limit '%.*s'",
                     (int)(e - p > 64 ? 64 : e - p), p);
            return FG_EINVAL;
        }
        if (*n == FG_SERVE_MAX_CHAIN) {
            snprintf(err, errlen, "at most %d limits per request",
                     FG_SERVE_MAX_CHAIN);
            return FG_EINVAL;
        }
        for (unsigned k = 0; k < *n; k++)
            if (idx[k] == (unsigned)i) {
                snprintf(err, errlen, "limit '%.*s' listed twice", (int)(e - p),
                         p);
                return FG_EINVAL;
            }
        idx[(*n)++] = (unsigned)i;
        p = *next ? next + 1 : next;
    }
    if (*n == 0) {
        snprintf(err, errlen, "no limit named");
        return FG_EINVAL;
    }
    return 0;
}

static int server_key(parser *p, const char *k, const char *v)
{
    fg__serve_config *c = p->c;
    uint64_t u;
    uint32_t ms;
    if (!strcmp(k, "listen")) {
        char why[200];
        if (strlen(v) >= sizeof(c->listen))
            return fail(p, p->line, "listen too long");
        if (fg__listen_check(v, why, sizeof(why)))
            return fail(p, p->line, "listen = %s: %s", v, why);
        strcpy(c->listen, v);
    } else if (!strcmp(k, "workers")) {
        if (parse_u64(v, 1, FG_SERVE_MAX_WORKERS, &u))
            return fail(p, p->line, "workers must be 1..%d",
                        FG_SERVE_MAX_WORKERS);
        c->workers = (unsigned)u;
    } else if (!strcmp(k, "id")) {
        size_t n = strlen(v);
        if (n == 0 || n >= sizeof(c->id))
            return fail(p, p->line, "id must be 1..%zu characters",
                        sizeof(c->id) - 1);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f)
                return fail(p, p->line, "id must be printable, no spaces");
        strcpy(c->id, v);
    } else if (!strcmp(k, "demo_api")) {
        if (parse_bool(v, &c->demo_api))
            return fail(p, p->line, "demo_api must be on or off");
        c->demo_line = p->line;
    } else if (!strcmp(k, "demo_limits")) {
        if (strlen(v) >= sizeof(c->demo_limits))
            return fail(p, p->line, "demo_limits too long");
        strcpy(c->demo_limits, v);
        c->demo_line = p->line;
    } else if (!strcmp(k, "shadow")) {
        if (parse_bool(v, &c->shadow))
            return fail(p, p->line, "shadow must be on or off");
    } else if (!strcmp(k, "admin_listen")) {
        char why[200];
        if (!strcmp(v, "off")) {
            c->admin_listen[0] = '\0';
        } else {
            if (strlen(v) >= sizeof(c->admin_listen))
                return fail(p, p->line, "admin_listen too long");
            if (fg__listen_check(v, why, sizeof(why)))
                return fail(p, p->line, "admin_listen = %s: %s", v, why);
            strcpy(c->admin_listen, v);
        }
        c->admin_line = p->line;
    } else if (!strcmp(k, "admin_token_file")) {
        if (!v[0] || strlen(v) >= sizeof(c->admin_token_file))
            return fail(p, p->line,
                        "admin_token_file must be a path of 1..%zu bytes",
                        sizeof(c->admin_token_file) - 1);
        strcpy(c->admin_token_file, v);
        c->admin_token_line = p->line;
    } else if (!strcmp(k, "trusted_proxies")) {
        if (strlen(v) >= sizeof(p->proxies))
            return fail(p, p->line, "too many or too long proxies");
        strcpy(p->proxies, v);
        p->proxies_line = p->line;
    } else if (!strcmp(k, "max_header_bytes")) {
        if (parse_u64(v, 256, 1 << 20, &u))
            return fail(p, p->line, "max_header_bytes must be 256..1048576");
        c->max_header_bytes = (uint32_t)u;
    } else if (!strcmp(k, "max_key_bytes")) {
        if (parse_u64(v, 1, FG_MAX_KEY, &u))
            return fail(p, p->line, "max_key_bytes must be 1..%d", FG_MAX_KEY);
        c->max_key_bytes = (uint32_t)u;
    } else if (!strcmp(k, "max_connections")) {
        if (parse_u64(v, 1, 1000000, &u))
            return fail(p, p->line, "max_connections must be 1..1000000");
        c->max_connections = (uint32_t)u;
    } else if (!strcmp(k, "request_timeout")) {
        if (fg__parse_duration_ms(v, &ms))
            return fail(p, p->line,
                        "request_timeout must be a duration from 1ms to "
                        "1193h (N, Nms, Ns, Nmin or Nh)");
        c->request_timeout_ms = ms;
    } else if (!strcmp(k, "drain_timeout")) {
        if (fg__parse_duration_ms(v, &ms))
            return fail(p, p->line,
                        "drain_timeout must be a duration from 1ms to "
                        "1193h (N, Nms, Ns, Nmin or Nh)");
        c->drain_timeout_ms = ms;
    } else if (!strcmp(k, "drain_grace")) {
        /* 0 (0s, 0ms, 0min, 0h): no grace, the listener closes at once. */
        size_t z = strspn(v, "0");
        if (z && (!v[z] || !strcmp(v + z, "ms") || !strcmp(v + z, "s") ||
                  !strcmp(v + z, "min") || !strcmp(v + z, "h")))
            ms = 0;
        else if (fg__parse_duration_ms(v, &ms) || ms > 60000)
            return fail(p, p->line,
                        "drain_grace must be a duration, at most 60s");
        c->drain_grace_ms = ms;
    } else if (!strcmp(k, "blocked_cache")) {
        if (parse_u64(v, 0, 1 << 24, &u))
            return fail(p, p->line, "blocked_cache must be 0..16777216");
        c->blocked_cache = (uint32_t)u;
    } else {
        return fail(p, p->line, "unknown key '%s' in [server]", k);
    }
    return 1;
}

static int store_key(parser *p, const char *k, const char *v)
{
    fg__serve_config *c = p->c;
    if (!strcmp(k, "url")) {
        /* Checked whole in finish(): it may go on over indented lines. */
        if (strlen(v) == 0 || strlen(v) >= sizeof(c->store_url))
            return fail(p, p->line, "url must be 1..%zu characters",
                        sizeof(c->store_url) - 1);
        strcpy(c->store_url, v);
        p->url_line = c->url_line = p->line;
    } else if (!strcmp(k, "prefix")) {
        if (strlen(v) >= sizeof(c->prefix))
            return fail(p, p->line, "prefix must be at most %zu characters",
                        sizeof(c->prefix) - 1);
        strcpy(c->prefix, v);
    } else if (!strcmp(k, "timeout")) {
        if (fg__parse_duration_ms(v, &c->store_timeout_ms) ||
            c->store_timeout_ms > 60000)
            return fail(p, p->line,
                        "timeout must be a duration from 1ms to 60s, like 5ms");
    } else {
        return fail(p, p->line, "unknown key '%s' in [store]", k);
    }
    return 1;
}

static int limit_key(parser *p, unsigned i, const char *k, const char *v)
{
    fg__serve_limit *sl = &p->c->limits[i];
    raw_limit *r = &p->raw[i];
    char why[160];
    uint64_t u;
    if (!strcmp(k, "key")) {
        if (fg__keysrc_parse(v, &sl->key, why, sizeof(why)))
            return fail(p, p->line, "%s", why);
        sl->has_key = 1;
    } else if (!strcmp(k, "algorithm")) {
        if (fg_algorithm_parse(v, &r->alg))
            return fail(p, p->line,
                        "algorithm must be fixed_window, sliding_window or "
                        "token_bucket");
        r->has_alg = 1;
    } else if (!strcmp(k, "rate")) {
        fg_limit tmp;
        if (strlen(v) >= sizeof(r->rate))
            return fail(p, p->line, "rate too long");
        if (fg_limit_parse_err(v, &tmp, why, sizeof(why)))
            return fail(p, p->line, "rate: %s", why);
        strcpy(r->rate, v);
        r->rate_line = p->line;
        sl->has_rate = 1;
    } else if (!strcmp(k, "burst")) {
        if (parse_u64(v, 1, FG_MAX_COUNT, &u))
            return fail(p, p->line, "burst must be a whole number, 1..2^53");
        r->burst = u;
        r->has_burst = 1;
        r->burst_line = p->line;
    } else if (!strcmp(k, "mode")) {
        char why[160];
        if (fg_mode_parse(v, &r->mode, why, sizeof(why)) != FG_OK)
            return fail(p, p->line, "%s", why);
        r->has_mode = 1;
        r->mode_line = p->line;
    } else if (!strcmp(k, "local_keys")) {
        if (parse_u64(v, 1, (uint64_t)1 << 40, &u))
            return fail(p, p->line, "local_keys must be 1..2^40");
        r->local_keys = u;
        r->local_keys_line = p->line;
    } else if (!strcmp(k, "on_failure")) {
        if (fg_on_failure_parse(v, &r->onf))
            return fail(p, p->line, "on_failure must be open, closed or local");
        r->has_onf = 1;
    } else if (!strcmp(k, "timeout")) {
        if (fg__parse_duration_ms(v, &r->timeout_ms) || r->timeout_ms > 60000)
            return fail(p, p->line,
                        "timeout must be a duration from 1ms to 60s, like 5ms");
        sl->has_timeout = 1;
    } else if (!strcmp(k, "fallback_servers")) {
        if (parse_u64(v, 1, 100000, &u))
            return fail(p, p->line, "fallback_servers must be 1..100000");
        r->fb = (uint32_t)u;
        r->has_fb = 1;
    } else if (!strcmp(k, "durable")) {
        r->durable_line = p->line;
        if (!strcmp(v, "replica"))
            r->durable = 1;
        else if (!strcmp(v, "off"))
            r->durable = 0;
        else
            return fail(p, p->line, "durable must be off or replica");
    } else if (!strcmp(k, "shadow")) {
        if (parse_bool(v, &r->shadow))
            return fail(p, p->line, "shadow must be on or off");
    } else if (!strcmp(k, "clock")) {
        if (!strcmp(v, "client"))
            r->clock_client = 1;
        else if (!strcmp(v, "redis"))
            r->clock_client = 0;
        else
            return fail(p, p->line, "clock must be redis or client");
        r->has_clock = 1;
    } else {
        return fail(p, p->line, "unknown key '%s' in [limit %s]", k,
                    sl->lim.name);
    }
    return 1;
}

/* inih keeps at most 49 bytes of a section name (its MAX_SECTION, 50,
 * with the NUL) and cuts the rest silently. */
#define INI_SECTION_MAX 49

/* A "[section]" line ('sec' its name), checked as it is read: what is
 * wrong with a section is reported at its header, even when no key
 * follows. A limit is created here, with the header's line. */
static int open_section(parser *p, const char *sec, int line)
{
    if (strlen(sec) > INI_SECTION_MAX)
        return fail(p, line,
                    "section name longer than %d characters (inih cuts it; "
                    "a limit name in a file is at most %d)",
                    INI_SECTION_MAX, INI_SECTION_MAX - 6);
    if (!strcmp(sec, "server") || !strcmp(sec, "store"))
        return 1;
    if (strncmp(sec, "limit", 5) != 0 || (sec[5] != ' ' && sec[5] != '\0'))
        return fail(p, line,
                    "unknown section [%s] (expected [server], [store] or "
                    "[limit NAME])",
                    sec);
    const char *name = sec + 5;
    while (*name == ' ')
        name++;
    size_t n = strlen(name);
    if (n == 0)
        return fail(p, line, "[limit] without a name (expected [limit NAME])");
    if (name[n - 1] == ' ' || name[n - 1] == '\t')
        return fail(p, line,
                    "a blank after the limit name (write [limit %.*s])",
                    (int)strcspn(name, " \t"), name);
    if (!fg_limit_name_valid(name, n))
        return fail(p, line, "limit name must be 1..%d of A-Z a-z 0-9 _ - .",
                    INI_SECTION_MAX - 6);
    if (fg__config_find(p->c, name, n) >= 0)
        return fail(p, line, "[limit %s] defined twice", name);
    if (p->c->nlimits == FG_SERVE_MAX_LIMITS)
        return fail(p, line, "at most %d limits", FG_SERVE_MAX_LIMITS);
    fg__serve_limit *sl = &p->c->limits[p->c->nlimits++];
    memset(sl, 0, sizeof(*sl));
    memcpy(sl->lim.name, name, n + 1);
    sl->line = line;
    return 1;
}

/* trusted_proxies, read when the whole list is known (it may go on over
 * indented lines): entries part at commas or blanks; an empty one is a
 * typo. Errors name the list's first line. */
static int parse_proxies(parser *p)
{
    fg__serve_config *c = p->c;
    int line = p->proxies_line;
    char buf[200];
    const char *s = p->proxies;
    c->nproxies = 0;
    for (;;) {
        s += strspn(s, " ");
        if (!*s)
            break;
        size_t n = strcspn(s, " ,");
        if (n == 0)
            return fail(p, line,
                        "trusted_proxies: an empty entry "
                        "(two commas, or one at an end)");
        if (n >= sizeof(buf) || c->nproxies == FG_SERVE_MAX_PROXIES)
            return fail(p, line, "too many or too long proxies (at most %d)",
                        FG_SERVE_MAX_PROXIES);
        memcpy(buf, s, n);
        buf[n] = '\0';
        char why[120];
        if (fg__cidr_parse(buf, &c->proxies[c->nproxies], why, sizeof(why)))
            return fail(p, line, "trusted_proxies: '%s': %s", buf, why);
        c->nproxies++;
        s += n;
        s += strspn(s, " ");
        if (*s == ',' && !s[1 + strspn(s + 1, " ")])
            return fail(p, line,
                        "trusted_proxies: an empty entry "
                        "(two commas, or one at an end)");
        s += *s == ',';
    }
    return 1;
}

/* An indented line going on with a list: [store] url, joined as it is (a
 * shards= list of many nodes does not fit on one line), and [server]
 * trusted_proxies and demo_limits, whose lines join as entries (with a
 * comma, unless the line above ends in one). */
static int list_goes_on(parser *p, const char *k, const char *v)
{
    fg__serve_config *c = p->c;
    if (!strcmp(k, "url")) {
        size_t have = strlen(c->store_url);
        if (have + strlen(v) >= sizeof(c->store_url))
            return fail(p, p->line, "url must be 1..%zu characters",
                        sizeof(c->store_url) - 1);
        strcpy(c->store_url + have, v);
        return 1;
    }
    int px = !strcmp(k, "trusted_proxies");
    char *buf = px ? p->proxies : c->demo_limits;
    size_t size = px ? sizeof(p->proxies) : sizeof(c->demo_limits);
    /* A list's entries hold no '=': such a line is a key indented by
     * mistake, which would be read as the list's next entry. */
    if (strchr(v, '='))
        return fail(p, p->line,
                    "an indented line continues the list of '%s' (line %d): "
                    "a key goes at the start of its line",
                    k, px ? p->proxies_line : c->demo_line);
    size_t have = strlen(buf);
    while (have > 0 && buf[have - 1] == ' ')
        buf[--have] = '\0';
    const char *sep = !have ? "" : buf[have - 1] == ',' ? " " : ", ";
    if (have + strlen(sep) + strlen(v) >= size)
        return fail(p, p->line, "%s too long (at most %zu characters)", k,
                    size - 1);
    strcat(strcat(buf, sep), v);
    return 1;
}

static int on_key(void *user, const char *section, const char *k, const char *v)
{
    parser *p = user;
    if (p->failed)
        return 0;
    if (p->too_long)
        return fail(p, p->too_long, "line too long (at most %d characters)",
                    ini_max_line - 2);
    /* A section opened again, even right after itself, is new. */
    int new_section = strcmp(section, p->section) != 0 || p->header_new;
    p->header_new = 0;
    p->key_seen = 1;
    if (new_section)
        strcpy(p->section, section); /* its length checked at its header */
    if (section[0] == '\0')
        return fail(p, p->line, "key '%s' outside any section", k);
    /* Under a header of its own, an indented key is a key, not what goes
     * on from the one above. */
    if (p->indented && !new_section && p->list_key[0] &&
        !strcmp(k, p->list_key))
        return list_goes_on(p, k, v);
    p->list_key[0] = '\0';
    /* Every section that reaches here was accepted at its header; a
     * limit's section opened again was refused there. */
    for (unsigned i = 0; i < p->nseen; i++)
        if (!strcmp(p->seen[i].section, section) && !strcmp(p->seen[i].key, k))
            return p->indented && !new_section
                       ? fail(p, p->line,
                              "an indented line continues the value of "
                              "'%s' (line %d): a value is one line",
                              k, p->seen[i].line)
                       : fail(p, p->line,
                              "'%s' given twice in [%s] (first on line %d)", k,
                              section, p->seen[i].line);
    if (p->nseen < SEEN_MAX && strlen(k) < sizeof(p->seen[0].key)) {
        seen_key *sk = &p->seen[p->nseen++];
        strcpy(sk->section, section);
        strcpy(sk->key, k);
        sk->line = p->line;
    }
    p->key = k;
    p->value = v;
    int rc;
    if (!strcmp(section, "server")) {
        rc = server_key(p, k, v);
    } else if (!strcmp(section, "store")) {
        rc = store_key(p, k, v);
    } else {
        const char *name = section + 5;
        while (*name == ' ')
            name++;
        int i = fg__config_find(p->c, name, strlen(name));
        /* Not reached: opened at its header. */
        rc = i < 0 ? fail(p, p->line, "unknown section [%s]", section)
                   : limit_key(p, (unsigned)i, k, v);
    }
    p->key = p->value = NULL;
    if (rc && ((!strcmp(section, "store") && !strcmp(k, "url")) ||
               (!strcmp(section, "server") &&
                (!strcmp(k, "trusted_proxies") || !strcmp(k, "demo_limits")))))
        strcpy(p->list_key, k);
    return rc;
}

/* The end of what inih reads at 's' before any of 'chars', or before an
 * inline comment (a ';' after a blank), as its find_chars_or_comment. */
static const char *ini_scan(const char *s, const char *chars)
{
    int was_space = 0;
    while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* Read line 'line' ('t', its text after the blanks that begin it) as inih
 * will, and report here what it would refuse or ignore: inih notes a
 * syntax error but carries on, so a later line would otherwise take the
 * blame (a "[limit a" without ']' leaves the keys below it in the section
 * above). */
static void classify(parser *p, const char *t, size_t lead, int line)
{
    if (*t == '\0' || *t == '\r' || *t == '\n' || *t == ';' || *t == '#')
        return; /* blank or comment */
    if (lead > 0 && p->key_seen)
        return; /* inih: the value above continues (refused at its key) */
    if (*t == '[') {
        const char *end = ini_scan(t + 1, "]");
        if (*end != ']') {
            fail(p, line, "section header without ']'");
            return;
        }
        /* inih drops what follows ']': a setting there would be lost. */
        const char *after = end + 1 + strspn(end + 1, " \t");
        /* A CR ends the line only before its LF (or the file's end). */
        int cr_end = *after == '\r' && (after[1] == '\n' || !after[1]);
        if (*after && !cr_end && *after != '\n' && *after != ';' &&
            *after != '#') {
            fail(p, line,
                 "text after ']' in a section header (a setting goes on a "
                 "line of its own)");
            return;
        }
        char sec[128];
        size_t n = (size_t)(end - t - 1);
        if (n >= sizeof(sec))
            n = sizeof(sec) - 1;
        memcpy(sec, t + 1, n);
        sec[n] = '\0';
        p->header_new = 1;
        p->key_seen = 0;
        open_section(p, sec, line);
        return;
    }
    const char *end = ini_scan(t, "=:");
    if (*end != '=' && *end != ':')
        fail(p, line, "syntax error (expected [section] or key = value)");
}

/* fgets that counts lines, notices lines longer than inih's buffer, and
 * checks each line as inih will read it. */
static char *reader(char *str, int num, void *stream)
{
    parser *p = stream;
    if (p->failed)
        return NULL; /* the first error is the one reported */
    long before = ftell(p->f);
    char *s = fgets(str, num, p->f);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    /* A NUL byte ends the string short of what fgets read (told by the
     * file's position: a pipe has none, and goes unchecked). */
    long after = ftell(p->f);
    if (before >= 0 && after > before && (size_t)(after - before) > n) {
        fail(p, p->line + 1, "a NUL byte in the line");
        return NULL;
    }
    /* inih skips a byte order mark on the first line. */
    size_t bom = p->line == 0 && !strncmp(s, "\xef\xbb\xbf", 3) ? 3 : 0;
    size_t lead = strspn(s + bom, " \t\r\f\v");
    p->indented = lead > 0;
    int whole = 1;
    if (n > 0 && s[n - 1] == '\n') {
        p->line++;
    } else if (!feof(p->f)) {
        /* The rest of the line would come back as a line of its own. */
        p->line++;
        whole = 0;
        if (!p->too_long)
            p->too_long = p->line;
        int ch;
        while ((ch = fgetc(p->f)) != EOF && ch != '\n')
            ;
    } else {
        p->line++;
    }
    if (whole && !p->too_long)
        classify(p, s + bom + lead, lead, p->line);
    return s;
}

int fg__listen_port_zero(const char *listen)
{
    size_t n = strlen(listen);
    return n >= 2 && !strcmp(listen + n - 2, ":0");
}

/* Combine each limit's rate with its other keys, then check the whole. */
static int finish(parser *p)
{
    fg__serve_config *c = p->c;
    char why[200];
    if (p->proxies_line && !parse_proxies(p))
        return 0;
    if (p->url_line && strcmp(c->store_url, "memory") != 0 &&
        strncmp(c->store_url, "memory?", 7) != 0 &&
        fg_store_url_check(c->store_url, why, sizeof(why)))
        return fail(p, p->url_line, "url: %s", why);
    for (unsigned i = 0; i < c->nlimits; i++) {
        fg__serve_limit *sl = &c->limits[i];
        raw_limit *r = &p->raw[i];
        char name[FG_NAME_MAX];
        memcpy(name, sl->lim.name, sizeof(name));
        if (!sl->has_rate)
            return fail(p, sl->line, "[limit %s]: rate is required", name);
        if (!sl->has_key)
            return fail(p, sl->line, "[limit %s]: key is required", name);
        if (fg_limit_parse_err(r->rate, &sl->lim, why, sizeof(why)))
            return fail(p, r->rate_line, "[limit %s]: rate: %s", name, why);
        memcpy(sl->lim.name, name, sizeof(name));
        sl->rate_line = r->rate_line;
        if (r->has_alg)
            sl->lim.algorithm = r->alg;
        if (r->has_burst)
            sl->lim.burst = r->burst;
        if (r->has_onf)
            sl->lim.on_failure = r->onf;
        sl->lim.timeout_ms =
            sl->has_timeout ? r->timeout_ms : c->store_timeout_ms;
        if (r->has_fb)
            sl->lim.fallback_servers = r->fb;
        if (r->has_clock)
            sl->lim.clock_client = r->clock_client;
        sl->lim.durable = r->durable;
        sl->durable_line = r->durable ? r->durable_line : 0;
        if (r->has_mode) {
            sl->lim.mode = r->mode.mode;
            sl->lim.sync_ms = r->mode.sync_ms;
            sl->lim.lease_chunk = r->mode.lease_chunk;
            /* sync keeps deciding here when the store is gone, on the
             * share of on_failure = local, unless told otherwise. */
            if (!r->has_onf && sl->lim.mode == FG_MODE_SYNC)
                sl->lim.on_failure = FG_FAIL_LOCAL;
        }
        if (r->local_keys && sl->lim.mode == FG_MODE_EXACT)
            return fail(p, r->local_keys_line,
                        "[limit %s]: local_keys needs mode = sync or lease (an "
                        "exact limit keeps no key here)",
                        name);
        sl->local_keys = r->local_keys;
        /* [server] shadow = on: every limit, whatever its own says. */
        sl->lim.shadow = r->shadow || c->shadow;
        /* A limit refused with its burst but not without it is refused
         * at the burst's line, else at the rate's. */
        if (fg_limit_check(&sl->lim, why, sizeof(why))) {
            fg_limit plain = sl->lim;
            plain.burst = 0;
            fg_limit exact = sl->lim;
            exact.mode = FG_MODE_EXACT;
            int line = r->has_burst && fg_limit_check(&plain, NULL, 0) == FG_OK
                           ? r->burst_line
                       : r->has_mode && fg_limit_check(&exact, NULL, 0) == FG_OK
                           ? r->mode_line
                           : r->rate_line;
            return fail(p, line, "[limit %s]: %s", name, why);
        }
    }
    if (c->admin_listen[0] && !c->admin_token_file[0])
        return fail(p, c->admin_line,
                    "admin_listen needs admin_token_file (the bearer token "
                    "of /v1/peek and /v1/reset)");
    if (c->admin_listen[0] && !strcmp(c->admin_listen, c->listen) &&
        !fg__listen_port_zero(c->listen))
        return fail(p, c->admin_line,
                    "admin_listen must differ from listen (the admin routes "
                    "are served only there)");
    /* demo_limits is checked when given, demo_api on or not: a typo would
     * otherwise wait for the reload that turns demo_api on. */
    if (c->demo_api || c->demo_limits[0]) {
        const char *list = c->demo_limits[0] ? c->demo_limits : "bookings";
        if (fg__config_chain(c, list, c->demo_chain, &c->demo_nchain, why,
                             sizeof(why))) {
            if (strncmp(why, "unknown", 7))
                return fail(p, c->demo_line, "%s: %s",
                            c->demo_limits[0] ? "demo_limits" : "demo_api",
                            why);
            return fail(p, c->demo_line, "%s: %s (add [limit %s])",
                        c->demo_limits[0] ? "demo_limits" : "demo_api", why,
                        c->demo_limits[0] ? "..." : "bookings");
        }
    }
    return 1;
}

int fg__config_parse(FILE *f, const char *name, fg__serve_config *c, char *err,
                     size_t errlen)
{
    parser *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "%s: out of memory", name);
        return FG_ENOMEM;
    }
    p->f = f;
    p->name = name;
    p->c = c;
    p->err = err;
    p->errlen = errlen;
    int rc = ini_parse_stream(reader, p, on_key, p);
    if (!p->failed && p->too_long)
        fail(p, p->too_long, "line too long (at most %d characters)",
             ini_max_line - 2);
    if (!p->failed && rc > 0)
        fail(p, rc, "syntax error (expected [section] or key = value)");
    if (!p->failed && rc < 0)
        fail(p, 0, "cannot read");
    if (!p->failed)
        finish(p);
    int failed = p->failed;
    free(p);
    return failed ? FG_EINVAL : 0;
}

int fg__config_load(const char *path, int regular_only, fg__serve_config *c,
                    char *err, size_t errlen)
{
    /* Opened without blocking: a FIFO with no writer would hold the
     * caller (a reload, on serve's main thread) until one came. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return FG_EINVAL;
    }
    const char *why = NULL;
    if (S_ISDIR(st.st_mode))
        why = "a folder, not a file";
    else if (!S_ISREG(st.st_mode) && regular_only)
        why = "not a regular file (a pipe or a device is read at start only)";
    else if (!S_ISREG(st.st_mode) &&
             fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        why = strerror(errno);
    FILE *f = why ? NULL : fdopen(fd, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, why ? why : strerror(errno));
        close(fd);
        return FG_EINVAL;
    }
    int rc = fg__config_parse(f, path, c, err, errlen);
    fclose(f);
    return rc;
}
