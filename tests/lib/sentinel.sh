# tests/lib/sentinel.sh -- helpers of the Sentinel tests (sourced after
# tests/serve/lib.sh); SP holds the sentinels' ports, MASTER the name they
# monitor.

wait_until() { # wait_until TENTHS CMD...: retry CMD every 0.1 s
    local n=$1; shift
    for _ in $(seq 1 "$n"); do "$@" && return 0; sleep 0.1; done
    return 1
}
synced() { # synced PORT: the replica at PORT replicates from its master
    redis-cli -p "$1" info replication | grep -q 'master_link_status:up'
}
sentinels_ready() { # every sentinel knows the replica and the two others
    local i info
    for i in 0 1 2; do
        info=$(redis-cli -p "${SP[$i]}" sentinel master "$MASTER" 2>/dev/null | paste - - | tr '\t' ' ')
        echo "$info" | grep -q '^num-slaves 1$' || return 1
        echo "$info" | grep -q '^num-other-sentinels 2$' || return 1
    done
}
ms() { echo $(($(date +%s%N) / 1000000)); }
