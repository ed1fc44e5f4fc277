# tests/serve/lib.sh -- helpers for the floodgate serve integration tests.
# Sourced by tests/integration/serve_*.sh. Everything started is recorded
# and stopped by the EXIT trap, with the temp folder.
set -u
# A hard bound on the whole script, whatever happens: re-run under timeout.
# A sanitizer build runs each step several times slower, and a shared
# machine slower still: three times the bound then (it is there to stop a
# hang, not to time the script).
if [ -z "${FG_UNDER_TIMEOUT:-}" ]; then
    fg_bound=${FG_TEST_BOUND:-55}
    case "${BUILD:-}" in *asan*) fg_bound=$((fg_bound * 3)) ;; esac
    FG_UNDER_TIMEOUT=1 exec timeout -k 3 "$fg_bound" bash "$0" "$@"
fi
: "${FLOODGATE:?FLOODGATE must point at the floodgate binary}"
BUILD=${BUILD:-build}
FGLOAD="$BUILD/tests/serve/fgload"
T=$(mktemp -d "${TMPDIR:-/tmp}/fgserve.XXXXXX")
PIDS=""
PASS=0
FAIL=0

# TERM first (nginx's master stops its workers), KILL what is left.
cleanup() {
    local p
    for p in $PIDS; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 1 100); do
        local alive=0
        for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.01
    done
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 1' TERM INT

ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
# Time the hypervisor gave other guests ("steal"), which no run-queue
# accounting sees: steal_mark starts a period; timed NAME COND... judges a
# latency bound like check, unless more than 3% of the CPU time since the
# mark was stolen, when it is reported and not judged.
steal_now() { awk '/^cpu / { print $9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }
steal_mark() { STEAL0=$(steal_now); }
steal_mark
timed() {
    local name=$1; shift
    local s0 t0 s1 t1
    read -r s0 t0 <<<"${STEAL0:-0 0}"
    read -r s1 t1 <<<"$(steal_now)"
    local pct=$(( (t1 > t0) ? 100 * (s1 - s0) / (t1 - t0) : 0 ))
    if "$@"; then ok "$name"
    elif [ "$pct" -gt 3 ]; then ok "$name: NOT JUDGED, $pct% of the CPU stolen by the host"
    else bad "$name"; fi
}
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
check() { # check NAME COND-COMMAND...
    local name=$1; shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}
expect_eq() { # expect_eq NAME GOT WANT
    if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi
}
# field OUT NAME: the value of NAME=... in fgload's summary line OUT.
field() { echo "$1" | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }
finish() {
    # Sanitizer reports of any server started here fail the test.
    if grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T"/*.log 2>/dev/null; then
        bad "sanitizer report in a server log"
        grep -h -A 20 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T"/*.log | head -60
    fi
    # A failed run shows how each server's log ends: a server that died
    # (a signal, a sanitizer) says why there, and the folder goes with it.
    if [ "$FAIL" -ne 0 ]; then
        local f
        for f in "$T"/*.log; do
            [ -s "$f" ] || continue
            echo "--- the end of $(basename "$f"):"
            tail -n 15 "$f"
        done
    fi
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
    exit $?
}

# A loopback TCP port nobody listens on now, below the ephemeral range
# (32768 and up) so that no outgoing connection holds it either.
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + (RANDOM * 32768 + RANDOM + BASHPID) % 12000))
        if ! ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
            echo "$p"; return 0
        fi
    done
    return 1
}

# start_redis: sets RPORT and RPID.
start_redis() {
    local i
    for i in 1 2 3 4 5; do
        RPORT=$(free_port)
        mkdir -p "$T/redis"
        redis-server --port "$RPORT" --bind 127.0.0.1 --save '' \
            --appendonly no --dir "$T/redis" --logfile "$T/redis/log" &
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

# restart_redis on the same port (after a kill): sets RPID.
restart_redis() {
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$T/redis" --logfile "$T/redis/log" &
    RPID=$!
    PIDS="$PIDS $RPID"
    for _ in $(seq 1 100); do
        redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.02
    done
    return 1
}

# start_fg NAME ARGS...: starts floodgate serve; sets FGPID_NAME and
# FGPORT_NAME once it printed event=listening (at most 3 s).
start_fg() {
    local name=$1; shift
    "$FLOODGATE" serve "$@" 2>"$T/$name.log" &
    local pid=$!
    PIDS="$PIDS $pid"
    eval "FGPID_$name=$pid"
    for _ in $(seq 1 300); do
        if grep -q 'event=listening' "$T/$name.log" 2>/dev/null; then
            local port
            port=$(grep -o 'event=listening addr=[^ ]*' "$T/$name.log" | head -1 | sed 's/.*://')
            eval "FGPORT_$name=$port"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    echo "floodgate serve $name did not start:" >&2
    cat "$T/$name.log" >&2
    return 1
}

# rss_anon NAME: the anonymous RSS (KB) of serve NAME.
rss_anon() { eval "awk '/^RssAnon:/ { print \$2 }' /proc/\$FGPID_$1/status"; }

# reload_fg NAME SETTLE: SIGHUP to serve NAME, then wait until the reload
# is logged (3 s at most) and SETTLE seconds more for the workers to take it.
reload_fg() {
    local pid n0
    eval "pid=\$FGPID_$1"
    n0=$(grep -c 'event=reload result=ok' "$T/$1.log")
    kill -HUP "$pid"
    for _ in $(seq 1 300); do
        [ "$(grep -c 'event=reload result=ok' "$T/$1.log")" -gt "$n0" ] && break
        sleep 0.01
    done
    sleep "$2"
}

# http METHOD URL [curl args...]: prints "STATUS" and saves headers/body
# to $T/h and $T/b.
http() {
    local m=$1 u=$2; shift 2
    curl -s -m 5 -X "$m" -D "$T/h" -o "$T/b" -w '%{http_code}' "$@" "$u"
}
header() { # header NAME: value of NAME in $T/h
    grep -i "^$1:" "$T/h" | head -1 | sed 's/^[^:]*: *//' | tr -d '\r'
}
