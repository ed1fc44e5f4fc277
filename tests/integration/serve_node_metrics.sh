#!/usr/bin/env bash
# The per-node metrics of floodgate serve against real redis-servers: a
# node whose name holds a quote, a backslash and a byte that is not UTF-8
# (a socket path) is a series of its own with its label escaped, the page
# valid UTF-8; each histogram's +Inf bucket is its
# _count; past the 64 node names metrics are kept for, the first node left
# without them is logged once; a node named with a line end is escaped in
# the store_error line.
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
SOCK="$T/we\"ird\\sock"$'\xff'
mkdir -p "$T/r2"
redis-server --port 0 --unixsocket "$SOCK" --save '' --appendonly no \
    --databases 80 --dir "$T/r2" --logfile "$T/r2/log" &
R2PID=$!
PIDS="$PIDS $R2PID"
for _ in $(seq 1 100); do
    redis-cli -s "$SOCK" ping 2>/dev/null | grep -q PONG && break
    sleep 0.02
done
check "redis on a socket named with a quote, a backslash and a byte 0xff" \
    sh -c "redis-cli -s '$SOCK' ping | grep -q PONG"

conf() { # conf URL
    cat >"$T/m.ini" <<INI
[server]
workers = 2
[store]
url = $1
timeout = 500ms
[limit l]
key = query:k
algorithm = fixed_window
rate = 100/day
INI
}
conf "shards=unix://$SOCK,redis://127.0.0.1:$RPORT"
start_fg m -c "$T/m.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
A="http://127.0.0.1:$FGPORT_m"
for i in $(seq 1 40); do http POST "$A/v1/check?limit=l&key=k$i" >/dev/null; done
curl -s -m 5 "$A/metrics" >"$T/metrics"
on_sock=$(redis-cli -s "$SOCK" dbsize)
on_tcp=$(redis-cli -p "$RPORT" dbsize)
esc="$T/we\\\"ird\\\\sock\\\\xff/0"
sock_calls=$(grep -F "floodgate_store_node_calls_total{node=\"$esc\"} " "$T/metrics" | awk '{ print $2 }')
tcp_calls=$(grep -F "floodgate_store_node_calls_total{node=\"127.0.0.1:$RPORT/0\"} " "$T/metrics" | awk '{ print $2 }')
check "the socket node's label is escaped, its calls its own ($sock_calls calls, $on_sock keys)" \
    test -n "$sock_calls" -a "$sock_calls" = "$on_sock"
check "the TCP node is a series of its own ($tcp_calls calls, $on_tcp keys)" \
    test -n "$tcp_calls" -a "$tcp_calls" = "$on_tcp"
check "the page is valid UTF-8" iconv -f UTF-8 -t UTF-8 -o /dev/null "$T/metrics"
check "no unescaped quote in a label value" \
    bash -c "! grep -F 'we\"ird' '$T/metrics' | grep -qvF 'we\\\"ird'"
# Every histogram: its +Inf bucket and its _count are one figure.
awk '
    /_bucket\{.*le="\+Inf"\}/ { k = $1; sub(/_bucket\{/, "{", k); sub(/,?le="\+Inf"\}/, "}", k); sub(/\{\}/, "", k); inf[k] = $2 }
    /_count/ { k = $1; sub(/_count/, "", k); cnt[k] = $2 }
    END { for (k in inf) { n++; if (cnt[k] != inf[k]) { print "mismatch " k; bad++ } }
          print n " histograms"; exit bad > 0 || n < 3 }' "$T/metrics" >"$T/hist" 2>&1
rc=$?
check "each histogram's +Inf is its _count ($(tail -1 "$T/hist"))" test $rc -eq 0

# Node names have metrics up to 64 since start: two so far. 63 reloads to
# databases 1..63 of the socket's Redis make 65; the 65th is logged.
for d in $(seq 1 63); do
    conf "unix://$SOCK?db=$d"
    reload_fg m 0
    http POST "$A/v1/check?limit=l&key=d$d" >/dev/null
done
expect_eq "the first node without metrics is logged once" \
    "$(grep -c 'event=metrics_full level=warning node=' "$T/m.log")" 1
check "it names that node (db 63) and the cap" \
    grep -qF "node=\"$T/we\\\"ird\\\\sock\\xff/63\" cap=64" "$T/m.log"
expect_eq "a check on that node is answered" "$(http POST "$A/v1/check?limit=l&key=last")" 200

# A node named with a line end (a socket path through a link so named):
# its store_error line names it escaped, and no line of the log is made
# by the name.
ln -s "$SOCK" "$T/x"$'\n'"event=store_recovered y.sock"
conf "unix://$T/x%0Aevent=store_recovered%20y.sock"
sed -i 's/^timeout = .*/timeout = 50ms/' "$T/m.ini"
reload_fg m 0.2
expect_eq "the node by the link answers" "$(http POST "$A/v1/check?limit=l&key=nl")" 200
kill -STOP "$R2PID"
for i in 1 2 3; do http POST "$A/v1/check?limit=l&key=nl$i" >/dev/null; done
kill -CONT "$R2PID"
check "store_error names the node escaped" \
    grep -qF "node=\"$T/x\\x0aevent=store_recovered y.sock/0\" detail=" "$T/m.log"
check "every log line is a line of its own (ts=...)" \
    bash -c "! grep -av '^ts=' '$T/m.log' | grep -q ."
finish
