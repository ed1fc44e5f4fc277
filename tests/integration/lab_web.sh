#!/usr/bin/env bash
# The lab's web page in headless Chromium (tests/browser/lab_web.js drives
# it like a person), against a real `floodgate lab --web` on a free port.
# Then: the lab stops on SIGTERM and leaves no process and no folder.
set -u
cd "$(dirname "$0")/../.."
FLOODGATE=${FLOODGATE:-build/floodgate}
BUILD=${BUILD:-build}
pass=0 fail=0
ok() { pass=$((pass+1)); echo "ok   $*"; }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

work=$(mktemp -d)
lab_pid=""
# Processes of this test: a command line naming its folder, or a working
# directory inside it (redis-server rewrites its command line).
ours() {
    local pid
    for pid in $(pgrep -x 'redis-server|haproxy|floodgate' 2>/dev/null); do
        if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$work" ||
           readlink "/proc/$pid/cwd" 2>/dev/null | grep -qF "$work"; then
            echo "$pid"
        fi
    done
}
cleanup() {
    [ -n "$lab_pid" ] && kill "$lab_pid" 2>/dev/null && wait "$lab_pid" 2>/dev/null
    local left; if grep -qE 'Sanitizer|runtime error' "$work/lab.err"; then
    bad "sanitizer report from the lab:"; grep -E -A5 'Sanitizer|runtime error' "$work/lab.err" | head -20
else
    ok "no sanitizer report from the lab"
fi
left=$(ours)
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

if [ ! -d tests/browser/node_modules/playwright-core ]; then
    (cd tests/browser && npm install --no-audit --no-fund --silent) >/dev/null 2>&1
fi
if [ ! -x /usr/bin/chromium ] || [ ! -d tests/browser/node_modules/playwright-core ]; then
    echo "needs /usr/bin/chromium and playwright-core (run scripts/bootstrap)"
    echo "0 passed, 1 failed"; exit 1
fi

mkdir -p "$work/tmp" "$BUILD"
TMPDIR="$work/tmp" "$FLOODGATE" lab --web --listen 127.0.0.1:0 \
    >"$work/lab.out" 2>"$work/lab.err" &
lab_pid=$!
url=""
for _ in $(seq 1 100); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$work/lab.out" 2>/dev/null | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$lab_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$url" ]; then
    bad "lab --web did not start: $(tail -n 3 "$work/lab.err")"
    echo "$pass passed, $fail failed"; exit 1
fi
ok "lab --web listens at $url"

timeout 55 node tests/browser/lab_web.js "$url" "$BUILD" >"$work/node.out" 2>&1
node_rc=$?
cat "$work/node.out"
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/node.out" | tail -n 1)
if [ -n "$last" ]; then
    p=${last%% passed*}; f=${last#*, }; f=${f%% failed}
    pass=$((pass+p)); fail=$((fail+f))
    [ "$node_rc" -ne 0 ] && [ "$f" -eq 0 ] && bad "node exited $node_rc"
else
    bad "browser script gave no summary (exit $node_rc)"
fi
[ -f "$BUILD/lab-web.png" ] && ok "screenshot $BUILD/lab-web.png" || bad "no screenshot"

# Stop the lab as Ctrl-C would; everything it started must go with it.
kill -INT "$lab_pid"
stopped=no
for _ in $(seq 1 50); do
    kill -0 "$lab_pid" 2>/dev/null || { stopped=yes; break; }
    sleep 0.1
done
wait "$lab_pid" 2>/dev/null
lab_pid=""
[ "$stopped" = yes ] && ok "lab stops on Ctrl-C" || bad "lab still running 5 s after Ctrl-C"
if grep -qE 'Sanitizer|runtime error' "$work/lab.err"; then
    bad "sanitizer report from the lab:"; grep -E -A5 'Sanitizer|runtime error' "$work/lab.err" | head -20
else
    ok "no sanitizer report from the lab"
fi
left=$(ours)
[ -z "$left" ] && ok "no process left behind" || bad "processes left: $left"
[ -z "$(ls -A "$work/tmp")" ] && ok "temporary folder removed" || bad "left in TMPDIR: $(ls "$work/tmp")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
