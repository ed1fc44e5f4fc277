#!/usr/bin/env bash
# A Redis that refuses the database or the user that the store URL names
# (SELECT out of range, an ACL user without SELECT, a wrong password):
# serve starts, each limit follows its on_failure, the log says why, and
# no check runs anyway in database 0 (the checks of a new connection wait
# for its AUTH and SELECT to be answered). Then a database that exists:
# its first checks run there. Last, a user whose ACL leaves out the
# prefix's keys is warned of at open.
. "$(dirname "$0")/../serve/lib.sh"

start_redis || { bad "redis starts"; finish; }
redis-cli -p "$RPORT" acl setuser nosel on '>pw-nosel' '~*' '+@all' '-select' >/dev/null
redis-cli -p "$RPORT" acl setuser full on '>pw-full' '~*' '+@all' >/dev/null

# run NAME URL: serve on URL with a token bucket and a fixed window that
# fail open and a limit that fails closed; prints the answers' codes and
# sources, e.g. "200:fail_open".
run() {
    local name=$1 url=$2 l out=""
    cat >"$T/$name.ini" <<INI
[server]
workers = 1
[store]
url = $url
timeout = 200ms
[limit tb]
key = query:k
rate = 10/h
[limit fw]
key = query:k
rate = 10/h
algorithm = fixed_window
[limit cl]
key = query:k
rate = 10/h
on_failure = closed
INI
    start_fg "$name" -c "$T/$name.ini" --listen 127.0.0.1:0 || { bad "serve $name starts"; return; }
    for l in tb fw cl tb fw; do
        local c
        c=$(http POST "http://127.0.0.1:$(eval echo "\$FGPORT_$name")/v1/check?limit=$l&key=a$name")
        out="$out $c:$(sed -n 's/.*"source":"\([a-z_]*\)".*/\1/p' "$T/b")"
    done
    eval "kill -TERM \$FGPID_$name; wait \$FGPID_$name 2>/dev/null"
    echo "$out"
}
keys0() { redis-cli -p "$RPORT" -n 0 dbsize; }

got=$(run db99 "redis://127.0.0.1:$RPORT/99")
expect_eq "database 99 of 16: the limits follow on_failure" "$got" \
    " 200:fail_open 200:fail_open 503:fail_closed 200:fail_open 200:fail_open"
check "database 99: the log says why" \
    grep -q 'event=store_error .*detail="redis .*cannot select database 99 (ERR DB index is out of range)"' "$T/db99.log"
expect_eq "database 99: nothing written in database 0" "$(keys0)" 0

got=$(run nosel "redis://nosel:pw-nosel@127.0.0.1:$RPORT/2")
expect_eq "a user without SELECT: the limits follow on_failure" "$got" \
    " 200:fail_open 200:fail_open 503:fail_closed 200:fail_open 200:fail_open"
check "a user without SELECT: the log says why" \
    grep -q 'detail="redis .*cannot select database 2 (NOPERM' "$T/nosel.log"
expect_eq "a user without SELECT: nothing written in database 0" "$(keys0)" 0

got=$(run wrong "redis://full:wrong@127.0.0.1:$RPORT/3")
expect_eq "a wrong password: the limits follow on_failure" "$got" \
    " 200:fail_open 200:fail_open 503:fail_closed 200:fail_open 200:fail_open"
expect_eq "a wrong password: nothing written in database 0" "$(keys0)" 0

# The same user and database that work: the first checks of each new
# connection, held for the handshake, are decided in database 3.
got=$(run good "redis://full:pw-full@127.0.0.1:$RPORT/3")
expect_eq "database 3: decided by the store" "$got" \
    " 200:store 200:store 200:store 200:store 200:store"
expect_eq "database 3: its keys there" "$(redis-cli -p "$RPORT" -n 3 dbsize)" 3
expect_eq "database 3: none in database 0" "$(keys0)" 0

# floodgate check with lazy=1: the decision follows --on-failure and says
# the reason, not the input.
out=$("$FLOODGATE" check --store "redis://127.0.0.1:$RPORT/99?lazy=1" --limit 10/h \
    --key x --count 2 2>&1)
rc=$?
expect_eq "check, database 99, lazy=1: exit 2" "$rc" 2
check "check, database 99, lazy=1: decided by on_failure ($out)" \
    grep -q 'allowed source=fail_open' <<<"$out"
check "check, database 99, lazy=1: the reason is the database" \
    grep -q 'cannot select database 99' <<<"$out"
expect_eq "check: nothing written in database 0" "$(keys0)" 0

# A shard whose database Redis refuses: the open fails (a configuration
# error, as a wrong password is), not a node kept as unreachable.
out=$("$FLOODGATE" check --store "shards=redis://127.0.0.1:$RPORT/99,redis://127.0.0.1:$RPORT/0" \
    --limit 10/h --key x 2>&1)
rc=$?
expect_eq "shards, one node's database refused: exit 2" "$rc" 2
check "shards, one node's database refused: said ($out)" \
    grep -q 'shards: node 1: .*cannot select database 99' <<<"$out"

# An ACL user whose key patterns leave out the prefix: warned of at open.
redis-cli -p "$RPORT" acl setuser nokeys on '>pw-nokeys' '~other:*' '+@all' >/dev/null
out=$("$FLOODGATE" check --store "redis://nokeys:pw-nokeys@127.0.0.1:$RPORT" --limit 10/h \
    --key x 2>&1)
check "a user without the prefix's keys: warned at open ($out)" \
    grep -q "warning: .*may not use the keys of prefix 'fg:' (NOPERM" <<<"$out"
out=$("$FLOODGATE" check --store "redis://nokeys:pw-nokeys@127.0.0.1:$RPORT?prefix=other:" \
    --limit 10/h --key x 2>&1)
check "the same user with a prefix it may use: no warning ($out)" \
    test "$out" = "allowed remaining=9 reset_ms=360000"
finish
