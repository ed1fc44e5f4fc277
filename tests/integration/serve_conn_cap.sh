#!/usr/bin/env bash
# At max_connections, a new client takes the place of the oldest idle
# connection (one that sent nothing yet, or nothing after its last answer,
# for a second or more),
# as nginx reuses keep-alive connections; a connection in the middle of a
# request is never the one closed. Without it, clients that open
# connections and let them idle keep every other client out until
# request_timeout. Loopback only; about 3 s (30 s at most).
FG_TEST_BOUND=${FG_TEST_BOUND:-30}
. "$(dirname "$0")/../serve/lib.sh"

cat >"$T/fg.ini" <<INI
[server]
workers = 1
max_connections = 12
request_timeout = 30s
[store]
url = memory
[limit l]
key = query:key
rate = 1000/s
INI
start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
P=$FGPORT_fg
REQ='GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'

# The oldest: half a request line (in the middle of a request).
exec {busy}<>"/dev/tcp/127.0.0.1/$P"
printf 'GET /heal' >&"$busy"
# Five keep-alive connections idle after an answer, six that sent nothing.
idle=()
for i in 1 2 3 4 5; do
    exec {fd}<>"/dev/tcp/127.0.0.1/$P"
    printf "$REQ" >&"$fd"
    read -r -t 2 status <&"$fd"
    idle+=("$fd")
done
for i in 1 2 3 4 5 6; do
    exec {fd}<>"/dev/tcp/127.0.0.1/$P"
    idle+=("$fd")
done
# A connection counts as idle after a second of it.
sleep 1.2
sockets() { find /proc/"$FGPID_fg"/fd -lname 'socket:*' 2>/dev/null | wc -l; }

# One new client at the cap closes one idle connection, not more.
s0=$(sockets)
expect_eq "a new client at the cap answered" \
    "$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/healthz")" 200
sleep 0.2
expect_eq "one idle connection closed for it" "$(sockets)" $((s0 - 1))

# At the cap again. A request that reaches an idle connection in the loop
# turn that closes one for a new client is not lost: the server is stopped
# while a client connects and the oldest idle connection left (the first
# one went for the client above) sends a request.
trap '' PIPE
exec {fd}<>"/dev/tcp/127.0.0.1/$P"
idle+=("$fd")
sleep 1.2
kill -STOP "$FGPID_fg"
curl -s -m 5 -o "$T/late" -w '%{http_code}' "http://127.0.0.1:$P/healthz" >"$T/late.code" &
late=$!
sleep 0.2
printf "$REQ" >&"${idle[1]}"
kill -CONT "$FGPID_fg"
# (Past the rest of the first answer, whose status line alone was read.)
answers=0
while read -r -t 1 line <&"${idle[1]}"; do
    [ "${line%$'\r'}" = "HTTP/1.1 200 OK" ] && answers=$((answers + 1)) && break
done
expect_eq "a request waiting on an idle connection is answered" "$answers" 1
wait "$late"
expect_eq "and the new client too" "$(cat "$T/late.code")" 200

# 12 of 12 open: each new client closes an idle one and is answered.
ok200=0
t0=$(date +%s%N)
for i in $(seq 1 8); do
    s=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/healthz")
    [ "$s" = 200 ] && ok200=$((ok200 + 1))
done
ms=$((($(date +%s%N) - t0) / 1000000))
expect_eq "new clients at the cap answered ($ms ms for 8)" "$ok200" 8
check "without waiting for request_timeout" [ "$ms" -lt 5000 ]
check "the closing is logged" grep -q 'event=idle_closed reason="max_connections reached" connections=' "$T/fg.log"

# The connection in the middle of its request was not closed: it ends it.
printf 'thz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&"$busy"
read -r -t 3 status <&"$busy"
expect_eq "a request in progress is not the one closed" "${status%$'\r'}" "HTTP/1.1 200 OK"
check "server alive" kill -0 "$FGPID_fg"
finish
