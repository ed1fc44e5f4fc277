#!/usr/bin/env bash
# redis_admin.sh -- fg_peek and fg_reset on the Redis store against real
# redis-server processes started here on free loopback ports in a temp
# folder, stopped by a trap: the same figures as the memory store's for the
# same state and clock, a peek that takes nothing, a reset that deletes
# every window, peeks on a read-only replica, `floodgate check --peek` /
# `--reset`, and both through the stores that forward (shards=, cluster=,
# sentinel://).
set -u
cd "$(dirname "$0")/../.."
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
TOOL=$BUILD/redis/redis_admin
FG_TEST_BOUND=90
. tests/serve/lib.sh

if ! command -v redis-server >/dev/null || [ ! -x "$TOOL" ]; then
    echo "redis-server or $TOOL missing"
    echo "0 passed, 1 failed"
    exit 1
fi

# run a redis_admin mode; add its "N passed, N failed" to ours.
run() {
    local out last p f rc
    out=$(timeout 40 "$TOOL" "$@" 2>&1)
    rc=$?
    echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
    last=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$last" ]; then
        bad "redis_admin $1 (exit $rc, no summary)"
        return
    fi
    p=${last%% passed*}
    f=${last#*, }
    f=${f%% failed}
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    [ "$rc" -eq 0 ] || [ "$f" -ne 0 ] || bad "redis_admin $1 exit $rc"
}

start_redis
URL="redis://127.0.0.1:$RPORT?prefix=adm:"
run vectors "$URL"
run time "$URL"
run reset "$URL"

# A replica of a master that is not there: it serves reads, refuses
# writes. Peeks work on it, and write nothing.
DEAD=$(free_port)
RO=$(free_port)
mkdir -p "$T/ro"
redis-server --port "$RO" --bind 127.0.0.1 --dir "$T/ro" --save '' \
    --appendonly no --logfile "$T/ro/log" --replicaof 127.0.0.1 "$DEAD" &
ROPID=$!
PIDS="$PIDS $ROPID"
for _ in $(seq 100); do
    redis-cli -p "$RO" ping 2>/dev/null | grep -q PONG && break
    sleep 0.02
done
run readonly "redis://127.0.0.1:$RO"
kill "$ROPID" 2>/dev/null

# floodgate check --peek / --reset (DESIGN.md 7).
K="cli-$$"
chk() { "$FLOODGATE" check --store "$URL" --limit 3/h --key "$K" --timeout 500 "$@"; }
chk --count 2 >/dev/null
out=$(chk --peek)
rc=$?
[ "$out" = "remaining=1 reset_ms=${out#*reset_ms=}" ] && [ "$rc" -eq 0 ] && ok ||
    bad "check --peek: '$out' exit $rc"
out=$(chk --peek --json)
case "$out" in '{"allowed":true,"limit":3,"remaining":1,'*) ok ;; *) bad "check --peek --json: '$out'" ;; esac
# Peeking again consumed nothing.
out=$(chk --peek)
case "$out" in remaining=1*) ok ;; *) bad "second peek: '$out'" ;; esac
chk >/dev/null
out=$(chk --peek)
rc=$?
case "$out" in "remaining=0 reset_ms="*" retry_after_ms="*) ok ;; *) bad "peek of an empty key: '$out'" ;; esac
[ "$rc" -eq 1 ] && ok || bad "peek of an empty key exit $rc"
out=$(chk --reset)
rc=$?
[ "$out" = "reset" ] && [ "$rc" -eq 0 ] && ok || bad "check --reset: '$out' exit $rc"
out=$(chk --peek)
[ "$out" = "remaining=3 reset_ms=0" ] && ok || bad "peek after reset: '$out'"
out=$(chk --peek --reset 2>&1)
rc=$?
[ "$rc" -eq 2 ] && ok || bad "--peek with --reset exit $rc: $out"

# A reset under load: four processes check one fixed-window key of 5/h as
# fast as they can; a reset comes while refusals' give-backs are in flight.
# At most 5 before it and 5 after, and the units of the give-backs in
# flight then (one a process), which a later check's new key may take
# (docs/redis.md).
K="rst-$$"
fw() { "$FLOODGATE" check --store "$URL" --name rst --algorithm fixed_window \
    --limit 5/h --key "$K" --timeout 1000 "$@"; }
fwpids=""
for i in 1 2 3 4; do
    fw --count 20000 >"$T/rst$i.out" 2>&1 &
    fwpids="$fwpids $!"
done
sleep 0.3
fw --reset >/dev/null
wait $fwpids
total=0
for i in 1 2 3 4; do
    a=$(tail -n 1 "$T/rst$i.out" | sed -n 's/^allowed=\([0-9]*\) limited=.*/\1/p')
    total=$((total + ${a:-100}))
done
check "a reset under load: at most 5 + 5 + 4 admitted ($total)" [ "$total" -le 14 ]
check "a reset under load: it came while they ran, 6 at least ($total)" [ "$total" -ge 6 ]
# A negative count someone else wrote gives no units: 5 of 8 pass.
K="neg-$$"
w=$(( $(date +%s) / 3600 ))
redis-cli -p "$RPORT" set "adm:rst:{$K}:$w" -3 >/dev/null
out=$(fw --count 8 | tail -n 1)
[ "$w" = $(( $(date +%s) / 3600 )) ] || out="allowed=5 limited=3" # the hour turned
expect_eq "a negative count is an empty window" "$out" "allowed=5 limited=3"

# cycle URL TAG: for each algorithm and a few keys (spread over the nodes
# of a forwarding store): two checks of 3/h, a peek (1 left), a reset, a
# peek (3 left), the key gone from every node.
cycle() {
    local url=$1 tag=$2 algo k out
    for algo in fixed_window sliding_window token_bucket; do
        for k in 1 2 3 4 5 6; do
            key="$tag-$algo-$k-$$"
            c() { "$FLOODGATE" check --store "$url" --name "a$tag" --algorithm "$algo" \
                --limit 3/h --key "$key" --timeout 1000 "$@"; }
            c --count 2 >/dev/null
            out=$(c --peek)
            case "$out" in remaining=1*) ;; *) bad "$tag $algo $key: peek '$out'"; continue ;; esac
            out=$(c --reset)
            [ "$out" = reset ] || { bad "$tag $algo $key: reset '$out'"; continue; }
            out=$(c --peek)
            [ "$out" = "remaining=3 reset_ms=0" ] || { bad "$tag $algo $key: after reset '$out'"; continue; }
            ok "$tag $algo $key: peek, reset, whole"
        done
    done
    left=0
    for p in "${@:3}"; do
        n=$(redis-cli -p "$p" --scan --pattern "fg:a$tag:*" | wc -l)
        left=$((left + n))
    done
    expect_eq "$tag: no key left on any node" "$left" 0
}

# Two independent nodes: shards=.
RP2=$(free_port)
mkdir -p "$T/r2"
redis-server --port "$RP2" --bind 127.0.0.1 --dir "$T/r2" --save '' \
    --appendonly no --logfile "$T/r2/log" &
PIDS="$PIDS $!"
for _ in $(seq 100); do redis-cli -p "$RP2" ping 2>/dev/null | grep -q PONG && break; sleep 0.02; done
cycle "shards=redis://127.0.0.1:$RPORT,redis://127.0.0.1:$RP2" sh "$RPORT" "$RP2"
# Both nodes held keys: the forwarding spread them.
expect_eq "shards: the first node was used" "$(redis-cli -p "$RPORT" info commandstats | grep -c 'cmdstat_del:')" 1
expect_eq "shards: the second node was used" "$(redis-cli -p "$RP2" info commandstats | grep -c 'cmdstat_del:')" 1

# The master one Sentinel names: sentinel://.
SNP=$(free_port)
mkdir -p "$T/sn"
cat >"$T/sn/sentinel.conf" <<CONF
port $SNP
bind 127.0.0.1
dir $T/sn
logfile $T/sn/log
sentinel monitor adm$$ 127.0.0.1 $RP2 1
CONF
redis-server "$T/sn/sentinel.conf" --sentinel &
PIDS="$PIDS $!"
for _ in $(seq 100); do
    redis-cli -p "$SNP" sentinel get-master-addr-by-name "adm$$" 2>/dev/null | grep -q "$RP2" && break
    sleep 0.02
done
cycle "sentinel://127.0.0.1:$SNP/adm$$" se "$RP2"

# A Redis Cluster of three masters: cluster=.
. tests/lib/cluster.sh
# No replicas: peek and reset need only the masters (start_cluster
# tries three times itself).
CLUSTER_REPLICAS=0
if start_cluster; then cluster_up=1; else cluster_up=0; fi
if [ "$cluster_up" = 1 ]; then
    cycle "cluster=redis://127.0.0.1:${CPORT[0]}" cl "${CPORT[@]}"
else
    bad "cluster starts"
fi

finish
