#!/usr/bin/env bash
# A server gives back the memory it no longer needs, so that RSS follows
# what it holds rather than its high-water mark. glibc returns a heap's
# free memory only from its top, and what a server frees lies between
# memory still in use; serve/worker.c hands the free pages back to the
# kernel (malloc_trim) when it frees much at once:
#  1. a reload replaces every worker's store and limiters: here the store
#     is unreachable and a local fallback holds many keys (its tables over
#     a megabyte), then a reload replaces it; once the worker freed it,
#     anonymous RSS must drop by most of it (counted from after a first
#     pass and reload, so that what a reload keeps is not in it);
#  2. a burst of requests in flight leaves spare request contexts (9 KB
#     each) in the worker's pool: here 64 wait at once on a stopped Redis,
#     then light traffic follows; the pool shrinks back and RSS with it
#     (by at least half: the contexts are about 590 KB of it).
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
# A first pass and a reload: what stays resident across reloads is then
# counted in r0. The worker's blocked-key cache (7 MB) is kept by a reload,
# and its pages become resident as the checks' lookups reach them (on some
# kernels a read is enough). Under a sanitizer nothing is given back to
# measure (its allocator keeps freed memory and reuses it for the next
# pass), so there the first pass alone counts.
if [ "$SANITIZED" = 0 ]; then
    curl -s -o /dev/null -X POST "$U?limit=l&key=k[1-$KEYS]"
    reload_fg s 0.5
fi
r0=$(rss_anon s)
codes=$(curl -s -w '\n%{http_code}\n' -X POST "$U?limit=l&key=k[1-$KEYS]" |
    grep -E '^[0-9]{3}$' | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
expect_eq "$KEYS keys allowed by the local fallback" "$codes" "200:$KEYS "
src=$(curl -s -X POST "$U?limit=l&key=k1" | grep -o '"source":"[a-z_]*"')
expect_eq "the decisions are the local fallback's" "$src" '"source":"local"'
r1=$(rss_anon s)
reload_fg s 0.5
r2=$(rss_anon s)
echo "anonymous RSS ${r0}k before, ${r1}k with $KEYS local keys, ${r2}k after a reload"
check "the local keys took memory ($((r1 - r0))k)" test $((r1 - r0)) -gt 1024
if [ "$SANITIZED" = 0 ]; then
    check "a reload gave back at least three quarters of it" \
        test $(((r1 - r2) * 4)) -ge $((3 * (r1 - r0)))
fi

# --- 2. a burst's request contexts -------------------------------------------
start_redis || { bad "redis starts"; finish; }
cat >"$T/b.ini" <<INI
[server]
workers = 1
; sweeps every 100 ms
request_timeout = 500ms
[store]
url = redis://127.0.0.1:$RPORT
prefix = rb$$:
timeout = 300ms
[limit b]
key = query:key
rate = 1000000/min
on_failure = open
INI
start_fg b -c "$T/b.ini" --listen 127.0.0.1:0 || { bad "server b starts"; finish; }
UB="http://127.0.0.1:$FGPORT_b/v1/check?limit=b&key=k"
"$FGLOAD" -n 200 -c 4 "$UB" >/dev/null 2>&1
b0=$(rss_anon b)
kill -STOP "$RPID"
out=$("$FGLOAD" -n 64 -c 64 "$UB" 2>/dev/null)
kill -CONT "$RPID"
check "64 requests in flight at once, all answered ($out)" \
    test "$(field "$out" s200)" = 64
b1=$(rss_anon b)
# Light traffic, a few requests at a time, for 2 s: 20 sweeps.
"$FGLOAD" -d 2000 -r 200 -c 2 "$UB" >/dev/null 2>&1
b2=$(rss_anon b)
echo "anonymous RSS ${b0}k before the burst, ${b1}k after it, ${b2}k after 2 s of light traffic"
check "the burst took memory ($((b1 - b0))k)" test $((b1 - b0)) -gt 256
if [ "$SANITIZED" = 0 ]; then
    # The pool's contexts are about 590 KB of it.
    check "light traffic gave back at least half of it" \
        test $(((b1 - b2) * 2)) -ge $((b1 - b0))
fi
check "server alive after the reloads" kill -0 "$FGPID_s"
check "server b alive" kill -0 "$FGPID_b"
finish
