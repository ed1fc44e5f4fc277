#!/usr/bin/env bash
# The HTTP layer under mutated requests (tests/serve/fgfuzz.c): thousands
# of valid requests with bytes changed, CR/LF/NUL/0xff put in, pieces cut
# or doubled, lengths made huge, sent in one to three writes and then
# half-closed. The server must answer or close every connection at once,
# send nothing but HTTP answers, stay healthy throughout, keep exact counts
# for the well-formed requests that follow, and exit cleanly on SIGTERM.
. "$(dirname "$0")/../serve/lib.sh"
FGFUZZ="$BUILD/tests/serve/fgfuzz"
# Fewer iterations under the sanitizers (each request is slower there).
N=${FG_FUZZ_ITERATIONS:-10000}
case "$FLOODGATE" in *asan*) N=${FG_FUZZ_ITERATIONS:-3000} ;; esac

cat >"$T/fg.ini" <<INI
[server]
workers = 2
demo_api = on
demo_limits = u
request_timeout = 1s
[limit l]
key = query:key
algorithm = token_bucket
rate = 1000000/s
[limit f]
key = query:key
algorithm = fixed_window
rate = 1000000/h
[limit u]
key = header:X-User-Id
algorithm = fixed_window
rate = 1000000/s
INI
start_fg s -c "$T/fg.ini" --listen 127.0.0.1:0 || { bad "serve starts"; finish; }

for seed in 1 2; do
    out=$("$FGFUZZ" -n "$N" -s "$seed" 127.0.0.1 "$FGPORT_s" 2>"$T/fuzz$seed.err")
    rc=$?
    check "fuzz seed $seed: $N mutated requests, every connection answered or closed at once, only HTTP sent back ($out)" [ "$rc" = 0 ]
    [ "$rc" = 0 ] || cat "$T/fuzz$seed.err"
    answered=$(echo "$out" | sed -n 's/.*answered=\([0-9]*\).*/\1/p')
    four=$(echo "$out" | sed -n 's/.* 4xx=\([0-9]*\).*/\1/p')
    check "fuzz seed $seed: most requests answered (${answered:-0}), many refused as malformed (${four:-0})" \
        bash -c "[ ${answered:-0} -gt $((N / 2)) ] && [ ${four:-0} -gt $((N / 20)) ]"
done

# Well-formed requests after the storm: exact counts.
expect_eq "healthz after the fuzz" "$(http GET "http://127.0.0.1:$FGPORT_s/healthz")" 200
for i in 1 2 3; do http POST "http://127.0.0.1:$FGPORT_s/v1/check?limit=f&key=after-fuzz" >/dev/null; done
check "exact count after the fuzz (remaining 999997)" grep -q '"remaining":999997,' "$T/b"
check "no sanitizer report in the server log" bash -c "! grep -E 'ERROR: AddressSanitizer|runtime error|Assertion' '$T/s.log'"
kill -TERM "$FGPID_s"
wait "$FGPID_s"
rc=$?
check "exits 0 on SIGTERM after the fuzz (got $rc)" [ "$rc" = 0 ]
PIDS=""
check "no sanitizer report at exit" bash -c "! grep -E 'ERROR: AddressSanitizer|runtime error|Assertion' '$T/s.log'"
finish
