// floodgate lab page: every change is a real run on the server, debounced,
// one at a time. No framework: a little state and a render function.
'use strict';

const STRATEGIES = ['local', 'split', 'naive', 'atomic', 'sync', 'lease'];
const COLORS = {local: '#e07b39', split: '#8e6bbf', naive: '#d64545', atomic: '#2e9e5b',
                sync: '#2f7fc1', lease: '#b8860b'};
const NAMES = {local: 'Local counters', split: 'Local, limit ÷ N',
               naive: 'Redis GET then SET', atomic: 'Redis atomic',
               sync: 'Local + sync', lease: 'Redis leases'};
// What each strategy does while Redis is down, in the tile's words.
const DOWN = {naive: 'fails open: no protection',
              atomic: 'falls back to limit ÷ N per server',
              sync: 'keeps deciding locally on limit ÷ N per server',
              lease: 'spends the units it holds, then limit ÷ N per server'};
const EXPLAIN = {
  local: 'Each server counts only what it sees. With N servers, the user really gets N × the limit.',
  split: 'Each server gets limit ÷ N (at least 1, so with more servers than the limit the user gets one a server: over). The balancer does not spread one user evenly, so real requests are refused while the user is under the limit.',
  naive: 'One shared counter in Redis, but read, decide and write are separate round trips: requests that read the same value all pass. Drag the round trip up.',
  atomic: 'One shared counter, checked and updated in one atomic step inside Redis (a Lua token bucket): exactly the limit, one round trip.',
  sync: 'Each server decides on its own view of the shared counter and sends its usage to Redis once per interval: few Redis commands, and an overshoot bounded by what the other servers admit within two intervals and a round trip. Move the interval.',
  lease: 'Each server takes units from Redis in chunks (an atomic take) and spends them locally: never over the limit; what the servers hold and do not spend can be refused here.',
};
const $ = (id) => document.getElementById(id);

const state = {strategy: 'local', servers: 4, burst: 40, rtt: 2, sync: 200, limit: 10, periodMs: 1000};
let running = false;
let pending = false;
let pendingSweep = false; // "Measure all" clicked while a run was going
let timer = null;
let runs = 0;
// Chart points: strategy -> {rtt: allowed}, for the current servers and burst.
let points = {};
let pointsKey = '';

function setStatus(kind, text) {
  $('status').dataset.state = kind;
  $('status-text').textContent = text;
  document.body.classList.toggle('running', kind === 'running');
}

function query(extra) {
  const q = new URLSearchParams({servers: state.servers, burst: state.burst,
                                 rtt: state.rtt, sync: state.sync, ...extra});
  return q.toString();
}

// Busy: a run is going, queued, or waiting for the debounce. Tests (and
// people) can tell a settled page from one about to change.
function markBusy() {
  document.body.dataset.busy = (running || pending || pendingSweep || timer !== null) ? '1' : '0';
}

function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(() => { timer = null; run(); }, delay);
  markBusy();
  if (!running) setStatus('queued', 'waiting for the sliders to settle…');
}

async function run() {
  if (running) { pending = true; markBusy(); return; }
  running = true;
  pending = false;
  markBusy();
  const want = {...state};
  setStatus('running', `running ${NAMES[want.strategy]} on ${want.servers} servers…`);
  try {
    const res = await fetch('/api/run?' + query({strategy: want.strategy}));
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.statusText);
    runs++;
    document.body.dataset.runs = String(runs);
    render(body.result);
    addPoint(body.result);
    setStatus('done', `run ${runs}: ${(body.took_ms / 1000).toFixed(2)} s` +
              (body.warm ? ', processes reused' : ', processes started') +
              ` · burst answered in ${body.result.burst_ms.toFixed(0)} ms`);
  } catch (e) {
    setStatus('error', 'run failed: ' + e.message);
  } finally {
    running = false;
    if (pending) run();
    else if (pendingSweep) sweep();
    markBusy();
  }
}

function render(r) {
  document.body.dataset.strategy = r.strategy;
  document.body.dataset.shown = [r.strategy, r.params.servers, r.params.burst,
                                 Math.round(r.params.rtt_ms)]
    .concat(r.strategy === 'sync' ? [r.interval_ms] : []).join('/');
  const cards = $('cards');
  cards.textContent = '';
  r.servers.forEach((s, i) => {
    const card = document.createElement('div');
    card.className = 'card';
    card.innerHTML = `<div class="name">server ${i + 1}</div>` +
      `<div class="nums">${s.ok} ok · <span class="${s.limited ? 'r' : 'z'}">${s.limited} 429</span></div>` +
      '<div class="dots"></div>';
    const dots = card.querySelector('.dots');
    for (let k = 0; k < Math.min(s.ok + s.limited, 60); k++) {
      const d = document.createElement('i');
      if (k >= s.ok) d.className = 'no';
      dots.appendChild(d);
    }
    cards.appendChild(card);
  });
  $('allowed').textContent = r.allowed;
  $('limit').textContent = r.limit;
  $('allowed-note').textContent = r.refilled > 0
    ? `+${r.refilled} refilled while the burst was decided` : '';
  const scale = Math.max(r.params.burst, r.limit, 1);
  $('allowed-bar').style.width = (100 * r.allowed / scale) + '%';
  $('limit-mark').style.left = (100 * r.limit / scale) + '%';

  const tile = $('tile-versus');
  tile.classList.remove('bad', 'good', 'warn');
  if (r.over > 0 && r.bound_of === 'over' && r.over <= r.bound) {
    $('versus').textContent = `+${r.over} over`;
    $('versus-note').textContent = 'over the limit, within its stated bound';
    tile.classList.add('warn');
  } else if (r.over > 0 && r.allowed_by_on_failure >= r.over) {
    $('versus').textContent = `+${r.over} over`;
    $('versus-note').textContent = `${r.allowed_by_on_failure} allowed by on_failure: ` +
      'Redis did not answer in time';
    tile.classList.add('warn');
  } else if (r.over > 0) {
    $('versus').textContent = `+${r.over} over`;
    $('versus-note').textContent = 'limit not enforced';
    tile.classList.add('bad');
  } else if (r.refused_under_limit > 0) {
    $('versus').textContent = `${r.refused_under_limit} refused`;
    $('versus-note').textContent = 'while the user was under the limit';
    tile.classList.add('warn');
  } else {
    $('versus').textContent = 'exact';
    $('versus-note').textContent = 'limit enforced';
    tile.classList.add('good');
  }
  // Over the limit is bad, but for a strategy within its stated bound
  // (sync) or over only by what on_failure allowed: a warning, as above.
  const explained = (r.bound_of === 'over' && r.over <= r.bound) ||
                    r.allowed_by_on_failure >= r.over;
  $('tile-allowed').className = 'tile ' + (r.over <= 0 ? 'good' : explained ? 'warn' : 'bad');
  renderBound(r);

  if (r.redis_calls_per_request > 0) {
    $('calls').textContent = r.redis_calls_per_request.toFixed(2);
    $('calls-note').textContent = `${r.redis_commands} · ${r.redis_round_trips_per_request.toFixed(2)} round trips · Redis ran ${r.redis_executed_per_request.toFixed(2)} (commandstats, script internals included)`;
  } else {
    $('calls').textContent = '0';
    $('calls-note').textContent = 'no network hop';
  }
  const down = r.redis_down;
  const dt = $('tile-down');
  dt.classList.remove('bad', 'good', 'warn');
  if (!down) {
    $('down').textContent = '–';
    $('down-note').textContent = 'not measured';
  } else if (r.strategy === 'local' || r.strategy === 'split') {
    $('down').textContent = 'unaffected';
    $('down-note').textContent = `${down.allowed} ok · no Redis involved` +
      (r.strategy === 'local' ? ', but inaccurate' : '');
  } else {
    $('down').textContent = `${down.allowed} ok`;
    $('down-note').textContent = `${down.limited + down.failed} refused · ` +
      (DOWN[r.strategy] || down.on_failure);
    dt.classList.add(down.allowed > r.limit ? 'bad' : 'good');
  }
}

// The bound the strategy states for this run, beside what was measured:
// sync's overshoot, lease's refusals under the limit.
function renderBound(r) {
  const tile = $('tile-bound');
  tile.classList.remove('bad', 'good', 'warn');
  tile.dataset.kind = r.bound_of || 'none';
  if (r.bound_of === 'over') {
    $('measured').textContent = `+${r.over}`;
    $('bound').textContent = `≤ ${r.bound}`;
    $('bound-note').textContent = `overshoot: at most what the other servers admit in ` +
      `${r.over_window_ms} ms (2 × (${r.interval_ms} ms + round trip)): ` +
      `their share of the burst's rate × that window, plus one for each other server ` +
      `(${r.arrivals_in_window}); never more than ${r.over_cap}`;
    tile.classList.add(r.over <= r.bound ? 'warn' : 'bad');
  } else if (r.bound_of === 'under') {
    $('measured').textContent = `+${r.over} · ${r.refused_under_limit} short`;
    $('bound').textContent = `0 · ≤ ${r.bound}`;
    $('bound-note').textContent = `over, and refused under the limit: the servers ` +
      `may hold ${r.under_cap} units unspent (chunks of at most ${r.chunk})`;
    tile.classList.add(r.over === 0 && r.refused_under_limit <= r.bound ? 'good' : 'bad');
  } else if (r.strategy === 'atomic' && r.by_on_failure > 0) {
    $('measured').textContent = `+${r.over}`;
    $('bound').textContent = 'exact';
    $('bound-note').textContent = `exact when Redis decides; Redis did not answer ` +
      `in time for ${r.by_on_failure}, decided by on_failure (limit / N): ` +
      `${r.allowed_by_on_failure} allowed`;
    tile.classList.add(r.over === 0 ? 'good' : r.allowed_by_on_failure >= r.over ? 'warn' : 'bad');
  } else if (r.strategy === 'atomic') {
    $('measured').textContent = `+${r.over}`;
    $('bound').textContent = 'exact';
    $('bound-note').textContent = 'every decision in Redis: no bound needed';
    tile.classList.add(r.over === 0 ? 'good' : 'bad');
  } else {
    $('measured').textContent = `+${r.over}`;
    $('bound').textContent = 'none';
    $('bound-note').textContent = 'this strategy states no bound';
  }
  $('calls-tile-note').textContent = r.bound_of
    ? `includes the commands sent after the burst (waited ${Math.round(r.settle_ms)} ms)` : '';
}

function resetPointsIfNeeded() {
  const key = `${state.servers}/${state.burst}/${state.sync}`;
  if (key !== pointsKey) { points = {}; pointsKey = key; }
}

function addPoint(r) {
  const sync = r.strategy === 'sync' ? r.interval_ms : state.sync;
  if (`${r.params.servers}/${r.params.burst}/${sync}` !== pointsKey) return;
  (points[r.strategy] = points[r.strategy] || {})[Math.round(r.params.rtt_ms)] = r.allowed;
  drawChart();
}

function drawChart() {
  const svg = $('chart');
  const W = 720, H = 280, L = 44, R = 130, T = 14, B = 36;
  const xs = (v) => L + (W - L - R) * v / 20;
  let ymax = state.limit;
  STRATEGIES.forEach((s) => Object.values(points[s] || {}).forEach((a) => { ymax = Math.max(ymax, a); }));
  ymax = Math.ceil(ymax * 1.1) + 1;
  const ys = (a) => H - B - (H - T - B) * a / ymax;
  let out = '';
  const step = ymax > 50 ? Math.ceil(ymax / 50) * 10 : ymax > 20 ? 10 : 5;
  for (let y = 0; y <= ymax; y += step)
    out += `<line x1="${L}" x2="${W - R}" y1="${ys(y)}" y2="${ys(y)}" stroke="#eef0f3"/>` +
           `<text x="${L - 6}" y="${ys(y) + 4}" text-anchor="end">${y}</text>`;
  [0, 1, 2, 5, 10, 20].forEach((v) => {
    out += `<text x="${xs(v)}" y="${H - B + 16}" text-anchor="middle">${v}</text>`;
  });
  out += `<text x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle">Redis round trip (ms)</text>`;
  out += `<line x1="${L}" x2="${W - R}" y1="${ys(state.limit)}" y2="${ys(state.limit)}" stroke="#1d2330" stroke-dasharray="5 4"/>` +
         `<text x="${W - R + 6}" y="${ys(state.limit) + 4}">limit ${state.limit}</text>`;
  let legend = 0;
  STRATEGIES.forEach((s) => {
    const p = points[s];
    if (!p) return;
    const xsorted = Object.keys(p).map(Number).sort((a, b) => a - b);
    const pts = xsorted.map((v) => `${xs(v)},${ys(p[v])}`).join(' ');
    // Lines that coincide (local and naive both at the burst) stay visible:
    // the earlier a strategy, the wider and lighter its line.
    const width = {local: 7, split: 6, naive: 5, atomic: 4, sync: 3, lease: 2}[s];
    out += `<polyline fill="none" stroke="${COLORS[s]}" stroke-opacity="0.8" stroke-width="${width}" stroke-linejoin="round" points="${pts}"/>`;
    xsorted.forEach((v) => {
      out += `<circle cx="${xs(v)}" cy="${ys(p[v])}" r="3.5" fill="${COLORS[s]}"><title>${s}: ${p[v]} at ${v} ms</title></circle>`;
    });
    out += `<rect x="${W - R + 50}" y="${T + 22 * legend + 24}" width="14" height="4" fill="${COLORS[s]}"/>` +
           `<text x="${W - R + 70}" y="${T + 22 * legend + 30}">${s}</text>`;
    legend++;
  });
  if (!legend)
    out += `<text x="${(L + W - R) / 2}" y="${H / 2}" text-anchor="middle">no points yet</text>`;
  svg.innerHTML = out;
  svg.dataset.points = String(STRATEGIES.reduce((n, s) => n + Object.keys(points[s] || {}).length, 0));
}

async function sweep() {
  if (running) { pendingSweep = true; markBusy(); return; }
  running = true;
  pendingSweep = false;
  markBusy();
  $('sweep').disabled = true;
  setStatus('running', `measuring all six strategies at 0–20 ms on ${state.servers} servers…`);
  // The curve belongs to the settings it was measured with: a slider moved
  // meanwhile starts another chart, which this sweep's points would mislabel.
  const key = `${state.servers}/${state.burst}/${state.sync}`;
  try {
    const res = await fetch('/api/sweep?' + query({}));
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.statusText);
    if (key !== `${state.servers}/${state.burst}/${state.sync}`) {
      setStatus('done', 'the settings changed during the sweep: its curve is not shown');
      return;
    }
    resetPointsIfNeeded();
    STRATEGIES.forEach((s) => {
      points[s] = points[s] || {};
      body.values.forEach((v, i) => { points[s][v] = body.allowed[s][i]; });
    });
    drawChart();
    setStatus('done', `curve measured in ${(body.took_ms / 1000).toFixed(2)} s`);
  } catch (e) {
    setStatus('error', 'sweep failed: ' + e.message);
  } finally {
    running = false;
    $('sweep').disabled = false;
    if (pending) run();
    markBusy();
  }
}

function selectTab(strategy) {
  state.strategy = strategy;
  $('sync-control').hidden = strategy !== 'sync';
  document.querySelectorAll('.tabs button').forEach((b) => {
    b.setAttribute('aria-selected', String(b.dataset.strategy === strategy));
  });
  $('explain').textContent = EXPLAIN[strategy];
}

function bindSlider(id, unit) {
  const input = $(id);
  const show = () => { $(id + '-out').textContent = input.value + (unit || ''); };
  input.addEventListener('input', () => {
    state[id] = Number(input.value);
    show();
    resetPointsIfNeeded();
    drawChart();
    schedule(300);
  });
  show();
}

async function init() {
  try {
    const d = await (await fetch('/api/defaults')).json();
    state.limit = d.limit; state.periodMs = d.period_ms;
    // A slider keeps a value within its range and on its steps: the state
    // (what is sent) is what the slider took, so the page shows what runs.
    const given = {servers: d.servers, burst: d.burst, rtt: d.rtt_ms, sync: d.sync_ms};
    Object.keys(given).forEach((id) => {
      $(id).value = given[id];
      state[id] = Number($(id).value);
    });
    $('spread').textContent = d.spread_ms;
    const per = d.period_ms === 1000 ? 'second' : `${d.period_ms} ms`;
    $('limit-text').textContent = `${d.limit} requests per ${per} per user`;
  } catch (e) { /* keep the page's defaults */ }
  bindSlider('servers');
  bindSlider('burst');
  bindSlider('rtt', ' ms');
  bindSlider('sync', ' ms');
  document.querySelectorAll('.tabs button').forEach((b) => {
    b.addEventListener('click', () => { selectTab(b.dataset.strategy); schedule(0); });
  });
  $('sweep').addEventListener('click', sweep);
  selectTab(state.strategy);
  resetPointsIfNeeded();
  drawChart();
  schedule(0);
}

init();
