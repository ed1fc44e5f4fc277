#!/usr/bin/env bash
# floodgate lab when its own processes misbehave, through FLOODGATE_BIN
# wrappers (docs/lab.md):
#   - servers that die during the run: the requests no server answered
#     are failed, not refused (the cards say so), and the lab exits 1
#     saying why (it printed them as refusals and exited 0);
#   - a wrapper that starts the server without exec: stopping the lab
#     stops the server too (each child's process group is signalled; the
#     server outlived the lab and its folder).
set -u
cd "$(dirname "$0")/../.."
FLOODGATE=$(realpath "${FLOODGATE:-build/floodgate}")
. tests/lib/lab.sh

work=$(mktemp -d)
cleanup() {
    local left; left=$(ours)
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"

# ---- Servers killed during the run -------------------------------------
cat >"$work/dies.sh" <<SH
#!/bin/sh
# floodgate, killed 0.45 s after it starts ($work)
"$FLOODGATE" "\$@" & c=\$!
sleep 0.45
kill -9 \$c
wait
SH
chmod +x "$work/dies.sh"
FLOODGATE_BIN="$work/dies.sh" timeout 120 "$FLOODGATE" lab --strategy atomic,sync,lease \
    --servers 2 --burst 20 >"$work/dies.out" 2>"$work/dies.err"
rc=$?
check "servers killed mid-run: exit 1 ($rc)" test "$rc" = 1
check "the reason: requests no server answered ($(tail -1 "$work/dies.err"))" \
    grep -q 'requests got no answer from a server' "$work/dies.err"
check "the card says failed, not refused ($(grep 'if Redis is down' "$work/dies.out" | tr -s ' '))" \
    grep -q 'if Redis is down.* of [0-9]* failed' "$work/dies.out"

# ---- A wrapper that does not exec --------------------------------------
cat >"$work/forks.sh" <<SH
#!/bin/sh
# floodgate, started without exec ($work)
"$FLOODGATE" "\$@" &
wait
SH
chmod +x "$work/forks.sh"
FLOODGATE_BIN="$work/forks.sh" timeout 120 "$FLOODGATE" lab --strategy atomic --servers 2 \
    --burst 20 >"$work/forks.out" 2>"$work/forks.err"
rc=$?
check "a wrapper that forks: the run completes ($rc: $(tail -1 "$work/forks.err"))" test "$rc" = 0
# (The server drains on SIGTERM: a second or so.)
for _ in $(seq 1 50); do [ -z "$(ours)" ] && break; sleep 0.1; done
left=$(ours | tr '\n' ' ')
check "no server outlives the lab (left: ${left:-none})" test -z "$left"
summary
