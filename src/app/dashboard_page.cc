#include "app/dashboard_page.h"

namespace kvgate::app {
namespace {

// The document, as served: nothing in it is fetched from elsewhere (see the header). The JS needs
// a browser from 2020 on (async/await, replaceChildren), which operators' laptops run.
constexpr std::string_view kPage = R"page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>kvgate dashboard</title>
<link rel="icon" href="data:,">
<style>
:root{--fg:#1b2430;--muted:#5a6574;--line:#dadfe6;--bg:#f3f5f8;--card:#fff;--ok:#17803a;
--bad:#c0281f;--warn:#9a5800;--accent:#2c67b1}
*{box-sizing:border-box}
html,body{margin:0}
body{font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
header{display:flex;align-items:baseline;gap:14px;padding:7px 16px;background:#1e2936;color:#fff}
header h1{font-size:15px;margin:0;font-weight:600;letter-spacing:.02em}
header .meta{color:#c3cbd6;font-size:12px} header .grow{flex:1}
#notice{display:none;padding:6px 16px;font-weight:600}
#notice.error{display:block;background:#fbe3e0;color:#861b14;border-bottom:1px solid #efbdb7}
#notice.auth{display:block;background:#fff2d9;color:#5f3b00;border-bottom:1px solid #ecd095}
#auth{display:none;align-items:center;gap:8px;padding:6px 16px;background:#fff8ea;
border-bottom:1px solid #ecd095}
#auth.show{display:flex}
#auth input{font:inherit;padding:3px 6px;width:22em;border:1px solid #b9c0ca;border-radius:4px}
#auth button{font:inherit;padding:3px 12px;border:1px solid #2c67b1;background:#2c67b1;color:#fff;
border-radius:4px;cursor:pointer}
#auth-msg{color:var(--bad)}
main{padding:10px 16px 16px}
body.stale main{opacity:.45;filter:grayscale(1)}
h2{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);
margin:12px 0 5px}
h3{font-size:11px;text-transform:uppercase;letter-spacing:.03em;color:var(--muted);margin:0;
font-weight:600;white-space:nowrap}
.cards{display:flex;flex-wrap:wrap;gap:8px}
.cards .card{flex:1 1 auto}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:6px 10px}
.label{color:var(--muted);font-size:11px;text-transform:uppercase;letter-spacing:.03em;
white-space:nowrap}
.window{color:var(--muted);font-size:10px;white-space:nowrap}
.value{font-size:19px;font-weight:600;font-variant-numeric:tabular-nums;white-space:nowrap;
overflow:hidden;text-overflow:ellipsis}
.value.text{font-size:16px;line-height:23px}
.unit{font-size:11px;color:var(--muted);font-weight:400;text-transform:none;margin-left:3px}
.value .sep{color:var(--muted);font-weight:400;margin:0 3px}
.sparks{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:8px;margin-top:8px}
.spark .head{display:flex;justify-content:space-between;align-items:baseline;gap:6px}
.spark .now{font-weight:600;font-variant-numeric:tabular-nums}
.spark .head .grow{flex:1}
.spark svg{display:block;width:100%;height:64px;margin-top:2px}
.spark .axis{display:flex;justify-content:space-between;color:var(--muted);font-size:10px}
svg .line{fill:none;stroke:var(--accent);stroke-width:1.5;stroke-linejoin:round}
svg .dot{fill:var(--accent)} svg .base{stroke:var(--line)}
svg .none{fill:var(--muted);font-size:11px}
.panels{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:8px;
margin-top:8px}
.panel{overflow-x:auto}
.panel .phead{display:flex;justify-content:space-between;align-items:baseline;gap:8px;
margin-bottom:3px}
.panel .value{margin-bottom:2px}
table.mini{width:100%;border-collapse:collapse}
table.mini th,table.mini td{padding:2px 4px;border-bottom:1px solid #eef0f3;font-size:12px}
table.mini th{background:none;text-transform:none;font-weight:400;color:var(--muted);
white-space:normal}
table.mini tr:last-child td,table.mini tr:last-child th{border-bottom:0}
.off{color:var(--muted);font-style:italic;margin:2px 0 4px}
.tablewrap{overflow-x:auto;border:1px solid var(--line);border-radius:6px;background:var(--card)}
table{width:100%;border-collapse:collapse}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap;
font-variant-numeric:tabular-nums}
tr:last-child td{border-bottom:0}
th{font-size:11px;color:var(--muted);text-transform:uppercase;font-weight:600;background:#f7f8fa}
th.l,td.l{text-align:left}
td.url{border-left:3px solid transparent}
td.url .models{color:var(--muted);font-size:11px;margin-left:6px}
td.url .why{display:block;font-size:11px}
tr.worker.down{background:#fce8e6}
tr.worker.down td.url{border-left-color:var(--bad)}
tr.worker.down td.url .u{color:#861b14;font-weight:600}
tr.worker.down td.url .why{color:#861b14;font-weight:600}
tr.worker.dead td.url{border-left-width:6px}
tr.worker.warn{background:#fff6e3}
tr.worker.warn td.url{border-left-color:#e0a030}
.pill{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:600}
.pill.ok{background:#dff3e5;color:var(--ok)}.pill.bad{background:#f9d6d2;color:var(--bad)}
.pill.warn{background:#fce7c2;color:var(--warn)}.pill.dim{background:#e9ecf0;color:var(--muted)}
.v-ok{color:var(--ok)}.v-bad{color:var(--bad)}.v-warn{color:var(--warn)}
.bar{display:inline-block;width:46px;height:6px;background:#e4e8ee;border-radius:3px;
vertical-align:middle;margin-left:6px;overflow:hidden}
.bar i{display:block;height:100%;background:var(--accent)}.bar i.hi{background:var(--bad)}
td.disagree{background:#fce7c2;color:#6e3f00;font-weight:600}
td.empty{text-align:center;color:var(--muted);padding:14px}
th .window{display:block;text-transform:none;font-weight:400;letter-spacing:0}
table.mini td.empty{padding:6px}
</style>
</head>
<body>
<header>
<h1>kvgate</h1>
<span class="meta" id="uptime"></span>
<span class="grow"></span>
<span class="meta" id="updated">waiting for the gateway's first answer&hellip;</span>
</header>
<div id="notice" role="status"></div>
<form id="auth" autocomplete="off">
<label for="api-key">API key</label>
<input id="api-key" type="password" placeholder="the gateway's API key">
<button type="submit">Use key</button>
<span id="auth-msg"></span>
</form>
<noscript><p style="padding:0 16px">This dashboard needs JavaScript.</p></noscript>
<main>
<div class="cards">
<div class="card"><div class="label">Requests/s</div>
<div class="value"><span id="requests-per-second">&mdash;</span></div>
<div class="window tile-window" data-window-for="requests-per-second"></div></div>
<div class="card"><div class="label">Decision p50/p99</div>
<div class="value"><span id="decision-p50">&mdash;</span><span class="sep">/</span><span
id="decision-p99">&mdash;</span><span class="unit">&micro;s</span></div>
<div class="window tile-window" data-window-for="decision"></div></div>
<div class="card"><div class="label">Hit ratio</div>
<div class="value"><span id="hit-ratio">&mdash;</span></div>
<div class="window tile-window" data-window-for="hit-ratio"></div></div>
<div class="card"><div class="label">Event lag p50/p99</div>
<div class="value"><span id="apply-lag-p50">&mdash;</span><span class="sep">/</span><span
id="apply-lag-p99">&mdash;</span><span class="unit">ms</span></div>
<div class="window tile-window" data-window-for="apply-lag"></div></div>
<div class="card"><div class="label">Event gaps</div>
<div class="value"><span id="event-gaps">&mdash;</span></div>
<div class="window" data-window-for="event-gaps">since start</div></div>
<div class="card"><div class="label">Degraded ranks</div>
<div class="value"><span id="degraded-ranks">&mdash;</span></div>
<div class="window" data-window-for="degraded-ranks">now</div></div>
<div class="card"><div class="label">Workers routable</div>
<div class="value"><span id="workers-routable">&mdash;</span></div>
<div class="window" data-window-for="workers-routable">now</div></div>
<div class="card"><div class="label">Policy</div>
<div class="value text"><span id="policy">&mdash;</span></div>
<div class="window" data-window-for="policy">as started</div></div>
<div class="card"><div class="label">State</div>
<div class="value text"><span id="state">&mdash;</span></div>
<div class="window" data-window-for="state">now</div></div>
</div>
<div class="sparks">
<div class="card spark"><div class="head"><span class="label">Requests/s</span>
<span class="grow"></span><span class="window point-window" data-window-for="spark-rps-now"></span>
<span class="now" id="spark-rps-now"></span></div><svg id="spark-rps"></svg>
<div class="axis"><span class="window series-window" data-window-for="spark-rps"></span><span
id="spark-rps-max"></span></div></div>
<div class="card spark"><div class="head"><span class="label">Hit ratio</span>
<span class="grow"></span><span class="window point-window" data-window-for="spark-hit-now"></span>
<span class="now" id="spark-hit-now"></span></div><svg id="spark-hit"></svg>
<div class="axis"><span class="window series-window" data-window-for="spark-hit"></span><span
id="spark-hit-max"></span></div></div>
<div class="card spark"><div class="head"><span class="label">Decision p99<span
class="unit">&micro;s</span></span>
<span class="grow"></span><span class="window point-window" data-window-for="spark-p99-now"></span>
<span class="now" id="spark-p99-now"></span></div><svg id="spark-p99"></svg>
<div class="axis"><span class="window series-window" data-window-for="spark-p99"></span><span
id="spark-p99-max"></span></div></div>
</div>
<div class="panels">
<section class="card panel" id="errors-panel">
<div class="phead"><h3>Errors</h3><span class="window"
data-window-for="errors-panel"></span></div>
<div class="value"><span id="errors-per-second">&mdash;</span><span class="unit">/s</span><span
class="unit" id="errors-count"></span></div>
<table class="mini"><tbody>
<tr><th class="l" title="Requests answered with a 4xx status">Answered 4xx</th>
<td id="status-4xx">&mdash;</td><td id="status-4xx-rate">&mdash;</td></tr>
<tr><th class="l" title="Requests answered with a 5xx status">Answered 5xx</th>
<td id="status-5xx">&mdash;</td><td id="status-5xx-rate">&mdash;</td></tr>
</tbody></table>
<table class="mini"><thead><tr><th class="l"
title="Why requests ended without a worker's answer">Reason</th><th>Count</th><th>/s</th></tr>
</thead><tbody id="errors-by-reason"><tr><td class="empty" colspan="3">no figures yet</td></tr>
</tbody></table>
</section>
<section class="card panel" id="latency-panel">
<div class="phead"><h3>Latency <span class="unit">ms</span></h3><span class="window"
data-window-for="latency-panel"></span></div>
<table class="mini"><thead><tr><th></th><th>p50</th><th>p90</th><th>p99</th>
<th title="Requests measured in the window">n</th></tr></thead><tbody>
<tr><th class="l" title="Streamed requests: from arrival to the worker's first byte">TTFT
(streamed)</th><td id="ttft-p50">&mdash;</td><td id="ttft-p90">&mdash;</td>
<td id="ttft-p99">&mdash;</td><td id="ttft-count">&mdash;</td></tr>
<tr><th class="l" title="Every request: from arrival to the end of its answer">End to end</th>
<td id="e2e-p50">&mdash;</td><td id="e2e-p90">&mdash;</td><td id="e2e-p99">&mdash;</td>
<td id="e2e-count">&mdash;</td></tr>
</tbody></table>
</section>
<section class="card panel" id="tokens-panel">
<div class="phead"><h3>Tokens per second</h3><span class="window"
data-window-for="tokens-panel"></span></div>
<table class="mini"><tbody>
<tr><th class="l" title="Prompt tokens of the requests routed to a worker">Prompt</th>
<td id="prompt-tokens-per-second">&mdash;</td></tr>
<tr><th class="l" title="Output tokens of answered generations, as the engines counted them">
Completion</th><td id="completion-tokens-per-second">&mdash;</td></tr>
</tbody></table>
</section>
<section class="card panel" id="admission-panel">
<div class="phead"><h3>Admission queue</h3><span class="window"
data-window-for="admission-panel" id="admission-window"></span></div>
<div class="off" id="admission-off" hidden>off: the gateway runs without
--max-concurrent-requests</div>
<table class="mini"><tbody>
<tr><th class="l">Queued now</th><td id="admission-queued">&mdash;</td></tr>
<tr><th class="l">Running now</th><td id="admission-running">&mdash;</td></tr>
<tr><th class="l" title="Critical / standard / sheddable">Queued by class now</th>
<td><span id="admission-queued-critical">&mdash;</span> / <span
id="admission-queued-standard">&mdash;</span> / <span
id="admission-queued-sheddable">&mdash;</span></td></tr>
<tr><th class="l" title="Requests that found no free slot and joined the queue">Waited</th>
<td id="admission-waited">&mdash;</td></tr>
<tr><th class="l" title="Waiters whose place a request of a better class took">Shed</th>
<td id="admission-shed">&mdash;</td></tr>
<tr><th class="l">Refused, queue full</th><td id="admission-refused-full">&mdash;</td></tr>
<tr><th class="l">Refused, waited too long</th>
<td id="admission-refused-timeout">&mdash;</td></tr>
<tr><th class="l">Left while queued</th><td id="admission-abandoned">&mdash;</td></tr>
</tbody></table>
</section>
</div>
<h2>Workers</h2>
<div class="tablewrap"><table>
<thead><tr><th class="l">Worker</th><th class="l">Health</th><th class="l">Liveness</th>
<th class="l">Breaker</th><th>In flight</th><th>Waiting</th><th>KV usage</th><th>Index blocks</th>
<th title="Prompt tokens the index predicted cached">Cached pred.</th>
<th title="Prompt tokens the engine reported cached">Cached rep.</th><th>Agreement</th>
<th title="Share of the routing decisions of the last 10 s">Share<span class="window tile-window"
data-window-for="decision-share"></span></th></tr></thead>
<tbody id="workers"><tr><td class="empty" colspan="12">no figures yet</td></tr></tbody>
</table></div>
<div id="tenants-panel" hidden>
<h2>Tenants <span class="unit" id="queued">&mdash;</span></h2>
<div class="tablewrap"><table>
<thead><tr><th class="l">Tenant</th><th title="Requests ended, by class">Critical</th>
<th>Standard</th><th>Sheddable</th><th title="Requests ended per second since the last poll">
Req/s</th><th>Prompt tokens</th><th>Output tokens</th>
<th title="Requests refused by the key's rate limits">Rate-limited</th></tr></thead>
<tbody id="tenants"></tbody>
</table></div>
</div>
</main>
<script>
(() => {
  'use strict';
  const STATE_URL = 'dashboard/state';  // relative: works behind a path prefix
  const PERIOD_MS = 2000;
  const TIMEOUT_MS = 5000;
  const KEY_SLOT = 'kvgate.dashboard.api-key';
  const DASH = '\u2014';
  const SVG = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);
  let last = null;  // the last answer drawn, redrawn on resize and kept when a poll fails
  let timer = 0;

  // Formatting: anything that is not a finite number shows as an em dash (no data).
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const group = (v) => Math.round(v).toLocaleString('en-US');
  const count = (v) => (isNum(v) ? group(v) : DASH);
  const pct = (v) => (isNum(v) ? (v * 100).toFixed(1) + '%' : DASH);
  const figure = (v) => {
    if (!isNum(v)) return DASH;
    const a = Math.abs(v);
    return a >= 1000 ? group(v) : v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
  };
  const str = (v) => (typeof v === 'string' && v !== '' ? v : DASH);
  const clock = (ms) => (isNum(ms) ? new Date(ms).toLocaleTimeString() : DASH);
  const duration = (s) => {
    if (!isNum(s)) return DASH;
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    if (d) return d + 'd ' + h + 'h';
    if (h) return h + 'h ' + String(m).padStart(2, '0') + 'm';
    return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
  };
  // A window's length as its labels say it: "10 s", "5 min".
  const span = (s) => (s < 120 ? Math.round(s) + ' s' : Math.round(s / 60) + ' min');
  const lastFor = (s) => (isNum(s) && s > 0 ? 'last ' + span(s) : 'no window yet');

  function setText(id, text, tone) {
    const el = $(id);
    el.textContent = text;
    el.className = tone ? 'v-' + tone : '';
  }

  // Every label of one kind (class `cls`) says `text`.
  function labelAll(cls, text) {
    for (const e of document.getElementsByClassName(cls)) e.textContent = text;
  }
  // The window label of one panel.
  function labelPanel(panel, seconds) {
    document.querySelector('[data-window-for="' + panel + '"]').textContent = lastFor(seconds);
  }

  function storedKey() {
    try { return sessionStorage.getItem(KEY_SLOT) || ''; } catch (e) { return ''; }
  }
  let memoryKey = storedKey();  // also what is used when storage is off
  function storeKey(k) {
    try {
      if (k) sessionStorage.setItem(KEY_SLOT, k); else sessionStorage.removeItem(KEY_SLOT);
    } catch (e) { /* storage off: the key lasts until the page is left */ }
    memoryKey = k;
  }

  function notice(kind, text) {
    const n = $('notice');
    n.className = kind;
    n.textContent = text;
  }

  // A failed poll: the last figures stay, greyed, under a notice.
  function lost(reason) {
    document.body.classList.add('stale');
    notice('error', reason + ', retrying every ' + PERIOD_MS / 1000 + ' s. ' +
        (last ? 'Figures shown are from ' + clock(last.generated_at_ms) + '.' : 'No figures yet.'));
  }

  function askKey(sent) {
    document.body.classList.toggle('stale', last !== null);
    notice('auth', 'This gateway asks for an API key: enter it to see the dashboard ' +
        '(kept for this browser tab only).');
    if (sent) {
      $('auth-msg').textContent = 'The key was refused.';
      storeKey('');
    }
    const form = $('auth');
    if (!form.classList.contains('show')) {
      form.classList.add('show');
      $('api-key').focus();
    }
  }

  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    const k = $('api-key').value.trim();
    if (!k) return;
    storeKey(k);
    $('api-key').value = '';
    $('auth-msg').textContent = '';
    poll();
  });

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, PERIOD_MS);
  }

  async function poll() {
    clearTimeout(timer);
    const key = memoryKey;
    const headers = {Accept: 'application/json'};
    if (key) headers.Authorization = 'Bearer ' + key;
    const ctl = new AbortController();
    const abort = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    let state;
    try {
      const r = await fetch(STATE_URL, {headers, cache: 'no-store', signal: ctl.signal});
      if (r.status === 401) return askKey(key);
      if (!r.ok) return lost('The gateway answered HTTP ' + r.status);
      try { state = await r.json(); } catch (e) {
        return lost('The gateway\'s answer is not JSON');
      }
    } catch (e) {
      return lost(e.name === 'AbortError' ? 'Gateway unreachable (no answer in ' +
          TIMEOUT_MS / 1000 + ' s)' : 'Gateway unreachable');
    } finally {
      clearTimeout(abort);
      schedule();
    }
    try {
      render(state);
    } catch (e) {
      return lost('The gateway\'s answer could not be drawn (' + e.message + ')');
    }
    last = state;
    $('auth').classList.remove('show');
    notice('', '');
    document.body.classList.remove('stale');
    document.body.dataset.updated = String(state.generated_at_ms);
  }

  function render(s) {
    fleetCards(s);
    const se = s.series || {};
    const t = Array.isArray(se.t) ? se.t : [];
    // The cards cover fleet.window_seconds; each sparkline point one period, the line the span.
    labelAll('series-window', isNum(se.span_seconds) && se.span_seconds > 0 ?
        'per ' + (se.period_seconds === 1 ? 'second' : span(se.period_seconds)) + ', ' +
        lastFor(se.span_seconds) : 'no points yet');
    labelAll('point-window', lastFor(se.period_seconds));
    sparkline('spark-rps', t, se.requests_per_second, figure);
    sparkline('spark-hit', t, se.hit_ratio, pct, {max: 1, label: 'scale 0 to 100%'});
    sparkline('spark-p99', t, se.decision_p99_us, figure);
    errorsPanel(s.errors || {});
    latencyPanel(s.latency || {});
    tokensPanel(s.tokens || {});
    admissionPanel(s.admission || {});
    workers(Array.isArray(s.workers) ? s.workers : []);
    const a = s.admission || {};
    tenants(Array.isArray(s.tenants) ? s.tenants : [], s.queued_by_class, a.enabled === true,
        s.generated_at_ms);
  }

  function fleetCards(s) {
    const f = s.fleet || {};
    const ev = f.events || {};
    labelAll('tile-window', lastFor(f.window_seconds));
    setText('requests-per-second', figure(f.requests_per_second));
    setText('decision-p50', figure(f.decision_p50_us));
    setText('decision-p99', figure(f.decision_p99_us));
    setText('hit-ratio', pct(f.hit_ratio));
    setText('apply-lag-p50', figure(ev.apply_lag_p50_ms));
    setText('apply-lag-p99', figure(ev.apply_lag_p99_ms));
    setText('event-gaps', count(ev.gaps_total), ev.gaps_total > 0 ? 'warn' : '');
    setText('degraded-ranks', count(ev.degraded_ranks), ev.degraded_ranks > 0 ? 'bad' : '');
    setText('workers-routable', count(f.routable) + '/' + count(f.workers),
        !(f.routable > 0) ? 'bad' : f.routable < f.workers ? 'warn' : 'ok');
    setText('policy', str(s.policy));
    if (s.draining) setText('state', 'draining', 'warn');
    else if (s.ready) setText('state', 'ready', 'ok');
    else setText('state', 'not ready', 'bad');
    $('uptime').textContent = 'up ' + duration(s.uptime_seconds);
    $('updated').textContent = 'updated ' + clock(s.generated_at_ms);
  }

  // One series as a line over time; a null point breaks the line, a point alone is a dot.
  function sparkline(id, t, ys, fmt, fixed) {
    ys = Array.isArray(ys) ? ys : [];
    const svg = $(id);
    const w = svg.clientWidth || 300, h = svg.clientHeight || 64;
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.replaceChildren();
    const n = Math.min(t.length, ys.length);
    let max = 0, seen = false;
    for (let i = 0; i < n; i++) {
      if (isNum(ys[i])) { max = Math.max(max, ys[i]); seen = true; }
    }
    if (fixed) max = fixed.max;
    const top = max > 0 ? max : 1;
    const add = (tag, attrs) => {
      const el = document.createElementNS(SVG, tag);
      for (const k in attrs) el.setAttribute(k, attrs[k]);
      svg.appendChild(el);
      return el;
    };
    add('line', {class: 'base', x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5});
    const t0 = t[0], t1 = t[n - 1];
    const x = (i) => (n > 1 && t1 > t0 ? ((t[i] - t0) / (t1 - t0)) * (w - 4) + 2 : w - 2);
    const y = (v) => h - 3 - (Math.min(Math.max(v, 0), top) / top) * (h - 6);
    let d = '';
    for (let i = 0; i < n; i++) {
      if (!isNum(ys[i]) || !isNum(t[i])) continue;
      const joined = i > 0 && isNum(ys[i - 1]) && isNum(t[i - 1]);
      d += (joined ? 'L' : 'M') + x(i).toFixed(1) + ' ' + y(ys[i]).toFixed(1);
      const alone = !joined && !(i + 1 < n && isNum(ys[i + 1]) && isNum(t[i + 1]));
      if (alone) add('circle', {class: 'dot', cx: x(i), cy: y(ys[i]), r: 1.8});
    }
    if (d) add('path', {class: 'line', d});
    else add('text', {class: 'none', x: w / 2, y: h / 2 + 4, 'text-anchor': 'middle'})
        .textContent = 'no data yet';
    $(id + '-now').textContent = fmt(n ? ys[n - 1] : null);  // the newest point, even a gap
    $(id + '-max').textContent = fixed ? fixed.label : 'max ' + fmt(seen ? max : null);
  }

  // Text only ever goes in as textContent: it is never parsed as markup.
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Requests that ended without a worker's answer, by reason, and answers by status class.
  function errorsPanel(e) {
    labelPanel('errors-panel', e.window_seconds);
    setText('errors-per-second', figure(e.per_second), e.count > 0 ? 'bad' : '');
    $('errors-count').textContent = isNum(e.count) ? count(e.count) + ' in the window' : '';
    const classes = Array.isArray(e.answered_by_status_class) ? e.answered_by_status_class : [];
    for (const c of ['4xx', '5xx']) {
      const got = classes.find((x) => x.status_class === c) || {};
      setText('status-' + c, count(got.count), got.count > 0 ? 'warn' : '');
      $('status-' + c + '-rate').textContent = figure(got.per_second) + '/s';
    }
    const body = el('tbody');
    body.id = 'errors-by-reason';
    for (const r of Array.isArray(e.by_reason) ? e.by_reason : []) {
      const tr = body.appendChild(el('tr', 'error-reason'));
      tr.dataset.reason = str(r.reason);
      tr.appendChild(el('td', 'l', str(r.reason)));
      tr.appendChild(el('td', '', count(r.count)));
      tr.appendChild(el('td', '', figure(r.per_second)));
    }
    if (!body.children.length) {
      body.appendChild(el('tr')).appendChild(el('td', 'empty', 'none in the window')).colSpan = 3;
    }
    $('errors-by-reason').replaceWith(body);
  }

  function latencyPanel(l) {
    labelPanel('latency-panel', l.window_seconds);
    for (const [name, p] of [['ttft', l.ttft_ms || {}], ['e2e', l.end_to_end_ms || {}]]) {
      for (const q of ['p50', 'p90', 'p99']) setText(name + '-' + q, figure(p[q]));
      setText(name + '-count', count(p.count));
    }
  }

  function tokensPanel(t) {
    labelPanel('tokens-panel', t.window_seconds);
    setText('prompt-tokens-per-second', figure(t.prompt_per_second));
    setText('completion-tokens-per-second', figure(t.completion_per_second));
  }

  // The queue now, and what it did over the window (--max-concurrent-requests).
  function admissionPanel(a) {
    const on = a.enabled === true;
    $('admission-off').hidden = on;
    $('admission-window').textContent = on ? 'now; events ' + lastFor(a.window_seconds) : 'off';
    const q = a.queued_by_class || {};
    const show = (id, v, tone) => setText(id, on ? count(v) : DASH, on ? tone : '');
    show('admission-queued', a.queued, a.queued > 0 ? 'warn' : '');
    show('admission-running', a.running);
    for (const c of ['critical', 'standard', 'sheddable']) show('admission-queued-' + c, q[c]);
    show('admission-waited', a.waited);
    show('admission-shed', a.shed, a.shed > 0 ? 'bad' : '');
    show('admission-refused-full', a.refused_queue_full, a.refused_queue_full > 0 ? 'bad' : '');
    show('admission-refused-timeout', a.refused_timeout, a.refused_timeout > 0 ? 'bad' : '');
    show('admission-abandoned', a.abandoned);
  }

  // Why a worker is out of rotation, or [] when it is fine.
  function downReasons(w) {
    const r = [];
    if (w.health === 'unhealthy') r.push('unhealthy');
    if (w.liveness === 'unreachable' || w.liveness === 'wedged') r.push(w.liveness);
    if (w.circuit_breaker === 'open') r.push('breaker open');
    if (w.routable === false && !r.length) r.push('not routable');
    return r;
  }
  const isDead = (w) => w.health === 'unhealthy' || w.liveness === 'unreachable';

  const TONES = {healthy: 'ok', live: 'ok', closed: 'ok', unhealthy: 'bad', unreachable: 'bad',
    wedged: 'bad', open: 'bad', half_open: 'warn'};

  // What tells one worker from another: host:port without the scheme, shortened in the middle
  // when it is longer than the window has room for.
  function shortUrl(url) {
    const s = url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/\/+$/, '');
    const budget = Math.max(16, Math.min(48, Math.floor((window.innerWidth || 1366) / 28)));
    if (s.length <= budget) return s;
    const tail = Math.ceil((budget - 1) / 2);
    return s.slice(0, budget - 1 - tail) + '\u2026' + s.slice(s.length - tail);
  }

  function workerName(cell, w, url, down) {
    const name = cell.appendChild(el('span', 'u', shortUrl(url)));
    name.title = url;
    if (down.length) cell.appendChild(el('span', 'why', 'down: ' + down.join(', ')));
    if (w.role === 'prefill' || w.role === 'decode') cell.appendChild(el('span', 'models', w.role));
    if (Array.isArray(w.models) && w.models.length) {
      cell.appendChild(el('span', 'models', w.models.map(str).join(', ')));
    }
  }

  function workerRow(w) {
    const tr = el('tr');
    const cell = (field, text, cls) => {
      const td = tr.appendChild(el('td', cls, text));
      if (field) td.dataset.field = field;
      return td;
    };
    const pill = (field, v, tone) => cell(field, '', 'l')
        .appendChild(el('span', 'pill ' + (tone || TONES[v] || 'dim'), str(v)));
    const url = str(w.url);
    const down = downReasons(w);
    tr.className = 'worker' + (down.length ? ' down' : w.circuit_breaker === 'half_open' ||
        w.health === 'unknown' ? ' warn' : '') + (isDead(w) ? ' dead' : '');
    tr.dataset.url = url;
    tr.title = down.length ? url + ': ' + down.join(', ') : url;
    workerName(cell('worker', '', 'l url'), w, url, down);
    pill('health', w.health);
    pill('liveness', w.liveness);
    // A closed breaker on a worker out of rotation only says no request failed there lately.
    const b = pill('circuit_breaker', w.circuit_breaker,
        down.length && w.circuit_breaker === 'closed' ? 'dim' : '');
    if (down.length && w.circuit_breaker === 'closed') {
      b.title = 'no request failed there lately: its health keeps it out of rotation';
    }
    cell('in_flight', count(w.in_flight));
    cell('waiting', count(w.waiting));
    const kv = cell('kv_usage', pct(w.kv_usage));
    if (isNum(w.kv_usage)) {
      const fill = kv.appendChild(el('span', 'bar')).appendChild(el('i'));
      if (w.kv_usage >= 0.9) fill.className = 'hi';
      fill.style.width = (Math.min(Math.max(w.kv_usage, 0), 1) * 100).toFixed(1) + '%';
    }
    cell('index_blocks', count(w.index_blocks));
    const c = w.cached_tokens || {};
    cell('cached_predicted', count(c.predicted));
    cell('cached_reported', count(c.reported));
    const a = cell('agreement', pct(c.agreement), c.disagreeing ? 'disagree' : '');
    if (c.disagreeing) a.title = 'cached tokens: the engine and the index disagree';
    else if (!isNum(c.agreement)) a.title = 'no data: ' + str(c.agreement_missing_reason);
    cell('decision_share', pct(w.decision_share));
    return tr;
  }

  function workers(list) {
    const body = el('tbody');
    body.id = 'workers';
    for (const w of list) body.appendChild(workerRow(w));
    if (!list.length) {
      body.appendChild(el('tr')).appendChild(el('td', 'empty', 'no workers')).colSpan = 12;
    }
    $('workers').replaceWith(body);
  }

  // Per tenant (--api-keys-file): requests by class, tokens and refusals as counted so far, and
  // requests per second since the previous answer; the admission queue by class.
  let prevTenants = {at: 0, totals: new Map()};
  function tenants(list, queued, admitting, at) {
    const panel = $('tenants-panel');
    panel.hidden = !list.length && !admitting;
    const q = queued || {};
    $('queued').textContent = queued ? 'queued: critical ' + count(q.critical) + ', standard ' +
        count(q.standard) + ', sheddable ' + count(q.sheddable) : '';
    const body = el('tbody');
    body.id = 'tenants';
    const totals = new Map();
    for (const t of list) {
      const r = t.requests || {};
      const total = [r.critical, r.standard, r.sheddable]
          .reduce((a, v) => a + (isNum(v) ? v : 0), 0);
      const name = str(t.tenant);
      totals.set(name, total);
      const before = prevTenants.totals.get(name);
      const secs = (at - prevTenants.at) / 1000;
      const rate = before !== undefined && secs > 0 ? Math.max(0, total - before) / secs : null;
      const tr = el('tr', 'tenant');
      tr.dataset.tenant = name;
      const cell = (field, text, cls) => {
        tr.appendChild(el('td', cls, text)).dataset.field = field;
      };
      cell('tenant', name, 'l');
      cell('requests_critical', count(r.critical));
      cell('requests_standard', count(r.standard));
      cell('requests_sheddable', count(r.sheddable));
      cell('requests_per_second', figure(rate));
      cell('prompt_tokens', count(t.prompt_tokens));
      cell('output_tokens', count(t.output_tokens));
      cell('rate_limited', count(t.rate_limited), t.rate_limited > 0 ? 'v-warn' : '');
      body.appendChild(tr);
    }
    if (!list.length) {
      body.appendChild(el('tr')).appendChild(el('td', 'empty', 'no tenant yet')).colSpan = 8;
    }
    prevTenants = {at, totals};
    $('tenants').replaceWith(body);
  }

  window.addEventListener('resize', () => { if (last) render(last); });
  poll();
})();
</script>
</body>
</html>
)page";

}  // namespace

std::string_view dashboard_page() { return kPage; }

}  // namespace kvgate::app
