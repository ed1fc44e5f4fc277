#!/usr/bin/env bash
# floodgate serve's HTTP layer (serve/http.c) seen from real sockets: pipelined
# requests on the memory and the Redis store, HTTP/1.0 and keep-alive,
# Connection: close, Expect: 100-continue, request bodies (chunked, at and
# past 64 KB), the header-field limit, malformed heads (garbage, NUL, bare
# CR), absolute-form targets, HEAD, a request sent byte by byte, a client
# that half-closes, clients that vanish while Redis is slow, 200 aborted
# connections, unknown methods, 413 and 431 followed by more data (no
# reset). Loopback only; about 20 s (60 s at most).
FG_TEST_BOUND=${FG_TEST_BOUND:-60}
. "$(dirname "$0")/../serve/lib.sh"
export LC_ALL=C # byte counts for read -N and the body sizes

# --- raw connections on fd 3 -------------------------------------------
R=0 # answers read on the current connection (or file)
conn() { R=0; exec 3<>"/dev/tcp/127.0.0.1/$1"; }
conn_close() { exec 3<&- 3>&-; }
# send FORMAT ARGS...: one write() (bash's printf writes line by line).
send() { printf "$@" >"$T/req" && cat "$T/req" >&3 2>/dev/null; }
# resp [nobody]: reads one answer from fd 3 (2 s per read) into $T/rN.h
# (status line and headers, CR dropped) and $T/rN.b (body, by its
# Content-Length; none when 'nobody': the answer to HEAD). Fails when no
# whole answer comes.
resp() {
    local line body cl
    R=$((R + 1))
    : >"$T/r$R.h"
    : >"$T/r$R.b"
    IFS= read -r -t 2 line <&3 || return 1
    printf '%s\n' "${line%$'\r'}" >"$T/r$R.h"
    while :; do
        IFS= read -r -t 2 line <&3 || return 1
        line=${line%$'\r'}
        [ -z "$line" ] && break
        printf '%s\n' "$line" >>"$T/r$R.h"
    done
    [ "${1:-}" = nobody ] && return 0
    case $(st) in 1??) return 0 ;; esac # interim: no body
    cl=$(rh Content-Length)
    case $cl in '' | *[!0-9]*) return 1 ;; 0) return 0 ;; esac
    IFS= read -r -t 2 -N "$cl" body <&3 || return 1
    printf '%s' "$body" >"$T/r$R.b"
}
st() { sed -n '1s/^HTTP\/1\.1 \([0-9][0-9][0-9]\) .*/\1/p' "$T/r${1:-$R}.h"; }
rh() { # rh NAME [N]: header NAME of answer N (the last by default)
    grep -i "^$1:" "$T/r${2:-$R}.h" | head -1 | sed 's/^[^:]*: *//'
}
jf() { # jf FIELD [N]: a field of answer N's JSON body
    grep -o "\"$1\":[^,}]*" "$T/r${2:-$R}.b" | head -1 | cut -d: -f2
}
blen() { wc -c <"$T/r${1:-$R}.b" | tr -d ' '; }
# The server closed fd 3: EOF (or a reset) within 1.5 s and nothing more.
# request_timeout is 5 s, so the sweep cannot be what closed it.
at_eof() {
    local x="" rc
    IFS= read -r -t 1.5 -N 1 x <&3
    rc=$?
    [ "$rc" -eq 1 ] && [ -z "$x" ]
}
# An error answer of ours: one line, a JSON object with an "error" string.
json_error() {
    local f="$T/r${1:-$R}.b"
    [ "$(wc -l <"$f")" -eq 1 ] && [ "$(tail -c 1 "$f")" = "" ] &&
        grep -q '^{"error":"\([^"\\]\|\\.\)*"}$' "$f"
}
# NAME=... answers_in_order N ID R1 R2...: answers 1..N on this connection
# are 200s served by ID with remaining R1, R2, ...
answers_in_order() {
    local n=$1 id=$2 i got="" want=""
    shift 2
    for i in $(seq 1 "$n"); do
        got="$got $(st "$i")/$(rh X-Served-By "$i")/$(jf remaining "$i")"
        want="$want 200/$id/$1"
        shift
    done
    expect_eq "$NAME" "$got" "$want"
}
metric() { # metric PORT NAME: the value of a /metrics line
    curl -s -m 2 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'
}
# halfclose PORT: sends stdin on a new connection, shuts its write side
# (shutdown(SHUT_WR): the server reads EOF) and prints all that comes back
# until the server closes (3 s at most). bash cannot half-close a /dev/tcp
# socket; perl-base (always on Debian) can, with its core Socket module.
halfclose() {
    perl -MSocket -e '
        socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
        connect($s, pack_sockaddr_in($ARGV[0], inet_aton("127.0.0.1")))
            or die "connect: $!";
        local $/;
        my $req = <STDIN>;
        syswrite($s, $req) == length($req) or die "write: $!";
        shutdown($s, 1) or die "shutdown: $!";
        alarm 3;
        while (sysread($s, my $b, 65536)) { print $b }' "$1"
}

# --- the servers ---------------------------------------------------------
# request_timeout 5 s: longer than every wait here, so a close seen here is
# the server's answer to the request, never its sweep of a slow one.
cat >"$T/mem.ini" <<INI
[server]
workers = 2
id = http-mem
request_timeout = 5s
max_header_bytes = 8192
[store]
url = memory
[limit l]
key = query:key
; a day's window: its edge (midnight UTC) is the only moment a count here
; could reset mid-test; reset_ms keeps its length from one answer to the next
algorithm = fixed_window
rate = 1000/day
INI
MEMN=0
# start_mem: (re)starts the memory server as mem, mem2, mem3... (each its
# own log, so that a crash stays on record); sets M and MPID.
start_mem() {
    local name=mem
    MEMN=$((MEMN + 1))
    [ "$MEMN" -gt 1 ] && name=mem$MEMN
    start_fg "$name" -c "$T/mem.ini" --listen 127.0.0.1:0 || return 1
    eval "M=\$FGPORT_$name MPID=\$FGPID_$name MLOG=\$T/$name.log"
}
start_mem || { bad "memory server starts"; finish; }
# survived WHAT: the memory server still answers /healthz after WHAT. If
# it does not (it crashed), the log's last lines are shown and a new one
# is started, so that the checks after this one still run.
survived() {
    local c
    c=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$M/healthz")
    if [ "$c" = 200 ]; then
        ok "server survived $1"
        return 0
    fi
    bad "server survived $1: /healthz gave '$c'; its log ends:"
    tail -n 3 "$MLOG" | sed 's/^/    /'
    start_mem || { bad "memory server restarts"; finish; }
}

# As start_redis, with DEBUG allowed from loopback (DEBUG SLEEP makes Redis
# slow on purpose); sets RPORT and RPID.
start_redis_debug() {
    local i
    mkdir -p "$T/redis"
    for i in 1 2 3 4 5; do
        RPORT=$(free_port)
        redis-server --port "$RPORT" --bind 127.0.0.1 --save '' \
            --appendonly no --dir "$T/redis" --logfile "$T/redis/log" \
            --enable-debug-command local &
        RPID=$!
        PIDS="$PIDS $RPID"
        for _ in $(seq 1 100); do
            redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && return 0
            kill -0 "$RPID" 2>/dev/null || break
            sleep 0.02
        done
    done
    echo "cannot start redis-server" >&2
    return 1
}
start_redis_debug || { bad "redis starts"; finish; }
# on_failure = closed: an answer that did not come from Redis is a 503,
# never a pass; the timeout outlasts DEBUG SLEEP 0.3.
cat >"$T/red.ini" <<INI
[server]
workers = 2
id = http-red
request_timeout = 5s
[store]
url = redis://127.0.0.1:$RPORT
prefix = h$$:
timeout = 800ms
[limit l]
key = query:key
; a token bucket: counts must not depend on where a window edge falls
; (a fixed window of an hour resets at the top of the hour, mid-test)
algorithm = token_bucket
rate = 1000/day
on_failure = closed
INI
start_fg red -c "$T/red.ini" --listen 127.0.0.1:0 || { bad "redis-backed server starts"; finish; }
RP=$FGPORT_red

CHECK='POST /v1/check?limit=l&key=%s HTTP/1.1\r\nHost: x\r\n\r\n'

# --- pipelining: three requests in one write, three answers in order ----
for s in mem:$M red:$RP; do
    name=${s%%:*} port=${s#*:} id=http-$name
    conn "$port"
    send "$CHECK$CHECK$CHECK" pipe pipe pipe
    resp && resp && resp
    NAME="$name: 3 pipelined checks answered in order" \
        answers_in_order 3 "$id" 999 998 997
    expect_eq "$name: pipelined answers come from the store" \
        "$(cat "$T"/r[123].b | grep -o '"source":"store"' | wc -l)" 3
    conn_close
done

# Pipelined, the last one "Connection: close": all three answered, the last
# says so, then EOF.
conn "$RP"
send "$CHECK$CHECK"'POST /v1/check?limit=l&key=pc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' pc pc
resp && resp && resp
NAME="red: pipelined, last with Connection: close: in order" answers_in_order 3 http-red 999 998 997
expect_eq "red: last pipelined answer says Connection: close" "$(rh Connection)" close
check "red: then EOF" at_eof
conn_close

# --- HTTP/1.0 and Connection ------------------------------------------------
conn "$M"
send 'GET /healthz HTTP/1.0\r\n\r\n'
resp
expect_eq "HTTP/1.0 without keep-alive: answered" "$(st) $(cat "$T/r1.b")" "200 ok"
check "HTTP/1.0 without keep-alive: then EOF" at_eof
conn_close

conn "$M"
send 'GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n'
resp
expect_eq "HTTP/1.0 keep-alive: answered with Connection: keep-alive" "$(st) $(rh Connection)" "200 keep-alive"
sleep 0.2
send 'POST /v1/check?limit=l&key=h10 HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n'
resp
expect_eq "HTTP/1.0 keep-alive: second request on the same connection" \
    "$(st) $(rh Connection) $(jf remaining)" "200 keep-alive 999"
send 'POST /v1/check?limit=l&key=h10 HTTP/1.0\r\n\r\n'
resp
expect_eq "HTTP/1.0 keep-alive: a third without keep-alive is answered" "$(st) $(jf remaining)" "200 998"
check "HTTP/1.0 keep-alive: the one without it closes" at_eof
conn_close

conn "$M"
send 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
resp
expect_eq "HTTP/1.1 Connection: close: answer says Connection: close" "$(st) $(rh Connection)" "200 close"
check "HTTP/1.1 Connection: close: then EOF" at_eof
conn_close

conn "$M"
send 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "HTTP/1.1 default: no Connection header" "$(st) [$(rh Connection)]" "200 []"
send 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
check "HTTP/1.1 default: kept open for a second request" resp
conn_close

# --- obsolete line folding -------------------------------------------------
# A header continued on a line that begins with a space or a tab is
# refused with 400 (RFC 9112 5.2), whether its first line holds part of
# the value or none; never spliced into a key.
for fold in 'X-A: al\r\n ice' 'X-A:\r\n\tice' 'Transfer-Encoding:\r\n chunked'; do
    conn "$M"
    send "POST /v1/check?limit=l&key=fold HTTP/1.1\r\nHost: x\r\n$fold\r\n\r\n"
    resp
    expect_eq "folded header '$fold': 400, the reason, the connection closed" \
        "$(st) $(grep -c 'folded over two lines' "$T/r$R.b") $(rh Connection)" "400 1 close"
    conn_close
done

# --- Expect: 100-continue --------------------------------------------------
head -c 2048 /dev/zero | tr '\0' x >"$T/2k"
out=$(curl -sv -m 5 -o "$T/b" -w '%{http_code} %{time_total}' -H 'Expect: 100-continue' \
    --data-binary @"$T/2k" "http://127.0.0.1:$M/v1/check?limit=l&key=expect" 2>"$T/curl.err")
expect_eq "curl POST 2 KB with Expect: 100-continue: 200" "${out% *}" 200
check "curl saw HTTP/1.1 100 Continue" grep -q '^< HTTP/1.1 100 Continue' "$T/curl.err"
check "curl POST with Expect: done in ${out#* } s (curl waits 1 s without a 100)" \
    awk -v t="${out#* }" 'BEGIN { exit !(t < 0.5) }'
out=$(curl -sv -m 5 -o "$T/b" -w '%{http_code} %{time_total}' -H 'Expect: 100-continue' \
    -H 'Transfer-Encoding: chunked' --data-binary @"$T/2k" \
    "http://127.0.0.1:$M/v1/check?limit=l&key=expect-chunked" 2>"$T/curl.err")
expect_eq "curl POST chunked with Expect: 100-continue: 200" "${out% *}" 200
check "curl POST chunked saw HTTP/1.1 100 Continue" grep -q '^< HTTP/1.1 100 Continue' "$T/curl.err"
check "curl POST chunked with Expect: done in ${out#* } s" \
    awk -v t="${out#* }" 'BEGIN { exit !(t < 0.5) }'
# Expect given twice: one 100 Continue, then the answer.
conn "$M"
send 'POST /v1/check?limit=l&key=expect2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nExpect: 100-continue\r\nExpect: 100-continue\r\n\r\n'
resp
s1=$(st)
send 'x'
resp
expect_eq "Expect twice: one 100 Continue, then the answer" "$s1 $(st)" "100 200"
conn_close
# A later HTTP/1.x is read as 1.1: its Expect is answered too.
conn "$M"
send 'POST /v1/check?limit=l&key=expect12 HTTP/1.2\r\nHost: x\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n'
resp
s1=$(st)
send 'x'
resp
expect_eq "HTTP/1.2 with Expect: 100 Continue, then the answer" "$s1 $(st)" "100 200"
conn_close
conn "$RP"
send 'POST /v1/check?limit=l&key=expect HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\nExpect: 100-continue\r\n\r\n'
resp
expect_eq "raw Expect: 100 Continue before the body is sent" "$(head -1 "$T/r1.h")" "HTTP/1.1 100 Continue"
cat "$T/2k" >&3
resp
expect_eq "raw Expect: then the answer once the body came" "$(st) $(jf remaining)" "200 999"
conn_close

# --- request bodies --------------------------------------------------------
conn "$M"
send 'POST /v1/check?limit=l&key=chunk HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
resp && resp
expect_eq "chunked body accepted and ignored (the next request follows)" \
    "$(st 1) $(jf remaining 1) $(st 2) $(cat "$T/r2.b")" "200 999 200 ok"
conn_close

# A chunked body's framing before any data (here 12 KB of trailer, more
# than max_header_bytes) is read and dropped like the body: answered.
trailer=$(for i in $(seq 120); do printf 'X-Trailer-%03d: %0100d\\r\\n' "$i" 0; done)
conn "$M"
send "POST /v1/check?limit=l&key=trailer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n$trailer\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
resp && resp
expect_eq "chunked body with 12 KB of trailer and no data: answered, then the next" \
    "$(st 1) $(jf remaining 1) $(st 2)" "200 999 200"
conn_close
conn "$M"
send "POST /v1/check?limit=l&key=chunkext HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0;$(head -c 12000 /dev/zero | tr '\0' e)\r\n\r\n"
resp
expect_eq "chunked body with a 12 KB chunk extension: answered" "$(st 1) $(jf remaining 1)" "200 999"
conn_close
# Bounded all the same: 200 KB of chunk extension, or of trailer, is 413.
conn "$M"
{
    printf 'POST /v1/check?limit=l&key=bigext HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0;'
    head -c 200000 /dev/zero | tr '\0' e
    printf '\r\n\r\n'
} >&3 2>/dev/null
resp
expect_eq "chunked body with a 200 KB chunk extension: 413" "$(st 1)" 413
conn_close
conn "$M"
{
    printf 'POST /v1/check?limit=l&key=bigtrailer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n'
    for i in $(seq 12000); do printf 'X-T: 1234567890\r\n'; done
    printf '\r\n'
} >&3 2>/dev/null
resp
expect_eq "chunked body with a 200 KB trailer: 413" "$(st 1)" 413
conn_close
survived "200 KB of chunk framing"

head -c 65536 /dev/zero | tr '\0' y >"$T/64k"
conn "$M"
send 'POST /v1/check?limit=l&key=b64 HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n'
cat "$T/64k" >&3
resp
expect_eq "a body of exactly 64 KB is accepted" "$(st) $(jf remaining)" "200 999"
conn_close

conn "$M"
send 'POST /v1/check?limit=l&key=big HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n'
resp
expect_eq "Content-Length 70000: 413, Connection: close" "$(st) $(rh Connection)" "413 close"
check "413: one-line JSON error" json_error
check "413: then EOF" at_eof
conn_close
survived "Content-Length 70000"
conn "$M"
send "$CHECK" big
resp
expect_eq "the refused 70000-byte request was not counted" "$(st) $(jf remaining)" "200 999"
conn_close

# 16 chunks of 4 KB are 64 KB; then one byte more.
{
    printf 'POST /v1/check?limit=l&key=cbig HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n'
    for _ in $(seq 1 16); do printf '1000\r\n'; head -c 4096 "$T/64k"; printf '\r\n'; done
} >"$T/chunk64k"
conn "$M"
{ cat "$T/chunk64k"; printf '0\r\n\r\n'; } >&3
resp
expect_eq "a chunked body of exactly 64 KB is accepted" "$(st) $(jf remaining)" "200 999"
conn_close
conn "$M"
{ cat "$T/chunk64k"; printf '1\r\nz'; } >&3
resp
expect_eq "a chunked body growing past 64 KB: 413" "$(st) $(rh Connection)" "413 close"
check "chunked 413: then EOF" at_eof
conn_close
survived "a chunked body past 64 KB"

# --- a refusal that closes is not followed by a reset -------------------
# refused PORT KIND: a request refused with KIND (431: a 16 KB header;
# 413: Content-Length 1000000), followed by 128 KB more, all written before
# reading; then everything until the server closes. Prints "status=S
# whole=1|0 error=none|"...". A server that closes a socket with unread
# input makes Linux send a reset: the client's write or read then fails
# with ECONNRESET (and over a network the answer itself can be lost).
refused() {
    perl -MSocket -e '
        my ($port, $kind) = @ARGV;
        socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
        connect($s, pack_sockaddr_in($port, inet_aton("127.0.0.1")))
            or die "connect: $!";
        $SIG{PIPE} = "IGNORE";
        my $req = "POST /v1/check?limit=l&key=r$kind HTTP/1.1\r\nHost: x\r\n";
        $req .= $kind == 431 ? "X-Big: " . ("a" x 16384) . "\r\n\r\n"
                             : "Content-Length: 1000000\r\n\r\n";
        $req .= "z" x 131072;
        my ($off, $err) = (0, "");
        while ($off < length $req) {
            my $n = syswrite($s, $req, length($req) - $off, $off);
            if (!defined $n) { $err = "write: $!"; last }
            $off += $n;
        }
        select(undef, undef, undef, 0.3); # the reset, if any, is here now
        my $got = "";
        alarm 3;
        while (1) {
            my $n = sysread($s, my $b, 65536);
            if (!defined $n) { $err ||= "read: $!"; last }
            last if $n == 0;
            $got .= $b;
        }
        my ($st) = $got =~ /^HTTP\/1\.1 (\d+) /;
        my ($cl) = $got =~ /\r\nContent-Length: (\d+)\r\n/;
        my $i = index($got, "\r\n\r\n");
        my $whole = defined $cl && $i >= 0 && length($got) == $i + 4 + $cl;
        print "status=", $st // "none", " whole=", $whole ? 1 : 0,
            " error=", $err eq "" ? "none" : "\"$err\"", "\n";' "$1" "$2"
}
for kind in 431 413; do
    expect_eq "$kind then 128 KB more: the whole answer, an end of file, no reset" \
        "$(refused "$M" $kind)" "status=$kind whole=1 error=none"
done
survived "refusals followed by more data"

# --- heads -----------------------------------------------------------------
h63=""
for i in $(seq 1 63); do h63="${h63}X-H$i: v"$'\r\n'; done
conn "$M"
send 'POST /v1/check?limit=l&key=h64 HTTP/1.1\r\nHost: x\r\n%s\r\n' "$h63"
resp
expect_eq "64 header fields: answered" "$(st) $(jf remaining)" "200 999"
conn_close
conn "$M"
send 'POST /v1/check?limit=l&key=h65 HTTP/1.1\r\nHost: x\r\n%sX-H64: v\r\n\r\n' "$h63"
resp
expect_eq "65 header fields: 431, Connection: close" "$(st) $(rh Connection)" "431 close"
check "65 header fields: the reason names the cap" grep -q 'too many header fields (at most 64)' "$T/r$R.b"
check "431: one-line JSON error" json_error
check "431: then EOF" at_eof
conn_close
survived "65 header fields"

# max_header_bytes (8192 here) bounds the whole head, however it arrives:
# a head of exactly 8192 bytes is answered, one of 8193 gets 431.
head_of() { # head_of KEY TOTAL: a request head of TOTAL bytes
    local start="POST /v1/check?limit=l&key=$1 HTTP/1.1"$'\r\n'"Host: x"$'\r\n'"X-Big: "
    local pad=$(($2 - ${#start} - 4))
    printf '%s%s\r\n\r\n' "$start" "$(head -c "$pad" /dev/zero | tr '\0' b)"
}
head_of hb8192 8192 >"$T/h8192"
head_of hb8193 8193 >"$T/h8193"
expect_eq "the heads are 8192 and 8193 bytes" "$(wc -c <"$T/h8192") $(wc -c <"$T/h8193")" "8192 8193"
conn "$M"
cat "$T/h8192" >&3
resp
expect_eq "a head of max_header_bytes: answered" "$(st) $(jf remaining)" "200 999"
conn_close
# Empty lines before a request are ignored (RFC 9112, 2.2), not counted.
conn "$M"
{ printf '\r\n\r\n\n'; head_of hb8192e 8192; } >&3
resp
expect_eq "empty lines, then a head of max_header_bytes: answered" "$(st) $(jf remaining)" "200 999"
conn_close
conn "$M"
cat "$T/h8193" >&3
resp
expect_eq "a head one byte over max_header_bytes: 431" "$(st) $(rh Connection)" "431 close"
check "head over max_header_bytes: one-line JSON error" json_error
conn_close
conn "$M"
send 'GET /healthz?%s HTTP/1.1\r\nHost: x\r\n\r\n' "$(head -c 9000 /dev/zero | tr '\0' q)"
resp
expect_eq "a 9000-byte target: 431" "$(st)" "431"
conn_close
survived "heads over max_header_bytes"

# A space in the target, a chunk size that overflows: 400, each with a
# reason that says what is wrong.
conn "$M"
send 'GET /heal thz HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "a space in the target: 400" "$(st)" 400
check "a space in the target: the reason says so" grep -q 'malformed request line' "$T/r$R.b"
conn_close
conn "$M"
send 'POST /v1/check?limit=l&key=cs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n'
resp
expect_eq "a chunk size that overflows: 400" "$(st)" 400
check "a chunk size that overflows: the reason names it" grep -q 'chunk size' "$T/r$R.b"
conn_close

# HTTP/1 only: another major version gets 505 (a later 1.x minor is read
# as 1.1, as RFC 9112 asks).
for v in 2.0 0.9; do
    conn "$M"
    send 'GET /healthz HTTP/%s\r\nHost: x\r\n\r\n' "$v"
    resp
    expect_eq "HTTP/$v: 505, Connection: close" "$(st) $(rh Connection)" "505 close"
    check "HTTP/$v: one-line JSON error" json_error
    conn_close
done
check "505s counted under their code" \
    test "$(metric "$M" 'floodgate_http_responses_total{code="505"}')" -ge 2
conn "$M"
send 'GET /healthz HTTP/1.9\r\nHost: x\r\n\r\n'
resp
expect_eq "HTTP/1.9: read as 1.1" "$(st)" "200"
conn_close
# /healthz and /metrics answer GET and HEAD only.
for path in /healthz /metrics; do
    conn "$M"
    send 'POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n' "$path"
    resp
    expect_eq "POST $path: 405, Allow: GET, HEAD" "$(st) $(rh Allow)" "405 GET, HEAD"
    conn_close
done

# A small max_header_bytes (256) holds for heads that fit one read, and
# does not reach past the head: the trailer of a chunked body is no head.
cat >"$T/small.ini" <<INI
[server]
request_timeout = 5s
max_header_bytes = 256
[limit l]
key = query:key
algorithm = fixed_window
rate = 1000/day
INI
if start_fg small -c "$T/small.ini" --listen 127.0.0.1:0; then
    S=$FGPORT_small
    head_of hs256 256 >"$T/h256"
    head_of hs257 257 >"$T/h257"
    conn "$S"
    cat "$T/h256" >&3
    resp
    expect_eq "max_header_bytes 256: a head of 256 bytes is answered" "$(st)" "200"
    conn_close
    conn "$S"
    cat "$T/h257" >&3
    resp
    expect_eq "max_header_bytes 256: a head of 257 bytes gets 431" "$(st)" "431"
    conn_close
    # A head without headers, and one whose last value is empty.
    for total in 256 257; do
        want=200; [ "$total" = 257 ] && want=431
        t="GET /healthz?p= HTTP/1.1"$'\r\n\r\n'
        conn "$S"
        send 'GET /healthz?p=%s HTTP/1.1\r\n\r\n' "$(head -c $((total - ${#t})) /dev/zero | tr '\0' p)"
        resp
        expect_eq "max_header_bytes 256: no headers, $total bytes: $want" "$(st)" "$want"
        conn_close
        t="GET /healthz?p= HTTP/1.1"$'\r\n'"X-E:"$'\r\n\r\n'
        conn "$S"
        send 'GET /healthz?p=%s HTTP/1.1\r\nX-E:\r\n\r\n' "$(head -c $((total - ${#t})) /dev/zero | tr '\0' p)"
        resp
        expect_eq "max_header_bytes 256: an empty last value, $total bytes: $want" "$(st)" "$want"
        conn_close
        # Lines that end in a bare LF: their bytes, no more, count.
        t="GET /healthz?p= HTTP/1.1"$'\n'"X-L: v"$'\n\n'
        conn "$S"
        send 'GET /healthz?p=%s HTTP/1.1\nX-L: v\n\n' "$(head -c $((total - ${#t})) /dev/zero | tr '\0' p)"
        resp
        expect_eq "max_header_bytes 256: LF line ends, $total bytes: $want" "$(st)" "$want"
        conn_close
        t="GET /healthz?p= HTTP/1.1"$'\n\n'
        conn "$S"
        send 'GET /healthz?p=%s HTTP/1.1\n\n' "$(head -c $((total - ${#t})) /dev/zero | tr '\0' p)"
        resp
        expect_eq "max_header_bytes 256: no headers, LF line ends, $total bytes: $want" "$(st)" "$want"
        conn_close
    done
    conn "$S"
    send 'POST /v1/check?limit=l&key=trailer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n' "$(head -c 1000 /dev/zero | tr '\0' z)"
    resp
    expect_eq "max_header_bytes 256: a trailer after a 1000-byte body is no head" "$(st)" "200"
    conn_close
    # A long trailer arriving over several reads is dropped with the body,
    # never kept (under the sanitizers, a stale span would be caught).
    conn "$S"
    send 'POST /v1/check?limit=l&key=trailer2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-T: %s' "$(head -c 5000 /dev/zero | tr '\0' v)"
    sleep 0.2
    send '%s\r\n\r\n' "$(head -c 15000 /dev/zero | tr '\0' v)"
    resp
    expect_eq "a 20,000-byte trailer over several reads: answered" "$(st)" "200"
    conn_close
    S_OK=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$S/healthz")
    expect_eq "the server survived the long trailer" "$S_OK" 200
else
    bad "server with max_header_bytes 256 starts"
fi

# A method that merely starts like HEAD gets its 400 with the body it
# declares (an answer to HEAD has none; this is not one).
for m in HELLO HXYZ; do
    conn "$M"
    send '%s / HTTP/1.1\r\nHost: x\r\n\r\n' "$m"
    resp
    expect_eq "method $m: 400, Connection: close" "$(st) $(rh Connection)" "400 close"
    check "method $m: the body its Content-Length declares" [ "$(blen)" = "$(rh Content-Length)" ]
    check "method $m: one-line JSON error" json_error
    conn_close
done

conn "$M"
send 'this is not http\r\n\r\n'
resp
expect_eq "garbage request line: 400, Connection: close" "$(st) $(rh Connection)" "400 close"
check "garbage: one-line JSON error ($(head -c 100 "$T/r1.b" | tr -d '\n'))" json_error
check "garbage: then EOF" at_eof
conn_close
survived "a garbage request line"

conn "$M"
send 'GET /healthz HTTP/1.1\r\nHost: a\0b\r\n\r\n'
resp
expect_eq "NUL in a header value: 400" "$(st)" 400
check "NUL: one-line JSON error" json_error
conn_close
survived "NUL in a header value"
conn "$M"
send 'GET /heal\0thz HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "NUL in the request target: 400" "$(st)" 400
conn_close
survived "NUL in the request target"
# A blank before the colon (RFC 9112 5.1): refused, not read as the name
# without it, which a proxy in front may read otherwise.
conn "$M"
send 'GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n'
resp
expect_eq "blank before a header's colon: 400" "$(st)" 400
check "blank before a colon: says why" grep -q 'blank in a header name' "$T/r1.b"
conn_close
survived "a blank before a header's colon"
# Nor is what follows it read as a request: a proxy in front may have read
# that head otherwise (a 'Transfer-Encoding : chunked' it took for the
# framing), and sent those bytes as its body.
conn "$M"
send 'POST /v1/check?limit=l&key=sm HTTP/1.1\r\nHost: x\r\nX-Framing : 1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "blank before a colon, then a pipelined request: 400" "$(st)" 400
expect_eq "that 400 says the connection closes" "$(rh Connection)" close
check "the bytes after it are not answered as a request: EOF" at_eof
conn_close
survived "bytes after a refused head"
conn "$M"
send 'GET /healthz HTTP/1.1\r\nHost: a\rb\r\n\r\n'
resp
expect_eq "bare CR in a header value: 400" "$(st)" 400
conn_close
survived "bare CR in a header value"
conn "$M"
send 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\rX-B: 2\r\n\r\n'
resp
expect_eq "bare CR as a header line end: 400" "$(st)" 400
conn_close
survived "bare CR as a header line end"
conn "$M"
send 'GET /healthz HTTP/1.1\rHost: x\r\n\r\n'
resp
expect_eq "bare CR ending the request line: 400" "$(st)" 400
conn_close
survived "bare CR ending the request line"

conn "$M"
send 'POST http://x/v1/check?limit=l&key=abs HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "absolute-form target" "$(st) $(jf remaining) $(grep -o '"name":"l"' "$T/r1.b")" '200 999 "name":"l"'
conn_close

# --- HEAD ------------------------------------------------------------------
conn "$M"
send 'HEAD /v1/auth?limit=l&key=hd HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/auth?limit=l&key=hd HTTP/1.1\r\nHost: x\r\n\r\n'
resp nobody && resp
expect_eq "HEAD /v1/auth: 200 with the RateLimit header" "$(st 1) $(rh RateLimit 1)" '200 "l";r=999;t='"$(rh RateLimit 1 | sed 's/.*t=//')"
expect_eq "HEAD: no body, the next answer on the connection parses" "$(st 2) $(jf remaining 2)" "200 998"
expect_eq "HEAD: Content-Length is the GET body's length" "$(rh Content-Length 1)" "$(blen 2)"
conn_close

# --- a request in single bytes, 1 ms apart ----------------------------------
req=$'POST /v1/check?limit=l&key=bytes HTTP/1.1\r\nHost: x\r\nX-Pad: byte-by-byte\r\n\r\n'
conn "$RP"
t0=$(date +%s%N)
for ((i = 0; i < ${#req}; i++)); do
    printf '%s' "${req:i:1}" >&3
    sleep 0.001
done
ms=$((($(date +%s%N) - t0) / 1000000))
resp
expect_eq "request sent in ${#req} single bytes over $ms ms: answered" "$(st) $(jf remaining)" "200 999"
conn_close

# --- a client that half-closes at once --------------------------------------
for s in mem:$M red:$RP; do
    name=${s%%:*} port=${s#*:} id=http-$name
    printf "$CHECK" half | halfclose "$port" >"$T/half.out" 2>"$T/half.err"
    exec 3<"$T/half.out"
    R=0
    resp
    expect_eq "$name: request then shutdown(SHUT_WR): answered" "$(st) $(jf remaining)" "200 999"
    check "$name: then the server closes (all read)" at_eof
    exec 3<&-
    printf "$CHECK$CHECK$CHECK" half3 half3 half3 | halfclose "$port" >"$T/half.out" 2>"$T/half.err"
    exec 3<"$T/half.out"
    R=0
    resp && resp && resp
    NAME="$name: 3 pipelined then shutdown(SHUT_WR): all answered" answers_in_order 3 "$id" 999 998 997
    check "$name: then the server closes" at_eof
    exec 3<&-
done

# --- clients that vanish while their request waits on Redis ----------------
# Each round Redis sleeps 0.3 s; meanwhile one client sends a check and
# closes at once (FIN), another has its /healthz answer unread and its check
# waiting when it closes (the kernel resets: the server's recv fails while
# the request is in hand).
redis-cli -p "$RPORT" DEBUG SLEEP 0.3 >"$T/dbg" 2>&1 &
sp=$!
# Until Redis sleeps: a PING it leaves unanswered for 50 ms.
for _ in $(seq 1 40); do timeout 0.05 redis-cli -p "$RPORT" ping >/dev/null 2>&1 || break; done
out=$(curl -s -m 3 -o /dev/null -w '%{http_code} %{time_total}' -X POST "http://127.0.0.1:$RP/v1/check?limit=l&key=probe")
wait "$sp"
check "DEBUG SLEEP 0.3 holds a check made meanwhile ($out s; redis-cli: $(cat "$T/dbg"))" \
    awk -v c="${out% *}" -v t="${out#* }" 'BEGIN { exit !(c == 200 && t >= 0.1) }'
printf "$CHECK" gone >"$T/gone.req"
printf 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'"$CHECK" gone2 >"$T/gone2.req"
for i in $(seq 1 20); do
    redis-cli -p "$RPORT" DEBUG SLEEP 0.3 >/dev/null &
    sp=$!
    sleep 0.03
    exec 4<>"/dev/tcp/127.0.0.1/$RP"
    cat "$T/gone.req" >&4
    exec 4<&- 4>&-
    exec 4<>"/dev/tcp/127.0.0.1/$RP"
    cat "$T/gone2.req" >&4
    sleep 0.02
    exec 4<&- 4>&-
    wait "$sp"
done
check "vanishing clients: server still running" kill -0 "$FGPID_red"
expect_eq "vanishing clients: /healthz" "$(http GET "http://127.0.0.1:$RP/healthz")" 200
# Every abandoned check reached Redis and was counted (20 each).
conn "$RP"
send "$CHECK$CHECK" gone gone2
resp && resp
expect_eq "vanishing clients: their 20 + 20 checks were all made" \
    "$(jf remaining 1) $(jf remaining 2)" "979 979"
conn_close
check "vanishing clients: no error in the server log" \
    bash -c "! grep -iE 'error|fail|abort' '$T/red.log'"

# --- 200 connections aborted mid-request ------------------------------------
t0=$(date +%s%N)
fds=""
for i in $(seq 1 200); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$M" || break
    printf 'POST /v1/check?limit=l&key=abort HTTP/1.1\r\nHost: x\r\nX-Pad: ' >&$fd
    fds="$fds $fd"
done
n=0
for _ in $(seq 1 25); do # a sweep (1 s) updates the gauge
    n=$(metric "$M" floodgate_connections)
    [ "${n:-0}" -ge 200 ] && break
    sleep 0.1
done
check "200 half-sent requests counted in floodgate_connections ($n)" [ "${n:-0}" -ge 200 ]
for fd in $fds; do exec {fd}>&-; done
left=""
while [ $((($(date +%s%N) - t0) / 1000000)) -lt 4700 ]; do
    left=$(metric "$M" floodgate_connections)
    [ "${left:-999}" -le 3 ] && break
    sleep 0.1
done
check "aborted connections gone from floodgate_connections before request_timeout ($left)" \
    [ "${left:-999}" -le 3 ]

# --- unknown methods ---------------------------------------------------------
conn "$M"
send 'DELETE /v1/check?limit=l&key=del HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "DELETE /v1/check: 405 with Allow: POST" "$(st) $(rh Allow)" "405 POST"
check "405: one-line JSON error" json_error
send 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
resp
expect_eq "after 405 the connection goes on" "$(st)" 200
send 'BREW / HTTP/1.1\r\nHost: x\r\n\r\n'
resp
check "BREW /: a 4xx ($(st))" grep -q '^HTTP/1.1 4[0-9][0-9] ' "$T/r3.h"
conn_close
survived "BREW /"

# --- both servers stop cleanly (a sanitizer's exit report lands in the log) --
for s in mem red; do
    pid=$MPID
    [ $s = red ] && pid=$FGPID_red
    kill -TERM "$pid"
    wait "$pid"
    expect_eq "$s: exits 0 on SIGTERM" "$?" 0
done
finish
