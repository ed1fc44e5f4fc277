#!/usr/bin/env bash
# redis://NAME:PORT whose name moves to another address, as a managed
# Redis's endpoint does after a failover, or a restarted pod's: serve
# follows it. r.test is answered by a DNS server of the test's own
# (tests/lib/dns.sh: TTL 0, in a mount namespace of its own).
# Redis A listens on 127.0.0.1:P, Redis B on 127.0.0.2:P (the same port).
#   - A made a replica of B, the name moved to B: A answers READONLY on a
#     connection that stays up; serve looks the name up again and goes to
#     B, where the checks are decided by the store again within 2 s, and
#     logs event=store_switched;
#   - B shut down, the name moved back to A (promoted): connections to B
#     are refused; serve goes back to A within 2 s;
#   - checks in flight to A (stopped) when the name moves: their
#     connection goes, and their policy answers them at once;
#   - a shards store whose second node is r.test follows it the same way
#     (logged for that node);
#   - a name of two addresses, one of them in use: no move;
#   - /etc/hosts changed while serve runs: read at the next lookup;
#   - a reload right after another follows the name at once.
# Before, the address of the name at start was used until a restart or a
# reload: every check followed on_failure.
. "$(dirname "$0")/../lib/dns.sh"
dns_namespace "$0" "$@"
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../lib/sentinel.sh"
start_dns || { bad "a DNS server of this test's own"; finish; }
check "r.test resolves to 127.0.0.1" sh -c 'getent ahostsv4 r.test | grep -q "^127.0.0.1 "'

# ---- Two Redis servers on one port, at two addresses ----------------------
start_at() { # start_at IP: a redis-server on IP:$P
    mkdir -p "$T/r$1"
    redis-server --port "$P" --bind "$1" --save '' --appendonly no \
        --dir "$T/r$1" --logfile "$T/r$1/log" --repl-diskless-sync-delay 0 &
    PIDS="$PIDS $!"
    wait_until 50 sh -c "redis-cli -h $1 -p $P ping 2>/dev/null | grep -q PONG"
}
for _ in 1 2 3 4 5; do
    P=$(free_port)
    start_at 127.0.0.1 && start_at 127.0.0.2 && break
    redis-cli -h 127.0.0.1 -p "$P" shutdown nosave >/dev/null 2>&1
    P=
done
[ -n "$P" ] || { bad "redis on 127.0.0.1 and 127.0.0.2, one port"; finish; }
A="redis-cli -h 127.0.0.1 -p $P"
B="redis-cli -h 127.0.0.2 -p $P"

cat >"$T/fg.ini" <<INI
[server]
workers = 1
[store]
url = redis://r.test:$P
timeout = 50ms
[limit c]
key = query:k
algorithm = fixed_window
rate = 1000000/h
on_failure = open
[limit slow]
key = query:k
algorithm = fixed_window
rate = 1000000/h
on_failure = open
timeout = 2s
INI
start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_fg"
# A second serve on shards: a Redis of its own first, then r.test.
start_redis || { bad "the shards' first node starts"; finish; }
sed "s|^url = .*|url = shards=redis://127.0.0.1:$RPORT,redis://r.test:$P|" \
    "$T/fg.ini" >"$T/sh.ini"
start_fg sh -c "$T/sh.ini" --listen 127.0.0.1:0 || { bad "serve on shards starts"; finish; }
source_of() { # source_of KEY: the "source" of one check of KEY
    curl -s -m 2 -X POST "$U/v1/check?limit=c&key=$1" | grep -o '"source":"[a-z_]*"' | cut -d'"' -f4
}
counted() { # counted CLI KEY: what that server holds for KEY
    local k
    k=$($1 --scan --pattern "*c:{$2}*" | head -1)
    [ -n "$k" ] && $1 get "$k" || echo 0
}
for _ in 1 2 3; do source_of a >/dev/null; done
expect_eq "at start: A counts 3 checks" "$(counted "$A" a)" 3

# until_store KEY TENTHS: check KEY every 0.05 s until the store decides.
until_store() {
    local t0 n=$(($2 * 2))
    t0=$(ms)
    for _ in $(seq 1 "$n"); do
        [ "$(source_of "$1")" = store ] && { echo $(($(ms) - t0)); return 0; }
        sleep 0.05
    done
    return 1
}

# decided_at WHO CLI KEY FROM TO: the store decides KEY again within 2 s,
# the next 5 checks are counted by the server CLI reaches, and the sweep
# logs store_switched from FROM to TO (within a second).
decided_at() {
    local took before
    took=$(until_store "$3" 20)
    check "$1 decides again (in ${took:-no} ms)" test -n "$took"
    before=$(counted "$2" "$3")
    for _ in 1 2 3 4 5; do source_of "$3" >/dev/null; done
    expect_eq "$1: the next 5 checks counted there" "$(($(counted "$2" "$3") - before))" 5
    check "event=store_switched from $4 to $5" wait_until 20 \
        grep -q "event=store_switched .*from=$4 to=$5" "$T/fg.log"
}

# ---- The name moves to B; A a replica: READONLY ---------------------------
dns_set r 127.0.0.2
$A replicaof 127.0.0.2 "$P" >/dev/null
wait_until 50 sh -c "$A info replication | grep -q master_link_status:up" ||
    bad "A replicates B"
decided_at "READONLY from A: the name's new address B" "$B" b 127.0.0.1:$P 127.0.0.2:$P
# Shards: the keys on r.test's node meet READONLY, and that node follows.
for round in 1 2; do
    for i in $(seq 1 20); do
        curl -s -m 2 -o /dev/null -X POST "http://127.0.0.1:$FGPORT_sh/v1/check?limit=c&key=s$i"
    done
    sleep 0.3
done
check "shards: the node of r.test follows it, logged (store_switched node=r.test:$P/0)" \
    wait_until 20 grep -q "event=store_switched .*node=r.test:$P/0 from=127.0.0.1:$P to=127.0.0.2:$P" "$T/sh.log"

# ---- Back to A; B gone: connections refused -------------------------------
$A replicaof no one >/dev/null
dns_set r 127.0.0.1
$B shutdown nosave >/dev/null 2>&1
decided_at "B gone: the name's address A" "$A" c 127.0.0.2:$P 127.0.0.1:$P

# ---- Checks in flight to the old address when the name moves ----------
# A a replica again: a check meets READONLY, and the lookup it asks is
# answered 0.5 s later. Meanwhile A is stopped (SIGSTOP) and 5 checks of
# a limit with a 2 s timeout wait on its connection. When the name moves,
# that connection goes, and they are answered by their policy at once.
# (It was left to finish: they waited their 2 s, and a store closed
# meanwhile read A's late answers into freed checks.)
start_at 127.0.0.2 || bad "B starts again"
APID=$(pgrep -f "redis-server 127.0.0.1:$P" | head -1)
echo 0.5 >"$T/dns/r.delay"
dns_set r 127.0.0.2
$A replicaof 127.0.0.2 "$P" >/dev/null
wait_until 50 sh -c "$A info replication | grep -q master_link_status:up" ||
    bad "A replicates B again"
sleep 1.1 # the last lookup was more than a second ago
n0=$(grep -c 'event=store_switched' "$T/fg.log")
source_of e >/dev/null # READONLY: the lookup is asked
kill -STOP "$APID"
for i in 1 2 3 4 5; do
    curl -s -m 5 -o "$T/held$i.body" -w '%{time_total}' -X POST \
        "$U/v1/check?limit=slow&key=e$i" >"$T/held$i.time" &
done
wait_until 40 sh -c "[ \$(grep -c 'event=store_switched' '$T/fg.log') -gt $n0 ]"
for i in 1 2 3 4 5; do wait_until 30 test -s "$T/held$i.time"; done
kill -CONT "$APID"
for i in 1 2 3 4 5; do
    echo "$(cat "$T/held$i.time") $(grep -o '"source":"[a-z_]*"' "$T/held$i.body" | cut -d'"' -f4)"
done >"$T/held"
# (A check that reached serve only after the move, on a busy host, went
# to B: "store". At least 3 of the 5 must have been held.)
check "the checks held on A's connection: fail_open within 1.3 s of their 2 s ($(tr '\n' ' ' <"$T/held"))" \
    awk '$1 >= 1.3 || ($2 != "fail_open" && $2 != "store") { bad = 1 }
        $2 == "fail_open" { held++ } END { exit bad || NR != 5 || held < 3 }' "$T/held"
check "event=store_switched to B logged" \
    grep -q "event=store_switched .*from=127.0.0.1:$P to=127.0.0.2:$P" "$T/fg.log"
took=$(until_store f 20)
check "B decides (in ${took:-no} ms)" test -n "$took"

# ---- A name of two addresses, one of them in use ----------------------
# r.test now gives 127.1.0.5 (nothing there) first, then B's. B closes
# the connection (CLIENT KILL): the lookup that follows finds B's address
# still the name's, and the store stays (it took the first, and stayed
# there to the end).
rm -f "$T/dns/r.delay"
dns_set r 127.1.0.5 127.0.0.2
sleep 1.1 # the last lookup was more than a second ago
n0=$(grep -c 'event=store_switched' "$T/fg.log")
q0=$(wc -l <"$T/dns.queries")
$B client kill type normal >/dev/null
for i in 1 2 3 4 5; do source_of "g$i" >>"$T/two"; sleep 0.1; done
sleep 1.2 # a sweep
check "the name was looked up again ($(($(wc -l <"$T/dns.queries") - q0)) questions)" \
    test "$(wc -l <"$T/dns.queries")" -gt "$q0"
expect_eq "no move: store_switched lines" "$(grep -c 'event=store_switched' "$T/fg.log")" "$n0"
took=$(until_store h 20)
check "B still decides (in ${took:-no} ms; the 5 before: $(tr '\n' ' ' <"$T/two"))" test -n "$took"

# ---- /etc/hosts changed while serve runs ------------------------------
# The hosts file now names r.test 127.0.0.1 (it wins over the nameserver),
# A is a master again and B is shut down: the lookup reads the file as it
# is now, and the store goes to A. (A resolver made at the first lookup
# was kept: it still knew the file of then, and stayed on B's address.)
printf '127.0.0.1 localhost\n::1 localhost\n127.0.0.1 r.test\n' >"$T/hosts"
$A replicaof no one >/dev/null
sleep 1.1
$B shutdown nosave >/dev/null 2>&1
took=$(until_store i 30)
check "the hosts file's new address A decides (in ${took:-no} ms)" test -n "$took"
# ---- A reload right after another follows the name -------------------
# r.test moves back to B, both servers up and masters (a migration: no
# connection fails, no READONLY), and serve is reloaded to follow it:
# the checks after the reload are counted on B. (A version that kept a
# name's answer 5 s for the stores opened meanwhile stayed on A.)
$A replicaof no one >/dev/null
start_at 127.0.0.2 || bad "B starts once more"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$T/hosts"
dns_set r 127.0.0.1
reload_fg fg 0.3
dns_set r 127.0.0.2
reload_fg fg 0.3
b0=$($B dbsize)
# (The worker takes the new configuration within the settle; on a busy
# host, the checks until then still go to A: each is sent until counted
# on B, 2 s at most.)
for i in $(seq 1 10); do
    for _ in $(seq 1 40); do
        source_of "m$i" >/dev/null
        [ -n "$($B --scan --pattern "*c:{m$i}*" | head -1)" ] && break
        sleep 0.05
    done
done
expect_eq "a reload 0.3 s after the last: the 10 keys checked after it on B" "$(($($B dbsize) - b0))" 10
echo "name lookups: $(wc -l <"$T/dns.queries")"
grep -E 'event=store_(switched|error)' "$T/fg.log" | head -6
finish
