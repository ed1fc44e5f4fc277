#!/usr/bin/env bash
# tests/fault/fault.sh -- start and end the faults of the catalogue.
#
#   fault.sh start            start redis-server on $RPORT (as after a crash)
#   fault.sh on|off FAULT     put FAULT in force / end it
#
# Run by faultcheck (ON_CMD, OFF_CMD of the plan tests/fault/lib.sh writes),
# with $T, $RPORT (the Redis under test), $RPORT2 (one to replicate from)
# and $CPORT (the fault proxy's control port) exported. Exits 0 once the
# fault is in force, or has ended; non-zero when it could not be made.
# Every Redis it starts is recorded in $T/pids (the test's trap stops them).
set -u
what=$1
fault=${2:-}
rcli() { redis-cli -p "$RPORT" "$@"; }

# ctl LINE: one command to the proxy; 0 when it answered "ok".
ctl() {
    local fd answer
    exec {fd}<>"/dev/tcp/127.0.0.1/$CPORT" || return 1
    echo "$*" >&"$fd"
    read -r answer <&"$fd"
    exec {fd}<&-
    [ "${answer%% *}" = ok ] || { echo "proxy: $* -> $answer" >&2; return 1; }
}

# until_ COND...: run COND every 10 ms until it succeeds, 5 s at most.
until_() {
    for _ in $(seq 1 500); do
        "$@" && return 0
        sleep 0.01
    done
    echo "fault.sh: $fault: gave up waiting for: $*" >&2
    return 1
}
pong() { [ "$(rcli ping 2>/dev/null)" = PONG ]; }
loading() { rcli ping 2>/dev/null | grep -q LOADING; }
redis_pid() { cat "$T/redis.pid"; }
info_has() { rcli info "$1" 2>/dev/null | tr -d '\r' | grep -q "^$2$"; }
dead() { ! kill -0 "$(redis_pid)" 2>/dev/null; }

# start [ARGS...]: redis-server on $RPORT with the ACL user fg (password
# pw1) and DEBUG allowed from loopback; an empty script cache, as after
# any restart.
start() {
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$T/redis" --logfile "$T/redis/log" --enable-debug-command local \
        --enable-protected-configs local \
        --user fg on '>pw1' '~*' '&*' '+@all' "$@" </dev/null >/dev/null 2>&1 &
    echo $! >"$T/redis.pid"
    echo $! >>"$T/pids"
}

case "$what $fault" in
"start ")
    start && until_ pong ;;

# ---- the proxy's faults --------------------------------------------------
"on latency") ctl latency 20 10 ;; # replies 20..30 ms late, timeout 5 ms
"off latency") ctl latency 0 0 ;;
"on blackhole") ctl blackhole on ;;
"off blackhole") ctl blackhole off ;;
"on reset") ctl reset on ;;
"off reset") ctl reset off ;;
"on trickle") ctl trickle 200 ;; # a script call is some 150 bytes
"off trickle") ctl trickle 0 ;;
"on refuse") ctl refuse on ;;
"off refuse") ctl refuse off ;;

# ---- Redis's faults ------------------------------------------------------
"on sigstop") kill -STOP "$(redis_pid)" ;;
"off sigstop") kill -CONT "$(redis_pid)" && until_ pong ;;

# Killed; back on the same port with an empty script cache (NOSCRIPT).
"on restart") kill -KILL "$(redis_pid)" && until_ dead ;;
"off restart") start && until_ pong ;;

# Redis blocked in a command for 0.8 s (the checks run 0.5 s of it).
"on debug_sleep")
    (rcli debug sleep 0.8 >/dev/null 2>&1 &)
    sleep 0.02 ;;
"off debug_sleep") until_ pong ;;

# Writes refused: -OOM.
"on oom") rcli config set maxmemory-policy noeviction >/dev/null &&
    rcli config set maxmemory 1 | grep -q OK ;;
"off oom") rcli config set maxmemory 0 | grep -q OK ;;

# A script that runs 3 s; past busy-reply-threshold (50 ms) every other
# command gets -BUSY until SCRIPT KILL.
"on busy")
    rcli config set busy-reply-threshold 50 >/dev/null || exit 1
    (rcli eval "local e = tonumber(redis.call('TIME')[1]) + 3
        while tonumber(redis.call('TIME')[1]) < e do end" 0 \
        >/dev/null 2>&1 &)
    sleep 0.1
    rcli ping 2>/dev/null | grep -q BUSY ;;
"off busy")
    rcli script kill >/dev/null 2>&1
    until_ pong &&
        rcli config set busy-reply-threshold 5000 >/dev/null ;;

# A restart with an RDB that takes about a second to load: -LOADING.
"on loading")
    rcli debug populate 3000 fcpop 10 >/dev/null &&
        rcli save >/dev/null &&
        kill -KILL "$(redis_pid)" && until_ dead &&
        start --dbfilename dump.rdb --key-load-delay 100 \
            --loading-process-events-interval-bytes 1024 &&
        until_ loading ;;
"off loading")
    until_ pong && rcli config set key-load-delay 0 >/dev/null &&
        rcli flushall >/dev/null && rm -f "$T/redis/dump.rdb" ;;

# The node made a replica: -READONLY.
"on readonly")
    rcli replicaof 127.0.0.1 "$RPORT2" >/dev/null &&
        until_ info_has replication master_link_status:up ;;
"off readonly")
    rcli replicaof no one >/dev/null && until_ info_has replication role:master &&
        rm -f "$T/redis"/*.rdb ;;

# A background save that fails (its folder is gone) with save points set:
# -MISCONF.
"on misconf")
    mkdir -p "$T/gone" && rcli config set dir "$T/gone" >/dev/null &&
        rcli config set save "3600 1" >/dev/null && rmdir "$T/gone" &&
        rcli bgsave >/dev/null &&
        until_ info_has persistence rdb_last_bgsave_status:err ;;
"off misconf")
    rcli config set dir "$T/redis" >/dev/null && rcli bgsave >/dev/null &&
        until_ info_has persistence rdb_last_bgsave_status:ok &&
        rcli config set save "" >/dev/null && rm -f "$T/redis"/*.rdb ;;

# maxclients reached: one connection (the holder) takes the only place,
# the proxy resets the others; every new one gets "-ERR max number of
# clients reached". The holder gives the places back when released.
"on maxclients")
    rm -f "$T/holder.up" "$T/holder.release" "$T/holder.done"
    (
        exec {fd}<>"/dev/tcp/127.0.0.1/$RPORT" || exit 1
        printf 'PING\r\n' >&"$fd" && read -r _ <&"$fd"
        touch "$T/holder.up"
        while [ ! -e "$T/holder.release" ]; do sleep 0.01; done
        printf 'CONFIG SET maxclients 10000\r\n' >&"$fd" && read -r _ <&"$fd"
        touch "$T/holder.done"
    ) </dev/null >/dev/null 2>&1 &
    echo $! >>"$T/pids"
    until_ test -e "$T/holder.up" &&
        rcli config set maxclients 1 >/dev/null && ctl drop ;;
"off maxclients")
    touch "$T/holder.release" && until_ test -e "$T/holder.done" &&
        until_ pong ;;

# The ACL user's password changed, its connections closed: every new one
# fails to authenticate. Ends when the password is set back.
"on acl")
    rcli acl setuser fg resetpass '>pw2' >/dev/null &&
        rcli client kill user fg >/dev/null ;;
"off acl") rcli acl setuser fg resetpass '>pw1' >/dev/null ;;

*) echo "fault.sh: unknown: $what $fault" >&2; exit 2 ;;
esac
