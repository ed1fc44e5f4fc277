#!/usr/bin/env bash
# on_failure = local in floodgate serve, on a real Redis: at start and on
# each reload the log says, per such limit, what this process enforces
# while the store is unreachable (per worker x workers), warns when
# rounding the share down lost part of the rate, and loudly when nothing
# is left. A limit the library refuses as a worker would build it (its
# local share: a token bucket too deep to refill) is refused at its rate
# line, at start and on reload (where the running configuration stays).
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
cat >"$T/s.ini" <<INI
[server]
workers = 2
[store]
url = redis://127.0.0.1:$RPORT
prefix = ls$$:
[limit bookings]
key = header:X-User-Id
algorithm = fixed_window
rate = 24/s
on_failure = local
fallback_servers = 4
[limit otp]
key = header:X-User-Id
algorithm = fixed_window
rate = 7/15min
on_failure = local
fallback_servers = 4
[limit search]
key = header:X-User-Id
rate = 25/s
on_failure = local
fallback_servers = 4
[limit open]
key = header:X-User-Id
rate = 10/s
INI
start_fg s -c "$T/s.ini" --listen 127.0.0.1:0 || { bad "server starts"; finish; }
L="$T/s.log"
check "bookings: 3/s per worker x 2 workers (6/s in this process)" grep -q \
    'event=local_fallback limit=bookings per_worker=3/s .*msg="limit bookings: on_failure = local enforces 3/s per worker x 2 workers (6/s in this process) while the store is unreachable"' "$L"
check "bookings: no warning (3 x 2 x 4 = 24)" \
    bash -c "! grep -q 'event=local_fallback_[a-z]* .*limit=bookings' '$L'"
check "search: rounded down, warned (3 x 2 x 4 = 24 < 25)" grep -q \
    'event=local_fallback_rounded level=warning limit=search warning=".*3/s per worker x 2 workers x 4 servers is 24/s, less than the rate 25/s' "$L"
check "otp: a share of 0, warned loudly" grep -q \
    'event=local_fallback_zero level=error limit=otp warning=".*EVERY request is refused while the store is unreachable' "$L"
check "open: nothing said (on_failure = open)" \
    bash -c "! grep -q 'limit=open' '$L'"
check "the shares come before the listening line" \
    bash -c "grep -n 'event=local_fallback ' '$L' | head -1 | cut -d: -f1 | { read a; b=\$(grep -n event=listening '$L' | cut -d: -f1); [ \"\$a\" -lt \"\$b\" ]; }"

# A reload says it again, for the configuration now in force.
sed -i 's/^rate = 24\/s$/rate = 48\/s/' "$T/s.ini"
n0=$(grep -c 'event=reload' "$L")
kill -HUP "$FGPID_s"
for _ in $(seq 1 300); do
    [ "$(grep -c 'event=reload' "$L")" -gt "$n0" ] && break
    sleep 0.01
done
check "reload ok" grep -q 'event=reload result=ok' "$L"
check "reload: bookings now 6/s per worker (12/s in this process)" grep -q \
    'msg="limit bookings: on_failure = local enforces 6/s per worker x 2 workers (12/s in this process)' "$L"

# A bucket the local share cannot hold: 100/day with a burst of 1300000
# refills in 13000 days, within the library's 2^50 us; a worker's share,
# 100 / (1 x 3 workers) = 33/day with a burst of 433333, needs 13131 days,
# beyond it. Refused at the rate's line (7), with the library's reason.
cat >"$T/deep.ini" <<INI
[server]
workers = 3
[store]
url = redis://127.0.0.1:$RPORT
[limit deep]
key = ip
rate = 100/day
algorithm = token_bucket
burst = 1300000
on_failure = local
INI
timeout 5 "$FLOODGATE" serve -c "$T/deep.ini" --listen 127.0.0.1:0 2>"$T/deep.err"
expect_eq "deep bucket: exit 2 at start" "$?" 2
check "deep bucket: refused at its rate line with the library's reason" grep -q \
    "deep.ini:7: \[limit deep\]: rate: .*takes more than 35 years to refill" "$T/deep.err"

# A reload that adds such a limit to the running server (2 workers:
# 101/day with a burst of 1316000 refills in 13030 days, a worker's 50/day
# with 658000 in 13160): refused at its rate line, the running
# configuration kept (bookings still answers).
cat >>"$T/s.ini" <<INI
[limit deep]
key = ip
algorithm = token_bucket
burst = 1316000
on_failure = local
rate = 101/day
INI
line=$(grep -n '^rate = 101/day' "$T/s.ini" | cut -d: -f1)
n0=$(grep -c 'event=reload' "$L")
kill -HUP "$FGPID_s"
for _ in $(seq 1 300); do
    [ "$(grep -c 'event=reload' "$L")" -gt "$n0" ] && break
    sleep 0.01
done
check "reload with the deep bucket refused at its rate line, kept running" grep -q \
    "event=reload result=error reason=\"$T/s.ini:$line: \[limit deep\]: rate: .*35 years.*kept=running" "$L"
expect_eq "the running configuration answers" \
    "$(http POST "http://127.0.0.1:$FGPORT_s/v1/check?limit=bookings&key=u")" 200
check "server alive" kill -0 "$FGPID_s"
finish
