#!/usr/bin/env bash
# The fault catalogue, Redis part: a real redis-server (behind the fault
# proxy, which only forwards here) hung by SIGSTOP, killed and restarted
# on its port (an empty script cache), in DEBUG SLEEP, out of memory
# (maxmemory, noeviction), BUSY in a long script, LOADING a large RDB,
# READONLY (made a replica), MISCONF (a failed background save), with
# maxclients reached, and with its ACL user's password changed. For each,
# tests/fault/faultcheck.c decides through the library (blocking and
# async) and through floodgate serve, for on_failure open, closed and
# local, and holds latency, policy, recovery, exactness and resources to
# their bounds (see docs/faults.md). About 40 s.
FG_TEST_BOUND=${FG_TEST_BOUND:-90}
. "$(dirname "$0")/../serve/lib.sh"
. "$(dirname "$0")/../fault/lib.sh"
[ -x "$FAULTCHECK" ] && [ -x "$FAULTPROXY" ] || { bad "fault tools missing"; finish; }
fault_setup || { bad "redis, the proxy and serve start"; finish; }
fault_plan sigstop 500 restart 500 debug_sleep 500 oom 500 busy 500 \
    loading 500 readonly 500 misconf 500 maxclients 500 acl 500 >"$T/plan"
fault_run "$T/plan"
finish
