#!/usr/bin/env bash
# examples/nginx-auth-request.conf against real nginx: nginx asks
# floodgate's GET /v1/auth, and a refused client gets 429 with Retry-After.
. "$(dirname "$0")/../serve/lib.sh"

NGINX=${NGINX:-/usr/sbin/nginx}
if [ ! -x "$NGINX" ]; then
    bad "nginx not installed at $NGINX (Debian: nginx-light)"
    finish
fi
cat >"$T/fg.ini" <<INI
[server]
id = fg-nginx
trusted_proxies = 127.0.0.1
[limit bookings]
key = header:X-User-Id
algorithm = fixed_window
rate = 3/day
INI
start_fg s -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "floodgate starts"; finish; }
# start_nginx DIR FGPORT [LIMIT [DEADPORT]]: nginx with the example config
# in $T/DIR, asking the floodgate on FGPORT (for LIMIT, bookings by
# default; with DEADPORT, a floodgate server listed before it that does
# not answer); sets NPORT and NGPID.
start_nginx() {
    local dir=$T/$1 aport up=0 limit=${3:-bookings} first=
    [ -n "${4:-}" ] && first="server 127.0.0.1:$4; "
    NPORT=$(free_port)
    aport=$(free_port)
    while [ "$aport" = "$NPORT" ]; do aport=$(free_port); done
    mkdir -p "$dir/tmp"
    sed -e "s/server 127.0.0.1:8080;/${first}server 127.0.0.1:$2;/" \
        -e "s/127.0.0.1:8000/127.0.0.1:$NPORT/" \
        -e "s/127.0.0.1:9000/127.0.0.1:$aport/" \
        -e "s/limit=bookings/limit=$limit/" \
        "$(dirname "$0")/../../examples/nginx-auth-request.conf" >"$dir/nginx.conf"
    "$NGINX" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' 2>"$dir/err" &
    NGPID=$!
    PIDS="$PIDS $NGPID"
    for _ in $(seq 1 200); do
        curl -s -o /dev/null "http://127.0.0.1:$NPORT/" 2>/dev/null && { up=1; break; }
        kill -0 "$NGPID" 2>/dev/null || break
        sleep 0.01
    done
    check "nginx starts with the example config ($1)" [ "$up" = 1 ]
    [ "$up" = 1 ] || { cat "$dir/err"; finish; }
}
start_nginx nginx "$FGPORT_s"

N=http://127.0.0.1:$NPORT
codes=""
for i in 1 2 3 4 5; do
    codes="$codes $(http POST $N/bookings -H 'X-User-Id: alice')"
    [ "$i" = 1 ] && cp "$T/b" "$T/first"
done
expect_eq "through nginx: 3 allowed, then 429" "$codes" " 200 200 200 429 429"
check "allowed request reached the app" grep -q '"booked":true' "$T/first"
ra=$(header Retry-After)
check "429 carries Retry-After from floodgate ($ra)" bash -c "[[ '$ra' =~ ^[0-9]+$ ]] && [ '$ra' -ge 1 ]"
check "429 carries RateLimit" grep -qi '^RateLimit: "bookings";r=0;t=' "$T/h"
check "429 carries RateLimit-Policy" grep -qi '^RateLimit-Policy: "bookings";q=3;w=86400' "$T/h"
expect_eq "another user is not affected" "$(http POST $N/bookings -H 'X-User-Id: bob')" 200
# floodgate counted the nginx subrequests.
curl -s "http://127.0.0.1:$FGPORT_s/metrics" >"$T/m"
check "floodgate saw the auth subrequests" \
    grep -q '^floodgate_requests_total{limit="bookings",decision="limited",source="store"} 2$' "$T/m"
expect_eq "no user header: floodgate's 400 reaches the client" "$(http POST $N/bookings)" 400
check "no user header: JSON error" grep -q '^{"error":"bad request"}$' "$T/b"
# floodgate not answering: the request goes on to the app (the example
# fails open), a stopped floodgate after proxy_read_timeout (1 s), a dead
# one at once.
kill -STOP "$FGPID_s"
t0=$(date +%s%N)
expect_eq "floodgate stopped: the request reaches the app" "$(http POST $N/bookings -H 'X-User-Id: carol')" 200
t1=$(date +%s%N)
check "floodgate stopped: the app answered" grep -q '"booked":true' "$T/b"
ms=$(((t1 - t0) / 1000000))
check "floodgate stopped: after proxy_read_timeout, 1 s ($ms ms)" \
    bash -c "[ $ms -ge 900 ] && [ $ms -lt 3000 ]"
kill -KILL "$FGPID_s"
kill -CONT "$FGPID_s" 2>/dev/null
wait "$FGPID_s" 2>/dev/null
expect_eq "floodgate down: the request reaches the app" "$(http POST $N/bookings -H 'X-User-Id: alice')" 200
check "floodgate down: the app answered" grep -q '"booked":true' "$T/b"
kill -QUIT "$NGPID" 2>/dev/null
wait "$NGPID" 2>/dev/null

# A fail-closed limit whose Redis is down: floodgate answers 503, which
# auth_request cannot pass; the example gives the client 503 with
# floodgate's Retry-After, not nginx's bare 500.
RDOWN=$(free_port)
cat >"$T/closed.ini" <<INI
[server]
id = fg-closed
trusted_proxies = 127.0.0.1
[store]
url = redis://127.0.0.1:$RDOWN
timeout = 20ms
[limit bookings]
key = header:X-User-Id
rate = 3/day
on_failure = closed
INI
start_fg c -c "$T/closed.ini" --listen 127.0.0.1:0 || { bad "floodgate (Redis down) starts"; finish; }
start_nginx nginx2 "$FGPORT_c"
N=http://127.0.0.1:$NPORT
expect_eq "Redis down, fail closed: the client gets 503" "$(http POST $N/bookings -H 'X-User-Id: alice')" 503
expect_eq "Redis down, fail closed: with floodgate's Retry-After" "$(header Retry-After)" 1
check "Redis down, fail closed: JSON error" grep -q '^{"error":"rate limiter unavailable"}$' "$T/b"
check "Redis down, fail closed: the app was not reached" bash -c "! grep -q booked '$T/b'"
expect_eq "Redis down, no user header: still 400" "$(http POST $N/bookings)" 400
kill -QUIT "$NGPID" 2>/dev/null
wait "$NGPID" 2>/dev/null
# Two floodgate servers, the first one down: nginx tries it, then the
# next, which refuses (503); $upstream_status is then "502, 503", whose
# last is floodgate's answer (read as the first, 502, the request went to
# the app).
start_nginx nginx4 "$FGPORT_c" bookings "$(free_port)"
N=http://127.0.0.1:$NPORT
expect_eq "two floodgates, the first down, the next fails closed: 503" \
    "$(http POST $N/bookings -H 'X-User-Id: alice')" 503
check "two floodgates, the first down: the app was not reached" bash -c "! grep -q booked '$T/b'"
kill -QUIT "$NGPID" 2>/dev/null
wait "$NGPID" 2>/dev/null

# A limit floodgate does not have (404) is a configuration error: 500, not
# let through.
start_nginx nginx3 "$FGPORT_c" nosuch
N=http://127.0.0.1:$NPORT
expect_eq "unknown limit: the client gets 500" "$(http POST $N/bookings -H 'X-User-Id: alice')" 500
check "unknown limit: the app was not reached" bash -c "! grep -q booked '$T/b'"
kill -QUIT "$NGPID" 2>/dev/null
wait "$NGPID" 2>/dev/null
finish
