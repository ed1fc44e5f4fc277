#!/usr/bin/env bash
# The lab's web page in headless Chromium (tests/browser/lab_web.js drives
# it like a person), against a real `floodgate lab --web` on a free port.
# Then: the lab stops on Ctrl-C and leaves no process, no listening port and
# no folder.
set -u
cd "$(dirname "$0")/../.."
FLOODGATE=$(realpath "${FLOODGATE:-build/floodgate}")
BUILD=${BUILD:-build}
. tests/lib/lab.sh

work=$(mktemp -d)
lab_pid=""
# Whatever happens: stop what is left and remove the folder. No checks
# here: they belong before the summary line, which is printed last.
cleanup() {
    [ -n "$lab_pid" ] && kill -9 "$lab_pid" 2>/dev/null
    local left; left=$(ours)
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
# Sanitizer reports of the lab (and of the servers, whose logs are gone
# with its folder, but which it reports when they die).
sanitizer_check() {
    if grep -qE 'Sanitizer|runtime error' "$work/lab.err"; then
        bad "sanitizer report from the lab:"
        grep -E -A5 'Sanitizer|runtime error' "$work/lab.err" | head -20
    else
        ok "no sanitizer report from the lab"
    fi
}

if [ ! -d tests/browser/node_modules/playwright-core ]; then
    (cd tests/browser && npm install --no-audit --no-fund --silent) >/dev/null 2>&1
fi
if [ ! -x /usr/bin/chromium ] || [ ! -d tests/browser/node_modules/playwright-core ]; then
    echo "needs /usr/bin/chromium and playwright-core (run scripts/bootstrap)"
    echo "0 passed, 1 failed"; exit 1
fi

mkdir -p "$work/tmp" "$BUILD"
# Screenshots of an earlier run must not pass for this one's.
rm -f "$BUILD/lab-web.png" "$BUILD/lab-web-local.png" "$BUILD/lab-web-naive.png" \
    "$BUILD/lab-web-sync.png"
lab_record_ports
TMPDIR="$work/tmp" "$FLOODGATE" lab --web --listen 127.0.0.1:0 \
    >"$work/lab.out" 2>"$work/lab.err" &
lab_pid=$!
url=$(lab_web_url "$work/lab.out" "$lab_pid")
if [ -z "$url" ]; then
    bad "lab --web did not start: $(tail -n 3 "$work/lab.err")"
    summary; exit 1
fi
ok "lab --web listens at $url"
port=${url##*:}; port=${port%/}
lab_add_port "$port"

timeout 100 node tests/browser/lab_web.js "$url" "$BUILD" >"$work/node.out" 2>&1
node_rc=$?
grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$work/node.out"
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$work/node.out" | tail -n 1)
if [ -n "$last" ]; then
    p=${last%% passed*}; f=${last#*, }; f=${f%% failed}
    pass=$((pass+p)); fail=$((fail+f))
    [ "$node_rc" -ne 0 ] && [ "$f" -eq 0 ] && bad "node exited $node_rc"
else
    bad "browser script gave no summary (exit $node_rc)"
fi
check "screenshot $BUILD/lab-web.png written by this run" test -s "$BUILD/lab-web.png"

# Stop the lab as Ctrl-C would; everything it started must go with it.
kill -INT "$lab_pid"
stopped=no
for _ in $(seq 1 50); do
    kill -0 "$lab_pid" 2>/dev/null || { stopped=yes; break; }
    sleep 0.1
done
wait "$lab_pid" 2>/dev/null
lab_pid=""
check "lab stops on Ctrl-C within 5 s" [ "$stopped" = yes ]
sanitizer_check
nothing_left "after Ctrl-C"

# A second lab, on IPv6 loopback, started with values off the page's
# sliders: its API without a browser. curl -g: brackets in the URL are
# the host's, not a glob.
TMPDIR="$work/tmp" "$FLOODGATE" lab --web --listen '[::1]:0' --servers 1 \
    --burst 5 --rtt 40ms --sync 3s >"$work/lab.out" 2>"$work/lab.err" &
lab_pid=$!
url=""
for _ in $(seq 1 100); do
    url=$(grep -o 'http://[^ ]*/' "$work/lab.out" 2>/dev/null | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$lab_pid" 2>/dev/null || break
    sleep 0.1
done
check "--listen [::1]:0 prints a bracketed URL with the port bound ($url)" \
    grep -qE '^http://\[::1\]:[1-9][0-9]*/$' <<<"$url"
port=${url##*:}; port=${port%/}
lab_add_port "$port"
api() { # api PATH [CURL ARGS...]: prints the body on one line, then the status
    local p=$1; shift
    curl -sg -m 30 "$@" -w ' %{http_code}' "${url}${p#/}" | tr -d '\n'
}
defaults=$(api /api/defaults)
check_all "off-slider values are moved onto the sliders (burst 10, rtt 20, sync 1000)" \
    'grep -q "\"burst\":10,\"rtt_ms\":20," <<<"$defaults" && grep -q "\"sync_ms\":1000," <<<"$defaults"'
check "the lab says which values it moved" grep -q "burst slider .* starts at 10, not 5" "$work/lab.err"
run=/api/run?strategy=local\&servers=1\&burst=10\&rtt=0
first=$(api "$run")
check "a run answers 200 ($first)" grep -q ' 200$' <<<"$first"
for q in servers=nan burst=1e1 burst=2.5 rtt=-0 sync=inf servers= 'burst=%2010'; do
    got=$(api "/api/run?strategy=local&$q")
    check "run?$q: 400 with the reason ($got)" \
        grep -qE '^\{"error":"[a-z]+ must be a whole number.*"\} 400$' <<<"$got"
    # servers=nan once stopped the running servers before failing.
    if [ "$q" = servers=nan ]; then
        again=$(api "$run")
        check "a refused run stopped nothing: the next run is warm" \
            grep -q '"warm":true.* 200$' <<<"$again"
    fi
done
got=$(api "/api/run?strategy=local&burst=5%009")
check "run?burst=5%009: 400, a NUL byte is not the end of a value ($got)" \
    grep -qE '^\{"error":"a parameter holds a NUL byte.*"\} 400$' <<<"$got"
# A server or Redis that died between runs is noticed: the servers are
# started again, Redis too, rather than the run measure one server short
# (HAProxy's own 503s counted as refusals) or the failure policy.
for pid in $(pgrep -f "$work/.*local-api-1.ini"); do kill -9 "$pid"; done
got=$(api "$run")
check "a server killed between runs: the next starts them again ($got)" \
    grep -q '"warm":false.*"failed":0.* 200$' <<<"$got"
for pid in $(pgrep -x redis-server); do
    readlink "/proc/$pid/cwd" 2>/dev/null | grep -qF "$work" && kill -9 "$pid"
done
got=$(api "/api/run?strategy=atomic&servers=1&burst=10&rtt=0")
check "Redis killed between runs: started again, it runs the checks ($got)" \
    grep -qE '"executed":[1-9][0-9]*.* 200$' <<<"$got"
# A sync re-run heals its servers after the last Redis-down test at once,
# not one after another (16 x 2 intervals): 1.7 s here at 16 servers, and
# 9.5 s when they healed in turn.
sync_run=/api/run?strategy=sync\&servers=16\&burst=40\&rtt=0\&sync=200
api "$sync_run" >/dev/null
got=$(api "$sync_run")
ms=$(grep -o '"took_ms":[0-9]*' <<<"$got" | cut -d: -f2)
check "a warm sync re-run on 16 servers within 5 s (${ms:-none} ms)" \
    bash -c "grep -q '\"warm\":true.* 200\$' <<<'$got' && [ '${ms:-99999}' -lt 5000 ]"
got=$(api "/api/run?strategy=local&servers=2&servers=3")
check "run with servers twice: 400, not first-wins ($got)" \
    grep -qE '^\{"error":"servers given twice"\} 400$' <<<"$got"
got=$(api /api/defaults -H "Host: attacker.example:$port")
check "a foreign Host header is refused 403 (DNS rebinding): $got" grep -q ' 403$' <<<"$got"
got=$(api /api/defaults -H "Host: 127.0.0.1:$((port == 65535 ? 1 : port + 1))")
check "a Host header naming another port is refused 403" grep -q ' 403$' <<<"$got"
got=$(api /api/defaults -H "Host: localhost:$port")
check "Host localhost:PORT is served" grep -q ' 200$' <<<"$got"
got=$(head -c 2000000 /dev/zero | api /api/defaults -X GET --data-binary @- -o /dev/null)
check "a 2 MB body is refused 413, not read ($got)" [ "$got" = " 413" ]
# Another page (even one on loopback, another port) cannot start runs in
# the user's browser: an <img> sends Sec-Fetch-Site, a script Origin too.
got=$(api "$run" -H "Sec-Fetch-Site: same-site" -o /dev/null)
check "a run asked by another page (Sec-Fetch-Site: same-site) is refused 403 ($got)" [ "$got" = " 403" ]
got=$(api "$run" -H "Origin: http://127.0.0.1:$((port == 65535 ? 1 : port + 1))" -o /dev/null)
check "a run asked with another Origin is refused 403 ($got)" [ "$got" = " 403" ]
got=$(api / -H "Sec-Fetch-Site: same-site" -o /dev/null)
check "the page itself, opened from a link on another page, is served ($got)" [ "$got" = " 200" ]
got=$(api /api/defaults -H "Sec-Fetch-Site: same-origin" -H "Origin: ${url%/}" -o /dev/null)
check "the page's own request (same-origin, its Origin) is served ($got)" [ "$got" = " 200" ]
got=$(api "$run" -X POST -o /dev/null)
check "POST is not a way to start a run ($got)" [ "$got" = " 501" ]
got=$(api / -I -o /dev/null)
check "HEAD / is answered 200 ($got)" [ "$got" = " 200" ]

# SIGTERM: the same clean-up, and 128 + 15.
kill -TERM "$lab_pid"
stopped=no
for _ in $(seq 1 50); do
    kill -0 "$lab_pid" 2>/dev/null || { stopped=yes; break; }
    sleep 0.1
done
wait "$lab_pid" 2>/dev/null
trc=$?
lab_pid=""
check_all "lab stops on SIGTERM within 5 s, exit 143 ($trc)" \
    '[ "$stopped" = yes ] && [ "$trc" -eq 143 ]'
sanitizer_check
nothing_left "after SIGTERM"
summary
