#!/usr/bin/env bash
# A request's set of limits and the blocked-key cache in the library,
# against a real redis-server started here (tests/redis/redis_sets.c):
# refunds in Redis on a refusal or bad input, blocking and async; a
# blocked key answered from the cache with no Redis command; when the
# block ends, one probe instead of a stampede; a probe that failed, with
# a second Redis answering slowly. About 4 s.
FG_TEST_BOUND=${FG_TEST_BOUND:-30}
. "$(dirname "$0")/../serve/lib.sh"

TOOL="$BUILD/redis/redis_sets"
[ -x "$TOOL" ] || { bad "$TOOL missing"; finish; }
start_redis || { bad "redis starts"; finish; }
P1=$RPORT
start_redis || { bad "a second redis starts"; finish; }
P2=$RPORT
out=$("$TOOL" "redis://127.0.0.1:$P1" 127.0.0.1 "$P1" "redis://127.0.0.1:$P2" "$P2" 2>&1)
echo "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
last=$(echo "$out" | tail -n 1)
case $last in
*" passed, 0 failed") ok "redis_sets: $last" ;;
*) bad "redis_sets: $last" ;;
esac
finish
