# tests/lib/dns.sh -- a DNS server of a test's own, for host names that
# move (sourced after tests/serve/lib.sh and tests/lib/sentinel.sh, in a
# mount namespace of the test's own: see dns_namespace).
#   dns_namespace "$0" "$@"   re-runs the test under unshare -m (root), or
#                             skips it where that is not permitted
#   start_dns                 a UDP server on a 127.x address answering
#                             NAME.test with the addresses in $T/dns/NAME,
#                             in order (127.0.0.1 when there is none; TTL 0; no
#                             AAAA), after the seconds in
#                             $T/dns/NAME.delay, or else in
#                             $T/dns/all.delay, if there is one; named by
#                             a private /etc/resolv.conf
#                             and an /etc/hosts of localhost only;
#                             questions logged in $T/dns.queries
#   dns_set NAME ADDR...      NAME.test answers ADDR... from now on

dns_namespace() {
    [ -n "${FG_DNS_NS:-}" ] && return 0
    if ! unshare -m true 2>/dev/null; then
        echo "skip: unshare -m not permitted (a private resolv.conf needs it)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    FG_DNS_NS=1 exec unshare -m bash "$@"
}

start_dns() {
    mkdir -p "$T/dns"
    cat >"$T/dns.py" <<'PY'
import os, socket, struct, sys, threading, time
addr, dir, log = sys.argv[1], sys.argv[2], open(sys.argv[3], "a")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, 53))
print("ready", flush=True)
def answer(d, a):
    i, labels = 12, []
    while d[i]:
        labels.append(d[i + 1:i + 1 + d[i]].decode().lower())
        i += d[i] + 1
    name, qtype = ".".join(labels), struct.unpack(">H", d[i + 1:i + 3])[0]
    q, an, rcode = d[12:i + 5], b"", 3  # NXDOMAIN unless under .test
    if name.endswith(".test"):
        rcode, f = 0, os.path.join(dir, name[:-5])
        ips = open(f).read().split() if os.path.exists(f) else ["127.0.0.1"]
        log.write("%s %d %s\n" % (name, qtype, " ".join(ips))); log.flush()
        for late in (f + ".delay", os.path.join(dir, "all.delay")):
            if os.path.exists(late):
                time.sleep(float(open(late).read()))
                break
        if qtype == 1:  # A, TTL 0, in the file's order
            for ip in ips:
                an += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(ip)
    n = 0 if not an else len(ips)
    hdr = d[:2] + struct.pack(">HHHHH", 0x8180 | rcode, 1, n, 0, 0)
    s.sendto(hdr + q + an, a)
while True:
    d, a = s.recvfrom(512)
    threading.Thread(target=answer, args=(d, a), daemon=True).start()
PY
    local ns=127.53.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
    python3 "$T/dns.py" "$ns" "$T/dns" "$T/dns.queries" >"$T/dns.out" 2>"$T/dns.log" &
    PIDS="$PIDS $!"
    wait_until 50 grep -q ready "$T/dns.out" || return 1
    printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$ns" >"$T/resolv.conf"
    printf '127.0.0.1 localhost\n::1 localhost\n' >"$T/hosts"
    mount --bind "$T/resolv.conf" /etc/resolv.conf && mount --bind "$T/hosts" /etc/hosts
}

dns_set() { local n=$1; shift; echo "$*" >"$T/dns/$n"; }
