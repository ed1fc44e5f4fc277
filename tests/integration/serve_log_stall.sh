#!/usr/bin/env bash
# A log reader that stops reading (a hung journald or log shipper) must not
# stop floodgate serve. Its stderr is a FIFO that the test fills and never
# reads; its Redis is a closed port, so that every request's store error
# asks for a store_error line on the worker. Checks: every request is
# answered; a reload and a drain still work; once the reader reads again,
# the next line says how many were dropped (event=log_dropped lines=N).
# Loopback only; about 5 s (30 s at most).
FG_TEST_BOUND=${FG_TEST_BOUND:-30}
. "$(dirname "$0")/../serve/lib.sh"

CLOSED=$(free_port)
P=$(free_port)
cat >"$T/fg.ini" <<INI
[server]
workers = 2
drain_timeout = 1s
[store]
url = redis://127.0.0.1:$CLOSED
timeout = 50ms
[limit l]
key = query:key
algorithm = fixed_window
rate = 100/s
INI

# The FIFO, opened read-write here (so that opening it never waits), and
# filled until it takes no more; read back until it is empty.
mkfifo "$T/err"
exec 7<>"$T/err"
fill() { dd if=/dev/zero of="$T/err" bs=4096 count=1024 oflag=nonblock 2>/dev/null; }
empty() { dd bs=65536 iflag=nonblock <&7 2>/dev/null; }
fill

"$FLOODGATE" serve -c "$T/fg.ini" --listen "127.0.0.1:$P" 2>"$T/err" &
FG=$!
PIDS="$PIDS $FG"
up=0
for _ in $(seq 1 300); do
    [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/healthz")" = 200 ] && { up=1; break; }
    sleep 0.01
done
check "serve starts with its log pipe full" [ "$up" = 1 ]

# Twelve requests over about 3 s: every one fails its store and is
# decided by on_failure (open), and each worker asks to log it.
answered=0
for i in $(seq 1 12); do
    s=$(curl -s -m 2 -o /dev/null -w '%{http_code}' -X POST \
        "http://127.0.0.1:$P/v1/check?limit=l&key=k$i")
    [ "$s" = 200 ] && answered=$((answered + 1))
    sleep 0.25
done
expect_eq "requests answered while the log reader does not read" "$answered" 12

# The reader reads again: the next line (a reload's) is preceded by the
# count of lines dropped meanwhile.
empty >/dev/null
kill -HUP "$FG"
sleep 0.5
empty | tr -d '\0' >"$T/after.log"
check "the lines dropped are counted" grep -q 'event=log_dropped lines=[1-9]' "$T/after.log"
check "then the reload's line" grep -q 'event=reload result=ok' "$T/after.log"

# Full again: a drain is not held up by its log lines.
fill
kill -TERM "$FG"
gone=0
for _ in $(seq 1 300); do
    kill -0 "$FG" 2>/dev/null || { gone=1; break; }
    sleep 0.01
done
check "SIGTERM ends serve within 3 s (drain_timeout 1s)" [ "$gone" = 1 ]
[ "$gone" = 1 ] || kill -KILL "$FG" # a serve stuck in write(2) ends here
wait "$FG" 2>/dev/null
expect_eq "exit status" "$?" 0
finish
