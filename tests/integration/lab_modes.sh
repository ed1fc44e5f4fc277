#!/usr/bin/env bash
# floodgate lab's approximate modes against real processes: 8 `floodgate
# serve` behind HAProxy per strategy, Redis behind the delay proxy, the
# scalper at 2x, 4x and 10x the limit, each at round trips of 1, 5 and 20
# ms (the lab's own setup, `floodgate lab --json`). For each case: atomic
# (exact) is exact, lease is never over the limit and refuses under it no
# more than its bound, sync's overshoot is within its stated bound, and the
# bound the lab states is the one this script works out by itself from the
# parameters. The Redis commands per request are printed for each case
# beside atomic's.
set -u
cd "$(dirname "$0")/../.."
FLOODGATE=$(realpath "${FLOODGATE:-build/floodgate}")
BUILD=${BUILD:-build}
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
lab_record_ports

# The limit's period is long (10 s) so that a token bucket refills less
# than one request during a burst, even a slow one: allowed is then
# comparable with the limit itself. A chunk of 2 makes lease's bound
# (8 x 2 + 2 - 1 = 17, the token bucket's chunk less one included)
# smaller than the limit, so that it can fail.
servers=8 limit=20 period=10s chunk=2 spread_ms=40 sync_ms=200
start=$(date +%s)
for mult in 2 4 10; do
    burst=$((mult * limit))
    timeout 80 "$FLOODGATE" lab --strategy atomic,sync,lease --servers $servers \
        --limit $limit/$period --chunk $chunk --sync ${sync_ms}ms \
        --burst $burst --spread ${spread_ms}ms --sweep rtt=1,5,20 \
        --svg "$work/sweep-$mult.svg" --json >"$work/x$mult.json" 2>"$work/x$mult.err"
    rc=$?
    check "lab at ${mult}x the limit (burst $burst) exits 0 ($rc)" [ "$rc" -eq 0 ]
    [ "$rc" -ne 0 ] && tail -n 5 "$work/x$mult.err"
    if grep -qE 'Sanitizer|runtime error' "$work/x$mult.err"; then
        bad "sanitizer report at ${mult}x"; head -20 "$work/x$mult.err"
    fi
    check "9 results at ${mult}x (3 strategies x 3 round trips)" \
        [ "$(grep -c '^{' "$work/x$mult.json")" -eq 9 ]
done
secs=$(( $(date +%s) - start ))
echo "     27 cases measured in ${secs} s"

# The configs the lab gave its servers (copied by the wrappers).
check "sync servers run mode = sync:${sync_ms}ms with fallback_servers = $servers" \
    sh -c "grep -l 'mode = sync:${sync_ms}ms' '$work'/ports/serve.*.ini | xargs grep -l 'fallback_servers = $servers' | grep -q ."
check "lease servers run mode = lease:$chunk with on_failure = local" \
    sh -c "grep -l 'mode = lease:$chunk' '$work'/ports/serve.*.ini | xargs grep -l 'on_failure = local' | grep -q ."

# Every case judged by node, which works the bound out again from the
# parameters: sync's from fg_limit_bound's statement (window 2 x (interval +
# round trip); the burst's rate averaged over the window, burst /
# max(spread, window); (servers - 1) / servers of it at the other servers;
# at most (servers - 1) x (limit + what the bucket refills in the window)),
# lease's (servers - 1) x chunk, at most the limit. One line per check,
# then the table.
cat "$work"/x*.json >"$work/all.json"
node - "$work/all.json" "$servers" "$limit" "$chunk" "$sync_ms" "$spread_ms" "${period%s}000" >"$work/judged.txt" <<'JS'
const [file, N, limit, chunk, syncMs, spreadMs, periodMs] = process.argv.slice(2).map((v, i) => i ? Number(v) : v);
const rs = require('fs').readFileSync(file, 'utf8').trim().split('\n').map(JSON.parse);
const out = (ok, what) => console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
const key = (r) => `${r.params.burst}/${r.params.rtt_ms}`;
const atomic = {};
rs.filter((r) => r.strategy === 'atomic').forEach((r) => { atomic[key(r)] = r; });
const rows = [];
for (const r of rs) {
  const c = `burst ${r.params.burst} (${r.params.burst / limit}x), rtt ${r.params.rtt_ms} ms`;
  const sum = r.servers.reduce((n, s) => n + s.ok, 0);
  out(r.servers.length === N && sum === r.allowed && r.failed === 0,
      `${r.strategy} ${c}: ${N} servers answered every request, cards add up (${sum} = ${r.allowed})`);
  let bound = '-';
  if (r.strategy === 'atomic') {
    // Exact: the limit, and what it refilled while the burst was decided.
    // (Over it only by what on_failure allowed, short of it only where
    // Redis was late: a timed-out check may still be counted there.)
    out((r.allowed >= limit || r.by_on_failure > 0) &&
        r.allowed <= limit + r.refilled + r.allowed_by_on_failure,
        `atomic ${c}: exact (${r.allowed} allowed, limit ${limit}, +${r.refilled} refilled, ` +
        `${r.allowed_by_on_failure} allowed by on_failure)`);
  } else if (r.strategy === 'lease') {
    // The servers' chunks, and the chunk less one that a server waits to
    // take from the lab's token bucket.
    bound = Math.min(N * chunk + chunk - 1, limit);
    out(r.bound === bound && r.bound_of === 'under' && r.chunk === chunk,
        `lease ${c}: the stated bound is ${bound} (${r.bound} ${r.bound_of}, chunk ${r.chunk})`);
    out(r.allowed <= limit + r.refilled && r.over === 0,
        `lease ${c}: never over the limit (${r.allowed} allowed, +${r.refilled} refilled)`);
    out(r.refused_under_limit <= bound,
        `lease ${c}: under the limit by ${r.refused_under_limit}, within its bound ${bound}`);
    out(r.settle_ms >= 1000, `lease ${c}: counted Redis commands until its leases ended (${r.settle_ms} ms)`);
  } else {
    const w = 2 * (syncMs + r.params.rtt_ms);
    const arriving = Math.floor(r.params.burst * (N - 1) * w / (N * Math.max(spreadMs, w))) + (N - 1);
    bound = Math.min(arriving, (N - 1) * (limit + Math.ceil(limit * w / periodMs)));
    out(r.bound === bound && r.bound_of === 'over' && r.interval_ms === syncMs &&
        r.over_window_ms === w,
        `sync ${c}: the stated bound is ${bound} (${r.bound} ${r.bound_of}, window ${r.over_window_ms} ms)`);
    out(r.over === Math.max(0, r.allowed - limit - r.refilled) && r.over <= bound,
        `sync ${c}: over by ${r.over}, within its stated bound ${bound}`);
    // Each server used the key: its usage must reach Redis, at its next
    // tick, after the burst as a rule, and the figure must count it.
    const sent = (r.redis_commands.match(/\d+/g) || []).reduce((n, v) => n + Number(v), 0);
    out(sent >= N, `sync ${c}: the commands counted include every server's sync (${sent} >= ${N})`);
  }
  const a = atomic[key(r)];
  const ratio = a && a.redis_calls_per_request > 0
    ? (r.redis_calls_per_request / a.redis_calls_per_request).toFixed(2) : '-';
  const order = ['atomic', 'sync', 'lease'].indexOf(r.strategy);
  rows.push({by: [r.params.burst, r.params.rtt_ms, order],
             cells: [c, r.strategy, r.allowed, r.limit, r.over, r.refused_under_limit, bound,
                     r.redis_calls_per_request.toFixed(2), ratio]});
}
console.log('TABLE case | strategy | allowed | limit | over | under | stated bound | Redis cmds/request | vs atomic');
rows.sort((x, y) => x.by[0] - y.by[0] || x.by[1] - y.by[1] || x.by[2] - y.by[2]);
for (const r of rows) console.log('TABLE ' + r.cells.join(' | '));
JS
nrc=$?
check "node judged every case (exit $nrc)" [ "$nrc" -eq 0 ]
while IFS= read -r line; do
    case "$line" in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) bad "${line#FAIL }" ;;
    TABLE*) echo "     ${line#TABLE }" ;;
    esac
done <"$work/judged.txt"
nothing_left "after the runs"
summary
