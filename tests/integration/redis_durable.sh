#!/usr/bin/env bash
# durable = replica: an allowed check counts only once a replica holds its
# write (WAIT 1 within the limit's timeout). A master and its replica, which
# replicates through the fault proxy; the proxy holds the link (black hole),
# so that the master's writes stay its own; the master dies and the proxy
# with it, losing what it held; the replica is promoted (REPLICAOF NO ONE)
# and the server moves to it. A plain limit admitted its window while the
# replica could not see it, and admits it again after the failover (the
# loss the docs bound: one window); a durable limit admitted nothing it
# could not replicate (its checks failed and followed on_failure = closed)
# and over-admits 0. Both clients: floodgate check (blocking) and
# floodgate serve (asynchronous, with token bucket batches).
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "master starts"; finish; }
MPORT=$RPORT MPID=$RPID
mkdir -p "$T/replica"
start_redis || { bad "replica starts"; finish; }
SPORT=$RPORT SPID=$RPID
"$BUILD/fault/faultproxy" -u "$MPORT" >"$T/proxy.out" 2>"$T/proxy.log" &
PXPID=$!
PIDS="$PIDS $PXPID"
for _ in $(seq 1 200); do grep -q control= "$T/proxy.out" 2>/dev/null && break; sleep 0.01; done
PXPORT=$(sed -n 's/^listen=\([0-9]*\) .*/\1/p' "$T/proxy.out")
PXCTL=$(sed -n 's/.* control=\([0-9]*\)$/\1/p' "$T/proxy.out")
ctl() { # ctl LINE: one command to the fault proxy, "ok" expected
    local fd answer
    exec {fd}<>"/dev/tcp/127.0.0.1/$PXCTL" || return 1
    echo "$*" >&"$fd"
    read -r answer <&"$fd"
    exec {fd}<&-
    [ "${answer%% *}" = ok ]
}
redis-cli -p "$SPORT" replicaof 127.0.0.1 "$PXPORT" >/dev/null
for _ in $(seq 1 200); do
    redis-cli -p "$SPORT" info replication | grep -q 'master_link_status:up' && break
    sleep 0.02
done
check "replica linked" redis-cli -p "$SPORT" info replication | grep -q 'master_link_status:up'

cat >"$T/s.ini" <<INI
[server]
workers = 2
[store]
url = redis://127.0.0.1:$MPORT
prefix = d$$:
[limit plain]
key = query:k
algorithm = token_bucket
rate = 10/h
on_failure = closed
timeout = 100ms
[limit durable]
key = query:k
algorithm = token_bucket
rate = 10/h
on_failure = closed
timeout = 100ms
durable = replica
[limit durable_fw]
key = query:k
algorithm = fixed_window
rate = 10/day
on_failure = closed
timeout = 100ms
durable = replica
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_s"
cli() { # cli KEY COUNT [durable]: the summary line of floodgate check
    "$FLOODGATE" check --store "redis://127.0.0.1:$1?prefix=d$$:" --name clitb --limit 10/h \
        --on-failure closed --timeout 100 --key "$2" --count "$3" ${4:+--durable $4} | tail -1
}

# durable_probe PORT TAG: a replica just linked may still be finishing its
# first sync (a second full sync was seen right after the first WAIT), so
# a durable check of a key of its own must be allowed first, 3 s at most.
durable_probe() {
    local i
    for i in $(seq 1 60); do
        [ "$(cli "$1" "probe$2$i" 1 replica)" = "allowed=1 limited=0" ] && return 0
        sleep 0.05
    done
    return 1
}
check "a durable probe is allowed on the master" durable_probe "$MPORT" m

# cli_round PORT KEY: 12 durable checks of KEY with floodgate check; a
# round short of 10 of 12 (a WAIT past its timeout) runs once more with
# KEY's second name, KEYb. Sets ROUND (the summary) and RKEY (the key).
cli_round() {
    RKEY=$2
    ROUND=$(cli "$1" "$RKEY" 12 replica)
    if [ "$ROUND" != "allowed=10 limited=2" ]; then
        echo "durable round of $2 (check): $ROUND (a WAIT timed out?), once more"
        RKEY=${2}b
        ROUND=$(cli "$1" "$RKEY" 12 replica)
    fi
}
# serve_round LIMIT KEY: the same through serve, judged on 503s (a WAIT
# past its 100 ms timeout on a loaded host).
serve_round() {
    RKEY=$2
    ROUND=$("$FGLOAD" -n 12 -c 4 "$U/v1/check?limit=$1&key=$RKEY")
    if [ "$(field "$ROUND" s503)" != 0 ]; then
        echo "durable round of $2 (serve, $1): $ROUND (a WAIT timed out), once more"
        RKEY=${2}b
        ROUND=$("$FGLOAD" -n 12 -c 4 "$U/v1/check?limit=$1&key=$RKEY")
    fi
}
# Healthy: a durable limit is as exact as a plain one.
serve_round durable h1
HK=$RKEY # the key spent while replicated, checked again after the failover
expect_eq "durable, replica up: 10 of 12 (serve)" "$(field "$ROUND" s200)/$(field "$ROUND" s429)" "10/2"
serve_round durable_fw h1
expect_eq "durable fixed window, replica up: 10 of 12 (serve)" "$(field "$ROUND" s200)/$(field "$ROUND" s429)" "10/2"
cli_round "$MPORT" h2
H2=$RKEY # used up: refused below whatever the WAIT
expect_eq "durable, replica up: 10 of 12 (check)" "$ROUND" "allowed=10 limited=2"

# The link held: the master's writes are its own.
check "replication link held (black hole)" ctl blackhole on
out=$("$FGLOAD" -n 12 -c 4 "$U/v1/check?limit=plain&key=k1")
expect_eq "plain, link held: 10 of 12 (serve)" "$(field "$out" s200)" 10
# What no replica confirmed was refused, and given back on the master.
peek() { # peek PORT NAME LIMIT ALGORITHM KEY: remaining, read on that node
    "$FLOODGATE" check --store "redis://127.0.0.1:$1?prefix=d$$:" --name "$2" \
        --limit "$3" --algorithm "$4" --timeout 100 --key "$5" --peek 2>&1 |
        sed -n 's/.*remaining=\([0-9]*\).*/\1/p'
}
# serve's give-back goes out on its connection behind the WAIT, and runs
# when Redis answers that WAIT (its timeouts fire on Redis's 100 ms
# tick): read again for up to 1 s.
peek_until() { # peek_until WANT PORT NAME LIMIT ALGORITHM KEY
    local want=$1 got i
    shift
    for i in $(seq 1 20); do
        got=$(peek "$@")
        [ "$got" = "$want" ] && break
        sleep 0.05
    done
    echo "$got"
}
out=$("$FGLOAD" -n 1 -c 1 "$U/v1/check?limit=durable&key=k0")
expect_eq "durable, link held: refused, nothing kept on the master (serve)" \
    "$(field "$out" s503)/$(peek_until 10 "$MPORT" durable 10/h token_bucket k0)" "1/10"
out=$("$FGLOAD" -n 1 -c 1 "$U/v1/check?limit=durable_fw&key=k3")
expect_eq "durable fixed window, link held: refused, nothing kept on the master (serve)" \
    "$(field "$out" s503)/$(peek_until 10 "$MPORT" durable_fw 10/day fixed_window k3)" "1/10"
out=$("$FGLOAD" -n 12 -c 4 "$U/v1/check?limit=durable&key=k2")
echo "durable, link held (serve): $out"
# Refused by the policy (503), or by the count the master kept of the
# checks it ran before the breaker opened (429): none allowed.
s503=$(field "$out" s503) s429=$(field "$out" s429)
expect_eq "durable, link held: 0 allowed, 12 refused (503 or 429)" \
    "$(field "$out" s200)/$((${s503:-0} + ${s429:-0}))" "0/12"
# (A sanitizer build runs every step several times slower: + 100 ms.)
slack=50000; case "$BUILD" in *asan*) slack=100000 ;; esac
check "durable, link held: each answer within timeout + $((slack / 1000)) ms ($(field "$out" max_us) us)" \
    test "$(field "$out" max_us)" -le $((100000 + slack))
expect_eq "plain, link held: 10 of 12 (check)" "$(cli "$MPORT" c1 12)" "allowed=10 limited=2"
expect_eq "durable, link held: 0 of 3 (check)" "$(cli "$MPORT" c2 3 replica)" "allowed=0 limited=3"
msg=$("$FLOODGATE" check --store "redis://127.0.0.1:$MPORT?prefix=d$$:" --name c3 \
    --limit 10/h --key c3 --durable replica --timeout 100 --on-failure closed 2>&1)
echo "durable, link held: $msg"
check "durable, link held: the reason says no replica confirmed (check)" \
    grep -q "no replica confirmed the write in time (durable = replica)" <<<"$msg"
expect_eq "durable, link held: nothing kept on the master (check)" \
    "$(peek "$MPORT" clitb 10/h token_bucket c2)" 10
# With on_failure = open: a key the master refuses (h2, used up above) is
# still refused, WAIT or not; a check it allows is admitted by the policy
# and stays counted there.
open_cli() { # open_cli KEY COUNT
    "$FLOODGATE" check --store "redis://127.0.0.1:$MPORT?prefix=d$$:" --name clitb \
        --limit 10/h --on-failure open --timeout 100 --key "$1" --count "$2" \
        --durable replica 2>/dev/null | tail -1
}
expect_eq "durable, link held, open: a used-up key is refused (check)" "$(open_cli "$H2" 1)" "allowed=0 limited=1"
expect_eq "durable, link held, open: 3 admitted by the policy (check)" "$(open_cli c3 3)" "allowed=3 limited=0"
expect_eq "durable, link held, open: the 3 stay counted on the master (check)" \
    "$(peek "$MPORT" clitb 10/h token_bucket c3)" 7
# Checks queued on serve's connection behind a WAIT answer after their
# deadline: decided by the policy, they keep their units (docs/redis.md).
echo "durable, link held: k2 keeps $((10 - $(peek_until 10 "$MPORT" durable 10/h token_bucket k2))) of the 12 refused (serve)"

# The master dies, and the proxy with what it held; the replica is
# promoted; serve moves to it.
{ kill -KILL "$MPID" "$PXPID"; wait "$MPID" "$PXPID"; } 2>/dev/null
redis-cli -p "$SPORT" replicaof no one >/dev/null
sed -i "s|^url = .*|url = redis://127.0.0.1:$SPORT|" "$T/s.ini"
kill -HUP "$FGPID_s"
for _ in $(seq 1 300); do grep -q 'event=reload result=ok' "$T/s.log" && break; sleep 0.01; done
check "serve reloaded onto the promoted replica" grep -q 'event=reload result=ok' "$T/s.log"
out=$("$FGLOAD" -n 12 -c 4 "$U/v1/check?limit=plain&key=k1")
lost=$(field "$out" s200)
echo "plain limit after the failover: $lost more allowed (the window the replica never saw)"
check "plain: the loss is at most one window ($lost <= 10)" test "$lost" -le 10
# The promoted master gets a replica of its own (durable needs one).
start_redis || bad "a new replica starts"
redis-cli -p "$RPORT" replicaof 127.0.0.1 "$SPORT" >/dev/null
for _ in $(seq 1 200); do
    redis-cli -p "$RPORT" info replication | grep -q 'master_link_status:up' && break
    sleep 0.02
done
check "new replica linked" redis-cli -p "$RPORT" info replication | grep -q 'master_link_status:up'
# ... and acknowledges writes (the master counts it in WAIT).
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$SPORT" wait 1 100)" = 1 ] && break
done
check "new replica acknowledges writes" test "$(redis-cli -p "$SPORT" wait 1 100)" = 1
check "a durable probe is allowed on the promoted master" durable_probe "$SPORT" s
serve_round durable k2
expect_eq "durable after the failover: 10 of 12, over-admission 0" "$(field "$ROUND" s200)/$(field "$ROUND" s429)" "10/2"
out=$("$FGLOAD" -n 12 -c 4 "$U/v1/check?limit=durable&key=$HK")
expect_eq "durable key admitted while replicated: still spent after the failover" "$(field "$out" s200)" 0
cli_round "$SPORT" c2
expect_eq "durable after the failover: 10 of 12 (check)" "$ROUND" "allowed=10 limited=2"

# A connection lost while its WAIT is pending (no replica: the WAIT waits
# its timeout): the held check fails to its policy (closed: 503). It was
# answered as replicated (200) when the end of file came before hiredis's
# cleanup.
start_redis || bad "a master without replica starts"
sed "s|^url = .*|url = redis://127.0.0.1:$RPORT|; s|^timeout = 100ms|timeout = 1000ms|" \
    "$T/s.ini" >"$T/lost.ini"
start_fg lost -c "$T/lost.ini" --listen 127.0.0.1:0 || { bad "serve on it starts"; finish; }
code() { curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST \
    "http://127.0.0.1:$FGPORT_lost/v1/check?limit=durable_fw&key=lost$1"; }
code 0 >/dev/null # connected, scripts loaded
code 1 >"$T/lost.code" &
cpid=$!
sleep 0.3
redis-cli -p "$RPORT" client kill type normal >/dev/null
wait "$cpid"
expect_eq "WAIT pending when the connection is lost: on_failure closed answers" \
    "$(cat "$T/lost.code")" 503
finish
