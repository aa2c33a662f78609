"""The live page: one self-contained file like report.html (inline CSS, SVG and one inline script, no external URL,
no build step). Above the report of the steps so far (the same body report.html has, `knee.live.render`) it shows
the step running now — its counts, rate, p50/p99, a per-second chart drawn in the browser — and the run's totals,
kept up to date by the event stream (`/events`, `knee.live.stream`). When the run ends the stream sends the final
report and the page stops listening: it is then the final report.
"""

from __future__ import annotations

from knee.live.state import LiveView
from knee.report.escape import esc
from knee.report.html import CSS

_LIVE_CSS = """
#now{border:1px solid #d5dbe3;border-radius:6px;padding:8px 16px 12px;margin:14px 0 20px;background:#fbfcfe}
#now h2{margin-top:8px}.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;
  background:#2f9e44;color:#fff;vertical-align:middle}.badge.ended{background:#5b6573}
#chart{width:100%;height:200px;display:block}#chart text{font-size:10px;fill:#5b6573}
.muted{color:#5b6573}
"""

# The page's script: reads the event stream, fills in the step running now and the totals, draws the current
# step's per-second series, swaps in each newly rendered report. Every text it shows comes through textContent
# (never HTML) except the report, which knee rendered and escaped.
_SCRIPT = r"""
(() => {
  const $ = (id) => document.getElementById(id);
  const int = (n) => Math.round(n).toLocaleString('en-US');
  const ms = (v) => (v >= 1000 ? (v / 1000).toPrecision(3) + ' s' : v.toPrecision(3) + ' ms');
  const hz = (v) => (v >= 100 ? int(v) : v.toPrecision(3)) + '/s';
  let version = Number(document.body.dataset.version);
  let series = {step: -1, data: []};
  const el = (tag, text, attrs) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  };
  const fill = (table, header, rows) => {
    table.replaceChildren();
    const head = el('tr');
    header.forEach((h) => head.appendChild(el('th', h)));
    table.appendChild(el('thead')).appendChild(head);
    const body = table.appendChild(el('tbody'));
    rows.forEach((r) => {
      const tr = body.appendChild(el('tr'));
      r.forEach(([text, attrs]) => tr.appendChild(el('td', text, attrs)));
    });
  };
  const cell = (group, key, text) => [text, {'data-group': group, 'data-k': key}];
  function showStep(d) {
    const s = d.step;
    $('step').hidden = !s;
    if (!s) return;
    const unit = d.unit === 'rate' ? s.level + '/s offered' : s.level + ' clients';
    const of = s.total ? ' of ' + s.total : '';
    const what = s.phase === 'recovery' ? 'recovery probe' : 'step ' + s.number + of;
    const planned = s.planned_s ? ' of ' + s.planned_s.toFixed(0) + ' s' : '';
    const workers = s.workers ? ' · workers ' + s.workers[0] + '/' + s.workers[1] : '';
    const down = s.direction === 'down' ? ' (down)' : '';
    $('step-title').textContent = what + ': ' + unit + (s.label ? ' ' + s.label : '') + down;
    $('step-meta').textContent = s.elapsed_s.toFixed(1) + ' s' + planned + workers;
    $('reason').textContent = s.reason ? 'why this level: ' + s.reason : '';
    const header = ['Group', 'Clients', 'Succeeded', 'Failed', 'Hung', 'In flight', 'Rate', 'Completed', 'p50', 'p99'];
    fill($('groups'), header,
      s.groups.map((g) => [cell(g.name, 'name', g.name), cell(g.name, 'clients', int(g.clients)),
        cell(g.name, 'succeeded', int(g.succeeded)), cell(g.name, 'failed', int(g.failed)),
        cell(g.name, 'hung', int(g.hung)), cell(g.name, 'in_flight', int(g.in_flight)),
        cell(g.name, 'rate', hz(g.rate_hz)),
        cell(g.name, 'completed', hz(g.completed_hz) + (g.offered_hz ? ' of ' + hz(g.offered_hz) : '')),
        cell(g.name, 'p50', g.p50_ms ? ms(g.p50_ms) : '—'), cell(g.name, 'p99', g.p99_ms ? ms(g.p99_ms) : '—')]));
    const failing = s.groups.filter((g) => g.failed_by_class.length);
    $('failures').textContent = failing.map((g) => g.name + ' failed: ' +
      g.failed_by_class.map(([c, n]) => c + ' ' + int(n)).join(', ')).join(' · ');
    $('late').textContent = s.groups.filter((g) => g.late).map((g) => g.name + ': ' + int(g.late) +
      ' arrivals started late' + (g.lagged ? ', ' + int(g.lagged) + " of them knee's own lag (a client was free)" : ''))
      .join(' · ');
    $('shards').hidden = !s.shards.length;
    fill($('shards'), ['Worker', 'Clients', 'Succeeded', 'Failed', 'Hung', 'In flight', ''],
      s.shards.map((w) => [[w.worker, {}], [int(w.clients), {}], [int(w.succeeded), {}], [int(w.failed), {}],
        [int(w.hung), {}], [int(w.in_flight), {}], [w.finished ? 'done' : '', {}]]));
  }
  function addPoints(p) {
    if (!p) return;
    if (p.step !== series.step) series = {step: p.step, data: []};
    if (p.from !== series.data.length) return;  // never happens: each stream sends every point once, in order
    series.data.push(...p.data);
  }
  function draw(d) {
    const svg = $('chart');
    svg.replaceChildren();
    const groups = d.step ? d.step.groups.map((g) => g.name) : [];
    const k = Math.max(0, groups.indexOf(d.measured));
    const pts = series.data;
    const NS = 'http://www.w3.org/2000/svg';
    const W = 900, H = 200, L = 50, B = 20, T = 26;
    const rates = [];
    for (let i = 0; i < pts.length; i++) {
      const [t, c] = pts[i];
      const [t0, c0] = i ? pts[i - 1] : [0, [[0, 0, 0]]];
      const dt = t - t0, a = c[k] || [0, 0, 0], b = c0[k] || [0, 0, 0];
      if (dt > 0) rates.push([t, (a[0] - b[0]) / dt, (a[1] + a[2] - b[1] - b[2]) / dt]);
    }
    const top = Math.max(1, ...rates.map((r) => Math.max(r[1], r[2]))) * 1.1;
    const span = Math.max(d.step && d.step.planned_s ? d.step.planned_s : 10, ...rates.map((r) => r[0]));
    const x = (t) => L + (t / span) * (W - L - 10), y = (v) => H - B - (v / top) * (H - B - T);
    const add = (tag, attrs, text) => {
      const e = document.createElementNS(NS, tag);
      for (const [a, v] of Object.entries(attrs)) e.setAttribute(a, v);
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
    };
    add('line', {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: '#9aa3ad'});
    add('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#9aa3ad'});
    add('text', {x: 4, y: T + 4}, hz(top / 1.1));
    add('text', {x: 4, y: H - B}, '0');
    add('text', {x: W - 60, y: H - 4}, span.toFixed(0) + ' s');
    const line = (i, color) => add('polyline', {fill: 'none', stroke: color, 'stroke-width': 1.6,
      points: rates.map((r) => x(r[0]).toFixed(1) + ',' + y(r[i]).toFixed(1)).join(' ')});
    line(1, '#1f77b4');
    line(2, '#d62728');
    add('text', {x: L + 8, y: 12, fill: '#1f77b4'}, 'succeeded / s (' + (groups[k] || d.measured) + ')');
    add('text', {x: L + 220, y: 12, fill: '#d62728'}, 'failed + hung / s');
  }
  function showTotals(d) {
    fill($('totals'), ['Group', 'Succeeded', 'Failed', 'Hung', 'Abandoned'],
      d.totals.map((t) => [cell(t.name, 'name', t.name), cell(t.name, 'succeeded', int(t.succeeded)),
        cell(t.name, 'failed', int(t.failed)), cell(t.name, 'hung', int(t.hung)),
        cell(t.name, 'abandoned', int(t.abandoned))]));
    $('steps-done').textContent = d.steps_done + ' step' + (d.steps_done === 1 ? '' : 's') + ' done';
  }
  function showRemote(d) {
    $('remote').textContent = d.remote.map((r) => r.line).join(' · ');
  }
  function show(d) {
    window.knee = {state: d, points: series};  // what the page shows, for a reader's console (and the tests)
    $('badge').textContent = d.ended ? 'ended: ' + d.status : 'live';
    $('badge').classList.toggle('ended', d.ended);
    showStep(d);
    showTotals(d);
    showRemote(d);
    draw(d);
  }
  const events = new EventSource('events?v=' + version);
  events.addEventListener('state', (e) => {
    const m = JSON.parse(e.data);
    addPoints(m.points);
    show(m.state);
  });
  events.addEventListener('report', (e) => {
    const m = JSON.parse(e.data);
    if (m.version > version) {
      $('report').innerHTML = m.html;
      version = m.version;
      document.body.dataset.version = String(version);
    }
  });
  events.addEventListener('end', () => {
    events.close();
    $('ended').hidden = false;
    document.body.dataset.ended = 'true';
  });
})();
"""


def live_page(view: LiveView, report: tuple[int, str]) -> str:
    """The page for `view`, with the report body of version `report[0]` in place (the stream sends newer ones)."""
    version, body = report
    run_id = esc(view.record.run_id)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>knee live {run_id}</title>
<style>{CSS}{_LIVE_CSS}</style></head>
<body data-version="{version}" data-ended="false"><main>
<section id="now">
<h2>knee live: {run_id} <span id="badge" class="badge">connecting…</span></h2>
<p id="ended" class="muted" hidden>The run has ended: below is its final report.</p>
<div id="step" hidden>
<h3><span id="step-title"></span> <span id="step-meta" class="muted"></span></h3>
<p id="reason" class="muted"></p>
<div class="scroll"><table id="groups"></table></div>
<p id="failures" class="muted"></p>
<p id="late" class="muted"></p>
<div class="scroll"><table id="shards" hidden></table></div>
<svg id="chart" viewBox="0 0 900 200" preserveAspectRatio="none" role="img"
 aria-label="the current step per second"></svg>
</div>
<h3>Totals <span id="steps-done" class="muted"></span></h3>
<div class="scroll"><table id="totals"></table></div>
<p id="remote" class="muted"></p>
</section>
<div id="report">
{body}
</div>
</main>
<script>{_SCRIPT}</script>
</body></html>
"""
