#!/usr/bin/env bash
# Backpressure in floodgate serve's HTTP layer (serve/http.c): clients that
# pipeline requests and do not read the answers (tests/serve/fggreedy.c: a
# small SO_RCVBUF set before connect, 1,000 requests per send()) on
# /metrics, /healthz and /v1/check, on the memory store and on Redis.
#
# The bound stated in serve/http.h: a connection's unsent output is at most
# 64 KB plus one answer. Seven such connections may thus hold well under
# 1 MB; the test allows serve's VmRSS (/proc/PID/status) to grow by at most
# RSS_GROWTH_KB = 16 MB while they send for 3 s (without the bound it grew
# by 100 MB a second and more here). Meanwhile other clients must be
# answered at once; then the greedy clients read, and must get every
# answer, 200, and those of /v1/check in order (remaining one less each
# time). The memory store first (six clients: two per route), then Redis
# (three clients of /v1/check: answers that come from the store later).
# Loopback only; about 10 s (40 s at most).
FG_TEST_BOUND=${FG_TEST_BOUND:-40}
. "$(dirname "$0")/../serve/lib.sh"

RSS_GROWTH_KB=16384
SEND_MS=3000

FGGREEDY="$BUILD/tests/serve/fggreedy" # built by mk/serve.mk
[ -x "$FGGREEDY" ] || { bad "$FGGREEDY missing"; finish; }

# Under AddressSanitizer freed memory stays resident for a while (its
# quarantine, 256 MB by default), which would count here as growth: a
# small quarantine keeps the measure ours. No effect on a plain build.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"

rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }

start_redis || { bad "redis starts"; finish; }
# request_timeout 6 s: the greedy clients read after 3 s, before the
# server closes them for not reading (serve_timeouts.sh tests that close).
for store in mem red; do
    url=memory
    [ $store = red ] && url="redis://127.0.0.1:$RPORT"
    cat >"$T/$store.ini" <<INI
[server]
workers = 2
id = bp-$store
request_timeout = 6s
[store]
url = $url
prefix = bp$$:
timeout = 500ms
[limit l]
key = query:key
; a fixed window of a day: each answer's remaining is one less than the one
; before (a bucket would refill meanwhile), unless midnight UTC falls
; mid-test
algorithm = fixed_window
rate = 1000000000/day
INI
    start_fg "$store" -c "$T/$store.ini" --listen 127.0.0.1:0 ||
        { bad "$store server starts"; finish; }
done
M=$FGPORT_mem RP=$FGPORT_red

# name PORT ARGS...: a greedy client in the background, its line in
# $T/g.NAME.
greedy() {
    local name=$1 port=$2
    shift 2
    "$FGGREEDY" -p "$port" -s "$SEND_MS" "$@" >"$T/g.$name" 2>&1 &
    GREEDY="$GREEDY $name:$!"
}
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# phase STORE WHAT: the greedy clients (started before) send for SEND_MS;
# meanwhile serve's VmRSS every 0.2 s, and other clients answered at once;
# then the greedy clients read.
phase() {
    local store=$1 what=$2 t0 pid port rss0 max r a d c1 c2 slowest=0 others=""
    eval "pid=\$FGPID_$store port=\$FGPORT_$store"
    t0=$(date +%s%N)
    rss0=$RSS0 max=$RSS0
    while [ "$(ms_since "$t0")" -lt $((SEND_MS - 300)) ]; do
        r=$(rss_kb "$pid")
        [ "${r:-0}" -gt "$max" ] && max=$r
        a=$(date +%s%N)
        c1=$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")
        c2=$(curl -s -m 1 -o /dev/null -w '%{http_code}' -X POST \
            "http://127.0.0.1:$port/v1/check?limit=l&key=other")
        d=$(ms_since "$a")
        [ "$d" -gt "$slowest" ] && slowest=$d
        others="$others $c1$c2"
        sleep 0.2
    done
    echo "$store: VmRSS $rss0 kB before, at most $max kB while $what did not read"
    check "$store: VmRSS grew by less than $RSS_GROWTH_KB kB while $what did not read ($((max - rss0)) kB)" \
        [ $((max - rss0)) -lt $RSS_GROWTH_KB ]
    check "$store: other clients answered meanwhile (${others# })" \
        bash -c "[ -n '$others' ] && ! echo '$others' | grep -qv '^\( 200200\)*$'"
    check "$store: ... each /healthz and /v1/check pair within 1 s (slowest $slowest ms)" \
        [ "$slowest" -lt 1000 ]
    # Then they read: every answer, in order.
    local g name gpid rc line sent
    for g in $GREEDY; do
        name=${g%%:*} gpid=${g#*:}
        wait "$gpid"
        rc=$?
        line=$(cat "$T/g.$name")
        sent=$(field "$line" sent)
        check "$store $name: every answer read, 200, in order ($line)" [ "$rc" = 0 ]
        check "$store $name: pipelined more than 1,000 requests ($sent)" \
            [ "${sent:-0}" -gt 1000 ]
    done
}

# Warm each server (the first /metrics and checks allocate what stays).
warm() {
    for _ in 1 2 3; do
        curl -s -m 2 -o /dev/null "http://127.0.0.1:$1/metrics"
        curl -s -m 2 -o /dev/null -X POST "http://127.0.0.1:$1/v1/check?limit=l&key=warm"
    done
}

# The memory store: every route answered at once, two clients each.
warm "$M"
RSS0=$(rss_kb "$FGPID_mem") GREEDY=""
greedy metrics1 "$M" -u /metrics
greedy metrics2 "$M" -u /metrics
greedy healthz1 "$M" -u /healthz
greedy healthz2 "$M" -u /healthz
greedy check1 "$M" -m POST -u '/v1/check?limit=l&key=g1' -o
greedy check2 "$M" -m POST -u '/v1/check?limit=l&key=g2' -o
phase mem "6 clients"

# Redis: each answer comes later, from the store's reply.
warm "$RP"
RSS0=$(rss_kb "$FGPID_red") GREEDY=""
greedy check1 "$RP" -m POST -u '/v1/check?limit=l&key=g3' -o
greedy check2 "$RP" -m POST -u '/v1/check?limit=l&key=g4' -o
greedy check3 "$RP" -m POST -u '/v1/check?limit=l&key=g5' -o
phase red "3 clients"

expect_eq "memory server still answers" \
    "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$M/healthz")" 200
expect_eq "Redis server still answers" \
    "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RP/healthz")" 200

for s in mem red; do
    eval "pid=\$FGPID_$s"
    kill -TERM "$pid"
    wait "$pid"
    expect_eq "$s: exits 0 on SIGTERM" "$?" 0
done
finish
