#!/usr/bin/env bash
# A reload gives back the memory of the configuration it replaced. Each
# reload replaces every worker's store and limiters; they were allocated
# while requests and connections came and went, so the holes they leave
# when freed lie between memory still in use, and glibc returns a heap's
# free memory only from its top: without more, a server keeps the high
# mark of every configuration it ran. Here the store is unreachable and a
# local fallback holds many keys (its tables over a megabyte), then a
# reload replaces it: once the worker freed it, anonymous RSS must drop by
# most of it (serve/worker.c hands free pages back after freeing a
# configuration).
. "$(dirname "$0")/../serve/lib.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
SANITIZED=0
nm "$FLOODGATE" 2>/dev/null | grep -q __asan_init && SANITIZED=1
KEYS=${KEYS:-20000}

# No Redis on this port: every check falls back to the local limit.
NOPORT=$(free_port)
cat >"$T/s.ini" <<INI
[server]
workers = 1
[store]
url = redis://127.0.0.1:$NOPORT
prefix = rr$$:
timeout = 5ms
[limit l]
key = query:key
algorithm = token_bucket
rate = 1000000/min
on_failure = local
fallback_servers = 1
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
U="http://127.0.0.1:$FGPORT_s/v1/check"
rss_anon() { awk '/^RssAnon:/ { print $2 }' "/proc/$FGPID_s/status"; }
# reload: SIGHUP, then wait until it is logged and the worker took it.
reload() {
    local n0
    n0=$(grep -c 'event=reload result=ok' "$T/s.log")
    kill -HUP "$FGPID_s"
    for _ in $(seq 1 300); do
        [ "$(grep -c 'event=reload result=ok' "$T/s.log")" -gt "$n0" ] && break
        sleep 0.01
    done
    sleep 0.5
}

r0=$(rss_anon)
codes=$(curl -s -w '\n%{http_code}\n' -X POST "$U?limit=l&key=k[1-$KEYS]" |
    grep -E '^[0-9]{3}$' | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
expect_eq "$KEYS keys allowed by the local fallback" "$codes" "200:$KEYS "
src=$(curl -s -X POST "$U?limit=l&key=k1" | grep -o '"source":"[a-z_]*"')
expect_eq "the decisions are the local fallback's" "$src" '"source":"local"'
r1=$(rss_anon)
reload
r2=$(rss_anon)
echo "anonymous RSS ${r0}k at start, ${r1}k with $KEYS local keys, ${r2}k after a reload"
check "the local keys took memory ($((r1 - r0))k)" test $((r1 - r0)) -gt 1024
if [ "$SANITIZED" = 0 ]; then
    check "a reload gave back at least three quarters of it" \
        test $(((r1 - r2) * 4)) -ge $((3 * (r1 - r0)))
fi
reload
check "server alive after the reloads" kill -0 "$FGPID_s"
finish
