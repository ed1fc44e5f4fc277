#!/usr/bin/env bash
# Security properties of floodgate serve through real processes
# (docs/security.md):
#   1. X-Forwarded-For: the client is the rightmost address that is not a
#      trusted proxy; a peer that is not trusted is the client itself,
#      whatever it writes; an ambiguous address is refused. Which address
#      was counted is read back with the admin route /v1/peek.
#   2. Secrets: a Redis password (in [store] url and --store) and the admin
#      token appear in no log line, no metric, no answer and no error, at
#      start, at run time, at a reload and from floodgate check.
. "$(dirname "$0")/../serve/lib.sh"

TOKEN="sec-tok-$$-Hq2mV"
printf '%s\n' "$TOKEN" >"$T/token"
chmod 600 "$T/token"
AUTH="Authorization: Bearer $TOKEN"
PW="pw-$$-Xy7sec"

# ---- 1. X-Forwarded-For ------------------------------------------------
cat >"$T/x.ini" <<INI
[server]
trusted_proxies = 127.0.0.1, 10.0.0.0/8
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
[limit ip]
key = ip
rate = 5/h
algorithm = fixed_window
[limit ip64]
key = ip/64
rate = 5/h
algorithm = fixed_window
INI
start_fg x -c "$T/x.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
X=http://127.0.0.1:$FGPORT_x
A=http://127.0.0.1:$(grep -o 'event=admin_listening addr=[^ ]*' "$T/x.log" | sed 's/.*://')
# used IP: how many units the limit counted for IP.
used() {
    http GET "$A/v1/peek?limit=ip&key=$1" -H "$AUTH" >/dev/null
    echo $((5 - $(sed 's/.*"remaining":\([0-9]*\).*/\1/' "$T/b")))
}
check_ip() { # NAME WANT-IP CURL-ARGS...
    local name=$1 want=$2
    shift 2
    local before
    before=$(used "$want")
    http GET "$X/v1/auth?limit=ip" "$@" >/dev/null
    expect_eq "$name" "$(used "$want")" $((before + 1))
}
# Through trusted proxies (127.0.0.1, then 10.x): the rightmost untrusted
# hop; what the client wrote on the left is not believed.
check_ip "rightmost untrusted of a chain" 198.51.100.7 \
    -H 'X-Forwarded-For: 6.6.6.6, 198.51.100.7, 10.1.2.3'
expect_eq "the client's own claim not counted" "$(used 6.6.6.6)" 0
expect_eq "the trusted hop not counted" "$(used 10.1.2.3)" 0
check_ip "a one-address header" 203.0.113.9 -H 'X-Forwarded-For: 203.0.113.9'
check_ip "two header lines read as one chain" 198.51.100.77 \
    -H 'X-Forwarded-For: 198.51.100.1' -H 'X-Forwarded-For: 198.51.100.77, 10.0.0.9'
check_ip "every hop trusted: the leftmost" 10.0.0.1 \
    -H 'X-Forwarded-For: 10.0.0.1, 10.0.0.2'
check_ip "an address with a port" 198.51.100.8 -H 'X-Forwarded-For: 198.51.100.8:5555'
check_ip "IPv6, bracketed with a port" 2001:db8::1 -H 'X-Forwarded-For: [2001:db8::1]:443'
# Where the client is, what is not an address is refused: read as the
# proxy's, every such client would share one key.
for bad_hop in 'nonsense' 'unknown' 'fe80::1%eth0' '[2001:db8::1%25eth0]:443'; do
    expect_eq "a hop that is not an address, where the client is, refused ($bad_hop)" \
        "$(http GET "$X/v1/auth?limit=ip" -H "X-Forwarded-For: 198.51.100.9, $bad_hop")" 400
done
case "$(cat "$T/b")" in *"not an IP address"*) ok "it says why" ;; *) bad "the reason: $(cat "$T/b")" ;; esac
check_ip "garbage left of the client: not read" 198.51.100.9 \
    -H 'X-Forwarded-For: nonsense, 198.51.100.9'
check_ip "empty list elements are no hops" 198.51.100.10 \
    -H 'X-Forwarded-For: 198.51.100.10, , 10.0.0.3,'
check_ip "no header: the peer" 127.0.0.1
# A peer that is not trusted (127.0.0.2: loopback, but not in the list) is
# the client, whatever it writes.
check_ip "untrusted peer: its own address" 127.0.0.2 --interface 127.0.0.2 \
    -H 'X-Forwarded-For: 198.51.100.50'
expect_eq "untrusted peer's claim not counted" "$(used 198.51.100.50)" 0
# An IPv4 form that parsers read differently is refused, not guessed.
expect_eq "ambiguous address refused" \
    "$(http GET "$X/v1/auth?limit=ip" -H 'X-Forwarded-For: 8.8.8.8, 010.0.0.1')" 400
# Left of the client nothing is read: no refusal there.
check_ip "ambiguous left of the client: not read" 8.8.8.8 \
    -H 'X-Forwarded-For: 010.0.0.1, 8.8.8.8'
# key = ip/64: six addresses of one IPv6 /64 are one client (5 allowed);
# another /64 and an IPv4 address are others.
codes=""
for i in 1 2 3 4 5 6; do
    codes="$codes$(http GET "$X/v1/auth?limit=ip64" -H "X-Forwarded-For: 2001:db8:1:2::$i:$i") "
done
expect_eq "ip/64: six addresses of one /64 share its 5" "$codes" "200 200 200 200 200 403 "
expect_eq "ip/64: another /64 is another client" \
    "$(http GET "$X/v1/auth?limit=ip64" -H 'X-Forwarded-For: 2001:db8:1:3::1')" 200
expect_eq "ip/64: an IPv4 client is its address" \
    "$(http GET "$X/v1/auth?limit=ip64" -H 'X-Forwarded-For: 203.0.113.10')" 200
expect_eq "ip/64: the block is the key" \
    "$(http GET "$A/v1/peek?limit=ip64&key=2001:db8:1:2::/64" -H "$AUTH")" 200
check "ip/64: the block's count is 5" grep -q '"remaining":0' "$T/b"

# ---- 2. Secrets -------------------------------------------------------
mkdir -p "$T/redis"
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$T/redis" --logfile "$T/redis/log" --requirepass "$PW" &
PIDS="$PIDS $!"
for _ in $(seq 1 100); do
    redis-cli -p "$RP" -a "$PW" --no-auth-warning ping 2>/dev/null | grep -q PONG && break
    sleep 0.02
done
cat >"$T/p.ini" <<INI
[server]
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
[store]
url = redis://:$PW@127.0.0.1:$RP
timeout = 300ms
[limit closed_l]
key = query:u
rate = 2/h
on_failure = closed
INI
start_fg p -c "$T/p.ini" --listen 127.0.0.1:0 || { bad "server with a password starts"; finish; }
P=http://127.0.0.1:$FGPORT_p
PA=http://127.0.0.1:$(grep -o 'event=admin_listening addr=[^ ]*' "$T/p.log" | sed 's/.*://')
ANS="$T/answers"
: >"$ANS"
keep() { cat "$T/h" "$T/b" >>"$ANS"; }
for i in 1 2 3; do http POST "$P/v1/check?limit=closed_l&key=u" >/dev/null; keep; done
check "the store URL is logged without its password" grep -q "event=store url=redis://\*\*\*@127.0.0.1:$RP" "$T/p.log"
http GET "$PA/v1/peek?limit=closed_l&key=u" -H "$AUTH" >/dev/null
keep
http GET "$PA/v1/peek?limit=closed_l&key=u" -H "Authorization: Bearer nope-$TOKEN" >/dev/null
keep
# A reload with a wrong password (taken, as an unreachable store is: the
# failure policy answers until it is fixed), saying why.
sed -i "s|redis://:$PW@|redis://:wrong-$PW@|" "$T/p.ini"
kill -HUP "$FGPID_p"
for _ in $(seq 1 200); do grep -q 'event=reload' "$T/p.log" && break; sleep 0.01; done
check "the reload says why" grep -q 'event=store_unreachable reason=.*authentication failed' "$T/p.log"
# Redis gone: 503s from the policy and from the admin route, errors
# logged.
redis-cli -p "$RP" -a "$PW" --no-auth-warning shutdown nosave >/dev/null 2>&1
for _ in $(seq 1 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 || break; sleep 0.02; done
expect_eq "fail closed with Redis gone" "$(http POST "$P/v1/check?limit=closed_l&key=v")" 503
keep
expect_eq "admin peek with Redis gone" "$(http GET "$PA/v1/peek?limit=closed_l&key=v" -H "$AUTH")" 503
keep
curl -s -m 5 "$P/metrics" >>"$ANS"
# A bad start: the error names the problem, not the password.
out=$(timeout 5 "$FLOODGATE" serve --store "redis://user:$PW@127.0.0.1:$RP" \
    --listen 127.0.0.1:0 2>&1 </dev/null &
    sleep 1; kill $! 2>/dev/null)
printf '%s\n' "$out" >>"$ANS"
out=$("$FLOODGATE" check --store "redis://:$PW@127.0.0.1:$RP" --limit 1/s --key k 2>&1)
printf '%s\n' "$out" >>"$ANS"
case "$out" in *"cannot connect"*) ok "floodgate check says why" ;; *) bad "floodgate check: $out" ;; esac
out=$("$FLOODGATE" check --store "redis://:$PW@127.0.0.1:$RP?lazy=1" --limit 1/s --key k --peek 2>&1)
printf '%s\n' "$out" >>"$ANS"
case "$out" in *"peek: backend unavailable"*) ok "floodgate check --peek says why" ;; *) bad "check --peek: $out" ;; esac
# Every node's password of a shards URL, and a password that holds '@'
# (the last '@' ends it), are kept out of the log too.
DEAD=$(free_port)
timeout 5 "$FLOODGATE" serve --store "shards=redis://:$PW@127.0.0.1:$RP,redis://u:a@$PW@127.0.0.1:$DEAD" \
    --listen 127.0.0.1:0 >"$T/shards.log" 2>&1 </dev/null &
spid=$!
for _ in $(seq 1 100); do grep -q 'event=listening' "$T/shards.log" && break; sleep 0.02; done
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
check "shards: every node's URL logged without its password" grep -q \
    "event=store url=\"shards=redis://\*\*\*@127.0.0.1:$RP,redis://\*\*\*@127.0.0.1:$DEAD\"" "$T/shards.log"
# A password holding "://", and a password parameter holding ',' (the URL
# is one URL: the ',' is the password's); each server starts.
i=0
# A unix:// URL has no user info: an '@' in its password parameter ends
# nothing. A '?' in a password does not begin the query.
for u in "redis://u:$PW://x@127.0.0.1:$DEAD" "redis://127.0.0.1:$DEAD?password=x,$PW&prefix=p" \
    "sentinel://127.0.0.1:$DEAD/m?sentinel_password=x,$PW" \
    "unix://$T/none.sock?password=a@$PW&db=0" "redis://u:$PW?prefix=x@127.0.0.1:$DEAD"; do
    i=$((i + 1))
    timeout 5 "$FLOODGATE" serve --store "$u" --listen 127.0.0.1:0 >"$T/url$i.log" 2>&1 </dev/null &
    spid=$!
    for _ in $(seq 1 100); do grep -q 'event=listening' "$T/url$i.log" && break; sleep 0.02; done
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    check "store URL $i logged, without its password" grep -q 'event=store url=.*\*\*\*' "$T/url$i.log"
done
# Nowhere: not in a log, a metric, an answer or an error.
for f in "$T"/*.log "$ANS"; do
    name=$(basename "$f")
    if grep -q -e "$PW" -e "$TOKEN" "$f"; then
        bad "secret in $name: $(grep -e "$PW" -e "$TOKEN" "$f" | head -2)"
    else
        ok "no secret in $name"
    fi
done
check "the answers were collected" test "$(wc -l <"$ANS")" -gt 20

finish
