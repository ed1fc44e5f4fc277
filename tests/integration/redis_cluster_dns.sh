#!/usr/bin/env bash
# A Redis Cluster whose masters are announced by host name
# (cluster-announce-hostname, cluster-preferred-endpoint-type hostname),
# answered by a DNS server of the test's own (tests/lib/dns.sh): a master
# restarted at another address under the same name, as a pod is, is
# reached there. Three masters on 127.0.0.1; n0.test's master is shut down
# and started again on 127.0.0.2 (same port, same nodes.conf), and n0.test
# moved there. floodgate serve learned the names as it ran (looked up on
# its loop): its checks of a key on n0's slots are decided by the store
# again once the cluster is whole, and counted there. Before,
# the store kept the address the name had when it first read the map, and
# those keys followed on_failure until a restart or a reload.
. "$(dirname "$0")/../lib/dns.sh"
dns_namespace "$0" "$@"
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../lib/sentinel.sh"
. "$(dirname "$0")/../lib/cluster.sh"
start_dns || { bad "a DNS server of this test's own"; finish; }
CLUSTER_REPLICAS=0 start_cluster || { bad "a cluster of 3 masters"; finish; }
P0=${CPORT[0]} P1=${CPORT[1]}

# A key on n0's slots.
range=$(redis-cli -p "$P0" cluster nodes | awk '/myself/ { print $9 }')
lo=${range%-*} hi=${range#*-}
K=
for i in $(seq 1 200); do
    s=$(redis-cli -p "$P0" cluster keyslot "k$i")
    [ "$s" -ge "$lo" ] && [ "$s" -le "$hi" ] && { K=k$i; break; }
done
[ -n "$K" ] || { bad "a key on n0's slots $range"; finish; }

cat >"$T/fg.ini" <<INI
[server]
workers = 1
[store]
url = cluster=redis://127.0.0.1:$P1
timeout = 100ms
[limit c]
key = query:k
algorithm = fixed_window
rate = 1000000/h
on_failure = open
INI
start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_fg"
source_of() {
    curl -s -m 2 -X POST "$U/v1/check?limit=c&key=$1" | grep -o '"source":"[a-z_]*"' | cut -d'"' -f4
}
counted() { # counted CLI KEY
    local k
    k=$($1 --scan --pattern "*c:{$2}*" | head -1)
    [ -n "$k" ] && $1 get "$k" || echo 0
}
for _ in 1 2 3; do source_of "$K" >/dev/null; done
expect_eq "n0 at 127.0.0.1 counts 3 checks of $K" "$(counted "redis-cli -p $P0" "$K")" 3

# The masters named by host name from now on: serve, which knew them by
# address, learns their names as it reads the map again (once a second),
# and looks them up on its loop.
for i in 0 1 2; do
    redis-cli -p "${CPORT[$i]}" config set cluster-announce-hostname "n$i.test" >/dev/null
    redis-cli -p "${CPORT[$i]}" config set cluster-preferred-endpoint-type hostname >/dev/null
done
names_known() { # every master named by its host name in P1's slot map
    [ "$(redis-cli -p "$P1" cluster slots | grep -c '^n[012]\.test$')" -ge 3 ]
}
check "CLUSTER SLOTS names the masters n0.test, n1.test, n2.test" wait_until 50 names_known
NK=3
by_name() { # a check of K, then: its node is named n0.test in /metrics
    # (While the new name is looked up its master is unknown: a check then
    # is decided by on_failure, and counts nowhere.)
    [ "$(source_of "$K")" = store ] && NK=$((NK + 1))
    curl -s "$U/metrics" | grep -q "node=\"n0.test:$P0\""
}
check "serve knows n0 by its name" wait_until 50 by_name
expect_eq "n0 at 127.0.0.1 counts every check of $K the store decided" \
    "$(counted "redis-cli -p $P0" "$K")" "$NK"

# ---- n0 restarted at 127.0.0.2, the name moved ------------------------------
redis-cli -p "$P0" shutdown nosave >/dev/null 2>&1
wait_until 50 sh -c "! redis-cli -p $P0 ping >/dev/null 2>&1"
dns_set n0 127.0.0.2
(cd "$T/cluster/$P0" && exec redis-server --port "$P0" --bind 127.0.0.2 \
    --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout "$NODE_TIMEOUT_MS" --save '' --appendonly no \
    --logfile log2 --cluster-announce-hostname n0.test \
    --cluster-preferred-endpoint-type hostname) &
PIDS="$PIDS $!"
# The others learn its address as an operator tells them (CLUSTER MEET):
# Redis does not take a known node's new address from its own pings.
wait_until 50 sh -c "redis-cli -h 127.0.0.2 -p $P0 ping 2>/dev/null | grep -q PONG" ||
    bad "n0 starts at 127.0.0.2"
for p in "$P1" "${CPORT[2]}"; do redis-cli -p "$p" cluster meet 127.0.0.2 "$P0" >/dev/null; done
whole() { redis-cli -p "$P1" cluster info | grep -q cluster_state:ok &&
    redis-cli -p "$P1" cluster nodes | grep -q " 127.0.0.2:$P0@.* connected"; }
check "the cluster knows n0 at 127.0.0.2 and is whole" wait_until 100 whole
t0=$(ms) took=
for _ in $(seq 1 100); do
    [ "$(source_of "$K")" = store ] && { took=$(($(ms) - t0)); break; }
    sleep 0.05
done
check "the store decides $K again, at n0's new address (in ${took:-no} ms)" test -n "$took"
C0="redis-cli -h 127.0.0.2 -p $P0"
before=$(counted "$C0" "$K")
for _ in 1 2 3 4 5; do source_of "$K" >/dev/null; done
expect_eq "n0 at 127.0.0.2 counts the next 5 checks" "$(($(counted "$C0" "$K") - before))" 5
grep -E 'event=store_(error|recovered)' "$T/fg.log" | head -4
finish
