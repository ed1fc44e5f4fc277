# tests/lib/lab.sh -- shell helpers shared by tests/integration/lab_*.sh.
# Sourced, never run: it lives outside tests/integration/ so that
# scripts/run-tests does not take it for a test. The sourcing script sets
# $work (its mktemp -d folder) before calling anything here.

pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok   $*"; }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
# check WHAT COMMAND ARGS...: one command, its exit status is the verdict.
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
# check_all WHAT 'CONDITION': a whole shell condition (&&, ||, $(...)),
# evaluated here so that every part of it counts.
check_all() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# The closing line scripts/run-tests reads; the last thing a test prints.
summary() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }

# Processes of this test: a command line naming its folder, or a working
# directory inside it (redis-server rewrites its command line but runs in
# the lab's folder). Other tests on the machine are not ours to count.
ours() {
    local pid
    for pid in $(pgrep -x 'redis-server|haproxy|floodgate' 2>/dev/null); do
        if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$work" ||
           readlink "/proc/$pid/cwd" 2>/dev/null | grep -qF "$work"; then
            echo "$pid"
        fi
    done
}

# The lab's ports, from the config files it generates. The lab removes its
# folder when it ends, so it is given wrappers (FLOODGATE_BIN,
# FLOODGATE_HAPROXY, FLOODGATE_REDIS_SERVER) that keep a copy of each
# config (and serve's arguments, where a long --store URL goes, or
# redis-server's) in $work/ports and then exec the real program: same pid,
# same arguments.
lab_record_ports() {
    local rec=$work/ports bin=$work/bin
    local haproxy redis
    haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
    redis=$(command -v redis-server || echo /usr/bin/redis-server)
    mkdir -p "$rec" "$bin"
    printf '#!/bin/sh\n[ "$1" = serve ] && cp "$3" "%s/serve.$$.ini" && echo "$*" >"%s/serve.$$.args"\nexec "%s" "$@"\n' \
        "$rec" "$rec" "$FLOODGATE" >"$bin/floodgate"
    printf '#!/bin/sh\ncp "$3" "%s/haproxy.$$.cfg"\nexec "%s" "$@"\n' \
        "$rec" "$haproxy" >"$bin/haproxy"
    printf '#!/bin/sh\necho "$*" >"%s/redis.$$.args"\nexec "%s" "$@"\n' \
        "$rec" "$redis" >"$bin/redis-server"
    chmod +x "$bin/floodgate" "$bin/haproxy" "$bin/redis-server"
    export FLOODGATE_BIN=$bin/floodgate FLOODGATE_HAPROXY=$bin/haproxy
    export FLOODGATE_REDIS_SERVER=$bin/redis-server
}
# A port the test knows of itself (the web page's), checked like the rest.
lab_add_port() { echo "port $1" >>"$work/ports/extra"; }
# Every port recorded so far: serve's listen, its Redis URL (the lab's delay
# proxy), HAProxy's bind and servers, redis-server's --port.
lab_ports() {
    cat "$work"/ports/* 2>/dev/null |
        grep -oE '(listen = 127\.0\.0\.1:|redis://127\.0\.0\.1:|bind 127\.0\.0\.1:|server api-[0-9]+ 127\.0\.0\.1:|--port |^port )[0-9]+' |
        grep -oE '[0-9]+$' | sort -un
}
# Those of them something still listens on.
lab_listening() {
    local p
    for p in $(lab_ports); do
        [ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && echo "$p"
    done
}

# After a phase: no process, no temporary folder, no port of the lab left.
nothing_left() {
    local what=$1
    local procs; procs=$(ours)
    if [ -z "$procs" ]; then ok "$what: no process left"
    else bad "$what: processes left: $(ps -o pid,args -p "${procs//$'\n'/,}" | tail -n +2)"; fi
    if [ -z "$(ls -A "$work/tmp")" ]; then ok "$what: temporary folder removed"
    else bad "$what: left in TMPDIR: $(ls "$work/tmp")"; fi
    local n; n=$(lab_ports | wc -l)
    local left; left=$(lab_listening | tr '\n' ' ')
    if [ "$n" -gt 0 ] && [ -z "$left" ]; then ok "$what: no listening port left ($n checked)"
    elif [ "$n" -eq 0 ]; then bad "$what: no port of the lab was recorded"
    else bad "$what: still listening on ports: $left"; fi
}

# lab_web_url OUT PID: the address `floodgate lab --web` (PID, its output
# in OUT) prints once it listens; empty if it exits or 10 s pass first.
lab_web_url() {
    local u=""
    for _ in $(seq 1 100); do
        u=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$1" 2>/dev/null | head -n 1)
        [ -n "$u" ] && break
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    echo "$u"
}
