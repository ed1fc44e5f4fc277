#!/usr/bin/env bash
# floodgate serve on the memory store: CLI, config errors, routes, headers,
# malformed requests, per-IP and per-user limits together, reload, drain.
. "$(dirname "$0")/../serve/lib.sh"

# --- CLI --------------------------------------------------------------
"$FLOODGATE" serve --help >"$T/help" 2>&1
expect_eq "--help exits 0" "$?" 0
check "--help shows the synopsis" grep -q 'floodgate serve \[-c FILE\]' "$T/help"
"$FLOODGATE" serve --bogus >/dev/null 2>&1
expect_eq "unknown option exits 2" "$?" 2
# An option given twice is refused, not the last one taken silently.
"$FLOODGATE" serve -c "$T/none.ini" --config="$T/none2.ini" 2>"$T/twice.err"
expect_eq "--config twice exits 2" "$?" 2
check "--config twice: the reason" grep -q "\-\-config given twice" "$T/twice.err"
"$FLOODGATE" serve --listen 127.0.0.1:0 --listen 127.0.0.1:1 2>"$T/twice.err"
check "--listen twice: exit 2, the reason" test $? = 2 -a -n "$(grep "\-\-listen given twice" "$T/twice.err")"
# An option where a value should be is not taken as the value.
"$FLOODGATE" serve --store --help 2>"$T/miss.err" >/dev/null
check "--store --help: exit 2, a missing value (not a store named --help)" \
    test $? = 2 -a -n "$(grep "missing value after '\-\-store'" "$T/miss.err")"
# The floodgate command itself: help of an unknown command and an
# argument after --version are usage errors.
"$FLOODGATE" help nope >/dev/null 2>"$T/help.err"
check "floodgate help nope: exit 2, the reason" test $? = 2 -a -n "$(grep "unknown command 'nope'" "$T/help.err")"
"$FLOODGATE" --version x >/dev/null 2>&1
expect_eq "floodgate --version x exits 2" "$?" 2
"$FLOODGATE" help serve | grep -q '^usage: floodgate serve'
expect_eq "floodgate help serve is serve's help" "$?" 0
# floodgate check: --reset --json is JSON; --durable replica needs Redis;
# a mistyped single-dash option is named as typed.
expect_eq "check --reset --json" "$("$FLOODGATE" check --limit 1/s --key a --reset --json)" '{"reset":true}'
"$FLOODGATE" check --limit 1/s --key a --durable replica 2>"$T/dur.err"
check "check --durable replica on memory: exit 2, the reason" \
    test $? = 2 -a -n "$(grep 'needs a Redis store' "$T/dur.err")"
# serve: durable = replica on the memory store is refused at its line;
# the same file with --store naming Redis starts (--store replaces it).
printf '[limit d]\nkey = query:k\nrate = 5/s\ndurable = replica\n' >"$T/dur.ini"
"$FLOODGATE" serve -c "$T/dur.ini" --listen 127.0.0.1:0 2>"$T/dur2.err"
check "serve durable = replica on memory: exit 2, at its line" \
    test $? = 2 -a -n "$(grep 'dur.ini:4: \[limit d\]: durable = replica needs a Redis store' "$T/dur2.err")"
start_fg dur -c "$T/dur.ini" --store "redis://127.0.0.1:$(free_port)" --listen 127.0.0.1:0
check "serve durable = replica with --store redis://: starts" test $? = 0
kill "$FGPID_dur" 2>/dev/null
# Store errors that go on are said each second by a store_error line with
# its reason, not by the sweep's summary (a sweep every 200 ms here:
# request_timeout / 5); store_error_suppressed only once they stop.
printf '[server]\nworkers = 1\nrequest_timeout = 1s\n[limit e]\nkey = query:k\nrate = 5/min\non_failure = open\n' >"$T/errs.ini"
start_fg errs -c "$T/errs.ini" --store "redis://127.0.0.1:$(free_port)" --listen 127.0.0.1:0
for i in $(seq 1 70); do
    curl -s -m 2 -o /dev/null -X POST "http://127.0.0.1:$FGPORT_errs/v1/check?limit=e&key=k$i"
    sleep 0.05
done
kill "$FGPID_errs"; wait "$FGPID_errs" 2>/dev/null
nerr=$(grep -c 'event=store_error .*error="backend unavailable"' "$T/errs.log")
nsup=$(grep -c 'event=store_error_suppressed' "$T/errs.log")
check "store errors going on: a store_error line with the reason each second ($nerr lines, $nsup summaries)" \
    test "$nerr" -ge 3 -a "$nsup" -le 1
# naive_get_set (racy on purpose) starts, with a warning naming the limit.
printf '[limit race]\nkey = query:k\nrate = 5/s\nalgorithm = naive_get_set\n' >"$T/naive.ini"
start_fg naive -c "$T/naive.ini" --listen 127.0.0.1:0
check "naive_get_set: a warning at start" \
    grep -q 'event=naive_get_set level=warning limit=race msg=".*never for protection"' "$T/naive.log"
kill "$FGPID_naive" 2>/dev/null
# Usage errors name what is wrong, and the value given.
"$FLOODGATE" serve extra 2>"$T/extra.err"
check "serve extra: exit 2, an unexpected argument" \
    test $? = 2 -a -n "$(grep "unexpected argument 'extra'" "$T/extra.err")"
"$FLOODGATE" check --key a 2>"$T/req.err"
check "check without --limit: exit 2, names --limit alone" \
    test $? = 2 -a -n "$(grep 'floodgate check: --limit is required' "$T/req.err")"
"$FLOODGATE" check --limit 1/s --key a --name 'bad name' 2>"$T/name.err"
check "check --name 'bad name': exit 2, names --name and the value" \
    test $? = 2 -a -n "$(grep "\--name 'bad name': a limit name is 1 to 63" "$T/name.err")"
for o in "--clock x" "--durable x" "--on-failure x"; do
    "$FLOODGATE" check --limit 1/s --key a $o 2>"$T/val.err"
    check "check $o: exit 2, says the value" test $? = 2 -a -n "$(grep -- "${o% *} must be .*, not 'x'" "$T/val.err")"
done
"$FLOODGATE" check --limit 1/s --key a --json=1 2>"$T/eq.err"
check "check --json=1: exit 2, takes no value" test $? = 2 -a -n "$(grep -- '--json takes no value' "$T/eq.err")"
"$FLOODGATE" check --limit 1/s --key "$(head -c 1025 /dev/zero | tr '\0' k)" 2>"$T/klong.err"
check "check with a 1025-byte key: exit 2, its length and the most" \
    test $? = 2 -a -n "$(grep 'key too long: 1025 bytes, at most 1024' "$T/klong.err")"
# Output that cannot be written: said, exit 2 (not a signal).
"$FLOODGATE" check --limit 1/s --key a >/dev/full 2>"$T/full.err"
check "check >/dev/full: exit 2, the reason" test $? = 2 -a -n "$(grep 'writing the output: No space left' "$T/full.err")"
# A SIGINT the caller ignores (a background job's) stays ignored; SIGTERM
# still stops the burst, which ends of it.
(trap '' INT; exec "$FLOODGATE" check --limit 1000000000/s --key ig --count 100000000 >/dev/null) &
cpid=$!
sleep 0.2
kill -INT $cpid
sleep 0.3
kill -0 $cpid 2>/dev/null
alive=$?
kill -TERM $cpid
wait $cpid
check "check: an ignored SIGINT stays ignored, SIGTERM stops it (alive $alive, exit $?)" test $alive = 0 -a $? = 143
"$FLOODGATE" check --limit 1/s --key a -key 2>"$T/dash.err"
check "check -key: exit 2, names -k" test $? = 2 -a -n "$(grep "unknown option '-k'" "$T/dash.err")"

# --- a bad file is refused at start with file:line: reason -------------
printf '[server]\nid = a\nworkers = lots\n' >"$T/bad.ini"
"$FLOODGATE" serve -c "$T/bad.ini" --listen 127.0.0.1:0 2>"$T/bad.err"
expect_eq "bad config exits 2" "$?" 2
check "bad config names file:line" grep -q "$T/bad.ini:3: workers" "$T/bad.err"
printf '[limit x]\nrate = 5/s\nkey = ip\nmode = sync:2ms\n' >"$T/bad2.ini"
"$FLOODGATE" serve -c "$T/bad2.ini" --listen 127.0.0.1:0 2>"$T/bad2.err"
check "mode sync:2ms refused at its line, with the range" grep -q "bad2.ini:4: .*10ms to 10s" "$T/bad2.err"
# A port beyond 65535 is refused, not wrapped onto another port.
timeout 5 "$FLOODGATE" serve --listen 127.0.0.1:99999 2>"$T/port.err"
expect_eq "--listen port 99999 exits 2" "$?" 2
check "--listen port 99999: the reason" grep -q "listen 127.0.0.1:99999: expected HOST:PORT, the port 0..65535" "$T/port.err"
# A listen address is an IP literal, refused at its line (a name would be
# looked up; 999.1.1.1 is no address), and so is --listen.
printf '[server]\nid = a\nlisten = 999.1.1.1:80\n' >"$T/name.ini"
timeout 5 "$FLOODGATE" serve -c "$T/name.ini" 2>"$T/name.err"
expect_eq "listen = 999.1.1.1:80 exits 2" "$?" 2
check "listen = 999.1.1.1:80 refused at its line" grep -q \
    "name.ini:3: listen = 999.1.1.1:80: the host must be an IP address" "$T/name.err"
timeout 5 "$FLOODGATE" serve --listen 999.1.1.1:80 2>"$T/name2.err"
expect_eq "--listen 999.1.1.1:80 exits 2" "$?" 2
check "--listen 999.1.1.1:80: the reason" grep -q \
    "\-\-listen 999.1.1.1:80: the host must be an IP address" "$T/name2.err"
# Errors of a section at its header, whether or not a key follows.
conf_err() { # conf_err NAME TEXT WANT: TEXT refused at start with WANT
    printf "$2" >"$T/c.ini"
    timeout 5 "$FLOODGATE" serve -c "$T/c.ini" --listen 127.0.0.1:0 2>"$T/c.err"
    local rc=$?
    if [ "$rc" = 2 ] && grep -q -- "c.ini:$3" "$T/c.err"; then ok "$1"; else bad "$1: exit $rc, $(cat "$T/c.err")"; fi
}
conf_err "a header without ']' at its line" '[server]\nid = a\n[limit x\nrate = 1/s\nkey = ip\n' "3: section header without ']'"
conf_err "[limits a] at its header" '[server]\nid = a\n[limits a]\nrate = 1/s\nkey = ip\n' "3: unknown section \[limits a\]"
conf_err "[limit a:b] at its header" '[limit a:b]\n\nrate = 1/s\nkey = ip\n' "1: limit name must be"
conf_err "[limit] at its header, no key below" '[server]\nid = a\n[limit]\n' "3: \[limit\] without a name"
conf_err "trusted_proxies with host bits set" '[server]\ntrusted_proxies = 10.0.0.1/8\n' "2: trusted_proxies: '10.0.0.1/8': host bits set; did you mean 10.0.0.0/8?"
conf_err "key = cookie:a: the kinds, the value once" '[limit a]\nkey = cookie:a\nrate = 1/s\n' "2: key must be header:NAME, query:NAME, ip or ip/N, not 'cookie:a'$"
conf_err "key = header: names the missing name" '[limit a]\nkey = header:\nrate = 1/s\n' "2: key = header: needs a name after the colon"
conf_err "a Redis URL with its db twice" '[store]\nurl = redis://127.0.0.1:1/1?db=2\n' "2: url: redis url: db given twice"
# A folder is no configuration.
timeout 5 "$FLOODGATE" serve -c "$T" --listen 127.0.0.1:0 2>"$T/dir.err"
expect_eq "-c a folder exits 2" "$?" 2
check "-c a folder: the reason" grep -q "$T: a folder, not a file" "$T/dir.err"

# Every error answer of ours (4xx and 5xx other than a refusal, 429 or 403,
# whose body is the decision) is checked as it comes: one line, a JSON
# object with an "error" string. Recorded in $T/errors ("ok"/"bad" per
# answer), checked further down.
eval "lib_$(declare -f http)"
http() {
    local c
    c=$(lib_http "$@")
    case $c in
    429 | 403) ;;
    4?? | 5??)
        if [ "$(wc -l <"$T/b")" -eq 1 ] && [ "$(tr -d '\n' <"$T/b" | wc -c)" -eq "$(($(wc -c <"$T/b") - 1))" ] &&
            grep -q '^{"error":"\([^"\\]\|\\.\)*"}$' "$T/b"; then
            echo "ok $c $2" >>"$T/errors"
        else
            echo "bad $c $2: $(head -c 200 "$T/b")" >>"$T/errors"
        fi ;;
    esac
    echo "$c"
}
# Retry-After is the refusal's retry_after_ms in whole seconds, rounded up
# (at least 1).
retry_after_ok() {
    local ra ms want
    ra=$(header Retry-After)
    ms=$(grep -o '"retry_after_ms":[0-9]*' "$T/b" | cut -d: -f2)
    [ -n "$ms" ] || { echo "no retry_after_ms in the body"; return 1; }
    want=$(( (ms + 999) / 1000 )); [ "$want" -ge 1 ] || want=1
    [ "$ra" = "$want" ] || { echo "Retry-After '$ra', retry_after_ms $ms: want $want"; return 1; }
}

# --- the server -------------------------------------------------------
cat >"$T/fg.ini" <<INI
[server]
workers = 2
id = basic-1
demo_api = on
demo_limits = per_ip, bookings
trusted_proxies = 127.0.0.1
request_timeout = 1s
max_header_bytes = 8192
[store]
url = memory
[limit per_ip]
key = ip
algorithm = fixed_window
rate = 6/day
[limit bookings]
key = header:X-User-Id
algorithm = fixed_window
rate = 5/day
[limit otp]
key = query:user
algorithm = token_bucket
rate = 3/min
on_failure = closed
INI
start_fg s -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
P=$FGPORT_s
B=http://127.0.0.1:$P
check "start says limits are per process" grep -q 'per process' "$T/s.log"

# Demo API: 5 allowed for one user, then 429 with every header.
codes=""
for i in 1 2 3 4 5 6; do
    codes="$codes $(http POST $B/bookings -H 'X-User-Id: alice' -H 'X-Forwarded-For: 198.51.100.1')"
done
expect_eq "bookings: 5 allowed then 429" "$codes" " 200 200 200 200 200 429"
check "429 Retry-After = ceil(retry_after_ms / 1000) ($(header Retry-After))" retry_after_ok
expect_eq "429 RateLimit-Policy" "$(header RateLimit-Policy)" '"per_ip";q=6;w=86400, "bookings";q=5;w=86400'
check "429 RateLimit has r=0 for bookings" grep -qi '^RateLimit: .*"bookings";r=0;t=[0-9]' "$T/h"
expect_eq "X-Served-By" "$(header X-Served-By)" basic-1
check "429 body" grep -q '"booked":false,"allowed":false,"limit":5,"remaining":0,"reset_ms":[0-9]*,"retry_after_ms":[1-9][0-9]*,"source":"store"' "$T/b"

# Per-IP and per-user together: a refused request consumes nothing
# anywhere, so alice's refused 6th booking was refunded at per_ip: the IP
# has used 5 of 6. bob from that IP gets one, then per_ip refuses him
# (bookings is not asked); from another IP he has the 4 left of his 5.
expect_eq "the refused request was refunded at per_ip" \
    "$(http POST $B/bookings -H 'X-User-Id: bob' -H 'X-Forwarded-For: 198.51.100.1')" 200
expect_eq "per-IP limit refuses another user from the same IP" \
    "$(http POST $B/bookings -H 'X-User-Id: bob' -H 'X-Forwarded-For: 198.51.100.1')" 429
check "the refusal names per_ip" grep -q '"name":"per_ip"' "$T/b"
codes=""
for i in 1 2 3 4 5 6; do
    codes="$codes $(http POST $B/bookings -H 'X-User-Id: bob' -H 'X-Forwarded-For: 198.51.100.2')"
done
expect_eq "a refused per-IP check consumed nothing of bob's quota" "$codes" " 200 200 200 200 429 429"

# X-Forwarded-For is believed only from trusted peers: a spoofed header
# from 127.0.0.1 with an untrusted hop on the right is that hop.
expect_eq "rightmost untrusted XFF hop is the client" \
    "$(http POST $B/bookings -H 'X-User-Id: carol' -H 'X-Forwarded-For: 198.51.100.2, 203.0.113.5')" 200

# A proxy that adds its own X-Forwarded-For line (HAProxy does) is read
# too: the client's forged first line does not decide.
codes=""
for i in 1 2 3 4 5 6 7; do
    codes="$codes $(http POST $B/bookings -H "X-User-Id: f$i" -H 'X-Forwarded-For: 198.51.100.1' -H 'X-Forwarded-For: 198.51.100.77')"
done
expect_eq "the last X-Forwarded-For line counts (6/day per IP)" "$codes" " 200 200 200 200 200 200 429"

# /v1/check
expect_eq "check allowed" "$(http POST "$B/v1/check?limit=otp&key=u1")" 200
check "check body" grep -q '"allowed":true,"limit":3,"remaining":2' "$T/b"
expect_eq "check cost=2" "$(http POST "$B/v1/check?limit=otp&key=u1&cost=2")" 200
expect_eq "check over the limit" "$(http POST "$B/v1/check?limit=otp&key=u1")" 429
expect_eq "unknown limit is 404" "$(http POST "$B/v1/check?limit=nope&key=u1")" 404
check "404 reason" grep -q "unknown limit 'nope'" "$T/b"
expect_eq "unknown limit of bytes beyond ASCII is 404" "$(http POST "$B/v1/check?limit=n%FFx%C3%A9&key=u1")" 404
check "404 reason: printable ASCII only, valid JSON text" grep -q "unknown limit 'n?x??'" "$T/b"
expect_eq "missing key is 400" "$(http POST "$B/v1/check?limit=otp")" 400
check "missing key reason" grep -q "missing key" "$T/b"
expect_eq "missing limit is 400" "$(http POST "$B/v1/check?key=a")" 400
for c in abc 0 -1 1.5 99999999999999999999 ''; do
    expect_eq "bad cost '$c' is 400" "$(http POST "$B/v1/check?limit=otp&key=u2&cost=$c")" 400
done
expect_eq "cost above the limit is 400" "$(http POST "$B/v1/check?limit=otp&key=u2&cost=4")" 400
expect_eq "CRLF in key is 400" "$(http POST "$B/v1/check?limit=otp&key=a%0D%0AX-Evil:%201")" 400
check "CRLF reason" grep -q "control characters" "$T/b"
long=$(head -c 300 /dev/zero | tr '\0' k)
expect_eq "key over max_key_bytes is 400" "$(http POST "$B/v1/check?limit=otp&key=$long")" 400
check "key over max_key_bytes: the reason gives the most ($(cat "$T/b"))" \
    grep -q '"key too long: at most 256 bytes (max_key_bytes)"' "$T/b"
expect_eq "bad %-encoding is 400" "$(http POST "$B/v1/check?limit=otp&key=%zz")" 400
expect_eq "GET /v1/check is 405" "$(http GET "$B/v1/check?limit=otp&key=a")" 405
expect_eq "unknown route is 404" "$(http GET "$B/nowhere")" 404
expect_eq "bookings without the user header is 400" "$(http POST "$B/bookings")" 400
check "missing header reason" grep -q "missing header X-User-Id" "$T/b"
check "every error body so far ($(wc -l <"$T/errors")) is one line of JSON" \
    bash -c "[ \$(grep -c '^ok ' '$T/errors') -ge 16 ] && ! grep '^bad ' '$T/errors'"
# auth: 200, then 403 (nginx turns it into 429) with Retry-After.
expect_eq "auth allowed" "$(http GET "$B/v1/auth?limit=otp&user=z")" 200
http GET "$B/v1/auth?limit=otp&user=z&cost=3" >/dev/null
http GET "$B/v1/auth?limit=otp&user=z" >/dev/null
expect_eq "auth refused is 403" "$(http GET "$B/v1/auth?limit=otp&user=z")" 403
check "auth refusal Retry-After = ceil(retry_after_ms / 1000) ($(header Retry-After))" retry_after_ok

# A 1 MB header is refused, and the server lives on.
{ printf 'X-Big: '; head -c 1048576 /dev/zero | tr '\0' a; printf '\n'; } >"$T/bigh"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H @"$T/bigh" -X POST "$B/v1/check?limit=otp&key=big")
# The server answers 431 and closes; with 1 MB still unsent the client may
# see the reset instead of the answer.
check "1 MB header refused (got $code)" bash -c "[ '$code' = 431 ] || [ '$code' = 000 ]"
{ printf 'X-Big: '; head -c 16384 /dev/zero | tr '\0' a; printf '\n'; } >"$T/bigh"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H @"$T/bigh" -X POST "$B/v1/check?limit=otp&key=big")
check "16 KB header (over max_header_bytes) is 431 (got $code)" [ "$code" = 431 ]
expect_eq "server alive after 1 MB header" "$(http GET $B/healthz)" 200

# A slow client holds neither a worker nor its connection for long.
exec 3<>/dev/tcp/127.0.0.1/$P
printf 'POST /v1/check?limit=otp&key=slow HTTP/1.1\r\nHost: x\r\n' >&3
t0=$(date +%s%N)
expect_eq "others are served while a client stalls" "$(http GET $B/healthz)" 200
t1=$(date +%s%N)
check "... at once ($(( (t1 - t0) / 1000000 )) ms)" [ $(( (t1 - t0) / 1000000 )) -lt 500 ]
timeout 4 cat <&3 >/dev/null
t2=$(date +%s%N)
exec 3<&-
check "stalled connection closed after request_timeout (1 s): $(( (t2 - t0) / 1000000 )) ms" \
    [ $(( (t2 - t0) / 1000000 )) -lt 3000 ]

# A client dripping its headers a line at a time never goes idle, but must
# still deliver the whole request within request_timeout (1 s).
exec 3<>/dev/tcp/127.0.0.1/$P
t0=$(date +%s%N)
( trap '' PIPE
  printf 'POST /v1/check?limit=otp&key=drip HTTP/1.1\r\n' >&3
  for i in $(seq 1 20); do printf 'X-Drip-%d: x\r\n' "$i" >&3 2>/dev/null || exit 0; sleep 0.2; done
) &
DRIP=$!
timeout 5 cat <&3 >/dev/null
t1=$(date +%s%N)
kill "$DRIP" 2>/dev/null; wait "$DRIP" 2>/dev/null
exec 3<&-
ms=$(( (t1 - t0) / 1000000 ))
check "dripping client closed after request_timeout ($ms ms)" bash -c "[ $ms -ge 900 ] && [ $ms -lt 2500 ]"

# Metrics.
expect_eq "metrics 200" "$(http GET $B/metrics)" 200
check "metrics: requests by limit and decision" grep -q '^floodgate_requests_total{limit="bookings",decision="limited",source="store"} 3$' "$T/b"
check "metrics: allowed" grep -q '^floodgate_requests_total{limit="bookings",decision="allowed",source="store"} 17$' "$T/b"
check "metrics: latency histogram" grep -q '^floodgate_store_latency_seconds_bucket{le="+Inf"}' "$T/b"
check "metrics: http 400s counted" grep -q '^floodgate_http_responses_total{code="400"} [1-9]' "$T/b"
check "metrics: http 431s counted under their code" grep -q '^floodgate_http_responses_total{code="431"} [1-9]' "$T/b"
check "metrics: slow requests closed" grep -q '^floodgate_slow_requests_closed_total [1-9]' "$T/b"

# Reload with a good file: the new rate applies.
sed -i 's#^rate = 5/day#rate = 2/day#' "$T/fg.ini"
kill -HUP "$FGPID_s"
for _ in $(seq 1 100); do grep -q 'event=reload result=ok' "$T/s.log" && break; sleep 0.01; done
check "reload logged" grep -q 'event=reload result=ok' "$T/s.log"
expect_eq "an unchanged limit keeps its counters across a reload" \
    "$(http POST "$B/v1/check?limit=otp&key=u1")" 429
# A limit whose key comes from elsewhere now is a changed limit: z, which
# used otp up as ?user=z, is another client's key as X-User: z.
sed -i 's#^key = query:user#key = header:X-User#' "$T/fg.ini"
kill -HUP "$FGPID_s"
for _ in $(seq 1 100); do
    [ "$(grep -c 'event=reload result=ok' "$T/s.log")" = 2 ] && break; sleep 0.01
done
expect_eq "a limit whose key source changed starts afresh" \
    "$(http GET "$B/v1/auth?limit=otp" -H 'X-User: z')" 200
codes=""
for i in 1 2 3; do
    codes="$codes $(http POST $B/bookings -H 'X-User-Id: dave' -H 'X-Forwarded-For: 198.51.100.9')"
done
expect_eq "reloaded limit (2/day) enforced" "$codes" " 200 200 429"
check "reloaded policy header" grep -qi '^RateLimit-Policy: .*"bookings";q=2;w=86400' "$T/h"
# Reload with a bad file: refused, logged with file:line, old config kept.
printf '[server]\ndemo_api = on\n[limit bookings]\nrate = 1/s\nkey = nowhere\n' >"$T/fg.ini"
kill -HUP "$FGPID_s"
for _ in $(seq 1 100); do grep -q 'event=reload result=error' "$T/s.log" && break; sleep 0.01; done
check "bad reload logged with file:line" grep -q "event=reload result=error reason=\".*fg.ini:5: key must be" "$T/s.log"
codes=""
for i in 1 2 3; do
    codes="$codes $(http POST $B/bookings -H 'X-User-Id: erin' -H 'X-Forwarded-For: 198.51.100.10')"
done
expect_eq "bad reload kept the running config" "$codes" " 200 200 429"
check "log lines are key=value" bash -c "! grep -v '^ts=[0-9TZ:.-]* event=[a-z_]*' '$T/s.log'"

# A store URL that does not open is said with its line, or as --store.
printf '[server]\nid = u\n[store]\nurl = memory?max_keys=0\n' >"$T/badurl.ini"
out=$("$FLOODGATE" serve -c "$T/badurl.ini" --listen 127.0.0.1:0 2>&1)
check "bad store url: file and line ($out)" grep -q "badurl.ini:4: \[store\] url: memory store" <<<"$out"
out=$("$FLOODGATE" serve -c "$T/badurl.ini" --store bogus://x --listen 127.0.0.1:0 2>&1)
check "bad --store: said as --store ($out)" grep -q "^floodgate serve: --store: unknown store 'bogus'" <<<"$out"

# Connection cap: past max_connections, accepting pauses (no crash, no
# spinning) and new clients wait in the backlog until a slot frees up.
# The cap is a count, not the descriptor limit: the server keeps at most 5
# client sockets, and descriptors for the rest of its work (a reload
# reads its file). Under `ulimit -n 256` (the server's own limit once
# raised to fit), the old cap let clients take those too.
printf '[server]\nmax_connections = 5\nrequest_timeout = 3s\n' >"$T/cap.ini"
sockets() { find /proc/"$1"/fd -lname 'socket:*' 2>/dev/null | wc -l; }
(ulimit -n 256; exec "$FLOODGATE" serve -c "$T/cap.ini" --listen 127.0.0.1:0 2>"$T/cap.log") &
FGPID_cap=$!
PIDS="$PIDS $FGPID_cap"
for _ in $(seq 1 300); do grep -q event=listening "$T/cap.log" && break; sleep 0.01; done
FGPORT_cap=$(grep -o 'event=listening addr=[^ ]*' "$T/cap.log" | head -1 | sed 's/.*://')
base_sockets=$(sockets "$FGPID_cap")
fds=""
# Each in the middle of a request, so none is idle to close for a new one.
for i in $(seq 1 40); do
    exec {fd}<>/dev/tcp/127.0.0.1/$FGPORT_cap && fds="$fds $fd" && printf 'GET /hea' >&"$fd"
done
sleep 0.2
for _ in $(seq 1 100); do grep -q event=accept_paused "$T/cap.log" && break; sleep 0.01; done
check "accept pauses at max_connections" grep -q 'event=accept_paused reason="max_connections reached"' "$T/cap.log"
held=$(($(sockets "$FGPID_cap") - base_sockets))
expect_eq "40 clients, 5 sockets held" "$held" 5
kill -HUP "$FGPID_cap"
for _ in $(seq 1 200); do grep -q 'event=reload' "$T/cap.log" && break; sleep 0.01; done
check "a reload works while clients fill the cap" grep -q 'event=reload result=ok' "$T/cap.log"
cpu=$(ps -o %cpu= -p "$FGPID_cap" | tr -d ' ')
check "no busy loop while paused (cpu ${cpu}%)" awk -v c="$cpu" 'BEGIN { exit !(c < 50) }'
for fd in $fds; do exec {fd}<&-; done
expect_eq "served again once connections close" "$(http GET http://127.0.0.1:$FGPORT_cap/healthz)" 200
kill -TERM "$FGPID_cap"

# A request whose client went away keeps its place under the cap until the
# store answers it: clients that send a check and reset their connection
# cannot pile up requests (and their memory) beyond max_connections while
# the store hangs. Five such on a cap of 5: /healthz waits for their 3 s
# timeout (the first of them, sent about a second before it).
if start_redis; then
    printf '[server]\nworkers = 1\nmax_connections = 5\n[store]\nurl = redis://127.0.0.1:%s\n[limit s]\nkey = query:k\nrate = 100/s\ntimeout = 3s\n' \
        "$RPORT" >"$T/gone.ini"
    start_fg gone -c "$T/gone.ini" --listen 127.0.0.1:0 || bad "server gone starts"
    kill -STOP "$RPID"
    python3 - "$FGPORT_gone" <<'PY'
import socket, struct, sys, time
for i in range(5):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"POST /v1/check?limit=s&key=k%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
    time.sleep(0.2)  # read and sent to the store before the reset
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
PY
    t0=$(date +%s%N)
    code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$FGPORT_gone/healthz")
    ms=$((($(date +%s%N) - t0) / 1000000))
    kill -CONT "$RPID"
    echo "5 checks whose clients reset, cap 5, store stopped: /healthz answered $code after $ms ms"
    check "requests whose clients went away hold the cap until the store answers (/healthz $code after $ms ms)" \
        [ "$code" = 200 -a "$ms" -ge 1200 ]
    kill -TERM "$FGPID_gone"
    # docs/serve.md's reference configuration, as it is but for its
    # addresses and the token file's path: it loads and runs.
    python3 - docs/serve.md >"$T/ref.ini" <<'PY'
import sys
s = open(sys.argv[1]).read()
i = s.index("```ini\n", s.index("\n## Configuration\n")) + 7
print(s[i:s.index("```\n", i)], end="")
PY
    printf 'reference-token-%s\n' "$$" >"$T/ref.token"
    chmod 600 "$T/ref.token"
    sed -i -e "s|^admin_listen = [^ ]*|admin_listen = 127.0.0.1:0|" \
        -e "s|^admin_token_file = [^ ]*|admin_token_file = $T/ref.token|" "$T/ref.ini"
    if start_fg ref -c "$T/ref.ini" --listen 127.0.0.1:0 --store "redis://127.0.0.1:$RPORT/0"; then
        ok "docs/serve.md's reference configuration runs"
        code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST -H 'X-User-Id: u1' \
            "http://127.0.0.1:$FGPORT_ref/bookings")
        expect_eq "its POST /bookings answers" "$code" 200
        kill -TERM "$FGPID_ref"
    else
        bad "docs/serve.md's reference configuration runs: $(head -c 300 "$T/ref.log")"
    fi
else
    bad "redis starts"
fi

# The room left beyond the clients grows with the store's nodes: each
# worker holds a connection to each (here 20 shards on a closed port, so
# nothing connects; the cap is worked out at start all the same).
nodes_ini() { # nodes_ini N: $T/nodesN.ini, 2 workers on N shards
    { printf '[server]\nworkers = 2\nmax_connections = 1000\n[store]\nurl = shards=redis://127.0.0.1:1/0'
      for i in $(seq 1 $(($1 - 1))); do printf ',\n  redis://127.0.0.1:1/%d' "$i"; done
      printf '\n[limit a]\nkey = query:u\nrate = 1/s\n'; } >"$T/nodes$1.ini"
}
nodes_cap() { # nodes_cap N: the cap logged under ulimit -n 600, 2 workers
    nodes_ini "$1"
    (ulimit -n 600; timeout 5 "$FLOODGATE" serve -c "$T/nodes$1.ini" --listen 127.0.0.1:0 2>&1 |
        grep -m1 -o 'event=max_connections configured=1000 cap=[0-9]*' | sed 's/.*cap=//')
}
cap2=$(nodes_cap 2)
cap20=$(nodes_cap 20)
# Two descriptors a node and worker: a shard is one node (it was counted
# twice, as a node and as an address of the URL: 144 fewer, not 72).
check "descriptor room for 20 nodes x 2 workers: cap $cap20 vs $cap2 for 2 nodes (72 fewer)" \
    bash -c "[ -n '$cap2' ] && [ -n '$cap20' ] && [ $cap20 -eq $((cap2 - 2 * 2 * 18)) ]"
# The admin routes' store keeps its own connections: room as for one more
# worker (32 + 2 a node). They were left out.
printf 'admin-%s\n' "$$" >"$T/adm.token"
chmod 600 "$T/adm.token"
sed "s|^workers = 2|workers = 2\nadmin_listen = 127.0.0.1:0\nadmin_token_file = $T/adm.token|" \
    "$T/nodes20.ini" >"$T/nodes20a.ini"
cap20a=$( (ulimit -n 600; timeout 5 "$FLOODGATE" serve -c "$T/nodes20a.ini" --listen 127.0.0.1:0 2>&1 |
    grep -m1 -o 'event=max_connections configured=1000 cap=[0-9]*' | sed 's/.*cap=//') )
check "with admin_listen: cap $cap20a, 72 fewer than $cap20 (32 + 2 x 20 nodes)" \
    bash -c "[ -n '$cap20a' ] && [ $cap20a -eq $((cap20 - 32 - 2 * 20)) ]"

# Too low a limit for the store's connections: refused at start (it
# started, every worker short of descriptors for its nodes: checks failed
# open with 'Too many open files').
nodes_ini 16
sed 's/^workers = 2/workers = 8/' "$T/nodes16.ini" >"$T/nodes16w8.ini"
out=$( (ulimit -n 140; timeout 5 "$FLOODGATE" serve -c "$T/nodes16w8.ini" --listen 127.0.0.1:0 2>&1); echo "rc=$?")
check "ulimit -n 140, 8 workers on 16 shards: exit 2 naming the store's connections ($(echo "$out" | tail -2 | tr '\n' ' '))" \
    grep -q 'is 140: 8 workers need at least [0-9]* (with 16 store connections each)' <<<"$out"
check "ulimit -n 140, 8 workers on 16 shards: exit 2" grep -q 'rc=2$' <<<"$out"

# A reload to a store of more connections than the limit has room for
# beside the clients: refused, the running store kept (it was taken).
sed 's/^max_connections = 1000/max_connections = 150/' "$T/nodes2.ini" >"$T/grow.ini"
(ulimit -n 400; exec "$FLOODGATE" serve -c "$T/grow.ini" --listen 127.0.0.1:0 2>"$T/grow.log") &
FGPID_grow=$!
PIDS="$PIDS $FGPID_grow"
for _ in $(seq 1 300); do grep -q event=listening "$T/grow.log" && break; sleep 0.01; done
sed 's/^max_connections = 1000/max_connections = 150/' "$T/nodes20.ini" >"$T/grow.ini"
kill -HUP "$FGPID_grow"
for _ in $(seq 1 300); do grep -q 'event=reload' "$T/grow.log" && break; sleep 0.01; done
check "a reload to 20 shards under ulimit -n 400: refused, with the numbers ($(grep -o 'event=reload.*' "$T/grow.log" | head -1 | cut -c1-160))" \
    grep -q 'event=reload result=error reason="the open-file limit (ulimit -n, LimitNOFILE=) is 400: the new store.s 20 connections a worker' "$T/grow.log"
sed 's/^max_connections = 1000/max_connections = 150/' "$T/nodes2.ini" | sed 's/rate = 1\/s/rate = 2\/s/' >"$T/grow.ini"
kill -HUP "$FGPID_grow"
for _ in $(seq 1 300); do grep -q 'event=reload result=ok' "$T/grow.log" && break; sleep 0.01; done
check "a reload within the limit: taken" grep -q 'event=reload result=ok' "$T/grow.log"
kill "$FGPID_grow"

# An open-file limit too low for the workers' own descriptors: refused at
# start with the numbers (not libevent's own exit 1, nor 'out of memory').
printf '[server]\nworkers = 6\n[limit a]\nkey = query:u\nrate = 1/s\n' >"$T/w6.ini"
out=$( (ulimit -n 40; timeout 5 "$FLOODGATE" serve -c "$T/w6.ini" --listen 127.0.0.1:0 2>&1); echo "rc=$?")
check "ulimit -n 40, 6 workers: exit 2 naming the limit ($out)" \
    grep -q 'the open-file limit (ulimit -n, LimitNOFILE=) is 40: 6 workers need at least' <<<"$out"
check "ulimit -n 40, 6 workers: exit 2" grep -q 'rc=2$' <<<"$out"

# SIGTERM: exits 0, after logging the drain.
kill -TERM "$FGPID_s"
for _ in $(seq 1 200); do kill -0 "$FGPID_s" 2>/dev/null || break; sleep 0.01; done
wait "$FGPID_s"
expect_eq "SIGTERM exits 0" "$?" 0
check "drain logged" grep -q 'event=draining' "$T/s.log"
check "exit logged" grep -q 'event=exit status=0' "$T/s.log"

finish
