#!/usr/bin/env bash
# bench/redis.sh -- the Redis store's decisions per second through
# libfloodgate at pipeline depth 1 and 16, beside redis-benchmark sending the
# same commands at the same depth to the same server in the same run; then
# Redis server time per decision (INFO commandstats) beside a bare INCR.
# Not a test: it prints figures and ratios, as Markdown. FG_BENCH_SECS sets each run's
# length (default 1), FG_BENCH_REPS how many runs each side's best is taken
# from (default 3).
set -u
. "$(dirname "$0")/lib.bash"
bench_args "$@"
cd "$(dirname "$0")/.."
# BUILD may be relative to the repository or absolute (make BUILD=/abs).
BUILD=$(realpath -m "${BUILD:-build}")
TOOL=$BUILD/redis/redis_bench
: "${FG_BENCH_SECS:=1}" "${FG_BENCH_REPS:=3}"
bench_whole FG_BENCH_SECS FG_BENCH_REPS
SECS=$FG_BENCH_SECS
REPS=$FG_BENCH_REPS
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null ||
    ! command -v ss >/dev/null || [ ! -x "$TOOL" ]; then
    echo "redis bench: needs redis-server, redis-benchmark, ss (iproute2) and $TOOL (make all)"
    exit 0
fi
DIR=$(mktemp -d)
cleanup() {
    [ -f "$DIR/r.pid" ] && kill "$(cat "$DIR/r.pid")" 2>/dev/null
    sleep 0.1
    rm -rf "$DIR"
}
bench_traps
# A loopback port no socket uses, below the ephemeral range.
PORT=""
for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12000))
    [ -z "$(ss -Htan "sport = :$p")" ] && PORT=$p && break
done
[ -n "$PORT" ] || { echo "redis bench: no free port"; exit 0; }
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --daemonize yes \
    --pidfile "$DIR/r.pid" --save '' --appendonly no --logfile "$DIR/log" >/dev/null
for _ in $(seq 100); do
    redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break
    sleep 0.02
done
URL="redis://127.0.0.1:$PORT"
cli() { redis-cli -p "$PORT" "$@"; }

lib_rate() { # ALGO DEPTH [RATE]
    "$TOOL" run "$URL" "$1" "$2" "$SECS" ${3:-} | awk '$1 == "decisions_per_s" { print $2 }'
}
# redis-benchmark, one connection, pipeline DEPTH, N requests: requests/s.
rb_rate() { # DEPTH N CMD...
    local depth=$1 n=$2
    shift 2
    # 0 when no row follows the CSV header (the command failed).
    redis-benchmark -p "$PORT" -c 1 -P "$depth" -n "$n" -r 100000 --csv "$@" 2>/dev/null |
        tr -d '"' | awk -F, 'NR > 1 && $2 + 0 > 0 { v = $2 } END { print v + 0 }'
}
# The command each algorithm sends, as redis-benchmark arguments, with the
# arguments of the limit redis_bench uses (1000000/s, cost 1, Redis TIME).
ref_cmd() {
    case $1 in
    sliding_window) echo "EVALSHA $SHA_SLIDING 1 fg:bench:{k__rand_int__}: 1000000 1000000 1" ;;
    token_bucket) echo "EVALSHA $SHA_TOKEN 1 fg:bench:1000000:{k__rand_int__} $TOKEN_ARGS" ;;
    esac
}
SHA_SLIDING=$("$TOOL" sha "$URL" sliding_window)
SHA_TOKEN=$("$TOOL" sha "$URL" token_bucket)
# The token bucket script's arguments for one check of the limit (its
# rate in fixed point, then the cost), as the library sends them: read
# from MONITOR during a short run at depth 1, so that the reference keeps
# up with the script. The last one, 'now', is added by measure().
# redis-cli itself in the background (not through cli, whose subshell
# would be killed and leave MONITOR attached, slowing every command after).
redis-cli -p "$PORT" monitor >"$DIR/monitor" 2>/dev/null &
MON=$!
sleep 0.2
"$TOOL" run "$URL" token_bucket 1 1 >/dev/null
kill "$MON" 2>/dev/null
wait "$MON" 2>/dev/null
TOKEN_ARGS=$(awk -F'"' '$2 == "EVALSHA" && $6 == "1" {
    for (i = 10; i <= 22; i += 2) printf "%s%s", (i > 10 ? " " : ""), $i
    print ""; exit }' "$DIR/monitor")

# One measurement of each side for ALGO at DEPTH: "library reference".
measure() { # ALGO DEPTH
    local algo=$1 depth=$2 lib n ref r1 r2
    if [ "$algo" = fixed_window ]; then
        # Hour-long windows: the keys exist, as in steady traffic.
        lib=$(lib_rate "$algo" "$depth" 1000000000/h)
    else
        lib=$(lib_rate "$algo" "$depth")
    fi
    n=$(awk -v r="${lib:-0}" -v s="$SECS" 'BEGIN { n = int(r * s); if (n < 20000) n = 20000; print n }')
    if [ "$algo" = fixed_window ]; then
        # INCR + PEXPIRE NX travel together: 2 x depth commands per round
        # trip. redis-benchmark sends one command, so each runs alone at
        # that depth on the same keys and a decision costs the time of one
        # of each: 1 / (1/r_incr + 1/r_pexpire).
        r1=$(rb_rate $((2 * depth)) $((2 * n)) INCR 'fg:bench:{k__rand_int__}:1')
        r2=$(rb_rate $((2 * depth)) $((2 * n)) PEXPIRE 'fg:bench:{k__rand_int__}:1' 3600000 NX)
        ref=$(awk -v a="$r1" -v b="$r2" 'BEGIN { if (a > 0 && b > 0) printf "%.0f", 1 / (1 / a + 1 / b); else print 0 }')
    else
        # The last argument, '' ('now' = Redis TIME), as the library sends
        # for one check; at depth 16 the library batches token bucket
        # checks into one call, which redis-benchmark cannot.
        ref=$(rb_rate "$depth" "$n" $(ref_cmd "$algo") "")
    fi
    echo "${lib:-0} ${ref:-0}"
}

# A figure with thousands separators (mawk's printf has no ' flag).
commas() { awk -v v="$1" 'BEGIN { t = sprintf("%.0f", v)
    while (t ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", t)
    print t }'; }
cat <<MD
## Redis store: decisions/s beside redis-benchmark, server time per decision

What: decisions per second of libfloodgate's Redis store (\`redis_bench\`,
one connection, the async client, a limit of 1,000,000/s) at pipeline
depth 1 and 16, beside \`redis-benchmark -c 1 -P DEPTH\` sending the same
commands with the same arguments to the same redis-server
($(redis-server --version | cut -d' ' -f3 | sed 's/v=//'), a free loopback port) in the same run. A fixed window's
reference is INCR and PEXPIRE NX each run alone at twice the depth
(a decision costs one of each: 1 / (1/r_incr + 1/r_pexpire)); the Lua
algorithms' is EVALSHA of the same script. Each side's best of $REPS
interleaved runs of ${SECS} s. At depth 16 the library batches token bucket
checks into one call, which redis-benchmark cannot.

| algorithm | depth | library decisions/s | redis-benchmark decisions/s | ratio | target |
|---|---|---|---|---|---|
MD
for algo in fixed_window sliding_window token_bucket; do
    for depth in 1 16; do
        # Each side's best of REPS interleaved runs: on a shared machine
        # the best run is the one least disturbed.
        best_lib=0 best_ref=0
        for _ in $(seq "$REPS"); do
            read -r lib ref < <(measure "$algo" "$depth")
            best_lib=$(awk -v a="$lib" -v b="$best_lib" 'BEGIN { print (a > b) ? a : b }')
            best_ref=$(awk -v a="$ref" -v b="$best_ref" 'BEGIN { print (a > b) ? a : b }')
        done
        ratio=$(awk -v a="$best_lib" -v b="$best_ref" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
        printf '| %s | %d | %s | %s | %s× | ≥ 0.9× |\n' "$algo" "$depth" \
            "$(commas "$best_lib")" "$(commas "$best_ref")" "$ratio"
    done
done

# Server time per decision, from INFO commandstats after a library run.
stat() { # COMMAND FIELD
    cli info commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_$1" -v f="$2" '
        $1 == c { for (i = 2; i < NF; i += 2) if ($i == f) print $(i + 1) }'
}
# Server time of one run: "per_decision detail" for ALGO at RATE, or for
# the bare INCR when ALGO is "incr".
server_time() { # ALGO RATE
    local algo=$1 rate=$2 a a2 b c c1 c2 usec calls detail
    cli config resetstat >/dev/null
    if [ "$algo" = incr ]; then
        redis-benchmark -p "$PORT" -c 1 -P 16 -n $((200000 * SECS)) -r 100000 -q \
            incr 'bench:{k__rand_int__}' >/dev/null 2>&1
        usec=$(stat incr usec) calls=$(stat incr calls) detail=""
    elif [ "$algo" = fixed_window ]; then
        "$TOOL" run "$URL" "$algo" 16 "$SECS" "$rate" >/dev/null
        # Cost 1 is sent as INCR, larger costs as INCRBY.
        a=$(stat incr usec) a2=$(stat incrby usec) b=$(stat pexpire usec)
        c=$(stat decrby usec)
        a=$((${a:-0} + ${a2:-0}))
        usec=$((a + ${b:-0} + ${c:-0}))
        c1=$(stat incr calls) c2=$(stat incrby calls)
        calls=$((${c1:-0} + ${c2:-0}))
        detail=$(awk -v a="$a" -v b="${b:-0}" -v c="$calls" 'BEGIN { printf "(INCR %.3f + PEXPIRE NX %.3f)", a / c, b / c }')
    else
        # Per decision, not per call: the async client sends a token
        # bucket batch (up to 64 checks) as one EVALSHA.
        local out dec
        out=$("$TOOL" run "$URL" "$algo" 16 "$SECS" "$rate")
        dec=$(echo "$out" | awk '$1 == "decisions" { print $2 }')
        a=$(stat evalsha usec) b=$(stat eval usec)
        usec=$((${a:-0} + ${b:-0}))
        a=$(stat evalsha calls) b=$(stat eval calls)
        calls=${dec:-0}
        detail=$(awk -v d="${dec:-0}" -v c=$((${a:-0} + ${b:-0})) 'BEGIN {
            printf "(EVALSHA, including the commands the script runs; %.1f decisions per call)", (c > 0 ? d / c : 0) }')
    fi
    awk -v u="${usec:-0}" -v c="${calls:-0}" -v d="$detail" 'BEGIN { if (c > 0) printf "%.3f %s\n", u / c, d; else print "0" }'
}

cat <<MD

Redis server time per decision: \`CONFIG RESETSTAT\`, one library run at
depth 16, then the \`usec\` of \`INFO commandstats\` over the decisions, the
least of $REPS runs, beside a bare INCR sent by redis-benchmark (depth 16)
in the same rounds. A Lua script's time includes the commands it runs.

| algorithm | limit | µs per decision | ratio to a bare INCR | target | detail |
|---|---|---|---|---|---|
MD
# fixed_window twice: with 1 s windows every key is created (and given its
# expiry) anew each second; with 1 h windows the keys already exist, as
# for the bare INCR. Runs interleave with the bare INCR's so both see the
# same machine.
incr=0
declare -A best bestd
rows="fixed_window:1000000000/h fixed_window:1000000/s sliding_window:1000000/s token_bucket:1000000/s"
for _ in $(seq "$REPS"); do
    read -r t _ < <(server_time incr "")
    incr=$(awk -v a="$t" -v b="$incr" 'BEGIN { print (b == 0 || (a > 0 && a < b)) ? a : b }')
    for row in $rows; do
        read -r t d < <(server_time "${row%%:*}" "${row#*:}")
        if awk -v a="$t" -v b="${best[$row]:-0}" 'BEGIN { exit !(b == 0 || (a > 0 && a < b)) }'; then
            best[$row]=$t
            bestd[$row]=$d
        fi
    done
done
printf '| bare INCR | | %s | 1.00× | | |\n' "$incr"
for row in $rows; do
    x=$(awk -v a="${best[$row]}" -v b="$incr" 'BEGIN { printf "%.2f", a / b }')
    target=shown
    [ "${row%%:*}" = fixed_window ] && target="≤ 2×"
    printf '| %s | %s | %s | %s× | %s | %s |\n' "${row%%:*}" "${row#*:}" "${best[$row]}" "$x" \
        "$target" "$(echo "${bestd[$row]}" | sed 's/^(//; s/)$//')"
done
