#!/usr/bin/env bash
# The fault catalogue, network part: a real redis-server behind the fault
# proxy (tests/fault/faultproxy.c), and its faults one after the other:
# replies 20-30 ms late, a black hole, a reset in the middle of a reply,
# 200 bytes a second, refused connections. For each, tests/fault/
# faultcheck.c decides through the library (blocking and async) and
# through floodgate serve, for on_failure open, closed and local, and holds
# latency, policy, recovery, exactness and resources to their bounds (see
# docs/faults.md). About 8 s.
FG_TEST_BOUND=${FG_TEST_BOUND:-60}
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../fault/lib.sh"
[ -x "$FAULTCHECK" ] && [ -x "$FAULTPROXY" ] || { bad "fault tools missing"; finish; }
fault_setup || { bad "redis, the proxy and serve start"; finish; }
fault_plan latency 500 blackhole 500 reset 500 trickle 500 refuse 500 >"$T/plan"
fault_run "$T/plan"
finish
