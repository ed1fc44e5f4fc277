#!/usr/bin/env bash
# redis_rates.sh -- every rate on Redis, against a real redis-server started
# here on a free loopback port in a temp folder, stopped by a trap: a grid
# of rates (primes, large counts, periods up to a year, a clock near today
# and in 2100) through the C algorithm and the Lua twins; a token bucket
# under a rate that changes; the stored state's format; 13/h over 1,000
# simulated hours; and `floodgate check` with the rates that were refused
# and a rate raised after a bucket was used up. About 15 s.
FG_TEST_BOUND=${FG_TEST_BOUND:-90}
. "$(dirname "$0")/../serve/lib.sh"
TOOL=$BUILD/redis/redis_rates
[ -x "$TOOL" ] || { bad "$TOOL missing"; finish; }
start_redis || { bad "redis starts"; finish; }
PORT=$RPORT
URL="redis://127.0.0.1:$PORT?prefix=rt:"

# run MODE ARGS...: a redis_rates mode; its "N passed, N failed" added.
run() {
    local out last p f rc
    out=$(timeout 60 "$TOOL" "$@" 2>&1)
    rc=$?
    echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$' | head -40
    last=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$last" ]; then
        bad "redis_rates $1 (exit $rc, no summary)"
        return
    fi
    p=${last%% passed*}
    f=${last#*, }
    f=${f%% failed}
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    [ "$rc" -eq 0 ] || [ "$f" -ne 0 ] || bad "redis_rates $1 exit $rc"
}

run grid "$URL"
run change "$URL"
run state "$URL" 127.0.0.1 "$PORT"
run hours "$URL"
run adds "$URL"

# floodgate check: the rates Redis refused, with every algorithm, allowed
# at once (a fresh key) as on the memory store.
R="redis://127.0.0.1:$PORT"
n=0
for rate in 13/h 17/min 999/min 123/s 9007199254740991/365day; do
    for algo in token_bucket sliding_window fixed_window; do
        n=$((n + 1)) # a name of its own: keys of one name and period meet
        out=$("$FLOODGATE" check --timeout 2000 --store "$R" --name "r$n" --limit "$rate" \
            --algorithm "$algo" --key k 2>&1)
        rc=$?
        mem=$("$FLOODGATE" check --store memory --limit "$rate" \
            --algorithm "$algo" --key k 2>&1)
        if [ "$rc" -eq 0 ] && [ "${out%% *}" = allowed ] &&
            [ "${out%% reset*}" = "${mem%% reset*}" ]; then
            ok "check $rate $algo on redis as on memory: $out"
        else
            bad "check $rate $algo on redis: '$out' (exit $rc); memory: '$mem'"
        fi
    done
done

# A rate raised after the bucket was used up: 2/h, three checks (the
# third refused), then 1000/s. The old TAT, an hour ahead, is a full
# bucket's debt at 1000/s: refused for 1 ms at most, then allowed, and the
# whole burst back within a second.
N="chg"
"$FLOODGATE" check --timeout 2000 --store "$R" --name "$N" --limit 2/h --key u1 --count 3 \
    >"$T/c1" 2>&1
if grep -q 'allowed=2 limited=1' "$T/c1"; then ok "2/h: 2 of 3"; else
    bad "2/h x3: $(tr '\n' ' ' <"$T/c1")"
fi
out=$("$FLOODGATE" check --timeout 2000 --store "$R" --name "$N" --limit 1000/s --key u1 2>&1)
case $out in
allowed* | "limited retry_after_ms=1"*) ok "1000/s after 2/h: $out" ;;
*) bad "1000/s after 2/h: '$out' (the old period's wait)" ;;
esac
sleep 0.01
out=$("$FLOODGATE" check --timeout 2000 --store "$R" --name "$N" --limit 1000/s --key u1 2>&1)
case $out in allowed*) ok "1000/s 10 ms later: allowed" ;; *) bad "1000/s 10 ms later: '$out'" ;; esac
sleep 1.05
out=$("$FLOODGATE" check --timeout 2000 --store "$R" --name "$N" --limit 1000/s --key u1 \
    --count 1000 2>&1 | tail -n 1)
if [ "$out" = "allowed=1000 limited=0" ]; then ok "1000/s a second later: the whole burst"; else
    bad "1000/s a second later: '$out'"
fi

finish
