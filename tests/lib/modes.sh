# tests/lib/modes.sh -- the approximate modes on a store of several nodes,
# for redis_shards.sh and redis_cluster.sh (sourced after serve/lib.sh).

# modes_ini: the [limit] sections the servers add (2 servers x 2 workers).
modes_ini() {
    cat <<INI
[limit msy]
key = query:k
algorithm = token_bucket
rate = 20/h
mode = sync:50ms
fallback_servers = 2
timeout = 500ms
[limit mle]
key = query:k
algorithm = fixed_window
rate = 20/day
mode = lease
fallback_servers = 2
timeout = 500ms
INI
}

# modes_check WHAT URL A B: nine keys (spread over the nodes), 40 checks
# each, 8 at a time over servers A and B: lease never over its 20; sync
# at least 20 and within its cap (4 servers: 80), and once synced the
# store holds all of it (URL, with the servers' prefix, is read back).
modes_check() {
    local what=$1 url=$2 a=$3 b=$4 k out al lok=0 sok=0 held=0 rem
    for k in $(seq 1 9); do
        out=$("$FGLOAD" -n 40 -c 8 "$a/v1/check?limit=mle&key=m$k" "$b/v1/check?limit=mle&key=m$k")
        al=$(field "$out" s200)
        if [ "$al" -le 20 ] && [ "$al" -ge 5 ] && [ "$(field "$out" errors)" = 0 ]; then
            lok=$((lok + 1))
        else
            echo "lease m$k: $out"
        fi
        out=$("$FGLOAD" -n 40 -c 8 "$a/v1/check?limit=msy&key=m$k" "$b/v1/check?limit=msy&key=m$k")
        al=$(field "$out" s200)
        if [ "$al" -ge 20 ] && [ "$al" -le 80 ] && [ "$(field "$out" errors)" = 0 ]; then
            sok=$((sok + 1))
        else
            echo "sync m$k: $out"
        fi
        sleep 0.2
        rem=$("$FLOODGATE" check --store "$url" --timeout 2000 --name msy --limit 20/h \
            --key "m$k" --peek 2>&1 | sed -n 's/.*remaining=\([0-9]*\).*/\1/p')
        [ "$rem" = 0 ] && held=$((held + 1))
    done
    expect_eq "$what: lease, 9 keys: never over the limit" "$lok" 9
    expect_eq "$what: sync, 9 keys: at least the limit, within the cap" "$sok" 9
    expect_eq "$what: sync, 9 keys: the store counts the usage (nothing left)" "$held" 9
}
