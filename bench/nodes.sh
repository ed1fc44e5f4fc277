#!/usr/bin/env bash
# bench/nodes.sh -- floodgate serve on one Redis, on 3 shards
# (shards=URL,URL,URL) and on a Redis Cluster of 3 masters, in alternating
# rounds of the same wrk load (token_bucket, 100,000 users at random): the
# Redis commands and the Redis CPU per decision summed over the nodes, and
# the p99 latency, each beside one node's in the same run; and from the CPU
# per decision, the decisions a second that N nodes would carry (this
# machine has 2 cores: it cannot show the scaling itself).
#
#   bash bench/nodes.sh            (make bench runs it)
#   DURATION=5 ROUNDS=5 bash bench/nodes.sh
set -u
. "$(dirname "$0")/lib.bash"
bench_args "$@"
cd "$(dirname "$0")/.."
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
bench_whole DURATION ROUNDS CONNS
for tool in wrk redis-server redis-cli "$FLOODGATE"; do
    command -v "$tool" >/dev/null || { echo "bench/nodes.sh: $tool not found"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/fgnodes.XXXXXX")
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
start_redis() { # start_redis: a port of a new redis-server in RPORT
    RPORT=$(free_port)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
        --logfile "$T/redis-$RPORT.log" &
    PIDS="$PIDS $!"
    for _ in $(seq 1 100); do
        redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.02
    done
    echo "bench/nodes.sh: redis-server does not start"; exit 1
}

start_redis
ONE=$RPORT
SH=()
for i in 0 1 2; do start_redis; SH[$i]=$RPORT; done
CLUSTER_REPLICAS=0
. tests/lib/cluster.sh
start_cluster || { echo "bench/nodes.sh: the cluster does not start"; exit 1; }
declare -A URL PORTS
URL[one]="redis://127.0.0.1:$ONE"
PORTS[one]=$ONE
URL[shards]="shards=redis://127.0.0.1:${SH[0]},redis://127.0.0.1:${SH[1]},redis://127.0.0.1:${SH[2]}"
PORTS[shards]="${SH[*]}"
URL[cluster]="cluster=redis://127.0.0.1:${CPORT[0]}"
PORTS[cluster]="${CPORT[*]}"

cat >"$T/users.lua" <<'LUA'
wrk.method = "POST"
request = function()
    return wrk.format(nil, wrk.path .. math.random(100000))
end
LUA

# Summed over the nodes of store $1: the commands clients sent (the
# scripts' own GET, MGET, SET and TIME are counted by Redis too, and left
# out), and the CPU seconds Redis used.
calls() {
    local p s=0 n
    for p in ${PORTS[$1]}; do
        n=$(redis-cli -p "$p" info commandstats | tr -d '\r' | awk -F'[:=,]' \
            '/^cmdstat_/ && $1 !~ /^cmdstat_(get|mget|set|time|info|config|ping)$/ { s += $3 } END { print s + 0 }')
        s=$((s + n))
    done
    echo "$s"
}
cpu() {
    local p
    for p in ${PORTS[$1]}; do
        redis-cli -p "$p" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f\n", s }'
    done | awk '{ s += $1 } END { printf "%.6f", s }'
}

# One round of store $1: prints "DECISIONS CALLS CPU_S P99_MS RPS".
round() {
    local name=$1 port
    port=$(free_port)
    cat >"$T/$name.ini" <<INI
[server]
workers = 1
listen = 127.0.0.1:$port
[store]
url = ${URL[$name]}
prefix = b$RANDOM:
[limit u]
key = query:k
algorithm = token_bucket
rate = 1000000000/s
timeout = 100ms
INI
    "$FLOODGATE" serve -c "$T/$name.ini" 2>"$T/$name.log" &
    local pid=$!
    for _ in $(seq 1 300); do grep -q event=listening "$T/$name.log" && break; sleep 0.01; done
    # Warm: connections made, scripts loaded, the cluster's map read.
    wrk -t1 -c"$CONNS" -d1s -s "$T/users.lua" "http://127.0.0.1:$port/v1/check?limit=u&key=w" >/dev/null 2>&1
    local c0 u0 c1 u1
    c0=$(calls "$name") u0=$(cpu "$name")
    wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s "$T/users.lua" \
        "http://127.0.0.1:$port/v1/check?limit=u&key=u" >"$T/wrk.out" 2>&1
    c1=$(calls "$name") u1=$(cpu "$name")
    kill -TERM $pid
    wait $pid 2>/dev/null
    local total rps p99
    total=$(awk '/requests in/ { print $1 }' "$T/wrk.out")
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$T/wrk.out")
    p99=$(awk '$1 == "99%" { v = $2;
        if (v ~ /us$/) { sub(/us$/, "", v); v = v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v) }
        else if (v ~ /s$/) { sub(/s$/, "", v); v = v * 1000 }
        print v }' "$T/wrk.out")
    echo "${total:-0} $((c1 - c0)) $(awk -v a="$u1" -v b="$u0" 'BEGIN { printf "%.6f", a - b }') ${p99:-0} ${rps:-0}"
}

for r in $(seq 1 "$ROUNDS"); do
    for name in one shards cluster; do
        echo "$name $(round "$name")" >>"$T/rounds"
    done
done

# Per store, the median over the rounds of: commands per decision, Redis
# CPU us per decision, p99 ms, req/s.
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
stat() { # stat NAME FIELD: the median of a per-round figure
    awk -v n="$1" -v f="$2" '$1 == n && $2 > 0 {
        if (f == "cmds") print $3 / $2;
        else if (f == "cpu") print $4 * 1e6 / $2;
        else if (f == "p99") print $5;
        else print $6 }' "$T/rounds" | median
}
for name in one shards cluster; do
    for f in cmds cpu p99 rps; do
        eval "S_${name}_$f=$(stat "$name" "$f")"
    done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

cat <<EOF
## floodgate serve on one Redis, on shards and on a Redis Cluster

floodgate serve (1 worker) on one Redis, on \`shards=\` of 3 Redis and on a
Redis Cluster of 3 masters (no replicas), all on this machine; \`wrk -t1
-c$CONNS -d${DURATION}s --latency\`, token_bucket, 100,000 users at random;
the stores in turn, $ROUNDS rounds, medians. Commands: what clients sent,
summed over the nodes (\`INFO commandstats\`, the scripts' inner calls left
out; the cluster's own \`CLUSTER SLOTS\` once a second included). Redis CPU:
\`used_cpu_user + used_cpu_sys\` summed over the nodes, per decision.

| store | req/s | commands per decision | × one node | Redis CPU µs per decision | × one node | p99 ms | × one node |
|---|---|---|---|---|---|---|---|
EOF
for name in one shards cluster; do
    eval "rps=\$S_${name}_rps cmds=\$S_${name}_cmds cpu=\$S_${name}_cpu p99=\$S_${name}_p99"
    printf '| %s | %.0f | %.3f | %s | %.2f | %s | %.2f | %s |\n' "$name" "$rps" "$cmds" \
        "$(ratio "$cmds" "$S_one_cmds")" "$cpu" "$(ratio "$cpu" "$S_one_cpu")" \
        "$p99" "$(ratio "$p99" "$S_one_p99")"
done
cat <<EOF

Goals: shards and cluster within 1.10× of one node in commands and Redis
CPU per decision; the cluster's p99 at most 1.2× one node's. A node's
token bucket batch holds the checks that arrive while its previous batch
is in flight: at the same total rate, each of 3 nodes sees a third of the
checks, so its batches are about a third as large, and the per-call cost
of a script is paid about 3 times as often. With every
node busy and the keys spread evenly, N nodes carry N × 1/(CPU per
decision on a node) decisions a second (one Redis runs on one core):

| nodes | decisions/s they would carry (cluster's CPU per decision) |
|---|---|
EOF
for n in 1 3 6 12 24; do
    awk -v n="$n" -v c="$S_cluster_cpu" 'BEGIN { printf "| %d | %.0f |\n", n, (c > 0 ? n * 1e6 / c : 0) }'
done
echo
echo "Rounds (store decisions commands cpu_s p99_ms req/s):"
echo
sed 's/^/    /' "$T/rounds"
cat <<EOF

More wrk connections (\`CONNS=256\`) do not close the gap: each of 3 nodes
answers a smaller batch sooner, so the next batch waits for fewer checks,
and the batches stay about a third as large. Only holding a node's batch
back on purpose (adding latency to every check) would make them as large
as one node's; floodgate does not.
EOF
