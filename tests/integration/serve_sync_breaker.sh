#!/usr/bin/env bash
# A sync limit after a short Redis stall that opened its breaker: once the
# breaker's cooldown is over, the next check probes Redis, as an exact
# limit's does, and the limit is decided by Redis and its views again at
# once, not when the next tick's sync happens to probe (sync:10s here: up to
# ten seconds, and twice that for the keys whose syncs the breaker kept
# back, all decided by on_failure = open meanwhile).
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
cat >"$T/s.ini" <<INI
[server]
workers = 1
[store]
url = redis://127.0.0.1:$RPORT
[limit sy]
key = query:k
algorithm = fixed_window
rate = 1000000/h
mode = sync:10s
timeout = 200ms
on_failure = open
[limit sl]
key = query:k
algorithm = fixed_window
rate = 20/day
mode = sync:200ms
timeout = 50ms
on_failure = open
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_s/v1/check?limit=sy&key="
src() { grep -o '"source":"[a-z_]*"' "$T/b" | cut -d'"' -f4; }

http POST "${U}hot" >/dev/null
expect_eq "a new key: decided by Redis" "$(src)" store
http POST "${U}hot" >/dev/null
expect_eq "then by its view" "$(src)" sync

# Redis stalls: new keys' checks time out (200 ms), three open the breaker.
kill -STOP "$RPID"
for i in 1 2 3 4 5; do http POST "${U}stall$i" >/dev/null; done
expect_eq "Redis stopped: a new key follows on_failure" "$(src)" fail_open
kill -CONT "$RPID"
sleep 0.3 # the breaker's cooldown, 250 ms
t0=$(date +%s%N)
got=none
for i in $(seq 1 40); do
    http POST "${U}back$i" >/dev/null
    got=$(src)
    [ "$got" = store ] && break
    sleep 0.1
done
ms=$((($(date +%s%N) - t0) / 1000000))
check "Redis back: a new key is decided by Redis again within 1.5 s ($got after $ms ms)" \
    bash -c "[ '$got' = store ] && [ $ms -lt 1500 ]"
http POST "${U}hot" >/dev/null
http POST "${U}hot" >/dev/null
check "Redis back: the hot key is decided by its view or Redis, not by on_failure ($(src))" \
    bash -c "[ '$(src)' = sync ] || [ '$(src)' = store ]"
# The keys whose own checks timed out: their next check asks Redis again
# (not the policy until the next tick, ten seconds away).
got=""
for i in 1 2 3 4 5; do
    http POST "${U}stall$i" >/dev/null
    got="$got $(src)"
done
check "Redis back: the keys that timed out are decided by Redis or their view again ($got)" \
    bash -c "! grep -q fail_open <<<'$got'"
# A key its view refuses stays refused while the store cannot decide (its
# breaker open under other keys' failures): on_failure = open decides only
# what the view would have asked the store. A scalper past 20/day, Redis
# stopped, 20 of its checks between other keys' (which open the breaker):
# all 20 refused, where 'open' let them through.
L="http://127.0.0.1:$FGPORT_s/v1/check?limit=sl&key="
for i in $(seq 1 30); do http POST "${L}scalper" >/dev/null; done
expect_eq "sl: the scalper refused before the stall" "$(http POST "${L}scalper")" 429
sleep 0.5 # a sync: the view is the store's answer
kill -STOP "$RPID"
allowed=0 others=""
for i in $(seq 1 20); do
    http POST "${L}other$i" >/dev/null
    others="$others $(src)"
    [ "$(http POST "${L}scalper")" = 200 ] && allowed=$((allowed + 1))
done
kill -CONT "$RPID"
check "sl: other keys were decided by on_failure (the breaker open)" grep -q fail_open <<<"$others"
expect_eq "sl: the scalper, refused on its view: none of 20 let through while Redis is stopped" "$allowed" 0
finish
