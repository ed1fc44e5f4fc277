#!/usr/bin/env bash
# The blocked-key cache across reloads: its table (the default 65536
# entries, about 6 MB a worker) is calloc'd, so its pages become resident
# only once written, and a reload makes every limiter anew. The same keys
# blocked again after each reload must land where they were before the
# reload (the cache places a key by its limit's name, not by the limiter):
# RSS then stays where the first round left it. Were they placed by the
# limiter, each reload would write them to fresh pages, and 20 reloads of
# 300 blocked keys would make most of the table resident (+5 MB).
. "$(dirname "$0")/../serve/lib.sh"
# A small quarantine keeps a sanitizer build's RSS readable.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
KEYS=300
ROUNDS=20

start_redis || { bad "redis starts"; finish; }
cat >"$T/s.ini" <<INI
[server]
workers = 1
[store]
url = redis://127.0.0.1:$RPORT
prefix = rc$$:
timeout = 200ms
[limit one]
key = query:k
algorithm = fixed_window
rate = 1/h
on_failure = open
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
U="http://127.0.0.1:$FGPORT_s"

# block: each of the KEYS keys once (allowed, none left: a block until the
# hour's end) and once more (refused from the cache); prints the statuses.
block() {
    curl -s -w '\n%{http_code}\n' -X POST \
        "$U/v1/check?limit=one&key=k[1-$KEYS]" \
        "$U/v1/check?limit=one&key=k[1-$KEYS]" | grep -E '^[0-9]{3}$' |
        sort | uniq -c |
        awk '{ printf "%s:%s ", $2, $1 }'
}

got=$(block)
expect_eq "first round: $KEYS allowed, $KEYS refused" "$got" "200:$KEYS 429:$KEYS "
# The second round's refusals come from the cache once it is warm: a
# round after a reload refuses every key (the store's counts stay).
reload_fg s 0.1
block >/dev/null
r0=$(rss_anon s)
refused_all=1
for _ in $(seq 1 "$ROUNDS"); do
    reload_fg s 0.1
    got=$(block)
    [ "$got" = "429:$((2 * KEYS)) " ] || refused_all=0
done
r1=$(rss_anon s)
expect_eq "after each reload every key refused" "$refused_all" 1
curl -s "$U/metrics" >"$T/m"
cached=$(awk '/^floodgate_cache_hits_total/ { s += $2 } END { print s + 0 }' "$T/m")
check "the cache answered refusals ($cached)" test "$cached" -ge $((ROUNDS * KEYS))
expect_eq "the entries held in the cache now" \
    "$(awk '/^floodgate_blocked_cache_entries / { print $2 }' "$T/m")" "$KEYS"
echo "anonymous RSS ${r0}k before $ROUNDS reloads, ${r1}k after ($((r1 - r0))k)"
# A sanitizer build keeps up to its 1 MB quarantine of freed memory
# resident on top (seen: +0.9 to +1.5 MB there, +0.1 MB plain), so it gets
# 1 MB more; both stay well under the +5 MB of keys placed by limiter.
budget=1024
nm "$FLOODGATE" 2>/dev/null | grep -q __asan_init && budget=2048
check "anonymous RSS grew by less than $((budget / 1024)) MB over $ROUNDS reloads" \
    test $((r1 - r0)) -lt $budget
check "server alive" kill -0 "$FGPID_s"

# A reload clears the cache by visiting only the sets that hold keys: a
# large table (4,194,304 entries, 470 MB reserved) with a few keys blocked
# stays unwritten. (Walking it all stalled the worker for over a second
# and made all of it resident.)
sed 's/^\[server\]$/[server]\nblocked_cache = 4194304/' "$T/s.ini" >"$T/big.ini"
start_fg big -c "$T/big.ini" --listen 127.0.0.1:0 || { bad "large cache: server starts"; finish; }
U="http://127.0.0.1:$FGPORT_big"
block >/dev/null
b0=$(rss_anon big)
for _ in 1 2 3; do reload_fg big 0.1; done
got=$(block)
b1=$(rss_anon big)
echo "large cache: anonymous RSS ${b0}k before 3 reloads, ${b1}k after"
expect_eq "large cache: every key refused after the reloads" "$got" "429:$((2 * KEYS)) "
check "large cache: a reload leaves the table unwritten (+$((b1 - b0))k < 32 MB)" \
    test $((b1 - b0)) -lt 32768
finish
