#!/usr/bin/env bash
# floodgate lab on more than one Redis node, with real processes:
#   - --shards 3: three redis-servers, each behind its own delay proxy, as
#     shards=...; atomic exact, sync and lease within their bounds, the
#     Redis-down burst with every node stopped, each user's commands run on
#     the node the library places it on and on no other, and users spread
#     over more than one node;
#   - --web --shards 3: runs after a Redis-down burst are exact again (the
#     servers are healed on every node, each with its own breaker);
#   - --store shards=..., cluster=... and sentinel://... on servers this test
#     starts:
#     atomic exact, each counter on the node the JSON names, the store left
#     running and its Redis-down burst skipped with its reason;
#   - bad --shards and --store values refused with the reason;
# and after each: no process, no listening port, no temporary folder left.
set -u
cd "$(dirname "$0")/../.."
FLOODGATE=$(realpath "${FLOODGATE:-build/floodgate}")
BUILD=${BUILD:-build}
. tests/lib/lab.sh

work=$(mktemp -d)
# The stores this test runs itself live outside $work: the lab's leftovers
# are what is found there.
own=$(mktemp -d)
lab_pid=""
OWN_PIDS=""
cleanup() {
    [ -n "$lab_pid" ] && kill -9 "$lab_pid" 2>/dev/null
    local left; left=$(ours)
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    # shellcheck disable=SC2086
    [ -n "$OWN_PIDS" ] && kill -9 $OWN_PIDS 2>/dev/null
    rm -rf "$work" "$own"
}
trap cleanup EXIT
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"
lab_record_ports

# js FILE EXPR: EXPR evaluated with 'r', the JSON lines of FILE as an
# array, and by(s), the result of strategy s; prints its value.
js() {
    node -e '
        const [file, expr] = process.argv.slice(1);
        const r = require("fs").readFileSync(file, "utf8").trim().split("\n")
            .filter((l) => l.startsWith("{")).map(JSON.parse);
        const by = (s) => r.find((x) => x.strategy === s);
        // Exact: the limit, and what it refilled while the burst was
        // decided; over it only by what on_failure allowed, short of it
        // only where Redis was late (a timed-out check may be counted).
        const exact = (x) => (x.allowed >= x.limit || x.by_on_failure > 0) &&
            x.allowed <= x.limit + x.refilled + x.allowed_by_on_failure;
        const v = eval(expr);
        console.log(typeof v === "object" ? JSON.stringify(v) : String(v));' "$1" "$2"
}
no_sanitizer() { # no_sanitizer WHAT FILE
    if grep -qE 'Sanitizer|runtime error' "$2"; then bad "$1: sanitizer report"; head -20 "$2"
    else ok "$1: no sanitizer report"; fi
}

# 0. Refusals, before anything starts: exit 2 (1 for a store that cannot
# be reached), the reason named, a password never repeated.
refused() { # refused RC WHAT ARGS...
    local want=$1 what=$2; shift 2
    timeout 10 "$FLOODGATE" lab "$@" >/dev/null 2>"$work/err"
    local rc=$?
    check_all "lab $*: exit $want ($rc), says '$what'" \
        '[ "$rc" -eq "$want" ] && grep -qF -- "$what" "$work/err"'
}
refused 2 "bad value for --shards: '0' (1 to 8)" --shards 0
refused 2 "bad value for --shards: '99' (1 to 8)" --shards 99
refused 2 "bad value for --store: unknown store 'bogus'" --store bogus://127.0.0.1:1
refused 2 "bad value for --store: shards: give at least 2 node URLs" --store shards=redis://127.0.0.1:1
refused 2 "bad value for --store: the lab needs a Redis store" --store memory
refused 2 "--store needs a value" --store
refused 2 "--shards and --store exclude each other" --shards 2 --store redis://127.0.0.1:1
refused 2 "--rtt does not apply with --store" --store redis://127.0.0.1:1 --rtt 2ms
refused 2 "--web does not apply with --store" --store redis://127.0.0.1:1 --web
refused 2 "--sweep rtt does not apply with --store" --store redis://127.0.0.1:1 --sweep rtt=0,1
dead=$(for _ in 1 2 3; do p=$((30000 + RANDOM % 2000)); ss -Htln "sport = :$p" | grep -q . || { echo $p; break; }; done)
refused 1 "--store: redis 127.0.0.1:$dead db 0: cannot connect" --store "redis://u:s3cret@127.0.0.1:$dead"
check "the password is not repeated" sh -c "! grep -q s3cret '$work/err'"
refused 1 "--store: cluster: 127.0.0.1:$dead" --store "cluster=redis://127.0.0.1:$dead"
long="shards=$(for i in 1 2 3 4 5 6 7 8; do printf 'redis://127.0.0.1:%d/0,' $((30000 + i)); done)redis://127.0.0.1:30009/0"
refused 2 "bad value for --store: longer than 192 characters" --store "$long"

# 1. --shards 3: the lab's own three nodes.
timeout 60 "$FLOODGATE" lab --shards 3 --strategy atomic,sync,lease --servers 4 \
    --burst 40 --json >"$work/sh.json" 2>"$work/sh.err"
rc=$?
check "lab --shards 3 exits 0 ($rc)" [ "$rc" -eq 0 ]
[ "$rc" -ne 0 ] && tail -n 5 "$work/sh.err"
no_sanitizer "--shards 3" "$work/sh.err"
f=$work/sh.json
if [ "$rc" -eq 0 ]; then
    check "atomic is exact on shards ($(js "$f" 'by("atomic").allowed') of $(js "$f" 'by("atomic").limit'))" \
        [ "$(js "$f" 'exact(by("atomic"))')" = true ]
    check "sync over by at most its bound ($(js "$f" 'by("sync").over') <= $(js "$f" 'by("sync").bound'))" \
        [ "$(js "$f" 'by("sync").over <= by("sync").bound')" = true ]
    check "lease never over, short within its bound ($(js "$f" 'by("lease").allowed'), short $(js "$f" 'by("lease").refused_under_limit'))" \
        [ "$(js "$f" 'by("lease").over === 0 && by("lease").refused_under_limit <= by("lease").bound')" = true ]
    check "JSON names the store: shards, the lab's own, 3 nodes" \
        [ "$(js "$f" 'r.every((x) => x.store.kind === "shards" && x.store.own && x.store.nodes.length === 3)')" = true ]
    check "each user's commands ran on its node, and on no other" \
        [ "$(js "$f" 'r.every((x) => x.store.nodes.every((n) => (n.name === x.store.node) === (n.executed > 0)))')" = true ]
    check "the Redis-down burst ran with every node down (atomic: limit / N, 1..limit)" \
        [ "$(js "$f" 'by("atomic").redis_down.on_failure === "local" && by("atomic").redis_down.allowed >= 1 && by("atomic").redis_down.allowed <= by("atomic").limit')" = true ]
    check "the Redis-down burst was measured for all three" \
        [ "$(js "$f" 'r.every((x) => x.redis_down !== null)')" = true ]
    check "the servers were given shards= with three URLs" \
        sh -c "grep -h '^url = ' '$work'/ports/serve.*.ini | grep -qE '^url = shards=redis://127\.0\.0\.1:[0-9]+/0,redis://127\.0\.0\.1:[0-9]+/0,redis://127\.0\.0\.1:[0-9]+/0$'"
    nports=$(cat "$work"/ports/redis.*.args | grep -oE -- '--port [0-9]+' | sort -u | wc -l)
    nstarts=$(ls "$work"/ports/redis.*.args | wc -l)
    check_all "three redis-servers ran, each restarted on its port after the Redis-down burst ($nports ports, $nstarts starts)" \
        '[ "$nports" -eq 3 ] && [ "$nstarts" -eq 6 ]'
fi
[ "$rc" -eq 0 ] || sed 's/^/     /' "$f"
nothing_left "after --shards 3"

# Eight shards: their URL is longer than a line of serve's config, and
# goes on the servers' command line.
timeout 60 "$FLOODGATE" lab --shards 8 --strategy atomic --servers 2 --burst 20 \
    --json >"$work/sh8.json" 2>"$work/sh8.err"
rc=$?
check "lab --shards 8 exits 0 ($rc)" [ "$rc" -eq 0 ]
[ "$rc" -ne 0 ] && tail -n 3 "$work/sh8.err"
check "8 shards: atomic exact, 8 nodes, commands on the user's node alone" \
    [ "$(js "$work/sh8.json" 'r.length === 1 && exact(r[0]) && r[0].store.nodes.length === 8 && r[0].store.nodes.every((n) => (n.name === r[0].store.node) === (n.executed > 0))')" = true ]
check "8 shards: the servers were given the URL with --store" \
    sh -c "grep -hE -- '--store shards=(redis://127\.0\.0\.1:[0-9]+/0,){7}redis://127\.0\.0\.1:[0-9]+/0$' '$work'/ports/serve.*.args | grep -q ."
nothing_left "after --shards 8"

# Twelve users (a sweep of atomic runs): they spread over more than one
# of the three nodes (all on one: 3 x (1/3)^12, once in 177,000 runs).
timeout 60 "$FLOODGATE" lab --shards 3 --strategy atomic --servers 2 \
    --sweep burst=20,21,22,23,24,25,26,27,28,29,30,31 --svg "$work/sw.svg" --json \
    >"$work/sw.json" 2>"$work/sw.err"
rc=$?
check "a sweep of 12 atomic runs on 3 shards exits 0 ($rc)" [ "$rc" -eq 0 ]
used=$(js "$work/sw.json" 'new Set(r.map((x) => x.store.node)).size')
check "12 users' counters on more than one node ($used nodes)" [ "$used" -ge 2 ]
check "every one of them exact, its commands on its node alone" \
    [ "$(js "$work/sw.json" 'r.length === 12 && r.every((x) => exact(x) && x.store.nodes.every((n) => (n.name === x.store.node) === (n.executed > 0)))')" = true ]
nothing_left "after the sweep on shards"

# 2. The web page's runs: each fires a Redis-down burst after its burst,
# so each next run is measured only once the servers reach every node
# again. Twelve runs of atomic, twelve users: each exact (with the
# servers healed on one node only, about 3 runs in 10 came out not exact).
TMPDIR="$work/tmp" "$FLOODGATE" lab --web --listen 127.0.0.1:0 --shards 3 \
    >"$work/web.out" 2>"$work/web.err" &
lab_pid=$!
url=$(lab_web_url "$work/web.out" "$lab_pid")
check "lab --web --shards 3 listens ($url)" [ -n "$url" ]
if [ -n "$url" ]; then
    lab_add_port "$(echo "$url" | grep -oE '[0-9]+/$' | tr -d /)"
    : >"$work/web.json"
    for i in $(seq 1 12); do
        curl -sS -m 30 "${url}api/run?strategy=atomic&servers=4&burst=20&rtt=1" |
            node -e 'let s = ""; process.stdin.on("data", (d) => s += d).on("end", () => {
                try { console.log(JSON.stringify(JSON.parse(s).result)); }
                catch (e) { console.log("{\"strategy\":\"error\",\"body\":" + JSON.stringify(s) + "}"); } });' \
            >>"$work/web.json"
    done
    check "12 web runs of atomic on shards, each exact after the one before stopped every node" \
        [ "$(js "$work/web.json" 'r.length === 12 && r.every((x) => x.strategy === "atomic" && exact(x) && x.redis_down !== null)')" = true ]
    [ "$(js "$work/web.json" 'r.every((x) => exact(x))')" = true ] ||
        js "$work/web.json" 'r.map((x) => [x.allowed, x.store && x.store.node, x.body])'
fi
kill -INT "$lab_pid" 2>/dev/null
for _ in $(seq 1 50); do kill -0 "$lab_pid" 2>/dev/null || break; sleep 0.1; done
wait "$lab_pid" 2>/dev/null
lab_pid=""
no_sanitizer "--web --shards 3" "$work/web.err"
nothing_left "after --web --shards 3"

# 3. --store shards=...: three redis-servers of this test's own.
port3() { # three free loopback ports
    local p n=0
    while [ $n -lt 3 ]; do
        p=$((20000 + RANDOM % 9000))
        ss -Htln "sport = :$p" | grep -q . && continue
        case " ${PORTS:-} " in *" $p "*) continue ;; esac
        PORTS="${PORTS:-} $p"; n=$((n + 1))
    done
}
PORTS=""
port3
for p in $PORTS; do
    mkdir -p "$own/$p"
    (cd "$own/$p" && exec redis-server --port "$p" --bind 127.0.0.1 --save '' \
        --appendonly no --logfile log) &
    OWN_PIDS="$OWN_PIDS $!"
done
for p in $PORTS; do
    for _ in $(seq 1 100); do redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && break; sleep 0.02; done
done
U="shards=$(for p in $PORTS; do printf 'redis://127.0.0.1:%s,' "$p"; done | sed 's/,$//')"
# A limit of 10 an hour: the counters outlive the run, to be counted.
timeout 60 "$FLOODGATE" lab --store "$U" --strategy naive,atomic,sync,lease --servers 4 \
    --burst 40 --limit 10/h --json >"$work/st.json" 2>"$work/st.err"
rc=$?
check "lab --store shards=... exits 0 ($rc)" [ "$rc" -eq 0 ]
[ "$rc" -ne 0 ] && tail -n 5 "$work/st.err"
no_sanitizer "--store shards" "$work/st.err"
f=$work/st.json
if [ "$rc" -eq 0 ]; then
    check "atomic is exact on the given shards" [ "$(js "$f" 'exact(by("atomic"))')" = true ]
    check "lease never over on the given shards" [ "$(js "$f" 'by("lease").over === 0')" = true ]
    check "sync over by at most its bound" [ "$(js "$f" 'by("sync").over <= by("sync").bound')" = true ]
    check "JSON: shards, not the lab's, its 3 nodes by port, Redis figures null" \
        [ "$(js "$f" "r.every((x) => x.store.kind === 'shards' && !x.store.own && x.store.nodes.map((n) => n.name).join(' ') === '$(for p in $PORTS; do printf '127.0.0.1:%s/0 ' "$p"; done | sed 's/ $//')' && x.redis_calls_per_request === null && x.redis_executed_per_request === null)")" = true ]
    check "the Redis-down burst skipped, with its reason" \
        [ "$(js "$f" 'r.every((x) => x.redis_down === null && /never stopped/.test(x.redis_down_skipped))')" = true ]
    check "rtt 0: the lab adds none" [ "$(js "$f" 'r.every((x) => x.params.rtt_ms === 0)')" = true ]
    alive=0
    for p in $PORTS; do redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && alive=$((alive + 1)); done
    check "the given store still runs: the lab never stopped it ($alive of 3)" [ "$alive" -eq 3 ]
    for s in naive atomic sync lease; do
        node=$(js "$f" "by('$s').store.node")
        where=""
        for p in $PORTS; do
            n=$(redis-cli -p "$p" --scan --pattern "fglab:$s:bookings:*{scalper-*" | wc -l)
            [ "$n" -gt 0 ] && where="$where 127.0.0.1:$p/0($n)"
        done
        check "$s: its user's counter on $node alone (found on:$where)" [ "$where" = " $node(1)" ]
    done
fi
timeout 60 "$FLOODGATE" lab --store "$U" --strategy atomic --servers 2 --limit 10/h \
    --sweep burst=20,21,22,23,24,25,26,27,28,29,30,31 --svg "$work/sw2.svg" --json \
    >"$work/sw2.json" 2>"$work/sw2.err"
check "a sweep of 12 atomic runs on the given shards exits 0" [ "$?" -eq 0 ]
check "12 users' counters on more than one node ($(js "$work/sw2.json" 'new Set(r.map((x) => x.store.node)).size') nodes)" \
    [ "$(js "$work/sw2.json" 'new Set(r.map((x) => x.store.node)).size')" -ge 2 ]
agree=yes
for p in $PORTS; do
    said=$(js "$work/sw2.json" "r.filter((x) => x.store.node === '127.0.0.1:$p/0').length")
    found=$(redis-cli -p "$p" --scan --pattern 'fglab:atomic:bookings:*{scalper-*' | wc -l)
    # One more on the node of the first run's user (section 3's atomic).
    first=$(js "$f" "by('atomic').store.node === '127.0.0.1:$p/0' ? 1 : 0")
    [ "$found" -eq $((said + first)) ] || agree="no: $p holds $found, the JSON says $said + $first"
done
check "each node holds the counters of the users the JSON places there ($agree)" [ "$agree" = yes ]
# shellcheck disable=SC2086
kill $OWN_PIDS 2>/dev/null; wait $OWN_PIDS 2>/dev/null; OWN_PIDS=""
nothing_left "after --store shards"

# 4. --store cluster=...: a cluster of 3 masters (no replicas).
T=$own PIDS=""
. tests/lib/cluster.sh
CLUSTER_REPLICAS=0
if start_cluster; then
    OWN_PIDS=$PIDS
    ok "cluster of 3 masters up"
    U="cluster=redis://127.0.0.1:${CPORT[0]},redis://127.0.0.1:${CPORT[1]}"
    timeout 60 "$FLOODGATE" lab --store "$U" --strategy atomic,lease --servers 4 \
        --burst 40 --limit 10/h --json >"$work/cl.json" 2>"$work/cl.err"
    rc=$?
    check "lab --store cluster=... exits 0 ($rc)" [ "$rc" -eq 0 ]
    [ "$rc" -ne 0 ] && tail -n 5 "$work/cl.err"
    no_sanitizer "--store cluster" "$work/cl.err"
    f=$work/cl.json
    check "atomic is exact on the cluster" [ "$(js "$f" 'exact(by("atomic"))')" = true ]
    check "lease never over on the cluster" [ "$(js "$f" 'by("lease").over === 0')" = true ]
    check "JSON: cluster, not the lab's, Redis-down skipped" \
        [ "$(js "$f" 'r.every((x) => x.store.kind === "cluster" && !x.store.own && x.redis_down === null && x.redis_down_skipped)')" = true ]
    node=$(js "$f" 'by("atomic").store.node')
    m=$(redis-cli -p "${node##*:}" --scan --pattern 'fglab:atomic:bookings:*{scalper-*' | wc -l)
    check "atomic's counter on the master the JSON names ($node: $m)" [ "$m" -eq 1 ]
    nodes=$(js "$f" 'by("atomic").store.nodes.map((x) => x.name).sort().join(" ")')
    want=$(for p in "${CPORT[@]:0:3}"; do echo "127.0.0.1:$p"; done | sort | tr '\n' ' ' | sed 's/ $//')
    check "JSON: the cluster's nodes are its 3 masters ($nodes)" [ "$nodes" = "$want" ]
    # shellcheck disable=SC2086
    kill $OWN_PIDS 2>/dev/null; wait $OWN_PIDS 2>/dev/null; OWN_PIDS=""
else
    bad "cluster of 3 masters up"; tail -n 3 "$own"/cluster/create.log
fi
nothing_left "after --store cluster"

# 5. --store sentinel://...: a master and one sentinel (quorum 1).
PORTS=""
port3
set -- $PORTS
mp=$1 sp=$2
mkdir -p "$own/m" "$own/s"
(cd "$own/m" && exec redis-server --port "$mp" --bind 127.0.0.1 --save '' \
    --appendonly no --logfile log) &
OWN_PIDS="$!"
printf 'port %s\nbind 127.0.0.1\ndir %s\nlogfile %s/log\nsentinel monitor labm 127.0.0.1 %s 1\n' \
    "$sp" "$own/s" "$own/s" "$mp" >"$own/s/sentinel.conf"
(cd "$own/s" && exec redis-server "$own/s/sentinel.conf" --sentinel) &
OWN_PIDS="$OWN_PIDS $!"
for _ in $(seq 1 100); do
    redis-cli -p "$sp" sentinel get-master-addr-by-name labm 2>/dev/null | grep -q "^$mp$" && break
    sleep 0.05
done
timeout 60 "$FLOODGATE" lab --store "sentinel://127.0.0.1:$sp/labm" --strategy atomic --servers 4 \
    --burst 40 --limit 10/h --json >"$work/se.json" 2>"$work/se.err"
rc=$?
check "lab --store sentinel://... exits 0 ($rc)" [ "$rc" -eq 0 ]
[ "$rc" -ne 0 ] && tail -n 3 "$work/se.err"
check "atomic is exact through the sentinel's master, Redis-down skipped" \
    [ "$(js "$work/se.json" 'exact(r[0]) && r[0].limit === 10 && r[0].store.kind === "sentinel" && !r[0].store.own && r[0].redis_down === null')" = true ]
check "its counter on the master" \
    [ "$(redis-cli -p "$mp" --scan --pattern 'fglab:atomic:bookings:*{scalper-*' | wc -l)" -eq 1 ]
# shellcheck disable=SC2086
kill $OWN_PIDS 2>/dev/null; wait $OWN_PIDS 2>/dev/null; OWN_PIDS=""
nothing_left "after --store sentinel"

summary
