#!/usr/bin/env bash
# sentinel://: a master, a replica and three sentinels (quorum 2), real
# servers on free ports, behind two floodgate serve processes under a
# steady load of token bucket and fixed window checks.
#   - bad input gets a clear error at start (floodgate check exit 2; serve
#     refuses an unknown master name, but starts with no sentinel up);
#   - SIGKILL of the master: during the gap every store wait ends within
#     timeout + 2 ms (99%) and 25 ms (each), and decisions follow each
#     limit's policy; counts are exact again within 2 s of the promotion;
#     the over-admission (allowed minus limit) is measured and compared
#     with the bound of docs/redis.md;
#   - SENTINEL FAILOVER (graceful): no error beyond the policy, exact after;
#   - a blocking check waiting in the master's store across a failover.
FG_TEST_BOUND=${FG_TEST_BOUND:-120}
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../lib/sentinel.sh"

MASTER=fgm$$
start_node() { # start_node PORT [replicaof-port]: a redis-server
    local port=$1 extra=()
    [ $# -gt 1 ] && extra=(--replicaof 127.0.0.1 "$2")
    mkdir -p "$T/r$port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$T/r$port" --logfile "$T/r$port/log" \
        --repl-diskless-sync-delay 0 "${extra[@]}" &
    PIDS="$PIDS $!"
    eval "NODEPID_$port=$!"
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.02
    done
    return 1
}
# lone_sentinel DIR MONITOR-LINE [PASSWORD]: a sentinel of its own in
# $T/DIR, monitoring what MONITOR-LINE says (a master name of its own, so
# that it takes no part in the group's failovers); LS_PORT and LS_PID set
# once it answers PING.
lone_sentinel() {
    local dir=$T/$1 auth=()
    LS_PORT=$(free_port)
    mkdir -p "$dir"
    {
        printf 'port %s\nbind 127.0.0.1\ndir %s\nlogfile %s/log\n' "$LS_PORT" "$dir" "$dir"
        [ $# -gt 2 ] && printf 'requirepass %s\n' "$3"
        echo "$2"
    } >"$dir/sentinel.conf"
    [ $# -gt 2 ] && auth=(-a "$3" --no-auth-warning)
    redis-server "$dir/sentinel.conf" --sentinel &
    LS_PID=$!
    PIDS="$PIDS $LS_PID"
    for _ in $(seq 1 50); do
        redis-cli -p "$LS_PORT" "${auth[@]}" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    return 1
}
master_addr() { # the master's port, as sentinel 1 says
    redis-cli -p "${SP[0]}" sentinel get-master-addr-by-name "$MASTER" | tail -1
}

MP=$(free_port) && start_node "$MP" || { bad "master starts"; finish; }
RP=$(free_port) && start_node "$RP" "$MP" || { bad "replica starts"; finish; }
wait_until 50 synced "$RP" || bad "replica in sync"
SP=()
for i in 0 1 2; do
    SP[$i]=$(free_port)
    mkdir -p "$T/s$i"
    cat >"$T/s$i/sentinel.conf" <<CONF
port ${SP[$i]}
bind 127.0.0.1
dir $T/s$i
logfile $T/s$i/log
sentinel monitor $MASTER 127.0.0.1 $MP 2
sentinel down-after-milliseconds $MASTER 500
sentinel failover-timeout $MASTER 2000
sentinel known-replica $MASTER 127.0.0.1 $RP
CONF
    redis-server "$T/s$i/sentinel.conf" --sentinel &
    PIDS="$PIDS $!"
done
wait_until 100 sentinels_ready || { bad "sentinels know each other and the replica"; finish; }
S="sentinel://127.0.0.1:${SP[0]},127.0.0.1:${SP[1]},127.0.0.1:${SP[2]}/$MASTER"

# ---- Bad input, and floodgate check through Sentinel --------------------
out=$("$FLOODGATE" check --store "$S" --limit 5/min --key cli1 --count 7 --timeout 2000 | tail -1)
expect_eq "floodgate check through sentinel: 5 of 7" "$out" "allowed=5 limited=2"
NOPE=$(free_port) NOPE2=$(free_port)
for b in "sentinel://127.0.0.1:${SP[0]}/nosuch|monitors no master named 'nosuch'" \
    "sentinel://127.0.0.1:$MP/$MASTER|not a sentinel" \
    "sentinel://127.0.0.1:$NOPE/$MASTER|cannot connect" \
    "sentinel://127.0.0.1:$NOPE,127.0.0.1:$NOPE2/$MASTER|none of the 2 sentinels answered (the last, 127.0.0.1:$NOPE2: cannot connect" \
    "sentinel://127.0.0.1:${SP[0]}|no master name" \
    "sentinel:///$MASTER|no sentinel address" \
    "sentinel://127.0.0.1:${SP[0]},/$MASTER|sentinel 2: empty address" \
    "sentinel://127.0.0.1:0/$MASTER|port must be 1 .. 65535" \
    "sentinel://127.0.0.1/$MASTER|expected host:port" \
    "sentinel://127.0.0.1:${SP[0]}/$MASTER?bogus=1|unknown parameter 'bogus'"; do
    "$FLOODGATE" check --store "${b%%|*}" --limit 5/s --key a 2>"$T/bad.err" >/dev/null
    rc=$?
    check "floodgate check --store '${b%%|*}': exit 2, '${b#*|}'" \
        test $rc = 2 -a -n "$(grep -F "${b#*|}" "$T/bad.err")"
done
# A master whose user may not run ROLE: refused at start (a failover could
# not be followed), naming +role.
redis-cli -p "$MP" ACL SETUSER norole on '>nrPW' '~*' '+@all' '-role' >/dev/null
"$FLOODGATE" check --store "sentinel://norole:nrPW@127.0.0.1:${SP[0]}/$MASTER" --limit 5/s --key a \
    2>"$T/norole.err" >/dev/null
rc=$?
check "a master user without +role: exit 2 ($rc), naming +role" \
    test $rc = 2 -a -n "$(grep -F 'needs +role' "$T/norole.err")"
redis-cli -p "$MP" ACL DELUSER norole >/dev/null
# A sentinel with a password (requirepass; another master name, so that it
# takes no part in the others' failovers): a wrong sentinel_password is
# told apart from a missing one, with the sentinel's own words.
lone_sentinel pw "sentinel monitor pw$$ 127.0.0.1 $MP 2" S3cretP ||
    bad "the sentinel with a password starts"
PWS=$LS_PORT PWPID=$LS_PID
for b in "?sentinel_password=wrong|WRONGPASS" "|NOAUTH"; do
    "$FLOODGATE" check --store "sentinel://127.0.0.1:$PWS/pw$$${b%%|*}" --limit 5/s --key a 2>"$T/pw.err" >/dev/null
    rc=$?
    check "sentinel password '${b%%|*}': exit 2, '${b#*|}' ($(cat "$T/pw.err"))" \
        test $rc = 2 -a -n "$(grep -F "${b#*|}" "$T/pw.err")"
done
out=$("$FLOODGATE" check --store "sentinel://127.0.0.1:$PWS/pw$$?sentinel_password=S3cretP" \
    --limit 5/s --key pw --timeout 2000 2>&1 | tail -1)
check "sentinel password right: the check is made ($out)" sh -c "echo '$out' | grep -q '^allowed '"
kill "$PWPID"
# A sentinel listed first that names a master that is down (it monitors
# the name at a closed port): the next sentinel is asked, and its master
# used.
lone_sentinel bs "sentinel monitor $MASTER 127.0.0.1 $NOPE 2" ||
    bad "the sentinel naming a dead master starts"
BS=$LS_PORT BSPID=$LS_PID
out=$("$FLOODGATE" check --store "sentinel://127.0.0.1:$BS,127.0.0.1:${SP[0]}/$MASTER" \
    --limit 5/s --key bs --timeout 2000 2>&1 | tail -1)
check "a first sentinel names a master that is down: the next one's is used ($out)" \
    sh -c "echo '$out' | grep -q '^allowed '"
kill "$BSPID"
# The approximate modes through the master the sentinels name (floodgate
# check: one process, so exact; the lease's unspent units go back at exit).
for m in sync:50ms lease; do
    out=$("$FLOODGATE" check --store "$S" --timeout 2000 --name "m-${m%%:*}" --limit 20/day \
        --algorithm fixed_window --mode "$m" --key k --count 25 2>&1)
    check "sentinel, mode $m: 20 of 25 allowed, first the bound ($(echo "$out" | sed -n '1p;$p' | tr '\n' ' '))" \
        sh -c "echo '$out' | head -1 | grep -q '^mode=' && echo '$out' | tail -1 | grep -qx 'allowed=20 limited=5'"
done
cat >"$T/bad.ini" <<INI
[store]
url = sentinel://127.0.0.1:${SP[0]}/nosuch
[limit a]
key = query:k
rate = 5/s
INI
timeout 10 "$FLOODGATE" serve -c "$T/bad.ini" --listen 127.0.0.1:0 2>"$T/badserve.log"
rc=$?
check "serve refuses an unknown master name at start (exit $rc), saying why" \
    test $rc != 0 -a $rc != 124 -a -n "$(grep -F "monitors no master named 'nosuch'" "$T/badserve.log")"
# A sentinel given as a Redis server: refused at start, saying what to give.
"$FLOODGATE" check --store "redis://127.0.0.1:${SP[0]}" --limit 5/s --key k >/dev/null 2>"$T/asredis.err"
rc=$?
check "redis:// at a sentinel: exit 2, 'a Sentinel? give sentinel://' ($(cat "$T/asredis.err"))" \
    test $rc = 2 -a -n "$(grep -F 'a Sentinel? give sentinel://HOST:PORT/MASTER' "$T/asredis.err")"
sed "s|^url = .*|url = sentinel://127.0.0.1:$NOPE/$MASTER?sentinel_password=S3cretX|" "$T/bad.ini" >"$T/down.ini"
if start_fg down -c "$T/down.ini" --listen 127.0.0.1:0; then
    ok "serve starts with no sentinel reachable (lazy)"
    check "serve logs the store unreachable" grep -q 'event=store_unreachable' "$T/down.log"
    check "serve's log has no sentinel password" test -z "$(grep -F S3cretX "$T/down.log")"
    st=$(http POST "http://127.0.0.1:$FGPORT_down/v1/check?limit=a&key=x")
    expect_eq "no sentinel: the limit's policy answers (open: 200)" "$st" 200
    kill -TERM "$FGPID_down"
else
    bad "serve starts with no sentinel reachable (lazy)"
fi

# A reload of the same URL while its only sentinel is gone (the master
# up): the workers keep the store they run, which knows the master, rather
# than a new one that could not learn it. A sentinel of its own (another
# master name, so that it takes no part in the others' failovers).
lone_sentinel ks "sentinel monitor kp$$ 127.0.0.1 $MP 1" ||
    bad "the reload test's sentinel starts"
KS=$LS_PORT KSPID=$LS_PID
sed "s|^url = .*|url = sentinel://127.0.0.1:$KS/kp$$\nprefix = keep$$:|; s|^rate = .*|rate = 3/day\non_failure = closed\ntimeout = 500ms|" \
    "$T/bad.ini" >"$T/keep.ini"
if start_fg keep -c "$T/keep.ini" --listen 127.0.0.1:0; then
    # The master name moved to another server (SENTINEL REMOVE, then
    # MONITOR: no +switch-master is published), the old one still up and
    # writable: followed at the next periodic question (5 s), not never.
    NP=$(free_port) && start_node "$NP" || bad "the re-pointed master starts"
    # A blocking store too (floodgate check), checking all along.
    "$FLOODGATE" check --store "sentinel://127.0.0.1:$KS/kp$$" --name blk \
        --limit 1000000000/day --key b --count 100000000 --timeout 2000 \
        >/dev/null 2>&1 &
    BLK=$!
    sleep 0.5
    redis-cli -p "$KS" sentinel remove "kp$$" >/dev/null
    redis-cli -p "$KS" sentinel monitor "kp$$" 127.0.0.1 "$NP" 1 >/dev/null
    t0=$(ms)
    moved() {
        http POST "http://127.0.0.1:$FGPORT_keep/v1/check?limit=a&key=m$RANDOM" >/dev/null
        [ -n "$(redis-cli -p "$NP" --scan --pattern 'keep*')" ]
    }
    wait_until 80 moved
    check "keep: a master name moved to another server is followed within 8 s ($(($(ms) - t0)) ms)" moved
    blk_moved() { [ -n "$(redis-cli -p "$NP" --scan --pattern '*blk*')" ]; }
    wait_until 30 blk_moved
    check "a blocking store (floodgate check) follows it too ($(($(ms) - t0)) ms)" blk_moved
    kill "$BLK" 2>/dev/null
    wait "$BLK" 2>/dev/null
    KU="http://127.0.0.1:$FGPORT_keep/v1/check?limit=a&key=r"
    expect_eq "keep: the first check is allowed by the master" "$(http POST "$KU")" 200
    kill "$KSPID"
    wait "$KSPID" 2>/dev/null
    kill -HUP "$FGPID_keep"
    wait_until 100 grep -q 'event=reload result=ok' "$T/keep.log"
    check "keep: the reload says the store is kept" \
        grep -q 'event=store_unreachable .*store=kept' "$T/keep.log"
    codes=""
    for _ in 1 2 3; do codes="$codes $(http POST "$KU")"; done
    expect_eq "keep: after the reload the master still counts (3/day: 200 200 429, not the policy's 503)" \
        "$codes" " 200 200 429"
    # The master turns replica (of nothing) while no sentinel answers: the
    # log says both, READONLY and that the sentinel does not answer.
    NOPE2=$(free_port)
    redis-cli -p "$NP" replicaof 127.0.0.1 "$NOPE2" >/dev/null
    for _ in $(seq 1 25); do http POST "$KU-ro" >/dev/null; sleep 0.1; done
    check "keep: a failing master with no sentinel answering: the log says both" \
        grep -q "event=store_error .*READONLY.*; sentinel 127.0.0.1:$KS: " "$T/keep.log"
    kill -TERM "$FGPID_keep"
else
    bad "serve starts with the reload test's sentinel"
fi

# ---- Two servers under load ----------------------------------------------
for n in 1 2; do
    cat >"$T/f$n.ini" <<INI
[server]
workers = 2
id = api-$n
[store]
url = $S
prefix = t$$:
timeout = 5ms
[limit tb]
key = query:k
algorithm = token_bucket
rate = 100000/s
on_failure = open
[limit fw]
key = query:k
algorithm = fixed_window
rate = 100000000/day
on_failure = closed
[limit ovf]
key = query:k
algorithm = fixed_window
rate = 1000/day
on_failure = closed
[limit ovt]
key = query:k
algorithm = token_bucket
rate = 1000/day
on_failure = closed
[limit ex]
key = query:k
algorithm = fixed_window
rate = 5/day
on_failure = closed
timeout = 200ms
[limit du]
key = query:k
algorithm = fixed_window
rate = 100000000/day
durable = replica
on_failure = open
timeout = 20ms
INI
    start_fg "f$n" -c "$T/f$n.ini" --listen 127.0.0.1:0 || { bad "server $n starts"; finish; }
done
A="http://127.0.0.1:$FGPORT_f1" B="http://127.0.0.1:$FGPORT_f2"
# A sanitizer build runs every step several times slower.
SANITIZED=0
case "$BUILD" in *asan*) SANITIZED=1 ;; esac
hist() { # over both servers: store waits, within 7 ms, within 25 ms
    local u c=0 w=0 x=0 m
    for u in $A $B; do
        m=$(curl -s "$u/metrics")
        c=$((c + $(echo "$m" | awk '/^floodgate_store_latency_seconds_count/ { print $2 }')))
        w=$((w + $(echo "$m" | awk '/^floodgate_store_latency_seconds_bucket\{le="0.007000"\}/ { print $2 }')))
        x=$((x + $(echo "$m" | awk '/^floodgate_store_latency_seconds_bucket\{le="0.025000"\}/ { print $2 }')))
    done
    echo "$c $w $x"
}
exact_probe() { # exact_probe KEY: 7 checks of 'ex' (5/day) give 5 and 2
    local out
    out=$("$FGLOAD" -n 7 -c 1 "$A/v1/check?limit=ex&key=$1" "$B/v1/check?limit=ex&key=$1")
    [ "$(field "$out" s200)" = 5 ] && [ "$(field "$out" s429)" = 2 ]
}
# Until 2 s after the promotion (at $1 ms): when a probe is first exact,
# and whether every probe after it is exact too.
exact_after() { # exact_after PROMOTED_MS TAG: sets FIRST_MS and STAYED
    local i=0 t
    FIRST_MS="" STAYED=1
    while :; do
        t=$(ms)
        [ $((t - $1)) -gt 2500 ] && break
        if exact_probe "$2$i"; then
            [ -z "$FIRST_MS" ] && FIRST_MS=$((t - $1))
        elif [ -n "$FIRST_MS" ]; then
            STAYED=0
        fi
        i=$((i + 1))
        sleep 0.05
    done
}
# The steady load, for DUR ms: 'tb' (open) and 'fw' (closed) on many keys;
# and one key each of 'ovf' and 'ovt' (1000 allowed), drained at 200/s so
# that the failover falls in the middle of them.
steady() { # steady DUR TAG
    "$FGLOAD" -d "$1" -c 2 -r 250 "$A/v1/check?limit=tb&key=$2" "$B/v1/check?limit=tb&key=$2" >"$T/$2.tb" 2>"$T/$2.tb.err" &
    L1=$!
    "$FGLOAD" -d "$1" -c 2 -r 250 "$A/v1/check?limit=fw&key=$2" "$B/v1/check?limit=fw&key=$2" >"$T/$2.fw" 2>"$T/$2.fw.err" &
    L2=$!
    "$FGLOAD" -d "$1" -c 2 -r 200 "$A/v1/check?limit=ovf&key=$2" "$B/v1/check?limit=ovf&key=$2" >"$T/$2.ovf" 2>"$T/$2.ovf.err" &
    L3=$!
    "$FGLOAD" -d "$1" -c 2 -r 200 "$A/v1/check?limit=ovt&key=$2" "$B/v1/check?limit=ovt&key=$2" >"$T/$2.ovt" 2>"$T/$2.ovt.err" &
    L4=$!
    PIDS="$PIDS $L1 $L2 $L3 $L4"
}
steady_report() { # steady_report TAG WHAT: checks on what the loads saw
    local f out
    wait $L1 $L2 $L3 $L4
    for f in tb fw ovf ovt; do echo "$2 $f: $(cat "$T/$1.$f")"; done
    out=$(cat "$T/$1.tb")
    check "$2: tb (on_failure open): every answer 200 ($(field "$out" s200) of $(field "$out" sent))" \
        test "$(field "$out" s200)" = "$(field "$out" sent)" -a "$(field "$out" sent)" -gt 0
    for f in fw ovf ovt; do
        out=$(cat "$T/$1.$f")
        check "$2: $f (on_failure closed): only 200, 429 or 503; no error" \
            test "$(field "$out" errors)" = 0 -a "$(field "$out" other)" = 0 \
            -a "$(field "$out" s4xx)" = 0 -a "$(field "$out" bad_headers)" = 0
    done
    out=$(cat "$T/$1.fw")
    check "$2: fw: no 429 (limit out of reach)" test "$(field "$out" s429)" = 0
    for f in ovf ovt; do
        out=$(cat "$T/$1.$f")
        local a; a=$(field "$out" s200)
        check "$2: $f: drained (429s seen), so its allowed count is final" \
            test "$(field "$out" s429)" -gt 0
        # Below 0 when checks that timed out (5 ms) were counted by
        # Redis all the same: the store's answer came too late, or never
        # (the master killed between the script and its reply).
        OVER=$((a - 1000))
        echo "$2: $f allowed $a of 1000: over-admission $OVER"
        check "$2: $f over-admission $OVER within the bound (one limit: 1000)" \
            test "$OVER" -le 1000
        eval "OVER_${1}_$f=$OVER"
    done
}

# Warm: exact before any failover.
check "exact before the failover" exact_probe warm

# ---- 1. SIGKILL of the master --------------------------------------------
set -- $(hist); c0=$1; w0=$2; x0=$3
steady 9000 k1
sleep 2.5
# What the replica had not acknowledged yet, from one INFO of the master.
redis-cli -p "$MP" info replication | tr -d '\r' >"$T/repl"
off_m=$(awk -F: '/^master_repl_offset/ { print $2 }' "$T/repl")
off_r=$(awk -F'[=,]' '/^slave0/ { for (i = 1; i < NF; i++) if ($i == "offset") print $(i + 1) }' "$T/repl")
echo "before the kill: master offset $off_m, replica acknowledged $off_r"
t_kill=$(ms)
eval "kill -KILL \$NODEPID_$MP"
promoted() { [ "$(master_addr)" = "$RP" ]; }
wait_until 80 promoted || bad "the replica is promoted"
t_prom=$(ms)
echo "promoted $((t_prom - t_kill)) ms after the kill"
exact_after "$t_prom" e1
check "kill: exact again within 2 s of the promotion (first at ${FIRST_MS:-never} ms)" \
    test -n "$FIRST_MS" -a "${FIRST_MS:-9999}" -le 2000
check "kill: exact in every probe after that" test "$STAYED" = 1
# Each worker of each server says that its store now goes to the replica.
switched() {
    [ "$(grep -c "event=store_switched .*node=sentinel/$MASTER from=127.0.0.1:$MP to=127.0.0.1:$RP" "$T/f1.log" "$T/f2.log" | awk -F: '{ s += $2 } END { print s }')" = 4 ]
}
wait_until 20 switched
check "kill: every worker logs event=store_switched from the old master to the new" switched
steady_report k1 "kill"
set -- $(hist)
n=$(($1 - c0)); w=$(($2 - w0)); x=$(($3 - x0))
echo "kill: store waits $n, within 7 ms $w, within 25 ms $x"
check "kill: store waits counted ($n)" test "$n" -gt 0
if [ "$SANITIZED" = 1 ]; then
    # Every step is several times slower: as in the graceful case below.
    timed "kill: 99% of store waits within 25 ms under a sanitizer ($x of $n)" test $((x * 100)) -ge $((n * 99))
else
    timed "kill: 99% of store waits within timeout + 2 ms ($w of $n)" \
        test $((w * 100)) -ge $((n * 99))
    # (A shared 2-core host stalls a process now and then: 1 in 1,000.)
    timed "kill: all but 1 in 1,000 store waits within 25 ms ($x of $n)" \
        test $(((n - x) * 1000)) -le "$n"
fi
grep -h 'fgload: error' "$T"/k1.*.err | head -5

# ---- 2. SENTINEL FAILOVER, graceful ----------------------------------------
# The old master comes back as a replica of the new one.
start_node "$MP" "$RP" || bad "old master restarts as a replica"
wait_until 50 synced "$MP" || bad "old master in sync"
known() { # every sentinel lists the old master as a replica that is up
    local i
    for i in 0 1 2; do
        redis-cli -p "${SP[$i]}" sentinel replicas "$MASTER" | paste -s -d' ' |
            grep -q "port $MP .*flags slave " || return 1
    done
}
wait_until 120 known || bad "sentinels see the old master as a replica"
set -- $(hist); c0=$1; w0=$2; x0=$3
steady 8000 k2
sleep 2.5
t_fo=$(ms)
# Asked of the last sentinel of the URL: the one leading a failover is
# the only one to tell of the promotion as it starts it, and it can be any.
# A durable limit's checks under load too: on the master just promoted,
# with no replica yet, their WAIT fails; a failure there must not send the
# stores back to the old master (still a master until Sentinel demotes
# it, and named by the sentinels until they see the promotion), whose
# writes the new one never sees.
"$FGLOAD" -d 6000 -c 2 -r 200 "$A/v1/check?limit=du&key=k2" "$B/v1/check?limit=du&key=k2" >"$T/k2.du" 2>&1 &
L5=$!
PIDS="$PIDS $L5"
redis-cli -p "${SP[2]}" sentinel failover "$MASTER" | grep -q OK || bad "SENTINEL FAILOVER accepted"
calls() { # calls PORT: the scripts a node has run
    redis-cli -p "$1" info commandstats | tr -d '\r' |
        awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ { s += $3 } END { print s + 0 }'
}
is_master() { redis-cli -p "$1" role 2>/dev/null | head -1 | grep -q '^master$'; }
wait_until 80 is_master "$MP" || bad "the old master says it is a master again"
sleep 0.2 # each store switches within milliseconds of that (a sanitizer's: more)
# A reload now opens new stores, before the sentinels have seen the
# promotion: they take the master this process followed, not the one the
# sentinels still name.
n0=$(grep -c 'event=reload result=ok' "$T/f1.log")
kill -HUP "$FGPID_f1"
for _ in $(seq 1 100); do [ "$(grep -c 'event=reload result=ok' "$T/f1.log")" -gt "$n0" ] && break; sleep 0.01; done
sleep 0.1
c_old0=$(calls "$RP")
back() { [ "$(master_addr)" = "$MP" ]; }
wait_until 80 back || bad "the old master is promoted again"
t_prom=$(ms)
c_old1=$(calls "$RP")
echo "graceful: switched $((t_prom - t_fo)) ms after SENTINEL FAILOVER"
check "graceful: the demoted master ran no script from 0.3 s after the promotion (a reload between) to the sentinels' switch ($((c_old1 - c_old0)))" \
    test "$c_old1" = "$c_old0"
exact_after "$t_prom" e2
check "graceful: exact again within 2 s of the switch (first at ${FIRST_MS:-never} ms)" \
    test -n "$FIRST_MS" -a "${FIRST_MS:-9999}" -le 2000
check "graceful: exact in every probe after that" test "$STAYED" = 1
steady_report k2 "graceful"
wait $L5
set -- $(hist)
n=$(($1 - c0)); w=$(($2 - w0)); x=$(($3 - x0))
echo "graceful: store waits $n, within 7 ms $w, within 25 ms $x"
if [ "$SANITIZED" = 1 ]; then
    timed "graceful: 99% of store waits within 25 ms under a sanitizer ($x of $n)" test $((x * 100)) -ge $((n * 99))
else
    timed "graceful: all but 1 in 1,000 store waits within 25 ms ($x of $n)" \
        test $(((n - x) * 1000)) -le "$n"
fi
for f in tb fw ovf ovt; do
    e=$(field "$(cat "$T/k2.$f")" errors)
    expect_eq "graceful: $f: no request without an answer" "$e" 0
done
# Following the promotion event (each store subscribes on every sentinel),
# the old master takes writes only until each server has seen the replica
# say it is a master (measured: 0 to 71
# checks at 200/s on an idle host, up to 118 on a loaded one, a clean-clone
# CI run among them). Without it they would go on until Sentinel itself
# sees the promotion, about a second later (measured: 314 at 300/s, so
# about 210 at this rate). Three quarters of a second of load (150) tells
# the two apart, in the plain build: a sanitizer build's servers are slow
# enough to reach 164 with the fast path (measured under load), so there
# the figure is printed, not judged (the plain build's run judges it).
for f in ovf ovt; do
    eval "o=\$OVER_k2_$f"
    if [ "$SANITIZED" = 1 ]; then
        echo "graceful: $f over-admission $o (not judged under a sanitizer: timing)"
    else
        check "graceful: $f over-admission $o within 750 ms of load (150)" test "$o" -le 150
    fi
done
echo "over-admission: kill ovf=$OVER_k1_ovf ovt=$OVER_k1_ovt; graceful ovf=$OVER_k2_ovf ovt=$OVER_k2_ovt"
curl -s "$A/metrics" | grep '^floodgate_store_node' | grep -v bucket

# ---- 3. A long blocking check in the old master's store -------------------
# The master stopped (SIGSTOP) while a blocking check of a 6 s timeout
# waits in its store: the store switches to the promoted replica and
# retires the old master's, which stays open until that check is done.
"$BUILD/redis/redis_check" retire "$S?prefix=rt$$:" "$(eval echo "\$NODEPID_$MP")" >"$T/retire.out" 2>&1
rc=$?
cat "$T/retire.out" | grep -v -E '^[0-9]+ passed'
check "a long check across a failover: the store switched, the check ended, no use after free (exit $rc)" \
    sh -c "[ $rc = 0 ] && grep -q '^[1-9][0-9]* passed, 0 failed' '$T/retire.out'"
finish
