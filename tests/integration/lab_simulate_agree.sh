#!/usr/bin/env bash
# floodgate lab --simulate agrees with the real lab at 8 servers: the same
# burst (80 requests of one user within 40 ms, round robin over 8 servers,
# limit 10/s, a 2 ms round trip to the store) through the real lab's sync
# and lease strategies (8 `floodgate serve` behind HAProxy, Redis behind
# the delay proxy) and through the simulation; allowed and overshoot must
# agree within the tolerance below.
#
# Tolerance: |real - simulated| <= max(3, limit / 5) requests, for allowed
# and for overshoot, and lease over the limit by 0 in both. Why that much:
# both decide with libfloodgate's own fg_local code, and a burst shorter
# than the sync interval is decided on the same views in both (a server's
# first sync comes an interval after its first request), so the figures
# differ only where the real run's timing moves a request across a take's
# answer or a sync: eight processes sharing two cores, HAProxy's first pick
# of a server, the delay proxy's delivery and the servers' timer phases.
# One such move changes sync's figures by 3 at the lab's default limit of
# 10/s: runs here gave 52 or 49 allowed, against a simulated 52 (about one
# run in ten gave 49 on a quiet host). A sync run outside the tolerance
# runs once more and the second is judged (below).
#
# The simulation leaves out the servers' own time per request. Built with
# the sanitizers, a server takes several times longer, so more of a
# server's first requests wait for its first answer and are decided by the
# store (a sanitizer run gave 37 allowed for sync, against 52; plain runs
# while the sanitizer suite loaded the host, 39 and 48). There sync's
# figures are checked against its bounds only (at least the limit, over
# it by at most the bound the lab states); atomic and lease, which timing
# does not move, are compared as on a plain build.
set -u
cd "$(dirname "$0")/../.."
FLOODGATE=$(realpath "${FLOODGATE:-build/floodgate}")
BUILD=${BUILD:-build}
. tests/lib/lab.sh

work=$(mktemp -d)
cleanup() {
    local left; left=$(ours)
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"

LIMIT=10 SERVERS=8 BURST=80 SPREAD=40ms RTT=2ms
TOL=$(( LIMIT / 5 > 3 ? LIMIT / 5 : 3 ))
SANITIZED=0
nm "$FLOODGATE" 2>/dev/null | grep -q __asan_init && SANITIZED=1

# field FILE STRATEGY PATH: a (dotted) field of that strategy's JSON line.
field() {
    python3 - "$@" <<'EOF'
import json, sys
f, s, path = sys.argv[1:]
for line in open(f):
    if not line.strip():
        continue
    o = json.loads(line)
    if o.get("strategy") != s:
        continue
    for k in path.split("."):
        o = o.get(k) if isinstance(o, dict) else None
    print("" if o is None else o)
    break
EOF
}

simulate() { # simulate STRATEGY [ARGS...]: one JSON line
    local s=$1; shift
    timeout 30 "$FLOODGATE" lab --simulate --strategy "$s" --servers $SERVERS \
        --arrival burst --burst $BURST --spread $SPREAD --rtt $RTT \
        --limit $LIMIT/s "$@" --json
}

# The simulated half, which runs either way: sync admits at least the
# limit and at most every server's (each server's first check goes to the
# store, then it decides on that view), lease exactly the limit.
simulate sync >"$work/sim-sync.json"
check "simulated sync: runs (JSON)" [ -s "$work/sim-sync.json" ]
simulate lease >"$work/sim-lease.json"
check "simulated lease: runs (JSON)" [ -s "$work/sim-lease.json" ]
ss=$(field "$work/sim-sync.json" sync allowed)
sl=$(field "$work/sim-lease.json" lease allowed)
echo "     simulated, $SERVERS servers, $BURST requests within $SPREAD: sync allowed $ss, lease allowed $sl (limit $LIMIT)"
check "simulated sync: from the limit to every server's ($ss)" test "$ss" -ge "$LIMIT" -a "$ss" -le $((SERVERS * LIMIT))
check "simulated lease: the limit ($sl)" [ "$sl" = $LIMIT ]

# atomic goes through the same comparison: it shows the comparison itself
# works.
strategies="atomic sync lease"

# real_run STRATEGY: the real lab's run of it, and the simulation with
# whatever the real lab ran its limit with; sets rc ra ro sa so da do_.
real_run() {
    local s=$1
    timeout 60 "$FLOODGATE" lab --strategy $s --servers $SERVERS --burst $BURST \
        --spread $SPREAD --rtt $RTT --limit $LIMIT/s --json >"$work/real-$s.json" 2>"$work/real-$s.err"
    rc=$?
    [ "$rc" -ne 0 ] && return
    local extra=() alg sync_ms chunk
    alg=$(field "$work/real-$s.json" $s params.algorithm)
    [ -n "$alg" ] && extra+=(--algorithm "$alg")
    sync_ms=$(field "$work/real-$s.json" $s params.sync_ms)
    [ $s = sync ] && [ -n "$sync_ms" ] && extra+=(--sync "${sync_ms}ms")
    chunk=$(field "$work/real-$s.json" $s params.chunk)
    [ $s = lease ] && [ -n "$chunk" ] && [ "$chunk" != 0 ] && extra+=(--chunk "$chunk")
    simulate $s "${extra[@]}" >"$work/sim2-$s.json"
    ra=$(field "$work/real-$s.json" $s allowed); ro=$(field "$work/real-$s.json" $s over)
    sa=$(field "$work/sim2-$s.json" $s allowed); so=$(field "$work/sim2-$s.json" $s over)
    echo "     $s: real lab allowed $ra (over $ro), simulated $sa (over $so), tolerance $TOL"
    da=$(( ra > sa ? ra - sa : sa - ra )); do_=$(( ro > so ? ro - so : so - ro ))
}

for s in $strategies; do
    real_run $s
    # A sync run that the host's timing moved beyond the tolerance (a
    # loaded moment: 41 allowed against 52 once, in a clean clone's CI)
    # runs again, up to three runs, and the last is judged; a real
    # disagreement shows in every one.
    for again in 2 3; do
        [ $s = sync ] && [ $SANITIZED = 0 ] && [ "$rc" -eq 0 ] &&
            { [ "$da" -gt "$TOL" ] || [ "$do_" -gt "$TOL" ]; } || break
        echo "     sync: outside the tolerance, run $again"
        real_run $s
    done
    check "real lab, $s: exits 0 ($rc)" [ "$rc" -eq 0 ]
    [ "$rc" -ne 0 ] && { tail -5 "$work/real-$s.err"; continue; }
    if [ $s = sync ] && [ $SANITIZED = 1 ]; then
        rb=$(field "$work/real-$s.json" $s bound)
        check "sync (sanitizer build): real allowed at least the limit ($ra)" test "$ra" -ge "$LIMIT"
        check "sync (sanitizer build): real overshoot within its stated bound ($ro <= $rb)" \
            test -n "$rb" -a "$ro" -le "${rb:-0}"
        continue
    fi
    check "$s: allowed agree within $TOL (real $ra, simulated $sa)" [ "$da" -le "$TOL" ]
    check "$s: overshoot agrees within $TOL (real $ro, simulated $so)" [ "$do_" -le "$TOL" ]
    [ $s = lease ] && check "lease: over the limit by 0 in both (real $ro, simulated $so)" [ "$ro" -eq 0 -a "$so" -eq 0 ]
done
summary
