#!/usr/bin/env bash
# The admin routes of floodgate serve (GET /v1/peek, POST /v1/reset) on
# admin_listen, through real processes: 401 without the bearer token or
# with a wrong one, served only on admin_listen, peeks that consume
# nothing, resets seen by two servers sharing a real Redis (and forgotten
# by their blocked-key caches), the token file's errors at start, and a
# reload that rotates the token. The token never appears in a log, a
# metric or an answer.
. "$(dirname "$0")/../serve/lib.sh"

TOKEN="adm-$$-Zq81xWv3"
printf '%s\n' "$TOKEN" >"$T/token"
chmod 600 "$T/token"
AUTH="Authorization: Bearer $TOKEN"

# admin_of NAME: the admin port from the server's log.
admin_of() { grep -o 'event=admin_listening addr=[^ ]*' "$T/$1.log" | head -1 | sed 's/.*://'; }

# ---- the memory store -------------------------------------------------
cat >"$T/m.ini" <<INI
[server]
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
[limit fw]
key = query:u
algorithm = fixed_window
rate = 3/h
[limit tb]
key = query:u
rate = 2/h
INI
start_fg m -c "$T/m.ini" --listen 127.0.0.1:0 || { bad "memory server starts"; finish; }
M=http://127.0.0.1:$FGPORT_m
A=http://127.0.0.1:$(admin_of m)

for i in 1 2; do http POST "$M/v1/check?limit=fw&key=ann" >/dev/null; done
# Access: no token, a wrong one, another scheme, the token with a byte
# more or less: 401, and nothing else said.
expect_eq "peek without a token" "$(http GET "$A/v1/peek?limit=fw&key=ann")" 401
expect_eq "401 names the scheme" "$(header WWW-Authenticate)" 'Bearer realm="floodgate admin"'
expect_eq "401 body" "$(cat "$T/b")" '{"error":"unauthorized"}'
expect_eq "401 status line" "$(head -1 "$T/h" | tr -d '\r')" "HTTP/1.1 401 Unauthorized"
expect_eq "wrong token" "$(http GET "$A/v1/peek?limit=fw&key=ann" -H "Authorization: Bearer wrong-$TOKEN")" 401
expect_eq "token cut short" "$(http GET "$A/v1/peek?limit=fw&key=ann" -H "Authorization: Bearer ${TOKEN%?}")" 401
expect_eq "token and a byte" "$(http GET "$A/v1/peek?limit=fw&key=ann" -H "Authorization: Bearer ${TOKEN}x")" 401
expect_eq "basic scheme" "$(http GET "$A/v1/peek?limit=fw&key=ann" -H "Authorization: Basic $TOKEN")" 401
# Authorization twice (the right token first): refused, as a proxy in
# front may have checked the other one.
exec 5<>"/dev/tcp/127.0.0.1/$(admin_of m)"
printf 'GET /v1/peek?limit=fw&key=ann HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAuthorization: Bearer nope\r\nConnection: close\r\n\r\n' "$TOKEN" >"$T/dup.req"
cat "$T/dup.req" >&5
IFS= read -r -t 2 dupst <&5
exec 5<&- 5>&-
expect_eq "Authorization given twice: 401" "${dupst%$'\r'}" "HTTP/1.1 401 Unauthorized"
# One guess a connection: a 401 closes it, and what was pipelined after
# it is not read (20 wrong tokens in one write: one answer).
exec 5<>"/dev/tcp/127.0.0.1/$(admin_of m)"
for i in $(seq 1 20); do
    printf 'GET /v1/peek?limit=fw&key=ann HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer guess%s\r\n\r\n' "$i"
done >"$T/guess.req"
cat "$T/guess.req" >&5
timeout 3 cat <&5 >"$T/guess.out"
exec 5<&- 5>&-
expect_eq "20 guesses pipelined: one 401, then the connection closes" \
    "$(grep -c '^HTTP/1.1 ' "$T/guess.out"):$(grep -c '^Connection: close' "$T/guess.out")" "1:1"
expect_eq "reset without a token" "$(http POST "$A/v1/reset?limit=fw&key=ann")" 401
expect_eq "an unknown route without a token: 401 too" "$(http GET "$A/nothing")" 401
expect_eq "the token after an empty header" \
    "$(http GET "$A/v1/peek?limit=fw&key=ann" -H 'X-Pad;' -H "$AUTH")" 200
# The routes are not on the main listener, token or not.
expect_eq "no peek on listen" "$(http GET "$M/v1/peek?limit=fw&key=ann" -H "$AUTH")" 404
expect_eq "no reset on listen" "$(http POST "$M/v1/reset?limit=fw&key=ann" -H "$AUTH")" 404
# Peeks: what is left, nothing consumed (three peeks, then still 1 left).
for i in 1 2 3; do
    expect_eq "peek $i" "$(http GET "$A/v1/peek?limit=fw&key=ann" -H "$AUTH")" 200
done
body=$(cat "$T/b")
case "$body" in '{"name":"fw","allowed":true,"limit":3,"remaining":1,"reset_ms":'*',"retry_after_ms":0}') ok "peek body" ;; *) bad "peek body: $body" ;; esac
expect_eq "the check after the peeks takes the last unit" "$(http POST "$M/v1/check?limit=fw&key=ann")" 200
expect_eq "then refused" "$(http POST "$M/v1/check?limit=fw&key=ann")" 429
http GET "$A/v1/peek?limit=fw&key=ann" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"allowed":false,"limit":3,"remaining":0,'*) ok "peek of an empty key" ;; *) bad "peek of an empty key: $(cat "$T/b")" ;; esac
# Reset: the key is whole again; another key is not touched.
http POST "$M/v1/check?limit=fw&key=bob" >/dev/null
expect_eq "reset" "$(http POST "$A/v1/reset?limit=fw&key=ann" -H "$AUTH")" 200
expect_eq "reset body" "$(cat "$T/b")" '{"reset":true,"name":"fw"}'
http GET "$A/v1/peek?limit=fw&key=ann" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"remaining":3,"reset_ms":0,'*) ok "whole after reset" ;; *) bad "after reset: $(cat "$T/b")" ;; esac
http GET "$A/v1/peek?limit=fw&key=bob" -H "$AUTH" >/dev/null
case "$(cat "$T/b")" in *'"remaining":2,'*) ok "other key kept" ;; *) bad "other key: $(cat "$T/b")" ;; esac
# Bad calls.
expect_eq "peek by POST" "$(http POST "$A/v1/peek?limit=fw&key=ann" -H "$AUTH")" 405
expect_eq "reset by GET" "$(http GET "$A/v1/reset?limit=fw&key=ann" -H "$AUTH")" 405
expect_eq "unknown limit" "$(http GET "$A/v1/peek?limit=nope&key=ann" -H "$AUTH")" 404
expect_eq "no key" "$(http GET "$A/v1/peek?limit=fw" -H "$AUTH")" 400
expect_eq "no limit" "$(http GET "$A/v1/peek?key=ann" -H "$AUTH")" 400
expect_eq "other admin path" "$(http GET "$A/metrics" -H "$AUTH")" 404

# A reload reads the token again: the old one is refused from then on.
NEW="adm2-$$-Pp04kLm"
printf '%s\n' "$NEW" >"$T/token"
kill -HUP "$FGPID_m"
for _ in $(seq 1 200); do grep -q 'event=reload result=ok' "$T/m.log" && break; sleep 0.01; done
expect_eq "old token after reload" "$(http GET "$A/v1/peek?limit=tb&key=ann" -H "$AUTH")" 401
expect_eq "new token after reload" "$(http GET "$A/v1/peek?limit=tb&key=ann" -H "Authorization: Bearer $NEW")" 200
AUTH="Authorization: Bearer $NEW"

# The token is nowhere but in its file.
curl -s -m 5 "$M/metrics" >"$T/metrics.txt"
check "metrics without the token" sh -c "! grep -q -e '$TOKEN' -e '$NEW' '$T/metrics.txt'"
check "log without the token" sh -c "! grep -q -e '$TOKEN' -e '$NEW' -e 'wrong-' '$T/m.log'"
check "admin calls logged" grep -q 'event=admin route=reset limit=fw key=ann status=200' "$T/m.log"
# A key's UTF-8 is logged as it is, a byte that is not UTF-8 escaped: a
# log line stays valid UTF-8.
http GET "$A/v1/peek?limit=fw&key=caf%C3%A9%FF" -H "$AUTH" >/dev/null
check "a key's stray byte logged escaped, its UTF-8 as it is" \
    grep -qF $'event=admin route=peek limit=fw key="caf\xc3\xa9\\xff" status=200' "$T/m.log"
check "the log is valid UTF-8" iconv -f UTF-8 -t UTF-8 -o /dev/null "$T/m.log"
expect_eq "limit given twice: 400" \
    "$(http GET "$A/v1/peek?limit=fw&limit=fw&key=k" -H "$AUTH")" 400
expect_eq "limit given twice: says so" "$(cat "$T/b")" '{"error":"limit parameter given twice"}'
# Refused calls past the token are logged too (a trail of resets tried).
check "405 logged" grep -q 'event=admin route=reset status=405 peer=127.0.0.1 error="method not allowed"' "$T/m.log"
check "unknown limit logged" grep -q 'event=admin route=peek status=404 peer=127.0.0.1 error="unknown limit"' "$T/m.log"
check "missing key logged" grep -q 'event=admin route=peek status=400 peer=127.0.0.1 error="missing key parameter"' "$T/m.log"
check "other path logged" grep -q 'event=admin route=/metrics status=404 peer=127.0.0.1 error="no such route"' "$T/m.log"
check "denials logged" grep -q 'event=admin_denied peer=127.0.0.1 reason=wrong_token' "$T/m.log"
check "a repeated Authorization logged" grep -q 'event=admin_denied peer=127.0.0.1 reason=repeated_authorization' "$T/m.log"
# A flood without the token: at most 20 lines a second; the next line, or
# within a second or two a line of its own, says how many were left out, so
# lines plus those left out count every one, with no later request.
d0=$(grep -c 'event=admin_denied' "$T/m.log")
curl -s -m 20 -o /dev/null "$A/v1/peek?limit=fw&key=[1-300]"
for _ in $(seq 1 40); do
    grep -q 'event=admin_denied_suppressed' "$T/m.log" && break
    sleep 0.1
done
sed -n "$((d0 + 1)),\$p" <(grep 'event=admin_denied' "$T/m.log") >"$T/denied.log"
lines=$(grep -c 'event=admin_denied ' "$T/denied.log")
left=$(grep -o 'suppressed=[0-9]*' "$T/denied.log" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
check "a flood of denials: few lines ($lines for 300)" [ "$lines" -le 80 ]
expect_eq "a flood of denials: lines and those left out count all, unasked" "$((lines + left))" 300
http GET "$A/v1/peek?limit=fw&key=last" >/dev/null
sleep 0.1
check "the next denial is a line of its own, none left out before it" \
    grep -q 'event=admin_denied peer=127.0.0.1 reason=no_token suppressed=0$' <(grep 'event=admin_denied' "$T/m.log" | tail -n 1)

# ---- two servers on one Redis ------------------------------------------
start_redis || { bad "redis starts"; finish; }
for n in 1 2; do
    cat >"$T/r$n.ini" <<INI
[server]
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
[store]
url = redis://127.0.0.1:$RPORT
prefix = adm$$:
timeout = 500ms
[limit fw]
key = query:u
algorithm = fixed_window
rate = 2/h
[limit sw]
key = query:u
algorithm = sliding_window
rate = 2/h
[limit tb]
key = query:u
rate = 2/h
INI
    start_fg "r$n" -c "$T/r$n.ini" --listen 127.0.0.1:0 || { bad "redis server $n starts"; finish; }
done
R1=http://127.0.0.1:$FGPORT_r1
R2=http://127.0.0.1:$FGPORT_r2
A1=http://127.0.0.1:$(admin_of r1)
A2=http://127.0.0.1:$(admin_of r2)
for lim in fw sw tb; do
    codes=""
    for s in "$R1" "$R2" "$R1" "$R2"; do codes="$codes $(http POST "$s/v1/check?limit=$lim&key=zed")"; done
    expect_eq "$lim: two servers share 2/h" "$codes" " 200 200 429 429"
    # The refusal is now in each server's blocked-key cache.
    http POST "$R2/v1/check?limit=$lim&key=zed" >/dev/null
    case "$(cat "$T/b")" in *'"source":"cache"'*) ok "$lim: refused from the cache" ;; *) bad "$lim: not cached: $(cat "$T/b")" ;; esac
    http GET "$A1/v1/peek?limit=$lim&key=zed" -H "$AUTH" >/dev/null
    case "$(cat "$T/b")" in *'"allowed":false,"limit":2,"remaining":0,'*) ok "$lim: peek through server 1" ;; *) bad "$lim: peek: $(cat "$T/b")" ;; esac
    expect_eq "$lim: reset through server 1" "$(http POST "$A1/v1/reset?limit=$lim&key=zed" -H "$AUTH")" 200
    # Server 1's workers forgot the key: the store has it whole.
    expect_eq "$lim: server 1 after its reset" "$(http POST "$R1/v1/check?limit=$lim&key=zed")" 200
    # Server 2's cache is its own process's: it still refuses until its
    # admin route is called too (docs/serve.md says so).
    http POST "$R2/v1/check?limit=$lim&key=zed" >/dev/null
    case "$(cat "$T/b")" in *'"source":"cache"'*) ok "$lim: server 2 still cached" ;; *) bad "$lim: server 2: $(cat "$T/b")" ;; esac
    expect_eq "$lim: reset through server 2" "$(http POST "$A2/v1/reset?limit=$lim&key=zed" -H "$AUTH")" 200
    codes=""
    for s in "$R2" "$R1" "$R2"; do codes="$codes $(http POST "$s/v1/check?limit=$lim&key=zed")"; done
    expect_eq "$lim: whole on both servers after both resets" "$codes" " 200 200 429"
done
# Nothing is left in Redis of a key reset and not used again.
http POST "$R1/v1/check?limit=sw&key=gone" >/dev/null
http POST "$A1/v1/reset?limit=sw&key=gone" -H "$AUTH" >/dev/null
expect_eq "reset leaves no key" "$(redis-cli -p "$RPORT" --scan --pattern "adm$$:sw:{gone}*" | wc -l)" 0
# A worker forgets what its mode holds of a reset key, with no blocked-key
# cache too: its sync view of the old count does not refuse after the
# reset, nor is its usage from before the reset sent after it.
cat >"$T/l.ini" <<INI
[server]
workers = 1
blocked_cache = 0
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
[store]
url = redis://127.0.0.1:$RPORT
prefix = adm$$:
timeout = 500ms
[limit sy]
key = query:u
algorithm = fixed_window
rate = 4/h
mode = sync:5s
INI
start_fg l -c "$T/l.ini" --listen 127.0.0.1:0 || bad "sync server starts"
L=http://127.0.0.1:$FGPORT_l
AL=http://127.0.0.1:$(admin_of l)
codes=""
for _ in 1 2 3; do codes="$codes $(http POST "$L/v1/check?limit=sy&key=lou")"; done
expect_eq "sync: three checks" "$codes" " 200 200 200"
expect_eq "sync: reset" "$(http POST "$AL/v1/reset?limit=sy&key=lou" -H "$AUTH")" 200
codes=""
for _ in 1 2 3 4 5; do codes="$codes $(http POST "$L/v1/check?limit=sy&key=lou")"; done
expect_eq "sync: the whole limit after the reset" "$codes" " 200 200 200 200 429"

# Redis down: the admin call says so, 503, quickly.
kill -STOP "$RPID"
st=$(http GET "$A1/v1/peek?limit=fw&key=zed" -H "$AUTH")
kill -CONT "$RPID"
expect_eq "peek with Redis hung" "$st" 503
case "$(cat "$T/b")" in *'backend timed out'*) ok "503 says why" ;; *) bad "503 body: $(cat "$T/b")" ;; esac

# A peek on a hung Redis waits for its limit's timeout (6 s here) on the
# admin routes' own thread: a reload and a drain meanwhile do not wait
# for it (they once did, signals and all, on the main thread).
cat >"$T/h.ini" <<INI
[server]
admin_listen = 127.0.0.1:0
admin_token_file = $T/token
[store]
url = redis://127.0.0.1:$RPORT
[limit slow]
key = query:u
rate = 5/min
timeout = 6s
INI
start_fg h -c "$T/h.ini" --listen 127.0.0.1:0 || { bad "slow-limit server starts"; finish; }
AH=http://127.0.0.1:$(admin_of h)
kill -STOP "$RPID"
curl -s -m 20 -o "$T/hpeek" -w '%{http_code}' "$AH/v1/peek?limit=slow&key=k" \
    -H "$AUTH" >"$T/hpeek.code" &
cpid=$!
# Until the peek is connected (then sent at once, and read by the admin
# thread, which then waits on Redis).
for _ in $(seq 1 300); do
    [ -n "$(ss -Htn state established "( dport = :${AH##*:} )" 2>/dev/null)" ] && break
    sleep 0.01
done
sleep 0.1
reload_fg h 0
check "peek waiting on a hung Redis: a reload is not held up" \
    bash -c "grep -q 'event=reload result=ok' '$T/h.log' && kill -0 $cpid"
kill -TERM "$FGPID_h"
for _ in $(seq 1 300); do grep -q 'event=draining' "$T/h.log" && break; sleep 0.01; done
check "peek waiting on a hung Redis: a drain is not held up" \
    bash -c "grep -q 'event=draining' '$T/h.log' && kill -0 $cpid"
kill -CONT "$RPID"
wait "$cpid"
hcode=$(cat "$T/hpeek.code")
check "the peek is answered all the same (Redis woke up in time: $hcode)" \
    test "$hcode" = 200
wait "$FGPID_h"
expect_eq "the server exits 0 once the peek is answered" "$?" 0

# ---- the token file's errors, at start ----------------------------------
start_bad() { # NAME WANT TOKENFILE [ADMIN_LISTEN]
    local name=$1 want=$2 file=$3
    printf '[server]\nadmin_listen = 127.0.0.1:0\nadmin_token_file = %s\n[limit a]\nkey = query:u\nrate = 1/s\n' \
        "$file" >"$T/$name.ini"
    out=$(timeout 5 "$FLOODGATE" serve -c "$T/$name.ini" --listen 127.0.0.1:0 2>&1)
    rc=$?
    case "$out" in
    *"$T/$name.ini:3: admin_token_file $file: $want"*) [ "$rc" -eq 2 ] && ok "$name refused" || bad "$name: exit $rc" ;;
    *) bad "$name: $out (exit $rc)" ;;
    esac
    case "$out" in *"$TOKEN"*|*"$NEW"*|*leak-*) bad "$name: token in the message" ;; *) ok "$name: no token in the message" ;; esac
}
start_bad missing "No such file or directory" "$T/none"
: >"$T/empty"
chmod 600 "$T/empty"
start_bad empty "the token is empty" "$T/empty"
printf 'leak-%s\n' "$$" >"$T/public"
chmod 644 "$T/public"
start_bad public "readable or writable by others" "$T/public"
printf 'leak-%s\n' "$$" >"$T/groupw"
chmod 660 "$T/groupw"
start_bad group-writable "writable by its group" "$T/groupw"
mkfifo -m 600 "$T/fifo"
start_bad fifo "not a regular file" "$T/fifo"
printf 'has space\n' >"$T/spaced"
chmod 600 "$T/spaced"
start_bad spaced "the token must be printable ASCII, no spaces" "$T/spaced"
# A NUL in the first line is refused, not taken for its end (the token
# would be what comes before it); so is a UTF-16 file (a NUL each byte).
printf 'Ab\000Cdefgh-leak-%s\n' "$$" >"$T/nul"
chmod 600 "$T/nul"
start_bad nul "the token must be printable ASCII, no spaces" "$T/nul"
printf 'S\0003\000c\000r\000e\000t\000\n\000' >"$T/utf16"
chmod 600 "$T/utf16"
start_bad utf16 "the token must be printable ASCII, no spaces" "$T/utf16"
# A short token starts, with a warning.
printf 'abc\n' >"$T/short"
chmod 600 "$T/short"
printf '[server]\nadmin_listen = 127.0.0.1:0\nadmin_token_file = %s\n[limit a]\nkey = query:u\nrate = 1/s\n' "$T/short" >"$T/short.ini"
start_fg short -c "$T/short.ini" --listen 127.0.0.1:0
check "a token of 3 bytes: a warning at start" \
    grep -q 'event=admin_token_short level=warning bytes=3 ' "$T/short.log"
kill "$FGPID_short" 2>/dev/null
printf '[server]\nadmin_listen = 127.0.0.1:0\n[limit a]\nkey = query:u\nrate = 1/s\n' >"$T/notoken.ini"
out=$(timeout 5 "$FLOODGATE" serve -c "$T/notoken.ini" --listen 127.0.0.1:0 2>&1)
case "$out" in *"notoken.ini:2: admin_listen needs admin_token_file"*) ok "admin_listen without a token file" ;; *) bad "no token file: $out" ;; esac
# A dual-stack admin listener names an IPv4 peer as IPv4, as keys do.
printf '[server]\nadmin_listen = [::]:0\nadmin_token_file = %s\n[limit a]\nkey = query:u\nrate = 1/s\n' \
    "$T/token" >"$T/dual.ini"
start_fg dual -c "$T/dual.ini" --listen 127.0.0.1:0 || bad "dual-stack admin server starts"
curl -s -o /dev/null "http://127.0.0.1:$(admin_of dual)/v1/peek?limit=a&key=x"
for _ in $(seq 1 100); do grep -q 'event=admin_denied' "$T/dual.log" && break; sleep 0.01; done
check "a dual-stack admin listener logs an IPv4 peer as IPv4" \
    grep -q 'event=admin_denied peer=127.0.0.1 ' "$T/dual.log"
# Off by default: no admin listener at all.
printf '[limit a]\nkey = query:u\nrate = 1/s\n' >"$T/plain.ini"
start_fg plain -c "$T/plain.ini" --listen 127.0.0.1:0 || bad "plain server starts"
check "admin off by default" sh -c "! grep -q admin_listening '$T/plain.log'"

# The admin listener's own cap (64 connections) says so when it is reached,
# not max_connections (the public port's). Each connection is in the middle
# of a request, so none is idle to close for a new one: accepting pauses.
afds=""
ap=$(admin_of m)
for _ in $(seq 1 66); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$ap" && afds="$afds $fd" && printf 'GET /v1/pe' >&"$fd"
done
for _ in $(seq 1 100); do grep -q 'event=accept_paused' "$T/m.log" && break; sleep 0.01; done
check "admin cap reached: the log names it" \
    grep -q "event=accept_paused reason=\"admin_listen's cap of 64 connections reached\"" "$T/m.log"
for fd in $afds; do exec {fd}>&-; done

finish
