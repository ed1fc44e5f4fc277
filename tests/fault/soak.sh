#!/usr/bin/env bash
# tests/fault/soak.sh -- mixed traffic through several floodgate serve
# processes on one real redis-server for SOAK_S seconds, Redis killed and
# restarted on its port every RESTART_S seconds and every server reloaded
# by SIGHUP every HUP_S seconds (each reload changes a limit). It holds:
#   - RSS flat: each server's RSS at the end, and its largest sample, within
#     5% of its RSS after the first minute (WARM_S: 5 s after the first
#     restart of Redis, which comes after a minute in the full run);
#   - descriptors back: with the traffic stopped and Redis up, each server
#     has as many open descriptors as before the traffic;
#   - no error the policy does not explain: every request answered (no
#     connection error), no status but 200 and 429, and 503 only from the
#     limit with on_failure = closed; every reload accepted; no log event
#     but those of start, reload and the store's failures; every server
#     alive at the end.
# `make soak` runs it for 10 minutes (mk/fault.mk); tests/integration/
# soak_short.sh for 60 s.
SOAK_S=${SOAK_S:-600}
RESTART_S=${RESTART_S:-60}
HUP_S=${HUP_S:-30}
SERVERS=${SERVERS:-3}
RATE=${RATE:-150} # requests a second, for each of the four load mixes
# The servers run with the default blocked-key cache (65536 entries, about
# 6 MB a worker, calloc'd: resident only where written), which a reload
# must not spread over fresh pages (serve_reload_cache.sh); SOAK_CACHE=N
# sets another size.
SOAK_CACHE=${SOAK_CACHE:-}
# The baseline of RSS: just after the first restart of Redis (and the
# first reloads), so that every path has run once.
WARM_S=${WARM_S:-$((RESTART_S + 5))}
FG_TEST_BOUND=${FG_TEST_BOUND:-$((SOAK_S + 60))}
. "$(dirname "$0")/../serve/lib.sh"
# Under AddressSanitizer freed memory stays resident in its quarantine: a
# small one keeps RSS readable (as serve_backpressure.sh does).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
# Even so its quarantine fills as the run goes (1 MB of some 16): under a
# sanitizer RSS is printed, not judged.
SANITIZED=0
nm "$FLOODGATE" 2>/dev/null | grep -q __asan_init && SANITIZED=1

start_redis || { bad "redis starts"; finish; }

# conf N RATE_OF_LOCAL: the config of server N; reloads change local_l.
conf() {
    cat <<INI
[server]
workers = 2
id = soak-$1
${SOAK_CACHE:+blocked_cache = $SOAK_CACHE}
[store]
url = redis://127.0.0.1:$RPORT
prefix = soak$$:
timeout = 5ms
[limit open_l]
key = query:key
algorithm = token_bucket
rate = 50/s
on_failure = open
[limit closed_l]
key = query:key
algorithm = fixed_window
rate = 100/min
on_failure = closed
[limit local_l]
key = query:key
algorithm = sliding_window
rate = $2/min
on_failure = local
fallback_servers = $SERVERS
INI
}
for n in $(seq 1 "$SERVERS"); do
    conf "$n" 200 >"$T/s$n.ini"
    start_fg "s$n" -c "$T/s$n.ini" --listen 127.0.0.1:0 || { bad "server $n starts"; finish; }
done
spid() { eval "echo \$FGPID_s$1"; }
sport() { eval "echo \$FGPORT_s$1"; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# rss_parts PID: anonymous/file-backed RSS, to tell the heap from code and
# libraries paged in.
rss_parts() { awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } END { print a "/" f }' "/proc/$1/status" 2>/dev/null; }

# warm: a few requests to each server on fresh connections, so that every
# worker has its Redis connection; then the servers' descriptors settle.
warm() {
    local n
    for n in $(seq 1 "$SERVERS"); do
        "$FGLOAD" -n 40 -c 4 "http://127.0.0.1:$(sport "$n")/v1/check?limit=open_l&key=warm" >/dev/null 2>&1
    done
    sleep 0.2
}
warm
declare -A FD0
for n in $(seq 1 "$SERVERS"); do FD0[$n]=$(fds "$(spid "$n")"); done

# URLS LIMIT: every server, four keys each.
urls() {
    local n k out=""
    for n in $(seq 1 "$SERVERS"); do
        for k in a b c d; do
            out="$out http://127.0.0.1:$(sport "$n")/v1/check?limit=$1&key=$k"
        done
    done
    echo "$out"
}
LOADS=""
for mix in open_l closed_l local_l open_l,closed_l; do
    # shellcheck disable=SC2046
    "$FGLOAD" -d $((SOAK_S * 1000)) -r "$RATE" -c 8 $(urls "$mix") \
        >"$T/load.$mix.out" 2>"$T/load.$mix.err" &
    LOADS="$LOADS $!"
    PIDS="$PIDS $!"
done

# The run: samples every 5 s, restarts and reloads on their beats.
start=$SECONDS
restarts=0 reloads=0 next_restart=$RESTART_S next_hup=$HUP_S next_sample=0
declare -A RSSW RSSWP RSSMAX
local_rate=200
while [ $((SECONDS - start)) -lt "$SOAK_S" ]; do
    t=$((SECONDS - start))
    if [ "$t" -ge "$next_sample" ]; then
        line="t=$t"
        for n in $(seq 1 "$SERVERS"); do
            r=$(rss "$(spid "$n")")
            line="$line s$n:rss=${r}k($(rss_parts "$(spid "$n")")),fds=$(fds "$(spid "$n")")"
            if [ "$t" -ge "$WARM_S" ]; then
                [ -z "${RSSW[$n]:-}" ] && RSSW[$n]=$r && RSSWP[$n]=$(rss_parts "$(spid "$n")")
                [ "${r:-0}" -gt "${RSSMAX[$n]:-0}" ] && RSSMAX[$n]=$r
            fi
        done
        echo "$line"
        next_sample=$((next_sample + 5))
    fi
    if [ "$t" -ge "$next_restart" ]; then
        kill -KILL "$RPID" 2>/dev/null
        wait "$RPID" 2>/dev/null
        sleep 0.2 # down a moment: the servers meet refused connections
        restart_redis || bad "redis restarts at t=$t"
        restarts=$((restarts + 1))
        next_restart=$((next_restart + RESTART_S))
    fi
    if [ "$t" -ge "$next_hup" ]; then
        local_rate=$((local_rate == 200 ? 201 : 200))
        for n in $(seq 1 "$SERVERS"); do
            conf "$n" "$local_rate" >"$T/s$n.ini"
            kill -HUP "$(spid "$n")"
        done
        reloads=$((reloads + 1))
        next_hup=$((next_hup + HUP_S))
    fi
    sleep 0.2
done
for p in $LOADS; do wait "$p"; done
echo "soak: ${SOAK_S}s, $SERVERS servers, redis restarted $restarts times, $reloads reloads"

# --- no error the policy does not explain ---------------------------------
for mix in open_l closed_l local_l open_l,closed_l; do
    out=$(cat "$T/load.$mix.out")
    echo "load $mix: $out"
    expect_eq "$mix: every request answered" "$(field "$out" errors)" 0
    expect_eq "$mix: no status but 200, 429, 503" "$(field "$out" other)$(field "$out" s4xx)" 00
    check "$mix: traffic flowed ($(field "$out" sent) requests)" \
        test "$(field "$out" sent)" -ge $((SOAK_S * RATE / 2))
    case $mix in
    *closed_l*) ;; # 503 while Redis is down: the policy
    *) expect_eq "$mix: no 503 (on_failure open or local)" "$(field "$out" s503)" 0 ;;
    esac
done
for n in $(seq 1 "$SERVERS"); do
    check "server $n alive" kill -0 "$(spid "$n")"
    ok_reloads=$(grep -c 'event=reload result=ok' "$T/s$n.log")
    expect_eq "server $n: every reload accepted" "$ok_reloads" "$reloads"
    unexplained=$(grep -o 'event=[a-z_]*' "$T/s$n.log" | sort | uniq -c |
        grep -v -E 'event=(listening|reload|store_error|store_error_suppressed|store_recovered|store_unreachable|store|local_fallback[a-z_]*)$' || true)
    expect_eq "server $n: no unexplained log events" "$unexplained" ""
    grep -o 'event=[a-z_]*' "$T/s$n.log" | sort | uniq -c | sed "s/^/  s$n /"
done

# --- resources --------------------------------------------------------------
for _ in $(seq 1 100); do redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.02; done
for n in $(seq 1 "$SERVERS"); do
    p=$(spid "$n")
    f1=0
    for _ in $(seq 1 10); do
        warm
        f1=$(fds "$p")
        [ "$f1" = "${FD0[$n]}" ] && break
    done
    expect_eq "server $n: descriptors back to their start (${FD0[$n]})" "$f1" "${FD0[$n]}"
    r1=$(rss "$p")
    w=${RSSW[$n]:-0}
    mx=${RSSMAX[$n]:-0}
    echo "server $n: RSS ${w}k after ${WARM_S}s, ${r1}k at the end, ${mx}k at most ($(awk -v a="$r1" -v b="$w" 'BEGIN { printf "%+.2f%%", b ? 100 * (a - b) / b : 0 }') at the end); anonymous/file ${RSSWP[$n]:-}k then, $(rss_parts "$p")k at the end"
    [ "$SANITIZED" = 1 ] && continue
    check "server $n: RSS at the end within 5% of the first minute's" \
        test $((r1 * 100)) -lt $((w * 105))
    check "server $n: RSS never 5% above the first minute's" \
        test $((mx * 100)) -lt $((w * 105))
done
finish
