/* redis_admin.c -- the Redis store's peek and reset protocol, with no I/O
 * (see redis_admin.h). */
#include <stddef.h>
#include <string.h>

#include "redis_admin.h"
#include "store.h"

/* clang-format off */

/* Read only, and declared so (Redis 7's no-writes flag): Redis refuses
 * any write in it, and runs it on a read-only replica too. It returns the
 * time a check would use (ARGV[1], or Redis TIME when it is
 * '') and the values a check would read. ARGV[2] '' reads KEYS[1] (a
 * token bucket); else it is a sliding window's period, and KEYS[1] its
 * base: the current and previous windows' keys are read, as the sliding
 * script reads them. The window index is exact: fmod is, and the
 * division of a multiple of the period is. Returns {now, value...}, nil
 * for a missing key. */
const char fg__redis_lua_peek[] =
    "#!lua flags=no-writes\n"
    "local now\n"
    "if ARGV[1] == '' then\n"
    "  local t = redis.call('TIME')\n"
    "  now = t[1] * 1000000 + t[2]\n"
    "else\n"
    "  now = tonumber(ARGV[1])\n"
    "end\n"
    "if ARGV[2] == '' then\n"
    "  return {now, redis.call('GET', KEYS[1])}\n"
    "end\n"
    "local period = tonumber(ARGV[2])\n"
    "local w = (now - math.fmod(now, period)) / period\n"
    "local r = redis.call('MGET', KEYS[1] .. w, KEYS[1] .. (w - 1))\n"
    "return {now, r[1], r[2]}\n";

/* clang-format on */

static void arg(fg__rcmd *c, const char *s, size_t n)
{
    c->argv[c->argc] = s;
    c->len[c->argc++] = n;
}

#define ARG_LIT(c, lit) arg((c), (lit), sizeof(lit) - 1)

/* Key 'i' of 'a': the base of 'key' ("prefix name:{key}:"), then the
 * window 'w' when 'w' >= 0; a token bucket's ends at the hash tag. */
static int put_key(fg__radmin *a, int i, const fg__rlim *rl, const char *key,
                   size_t keylen, int64_t w)
{
    size_t n = fg__redis_key(a->keys[i], rl->kp, rl->kplen, key, keylen, w);
    if (!n)
        return FG_EKEY;
    if (a->p->algorithm == FG_TOKEN_BUCKET)
        n--;
    a->keylen[i] = n;
    return FG_OK;
}

/* Append the decimal 'w' to the base in key 0, as key 'i'. */
static void window_key(fg__radmin *a, int i, size_t baselen, uint64_t w)
{
    if (i != 0)
        memcpy(a->keys[i], a->keys[0], baselen);
    a->keylen[i] = baselen + fg__redis_u64(a->keys[i] + baselen, w);
}

/* The keys a reset deletes, once the time of the checks is known. */
static void reset_keys(fg__radmin *a)
{
    uint64_t w = a->now_us / a->p->period_us;
    size_t base = a->keylen[0];
    /* Fixed: w - 1 .. w + 1. Sliding: w - 2 .. w + 1 (a key lives until
     * the window after its own ends). */
    uint64_t back = a->p->algorithm == FG_SLIDING_WINDOW ? 2 : 1;
    uint64_t first = w >= back ? w - back : 0;
    a->nkeys = 0;
    for (uint64_t x = w + 1 + 1; x-- > first;)
        window_key(a, a->nkeys++, base, x);
}

static int init(fg__radmin *a, const fg__algo_params *p, const fg__rlim *rl,
                const char *key, size_t keylen, uint64_t now_us, int reset)
{
    memset(a, 0, offsetof(fg__radmin, keylen));
    a->p = p;
    a->reset = reset;
    a->now_us = now_us;
    a->nkeys = 1;
    int windowed =
        p->algorithm == FG_FIXED_WINDOW || p->algorithm == FG_NAIVE_GET_SET;
    /* A fixed window's checks always send the caller's time. */
    int64_t w = windowed && !reset ? (int64_t)(now_us / p->period_us) : -1;
    int rc = put_key(a, 0, rl, key, keylen, w);
    if (rc != FG_OK)
        return rc;
    a->period[0] = '\0';
    if (p->algorithm == FG_SLIDING_WINDOW)
        fg__redis_u64(a->period, p->period_us);
    if (now_us)
        fg__redis_u64(a->now, now_us);
    if (reset && p->algorithm != FG_TOKEN_BUCKET) {
        if (now_us)
            reset_keys(a);
        else
            a->need_time = 1;
    }
    return FG_OK;
}

int fg__rpeek_init(fg__radmin *a, const fg__algo_params *p, const fg__rlim *rl,
                   const char *key, size_t keylen, uint64_t now_us)
{
    return init(a, p, rl, key, keylen, now_us, 0);
}

int fg__rreset_init(fg__radmin *a, const fg__algo_params *p, const fg__rlim *rl,
                    const char *key, size_t keylen, uint64_t now_us)
{
    return init(a, p, rl, key, keylen, now_us, 1);
}

void fg__radmin_cmd(const fg__radmin *a, fg__rcmd *out)
{
    out->argc = 0;
    if (a->reset) {
        if (a->need_time) {
            ARG_LIT(out, "TIME");
            return;
        }
        ARG_LIT(out, "DEL");
        for (int i = 0; i < a->nkeys; i++)
            arg(out, a->keys[i], a->keylen[i]);
        return;
    }
    if (a->p->algorithm == FG_FIXED_WINDOW ||
        a->p->algorithm == FG_NAIVE_GET_SET) {
        ARG_LIT(out, "GET");
        arg(out, a->keys[0], a->keylen[0]);
        return;
    }
    /* Sent whole: a peek is rare, and the connections' handshake then
     * loads no script for it. */
    ARG_LIT(out, "EVAL");
    arg(out, fg__redis_lua_peek, sizeof(fg__redis_lua_peek) - 1);
    ARG_LIT(out, "1");
    arg(out, a->keys[0], a->keylen[0]);
    arg(out, a->now, a->now_us ? strlen(a->now) : 0);
    arg(out, a->period, strlen(a->period));
}

/* Digits, at most 'max' of them, as a number below 10^19. */
static int digits(const char *s, size_t len, size_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > max)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 1;
}

/* A count as a key holds it: nil is 0; a count past 'cap' reads as 'cap'
 * (a fixed window's kept overshoot: the same as a full window). */
static int read_count(const redisReply *r, uint64_t cap, uint64_t *out)
{
    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
        return FG_OK;
    }
    if (r->type != REDIS_REPLY_STRING)
        return FG_EPROTO;
    uint64_t v;
    if (r->len > 19 || !digits(r->str, r->len, 19, &v)) {
        /* A negative count (a refund crossing a give-back) is an empty
         * window, as the checks read it. */
        if (r->len > 1 && r->str[0] == '-' &&
            digits(r->str + 1, r->len - 1, 19, &v)) {
            *out = 0;
            return FG_OK;
        }
        return FG_EPROTO;
    }
    *out = v > cap ? cap : v;
    return FG_OK;
}

/* A token bucket's stored value into 's', as the token script's tat()
 * reads it: "A B C", or the earlier format (TAT in 1/scale us since
 * FG__REDIS_EPOCH_S), anything else a key never seen. */
static void read_tat(const redisReply *r, uint64_t scale, fg__algo_state *s)
{
    memset(s, 0, sizeof(*s));
    if (r->type != REDIS_REPLY_STRING)
        return;
    const char *p = r->str, *end = r->str + r->len;
    const char *sp1 = memchr(p, ' ', r->len);
    uint64_t v[3];
    if (!sp1) {
        if (digits(p, r->len, 16, &v[0]) && v[0] < FG_MAX_COUNT) {
            uint64_t q = v[0] / scale;
            s->a = q + (uint64_t)FG__REDIS_EPOCH_S * 1000000u;
            s->b = v[0] - q * scale;
        }
        return;
    }
    const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
    if (sp2 && digits(p, (size_t)(sp1 - p), 16, &v[0]) &&
        digits(sp1 + 1, (size_t)(sp2 - sp1 - 1), 16, &v[1]) &&
        digits(sp2 + 1, (size_t)(end - sp2 - 1), 16, &v[2])) {
        s->a = v[0];
        s->b = v[1];
        s->c = v[2];
    }
}

/* The script's reply: {now, value...} with 'n' values. */
static int script_values(const redisReply *r, size_t n, uint64_t *now)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 + n)
        return FG_EPROTO;
    const redisReply *t = r->element[0];
    if (t->type != REDIS_REPLY_INTEGER || t->integer <= 0 ||
        (uint64_t)t->integer >= FG_MAX_COUNT)
        return FG_EPROTO;
    for (size_t i = 1; i <= n; i++)
        if (r->element[i]->type != REDIS_REPLY_NIL &&
            r->element[i]->type != REDIS_REPLY_STRING)
            return FG_EPROTO;
    *now = (uint64_t)t->integer;
    return FG_OK;
}

/* Redis TIME: two bulk strings, seconds and microseconds. */
static int read_time(const redisReply *r, uint64_t *now)
{
    uint64_t s, us;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        !digits(r->element[0]->str, r->element[0]->len, 12, &s) ||
        !digits(r->element[1]->str, r->element[1]->len, 6, &us) ||
        us >= 1000000 || s == 0)
        return FG_EPROTO;
    *now = s * 1000000 + us;
    return FG_OK;
}

static int peek_reply(fg__radmin *a, const redisReply *r, fg_decision *d)
{
    const fg__algo_params *p = a->p;
    fg__algo_state s = {0, 0, 0};
    uint64_t now = a->now_us, cur, prev;
    int rc;
    switch (p->algorithm) {
    case FG_FIXED_WINDOW:
    case FG_NAIVE_GET_SET:
        if ((rc = read_count(r, p->limit, &cur)) != FG_OK)
            return rc;
        s.a = now / p->period_us + 1;
        s.b = cur;
        break;
    case FG_SLIDING_WINDOW:
        /* Whole counts, beyond the limit too (fg_add's usage): the script
         * that decides weighs them so, and capped the wait came early. */
        if ((rc = script_values(r, 2, &now)) != FG_OK ||
            (rc = read_count(r->element[1], UINT64_MAX / 2, &cur)) != FG_OK ||
            (rc = read_count(r->element[2], UINT64_MAX / 2, &prev)) != FG_OK)
            return rc;
        s.a = now / p->period_us + 1;
        s.b = cur;
        s.c = prev;
        break;
    case FG_TOKEN_BUCKET:
        if ((rc = script_values(r, 1, &now)) != FG_OK)
            return rc;
        read_tat(r->element[1], p->scale, &s);
        break;
    default:
        return FG_ENOTSUP;
    }
    return fg__algo_peek(p, &s, now, d);
}

int fg__radmin_reply(fg__radmin *a, const redisReply *r, fg_decision *d)
{
    if (r->type == REDIS_REPLY_ERROR)
        return fg__redis_error_code(r->str, r->len);
    if (!a->reset)
        return peek_reply(a, r, d);
    if (a->need_time) {
        int rc = read_time(r, &a->now_us);
        if (rc != FG_OK)
            return rc;
        a->need_time = 0;
        reset_keys(a);
        return FG__RSTEP_AGAIN;
    }
    return r->type == REDIS_REPLY_INTEGER ? FG_OK : FG_EPROTO;
}
