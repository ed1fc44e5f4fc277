#!/usr/bin/env bash
# A reload, and then a SIGTERM, while Redis is stopped: the usage a sync
# limit admitted here and could not send (the breaker open) is sent once
# Redis is back, not dropped with the configuration the reload replaced or
# with the process. Redis counts at least what serve admitted.
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
RURL="redis://127.0.0.1:$RPORT"
cat >"$T/s.ini" <<INI
[server]
workers = 1
drain_grace = 100ms
drain_timeout = 5s
[store]
url = $RURL
timeout = 50ms
[limit sy]
key = query:k
algorithm = fixed_window
rate = 1000000/day
mode = sync:2s
on_failure = closed
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_s/v1/check?limit=sy&key="
admitted=0
round() { # round: three checks of each of ten keys, the 200s counted
    local k c
    for k in $(seq 1 10); do
        for _ in 1 2 3; do
            c=$(http POST "${U}k$k")
            [ "$c" = 200 ] && admitted=$((admitted + 1))
        done
    done
}
counted() { # what Redis counts for the ten keys
    local k n=0 r
    for k in $(seq 1 10); do
        r=$("$FLOODGATE" check --store "$RURL" --name sy --limit 1000000/day \
            --algorithm fixed_window --key "k$k" --peek | sed 's/remaining=\([0-9]*\).*/\1/')
        n=$((n + 1000000 - r))
    done
    echo "$n"
}
round
# Redis stops: a check of a new key times out, three open the breaker;
# the reload's flush of the replaced configuration then fails at once.
kill -STOP "$RPID"
for i in 1 2 3 4; do http POST "${U}x$i" >/dev/null; done
kill -HUP "$FGPID_s"
for _ in $(seq 1 100); do grep -q 'event=reload result=ok' "$T/s.log" && break; sleep 0.01; done
sleep 0.5
kill -CONT "$RPID"
sleep 1
c=$(counted)
check "a reload while Redis was stopped: Redis counts what was admitted ($c of $admitted)" \
    [ "$c" -ge "$admitted" ]
# The same at SIGTERM: usage admitted, Redis stopped, the drain waits for it.
round
kill -STOP "$RPID"
for i in 5 6 7 8; do http POST "${U}x$i" >/dev/null; done
kill -TERM "$FGPID_s"
sleep 1
kill -CONT "$RPID"
for _ in $(seq 1 100); do kill -0 "$FGPID_s" 2>/dev/null || break; sleep 0.05; done
wait "$FGPID_s"
expect_eq "SIGTERM while Redis was stopped: exit 0" "$?" 0
c=$(counted)
check "SIGTERM while Redis was stopped: Redis counts what was admitted ($c of $admitted)" \
    [ "$c" -ge "$admitted" ]
check "SIGTERM: nothing given up" test -z "$(grep 'event=sync_unsent' "$T/s.log")"

# Redis shut down (its connections refused: a flush fails on its answers,
# read at the next flush, not at once) and started again 1.5 s later from
# what it saved, at a reload and then at SIGTERM: what was admitted since
# the last sync reaches it (the flushes go on until one is read whole).
# One key: one sync a flush, too few failures to open the breaker (whose
# failures would come at once).
start_fg s2 -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "serve starts again"; finish; }
U="http://127.0.0.1:$FGPORT_s2/v1/check?limit=sy&key="
solo() { # the key k1, 30 checks, the 200s counted
    local c
    for _ in $(seq 1 30); do
        c=$(http POST "${U}k1")
        [ "$c" = 200 ] && admitted=$((admitted + 1))
    done
}
for when in reload term; do
    c0=$(counted)
    admitted=0
    solo
    redis-cli -p "$RPORT" shutdown save >/dev/null 2>&1
    for _ in $(seq 1 100); do kill -0 "$RPID" 2>/dev/null || break; sleep 0.02; done
    if [ "$when" = reload ]; then
        n0=$(grep -c 'event=reload result=ok' "$T/s2.log")
        kill -HUP "$FGPID_s2"
        for _ in $(seq 1 100); do [ "$(grep -c 'event=reload result=ok' "$T/s2.log")" -gt "$n0" ] && break; sleep 0.01; done
    else
        kill -TERM "$FGPID_s2"
    fi
    sleep 1.5
    restart_redis || bad "redis restarts"
    if [ "$when" = term ]; then
        for _ in $(seq 1 100); do kill -0 "$FGPID_s2" 2>/dev/null || break; sleep 0.05; done
        wait "$FGPID_s2"
    else
        sleep 1
    fi
    c=$(($(counted) - c0))
    check "$when while Redis was down (connections refused): Redis counts what was admitted ($c of $admitted)" \
        [ "$c" -ge "$admitted" ]
done

# Redis gone for good at SIGTERM: the drain gives up after its deadlines
# and says which limits' usage it dropped, and why.
sed 's/^drain_timeout = 5s/drain_timeout = 1s/' "$T/s.ini" >"$T/s3.ini"
start_fg s3 -c "$T/s3.ini" --listen 127.0.0.1:0 || { bad "serve starts a third time"; finish; }
U="http://127.0.0.1:$FGPORT_s3/v1/check?limit=sy&key="
for k in 1 2 3; do for _ in 1 2 3; do http POST "${U}k$k" >/dev/null; done; done
redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1
for _ in $(seq 1 100); do kill -0 "$RPID" 2>/dev/null || break; sleep 0.02; done
kill -TERM "$FGPID_s3"
for _ in $(seq 1 200); do kill -0 "$FGPID_s3" 2>/dev/null || break; sleep 0.05; done
wait "$FGPID_s3"
line=$(grep 'event=sync_unsent' "$T/s3.log")
check "Redis gone at SIGTERM: the usage given up is said, with its limit and why ($line)" \
    grep -q 'event=sync_unsent worker=0 at=drain limits=sy error="backend ' <<<"$line"

# Thirteen such limits with long names (the first twelve 497 bytes, with
# their commas 508): the list is cut with ",..." within its buffer (under
# AddressSanitizer, the old check wrote one byte past it).
restart_redis || bad "redis restarts"
n41=$(printf 'n%.0s' $(seq 1 41))
names=""
{
    sed -n '/^\[limit sy\]/q;p' "$T/s3.ini"
    for i in $(seq 10 22); do
        if [ "$i" -eq 21 ]; then nm="${n41:0:22}$i"; else nm="${n41}$i"; fi
        names="$names${names:+,}$nm"
        printf '[limit %s]\nkey = query:k\nalgorithm = fixed_window\nrate = 1000000/day\nmode = sync:2s\non_failure = closed\n' "$nm"
    done
} >"$T/s4.ini"
start_fg s4 -c "$T/s4.ini" --listen 127.0.0.1:0 || { bad "serve with thirteen limits starts"; finish; }
for _ in 1 2 3; do
    for part in "$(cut -d, -f1-8 <<<"$names")" "$(cut -d, -f9-13 <<<"$names")"; do
        http POST "http://127.0.0.1:$FGPORT_s4/v1/check?limit=$part&key=a" >/dev/null
    done
done
redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1
for _ in $(seq 1 100); do kill -0 "$RPID" 2>/dev/null || break; sleep 0.02; done
kill -TERM "$FGPID_s4"
for _ in $(seq 1 200); do kill -0 "$FGPID_s4" 2>/dev/null || break; sleep 0.05; done
wait "$FGPID_s4"
expect_eq "thirteen limits given up at SIGTERM: exit 0" "$?" 0
line=$(grep 'event=sync_unsent' "$T/s4.log")
check "thirteen limits given up: listed, cut with ,... ($(cut -c 60-110 <<<"$line")...)" \
    grep -q "limits=${n41}10,.*,${n41}20,\.\.\. error=" <<<"$line"
check "thirteen limits given up: no sanitizer report" \
    test -z "$(grep -E 'AddressSanitizer|runtime error' "$T/s4.log")"
finish
