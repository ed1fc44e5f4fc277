#!/usr/bin/env bash
# bench/serve.sh -- floodgate serve against nginx `return 204`, same run,
# same wrk settings, one worker each. Prints requests/s and p99 latency
# side by side as ratios, for the memory store, the Redis store in exact
# mode, and a one-user flood at over 100x its limit (Redis commands per
# request, read from INFO commandstats, with the blocked-key cache), as
# Markdown tables.
#
#   bash bench/serve.sh            (make bench runs it)
#   DURATION=5 CONNS=64 bash bench/serve.sh
#   FLOODGATE=/other/floodgate FLOODS=0 bash bench/serve.sh
#                                  (another binary; the req/s rows only)
set -u
cd "$(dirname "$0")/.."
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
DURATION=${DURATION:-3}
# The floods run longer: the bucket's initial burst is a one-time cost that
# a short run would weigh as if it recurred.
FLOOD_DURATION=${FLOOD_DURATION:-10}
CONNS=${CONNS:-32}
NGINX=${NGINX:-/usr/sbin/nginx}
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
trap cleanup EXIT
[ -n "${KEEP:-}" ] && echo "temp: $T"
trap 'exit 1' TERM INT

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
        redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && { PIDS="$PIDS $pid"; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
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
    "$FLOODGATE" serve -c "$T/$name.ini" --listen 127.0.0.1:0 2>"$T/$name.log" &
    PIDS="$PIDS $!"
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
TIME, GET/MGET and SET counted too), a fixed window's as INCRBY and
PEXPIRE NX in one round trip.

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
