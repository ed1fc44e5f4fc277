#!/usr/bin/env bash
# redis://NAME:PORT whose name moves to another address, as a managed
# Redis's endpoint does after a failover, or a restarted pod's: serve
# follows it. A DNS server on a 127.x address answers r.test with the
# address written in a file (TTL 0), named by a private /etc/resolv.conf
# bind-mounted in a mount namespace of this test's own (unshare -m: root).
# Redis A listens on 127.0.0.1:P, Redis B on 127.0.0.2:P (the same port).
#   - A made a replica of B, the name moved to B: A answers READONLY on a
#     connection that stays up; serve looks the name up again and goes to
#     B, where the checks are decided by the store again within 2 s, and
#     logs event=store_switched;
#   - B shut down, the name moved back to A (promoted): connections to B
#     are refused; serve goes back to A within 2 s.
# Before, the address of the name at start was used until a restart or a
# reload: every check followed on_failure.
if [ -z "${FG_DNS_NS:-}" ]; then
    if ! unshare -m true 2>/dev/null; then
        echo "skip: unshare -m not permitted (a private resolv.conf needs it)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    FG_DNS_NS=1 exec unshare -m bash "$0" "$@"
fi
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../lib/sentinel.sh"

# ---- The DNS server: r.test is what $T/ip says ----------------------------
cat >"$T/dns.py" <<'PY'
import socket, struct, sys
addr, ipfile, log = sys.argv[1], sys.argv[2], open(sys.argv[3], "a")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, 53))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(512)
    i, labels = 12, []
    while d[i]:
        labels.append(d[i + 1:i + 1 + d[i]].decode().lower())
        i += d[i] + 1
    name, qtype = ".".join(labels), struct.unpack(">H", d[i + 1:i + 3])[0]
    q, an, rcode = d[12:i + 5], b"", 3  # NXDOMAIN unless r.test
    if name == "r.test":
        rcode = 0
        ip = open(ipfile).read().split()[0]
        log.write("%s %d %s\n" % (name, qtype, ip)); log.flush()
        if qtype == 1:  # A: the file's address, TTL 0; AAAA: none
            an = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(ip)
    hdr = d[:2] + struct.pack(">HHHHH", 0x8180 | rcode, 1, 1 if an else 0, 0, 0)
    s.sendto(hdr + q + an, a)
PY
echo 127.0.0.1 >"$T/ip"
NS=127.53.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
python3 "$T/dns.py" "$NS" "$T/ip" "$T/dns.queries" >"$T/dns.out" 2>"$T/dns.log" &
PIDS="$PIDS $!"
wait_until 50 grep -q ready "$T/dns.out" || { bad "the DNS server starts on $NS:53"; finish; }
printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$NS" >"$T/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$T/hosts"
mount --bind "$T/resolv.conf" /etc/resolv.conf && mount --bind "$T/hosts" /etc/hosts ||
    { bad "private resolv.conf and hosts"; finish; }
check "r.test resolves to 127.0.0.1" sh -c 'getent ahostsv4 r.test | grep -q "^127.0.0.1 "'

# ---- Two Redis servers on one port, at two addresses ----------------------
start_at() { # start_at IP: a redis-server on IP:$P
    mkdir -p "$T/r$1"
    redis-server --port "$P" --bind "$1" --save '' --appendonly no \
        --dir "$T/r$1" --logfile "$T/r$1/log" &
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
INI
start_fg fg -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_fg"
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

# ---- The name moves to B; A a replica: READONLY ---------------------------
echo 127.0.0.2 >"$T/ip"
$A replicaof 127.0.0.2 "$P" >/dev/null
wait_until 50 sh -c "$A info replication | grep -q master_link_status:up" ||
    bad "A replicates B"
took=$(until_store b 20)
check "READONLY from A: the name's new address B decides again (in ${took:-no} ms)" test -n "$took"
before=$(counted "$B" b)
for _ in 1 2 3 4 5; do source_of b >/dev/null; done
expect_eq "at B: the next 5 checks counted there" "$(($(counted "$B" b) - before))" 5
check "event=store_switched from A to B (a sweep: within 1 s)" wait_until 20 \
    grep -q "event=store_switched .*from=127.0.0.1:$P to=127.0.0.2:$P" "$T/fg.log"

# ---- Back to A; B gone: connections refused -------------------------------
$A replicaof no one >/dev/null
echo 127.0.0.1 >"$T/ip"
$B shutdown nosave >/dev/null 2>&1
took=$(until_store c 20)
check "B gone: the name's address A decides again (in ${took:-no} ms)" test -n "$took"
before=$(counted "$A" c)
for _ in 1 2 3 4 5; do source_of c >/dev/null; done
expect_eq "at A: the next 5 checks counted there" "$(($(counted "$A" c) - before))" 5
check "event=store_switched from B to A" wait_until 20 \
    grep -q "event=store_switched .*from=127.0.0.2:$P to=127.0.0.1:$P" "$T/fg.log"
echo "name lookups: $(wc -l <"$T/dns.queries")"
grep -E 'event=store_(switched|error)' "$T/fg.log" | head -6
finish
