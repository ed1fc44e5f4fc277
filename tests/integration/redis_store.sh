#!/usr/bin/env bash
# redis_store.sh -- the Redis store against real redis-server processes
# started here on free loopback ports in a temp folder, stopped by a trap:
# C vs Lua vectors, eight racing processes per algorithm, SCRIPT FLUSH,
# SIGSTOP/SIGKILL/restart, binary keys, bad passwords, databases and
# addresses, and `floodgate check --store redis://`.
set -u
cd "$(dirname "$0")/../.."
# BUILD may be relative to the repository or absolute (make BUILD=/abs).
BUILD=$(realpath -m "${BUILD:-build}")
FLOODGATE=${FLOODGATE:-$BUILD/floodgate}
TOOL=$BUILD/redis/redis_check
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if ! command -v redis-server >/dev/null || ! command -v ss >/dev/null ||
    [ ! -x "$TOOL" ]; then
    echo "redis-server, ss (iproute2) or $TOOL missing"
    echo "0 passed, 1 failed"
    exit 1
fi

DIR=$(mktemp -d)
BG=""
cleanup() {
    [ -n "$BG" ] && kill "$BG" 2>/dev/null
    for f in "$DIR"/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null)
        [ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null
        [ -n "$pid" ] && kill "$pid" 2>/dev/null
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null
    done
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

# A loopback port no socket uses (ss: any TCP state) and not handed out
# before in this run, below the kernel's ephemeral range (32768-60999) so
# no outgoing connection takes it meanwhile. Also the port that must
# refuse connections.
free_port() {
    local p
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 12000))
        grep -qx "$p" "$DIR/ports" 2>/dev/null && continue
        [ -z "$(ss -Htan "sport = :$p")" ] || continue
        echo "$p" >>"$DIR/ports"
        echo "$p"
        return 0
    done
    return 1
}

# start NAME PORT [extra redis-server args]: daemonized, pid in $DIR/NAME.pid
start() {
    local name=$1 port=$2
    shift 2
    redis-server --port "$port" --bind 127.0.0.1 --dir "$DIR" \
        --daemonize yes --pidfile "$DIR/$name.pid" --save '' \
        --appendonly no --logfile "$DIR/$name.log" \
        --unixsocket "$DIR/$name.sock" --unixsocketperm 700 "$@" >/dev/null ||
        return 1
    for _ in $(seq 100); do
        [ -S "$DIR/$name.sock" ] && [ -s "$DIR/$name.pid" ] && return 0
        sleep 0.02
    done
    return 1
}

# run a redis_check mode; add its "N passed, N failed" to ours.
run() {
    local out last p f
    out=$(timeout 40 "$TOOL" "$@" 2>&1)
    local rc=$?
    echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
    last=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$last" ]; then
        bad "redis_check $1 (exit $rc, no summary)"
        return
    fi
    p=${last%% passed*}
    f=${last#*, }
    f=${f%% failed}
    pass=$((pass + p))
    fail=$((fail + f))
    [ "$rc" -eq 0 ] || [ "$f" -ne 0 ] || bad "redis_check $1 exit $rc"
}

PORT=$(free_port)
start main "$PORT" || { bad "redis-server did not start"; echo "$pass passed, $fail failed"; exit 1; }
URL="redis://127.0.0.1:$PORT"

# 1. The same vectors through the C algorithm and the Lua twin.
run vectors "$URL"

# 2. Eight processes, 30 checks each, limit 10, blocking and async.
for algo in fixed_window sliding_window token_bucket naive_get_set; do
    for mode in sync async; do
        run race "$URL" "$algo" "$mode" 8 30 10
    done
done

# A store opened before fork(): refused in the children, exact overall.
run fork "$URL"

# 3. Threads sharing one store; SCRIPT FLUSH between checks; binary keys
#    and the length limit; allocation failures.
run threads "$URL"
run flush "$URL"
run batch "$URL"
run slow "$URL"
run expiry "$URL"
run clock_back "$URL"
run refund "$URL"
run sync_threads "$URL"
# The commands of a mode counted (fg_limiter_asks); it shuts its Redis down.
ASKPORT=$(free_port)
if start asks "$ASKPORT"; then
    run mode_asks "redis://127.0.0.1:$ASKPORT"
else
    bad "a Redis for mode_asks"
fi
# Threads sharing a sync or lease limiter, each reply 30 ms late.
"$BUILD/fault/faultproxy" -u "$PORT" >"$DIR/px.out" 2>"$DIR/px.log" &
echo $! >"$DIR/px.pid"
for _ in $(seq 1 200); do grep -q control= "$DIR/px.out" 2>/dev/null && break; sleep 0.01; done
PXPORT=$(sed -n 's/^listen=\([0-9]*\) .*/\1/p' "$DIR/px.out")
PXCTL=$(sed -n 's/.* control=\([0-9]*\)$/\1/p' "$DIR/px.out")
if [ -n "$PXCTL" ] && exec {pfd}<>"/dev/tcp/127.0.0.1/$PXCTL" &&
    echo "latency 30 0" >&"$pfd" && read -r _ <&"$pfd"; then
    exec {pfd}<&-
    run mode_threads "redis://127.0.0.1:$PXPORT" 30 "$PXCTL"
else
    bad "faultproxy starts"
fi
kill "$(cat "$DIR/px.pid")" 2>/dev/null
run dns "redis://localhost:$PORT"
run keys "$URL"
run poison "$URL"
run keys "unix://$DIR/main.sock?db=2&prefix=u:"
run allocfail "$URL"

# 4. Clear errors at open: wrong password, no password, wrong database,
#    nothing listening. The password never appears.
APORT=$(free_port)
start auth "$APORT" --requirepass 's3cret-pw' || bad "auth redis did not start"
expect_open() { # URL WORDS...
    local url=$1 msg
    shift
    msg=$(timeout 10 "$TOOL" open "$url" 2>&1 | head -n 1)
    for w in "$@"; do
        case "$msg" in *"$w"*) ok ;; *) bad "open: '$msg' lacks '$w'" ;; esac
    done
    case "$msg" in *s3cret*|*wrong-pw*) bad "password in: $msg" ;; *) ok ;; esac
    echo "open: $msg"
}
expect_open "redis://:wrong-pw@127.0.0.1:$APORT" "authentication failed"
expect_open "redis://default:wrong-pw@127.0.0.1:$APORT" "authentication failed"
expect_open "redis://127.0.0.1:$APORT" "requires a password"
expect_open "redis://:s3cret-pw@127.0.0.1:$APORT/3" "opened"
expect_open "redis://127.0.0.1:$PORT/99" "cannot select database 99"
# A password for a server that has none: Redis's whole reason, not cut.
expect_open "redis://:wrong-pw@127.0.0.1:$PORT" "authentication failed" "Are you sure your configuration is correct?)"
DEAD=$(free_port)
expect_open "redis://127.0.0.1:$DEAD" "cannot connect" "refused"
expect_open "unix://$DIR/none.sock" "cannot connect"
expect_open "redis://no-such-host.invalid:$DEAD" "cannot resolve"
expect_open "redis://127.0.0.1:$PORT?prefix=x&color=red" "unknown parameter"
# A server at maxclients refuses, then closes: its refusal is the reason,
# with or without a password (AUTH, SELECT or a script's load first).
exec 3<>"/dev/tcp/127.0.0.1/$APORT"
printf 'AUTH s3cret-pw\r\nCONFIG SET maxclients 1\r\n' >&3
read -r -t 5 _ <&3
read -r -t 5 _ <&3
expect_open "redis://:s3cret-pw@127.0.0.1:$APORT" "connection refused" "max number of clients"
expect_open "redis://:s3cret-pw@127.0.0.1:$APORT/3" "connection refused" "max number of clients"
printf 'CONFIG SET maxclients 10000\r\n' >&3
read -r -t 5 _ <&3
exec 3>&-
# A server on the port that speaks another protocol (HTTP): a protocol
# error, on the blocking and the async client.
run foreign

# 5. Errors Redis answers with are defined outcomes: OOM (maxmemory 1),
#    READONLY (a replica), BUSY (a script that never ends). Each reaches the
#    limiter as its code and the limit fails closed.
OPORT=$(free_port) RPORT=$(free_port) BPORT=$(free_port)
start oom "$OPORT" --maxmemory 1 --maxmemory-policy noeviction &&
    run expect "redis://127.0.0.1:$OPORT" "backend out of memory" ||
    bad "oom redis did not start"
start ro "$RPORT" --replicaof 127.0.0.1 "$DEAD" &&
    run expect "redis://127.0.0.1:$RPORT" "backend is read-only" ||
    bad "replica redis did not start"
if start busy "$BPORT" --busy-reply-threshold 20; then
    redis-cli -p "$BPORT" EVAL "while true do end" 0 >/dev/null 2>&1 &
    BG=$!
    sleep 0.1
    run expect "redis://127.0.0.1:$BPORT" "backend busy"
    redis-cli -p "$BPORT" SCRIPT KILL >/dev/null 2>&1
    wait "$BG" 2>/dev/null
    BG=""
else
    bad "busy redis did not start"
fi

# 6. floodgate check --store redis:// (DESIGN.md 7).
if [ -x "$FLOODGATE" ]; then
    for algo in fixed_window sliding_window token_bucket; do
        key="cli-$algo-$$-$RANDOM"
        out=$("$FLOODGATE" check --store "$URL" --limit 3/h --algorithm "$algo" \
            --key "$key" --count 5 --timeout 500 2>&1)
        rc=$?
        last=$(echo "$out" | tail -n 1)
        [ "$last" = "allowed=3 limited=2" ] && [ "$rc" -eq 1 ] && ok ||
            bad "floodgate check $algo: '$last' exit $rc"
    done
    out=$("$FLOODGATE" check --store "redis://:wrong-pw@127.0.0.1:$APORT" \
        --limit 3/h --key k 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && ok || bad "check with a wrong password exit $rc"
    case "$out" in *wrong-pw*) bad "password printed: $out" ;; *) ok ;; esac
    # Options are spelled whole: '--re' is not --reset (which would clear
    # the key in the shared store), and a value is not another option.
    # (--timeout 2000: the 5 ms default can run out on a loaded machine.)
    key="cli-abbrev-$$"
    "$FLOODGATE" check --store "$URL" --timeout 2000 --limit 3/h --key "$key" >/dev/null
    out=$("$FLOODGATE" check --store "$URL" --timeout 2000 --limit 3/h --key "$key" --re 2>&1)
    rc=$?
    left=$("$FLOODGATE" check --store "$URL" --timeout 2000 --limit 3/h --key "$key" --peek 2>&1)
    [ "$rc" -eq 2 ] && [ "$out" = "floodgate check: unknown option '--re' (did you mean --reset? options are spelled whole)" ] &&
        case "$left" in *remaining=2*) true ;; *) false ;; esac && ok ||
        bad "an abbreviated option: exit $rc, '$out', key after it: '$left'"
    out=$("$FLOODGATE" check --store "$URL" --limit --key "$key" 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && [ "$out" = "floodgate check: --limit needs a value (one that begins with -- is given as --limit=VALUE)" ] &&
        ok || bad "an option with no value: exit $rc, '$out'"
    # A decision the store did not make says only what is known: the limit,
    # the policy's answer, its source and why; what is left and when the
    # limit is whole again are null (JSON) or absent (line), not invented.
    # lazy=1: the store opens with nothing listening, and every check fails.
    lazy="redis://127.0.0.1:$DEAD?lazy=1"
    expect_check() { # WANT_RC WANT_STDOUT ARGS...
        local want_rc=$1 want=$2 got rc
        shift 2
        got=$("$FLOODGATE" check --store "$lazy" --limit 10/s --key k "$@" \
            2>"$DIR/check.err")
        rc=$?
        [ "$got" = "$want" ] && [ "$rc" -eq "$want_rc" ] && ok ||
            bad "floodgate check $*: '$got' exit $rc, want '$want' exit $want_rc"
    }
    why="backend unavailable: redis 127.0.0.1:$DEAD db 0: cannot connect: Connection refused"
    expect_check 2 '{"allowed":true,"limit":10,"remaining":null,"reset_ms":null,"retry_after_ms":0,"reset_us":null,"retry_after_us":0,"source":"fail_open","error":"'"$why"'"}' --json
    expect_check 2 '{"allowed":false,"limit":10,"remaining":null,"reset_ms":null,"retry_after_ms":1000,"reset_us":null,"retry_after_us":1000000,"source":"fail_closed","error":"'"$why"'"}' --json --on-failure closed
    expect_check 2 'allowed source=fail_open' --on-failure open
    expect_check 2 'limited retry_after_ms=1000 source=fail_closed' --on-failure closed
    expect_check 2 "$(printf 'allowed source=fail_open\nallowed source=fail_open\nallowed=2 limited=0')" --count 2
    # The reason goes to stderr once, with the policy that decided.
    grep -qx "floodgate check: store: $why; decided by on_failure=open" \
        "$DIR/check.err" && [ "$(wc -l <"$DIR/check.err")" -eq 1 ] && ok ||
        bad "floodgate check stderr: $(cat "$DIR/check.err")"
    # The local fallback decides for real: its figures are printed.
    expect_check 2 '{"allowed":true,"limit":10,"remaining":9,"reset_ms":100,"retry_after_ms":0,"reset_us":100000,"retry_after_us":0,"source":"local","error":"'"$why"'"}' --json --on-failure local
    # The reason is a JSON string even when the address holds a quote and
    # a backslash.
    got=$("$FLOODGATE" check --store "unix://$DIR/a\"b\\c.sock?lazy=1" \
        --limit 10/s --key k --json 2>/dev/null)
    case "$got" in
    *'"error":"backend unavailable: redis '"$DIR"'/a\"b\\c.sock db 0: cannot connect: No such file or directory"}') ok ;;
    *) bad "floodgate check, error escaped: '$got'" ;;
    esac
    # Without lazy=1 the store refuses to open: no decision at all.
    got=$("$FLOODGATE" check --store "redis://127.0.0.1:$DEAD" --limit 10/s \
        --key k --json 2>"$DIR/check.err")
    rc=$?
    [ -z "$got" ] && [ "$rc" -eq 2 ] &&
        grep -q "cannot connect: Connection refused" "$DIR/check.err" && ok ||
        bad "floodgate check, nothing listening: '$got' exit $rc"
    # A sync burst stopped by SIGTERM, or by its reader going away, sends
    # what it admitted before it ends (sync:10s: no tick meanwhile), and
    # ends of that signal. A fixed window: nothing refills.
    used() { # used KEY: units the store counts for KEY of 1000000/h
        local left
        left=$("$FLOODGATE" check --store "$URL" --limit 1000000/h --algorithm fixed_window \
            --name sig --key "$1" --peek | sed -n 's/^remaining=\([0-9]*\).*/\1/p')
        echo $((1000000 - ${left:-1000000}))
    }
    "$FLOODGATE" check --store "$URL" --limit 1000000/h --algorithm fixed_window --name sig \
        --key "t$$" --mode sync:10s --count 100000000 >"$DIR/sig.out" 2>&1 &
    cpid=$!
    sleep 0.5
    kill -TERM $cpid
    wait $cpid
    rc=$?
    n=$(grep -c '^allowed' "$DIR/sig.out")
    u=$(used "t$$")
    [ "$rc" = 143 ] && [ "$n" -gt 1 ] && [ "$u" = "$n" ] && ok ||
        bad "floodgate check --mode sync, SIGTERM: exit $rc, $n admitted, the store counts $u"
    "$FLOODGATE" check --store "$URL" --limit 1000000/h --algorithm fixed_window --name sig \
        --key "p$$" --mode sync:10s --count 100000000 2>/dev/null | head -200 >"$DIR/pipe.out"
    rc=${PIPESTATUS[0]}
    u=$(used "p$$")
    [ "$rc" = 141 ] && [ "$(wc -l <"$DIR/pipe.out")" = 200 ] && [ "$u" -ge 200 ] && ok ||
        bad "floodgate check --mode sync | head -200: exit $rc, the store counts $u"
else
    echo "skip: $FLOODGATE not built"
fi

# 6b. A clean restart (SHUTDOWN) between two checks: the blocking client's
# pooled connection, closed by the server, is not used for the next.
run restart "$URL" "redis-cli -p $PORT shutdown nosave >/dev/null 2>&1; redis-server --port $PORT --bind 127.0.0.1 --dir $DIR --daemonize yes --pidfile $DIR/main.pid --save '' --appendonly no --logfile $DIR/main.log; for i in \$(seq 100); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.01; done"

# 7. Stop, kill and restart the server under checks (last: it kills it).
RESTART="redis-server --port $PORT --bind 127.0.0.1 --dir $DIR --daemonize yes --pidfile $DIR/main.pid --save '' --appendonly no --logfile $DIR/main.log; for i in \$(seq 100); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.01; done"
run outage "$URL" "$(cat "$DIR/main.pid")" "$RESTART"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
