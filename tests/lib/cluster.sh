# tests/lib/cluster.sh -- a real Redis Cluster for the tests: 3 masters and
# 3 replicas (or none) on free loopback ports in $T, made by redis-cli --cluster
# create. Source it after tests/serve/lib.sh (free_port, PIDS, $T).
#   start_cluster      sets CPORT[0..5] and CPID[0..5]; 0 once state is ok
#                      and every master has its replica
#   cluster_master_of PORT   the port of the master serving PORT's slots
#   cluster_id PORT          the node id of PORT
NODE_TIMEOUT_MS=${NODE_TIMEOUT_MS:-1000}
# CLUSTER_REPLICAS=0: 3 masters alone (the benchmark's cluster).
CLUSTER_REPLICAS=${CLUSTER_REPLICAS:-1}
CPORT=() CPID=()

# A port for a node: its cluster bus (port + 10000) must be free too, and
# both below the ephemeral range (32768 and up), where an outgoing
# connection may hold one; neither may be a port of a node chosen already.
cluster_port() {
    local p
    for _ in $(seq 1 100); do
        p=$((20000 + (RANDOM + BASHPID) % 2700))
        case " ${CPORT[*]} " in *" $p "*) continue ;; esac
        ss -Htan "sport = :$p or sport = :$((p + 10000))" 2>/dev/null | grep -q . && continue
        echo "$p"; return 0
    done
    return 1
}

start_cluster_once() {
    local i p addrs=""
    CPORT=() CPID=()
    local nodes=$((3 * (CLUSTER_REPLICAS + 1)))
    for i in $(seq 0 $((nodes - 1))); do
        p=$(cluster_port) || return 1
        mkdir -p "$T/cluster/$p"
        (cd "$T/cluster/$p" && exec redis-server --port "$p" --bind 127.0.0.1 \
            --cluster-enabled yes --cluster-config-file nodes.conf \
            --cluster-node-timeout "$NODE_TIMEOUT_MS" --save '' \
            --appendonly no --logfile log) &
        CPID[$i]=$!
        CPORT[$i]=$p
        PIDS="$PIDS ${CPID[$i]}"
        addrs="$addrs 127.0.0.1:$p"
    done
    for i in $(seq 0 $((nodes - 1))); do
        for _ in $(seq 1 100); do
            redis-cli -p "${CPORT[$i]}" ping 2>/dev/null | grep -q PONG && break
            kill -0 "${CPID[$i]}" 2>/dev/null || return 1
            sleep 0.02
        done
    done
    # shellcheck disable=SC2086
    redis-cli --cluster create $addrs --cluster-replicas "$CLUSTER_REPLICAS" --cluster-yes \
        >"$T/cluster/create.log" 2>&1 || return 1
    for _ in $(seq 1 200); do
        local ok=1
        for i in $(seq 0 $((nodes - 1))); do
            redis-cli -p "${CPORT[$i]}" cluster info 2>/dev/null |
                grep -q 'cluster_state:ok' || ok=0
        done
        [ "$(redis-cli -p "${CPORT[0]}" cluster nodes | grep -c ' slave ')" = $((3 * CLUSTER_REPLICAS)) ] || ok=0
        [ $ok = 1 ] && return 0
        sleep 0.05
    done
    return 1
}

# Three tries: a port can be taken between its choice and its bind.
start_cluster() {
    local i
    for _ in 1 2 3; do
        start_cluster_once && return 0
        for i in "${CPID[@]}"; do kill -KILL "$i" 2>/dev/null; wait "$i" 2>/dev/null; done
    done
    return 1
}

cluster_id() { redis-cli -p "$1" cluster myid; }

# The masters' ports, as the node at port $1 sees them.
cluster_masters() {
    redis-cli -p "$1" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" {split($2, a, "@"); split(a[1], b, ":"); print b[2]}'
}
