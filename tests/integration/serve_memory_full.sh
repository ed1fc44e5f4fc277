#!/usr/bin/env bash
# The memory store at max_keys drops the least recently used keys to make
# room, their usage forgotten (documented): /metrics says how full it is
# and how many it dropped, so that an operator sees it happen (nothing
# did). 100 keys, a refused key, then 300 others (a token bucket of an
# hour: no key expires during the run, as a window's end would).
. "$(dirname "$0")/../serve/lib.sh"

cat >"$T/m.ini" <<INI
[store]
url = memory?max_keys=100
[limit l]
key = query:u
algorithm = token_bucket
rate = 1/h
INI
start_fg m -c "$T/m.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }
U="http://127.0.0.1:$FGPORT_m"
metric() { curl -s "$U/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
expect_eq "empty: floodgate_memory_keys" "$(metric floodgate_memory_keys)" 0
expect_eq "empty: floodgate_memory_evicted_total" "$(metric floodgate_memory_evicted_total)" 0
curl -s -o /dev/null -X POST "$U/v1/check?limit=l&key=victim"
expect_eq "victim: refused the second time" \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$U/v1/check?limit=l&key=victim")" 429
for i in $(seq 1 300); do
    curl -s -o /dev/null -X POST "$U/v1/check?limit=l&key=k$i"
done
keys=$(metric floodgate_memory_keys)
evicted=$(metric floodgate_memory_evicted_total)
echo "after 301 keys: $keys held, $evicted evicted"
check "floodgate_memory_keys at most max_keys (100), and near it ($keys)" \
    test "$keys" -le 100 -a "$keys" -ge 90
check "floodgate_memory_evicted_total: the keys beyond ($evicted of 201 at least)" \
    test "$evicted" -ge 201 -a "$evicted" -le 301
finish
