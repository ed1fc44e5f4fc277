#!/usr/bin/env bash
# sentinel:// with hosts announced by name (Sentinel's resolve-hostnames and
# announce-hostnames, as on Kubernetes), behind a slow DNS server: the one
# of tests/lib/dns.sh (a mount namespace of this test's own), answering
# names under .test 300 ms late.
# A master, a replica and three sentinels, real servers on free ports; one
# floodgate serve (timeout 50 ms, on_failure open) under one check every
# 5 ms while SENTINEL FAILOVER moves the master:
#   - no check waits beyond its timeout + 40 ms while the names resolve
#     slowly (a name resolved on the event loop would stall it 300 ms);
#   - the failover is followed: event=store_switched to the new master;
#   - exact after it: the new master holds every check made since;
#   - a sentinel named by a host with IPv4 and IPv6 addresses: the IPv4 one.
FG_TEST_BOUND=${FG_TEST_BOUND:-50}
. "$(dirname "$0")/../lib/dns.sh"
dns_namespace "$0" "$@"
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../lib/sentinel.sh"

DELAY_MS=300
TIMEOUT_MS=50
SLACK_MS=40
MASTER=fgdns$$

# ---- The slow DNS server (tests/lib/dns.sh): every name 300 ms late -------
start_dns || { bad "a DNS server of this test's own"; finish; }
awk -v d="$DELAY_MS" 'BEGIN { print d / 1000 }' >"$T/dns/all.delay"
t0=$(ms)
check "m.test resolves to 127.0.0.1, slowly" sh -c 'getent ahostsv4 m.test | grep -q "^127.0.0.1 "'
echo "a lookup took $(($(ms) - t0)) ms"

# ---- Redis and Sentinel, every host named ---------------------------------
start_node() { # start_node PORT NAME [master-port]: a redis-server
    local port=$1 name=$2 extra=()
    [ $# -gt 2 ] && extra=(--replicaof 127.0.0.1 "$3")
    mkdir -p "$T/r$port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$T/r$port" --logfile "$T/r$port/log" --replica-announce-ip "$name" \
        --repl-diskless-sync-delay 0 "${extra[@]}" &
    PIDS="$PIDS $!"
    wait_until 50 sh -c "redis-cli -p $port ping 2>/dev/null | grep -q PONG"
}
MP=$(free_port) && start_node "$MP" m.test || { bad "master starts"; finish; }
RP=$(free_port) && start_node "$RP" r.test "$MP" || { bad "replica starts"; finish; }
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
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel monitor $MASTER m.test $MP 2
sentinel down-after-milliseconds $MASTER 1000
sentinel failover-timeout $MASTER 3000
CONF
    redis-server "$T/s$i/sentinel.conf" --sentinel &
    PIDS="$PIDS $!"
done
wait_until 150 sentinels_ready || { bad "sentinels know each other and the replica"; finish; }
expect_eq "the sentinels name the master by its host name" \
    "$(redis-cli -p "${SP[0]}" sentinel get-master-addr-by-name "$MASTER" | head -1)" m.test

# ---- floodgate serve, a failover under load -------------------------------
cat >"$T/fg.ini" <<INI
[server]
workers = 1
[store]
url = sentinel://127.0.0.1:${SP[0]},127.0.0.1:${SP[1]},127.0.0.1:${SP[2]}/$MASTER
timeout = ${TIMEOUT_MS}ms
[limit c]
key = query:k
algorithm = fixed_window
rate = 1000000/h
on_failure = open
[limit ex]
key = query:k
algorithm = fixed_window
rate = 5/day
on_failure = closed
INI
start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_fg"
q0=$(wc -l <"$T/dns.queries")
steal_mark
"$FGLOAD" -d 7000 -c 1 -r 200 "$U/v1/check?limit=c&key=load" >"$T/load" 2>"$T/load.err" &
LP=$!
PIDS="$PIDS $LP"
sleep 1
t_fo=$(ms)
expect_eq "SENTINEL FAILOVER" "$(redis-cli -p "${SP[0]}" sentinel failover "$MASTER")" OK
switched() {
    grep -q "event=store_switched .*node=sentinel/$MASTER from=m.test:$MP to=r.test:$RP" "$T/fg.log"
}
wait_until 60 switched
check "the failover is followed: event=store_switched from m.test:$MP to r.test:$RP" switched
t_sw=$(grep -m1 -o 'ts=[^ ]* event=store_switched' "$T/fg.log" | cut -d' ' -f1 | cut -d= -f2)
[ -n "$t_sw" ] && echo "switched $(($(date -d "$t_sw" +%s%3N) - t_fo)) ms after SENTINEL FAILOVER was sent"
wait "$LP"
out=$(cat "$T/load")
echo "load: $out"
echo "names looked up meanwhile: $(($(wc -l <"$T/dns.queries") - q0)) DNS questions"
check "every check answered 200 (on_failure open), no error" \
    test "$(field "$out" s200)" = "$(field "$out" sent)" -a "$(field "$out" errors)" = 0 \
    -a "$(field "$out" sent)" -gt 500
timed "no check waited beyond its timeout + $SLACK_MS ms while names resolve slowly (max $(field "$out" max_us) us)" \
    test "$(field "$out" max_us)" -le $(((TIMEOUT_MS + SLACK_MS) * 1000))

n_new=$(redis-cli -p "$RP" get "$(redis-cli -p "$RP" --scan --pattern '*c:{load}*' | head -1)")
echo "the load's key: $(field "$out" s200) admitted, $n_new counted by the new master (the difference: taken by the old one after the promotion, before the switch)"

# ---- Exact after the failover ---------------------------------------------
out=$("$FGLOAD" -n 40 -c 1 "$U/v1/check?limit=c&key=after")
got=$(redis-cli -p "$RP" --scan --pattern "*c:{after}*" | head -1)
expect_eq "after: 40 checks allowed" "$(field "$out" s200)" 40
expect_eq "after: the new master counts exactly 40" "$(redis-cli -p "$RP" get "$got")" 40
out=$("$FGLOAD" -n 7 -c 1 "$U/v1/check?limit=ex&key=after")
expect_eq "after: a limit of 5 admits 5 of 7" "$(field "$out" s200) $(field "$out" s429)" "5 2"
grep -E 'event=store_(switched|error)' "$T/fg.log" | head -5

# A sentinel named by a host with an IPv4 and an IPv6 address (localhost
# here: both in this namespace's hosts) is reached at its IPv4 one, as a
# redis:// host is: these sentinels listen on 127.0.0.1 only.
out=$("$FLOODGATE" check --store "sentinel://localhost:${SP[0]}/$MASTER" \
    --limit 5/s --key dual --timeout 1000 2>&1)
check "sentinel://localhost: its IPv4 address, as for redis:// ($out)" \
    grep -q '^allowed remaining=4 ' <<<"$out"
finish
