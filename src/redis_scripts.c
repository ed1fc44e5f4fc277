/* redis_scripts.c -- the Lua twins of the algorithms (see redis_scripts.h).
 * The C algorithm is algo.c; each script follows it step for step. */
#include <hiredis/hiredis.h>
#include <string.h>

#include "algo.h"
#include "redis_scripts.h"

/* FG__ADD_DEEP_US as the scripts spell it. */
#define FG__ADD_DEEP_LUA 281474976710656
_Static_assert(FG__ADD_DEEP_US == 281474976710656ull, "FG__ADD_DEEP_LUA");

#define STR_(x) #x
#define STR(x)  STR_(x)

/* clang-format off */

/* Shared by every script. Lua 5.1 numbers are doubles: exact integers below
 * 2^53, but a / b is rounded, so floor(a / b) may be one off. fmod is
 * exact, and so is the division of a - fmod(a, b), a multiple of b: idiv
 * is floor(a / b) for any a, b below 2^53; cdiv rounds up. Redis runs the
 * whole chunk per call: the helpers are kept few and small. */
#define LUA_COMMON                                                           \
    "local fmod = math.fmod\n"                                               \
    "local E = 9007199254740992\n"                                           \
    "local function idiv(a, b)\n"                                            \
    "  local r = fmod(a, b)\n"                                               \
    "  if r < 0 then r = r + b end\n"                                        \
    "  return (a - r) / b\n"                                                 \
    "end\n"                                                                  \
    "local function cdiv(a, b)\n"                                            \
    "  local q = idiv(a, b)\n"                                               \
    "  if q * b < a then return q + 1 end\n"                                 \
    "  return q\n"                                                           \
    "end\n"

/* floor(a * b / m) and a * b mod m, exact for a, b, m up to 2^53 whenever
 * the quotient is: a product below 2^53 is exact in a double; a larger one
 * is taken as a * floor(b / m) * m plus a * (b mod m), whose quotient and
 * remainder are built a bit of 'a' at a time, doubling modulo m, so that
 * no sum reaches 2^53 (x + y is formed only when it is below m). The 128-
 * bit products of algo.c, in Lua. */
#define LUA_MULQR                                                            \
    "local function mulqr(a, b, m)\n"                                        \
    "  local p = a * b\n"                                                    \
    "  if p < E then\n"                                                      \
    "    local r = fmod(p, m)\n"                                             \
    "    return (p - r) / m, r\n"                                            \
    "  end\n"                                                                \
    "  local bq = idiv(b, m)\n"                                              \
    "  local br = b - bq * m\n"                                              \
    "  local q, r, bit, hi = 0, 0, E, a * bq\n"              \
    "  while bit > a do bit = bit / 2 end\n"                                 \
    "  while bit >= 1 do\n"                                                  \
    "    q = q * 2\n"                                                        \
    "    if r >= m - r then r = r - (m - r); q = q + 1 else r = r + r end\n" \
    "    if a >= bit then\n"                                                 \
    "      a = a - bit\n"                                                    \
    "      if r >= m - br then r = r - (m - br); q = q + 1\n"                \
    "      else r = r + br end\n"                                            \
    "    end\n"                                                              \
    "    bit = bit / 2\n"                                                    \
    "  end\n"                                                                \
    "  return hi + q, r\n"                                                   \
    "end\n"

/* A token bucket's stored state: "A B C", TAT as whole us since 1970 (A)
 * and a fraction in units of 1/scale us (B), and the writer's depth_us + 1
 * (C), as algo.c's fg__algo_state. A value of the earlier format (TAT in
 * 1/scale us since FG__REDIS_EPOCH_S) is read with this limit's scale and
 * no writer. A fraction of another rate's scale is rounded up to the next
 * whole us. Anything else is a key never seen. */
#define LUA_TAT                                                              \
    "local function tat(v, scale)\n"                                         \
    "  if not v then return {0, 0, 0} end\n"                                 \
    "  local a, b, c = string.match(v, '^(%d+) (%d+) (%d+)$')\n"             \
    "  if a then\n"                                                          \
    "    a, b, c = tonumber(a), tonumber(b), tonumber(c)\n"                  \
    "    if b >= scale then a, b = a + 1, 0 end\n"                           \
    "    return {a, b, c}\n"                                                 \
    "  end\n"                                                                \
    "  local old = tonumber(v)\n"                                            \
    "  if not old or old < 0 or old >= E then return {0, 0, 0} end\n"       \
    "  local q = idiv(old, scale)\n"                                         \
    "  return {q + " STR(FG__REDIS_EPOCH_S) "000000, old - q * scale, 0}\n" \
    "end\n"

/* The sliding window of algo.c. KEYS[1] is the key's base ending in ':';
 * the window index is appended (both keys share the hash tag; an index
 * below 10^14 prints exactly). ARGV: period_us, limit, cost, now_us
 * ('' = Redis TIME), and for an add (cost negated) the units' age in us
 * (none: 0): they count in the window they were spent in, this one or
 * the previous one (whose key lives as long as this window), else
 * nowhere. Counts are plain integers; the current window's key lives
 * until the next window ends. The products of a count and a time
 * (up to 2^98) are taken by mulqr: 'wup' is the previous window's weight,
 * prev * left / period, rounded up. A count and a cost are compared as
 * cost <= limit - cur: their sum may pass 2^53. Both check scripts return {allowed,
 * remaining, reset_us, retry_after_us}, times exact in microseconds: the C
 * side rounds them up to milliseconds. */
static const char lua_sliding[] = LUA_COMMON LUA_MULQR
    "local period, limit, cost = tonumber(ARGV[1]), tonumber(ARGV[2]),\n"
    "                            tonumber(ARGV[3])\n"
    "local add = string.byte(ARGV[3]) == 45\n"
    "if add then cost = -cost end\n"
    "local now\n"
    "if ARGV[4] == '' then\n"
    "  local t = redis.call('TIME')\n"
    "  now = t[1] * 1000000 + t[2]\n"
    "else\n"
    "  now = tonumber(ARGV[4])\n"
    "end\n"
    "if now < 0 or now + 2 * period >= E then\n"
    "  return redis.error_reply('ERR floodgate: clock outside the exact range')\n"
    "end\n"
    "local w = idiv(now, period)\n"
    "local kc = KEYS[1] .. w\n"
    "local r = redis.call('MGET', kc, KEYS[1] .. (w - 1))\n"
    "local cur, prev = tonumber(r[1] or 0), tonumber(r[2] or 0)\n"
    "local elapsed = now - w * period\n"
    "local left = period - elapsed\n"
    "local pq, pr = mulqr(prev, left, period)\n"
    "local wup = pq\n"
    "if pr > 0 then wup = pq + 1 end\n"
    "if add then\n"
    "  local cap = " STR(FG__ADD_KEEP) " * limit\n"
    "  if cap > E then cap = E end\n"
    "  local at = now - (tonumber(ARGV[5]) or 0)\n"
    "  if at < 0 then at = 0 end\n"
    "  local aw = idiv(at, period)\n"
    "  if aw == w then\n"
    "    if cur >= cap then\n"
    "    elseif cost > cap - cur then cur = cap else cur = cur + cost end\n"
    "    redis.call('SET', kc, string.format('%d', cur), 'PX',\n"
    "               cdiv(left + period, 1000) + 1)\n"
    "  elseif aw == w - 1 and cost > 0 then\n"
    "    if prev >= cap then\n"
    "    elseif cost > cap - prev then prev = cap else prev = prev + cost end\n"
    "    redis.call('SET', KEYS[1] .. (w - 1), string.format('%d', prev),\n"
    "               'PX', cdiv(left, 1000) + 1)\n"
    "    pq, pr = mulqr(prev, left, period)\n"
    "    wup = pq\n"
    "    if pr > 0 then wup = pq + 1 end\n"
    "  end\n"
    "  local fit, retry = 0, 0\n"
    "  if wup <= limit - cur then fit = 1 end\n"
    "  local remaining = limit - cur - wup\n"
    "  if remaining < 0 then remaining = 0 end\n"
    "  if remaining < 1 then\n"
    "    if 1 <= limit - cur then\n"
    "      retry = period - mulqr(limit - cur - 1, period, prev) - elapsed\n"
    "    else\n"
    "      retry = left + period - mulqr(limit - 1, period, cur)\n"
    "    end\n"
    "  end\n"
    "  local reset = 0\n"
    "  if cur > 0 then reset = left + period\n"
    "  elseif prev > 0 then reset = left end\n"
    "  return {fit, remaining, reset, retry}\n"
    "end\n"
    "local allowed, retry = 0, 0\n"
    "if cost <= limit - cur and wup <= limit - cur - cost then\n"
    "  allowed = 1\n"
    "  cur = cur + cost\n"
    "  redis.call('SET', kc, string.format('%d', cur), 'PX',\n"
    "             cdiv(left + period, 1000) + 1)\n"
    "elseif cost <= limit - cur then\n"
    "  retry = period - mulqr(limit - cur - cost, period, prev) - elapsed\n"
    "else\n"
    "  retry = left + period - mulqr(limit - cost, period, cur)\n"
    "end\n"
    "local remaining, reset = limit - cur - wup, 0\n"
    "if remaining < 0 then remaining = 0 end\n"
    "if cur > 0 then reset = left + period\n"
    "elseif prev > 0 then reset = left end\n"
    "return {allowed, remaining, reset, retry}\n";

/* GCRA of algo.c (fg__token_bucket_wide, step for step) for one or more
 * checks in one call: KEYS[i] is check i's key (LUA_TAT); ARGV[8i-7 ..
 * 8i] its scale, unit_us, unit_frac (T = unit_us + unit_frac / scale us),
 * depth_us, depth_frac (a full bucket), t_scaled (T in 1/scale us), cost
 * and now_us ('' = Redis TIME, read once per call). Time is whole
 * microseconds since 1970 plus a fraction, so every value stays below 2^53
 * until 2200 for every rate, and only differences from now are scaled.
 * The checks run in order, as if each were its own call: a key seen twice
 * starts from the first's result. Keys are read with one GET or MGET and
 * each changed key written once, at the end, to expire when its TAT has
 * passed; a clock out of range fails the whole call before anything is
 * written. Returns {allowed, remaining, reset_us, retry_after_us} per
 * check, in one flat array. The checks of one limit share their first
 * six arguments, which are read as numbers again only when they change
 * (Lua interns strings: comparing two is comparing two pointers). cap is
 * the most TAT that an add leaves ahead of now; a check on a debt that
 * deep waits for all of it (fg__token_debt). Deeper still, or written
 * under another depth, the bucket counts as just empty, and that is
 * stored: on Redis TIME only a clock that stepped back (a failover to a
 * node that lags) leaves TAT that far ahead, and each check would
 * otherwise be refused for the whole step while told it waits one unit.
 * With the caller's clock (clock = client) a lagging server's view of
 * the others' TAT looks the same, and storing its clamp would give them a
 * free refill: there only a changed depth is stored.
 * On Redis Cluster a batch's keys live on one node but in many slots,
 * which a command's declared keys may not: there the call declares none,
 * ARGV[1] is the count n and ARGV[2 .. n+1] the keys, before the checks'
 * arguments. Each key is then read with its own GET, all before anything
 * is written, so that a key this node does not serve (a slot map out of
 * date) fails the whole call with nothing changed. */
static const char lua_token[] = LUA_COMMON LUA_MULQR LUA_TAT
    "local function cap(du, df, sc)\n"
    "  local keep = " STR(FG__ADD_KEEP) "\n"
    "  if du > " STR(FG__ADD_DEEP_LUA) " then keep = " STR(FG__ADD_KEEP_DEEP) " end\n"
    "  local kq, kr = mulqr(keep, df, sc)\n"
    "  return keep * du + kq, kr\n"
    "end\n"
    "local n, keys, a0 = #KEYS, KEYS, 0\n"
    "local vals\n"
    "if n == 0 then\n"
    "  n, keys, vals = tonumber(ARGV[1]), {}, {}\n"
    "  a0 = n + 1\n"
    "  for i = 1, n do\n"
    "    keys[i] = ARGV[i + 1]\n"
    "    local v = redis.pcall('GET', keys[i])\n"
    "    if type(v) == 'table' and v.err then return v end\n"
    "    vals[i] = v\n"
    "  end\n"
    "elseif n == 1 then vals = {redis.call('GET', KEYS[1])}\n"
    "else vals = redis.call('MGET', unpack(KEYS)) end\n"
    "local st, ttl, out = {}, {}, {}\n"
    "local rtime, p1, p2, p3, p4, p5, p6, sc, uu, uf, du, df, t\n"
    "for i = 1, n do\n"
    "  local o = a0 + i * 8 - 8\n"
    "  if ARGV[o + 1] ~= p1 or ARGV[o + 2] ~= p2 or ARGV[o + 3] ~= p3 or\n"
    "     ARGV[o + 4] ~= p4 or ARGV[o + 5] ~= p5 or ARGV[o + 6] ~= p6 then\n"
    "    p1, p2, p3 = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3]\n"
    "    p4, p5, p6 = ARGV[o + 4], ARGV[o + 5], ARGV[o + 6]\n"
    "    sc, uu, uf = tonumber(p1), tonumber(p2), tonumber(p3)\n"
    "    du, df, t = tonumber(p4), tonumber(p5), tonumber(p6)\n"
    "  end\n"
    "  local cost, now = tonumber(ARGV[o + 7]), ARGV[o + 8]\n"
    "  local add = string.byte(ARGV[o + 7]) == 45\n"
    "  if add then cost = -cost end\n"
    "  local rclock = now == ''\n"
    "  if rclock then\n"
    "    if not rtime then\n"
    "      local tm = redis.call('TIME')\n"
    "      rtime = tm[1] * 1000000 + tm[2]\n"
    "    end\n"
    "    now = rtime\n"
    "  else\n"
    "    now = tonumber(now)\n"
    "  end\n"
    "  if now < 0 or now + 2 * du + 2 >= E then\n"
    "    return redis.error_reply('ERR floodgate: clock outside the exact range')\n"
    "  end\n"
    "  local k = keys[i]\n"
    "  local s = st[k]\n"
    "  if not s then s = tat(vals[i], sc); st[k] = s end\n"
    "  local tag = du + 1\n"
    "  local au, af = 0, 0\n"
    "  if s[1] >= now then au, af = s[1] - now, s[2] end\n"
    "  if add then\n"
    "    local cq, cr = mulqr(cost, uf, sc)\n"
    "    local nu, nf = au + cost * uu + cq, 0\n"
    "    if af >= sc - cr then nu, nf = nu + 1, af - (sc - cr)\n"
    "    else nf = af + cr end\n"
    "    local cu, cf = cap(du, df, sc)\n"
    "    if nu > cu or (nu == cu and nf > cf) then nu, nf = cu, cf end\n"
    "    if au > nu or (au == nu and af > nf) then nu, nf = au, af end\n"
    "    s[1], s[2], s[3] = now + nu, nf, tag\n"
    "    ttl[k] = cdiv(nu + 1, 1000) + 1\n"
    "    local o4 = i * 4 - 4\n"
    "    local fit, rem, retry = 0, 0, 0\n"
    "    if nu < du or (nu == du and nf <= df) then\n"
    "      fit = 1\n"
    "      local q1, r1 = mulqr(du - nu, sc, t)\n"
    "      local rf = df - nf\n"
    "      local yq = idiv(rf, t)\n"
    "      rem = q1 + yq + idiv(r1 + rf - yq * t, t)\n"
    "    end\n"
    "    if rem < 1 then\n"
    "      local xu, xf = nu + uu - du, nf + uf - df\n"
    "      if xf < 0 then xu, xf = xu - 1, xf + sc end\n"
    "      if xf >= sc then xu, xf = xu + 1, xf - sc end\n"
    "      retry = xu\n"
    "      if xf > 0 then retry = xu + 1 end\n"
    "      if retry < 0 then retry = 0 end\n"
    "    end\n"
    "    out[o4 + 1] = fit\n"
    "    out[o4 + 2] = rem\n"
    "    out[o4 + 3] = nu\n"
    "    if nf > 0 then out[o4 + 3] = nu + 1 end\n"
    "    out[o4 + 4] = retry\n"
    "  else\n"
    "  local deep = au > du or (au == du and af > df)\n"
    "  if deep then\n"
    "    local cu, cf = cap(du, df, sc)\n"
    "    if s[3] ~= tag or au > cu or (au == cu and af > cf) then\n"
    "      deep = false\n"
    "      au, af = du, df\n"
    "      if s[3] ~= tag or rclock then\n"
    "        s[1], s[2], s[3] = now + du, df, tag\n"
    "        ttl[k] = cdiv(du + 1, 1000) + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local cq, cr = mulqr(cost, uf, sc)\n"
    "  local nu, nf = au + cost * uu + cq, 0\n"
    "  if af >= sc - cr then nu, nf = nu + 1, af - (sc - cr)\n"
    "  else nf = af + cr end\n"
    "  local allowed, retry, ru, rf = 0, 0, 0, 0\n"
    "  if nu < du or (nu == du and nf <= df) then\n"
    "    allowed = 1\n"
    "    s[1], s[2], s[3] = now + nu, nf, tag\n"
    "    ttl[k] = cdiv(nu + 1, 1000) + 1\n"
    "    au, af, ru, rf = nu, nf, du - nu, df - nf\n"
    "  else\n"
    "    if not deep then ru, rf = du - au, df - af end\n"
    "    local xu, xf = nu - du, nf - df\n"
    "    if xf < 0 then xu, xf = xu - 1, xf + sc end\n"
    "    retry = xu\n"
    "    if xf > 0 then retry = xu + 1 end\n"
    "  end\n"
    "  local q1, r1 = mulqr(ru, sc, t)\n"
    "  local yq = idiv(rf, t)\n"
    "  local o4 = i * 4 - 4\n"
    "  out[o4 + 1] = allowed\n"
    "  out[o4 + 2] = q1 + yq + idiv(r1 + rf - yq * t, t)\n"
    "  out[o4 + 3] = au\n"
    "  if af > 0 then out[o4 + 3] = au + 1 end\n"
    "  out[o4 + 4] = retry\n"
    "  end\n"
    "end\n"
    "for k, ms in pairs(ttl) do\n"
    "  local s = st[k]\n"
    "  redis.call('SET', k, string.format('%d %d %d', s[1], s[2], s[3]),\n"
    "             'PX', ms)\n"
    "end\n"
    "return out\n";

/* fg__algo_refund of algo.c: give back ARGV[2] units, never below zero,
 * never creating a key, keeping each key's expiry, to the window or the
 * bucket's debt that took them. ARGV[1] says which:
 *   'f' fixed window: KEYS[1] is the key of the window that took them
 *       (a count above the limit holds refused units whose own give-back
 *       is on its way: they are not this refund's to take);
 *   's' sliding window: KEYS[1] the base ending in ':', ARGV[4] the
 *       period, ARGV[5] how long ago they were taken: that window's key;
 *   't' token bucket: ARGV[4..6] scale, unit_us, unit_frac; TAT moves
 *       back by cost * T, but by ARGV[7] us at most ('': no bound), and
 *       not before now (a bucket back at now is deleted: the same as a
 *       full one).
 * ARGV[3] is now_us ('' = Redis TIME). Returns 1 when a key changed. */
static const char lua_refund[] = LUA_COMMON LUA_MULQR LUA_TAT
    "local kind, cost = ARGV[1], tonumber(ARGV[2])\n"
    "local function take(k)\n"
    "  local v = tonumber(redis.call('GET', k))\n"
    "  if not v then return false end\n"
    "  local n = cost\n"
    "  if v < n then n = v end\n"
    "  if n > 0 then redis.call('DECRBY', k, string.format('%d', n)) end\n"
    "  return true\n"
    "end\n"
    "if kind == 'f' then\n"
    "  if take(KEYS[1]) then return 1 end\n"
    "  return 0\n"
    "end\n"
    "local now = tonumber(ARGV[3])\n"
    "if ARGV[3] == '' then\n"
    "  local tm = redis.call('TIME')\n"
    "  now = tm[1] * 1000000 + tm[2]\n"
    "end\n"
    "if kind == 's' then\n"
    "  local w = idiv(now - tonumber(ARGV[5]), tonumber(ARGV[4]))\n"
    "  if take(KEYS[1] .. w) then return 1 end\n"
    "  return 0\n"
    "end\n"
    "local sc, uu, uf = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])\n"
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v then return 0 end\n"
    "local s = tat(v, sc)\n"
    "local cq, cr = mulqr(cost, uf, sc)\n"
    "local bu, bf = cost * uu + cq, cr\n"
    "local hold = tonumber(ARGV[7])\n"
    "if hold and bu >= hold then bu, bf = hold, 0 end\n"
    "local a, b = s[1] - bu, s[2] - bf\n"
    "if b < 0 then a, b = a - 1, b + sc end\n"
    "if a < now or (a == now and b == 0) then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "else\n"
    "  redis.call('SET', KEYS[1], string.format('%d %d %d', a, b, s[3]),\n"
    "             'PX', cdiv(a + 1 - now, 1000) + 1)\n"
    "end\n"
    "return 1\n";
/* clang-format on */

const char *const fg__redis_lua[FG__LUA_COUNT] = {lua_sliding, lua_token,
                                                  lua_refund};

const char *fg__redis_sha(const fg__redis_shas *s, int i)
{
    return (atomic_load_explicit(&s->known, memory_order_acquire) >> i) & 1
               ? s->sha[i]
               : NULL;
}

int fg__redis_sha_learn(fg__redis_shas *s, int i, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
        return 0;
    if (!(atomic_load(&s->known) & (1 << i))) {
        memcpy(s->sha[i], r->str, 40);
        s->sha[i][40] = '\0';
        atomic_fetch_or(&s->known, 1 << i);
    }
    return 1;
}
