#!/usr/bin/env bash
# floodgate serve while every allocation fails (tests/fault/nomem.c, for
# two seconds a second after start): a SIGTERM then still drains and
# exits 0 (ending the loop allocated, and the worker waited forever); once
# memory is back it answers as before. (A token bucket: a fixed window's
# end between the checks, at a whole minute, let a sixth through.)
. "$(dirname "$0")/../serve/lib.sh"

NOMEM=$BUILD/fault/nomem.so
if [ ! -f "$NOMEM" ]; then
    bad "$NOMEM is built by make all"
    finish
fi
if ldd "$FLOODGATE" 2>/dev/null | grep -q -E 'lib(a|ub|t)san'; then
    echo "skip serve under failing allocations: a sanitizer build's allocator cannot be replaced"
    finish
fi
cat >"$T/s.ini" <<INI
[server]
workers = 2
drain_grace = 200ms
drain_timeout = 3s
[limit ex]
key = query:k
algorithm = token_bucket
rate = 5/min
INI
# run_nomem NAME: serve under nomem.so, its port in PORT, its pid in SPID.
run_nomem() {
    env LD_PRELOAD="$NOMEM" FG_NOMEM_AFTER_MS=1000 FG_NOMEM_FOR_MS=2000 \
        "$FLOODGATE" serve -c "$T/s.ini" --listen 127.0.0.1:0 >"$T/$1.log" 2>&1 &
    SPID=$!
    PIDS="$PIDS $SPID"
    PORT=
    for _ in $(seq 1 100); do
        PORT=$(grep -o 'event=listening addr=127.0.0.1:[0-9]*' "$T/$1.log" | sed 's/.*://')
        [ -n "$PORT" ] && break
        sleep 0.01
    done
}

run_nomem a
check "serve starts under nomem.so" test -n "$PORT"
expect_eq "before the shortage: a check is answered" \
    "$(http POST "http://127.0.0.1:$PORT/v1/check?limit=ex&key=a")" 200
sleep 1.3 # into the shortage
kill -TERM "$SPID"
for _ in $(seq 1 60); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SPID" 2>/dev/null; then
    bad "SIGTERM while no allocation succeeds: the drain ends (still running 6 s later)"
    kill -KILL "$SPID"
else
    wait "$SPID"
    expect_eq "SIGTERM while no allocation succeeds: the drain ends, exit 0" "$?" 0
fi

run_nomem b
check "serve starts under nomem.so again" test -n "$PORT"
sleep 3.2 # past the shortage
codes=""
for _ in 1 2 3 4 5 6; do
    codes="$codes $(http POST "http://127.0.0.1:$PORT/v1/check?limit=ex&key=b")"
done
expect_eq "after the shortage: answered as before (5/min)" "$codes" " 200 200 200 200 200 429"
kill -TERM "$SPID"
wait "$SPID"
expect_eq "after the shortage: SIGTERM exits 0" "$?" 0
finish
