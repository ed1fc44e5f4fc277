#!/usr/bin/env bash
# redis_admin.sh -- fg_peek and fg_reset on the Redis store against real
# redis-server processes started here on free loopback ports in a temp
# folder, stopped by a trap: the same figures as the memory store's for the
# same state and clock, a peek that takes nothing, a reset that deletes
# every window, peeks on a read-only replica, and `floodgate check --peek`
# / `--reset`.
set -u
cd "$(dirname "$0")/../.."
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
TOOL=$BUILD/redis/redis_admin
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

finish
