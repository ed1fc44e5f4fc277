# tests/fault/lib.sh -- the setup of the fault tests: a real redis-server
# (an ACL user, DEBUG allowed from loopback), a second one to replicate
# from (READONLY), the fault proxy in front of the first, one floodgate
# serve on the proxy, and the plan runner. Sourced after tests/serve/lib.sh
# by tests/integration/faults_*.sh; tests/fault/fault.sh starts and ends
# each fault with the variables exported here.
FAULTPROXY="$BUILD/fault/faultproxy" # built by mk/fault.mk
FAULTCHECK="$BUILD/fault/faultcheck"
FAULT_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/fault.sh"
export T FAULT_SH
# Under AddressSanitizer freed memory stays resident in its quarantine: a
# small one keeps RSS readable (see serve_backpressure.sh).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
# fault.sh records what it starts (Redis restarted) in $T/pids.
: >"$T/pids"
fault_cleanup() {
    local p
    for p in $(cat "$T/pids" 2>/dev/null); do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    cleanup
}
trap fault_cleanup EXIT

# fault_setup: sets RPORT RPORT2 PPORT CPORT (exported), URL, and starts
# serve as "fg" on the proxy with the limits faultcheck asks for.
fault_setup() {
    mkdir -p "$T/redis" "$T/redis2"
    RPORT=$(free_port) || return 1
    export RPORT
    bash "$FAULT_SH" start || return 1
    RPORT2=$(free_port) || return 1
    export RPORT2
    redis-server --port "$RPORT2" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$T/redis2" --logfile "$T/redis2/log" &
    PIDS="$PIDS $!"
    "$FAULTPROXY" -u "$RPORT" >"$T/proxy.out" 2>"$T/proxy.log" &
    PIDS="$PIDS $!"
    for _ in $(seq 1 200); do
        grep -q control= "$T/proxy.out" 2>/dev/null && break
        sleep 0.01
    done
    PPORT=$(sed -n 's/^listen=\([0-9]*\) .*/\1/p' "$T/proxy.out")
    CPORT=$(sed -n 's/.* control=\([0-9]*\)$/\1/p' "$T/proxy.out")
    [ -n "$PPORT" ] && [ -n "$CPORT" ] || return 1
    export PPORT CPORT
    for _ in $(seq 1 200); do
        redis-cli -p "$RPORT2" ping 2>/dev/null | grep -q PONG && break
        sleep 0.01
    done
    URL="redis://fg:pw1@127.0.0.1:$PPORT"
    cat >"$T/fg.ini" <<INI
[server]
workers = 2
[store]
url = $URL
prefix = fc$$:
timeout = 5ms
[limit open_l]
key = query:key
algorithm = token_bucket
rate = 100000/h
on_failure = open
[limit closed_l]
key = query:key
algorithm = fixed_window
rate = 100000/h
on_failure = closed
[limit local_l]
key = query:key
algorithm = sliding_window
rate = 100000/h
on_failure = local
fallback_servers = 4
[limit exact_l]
key = query:key
algorithm = fixed_window
rate = 5/h
on_failure = closed
timeout = 500ms
INI
    start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0
}

# fault_plan NAME DURING_MS...: the plan's lines, each fault started and
# ended by fault.sh. Only the ACL fault may be reported as an
# authentication failure (a full server, say, must not).
fault_plan() {
    local n d never
    while [ $# -gt 1 ]; do
        n=$1 d=$2
        shift 2
        never="backend authentication failed"
        [ "$n" = acl ] && never=""
        printf '%s\t%s\tbash %s on %s\tbash %s off %s\t%s\n' \
            "$n" "$d" "$FAULT_SH" "$n" "$FAULT_SH" "$n" "$never"
    done
}

# fault_run PLAN: faultcheck over the plan; its rows in $T/table and, when
# FAULTS_TABLE names a file, appended there too (docs/faults.md's table).
fault_run() {
    "$FAULTCHECK" -u "$URL" -s "$FGPORT_fg" -p "$FGPID_fg" -f "$1" \
        -o "$T/table" >"$T/check.out" 2>"$T/check.err"
    local rc=$?
    cat "$T/check.out"
    grep -v '^$' "$T/check.err" | head -80
    [ -n "${FAULTS_TABLE:-}" ] && [ -f "$T/table" ] && cat "$T/table" >>"$FAULTS_TABLE"
    local last p f
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$T/check.out" | tail -1)
    if [ -z "$last" ]; then
        bad "faultcheck printed no summary (exit $rc)"
        return
    fi
    p=${last%% passed*} f=${last#*, }
    f=${f%% failed}
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    [ "$rc" = 0 ] || [ "$f" != 0 ] || bad "faultcheck exited $rc"
}
