#!/usr/bin/env bash
# floodgate serve stopped and resumed (SIGSTOP, SIGCONT: a frozen host or
# container, a debugger) against a real redis-server that stayed healthy:
# serve's own lateness is not taken for Redis's.
#   - A check in flight when serve stops, whose reply came meanwhile, is
#     answered from that reply when serve resumes, and the checks after it
#     by the store: none to the failure policy (the late timer looks again
#     after the loop has read the socket; the connection is not judged
#     silent).
#   - Redis closing serve's idle connection while serve is stopped (its
#     `timeout`): the checks sent during the stop and after the resume
#     reconnect and are decided by the store, none failed by a backoff or
#     an opened breaker.
# Loopback only; about 10 s.
FG_TEST_BOUND=${FG_TEST_BOUND:-60}
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
cat >"$T/p.ini" <<INI
[server]
workers = 1
[store]
url = redis://127.0.0.1:$RPORT
prefix = pause$$:
[limit c]
key = query:k
algorithm = fixed_window
rate = 100000/h
timeout = 500ms
on_failure = closed
INI
start_fg p -c "$T/p.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_p/v1/check?limit=c"
sources() { # sources N KEY: the sources of N checks in a row, counted
    for i in $(seq 1 "$1"); do
        curl -s -m 5 -X POST "$U&key=$2" | grep -o '"source":"[a-z_]*"'
    done | sort | uniq -c | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $2 "x" $1 }'
}
expect_eq "before: decided by the store" "$(sources 5 warm)" '"source":"store"x5'

# 1. A check in flight: Redis stopped, the check sent, serve stopped; Redis
# resumed (its reply lands in serve's socket), serve resumed 3 s later.
kill -STOP "$RPID"
curl -s -m 10 -X POST "$U&key=inflight" >"$T/inflight" &
cpid=$!
sleep 0.3
kill -STOP "$FGPID_p"
kill -CONT "$RPID"
sleep 3
kill -CONT "$FGPID_p"
wait "$cpid"
check "the check in flight is answered from the reply that came ($(cat "$T/inflight"))" \
    grep -q '"source":"store"' "$T/inflight"
expect_eq "the checks after the resume: decided by the store" \
    "$(sources 20 after1)" '"source":"store"x20'

# 2. Redis closes idle connections after 1 s; serve stopped 2.5 s.
redis-cli -p "$RPORT" config set timeout 1 >/dev/null
expect_eq "warm again" "$(sources 3 warm2)" '"source":"store"x3'
kill -STOP "$FGPID_p"
sleep 2.2
# 20 requests sent while serve is stopped (the kernel accepts them), read
# when it resumes, with Redis's close of the connection.
cpids=""
for i in $(seq 1 20); do
    curl -s -m 10 -X POST "$U&key=during$i" >"$T/during$i" &
    cpids="$cpids $!"
done
sleep 0.3
kill -CONT "$FGPID_p"
# shellcheck disable=SC2086
wait $cpids
during=$(cat "$T"/during* | grep -o '"source":"[a-z_]*"' | sort | uniq -c |
    awk '{ printf "%s%s", (NR > 1 ? " " : ""), $2 "x" $1 }')
expect_eq "20 requests sent during the stop: decided by the store" "$during" '"source":"store"x20'
expect_eq "Redis closed the idle connection meanwhile: the checks after decided by the store" \
    "$(sources 20 after2)" '"source":"store"x20'
redis-cli -p "$RPORT" config set timeout 0 >/dev/null
grep -E 'event=store_(error|recovered)' "$T/p.log" | head -5
finish
