#!/usr/bin/env bash
# bench/peers.sh -- `floodgate serve` beside two peers, in one run, under
# the same load (wrk, same connections and duration, one worker each):
#
#   - rate-limiter-flexible (npm) over ioredis, in a Node http server
#     (bench/peers/rlf-server.js), against the same redis-server as
#     `floodgate serve` on the Redis store (fixed window, as
#     rate-limiter-flexible's RateLimiterRedis counts);
#   - nginx limit_req for a local limit, against `floodgate serve` on the
#     memory store (token bucket, as limit_req's leaky bucket).
#
# Prints Markdown: requests/s, p99 latency, the share refused, and Redis
# commands and Redis CPU per request (INFO commandstats and INFO cpu
# before and after each run). Not a test. The npm packages are installed
# into bench/peers/node_modules at the first run (npm ci).
#
#   bash bench/peers.sh            (make bench runs it)
#   DURATION=5 CONNS=64 bash bench/peers.sh
set -u
. "$(dirname "$0")/lib.bash"
bench_args "$@"
cd "$(dirname "$0")/.."
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
DURATION=${DURATION:-3}
CONNS=${CONNS:-32}
bench_whole DURATION CONNS
NGINX=${NGINX:-/usr/sbin/nginx}
for tool in wrk redis-server redis-cli curl ss "$NGINX" "$FLOODGATE"; do
    command -v "$tool" >/dev/null || { echo "bench/peers.sh: $tool not found"; exit 1; }
done
# rate-limiter-flexible and ioredis, at the versions of package-lock.json.
NODE_OK=1
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    NODE_OK=0
elif [ ! -d bench/peers/node_modules/rate-limiter-flexible ] ||
    [ ! -d bench/peers/node_modules/ioredis ]; then
    (cd bench/peers && npm ci --no-audit --no-fund --loglevel=error) >&2 || NODE_OK=0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/fgpeers.XXXXXX")
PIDS=""
cleanup() {
    local p
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
bench_traps

free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + (RANDOM * 32768 + RANDOM + BASHPID) % 12000))
        ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
    done
}
# wait_http PID URL: until URL answers, or PID dies (1).
wait_http() {
    for _ in $(seq 1 300); do
        curl -s -o /dev/null "$2" && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
}

# nginx, one worker. `return 204` runs in the rewrite phase, before
# limit_req's preaccess phase, so it would answer without asking the
# limit: the location asks limit_req, then try_files hands the request to
# a location that returns 204 (the missing file's stat() is cached).
# limit_req is a leaky bucket; a burst of 0 would refuse the second request
# of a millisecond, so each zone has a burst of a second's rate (nodelay).
start_nginx() {
    NPORT=$(free_port)
    # nginx's worker runs as nobody, and looks into the html folder.
    mkdir -p "$T/nginx/tmp" "$T/nginx/html"
    chmod 755 "$T" "$T/nginx" "$T/nginx/html"
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
    limit_req_zone \$arg_key zone=high:10m rate=1000000r/s;
    limit_req_zone \$arg_key zone=low:10m rate=100r/s;
    limit_req_status 429;
    open_file_cache max=16 inactive=60s;
    open_file_cache_errors on;
    server {
        listen 127.0.0.1:$NPORT;
        location /high { limit_req zone=high burst=1000000 nodelay; try_files /none @ok; }
        location /low { limit_req zone=low burst=100 nodelay; try_files /none @ok; }
        location @ok { return 204; }
    }
}
CONF
    "$NGINX" -p "$T/nginx" -c "$T/nginx/nginx.conf" -g 'daemon off;' &
    local pid=$!
    wait_http "$pid" "http://127.0.0.1:$NPORT/high?key=up" && { PIDS="$PIDS $pid"; return 0; }
    kill "$pid" 2>/dev/null
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
start_node() {
    JPORT=$(free_port)
    node bench/peers/rlf-server.js "$JPORT" "$RPORT" >"$T/node.log" 2>&1 &
    local pid=$!
    wait_http "$pid" "http://127.0.0.1:$JPORT/high?key=up" && { PIDS="$PIDS $pid"; return 0; }
    kill "$pid" 2>/dev/null
    return 1
}
start_fg() { # start_fg NAME STORE-URL: sets PORT_NAME
    local name=$1 url=$2
    cat >"$T/$name.ini" <<INI
[server]
workers = 1
id = peers
[store]
url = $url
timeout = 50ms
[limit tb]
key = query:key
algorithm = token_bucket
rate = 1000000/s
[limit tb100]
key = query:key
algorithm = token_bucket
rate = 100/s
[limit fw]
key = query:key
algorithm = fixed_window
rate = 1000000/s
[limit fw100]
key = query:key
algorithm = fixed_window
rate = 100/s
INI
    "$FLOODGATE" serve -c "$T/$name.ini" --listen 127.0.0.1:0 2>"$T/$name.log" &
    PIDS="$PIDS $!"
    for _ in $(seq 1 300); do
        grep -q event=listening "$T/$name.log" && break
        sleep 0.01
    done
    eval "PORT_$name=$(grep -o 'addr=[^ ]*' "$T/$name.log" | sed 's/.*://')"
}
for _ in 1 2 3 4 5; do start_nginx && break; done
for _ in 1 2 3 4 5; do start_redis && break; done
if [ "$NODE_OK" = 1 ]; then
    for _ in 1 2 3; do start_node && break; done || NODE_OK=0
fi
start_fg mem memory
start_fg red "redis://127.0.0.1:$RPORT"
echo 'wrk.method = "POST"' >"$T/post.lua"

# Redis counters: commands run (a script's inner commands included, INFO
# left out) and CPU seconds, system and user.
cmds() { redis-cli -p "$RPORT" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_/ && $1 != "cmdstat_info" { s += $3 } END { print s + 0 }'; }
cpu() { redis-cli -p "$RPORT" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { s += $2 } END { printf "%.6f", s }'; }
# run URL: "REQS_PER_S P99_MS TOTAL REFUSED COMMANDS CPU_S" of one wrk run.
run() {
    local c0 c1 u0 u1
    c0=$(cmds) u0=$(cpu)
    wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s "$T/post.lua" "$1" >"$T/wrk.out" 2>&1
    c1=$(cmds) u1=$(cpu)
    awk -v c=$((c1 - c0)) -v u0="$u0" -v u1="$u1" '
        /^Requests\/sec:/ { rps = $2 }
        /requests in/ { total = $1 }
        /Non-2xx or 3xx responses:/ { refused = $NF }
        $1 == "99%" { v = $2
            if (v ~ /us$/) { sub(/us$/, "", v); v = v / 1000 }
            else if (v ~ /ms$/) { sub(/ms$/, "", v) }
            else if (v ~ /s$/) { sub(/s$/, "", v); v = v * 1000 }
            p99 = v }
        END { printf "%s %s %s %s %s %.6f\n", rps + 0, p99 + 0, total + 0,
                  refused + 0, c, u1 - u0 }' "$T/wrk.out"
}
# pair PEER-URL FG-URL: the two alternate, twice; sets P and F to each
# side's best round by requests/s, with the Redis figures summed over both
# rounds ("REQS_PER_S P99_MS TOTAL REFUSED COMMANDS CPU_S").
pair() {
    local p1 f1 p2 f2
    p1=$(run "$1") f1=$(run "$2") p2=$(run "$1") f2=$(run "$2")
    P=$(merge "$p1" "$p2") F=$(merge "$f1" "$f2")
}
merge() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ")
    if (x[1] + 0 >= y[1] + 0) { r = x[1]; p = x[2] } else { r = y[1]; p = y[2] }
    printf "%s %s %d %d %d %.6f\n", r, p, x[3] + y[3], x[4] + y[4], x[5] + y[5], x[6] + y[6] }'; }
# row SCENARIO LIMITER RESULT [REFERENCE REDIS]: one Markdown row; with a
# reference, the ratio of requests/s; REDIS 1 prints the Redis figures.
row() {
    awk -v s="$1" -v n="$2" -v a="$3" -v b="${4:-}" -v redis="${5:-0}" '
    function commas(v,   t) { t = sprintf("%d", v)
        while (t ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", t)
        return t }
    BEGIN {
        split(a, x, " "); split(b, y, " ")
        refused = x[3] > 0 ? sprintf("%.1f%%", 100 * x[4] / x[3]) : "n/a"
        cmd = "-"; us = "-"
        if (redis && x[3] > 0) {
            cmd = sprintf("%.3f", x[5] / x[3]); us = sprintf("%.2f", 1e6 * x[6] / x[3])
        }
        ratio = (b != "" && y[1] > 0) ? sprintf("%.2f×", x[1] / y[1]) : ""
        printf "| %s | %s | %s | %.2f | %s | %s | %s | %s |\n", s, n,
            commas(x[1] + 0.5), x[2], refused, cmd, us, ratio }'
}

RLF_VER=$(node -p 'require("./bench/peers/node_modules/rate-limiter-flexible/package.json").version' 2>/dev/null)
IOR_VER=$(node -p 'require("./bench/peers/node_modules/ioredis/package.json").version' 2>/dev/null)
NGX_VER=$("$NGINX" -v 2>&1 | sed 's/.*nginx\///')
cat <<EOF
## Peers: rate-limiter-flexible on Redis, nginx limit_req

What: \`floodgate serve\` beside two peers in one run, under the same load:
\`wrk -t1 -c$CONNS -d${DURATION}s --latency\`, POST, one key, loopback. Each
side runs alone while measured; the peer and floodgate alternate, twice, and
each keeps its round with the most requests/s (its p99 from that round);
the share refused and the Redis figures are over both rounds. One worker
each, for fairness: \`floodgate serve\` with \`workers = 1\`, one Node
process (one event loop), nginx with \`worker_processes 1\`. Redis figures
are deltas of \`INFO commandstats\` (every command Redis ran, the commands
inside a Lua script included, INFO left out) and of \`INFO cpu\`
(used_cpu_sys + used_cpu_user) over the run, divided by the requests wrk
completed.

On Redis: rate-limiter-flexible $RLF_VER (\`RateLimiterRedis.consume(key)\`,
ioredis $IOR_VER, one connection, its defaults) in a Node $(node --version 2>/dev/null)
\`http\` server (\`bench/peers/rlf-server.js\`) that answers 200 or 429,
beside \`floodgate serve\` on the same redis-server
($(redis-server --version | cut -d' ' -f3 | sed 's/v=//')) in exact mode. Both count a fixed
window: rate-limiter-flexible runs a Lua script of SET NX EX, INCRBY and
PTTL (its window starts at a key's first request); floodgate
\`fixed_window\` sends INCR and PEXPIRE NX together, in one round trip
(windows aligned to the clock). The decision path at 1,000,000 a second (nearly every
request allowed), then one key flooded far above 100 a second (nearly every
request refused): floodgate's blocked-key cache answers known refusals
without Redis; rate-limiter-flexible asks Redis for each by default, and
with \`inMemoryBlockOnConsumed\` (its own in-process block) in the last row.

EOF
echo '| scenario | limiter | req/s | p99 ms | refused | Redis commands / request | Redis CPU µs / request | req/s, floodgate ÷ peer |'
echo '|---|---|---|---|---|---|---|---|'
FG=$PORT_red
if [ "$NODE_OK" = 1 ]; then
    pair "http://127.0.0.1:$JPORT/high?key=user1" "http://127.0.0.1:$FG/v1/check?limit=fw&key=user1"
    row "decision path, 1,000,000/s" "rate-limiter-flexible" "$P" "" 1
    row "" "floodgate serve, fixed_window" "$F" "$P" 1
    pair "http://127.0.0.1:$JPORT/low?key=flood1" "http://127.0.0.1:$FG/v1/check?limit=fw100&key=flood1"
    row "one key flooded, 100/s" "rate-limiter-flexible" "$P" "" 1
    row "" "floodgate serve, fixed_window" "$F" "$P" 1
    pair "http://127.0.0.1:$JPORT/lowblock?key=flood2" "http://127.0.0.1:$FG/v1/check?limit=fw100&key=flood2"
    row "the same, peer with inMemoryBlockOnConsumed = 100" "rate-limiter-flexible" "$P" "" 1
    row "" "floodgate serve, fixed_window" "$F" "$P" 1
else
    echo "| rate-limiter-flexible not run: node, npm or \`npm ci\` in bench/peers failed | | | | | | | |"
fi
cat <<EOF

Local limit, no Redis: nginx $NGX_VER \`limit_req\` (a leaky bucket, burst
of a second's rate, \`nodelay\`, 429 when refused) answering 204, beside
\`floodgate serve\` on the memory store with \`token_bucket\` at the same
rate. nginx's \`return 204\` runs before \`limit_req\` would, so its location
asks \`limit_req\` and then hands the request, by \`try_files\`, to a location
that returns 204.

| scenario | limiter | req/s | p99 ms | refused | Redis commands / request | Redis CPU µs / request | req/s, floodgate ÷ peer |
|---|---|---|---|---|---|---|---|
EOF
FG=$PORT_mem
pair "http://127.0.0.1:$NPORT/high?key=user1" "http://127.0.0.1:$FG/v1/check?limit=tb&key=user1"
row "decision path, 1,000,000/s" "nginx limit_req" "$P"
row "" "floodgate serve, memory, token_bucket" "$F" "$P"
pair "http://127.0.0.1:$NPORT/low?key=flood1" "http://127.0.0.1:$FG/v1/check?limit=tb100&key=flood1"
row "one key flooded, 100/s" "nginx limit_req" "$P"
row "" "floodgate serve, memory, token_bucket" "$F" "$P"
