/* redis_proto.c -- the Lua twins of the algorithms, key layout, reply
 * parsing and error mapping for the Redis store (see redis_proto.h). */
#include <string.h>

#include "redis_proto.h"
#include "store.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

/* clang-format off */

/* Shared by both scripts. Lua 5.1 numbers are doubles: exact integers below
 * 2^53, but a / b is rounded, so floor(a / b) may be one too high or too
 * low; idiv corrects it with exact products, cdiv rounds up exactly. Redis
 * runs the whole chunk per call: the helpers are kept few and small. */
#define LUA_COMMON                                                           \
    "local floor = math.floor\n"                                             \
    "local function idiv(a, b)\n"                                            \
    "  local q = floor(a / b)\n"                                             \
    "  if q * b > a then return q - 1 end\n"                                 \
    "  if (q + 1) * b <= a then return q + 1 end\n"                          \
    "  return q\n"                                                           \
    "end\n"                                                                  \
    "local function cdiv(a, b)\n"                                            \
    "  local q = idiv(a, b)\n"                                               \
    "  if q * b < a then return q + 1 end\n"                                 \
    "  return q\n"                                                           \
    "end\n"

/* The sliding window of algo.c. KEYS[1] is the key's base ending in ':';
 * the window index is appended (both keys share the hash tag; an index
 * below 10^14 prints exactly). ARGV: period_us, limit, cost, now_us
 * ('' = Redis TIME). Counts are plain integers; the current window's key
 * lives until the next window ends. Both check scripts return {allowed,
 * remaining, reset_us, retry_after_us}, times exact in microseconds: the C
 * side rounds them up to milliseconds. */
static const char lua_sliding[] = LUA_COMMON
    "local period, limit, cost = tonumber(ARGV[1]), tonumber(ARGV[2]),\n"
    "                            tonumber(ARGV[3])\n"
    "local now\n"
    "if ARGV[4] == '' then\n"
    "  local t = redis.call('TIME')\n"
    "  now = t[1] * 1000000 + t[2]\n"
    "else\n"
    "  now = tonumber(ARGV[4])\n"
    "end\n"
    "local w = idiv(now, period)\n"
    "local kc = KEYS[1] .. w\n"
    "local r = redis.call('MGET', kc, KEYS[1] .. (w - 1))\n"
    "local cur, prev = tonumber(r[1] or 0), tonumber(r[2] or 0)\n"
    "local elapsed = now - w * period\n"
    "local left = period - elapsed\n"
    "local weighted = prev * left\n"
    "local cap = limit * period\n"
    "local allowed, retry = 0, 0\n"
    "if weighted + (cur + cost) * period <= cap then\n"
    "  allowed = 1\n"
    "  cur = cur + cost\n"
    "  redis.call('SET', kc, string.format('%d', cur), 'PX',\n"
    "             cdiv(left + period, 1000) + 1)\n"
    "elseif cur + cost <= limit then\n"
    "  retry = period - idiv((limit - cur - cost) * period, prev) - elapsed\n"
    "else\n"
    "  retry = left + period - idiv((limit - cost) * period, cur)\n"
    "end\n"
    "local used = weighted + cur * period\n"
    "local remaining, reset = 0, 0\n"
    "if used < cap then remaining = idiv(cap - used, period) end\n"
    "if cur > 0 then reset = left + period\n"
    "elseif prev > 0 then reset = left end\n"
    "return {allowed, remaining, reset, retry}\n";

/* GCRA of algo.c for one or more checks in one call: KEYS[i] is check i's
 * integer key, the theoretical arrival time in units of 1/scale us since
 * FG__REDIS_EPOCH; ARGV[5i-4 .. 5i] its scale, t_scaled, burst, cost and
 * now_us ('' = Redis TIME, read once per call). The checks run in order,
 * as if each were its own call: a key seen twice starts from the first's
 * result. Keys are read with one GET or MGET and each changed key written
 * once, at the end, to expire when its TAT has passed; a clock out of range
 * fails the whole call before anything is written. Returns {allowed,
 * remaining, reset_us, retry_after_us} per check, in one flat array. */
static const char lua_token[] = LUA_COMMON
    "local n = #KEYS\n"
    "local tats\n"
    "if n == 1 then tats = {redis.call('GET', KEYS[1])}\n"
    "else tats = redis.call('MGET', unpack(KEYS)) end\n"
    "local tatof, ttl, out = {}, {}, {}\n"
    "local rtime\n"
    "for i = 1, n do\n"
    "  local a = i * 5 - 5\n"
    "  local scale, t, cost = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),\n"
    "                         tonumber(ARGV[a + 4])\n"
    "  local depth = ARGV[a + 3] * t\n"
    "  local rel = ARGV[a + 5]\n"
    "  if rel == '' then\n"
    "    if not rtime then\n"
    "      local tm = redis.call('TIME')\n"
    "      rtime = (tm[1] - " STR(FG__REDIS_EPOCH_S) ") * 1000000 + tm[2]\n"
    "    end\n"
    "    rel = rtime\n"
    "  else\n"
    "    rel = rel - " STR(FG__REDIS_EPOCH_S) "000000\n"
    "  end\n"
    "  local now = rel * scale\n"
    "  if rel < 1 or now + 4 * depth >= 9007199254740992 then\n"
    "    return redis.error_reply('ERR floodgate: clock outside the exact range')\n"
    "  end\n"
    "  local k = KEYS[i]\n"
    "  local real = now\n"
    "  local tat = tatof[k] or tonumber(tats[i] or 0)\n"
    "  if tat > now and tat - now > depth then now = tat - depth end\n"
    "  local base = now\n"
    "  if tat > now then base = tat end\n"
    "  local nxt = base + cost * t\n"
    "  local allowed, retry = 0, 0\n"
    "  if nxt - now <= depth then\n"
    "    allowed = 1\n"
    "    base = nxt\n"
    "    tatof[k] = nxt\n"
    "    ttl[k] = cdiv(cdiv(nxt - real, scale), 1000) + 1\n"
    "  else\n"
    "    retry = cdiv(nxt - now - depth, scale)\n"
    "  end\n"
    "  local ahead = base - now\n"
    "  local o = i * 4 - 4\n"
    "  out[o + 1] = allowed\n"
    "  out[o + 2] = idiv(depth - ahead, t)\n"
    "  out[o + 3] = cdiv(ahead, scale)\n"
    "  out[o + 4] = retry\n"
    "end\n"
    "for k, ms in pairs(ttl) do\n"
    "  redis.call('SET', k, string.format('%d', tatof[k]), 'PX', ms)\n"
    "end\n"
    "return out\n";

/* fg__algo_refund of algo.c: give back ARGV[2] units, never below zero,
 * never creating a key, keeping each key's expiry. ARGV[1] says which:
 *   'f' fixed window: KEYS[1] is the window's key, ARGV[4] the limit (a
 *       count above it holds refused units nobody gave back: they are not
 *       refunded);
 *   's' sliding window: KEYS[1] the base ending in ':', ARGV[4] the
 *       period; this window's key if it exists, else the previous one's;
 *   't' token bucket: ARGV[4] scale, ARGV[5] t_scaled; TAT moves back by
 *       cost * t but not before now (a bucket back at now is deleted: the
 *       same as a full one).
 * ARGV[3] is now_us ('' = Redis TIME). Returns 1 when a key changed. */
static const char lua_refund[] = LUA_COMMON
    "local kind, cost = ARGV[1], tonumber(ARGV[2])\n"
    "local function take(k, cap)\n"
    "  local v = tonumber(redis.call('GET', k))\n"
    "  if not v then return false end\n"
    "  local n = v\n"
    "  if cap and n > cap then n = cap end\n"
    "  n = n - cost\n"
    "  if n < 0 then n = 0 end\n"
    "  if n < v then redis.call('DECRBY', k, string.format('%d', v - n)) end\n"
    "  return true\n"
    "end\n"
    "if kind == 'f' then\n"
    "  if take(KEYS[1], tonumber(ARGV[4])) then return 1 end\n"
    "  return 0\n"
    "end\n"
    "local tm\n"
    "if ARGV[3] == '' then tm = redis.call('TIME') end\n"
    "if kind == 's' then\n"
    "  local period = tonumber(ARGV[4])\n"
    "  local now = tonumber(ARGV[3])\n"
    "  if tm then now = tm[1] * 1000000 + tm[2] end\n"
    "  local w = idiv(now, period)\n"
    "  if take(KEYS[1] .. w) or take(KEYS[1] .. (w - 1)) then return 1 end\n"
    "  return 0\n"
    "end\n"
    "local scale, t = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "local rel\n"
    "if tm then\n"
    "  rel = (tm[1] - " STR(FG__REDIS_EPOCH_S) ") * 1000000 + tm[2]\n"
    "else\n"
    "  rel = ARGV[3] - " STR(FG__REDIS_EPOCH_S) "000000\n"
    "end\n"
    "local now = rel * scale\n"
    "if rel < 1 or now >= 9007199254740992 then\n"
    "  return redis.error_reply('ERR floodgate: clock outside the exact range')\n"
    "end\n"
    "local tat = tonumber(redis.call('GET', KEYS[1]))\n"
    "if not tat then return 0 end\n"
    "local nt = tat - cost * t\n"
    "if nt <= now then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "else\n"
    "  redis.call('SET', KEYS[1], string.format('%d', nt), 'PX',\n"
    "             cdiv(cdiv(nt - now, scale), 1000) + 1)\n"
    "end\n"
    "return 1\n";
/* clang-format on */

const char *const fg__redis_lua[FG__LUA_COUNT] = {lua_sliding, lua_token,
                                                  lua_refund};

int fg__redis_params_check(const fg__algo_params *p, char *err, size_t errlen)
{
    if (p->algorithm == FG_SLIDING_WINDOW) {
        /* The script compares prev * left + (cur + cost) * period with
         * limit * period: up to 3 x limit x period must stay exact. */
        if (p->limit > (FG__REDIS_EXACT / 4) / p->period_us)
            return fg__seterr(err, errlen, FG_ERANGE,
                              "sliding_window on redis: limit x period "
                              "(%llu x %llu us) must stay below 2^51 to be "
                              "exact in Lua; use a smaller limit or period",
                              (unsigned long long)p->limit,
                              (unsigned long long)p->period_us);
    } else if (p->algorithm == FG_TOKEN_BUCKET) {
        uint64_t depth;
        if (p->burst > (FG__REDIS_EXACT / 16) / p->t_scaled)
            return fg__seterr(err, errlen, FG_ERANGE,
                              "token_bucket on redis: burst %llu at this "
                              "rate is too large to count exactly in Lua",
                              (unsigned long long)p->burst);
        depth = p->burst * p->t_scaled;
        if (p->scale > (FG__REDIS_EXACT - 4 * depth) / FG__REDIS_HORIZON_US)
            return fg__seterr(
                err, errlen, FG_ERANGE,
                "token_bucket on redis: %llu per %llu us counts time in "
                "1/%llu us, which Lua (exact below 2^53) cannot hold "
                "until 2050; use a limit that divides the period more "
                "evenly (e.g. 10/s, 12/s, 1000/min)",
                (unsigned long long)p->limit, (unsigned long long)p->period_us,
                (unsigned long long)p->scale);
    }
    return FG_OK;
}

size_t fg__redis_u64(char *buf, uint64_t v)
{
    char tmp[21];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

size_t fg__redis_head(char *buf, char type, uint64_t n)
{
    size_t len = 0;
    buf[len++] = type;
    len += fg__redis_u64(buf + len, n);
    buf[len++] = '\r';
    buf[len++] = '\n';
    return len;
}

size_t fg__redis_bulk(char *buf, const char *s, size_t len)
{
    size_t n = fg__redis_head(buf, '$', len);
    memcpy(buf + n, s, len);
    n += len;
    buf[n++] = '\r';
    buf[n++] = '\n';
    return n;
}

size_t fg__redis_format(char *buf, size_t cap, int argc, const char **argv,
                        const size_t *len)
{
    size_t n = 0;
    /* A count or length takes at most 20 digits: 24 bytes bound the header
     * and FG__REDIS_BULK_OVER each argument's framing. */
    if (argc < 0 || cap < 24)
        return 0;
    n = fg__redis_head(buf, '*', (uint64_t)argc);
    for (int i = 0; i < argc; i++) {
        if (len[i] > cap || cap - n < len[i] + FG__REDIS_BULK_OVER)
            return 0;
        n += fg__redis_bulk(buf + n, argv[i], len[i]);
    }
    return n;
}

size_t fg__redis_key(char *buf, const char *kp, size_t kplen, const char *key,
                     size_t keylen, int64_t window)
{
    size_t n = kplen;
    if (keylen > FG_MAX_KEY || kplen > FG__REDIS_PREFIX_MAX + FG_NAME_MAX + 2)
        return 0;
    memcpy(buf, kp, kplen);
    memcpy(buf + n, key, keylen);
    n += keylen;
    buf[n++] = '}';
    buf[n++] = ':';
    if (window >= 0)
        n += fg__redis_u64(buf + n, (uint64_t)window);
    return n;
}

static int starts(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len >= n && memcmp(s, lit, n) == 0;
}

int fg__redis_error_code(const char *s, size_t len)
{
    if (!s)
        return FG_EPROTO;
    if (starts(s, len, "NOSCRIPT"))
        return FG__REDIS_NOSCRIPT;
    if (starts(s, len, "BUSY ") || starts(s, len, "LOADING"))
        return FG_EBUSY;
    if (starts(s, len, "OOM"))
        return FG_EOOM;
    if (starts(s, len, "READONLY"))
        return FG_EREADONLY;
    if (starts(s, len, "NOAUTH") || starts(s, len, "WRONGPASS") ||
        starts(s, len, "NOPERM") || starts(s, len, "ERR invalid password") ||
        starts(s, len, "ERR AUTH") || starts(s, len, "ERR Client sent AUTH"))
        return FG_EAUTH;
    if (starts(s, len, "ERR floodgate"))
        return FG_ERANGE;
    if (starts(s, len, "ERR DB index"))
        return FG_EINVAL;
    if (starts(s, len, "MASTERDOWN") || starts(s, len, "CLUSTERDOWN") ||
        starts(s, len, "TRYAGAIN") || starts(s, len, "MOVED") ||
        starts(s, len, "ASK"))
        return FG_EBACKEND;
    return FG_EPROTO;
}

int fg__redis_script_values(const redisReply *r, size_t i, uint64_t limit,
                            fg_decision *d)
{
    redisReply *const *e;
    if (r->type != REDIS_REPLY_ARRAY || r->elements / 4 <= i)
        return FG_EPROTO;
    e = r->element + 4 * i;
    for (size_t j = 0; j < 4; j++)
        if (e[j]->type != REDIS_REPLY_INTEGER || e[j]->integer < 0)
            return FG_EPROTO;
    if (e[0]->integer > 1)
        return FG_EPROTO;
    d->allowed = (int)e[0]->integer;
    d->limit = limit;
    d->remaining = (uint64_t)e[1]->integer;
    d->reset_us = (uint64_t)e[2]->integer;
    d->retry_after_us = (uint64_t)e[3]->integer;
    fg__decision_ms(d);
    return FG_OK;
}

int fg__redis_script_reply(const redisReply *r, uint64_t limit, fg_decision *d)
{
    if (!r)
        return FG_EBACKEND;
    if (r->type == REDIS_REPLY_ERROR)
        return fg__redis_error_code(r->str, r->len);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4)
        return FG_EPROTO;
    return fg__redis_script_values(r, 0, limit, d);
}

void fg__redis_window_decision(const fg__algo_params *p, uint64_t now_us,
                               uint64_t count_before, uint64_t cost,
                               fg_decision *d)
{
    /* Past the limit the counter's overshoot is kept (DESIGN.md 3); to the
     * decision it means the same as a full window. */
    fg__algo_state s = {now_us / p->period_us + 1,
                        count_before > p->limit ? p->limit : count_before, 0};
    fg__algo_params fp = *p;
    uint64_t expires;
    fp.algorithm = FG_FIXED_WINDOW;
    if (fg__algo_check(&fp, &s, now_us, cost, d, &expires) != FG_OK) {
        /* Unreachable: the limiter validated 'cost'. Refuse, consume
         * nothing. */
        d->allowed = 0;
        d->limit = p->limit;
        d->remaining = 0;
        d->reset_us = d->retry_after_us = p->period_us;
        fg__decision_ms(d);
    }
}

uint64_t fg__redis_window_ttl_ms(const fg__algo_params *p, uint64_t now_us)
{
    uint64_t end = (now_us / p->period_us + 1) * p->period_us;
    uint64_t margin = p->period_us < 1000000 ? p->period_us : 1000000;
    return fg__us_to_ms_up(end - now_us + margin);
}
