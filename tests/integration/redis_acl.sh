#!/usr/bin/env bash
# Redis ACL users: one with only the commands docs/redis.md lists runs
# every algorithm, mode and operator call; one allowed EVALSHA but not
# EVAL recovers from an emptied script cache (SCRIPT FLUSH, as a restart
# leaves it): floodgate loads the scripts again on the NOSCRIPT, where
# answering it with EVAL alone would fail every check from then on.
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
LIST=(+evalsha +eval '+script|load' +get +set +mget +del +decrby +time
    +incr +incrby +pexpire +wait)
redis-cli -p "$RPORT" ACL SETUSER lim on '>pw' '~fg:*' "${LIST[@]}" >/dev/null
redis-cli -p "$RPORT" ACL SETUSER noeval on '>pw' '~fg:*' "${LIST[@]}" -eval >/dev/null
redis-cli -p "$RPORT" ACL SETUSER nosha on '>pw' '~fg:*' "${LIST[@]}" -evalsha >/dev/null
LIM="redis://lim:pw@127.0.0.1:$RPORT"
NOEVAL="redis://noeval:pw@127.0.0.1:$RPORT"

# The documented commands are enough.
for a in token_bucket fixed_window sliding_window naive_get_set; do
    expect_eq "ACL user with the listed commands: $a, 5 of 7" \
        "$("$FLOODGATE" check --store "$LIM" --limit 5/min --algorithm $a --key "k$a" \
            --count 7 --timeout 500 2>&1 | tail -1)" "allowed=5 limited=2"
    expect_eq "ACL user with the listed commands: $a, peek" \
        "$("$FLOODGATE" check --store "$LIM" --limit 5/min --algorithm $a --key "k$a" \
            --peek --timeout 500 2>&1 | cut -d' ' -f1)" "remaining=0"
    expect_eq "ACL user with the listed commands: $a, reset" \
        "$("$FLOODGATE" check --store "$LIM" --limit 5/min --algorithm $a --key "k$a" \
            --reset --timeout 500 2>&1)" "reset"
done
for m in lease sync:100ms; do
    expect_eq "ACL user with the listed commands: mode $m, 5 of 7" \
        "$("$FLOODGATE" check --store "$LIM" --limit 5/min --mode $m --key "m$m" \
            --count 7 --timeout 500 2>&1 | tail -1)" "allowed=5 limited=2"
done

# A user without a command it needs: the error says what Redis said.
out=$("$FLOODGATE" check --store "redis://nosha:pw@127.0.0.1:$RPORT" --limit 5/s --key a \
    --timeout 500 2>&1)
check "no EVALSHA: floodgate check gives Redis's NOPERM ($out)" \
    grep -q "check failed: NOPERM .*'evalsha'" <<<"$out"
check "no EVALSHA: said at open, with what fails" \
    grep -q "floodgate check: warning: redis .*EVALSHA is refused (NOPERM .*token_bucket or sliding_window" <<<"$out"
out=$("$FLOODGATE" check --store "$LIM" --limit 5/s --key a --timeout 500 2>&1)
check "EVALSHA allowed: no such warning ($out)" sh -c "! grep -q warning <<'EOF'
$out
EOF"

# A user without PEXPIRE: a fixed window's INCRBY counts but its key would
# never expire. The check fails (its policy decides) and says why, on
# the blocking client and on serve's async one.
redis-cli -p "$RPORT" ACL SETUSER noexp on '>pw' '~fg:*' "${LIST[@]}" -pexpire >/dev/null
out=$("$FLOODGATE" check --store "redis://noexp:pw@127.0.0.1:$RPORT" --limit 5/min \
    --algorithm fixed_window --key nx --on-failure closed --timeout 500 2>&1)
check "no PEXPIRE: floodgate check fails closed with Redis's NOPERM ($out)" \
    grep -q "NOPERM .*'pexpire'" <<<"$out"
cat >"$T/x.ini" <<INI
[server]
workers = 1
[store]
url = redis://noexp:pw@127.0.0.1:$RPORT
timeout = 500ms
[limit fw]
key = query:k
algorithm = fixed_window
rate = 5/min
on_failure = closed
INI
start_fg x -c "$T/x.ini" --listen 127.0.0.1:0 || { bad "serve x starts"; finish; }
expect_eq "no PEXPIRE: serve fails closed (503)" \
    "$(http POST "http://127.0.0.1:$FGPORT_x/v1/check?limit=fw&key=nx2")" 503
check "no PEXPIRE: serve logs Redis's NOPERM" \
    grep -q "event=store_error .*detail=\"redis .*check failed: NOPERM .*'pexpire'" "$T/x.log"

# The blocking client, SCRIPT FLUSH during a burst: the check that meets
# NOSCRIPT answers it with EVAL, which this user may not run (its policy
# decides it, closed here); the scripts are loaded again and every later
# check is the store's.
"$FLOODGATE" check --store "$NOEVAL" --limit 100000/h --key b --count 20000 \
    --on-failure closed --timeout 500 >"$T/b.out" 2>/dev/null &
cpid=$!
for _ in $(seq 1 200); do [ -s "$T/b.out" ] && break; sleep 0.01; done
redis-cli -p "$RPORT" script flush >/dev/null
wait $cpid
failed=$(grep -c 'source=fail_closed' "$T/b.out")
check "blocking, no EVAL, SCRIPT FLUSH: one check failed ($failed)" test "$failed" = 1
check "blocking, no EVAL, SCRIPT FLUSH: the last 100 checks from the store" \
    test "$(tail -101 "$T/b.out" | head -100 | grep -c '^allowed remaining=')" = 100

# serve (the async client, two workers): after the flush, each worker's
# next check of each script fails at most once; then the store decides.
cat >"$T/s.ini" <<INI
[server]
workers = 2
[store]
url = $NOEVAL
timeout = 500ms
[limit tb]
key = query:k
rate = 100000/h
[limit sw]
key = query:k
algorithm = sliding_window
rate = 100000/h
[limit fw]
key = query:k
algorithm = fixed_window
rate = 100000/h
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_s"
load() { "$FGLOAD" -n 300 -c 4 "$U/v1/check?limit=tb&key=$1" "$U/v1/check?limit=sw&key=$1" \
    "$U/v1/check?limit=fw&key=$1"; }
fails() { curl -s "$U/metrics" | awk '/^floodgate_requests_total.*source="fail_open"/ { s += $2 } END { print s + 0 }'; }
load warm >/dev/null
# Twice within a second: the second reload is not held back.
for round in 1 2; do
    f0=$(fails)
    redis-cli -p "$RPORT" script flush >/dev/null
    load "after$round" >/dev/null
    f1=$(fails)
    # Only what met the NOSCRIPT: at most the 4 in flight, for each of
    # the 2 limits with a script, in each of the 2 workers.
    check "serve, no EVAL, SCRIPT FLUSH $round: $((f1 - f0)) checks failed (at most 16)" \
        test $((f1 - f0)) -le 16
    out=$(load "again$round")
    f2=$(fails)
    echo "serve, no EVAL, after SCRIPT FLUSH $round: $out"
    check "serve, no EVAL, SCRIPT FLUSH $round: then every check from the store ($f1 -> $f2 failed)" \
        test "$f2" = "$f1"
    expect_eq "serve, no EVAL, SCRIPT FLUSH $round: 300 of 300 allowed" "$(field "$out" s200)" 300
done
check "serve: the failures logged with Redis's NOPERM" \
    grep -q "event=store_error .*detail=\"redis .*check failed: NOPERM .*'eval'" "$T/s.log"

# A Redis that evicts keys when full (maxmemory and an evicting policy)
# would drop counters in use: floodgate check and serve say so at open.
# A user who may not read the configuration (no +config|get) gets no
# warning and works as before; nor does a Redis that does not evict.
redis-cli -p "$RPORT" config set maxmemory 1gb >/dev/null
redis-cli -p "$RPORT" config set maxmemory-policy allkeys-lru >/dev/null
out=$("$FLOODGATE" check --store "redis://127.0.0.1:$RPORT" --limit 5/s --key ev 2>&1)
check "evicting Redis: floodgate check warns ($out)" \
    grep -q "floodgate check: warning: redis .*maxmemory-policy allkeys-lru evicts keys .*set noeviction" <<<"$out"
check "evicting Redis: the check is still decided" grep -q "^allowed" <<<"$out"
out=$("$FLOODGATE" check --store "$LIM" --timeout 2000 --limit 5/s --key ev 2>&1)
expect_eq "evicting Redis, a user without +config|get: no warning, decided" "$out" \
    "$(grep '^allowed' <<<"$out")"
printf '[store]\nurl = redis://127.0.0.1:%s\n[limit a]\nkey = query:k\nrate = 5/s\n' "$RPORT" >"$T/ev.ini"
start_fg ev -c "$T/ev.ini" --listen 127.0.0.1:0 || bad "serve ev starts"
check "evicting Redis: serve logs store_warning" \
    grep -q 'event=store_warning level=warning reason="redis .*allkeys-lru evicts keys' "$T/ev.log"
redis-cli -p "$RPORT" config set maxmemory-policy noeviction >/dev/null
out=$("$FLOODGATE" check --store "redis://127.0.0.1:$RPORT" --limit 5/s --key ev 2>&1)
check "noeviction: no warning ($out)" test -z "$(grep warning <<<"$out")"

# renamed_redis NAME COMMAND: a redis-server without COMMAND, in $T/NAME;
# prints its port.
renamed_redis() {
    local port
    port=$(free_port)
    mkdir -p "$T/$1"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$T/$1" --logfile "$T/$1/log" --rename-command "$2" '' >/dev/null 2>&1 &
    echo "$!" >"$T/$1/pid"
    for _ in $(seq 1 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.02; done
    echo "$port"
}

# A server whose EVALSHA is renamed away: serve says at start that every
# script's check will fail; a fixed window, which runs none, works.
EPORT=$(renamed_redis nosha EVALSHA)
PIDS="$PIDS $(cat "$T/nosha/pid")"
printf '[store]\nurl = redis://127.0.0.1:%s\n[limit a]\nkey = query:k\nalgorithm = fixed_window\nrate = 5/s\n' "$EPORT" >"$T/nosha.ini"
start_fg nosha -c "$T/nosha.ini" --listen 127.0.0.1:0 || bad "serve nosha starts"
check "EVALSHA renamed: serve logs store_warning" \
    grep -q "event=store_warning level=warning reason=\"redis .*EVALSHA is refused (ERR unknown command 'EVALSHA')" "$T/nosha.log"
out=$(curl -s -X POST "http://127.0.0.1:$FGPORT_nosha/v1/check?limit=a&key=k")
check "EVALSHA renamed: a fixed window is still decided by the store ($out)" \
    grep -q '"allowed":true,.*"source":"store"' <<<"$out"

# A server whose SCRIPT is renamed away (as some proxies run EVAL but not
# SCRIPT): it opens, and checks are decided with EVAL, exactly.
SPORT=$(renamed_redis noscript SCRIPT)
PIDS="$PIDS $(cat "$T/noscript/pid")"
for i in 1 2 3; do
    "$FLOODGATE" check --store "redis://127.0.0.1:$SPORT" --algorithm sliding_window \
        --timeout 2000 --limit 2/h --key ns 2>&1
done >"$T/noscript.out"
check "no SCRIPT command: decided with EVAL, 2 of 3 ($(tr '\n' ' ' <"$T/noscript.out"))" \
    test "$(grep -c '^allowed' "$T/noscript.out")" = 2 -a "$(grep -c '^limited' "$T/noscript.out")" = 1
finish
