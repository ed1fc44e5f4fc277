#!/usr/bin/env bash
# What floodgate serve's request_timeout closes, and what it counts in
# floodgate_slow_requests_closed_total: only a connection on which part of
# a request had come. Idle ones are closed and not counted: accepted with
# nothing sent; idle after an answer; idle after an answer and a blank
# line (CRLF after a request, as some clients send); a client that
# pipelines without reading its answers (tests/serve/fggreedy.c), closed
# request_timeout after its answers began to wait. Slow ones are closed and
# counted: half a request line; an answer, then half a head; a whole head
# and 3 of 10 body bytes. A serve stopped (SIGSTOP) past its clients'
# deadlines reads the requests they sent in time before judging them.
# Loopback only; about 8 s (30 s at most).
FG_TEST_BOUND=${FG_TEST_BOUND:-30}
. "$(dirname "$0")/../serve/lib.sh"

FGGREEDY="$BUILD/tests/serve/fggreedy" # built by mk/serve.mk
[ -x "$FGGREEDY" ] || { bad "$FGGREEDY missing"; finish; }

# request_timeout 1 s: the sweep looks every 200 ms.
cat >"$T/fg.ini" <<INI
[server]
workers = 2
request_timeout = 1s
[store]
url = memory
[limit l]
key = query:key
algorithm = fixed_window
rate = 1000000/day
INI
start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
P=$FGPORT_fg
slow() {
    curl -s -m 2 "http://127.0.0.1:$P/metrics" |
        awk '$1 == "floodgate_slow_requests_closed_total" { print $2 }'
}
REQ='GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'

# conn NAME FORMAT: a connection that sends FORMAT (printf) at once; its
# descriptor in FD_NAME.
conn() {
    local fd
    exec {fd}<>"/dev/tcp/127.0.0.1/$P"
    # shellcheck disable=SC2059
    [ -n "$2" ] && printf "$2" >&"$fd"
    eval "FD_$1=$fd"
}
# closed NAME: the server closed it (an end of file, after whatever
# answers came); at most 1 s more.
closed() {
    local fd
    eval "fd=\$FD_$1"
    timeout 1 cat <&"$fd" >/dev/null
    local rc=$?
    exec {fd}<&-
    [ "$rc" = 0 ]
}

# --- idle: closed, not counted --------------------------------------------
before=$(slow)
conn fresh ''
conn after "$REQ"
conn crlf "$REQ"'\r\n'
"$FGGREEDY" -p "$P" -u /metrics -s 300 -w 4000 >"$T/greedy" &
GPID=$!
sleep 1.7 # request_timeout, a sweep, and a margin
for c in fresh after crlf; do
    check "idle ($c): closed by request_timeout" closed $c
done
wait "$GPID"
line=$(cat "$T/greedy")
cms=$(field "$line" closed_ms)
check "a client that does not read is closed about request_timeout after its answers began to wait ($line)" \
    bash -c "[ '$cms' -ge 900 ] && [ '$cms' -le 2000 ]"
expect_eq "idle connections and one that does not read are not slow requests" \
    "$(slow)" "$before"

# --- slow: closed and counted ---------------------------------------------
before=$(slow)
conn line 'GET /healthz HT'
conn head "$REQ"'POST /v1/check?limit=l&key=s HTTP/1.1\r\nHost: x\r\n'
conn body 'POST /v1/check?limit=l&key=b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc'
sleep 1.7
for c in line head body; do
    check "slow ($c): closed by request_timeout" closed $c
done
expect_eq "three slow requests counted" "$(slow)" $((before + 3))

kill -TERM "$FGPID_fg"
wait "$FGPID_fg"
expect_eq "exits 0 on SIGTERM" "$?" 0
# A server that stops (SIGSTOP: a frozen host or container) does not hold
# its own lateness against clients: 10 keep-alive connections, idle 0.6 s
# after an answer (request_timeout 1 s), send their next request while
# serve is stopped, 0.2 s into a 1 s stop (0.8 s after their answer); serve
# resumes past their deadline, with the requests unread in its sockets.
# Each is answered, none reset.
start_fg st -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "server st starts"; finish; }
out=$(timeout 20 python3 - "$FGPORT_st" "$FGPID_st" <<'PY'
import os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
ss = []
for _ in range(10):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    s.recv(4096)
    ss.append(s)
time.sleep(0.6)
os.kill(pid, signal.SIGSTOP)
try:
    time.sleep(0.2)
    for s in ss:
        s.sendall(req)
    time.sleep(0.8)
finally:
    os.kill(pid, signal.SIGCONT)
ok = reset = other = 0
for s in ss:
    s.settimeout(5)
    try:
        d = s.recv(4096)
        if d.startswith(b"HTTP/1.1 200"):
            ok += 1
        else:
            other += 1
    except ConnectionResetError:
        reset += 1
print("answered=%d reset=%d other=%d" % (ok, reset, other))
PY
)
expect_eq "a stopped server's late sweep cuts no request that came in time" "$out" "answered=10 reset=0 other=0"
kill -TERM "$FGPID_st"
wait "$FGPID_st"

# A client that floods blank lines (never a request) faster than they are
# read is still closed near request_timeout: the sweep spares unread bytes
# once a deadline, not for as long as they keep coming.
start_fg fl -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "server fl starts"; finish; }
out=$(timeout 20 python3 - "$FGPORT_fl" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
chunk = b"\r\n" * 32768
t0 = time.monotonic()
try:
    while time.monotonic() - t0 < 6:
        s.sendall(chunk)
except OSError:
    pass
print("%.1f" % (time.monotonic() - t0))
PY
)
check "a blank-line flood is closed near request_timeout (after ${out} s; 1 s)" \
    awk -v t="$out" 'BEGIN { exit !(t > 0.5 && t < 3) }'
kill -TERM "$FGPID_fl"
wait "$FGPID_fl"
finish
