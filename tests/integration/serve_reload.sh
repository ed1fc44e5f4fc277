#!/usr/bin/env bash
# SIGHUP while Redis checks are in flight: the old configuration's store is
# closed only after its last request has answered, outside every store
# callback. Redis is stopped (SIGSTOP) with checks waiting on it, the server
# reloads, Redis continues: every request is answered, the server lives on,
# and a sanitizer build reports nothing.
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
cat >"$T/s.ini" <<INI
[server]
workers = 1
[store]
url = redis://127.0.0.1:$RPORT
prefix = r$$:
[limit slow]
key = query:k
rate = 1000/min
; long enough that the checks are still waiting when the reload comes
timeout = 1500ms
on_failure = open
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
U="http://127.0.0.1:$FGPORT_s"

# Rounds 1-2: Redis continues before the deadline (the old store's reply
# callback answers the last request). Rounds 3-4: the deadline passes
# first (its timer callback answers, by the failure policy).
for round in 1 2 3 4; do
    kill -STOP "$RPID"
    CURLS=""
    for i in $(seq 1 8); do
        curl -s -m 5 -o /dev/null -w '%{http_code}\n' -X POST \
            "$U/v1/check?limit=slow&key=k$round$i" >"$T/r$round.$i" &
        CURLS="$CURLS $!"
    done
    sleep 0.3
    n0=$(grep -c 'event=reload' "$T/s.log")
    kill -HUP "$FGPID_s"
    for _ in $(seq 1 200); do
        [ "$(grep -c 'event=reload' "$T/s.log")" -gt "$n0" ] && break
        sleep 0.01
    done
    sleep 0.1
    if [ "$round" -le 2 ]; then
        kill -CONT "$RPID"
        for p in $CURLS; do wait "$p"; done
    else
        for p in $CURLS; do wait "$p"; done
        kill -CONT "$RPID"
    fi
    got=$(cat "$T"/r$round.* | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
    expect_eq "round $round: 8 checks in flight at the reload all answered 200" \
        "$got" "200:8 "
done
check "server alive after the reloads" kill -0 "$FGPID_s"
expect_eq "healthz after the reloads" "$(http GET "$U/healthz")" 200
expect_eq "a check after the reloads" \
    "$(http POST "$U/v1/check?limit=slow&key=after")" 200
kill -TERM "$FGPID_s"
for _ in $(seq 1 300); do kill -0 "$FGPID_s" 2>/dev/null || break; sleep 0.01; done
finish
