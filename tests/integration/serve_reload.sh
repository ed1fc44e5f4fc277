#!/usr/bin/env bash
# SIGHUP while Redis checks are in flight: the old configuration's store is
# closed only after its last request has answered, outside every store
# callback. Redis is stopped (SIGSTOP) with checks waiting on it, the server
# reloads, Redis continues: every request is answered, the server lives on,
# and a sanitizer build reports nothing.
# Then what a reload changes: max_header_bytes and request_timeout are
# applied (on admin_listen too); blocked_cache, max_connections and the
# memory store's options are refused with the reason logged (the running
# configuration stays);
# a change of a limit's mode alone is applied on the memory store.
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

# A reload that raises a rate, on Redis: 2/h used up, then 1000/s. The
# bucket's debt is kept but never more than a full bucket at the new rate:
# refused for 1 ms at most, then allowed (the old TAT, an hour ahead, kept
# it refused for the hour).
cat >"$T/c.ini" <<INI
[server]
workers = 1
blocked_cache = 0
[store]
url = redis://127.0.0.1:$RPORT
prefix = c$$:
timeout = 1s
[limit chg]
key = query:k
rate = 2/h
INI
start_fg c -c "$T/c.ini" --listen 127.0.0.1:0 || bad "rate server starts"
C="http://127.0.0.1:$FGPORT_c"
got=""
for _ in 1 2 3; do got="$got$(http POST "$C/v1/check?limit=chg&key=u1") "; done
expect_eq "2/h: two allowed, the third refused" "$got" "200 200 429 "
sed -i 's|^rate = 2/h$|rate = 1000/s|' "$T/c.ini"
n0=$(grep -c 'event=reload' "$T/c.log")
kill -HUP "$FGPID_c"
for _ in $(seq 1 200); do
    [ "$(grep -c 'event=reload' "$T/c.log")" -gt "$n0" ] && break
    sleep 0.01
done
check "rate raised by reload" grep -q 'event=reload.*result=ok' "$T/c.log"
first=$(http POST "$C/v1/check?limit=chg&key=u1")
ra=$(header Retry-After)
check "after the raise: allowed, or refused for under a second ($first, Retry-After '$ra')" \
    test "$first" = 200 -o "$ra" = 1
sleep 0.05
expect_eq "50 ms after the raise: allowed" "$(http POST "$C/v1/check?limit=chg&key=u1")" 200
kill -TERM "$FGPID_c"
expect_eq "healthz after the reloads" "$(http GET "$U/healthz")" 200
expect_eq "a check after the reloads" \
    "$(http POST "$U/v1/check?limit=slow&key=after")" 200
kill -TERM "$FGPID_s"
for _ in $(seq 1 300); do kill -0 "$FGPID_s" 2>/dev/null || break; sleep 0.01; done

# --- what a reload applies, and what it refuses -------------------------
mconf() { # mconf MAX_HEADER_BYTES REQUEST_TIMEOUT BLOCKED_CACHE STORE-URL
    cat >"$T/m.ini" <<INI
[server]
workers = 1
max_header_bytes = $1
request_timeout = $2
blocked_cache = $3
max_connections = 1000
[store]
url = $4
[limit l]
key = query:k
rate = 1000/min
INI
}
reload_m() { # reload_m [NAME]: SIGHUP to serve NAME (m) and wait for its log line; prints it
    local n=${1:-m} n0 pid
    eval "pid=\$FGPID_$n"
    n0=$(grep -c 'event=reload' "$T/$n.log")
    kill -HUP "$pid"
    for _ in $(seq 1 300); do
        [ "$(grep -c 'event=reload' "$T/$n.log")" -gt "$n0" ] && break
        sleep 0.01
    done
    grep 'event=reload' "$T/$n.log" | tail -1
}
{ printf 'X-Big: '; head -c 4000 /dev/zero | tr '\0' a; printf '\n'; } >"$T/h4k"
mconf 8192 10s 1024 memory
start_fg m -c "$T/m.ini" --listen 127.0.0.1:0 || { bad "memory server starts"; finish; }
M="http://127.0.0.1:$FGPORT_m"
expect_eq "4 KB header under max_header_bytes 8192" \
    "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H @"$T/h4k" -X POST "$M/v1/check?limit=l&key=a")" 200

mconf 1024 1s 1024 memory
line=$(reload_m)
check "reload of max_header_bytes and request_timeout accepted ($line)" \
    grep -q 'event=reload result=ok' <<<"$line"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H @"$T/h4k" -X POST "$M/v1/check?limit=l&key=a")
check "reloaded max_header_bytes 1024 refuses a 4 KB header (got $code)" \
    bash -c "[ '$code' = 431 ]"
exec 3<>/dev/tcp/127.0.0.1/$FGPORT_m
printf 'POST /v1/check?limit=l&key=slow HTTP/1.1\r\nHost: x\r\n' >&3
t0=$(date +%s%N)
timeout 6 cat <&3 >/dev/null
t1=$(date +%s%N)
exec 3<&-
ms=$(( (t1 - t0) / 1000000 ))
check "reloaded request_timeout 1s closes a stalled client ($ms ms)" \
    bash -c "[ $ms -ge 800 ] && [ $ms -lt 2500 ]"

mconf 1024 1s 0 memory
line=$(reload_m)
check "blocked_cache change refused with its reason ($line)" \
    grep -q 'result=error reason="blocked_cache changes only on restart" kept=running' <<<"$line"
check "a refused reload names its file" grep -qF " file=$T/" <<<"$line"
mconf 1024 1s 1024 'memory?max_keys=10'
line=$(reload_m)
check "memory store options change refused with its reason ($line)" \
    grep -q "result=error reason=\"the memory store's options change only on restart\"" <<<"$line"
# The memory store stays open through a reload to Redis: back on memory,
# other options are refused the same, its own accepted.
mconf 1024 1s 1024 "redis://127.0.0.1:$RPORT"
line=$(reload_m)
check "reload from memory to Redis accepted, naming the store ($line)" \
    grep -q "event=reload result=ok limits=[0-9]* store=redis://127.0.0.1:$RPORT" <<<"$line"
mconf 1024 1s 1024 'memory?max_keys=10'
line=$(reload_m)
check "memory store options changed by way of Redis refused ($line)" \
    grep -q "result=error reason=\"the memory store's options change only on restart\"" <<<"$line"
mconf 1024 1s 1024 memory
line=$(reload_m)
check "back to the memory store as opened: accepted ($line)" grep -q 'event=reload result=ok' <<<"$line"
sed -i 's/^max_connections = 1000/max_connections = 2000/' "$T/m.ini"
line=$(reload_m)
check "max_connections change refused with its reason ($line)" \
    grep -q 'reason="max_connections changes only on restart"' <<<"$line"
# A file emptied (rewritten in place, or a pipe read again) would drop
# every limit: refused, the running ones kept.
cp "$T/m.ini" "$T/m.keep"
: >"$T/m.ini"
line=$(reload_m)
check "a configuration with no [limit] refused ($line)" \
    grep -q 'result=error reason="the new configuration has no \[limit\]' <<<"$line"
# The file replaced by a FIFO with no writer: the reload is refused at
# once (it does not wait for a writer), and the server goes on.
mv "$T/m.ini" "$T/m.keep"
mkfifo "$T/m.ini"
line=$(reload_m)
check "a FIFO as the file at a reload refused at once ($line)" \
    grep -q 'result=error reason=".*m.ini: not a regular file' <<<"$line"
rm -f "$T/m.ini"
mv "$T/m.keep" "$T/m.ini"
expect_eq "still serving after refused reloads" "$(http POST "$M/v1/check?limit=l&key=b")" 200
curl -s "$M/metrics" >"$T/metrics"
check "refused reloads counted" grep -q 'floodgate_reloads_total{result="error"} 6' "$T/metrics"

kill -TERM "$FGPID_m"
for _ in $(seq 1 300); do kill -0 "$FGPID_m" 2>/dev/null || break; sleep 0.01; done

# Started on Redis: a reload to memory?max_keys=10 refused for another
# reason (blocked_cache) does not keep that store open, so a later reload
# to plain memory is accepted (it was refused as a change of options).
mconf 1024 1s 1024 "redis://127.0.0.1:$RPORT"
start_fg rm -c "$T/m.ini" --listen 127.0.0.1:0 || { bad "Redis server starts"; finish; }
mconf 1024 1s 2048 'memory?max_keys=10'
line=$(reload_m rm)
check "to memory?max_keys=10 with blocked_cache changed: refused ($line)" \
    grep -q 'reason="blocked_cache changes only on restart"' <<<"$line"
mconf 1024 1s 1024 memory
line=$(reload_m rm)
check "then to plain memory: accepted ($line)" grep -q 'event=reload result=ok' <<<"$line"
kill -TERM "$FGPID_rm"

# A reload that changes only a limit's mode (on_failure set, so it stays)
# on the memory store is applied: after sync:100ms, exact mode decides
# every check in the store (source "store"), and a peek sees all counted.
TOKEN="rl-$$-Qx7"
printf '%s\n' "$TOKEN" >"$T/token"
chmod 600 "$T/token"
pconf() { # pconf [MODE-LINE] [SERVER-LINES]
    cat >"$T/p.ini" <<INI
[server]
workers = 1
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
${2:-}
[limit l]
key = query:k
algorithm = fixed_window
rate = 10/h
on_failure = open
$1
INI
}
sources() { # sources KEY: 12 checks on one connection, their sources
    local a="" i
    for i in $(seq 1 12); do a="$a -X POST $P/v1/check?limit=l&key=$1 -w \n"; done
    # shellcheck disable=SC2086
    curl -s -m 5 $a | grep -o '"source":"[a-z]*"' | sort | uniq -c | awk '{ printf "%s%s ", $2, $1 }'
}
pconf 'mode = sync:100ms'
start_fg p -c "$T/p.ini" --listen 127.0.0.1:0 || { bad "mode server starts"; finish; }
P="http://127.0.0.1:$FGPORT_p"
PA="http://127.0.0.1:$(grep -o 'event=admin_listening addr=[^ ]*' "$T/p.log" | sed 's/.*://')"
got=$(sources a)
check "sync:100ms answers from its view ($got)" grep -q '"source":"sync"' <<<"$got"
pconf ''
reload_fg p 0.1
expect_eq "reload from sync to exact applied: the store decides" "$(sources b)" '"source":"store"12 '
http GET "$PA/v1/peek?limit=l&key=b" -H "Authorization: Bearer $TOKEN" >/dev/null
check "after the reload to exact a peek sees the 10 admitted ($(cat "$T/b"))" \
    grep -q '"remaining":0,' "$T/b"
# The admin listener takes a reload's max_header_bytes and request_timeout
# as the main one does.
pconf '' "$(printf 'max_header_bytes = 1024\nrequest_timeout = 1s')"
reload_fg p 0.1
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H @"$T/h4k" -H "Authorization: Bearer $TOKEN" "$PA/v1/peek?limit=l&key=b")
expect_eq "admin: reloaded max_header_bytes 1024 refuses a 4 KB header" "$code" 431
exec 3<>/dev/tcp/127.0.0.1/"${PA##*:}"
printf 'GET /v1/peek?limit=l&key=b HTTP/1.1\r\nHost: x\r\n' >&3
t0=$(date +%s%N)
timeout 6 cat <&3 >/dev/null
t1=$(date +%s%N)
exec 3<&-
ms=$(( (t1 - t0) / 1000000 ))
check "admin: reloaded request_timeout 1s closes a stalled client ($ms ms)" \
    bash -c "[ $ms -ge 800 ] && [ $ms -lt 2500 ]"
kill -TERM "$FGPID_p"
# Metrics for 256 limit names at most: four reloads of 64 new names each
# fill them, the fifth set gets none and says so once per limit (not again
# at a reload that keeps it). A refused reload takes none: its 64 names
# (z) come between the third and the fourth set.
nconf() { # nconf PREFIX [SERVER-LINES]: 64 limits PREFIX0..PREFIX63
    local i
    { printf '[server]\n%s\n' "${2:-}"
      for i in $(seq 0 63); do printf '[limit %s%d]\nkey = query:k\nrate = 5/s\n' "$1" "$i"; done
    } >"$T/n.ini"
}
nconf a
start_fg n -c "$T/n.ini" --listen 127.0.0.1:0 || { bad "names server starts"; finish; }
for p in b c; do nconf $p; reload_fg n 0; done
nconf z 'blocked_cache = 100'; kill -HUP "$FGPID_n"
for _ in $(seq 1 300); do grep -q 'event=reload result=error' "$T/n.log" && break; sleep 0.01; done
check "a reload changing blocked_cache is refused" grep -q 'event=reload result=error reason="blocked_cache changes only on restart"' "$T/n.log"
check "the refused reload's limits have no metrics" \
    bash -c "! curl -s -m 5 http://127.0.0.1:$FGPORT_n/metrics | grep -q 'limit=\"z'"
for p in d e e; do nconf $p; reload_fg n 0; done
expect_eq "the fourth set, after the refused reload, has its metrics" \
    "$(grep -c 'event=metrics_full level=warning limit=d' "$T/n.log")" 0
expect_eq "the fifth set's limits logged once each without metrics" \
    "$(grep -c 'event=metrics_full level=warning limit=e[0-9]* cap=256 ' "$T/n.log")" 64
check "the limit past the cap is named" grep -q 'event=metrics_full level=warning limit=e63 cap=256 ' "$T/n.log"
expect_eq "a check on a limit without metrics is answered" \
    "$(http POST "http://127.0.0.1:$FGPORT_n/v1/check?limit=e1&key=x")" 200
kill -TERM "$FGPID_n"
# A SIGHUP while the server starts (its store probe waiting 1 s on a Redis
# that accepts and never answers) is a reload once it runs, not its end.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])' >"$T/bh.port" &
PIDS="$PIDS $!"
for _ in $(seq 1 200); do [ -s "$T/bh.port" ] && break; sleep 0.01; done
printf '[store]\nurl = redis://127.0.0.1:%s\n[limit a]\nkey = query:u\nrate = 5/s\n' \
    "$(cat "$T/bh.port")" >"$T/bh.ini"
"$FLOODGATE" serve -c "$T/bh.ini" --listen 127.0.0.1:0 2>"$T/bh.log" &
bh=$!
PIDS="$PIDS $bh"
# Once it catches SIGHUP (bit 1 of SigCgt), while its store probe waits.
for _ in $(seq 1 300); do
    cgt=$(awk '/^SigCgt:/ { print $2 }' "/proc/$bh/status" 2>/dev/null)
    [ -n "$cgt" ] && [ $((0x$cgt & 1)) -eq 1 ] && break
    sleep 0.01
done
sleep 0.1
check "a SIGHUP during start-up: sent before the server listens" \
    bash -c "! grep -q event=listening '$T/bh.log'"
kill -HUP "$bh"
for _ in $(seq 1 500); do
    grep -q 'event=reload result=ok' "$T/bh.log" && break
    kill -0 "$bh" 2>/dev/null || break
    sleep 0.01
done
check "a SIGHUP during start-up: the server lives" kill -0 "$bh"
check "a SIGHUP during start-up: it starts, then reloads" \
    awk '/event=listening/ { l = 1 } l && /event=reload result=ok/ { r = 1 } END { exit !r }' "$T/bh.log"
kill -TERM "$bh"
wait "$bh"
expect_eq "a SIGHUP during start-up: it drains and exits 0" "$?" 0
# A SIGTERM just after a SIGHUP that changed a sync limit, with Redis
# stopped through the reload and the drain's start: the replaced
# configuration's sync is still out. The drain waits for it too before the
# worker frees that configuration's limiters (their store answered them
# after they were freed: a crash at exit, and the usage lost). A sync that
# timed out is sent again, and Redis may run both: at least the 20.
cat >"$T/x.ini" <<INI
[server]
workers = 1
drain_grace = 0
[store]
url = redis://127.0.0.1:$RPORT
prefix = x$$:
[limit L]
key = query:k
algorithm = fixed_window
rate = 1000/h
mode = sync:5s
INI
start_fg x -c "$T/x.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
for _ in $(seq 1 20); do
    curl -s -o /dev/null -X POST "http://127.0.0.1:$FGPORT_x/v1/check?limit=L&key=u"
done
sed -i 's/sync:5s/sync:1s/' "$T/x.ini"
kill -STOP "$RPID"
kill -HUP "$FGPID_x"
sleep 1
kill -TERM "$FGPID_x"
sleep 0.3
kill -CONT "$RPID"
wait "$FGPID_x"
expect_eq "SIGTERM after a reload, Redis stopped: exits 0" "$?" 0
got=$(redis-cli -p "$RPORT" --scan --pattern "x$$:L:*" |
    xargs -r redis-cli -p "$RPORT" get)
check "SIGTERM after a reload, Redis stopped: the 20 admitted are in Redis ($got)" \
    test "${got:-0}" -ge 20
check "SIGTERM after a reload, Redis stopped: no sanitizer report" \
    bash -c "! grep -q Sanitizer '$T/x.log'"
finish
