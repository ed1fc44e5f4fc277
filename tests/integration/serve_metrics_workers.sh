#!/usr/bin/env bash
# /metrics, answered by any worker, reads every worker's counters: they
# must exist before the first worker runs and outlive the last one.
#   - start: 32 workers while three clients ask /metrics from the moment
#     the port listens; 5 starts, each stopped by SIGTERM, exit 0 (the
#     first worker served /metrics while the others' counters were not
#     made yet: a SIGSEGV at start in 4 of 5 starts);
#   - drain: 4 workers, 8 connections opened before SIGTERM ask /metrics
#     1.5 s into the drain: every counter is what was counted (a worker
#     still draining read the counters of workers already joined and
#     freed: heap addresses as counts).
. "$(dirname "$0")/../serve/lib.sh"

# ---- Start -------------------------------------------------------------
cat >"$T/start.ini" <<INI
[server]
workers = 32
blocked_cache = 65536
drain_grace = 0ms
[limit a]
key = query:k
rate = 10/s
INI
crashed=0 started=0
for run in 1 2 3 4 5; do
    P=$(free_port)
    for c in 1 2 3; do
        (for _ in $(seq 1 400); do
            curl -s -m 1 -o /dev/null "http://127.0.0.1:$P/metrics" 2>/dev/null
        done) >/dev/null 2>&1 &
        eval "C$c=\$!"
    done
    "$FLOODGATE" serve -c "$T/start.ini" --listen "127.0.0.1:$P" 2>"$T/start$run.log" &
    pid=$!
    for _ in $(seq 1 300); do
        grep -q 'event=listening' "$T/start$run.log" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    sleep 0.3
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    kill "$C1" "$C2" "$C3" 2>/dev/null
    wait "$C1" "$C2" "$C3" 2>/dev/null
    [ $rc = 0 ] && started=$((started + 1)) || { crashed=$((crashed + 1)); echo "start $run: exit $rc"; }
done
expect_eq "5 starts of 32 workers under /metrics requests, each exit 0" "$started of 5" "5 of 5"

# ---- Drain -------------------------------------------------------------
cat >"$T/drain.ini" <<INI
[server]
workers = 4
drain_grace = 200ms
drain_timeout = 4s
[limit a]
key = query:k
rate = 1000/s
INI
start_fg d -c "$T/drain.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
for _ in $(seq 1 20); do curl -s -o /dev/null -X POST "http://127.0.0.1:$FGPORT_d/v1/check?limit=a&key=x"; done
# Eight connections (the port spreads them over the workers, so some
# worker other than the first drains one), each asking /metrics 1.5 s
# into the drain.
python3 - "$FGPORT_d" "$FGPID_d" "$T/drain" 2>"$T/drain.err" <<'PY'
import os, signal, socket, sys, time
port, pid, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ss = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
time.sleep(0.1)
os.kill(pid, signal.SIGTERM)
time.sleep(1.5)
for i, s in enumerate(ss):
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    s.settimeout(3)
    got = b""
    while True:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        got += d
    open("%s.%d" % (out, i), "w").write(got.decode("utf-8", "replace"))
PY
check "the drain answers /metrics on each of 8 connections" \
    test "$(grep -l '^HTTP/1.1 200' "$T"/drain.[0-7] | wc -l)" = 8
wrong=""
for i in 0 1 2 3 4 5 6 7; do
    got=$(awk '/^floodgate_requests_total\{limit="a"/ { s += $2 } END { print s + 0 }' "$T/drain.$i")
    big=$(awk '/^floodgate_/ && $2 + 0 > 1000000 && $1 !~ /seconds|bytes|_start_time/' "$T/drain.$i" | head -1)
    [ "$got" = 20 ] && [ -z "$big" ] || wrong="$wrong [connection $i: $got requests of a; $big]"
done
check "every answer counts the 20 requests of limit a, and no garbage${wrong}" test -z "$wrong"
wait "$FGPID_d"
expect_eq "the drain ends, exit 0" "$?" 0
finish
