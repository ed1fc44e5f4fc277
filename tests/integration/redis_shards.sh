#!/usr/bin/env bash
# shards=URL,URL,URL: three real redis-servers behind two floodgate serve
# processes. Keys spread over all three nodes and each is exact; one node
# killed sends only its own keys to their failure policy (the others stay
# exact, decided by the store, within their timeout); restarted, its keys
# are exact again within a second; /metrics tells the nodes apart.
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../lib/modes.sh"

RP=() RPIDS=()
for i in 0 1 2; do
    start_redis || { bad "redis $i starts"; finish; }
    RP[$i]=$RPORT
    RPIDS[$i]=$RPID
done
SHARDS="shards=redis://127.0.0.1:${RP[0]},redis://127.0.0.1:${RP[1]},redis://127.0.0.1:${RP[2]}"
for n in 1 2; do
    cat >"$T/s$n.ini" <<INI
[server]
workers = 2
id = api-$n
[store]
url = $SHARDS
prefix = t$$:
[limit day]
key = query:k
algorithm = fixed_window
rate = 10/day
on_failure = open
timeout = 300ms
[limit day2]
key = query:k
algorithm = fixed_window
rate = 10/day
on_failure = open
timeout = 300ms
[limit tb]
key = query:k
algorithm = token_bucket
rate = 10/h
on_failure = closed
timeout = 300ms
$(modes_ini)
INI
    start_fg "s$n" -c "$T/s$n.ini" --listen 127.0.0.1:0 || { bad "server $n starts"; finish; }
done
A="http://127.0.0.1:$FGPORT_s1" B="http://127.0.0.1:$FGPORT_s2"
load() { # load LIMIT KEY N: N checks of KEY, alternately on both servers
    "$FGLOAD" -n "$3" -c 1 "$A/v1/check?limit=$1&key=$2" "$B/v1/check?limit=$1&key=$2"
}
# node_of KEY: the index of the node that holds KEY's counters.
node_of() {
    local i
    for i in 0 1 2; do
        if [ -n "$(redis-cli -p "${RP[$i]}" --scan --pattern "t$$:*{$1}*" | head -1)" ]; then
            echo "$i"; return
        fi
    done
    echo none
}

# Exact on keys spread over every node: 12 checks of each of 30 keys, 10
# allowed each, through both servers.
exact=0 NODE=()
for k in $(seq 0 29); do
    out=$(load day "u$k" 12)
    [ "$(field "$out" s200)" = 10 ] && [ "$(field "$out" s429)" = 2 ] && exact=$((exact + 1))
    NODE[$k]=$(node_of "u$k")
done
expect_eq "30 keys, each exactly 10 of 12 allowed across two servers" "$exact" 30
for i in 0 1 2; do
    c=0
    for k in $(seq 0 29); do [ "${NODE[$k]}" = "$i" ] && c=$((c + 1)); done
    check "node $i holds some of the 30 keys ($c)" test "$c" -ge 1
done
# No key lives on two nodes: its node was found by a scan of all three.
none=0
for k in $(seq 0 29); do [ "${NODE[$k]}" = none ] && none=$((none + 1)); done
expect_eq "every key found on a node" "$none" 0

# The approximate modes, keys over the three nodes.
modes_check shards "shards=redis://127.0.0.1:${RP[0]}?prefix=t$$:,redis://127.0.0.1:${RP[1]}?prefix=t$$:,redis://127.0.0.1:${RP[2]}?prefix=t$$:" "$A" "$B"

# Keys for the outage, each checked once, so that none is refused yet (a
# refused key would be answered by the blocked-key cache, not the store).
# At least 30, and more until every node holds 3 (a node's share of the
# ring depends on the ports): v0 .. v$((NV - 1)).
VNODE=() NV=0 held=(0 0 0)
while [ $NV -lt 30 ] || [ ${held[0]} -lt 3 -o ${held[1]} -lt 3 -o ${held[2]} -lt 3 ] && [ $NV -lt 200 ]; do
    load tb "v$NV" 1 >/dev/null
    VNODE[$NV]=$(node_of "v$NV")
    case "${VNODE[$NV]}" in [012]) held[${VNODE[$NV]}]=$((held[${VNODE[$NV]}] + 1)) ;; esac
    NV=$((NV + 1))
done

# floodgate check speaks the same URL (blocking client), and refuses a bad
# list with its reason.
out=$("$FLOODGATE" check --store "$SHARDS" --limit 5/min --key cli1 --count 7 --timeout 2000 | tail -1)
expect_eq "floodgate check on shards: 5 of 7" "$out" "allowed=5 limited=2"
for bad in "shards=redis://127.0.0.1:${RP[0]}|at least 2 node URLs" \
    "shards=redis://127.0.0.1:${RP[0]},redis://127.0.0.1:${RP[0]}|listed twice" \
    "shards=redis://127.0.0.1:${RP[0]},redis://[::ffff:127.0.0.1]:${RP[0]}|listed twice" \
    "shards=redis://127.0.0.1:${RP[0]},redis://127.0.0.1:${RP[1]}?prefix=x:|another prefix" \
    "shards=redis://127.0.0.1:${RP[0]},,redis://127.0.0.1:${RP[1]}|node 2: empty URL" \
    "shards=redis://127.0.0.1:${RP[0]}, redis://127.0.0.1:${RP[1]}|node 2 is not a redis:// or unix:// URL (it begins with a blank" \
    "shards=redis://127.0.0.1:${RP[0]}?prefix=a,b,redis://127.0.0.1:${RP[1]}?prefix=a,b|is written %2C"; do
    "$FLOODGATE" check --store "${bad%%|*}" --limit 5/s --key a 2>"$T/bad.err" >/dev/null
    rc=$?
    check "floodgate check --store '${bad%%|*}': exit 2, '${bad#*|}'" \
        test $rc = 2 -a -n "$(grep -F "${bad#*|}" "$T/bad.err")"
done

# Node 1 killed. Its keys follow each limit's policy (open: allowed; closed:
# 503); the keys of nodes 0 and 2 are still decided by the store, exactly.
{ kill -KILL "${RPIDS[1]}"; wait "${RPIDS[1]}"; } 2>/dev/null
dead=0 dead_ok=1 live_ok=1 live_max=0
for k in $(seq 0 $((NV - 1))); do
    if [ "${VNODE[$k]}" = 1 ]; then
        dead=$((dead + 1))
        out=$(load day2 "v$k" 4)
        [ "$(field "$out" s200)" = 4 ] || { dead_ok=0; echo "v$k day2: $out"; }
        out=$(load tb "v$k" 4)
        [ "$(field "$out" s503)" = 4 ] || { dead_ok=0; echo "v$k tb: $out"; }
    else
        # The bucket had 1 of its 10 taken: 9 of 12 now.
        out=$(load tb "v$k" 12)
        [ "$(field "$out" s200)" = 9 ] && [ "$(field "$out" s429)" = 3 ] || { live_ok=0; echo "v$k tb: $out"; }
        m=$(field "$out" max_us)
        [ "$m" -gt "$live_max" ] && live_max=$m
    fi
done
check "node 1 holds some of the outage's keys ($dead)" test $dead -ge 3
check "node 1 down: its keys follow their policy (open allowed, closed 503)" test $dead_ok = 1
check "node 1 down: keys of nodes 0 and 2 exact, from the store" test $live_ok = 1
check "node 1 down: live nodes' keys answered within their 300 ms timeout (max ${live_max} us)" \
    test "$live_max" -lt 300000
# floodgate check (the blocking client, which tries every node at open):
# with node 1 down it still opens; keys of the other nodes are the store's,
# node 1's follow on_failure with node 1's reason. 30 keys: a node's share
# depends on the ports, so 12 missed node 1 now and then ((2/3)^12 = 0.8%).
cli_store=0 cli_n1=0 cli_other=0
for k in $(seq 1 30); do
    out=$("$FLOODGATE" check --store "$SHARDS" --limit 5/min --key "c$k" --timeout 300 2>"$T/c.err")
    rc=$?
    if [ $rc = 0 ] && echo "$out" | grep -q '^allowed remaining=4'; then
        cli_store=$((cli_store + 1))
    elif [ $rc = 2 ] && grep -q "127.0.0.1:${RP[1]} .*on_failure=open" "$T/c.err"; then
        cli_n1=$((cli_n1 + 1))
    else
        cli_other=$((cli_other + 1)); echo "c$k: rc $rc: $out $(cat "$T/c.err")"
    fi
done
check "node 1 down: floodgate check opens; $cli_store keys from the store, $cli_n1 of node 1 on its policy" \
    test $cli_store -ge 1 -a $cli_n1 -ge 1 -a $cli_other = 0
curl -s "$A/metrics" >"$T/metrics"
grep '^floodgate_store_node' "$T/metrics" | grep -v bucket
for i in 0 1 2; do
    e=$(grep "^floodgate_store_node_errors_total{node=\"127.0.0.1:${RP[$i]}/0\"}" "$T/metrics" | awk '{print $2}')
    calls=$(grep "^floodgate_store_node_calls_total{node=\"127.0.0.1:${RP[$i]}/0\"}" "$T/metrics" | awk '{print $2}')
    check "metrics: node $i has calls ($calls)" test "${calls:-0}" -gt 0
    if [ $i = 1 ]; then
        check "metrics: node 1 has errors ($e)" test "${e:-0}" -gt 0
    else
        expect_eq "metrics: node $i has no errors" "${e:-x}" 0
    fi
    check "metrics: node $i latency histogram" \
        grep -q "^floodgate_store_node_latency_seconds_count{node=\"127.0.0.1:${RP[$i]}/0\"}" "$T/metrics"
done

# The log names the failing node and what it said; no store_recovered while
# only the other nodes answer.
check "node 1 down: store_error names it" \
    grep -q "event=store_error .* node=127.0.0.1:${RP[1]}/0 detail=" "$T/s1.log" "$T/s2.log"
for k in $(seq 0 $((NV - 1))); do [ "${VNODE[$k]}" = 1 ] && dk=v$k; [ "${VNODE[$k]}" = 0 ] && lk=v$k; done
check "node 1 down: no store_recovered while only the other nodes answer" \
    sh -c "! grep -q 'event=store_recovered' '$T/s1.log' '$T/s2.log'"
# A server of one worker, with an admin listener. On one connection: a key
# of node 1 twice (its breaker then open: refused without asking), then a
# key of node 0, from the store: the breaker gauge stays set.
printf 'adm-%s-Zq81xWv3' $$ >"$T/token"
chmod 600 "$T/token"
printf '[server]\nworkers = 1\nadmin_listen = 127.0.0.1:0\nadmin_token_file = %s\n[store]\nurl = %s\nprefix = t%s:\n[limit tb]\nkey = query:k\nalgorithm = token_bucket\nrate = 10/h\ntimeout = 300ms\n' \
    "$T/token" "$SHARDS" $$ >"$T/adm.ini"
start_fg adm -c "$T/adm.ini" --listen 127.0.0.1:0 || bad "admin server starts"
ADM="http://127.0.0.1:$(grep -o 'event=admin_listening addr=[^ ]*' "$T/adm.log" | sed 's/.*://')"
P="http://127.0.0.1:$FGPORT_adm/v1/check?limit=tb&key="
for _ in 1 2 3 4; do curl -s -X POST "$P$dk" >/dev/null; done
curl -s -X POST "$P$dk" "$P$lk" >/dev/null
gauge=$(curl -s "http://127.0.0.1:$FGPORT_adm/metrics" |
    grep '^floodgate_breaker_open{limit="tb"}' | awk '{print $2}')
check "node 1 down: the breaker gauge stays set after a key of node 0 is decided ($gauge)" \
    test "${gauge:-0}" = 1
# With no request, the breaker lets the next check through after its
# cooldown (250 ms): within a sweep (1 s) the gauge says so.
sleep 1.5
gauge=$(curl -s "http://127.0.0.1:$FGPORT_adm/metrics" |
    grep '^floodgate_breaker_open{limit="tb"}' | awk '{print $2}')
expect_eq "node 1 down, no request for 1.5 s: the breaker gauge is back to 0" "$gauge" 0
# An operator's reset names the reason of the key's own node, whatever
# another node said last: nodes 0 and 2 read-only (replicas).
for k in $(seq 0 $((NV - 1))); do [ "${VNODE[$k]}" = 2 ] && rk=v$k; done
reset_of() { curl -s -X POST -H "Authorization: Bearer adm-$$-Zq81xWv3" "$ADM/v1/reset?limit=tb&key=$1"; }
redis-cli -p "${RP[0]}" replicaof 127.0.0.1 1 >/dev/null
redis-cli -p "${RP[2]}" replicaof 127.0.0.1 1 >/dev/null
reset_of "$lk" >"$T/r1"
reset_of "$rk" >"$T/r2"
reset_of "$lk" >"$T/r3"
redis-cli -p "${RP[0]}" replicaof no one >/dev/null
redis-cli -p "${RP[2]}" replicaof no one >/dev/null
check "reset, node 2 read-only: its reason ($(cat "$T/r2"))" \
    sh -c "grep -q 'read-only' '$T/r2' && grep -q '127.0.0.1:${RP[2]}' '$T/r2'"
check "reset, node 0 read-only, after node 2's error: node 0 named ($(cat "$T/r3"))" \
    grep -q "127.0.0.1:${RP[0]}" "$T/r3"

# Node 1 back, empty, on the same port: within a second its keys are
# decided by the store again, and exact (fresh counters: 10 of 12).
RPORT=${RP[1]}
restart_redis || bad "redis 1 restarts"
t0=$(date +%s%N)
back=0
for k in $(seq 0 $((NV - 1))); do [ "${VNODE[$k]}" = 1 ] && { probe=v$k; break; }; done
for _ in $(seq 1 100); do
    out=$("$FGLOAD" -n 1 -c 1 "$A/v1/check?limit=tb&key=$probe")
    [ "$(field "$out" s200)" = 1 ] && { back=1; break; }
    sleep 0.01
done
ms=$((($(date +%s%N) - t0) / 1000000))
check "node 1 back: answering from the store within 1 s ($ms ms)" test $back = 1 -a $ms -lt 1000
sleep 0.3 # each worker's breaker probes again after its 250 ms cool-down
again=1
for k in $(seq 0 $((NV - 1))); do
    [ "${VNODE[$k]}" = 1 ] || continue
    out=$(load day2 "v$k" 12)
    [ "$(field "$out" s200)" = 10 ] && [ "$(field "$out" s429)" = 2 ] || { again=0; echo "v$k: $out"; }
    [ "$(node_of "v$k")" = 1 ] || { again=0; echo "v$k: not on node 1"; }
done
check "node 1 back: its keys exact again, on node 1" test $again = 1
finish
