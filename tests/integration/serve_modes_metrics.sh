#!/usr/bin/env bash
# /metrics of sync and lease limits while Redis is stopped (SIGSTOP, 1 s):
# store calls count the round trips that requests waited for, and the
# latency histogram only their waits. A key whose ask failed is decided by
# on_failure at once while its next ask is in flight: no round trip, so
# neither a call nor a latency sample (they were counted as calls, and as
# waits under 100 us, while Redis was frozen). The log's store_error and
# store_error_suppressed lines count every error.
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
cat >"$T/m.ini" <<INI
[server]
workers = 1
[store]
url = redis://127.0.0.1:$RPORT
timeout = 200ms
[limit sy]
key = query:k
algorithm = fixed_window
rate = 100000/min
mode = sync:200ms
on_failure = open
[limit le]
key = query:k
algorithm = fixed_window
rate = 100000/min
mode = lease
on_failure = open
[limit ss]
key = query:k
algorithm = sliding_window
rate = 100000/min
mode = sync:200ms
[limit sw]
key = query:k
algorithm = sliding_window
rate = 100000/min
mode = lease
INI
start_fg m -c "$T/m.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_m"
"$FGLOAD" -n 20 -c 1 "$U/v1/check?limit=sy&key=hot" >/dev/null
metric() { # metric FILE NAME{LABELS}: its value (0 when absent)
    awk -v m="$2" '$1 == m { v = $2 } END { print v + 0 }' "$1"
}
curl -s "$U/metrics" >"$T/m0"
cmds() { redis-cli -p "$RPORT" info commandstats | awk -F'[=,:]' '/^cmdstat_/ { s += $3 } END { print s + 0 }'; }
c0=$(cmds)
kill -STOP "$RPID"
"$FGLOAD" -n 400 -c 8 -r 400 "$U/v1/check?limit=sy&key=hot" >"$T/sy.out"
"$FGLOAD" -n 100 -c 4 -r 200 "$U/v1/check?limit=le&key=new" >"$T/le.out"
kill -CONT "$RPID"
sleep 0.5
curl -s "$U/metrics" >"$T/m1"
c1=$(cmds)
sent=$((c1 - c0 - 1)) # less the INFO of c0
echo "sync: $(cat "$T/sy.out")"
echo "lease: $(cat "$T/le.out")"
d() { echo $(($(metric "$T/m1" "$1") - $(metric "$T/m0" "$1"))); }
calls=$(($(d 'floodgate_store_calls_total{limit="sy"}') + $(d 'floodgate_store_calls_total{limit="le"}')))
errors=$(($(d 'floodgate_store_errors_total{limit="sy"}') + $(d 'floodgate_store_errors_total{limit="le"}')))
fast=$(d 'floodgate_store_latency_seconds_bucket{le="0.001"}')
waits=$(d 'floodgate_store_latency_seconds_count')
echo "during the stop: $calls calls counted, $errors errors, $waits waits ($fast under 1 ms); Redis ran $sent commands sent meanwhile"
check "calls counted ($calls) are no more than the commands Redis ran ($sent)" test "$calls" -le "$sent"
check "some requests did wait for Redis ($waits)" test "$waits" -gt 0
expect_eq "no wait under 1 ms while Redis was stopped" "$fast" 0
check "every request decided by the policy counts as an error ($errors)" test "$errors" -ge "$calls"
# The log says as many errors as /metrics: the store_error lines, at most
# one a second, and the errors after the last one (store_error_suppressed,
# from the sweep once no store_error line came for a second after one
# could: within three seconds of the last).
for _ in $(seq 1 50); do
    logged=$(grep -oE 'event=store_error(_suppressed)? .*errors=[0-9]+' "$T/m.log" |
        grep -oE 'errors=[0-9]+' | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
    [ "$logged" = "$errors" ] && break
    sleep 0.1
done
expect_eq "the log's errors= add up to /metrics' errors" "$logged" "$errors"

# ---- Every command a mode sends, counted --------------------------------
# Syncs, takes and give-backs are mostly no request's round trip: the
# store calls above do not see them. floodgate_mode_store_calls_total
# counts each, those of the configuration a reload retires (flushed as it
# goes) included: as many as the scripts Redis ran for them (a sliding
# window's commands are one script a key; a token bucket's carry several).
# What Redis ran, from MONITOR: the scripts called on a limit's key (not
# the probes a store makes at open; not the commands scripts call).
redis-cli -p "$RPORT" monitor >"$T/monitor" &
MPID=$!
PIDS="$PIDS $MPID"
for _ in $(seq 1 250); do [ -s "$T/monitor" ] && break; sleep 0.02; done # its OK
check "MONITOR attached" test -s "$T/monitor"
curl -s "$U/metrics" >"$T/m2"
# shellcheck disable=SC2046 # 16 URLs, one a key
"$FGLOAD" -n 300 -c 4 -r 600 $(seq -f "$U/v1/check?limit=ss&key=k%g" 16) >/dev/null
# shellcheck disable=SC2046
"$FGLOAD" -n 200 -c 4 -r 600 $(seq -f "$U/v1/check?limit=sw&key=l%g" 16) >/dev/null
reload_fg m 0.5
sleep 1.2 # a sweep
curl -s "$U/metrics" >"$T/m3"
kill "$MPID"
ran=$(grep -v '\[0 lua\]' "$T/monitor" | grep -E '"EVAL(SHA)?"' | grep -c '"fg:')
d() { echo $(($(metric "$T/m3" "$1") - $(metric "$T/m2" "$1"))); }
mode=$(($(d 'floodgate_mode_store_calls_total{limit="ss"}') + $(d 'floodgate_mode_store_calls_total{limit="sw"}')))
waited=$(($(d 'floodgate_store_calls_total{limit="ss"}') + $(d 'floodgate_store_calls_total{limit="sw"}')))
echo "under load and a reload: Redis ran $ran scripts; mode commands counted $mode; round trips requests waited for $waited"
expect_eq "every command of the modes counted" "$mode" "$ran"
check "more than the requests waited for ($waited)" test "$mode" -gt "$waited"
expect_eq "none failed" "$(($(d 'floodgate_mode_store_errors_total{limit="ss"}') + $(d 'floodgate_mode_store_errors_total{limit="sw"}')))" 0
finish
