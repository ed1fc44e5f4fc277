#!/usr/bin/env bash
# SIGTERM under load loses nothing: two servers share one port
# (SO_REUSEPORT) under a continuous load of new connections; each in turn
# is stopped with SIGTERM while a fresh one takes its place. During the
# drain grace the stopping server still answers, its /healthz exactly 503;
# then it closes its listening sockets, whose queued connections the kernel
# moves to the new server's, answers what it accepted and exits 0. The
# client sees no error.
. "$(dirname "$0")/../serve/lib.sh"

conf() { # conf NAME
    cat >"$T/$1.ini" <<INI
[server]
workers = 2
id = $1
drain_grace = 1s
[limit big]
key = query:k
rate = 1000000/s
INI
}
conf a
start_fg a -c "$T/a.ini" --listen 127.0.0.1:0 || { bad "server a starts"; finish; }
P=$FGPORT_a
U="http://127.0.0.1:$P"

# healthz_of ID: the /healthz status of server ID, asking the shared port
# until that server answers (the kernel picks the server).
healthz_of() {
    local i c
    for i in $(seq 1 60); do
        c=$(curl -s -m 2 -D "$T/hh" -o /dev/null -w '%{http_code}' "$U/healthz")
        if grep -qi "^X-Served-By: $1" "$T/hh"; then echo "$c"; return; fi
    done
    echo none
}

check "a: alone on its port, says nothing of sharing it" \
    test "$(grep -c 'event=port_shared' "$T/a.log")" = 0
old=a
for new in b c; do
    conf "$new"
    start_fg "$new" -c "$T/$new.ini" --listen "127.0.0.1:$P" ||
        { bad "server $new starts on the same port"; break; }
    check "$new: says the port is shared with another process" \
        grep -q "event=port_shared addr=127.0.0.1:$P" "$T/$new.log"
    "$FGLOAD" -d 2500 -c 8 "$U/v1/check?limit=big&key=k" >"$T/load.$new" 2>"$T/err.$new" &
    LOADPID=$!
    sleep 0.5
    eval "opid=\$FGPID_$old"
    kill -TERM "$opid"
    sleep 0.1
    expect_eq "$old draining: its healthz is 503 during the grace" \
        "$(healthz_of "$old")" 503
    check "$old draining: its answers say Connection: close" \
        grep -qi '^Connection: close' "$T/hh"
    expect_eq "$new: healthz 200 meanwhile" "$(healthz_of "$new")" 200
    wait "$LOADPID"
    out=$(cat "$T/load.$new")
    echo "SIGTERM $old under load: $out"
    # Not one request lost: the connections the kernel queued on the old
    # server's sockets as they closed were moved to another socket of the
    # port (handover=bpf or sysctl), not reset. Without either (no CAP_BPF,
    # net.ipv4.tcp_migrate_req=0) Linux resets them: that cannot be
    # promised, and is said so rather than checked.
    # One exception, from Linux itself: a connection whose handshake
    # completes on a socket at the very moment it closes is lost (2 runs
    # in 60 traced: one handed over to the other server 17 us after the
    # close and already ended there, one reset; README). So: at most one
    # such error, a connection ended within 1 ms of its request's start,
    # and every other request answered 200.
    cat "$T/err.$new" >&2
    if grep -q 'event=listening.* handover=\(bpf\|sysctl\)' "$T/$old.log"; then
        nerr=$(field "$out" errors)
        late=$(grep -c -v -E '^fgload: error eof .* age_us=[0-9]{1,3} ' "$T/err.$new")
        check "SIGTERM $old under load: no error but at most one connection ended at the close ($nerr errors, $late of another kind)" \
            bash -c "[ $nerr -le 1 ] && [ $late = 0 ]"
        check "SIGTERM $old under load: every other request answered 200" \
            bash -c "[ $(($(field "$out" sent) - nerr)) = $(field "$out" s200) ]"
    else
        echo "skip SIGTERM $old under load: no request lost (the listener's queue is reset at its close: $(grep -o 'event=handover_off.*' "$T/$old.log"))"
    fi
    check "SIGTERM $old under load: both served" \
        bash -c "echo '$out' | grep -q 'served_by=.*$old:' && echo '$out' | grep -q 'served_by=.*$new:'"
    for _ in $(seq 1 300); do kill -0 "$opid" 2>/dev/null || break; sleep 0.01; done
    wait "$opid"
    expect_eq "$old exits 0" "$?" 0
    old=$new
done
eval "kill -TERM \$FGPID_$old"

# A keep-alive connection answered once, whose next request has begun
# (its head and half its body) when SIGTERM comes, and ends after the
# drain grace: answered, not dropped with the process's exit.
cat >"$T/d.ini" <<INI
[server]
id = d
drain_grace = 300ms
[limit big]
key = query:k
rate = 1000000/s
INI
start_fg d -c "$T/d.ini" --listen 127.0.0.1:0 || { bad "server d starts"; finish; }
ans=$(python3 - "$FGPID_d" "$FGPORT_d" <<'PY'
import os, signal, socket, sys, time
pid, port = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
first = s.recv(4096).split(b"\r\n")[0].decode()
s.sendall(b"POST /v1/check?limit=big&key=ka HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: 10\r\n\r\n12345")
time.sleep(0.1)
os.kill(pid, signal.SIGTERM)
time.sleep(0.6)
try:
    s.sendall(b"67890")
    second = s.recv(4096).split(b"\r\n")[0].decode() or "eof"
except OSError as e:
    second = "error " + str(e)
print(first + " / " + second)
PY
)
expect_eq "a request begun on a kept-alive connection at SIGTERM, ended after the grace: answered" \
    "$ans" "HTTP/1.1 200 OK / HTTP/1.1 200 OK"
wait "$FGPID_d"
expect_eq "d exits 0" "$?" 0
finish
