#!/usr/bin/env bash
# bench/serve.sh -- floodgate serve against nginx `return 204`, same run,
# same wrk settings, one worker each. Prints requests/s and p99 latency
# side by side as ratios, for the memory store, the Redis store in exact
# mode, and a one-user flood at over 100x its limit (Redis commands per
# request, read from INFO commandstats, with the blocked-key cache), as
# Markdown tables. Then the approximate modes (mode = sync:INTERVAL and
# lease): their req/s on 100,000 users beside the memory store's, and the
# Redis commands per request of 100 users each at twice the limit, beside
# exact mode's.
#
#   bash bench/serve.sh            (make bench runs it)
#   DURATION=5 CONNS=64 bash bench/serve.sh
#   FLOODGATE=/other/floodgate FLOODS=0 bash bench/serve.sh
#                                  (another binary; the req/s rows only)
#   MODES=0 bash bench/serve.sh    (without the approximate modes)
set -u
. "$(dirname "$0")/lib.bash"
bench_args "$@"
cd "$(dirname "$0")/.."
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
DURATION=${DURATION:-3}
# The floods run longer: the bucket's initial burst is a one-time cost that
# a short run would weigh as if it recurred.
FLOOD_DURATION=${FLOOD_DURATION:-10}
CONNS=${CONNS:-32}
NGINX=${NGINX:-/usr/sbin/nginx}
bench_whole DURATION FLOOD_DURATION CONNS
for tool in wrk redis-server redis-cli "$NGINX" "$FLOODGATE"; do
    command -v "$tool" >/dev/null || { echo "bench/serve.sh: $tool not found"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/fgbench.XXXXXX")
PIDS=""
cleanup() {
    local p
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
bench_traps
[ -n "${KEEP:-}" ] && echo "temp: $T"

free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + (RANDOM * 32768 + RANDOM + BASHPID) % 12000))
        ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
    done
}

# nginx, one worker, `return 204`; redis-server. A port taken between
# the check and the bind is retried.
start_nginx() {
    NPORT=$(free_port)
    mkdir -p "$T/nginx/tmp"
    cat >"$T/nginx/nginx.conf" <<CONF
worker_processes 1;
pid nginx.pid;
error_log stderr crit;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path tmp/body; proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi; uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server { listen 127.0.0.1:$NPORT; location / { return 204; } }
}
CONF
    "$NGINX" -p "$T/nginx" -c "$T/nginx/nginx.conf" -g 'daemon off;' &
    local pid=$!
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && { PIDS="$PIDS $pid"; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
}
start_redis() {
    RPORT=$(free_port)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$T" --logfile "$T/redis.log" &
    local pid=$!
    for _ in $(seq 1 100); do
        redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && { PIDS="$PIDS $pid"; RPID=$pid; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
}
# stop_pid PID: stop one of ours before the end, and forget it (so that the
# cleanup never signals a number the system has given to another process).
stop_pid() {
    kill -TERM "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    PIDS=$(echo "$PIDS" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}
for _ in 1 2 3 4 5; do start_nginx && break; done
for _ in 1 2 3 4 5; do start_redis && break; done

start_fg() { # start_fg NAME STORE-URL: sets PORT_NAME
    local name=$1 url=$2
    cat >"$T/$name.ini" <<INI
[server]
workers = 1
id = bench
[store]
url = $url
timeout = 50ms
[limit bench]
key = query:k
algorithm = token_bucket
rate = 1000000/s
[limit benchfw]
key = query:k
algorithm = fixed_window
rate = 1000000/s
INI
    for r in 10 100; do
        printf '[limit f%s]\nkey = query:k\nalgorithm = token_bucket\nrate = %s/s\n' \
            "$r" "$r" >>"$T/$name.ini"
        printf '[limit w%s]\nkey = query:k\nalgorithm = fixed_window\nrate = %s/s\n' \
            "$r" "$r" >>"$T/$name.ini"
    done
    launch_fg "$name"
}
launch_fg() { # launch_fg NAME: serve $T/NAME.ini; sets PORT_NAME and FGPID
    local name=$1
    "$FLOODGATE" serve -c "$T/$name.ini" --listen 127.0.0.1:0 2>"$T/$name.log" &
    FGPID=$!
    PIDS="$PIDS $FGPID"
    for _ in $(seq 1 300); do
        grep -q event=listening "$T/$name.log" && break
        sleep 0.01
    done
    eval "PORT_$name=$(grep -o 'addr=[^ ]*' "$T/$name.log" | sed 's/.*://')"
}
start_fg mem memory
start_fg red "redis://127.0.0.1:$RPORT"

echo 'wrk.method = "POST"' >"$T/post.lua"
# Many users: each request's URL ends in one of 100,000 numbers at random
# (nginx gets the same script, so both pay wrk's per-request Lua alike).
cat >"$T/users.lua" <<'LUA'
wrk.method = "POST"
request = function()
    return wrk.format(nil, wrk.path .. math.random(100000))
end
LUA
SCRIPT=post.lua # the wrk script of the next runs
# run URL: prints "REQS_PER_S P99_MS TOTAL_REQUESTS"
run() {
    local url=$1
    wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s "$T/$SCRIPT" "$url" >"$T/wrk.out" 2>&1
    local rps p99 total
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$T/wrk.out")
    p99=$(awk '$1 == "99%" { v = $2;
        if (v ~ /us$/) { sub(/us$/, "", v); v = v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v) }
        else if (v ~ /s$/) { sub(/s$/, "", v); v = v * 1000 }
        print v }' "$T/wrk.out")
    total=$(awk '/requests in/ { print $1 }' "$T/wrk.out")
    echo "${rps:-0} ${p99:-0} ${total:-0}"
}
# best A B: of two "REQS P99 TOTAL" results, the one with more requests/s.
best() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
    print (x[1] + 0 >= y[1] + 0 ? a : b) }'; }
# The reference and floodgate alternate, twice, and each keeps its best
# round: a neighbour that slows one round slows one of either.
run_nginx_again() { NREF=$(best "$NREF" "$(run "http://127.0.0.1:$NPORT/")"); }
cmds() { redis-cli -p "$RPORT" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_/ && $1 != "cmdstat_info" { s += $3 } END { print s + 0 }'; }
# Commands sent by clients (a script's inner calls are counted by Redis too).
calls() { redis-cli -p "$RPORT" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '$1 ~ /^cmdstat_(evalsha|eval|incr|incrby|decrby|pexpire)$/ { s += $3 } END { print s + 0 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# A figure with thousands separators (mawk's printf has no ' flag).
commas() { awk -v v="$1" 'BEGIN { t = sprintf("%.0f", v)
    while (t ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", t)
    print t }'; }

cat <<MD
## floodgate serve beside nginx \`return 204\`

What: requests/s and p99 latency of \`floodgate serve\` (\`workers = 1\`)
beside nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///') answering \`return 204\` (\`worker_processes 1\`), both measured
by \`wrk -t1 -c$CONNS -d${DURATION}s --latency\`, POST, on loopback. Each
row's reference is measured beside it: nginx and floodgate alternate, twice,
and each keeps its best round. The Redis rows use a redis-server
($(redis-server --version | cut -d' ' -f3 | sed 's/v=//')) started on a free loopback port, the store in exact mode, a limit
of 1,000,000/s (every request allowed, so each is a decision); Redis
commands per request are the \`INFO commandstats\` delta over floodgate's
first round divided by its requests (a script's inner commands counted):
token bucket checks go as one script call per batch of up to 64 checks (its
TIME, GET/MGET and SET counted too), a fixed window's as INCR (INCRBY for
a cost above 1) and PEXPIRE NX in one round trip.

| scenario | floodgate req/s | p99 ms | nginx req/s | nginx p99 ms | req/s ratio | p99 ratio | target | Redis commands / request |
|---|---|---|---|---|---|---|---|---|
MD
row() { # row NAME FG NGINX TARGET [COMMANDS-PER-REQUEST]
    local name=$1 target=$4 per=${5:-}
    set -- $2 $3
    printf '| %s | %s | %.2f | %s | %.2f | %s× | %s× | %s | %s |\n' "$name" \
        "$(commas "$1")" "$2" "$(commas "$4")" "$5" \
        "$(ratio "$1" "$4")" "$(ratio "$2" "$5")" "$target" "$per"
}

NREF=$(run "http://127.0.0.1:$NPORT/")
h=$(run "http://127.0.0.1:$PORT_mem/healthz")
run_nginx_again
h=$(best "$h" "$(run "http://127.0.0.1:$PORT_mem/healthz")")
n0=$NREF
row "HTTP alone (\`/healthz\`)" "$h" "$n0" ""
NREF=$(run "http://127.0.0.1:$NPORT/")
m=$(run "http://127.0.0.1:$PORT_mem/v1/check?limit=bench&key=user1")
run_nginx_again
m=$(best "$m" "$(run "http://127.0.0.1:$PORT_mem/v1/check?limit=bench&key=user1")")
n1=$NREF
row "memory store, token_bucket" "$m" "$n1" "≥ 0.70×"
SCRIPT=users.lua
NREF=$(run "http://127.0.0.1:$NPORT/")
m=$(run "http://127.0.0.1:$PORT_mem/v1/check?limit=bench&key=user")
run_nginx_again
m=$(best "$m" "$(run "http://127.0.0.1:$PORT_mem/v1/check?limit=bench&key=user")")
row "memory store, token_bucket, 100,000 keys at random (nginx: the same wrk script)" "$m" "$NREF" ""
SCRIPT=post.lua
redis_row() { # redis_row NAME LIMIT [KEY]
    local name=$1 u="http://127.0.0.1:$PORT_red/v1/check?limit=$2&key=${3:-user1}" r r2 c0 c1
    NREF=$(run "http://127.0.0.1:$NPORT/")
    c0=$(cmds)
    r=$(run "$u")
    c1=$(cmds)
    run_nginx_again
    r2=$(run "$u")
    set -- $r
    row "$name" "$(best "$r" "$r2")" "$NREF" "≥ 0.50×" "$(ratio $((c1 - c0)) "$3")"
}
redis_row "Redis exact, token_bucket, one key" bench
SCRIPT=users.lua
redis_row "Redis exact, token_bucket, 100,000 keys at random (nginx: the same wrk script)" bench user
SCRIPT=post.lua
redis_row "Redis exact, fixed_window, one key" benchfw

# ---- Approximate modes ------------------------------------------------------
# Each mode's rows get a redis-server and a serve of their own, stopped after
# them: a mode's syncs and give-backs, or a backlog of them, then reach
# neither another row's counts nor its Redis.
MAIN_RPORT=$RPORT
# mode_ini NAME MODE ALGORITHM RATE: $T/NAME.ini, one limit "m" on $RPORT.
mode_ini() {
    cat >"$T/$1.ini" <<INI
[server]
workers = 1
id = bench
drain_timeout = 2s
[store]
url = redis://127.0.0.1:$RPORT
timeout = 50ms
[limit m]
key = query:k
algorithm = $3
rate = $4
mode = $2
INI
}
# mode_up NAME MODE ALGORITHM RATE: a fresh redis-server (RPORT, RPID) and a
# serve of the one limit on it (PORT_NAME, MPID).
mode_up() {
    for _ in 1 2 3 4 5; do start_redis && break; done
    mode_ini "$@"
    launch_fg "$1"
    MPID=$FGPID
}
mode_down() {
    stop_pid "$MPID"
    stop_pid "$RPID"
    RPORT=$MAIN_RPORT
}
# decisions PORT: "ALLOWED REFUSED BY_POLICY" of limit m, from /metrics
# (by the policy: fail_open, fail_closed or local, the store not answering).
decisions() {
    curl -s "http://127.0.0.1:$1/metrics" | awk '
        index($0, "floodgate_requests_total{limit=\"m\",") == 1 {
            if ($0 ~ /decision="allowed"/) a += $NF; else r += $NF
            if ($0 ~ /source="(fail_open|fail_closed|local)"/) p += $NF }
        END { print a + 0, r + 0, p + 0 }'
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else print "n/a" }'; }
# The host meanwhile: CPU time given to other guests (steal, which no load
# average shows) and left idle, from /proc/stat.
cpu_now() { awk '/^cpu / { print $5 + $6, $9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }
host_since() { # host_since "$(cpu_now)"
    awk -v a="$1" -v b="$(cpu_now)" 'BEGIN { split(a, x, " "); split(b, y, " ")
        t = y[3] - x[3]; if (t <= 0) t = 1
        printf "%.1f%% of the CPU time stolen by other guests, %.1f%% idle",
            100 * (y[2] - x[2]) / t, 100 * (y[1] - x[1]) / t }'
}
# settle: wait until Redis's command count holds still for 300 ms (3 s at
# most), so that the last syncs and give-backs are counted.
settle() {
    local a b
    a=$(cmds)
    for _ in $(seq 1 10); do
        sleep 0.3
        b=$(cmds)
        [ "$a" = "$b" ] && return
        a=$b
    done
}

if [ "${MODES:-1}" != 0 ]; then
cat <<MD

The approximate modes on 100,000 users: \`floodgate serve\` with one
token_bucket limit of 1,000,000/s (every request allowed) on a Redis store
in \`mode = exact\` (the reference), \`sync:200ms\` and \`lease\`, each
mode with a redis-server and a serve of its own, beside the memory store's
serve (the same limit) in the same rounds: the memory store and the mode
alternate, twice (\`wrk -t1 -c$CONNS -d${DURATION}s --latency\`, both with the
wrk script that ends each URL in one of 100,000 numbers at random), and
each keeps its best round. Redis commands per request: the \`INFO
commandstats\` delta from the start of the mode's first round to the end
of the memory round after it (so its last syncs and give-backs are
counted), divided by the first round's requests. Decided by the failure
policy: the share of the mode's decisions, over both rounds, made by
\`on_failure\` (its default: \`local\` for sync, \`open\` otherwise) because
Redis did not answer within the limit's \`timeout = 50ms\` or its breaker
was open (floodgate_requests_total by source).

| mode | floodgate req/s | p99 ms | memory store req/s | memory p99 ms | req/s ratio | target | decided by the failure policy | Redis commands / request |
|---|---|---|---|---|---|---|---|---|
MD
mem_users="http://127.0.0.1:$PORT_mem/v1/check?limit=bench&key=user"
SCRIPT=users.lua
host0=$(cpu_now)
for mode in exact sync:200ms lease; do
    mode_up mt "$mode" token_bucket 1000000/s
    u="http://127.0.0.1:$PORT_mt/v1/check?limit=m&key=user"
    mref=$(run "$mem_users")
    c0=$(cmds)
    r=$(run "$u")
    first=${r##* } # the first round's requests
    mref=$(best "$mref" "$(run "$mem_users")")
    c1=$(cmds)
    r=$(best "$r" "$(run "$u")")
    set -- $(decisions "$PORT_mt")
    by_policy=$(pct "$3" $(($1 + $2)))
    mode_down
    [ "$mode" = exact ] && target="reference" || target="≥ 0.90×"
    [ "$mode" = lease ] && lease_rps=${r%% *}
    set -- $r $mref
    printf '| %s | %s | %.2f | %s | %.2f | %s× | %s | %s | %s |\n' "$mode" \
        "$(commas "$1")" "$2" "$(commas "$4")" "$5" "$(ratio "$1" "$4")" \
        "$target" "$by_policy" "$(ratio $((c1 - c0)) "$first")"
done
SCRIPT=post.lua
cat <<MD

A lease decides here only on units this serve holds, and a token bucket's
lease lasts min(period, 1 s): at the lease row's rate, one user's requests
come on average $(awk -v r="${lease_rps:-0}" 'BEGIN { if (r > 0) printf "%.1f", 100000 / r; else print "n/a" }') s apart, so nearly every one waits for
a take from Redis, as an exact check waits for its answer. A sync
interval of 200 ms sees few requests of any one user, so it sends about
one key's usage per request, in batches pipelined at each tick.

Host during these rows: $(host_since "$host0").
MD
fi
[ "${FLOODS:-1}" = 0 ] && exit 0

# One user floods at 100x the limit of its key, paced by fgload (wrk
# cannot pace), then as fast as wrk can send.
FGLOAD=${FGLOAD:-$BUILD/tests/serve/fgload}
per_req() { awk -v c="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.4f", c / n; else print "n/a" }'; }
cat <<MD

One user floods its key on the Redis store (exact mode): first paced at
100× the key's limit by fgload (32 connections, ${FLOOD_DURATION} s; wrk cannot
pace), then as fast as wrk sends (\`wrk -t1 -c$CONNS -d${DURATION}s\`). Redis
commands per request: the \`INFO commandstats\` delta over the run (a
script's inner commands counted) divided by the requests sent; commands
sent: those the client sent (EVALSHA, EVAL, INCR, INCRBY, DECRBY, PEXPIRE;
a token bucket's are one a round trip, a fixed window's two).
The blocked-key cache answers a known refusal without Redis.

| flood | algorithm | requests | allowed | refused | p99 ms | Redis commands | commands / request | commands sent / request | target |
|---|---|---|---|---|---|---|---|---|---|
MD
paced() { # paced f|w LIMIT-PER-S (token bucket or fixed window)
    local alg=$1 lim=$2 c0 c1 k0 k1 out
    c0=$(cmds); k0=$(calls)
    out=$("$FGLOAD" -r $((lim * 100)) -c 32 -d $((FLOOD_DURATION * 1000)) \
        "http://127.0.0.1:$PORT_red/v1/check?limit=$alg$lim&key=paced$alg$lim")
    c1=$(cmds); k1=$(calls)
    # fgload prints "name=value" fields: sent, s200, s429, p99_us, ...
    local sent s200 s429 p99
    eval "$(echo "$out" | tr ' ' '\n' | awk -F= '$1 ~ /^(sent|s200|s429|p99_us)$/ { print $1 "=" $2 }')"
    p99=$(awk -v u="${p99_us:-0}" 'BEGIN { printf "%.2f", u / 1000 }')
    printf '| 100× of %s/s, paced | %s | %s | %s | %s | %s | %s | %s | %s | ≤ 0.05 |\n' "$lim" \
        "$([ "$alg" = f ] && echo token_bucket || echo fixed_window)" \
        "$(commas "$sent")" "$(commas "$s200")" "$(commas "$s429")" "$p99" \
        "$(commas $((c1 - c0)))" "$(per_req $((c1 - c0)) "$sent")" "$(per_req $((k1 - k0)) "$sent")"
}
paced f 10
paced f 100
paced w 10
paced w 100
c0=$(cmds); k0=$(calls)
f=$(run "http://127.0.0.1:$PORT_red/v1/check?limit=f10&key=wrkflood")
c1=$(cmds); k1=$(calls)
refused=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$T/wrk.out")
set -- $f
printf '| %s× of 10/s, wrk at its fastest (%s req/s) | token_bucket | %s | %s | %s | %.2f | %s | %s | %s | ≤ 0.05 |\n' \
    "$(commas "$(awk -v r="$1" 'BEGIN { print r / 10 }')")" "$(commas "$1")" "$(commas "$3")" \
    "$(commas $(($3 - ${refused:-0})))" "$(commas "${refused:-0}")" "$2" \
    "$(commas $((c1 - c0)))" "$(per_req $((c1 - c0)) "$3")" "$(per_req $((k1 - k0)) "$3")"

[ "${MODES:-1}" = 0 ] && exit 0

# ---- Redis load of the approximate modes ------------------------------------
# 100 users, each at twice its limit, paced: wrk cannot pace by itself, so
# its Lua script delays each request to its slot on a schedule of RATE a
# second (LuaJIT's FFI reads the monotonic clock), the keys taken in turn.
LOAD_DURATION=${LOAD_DURATION:-10}
LOAD_USERS=100
LOAD_LIMIT=${LOAD_LIMIT:-100} # per user, a second
LOAD_RATE=$((2 * LOAD_USERS * LOAD_LIMIT))
cat >"$T/paced.lua" <<'LUA'
-- RATE requests a second over all connections, each on its slot of one
-- schedule (a slow answer delays no later slot), the URL's key ending in
-- 0 .. USERS-1 in turn.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } fg_timespec;
int clock_gettime(int clock, fg_timespec *ts);
]]
local ts = ffi.new("fg_timespec")
local function now_ms()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end
local step = 1000 / tonumber(os.getenv("RATE"))
local users = tonumber(os.getenv("USERS"))
local slot, n = nil, 0
wrk.method = "POST"
delay = function()
    local t = now_ms()
    slot = (slot or t) + step
    return slot > t and math.floor(slot - t) or 0
end
request = function()
    n = n + 1
    return wrk.format(nil, wrk.path .. (n % users))
end
LUA
cat <<MD

Redis load of the approximate modes: 100 users, each at twice its limit.
A limit of $LOAD_LIMIT/s per user (its key), the default blocked-key cache on;
\`wrk -t1 -c64 -d${LOAD_DURATION}s\` paced at $(commas $LOAD_RATE) requests/s in all by its Lua
script (each request waits for its slot on one schedule, read from the
monotonic clock through LuaJIT's FFI; the URL's key is user0 .. user99 in
turn), so each user sends $((2 * LOAD_LIMIT))/s: twice the limit. Each mode gets a
redis-server and a serve of its own. After the load, the count waits one
sync interval (sync), a lease's life and tick (1.1 s, lease) or nothing
(exact), plus 0.5 s, then until \`INFO commandstats\` holds still for
0.3 s (3 s at most), so that the last syncs and give-backs are counted.
Offered and allowed are per user and second, over the limit (wrk's
requests and its measured time; allowed and refused from serve's
floodgate_requests_total): a token bucket allows its burst ($LOAD_LIMIT) once
more, 1.1× over ${LOAD_DURATION} s. Redis commands: every command Redis ran (a script's
inner ones counted); sent: those the client sent (EVALSHA, EVAL, INCR,
INCRBY, DECRBY, PEXPIRE). Each ratio is to exact mode's of the same
algorithm in the same run.

| algorithm | mode | requests | sent req/s | offered ÷ limit | allowed | refused | allowed ÷ limit | decided by the failure policy | Redis commands | commands / request | ÷ exact | commands sent / request | ÷ exact | target |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
MD
# ratio4 A B: A / B to four places (ratio6 to six, for ratios of ratios).
ratio4() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "n/a" }'; }
ratio6() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.6f", a / b; else print "n/a" }'; }
host0=$(cpu_now)
for alg in token_bucket fixed_window; do
    for mode in exact sync:200ms sync:1s lease; do
        mode_up ml "$mode" "$alg" "$LOAD_LIMIT/s"
        c0=$(cmds)
        k0=$(calls)
        RATE=$LOAD_RATE USERS=$LOAD_USERS wrk -t1 -c64 -d"${LOAD_DURATION}s" -s "$T/paced.lua" \
            "http://127.0.0.1:$PORT_ml/v1/check?limit=m&key=user" >"$T/wrk.out" 2>&1
        case $mode in
        sync:200ms) sleep 0.7 ;;
        sync:1s) sleep 1.5 ;;
        lease) sleep 1.6 ;;
        *) sleep 0.5 ;;
        esac
        settle
        c1=$(cmds)
        k1=$(calls)
        set -- $(decisions "$PORT_ml")
        allowed=$1 refused=$2 by_policy=$(pct "$3" $(($1 + $2)))
        mode_down
        sent=$(awk '/requests in/ { print $1 }' "$T/wrk.out")
        secs=$(awk '/requests in/ { v = $4; sub(/s,?$/, "", v); print v }' "$T/wrk.out")
        per_user_s=$(awk -v s="${secs:-0}" 'BEGIN { print s * '"$LOAD_USERS * $LOAD_LIMIT"' }')
        per=$(ratio6 $((c1 - c0)) "${sent:-0}")
        per_sent=$(ratio6 $((k1 - k0)) "${sent:-0}")
        if [ "$mode" = exact ]; then
            ex=$per ex_sent=$per_sent target=reference
        else
            target="≤ 0.05×"
        fi
        printf '| %s | %s | %s | %s | %s× | %s | %s | %s× | %s | %s | %s | %s× | %s | %s× | %s |\n' \
            "$alg" "$mode" "$(commas "${sent:-0}")" \
            "$(commas "$(awk -v n="${sent:-0}" -v s="${secs:-0}" 'BEGIN { if (s > 0) print n / s; else print 0 }')")" \
            "$(ratio "${sent:-0}" "$per_user_s")" "$(commas "$allowed")" "$(commas "$refused")" \
            "$(ratio "$allowed" "$per_user_s")" "$by_policy" "$(commas $((c1 - c0)))" \
            "$(ratio4 "$per" 1)" "$(ratio4 "$per" "$ex")" "$(ratio4 "$per_sent" 1)" \
            "$(ratio4 "$per_sent" "$ex_sent")" "$target"
    done
done
echo
echo "Host during these rows: $(host_since "$host0")."
