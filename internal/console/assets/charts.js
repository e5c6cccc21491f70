// The host page's charts of the last hour (GET /v1/stats: 60 minutes,
// oldest first), drawn as inline SVG with createElementNS: no library, no
// innerHTML. Each chart has its title, a legend, its axes' end labels,
// and a tooltip (an SVG <title>) per minute.

import { pad2 } from './ui.js';

const NS = 'http://www.w3.org/2000/svg';
const W = 420; // the drawing's size, in the viewBox's units
const H = 210;
const PAD = { l: 44, r: 40, b: 16 };

// s builds an SVG element: attrs are set as attributes (null/false skip
// one), except "text", its text.
function s(tag, attrs, ...children) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'text') n.textContent = v;
    else n.setAttribute(k, String(v));
  }
  for (const c of children) if (c) n.appendChild(c);
  return n;
}

const r1 = (v) => Math.round(v * 10) / 10;

// hm is a time of day, HH:MM, local.
function hm(t) {
  const d = new Date(t);
  return isNaN(d.getTime()) ? '' : pad2(d.getHours()) + ':' + pad2(d.getMinutes());
}

function fmtMs(ms) {
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return r1(ms / 1000) + ' s';
  return r1(ms / 60000) + ' min';
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

// niceMax is a round number at least v (an axis's top); whole with ints.
function niceMax(v, ints) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
    const top = ints ? Math.ceil(m * p) : m * p;
    if (top >= v) return top;
  }
  return 10 * p;
}

// frame draws a chart's title, legend, axes and labels into svg, empty
// first, and returns the plot's geometry: x(i) is minute i's left edge,
// cx(i) its middle, yl and yr map a value on the left and right axes.
// o: {title, legend: [{label, color, line}], minutes, left: {max, fmt},
// right (optional, alike), tips (a line per minute), empty (a message
// when there is nothing to draw)}.
function frame(svg, o) {
  svg.setAttribute('viewBox', `-10 -8 ${W + 20} ${H + 14}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', o.title);
  const parts = [s('text', { x: 0, y: 12, class: 'chart-title', text: o.title })];

  // The legend, wrapped to the width (text is some 6 units a letter).
  const legend = s('g', { class: 'chart-legend' });
  let lx = 0;
  let ly = 30;
  for (const it of o.legend) {
    const w = 14 + it.label.length * 6 + 12;
    if (lx > 0 && lx + w > W) { lx = 0; ly += 14; }
    legend.appendChild(it.line
      ? s('line', { x1: lx, y1: ly - 4, x2: lx + 10, y2: ly - 4, stroke: it.color, 'stroke-width': 2 })
      : s('rect', { x: lx, y: ly - 9, width: 10, height: 10, rx: 1.5, fill: it.color }));
    legend.appendChild(s('text', { x: lx + 14, y: ly, text: it.label }));
    lx += w;
  }
  parts.push(legend);

  const n = Math.max(o.minutes.length, 1);
  const g = { x0: PAD.l, x1: W - (o.right ? PAD.r : 12), y0: ly + 14, y1: H - PAD.b };
  g.slot = (g.x1 - g.x0) / n;
  g.x = (i) => g.x0 + i * g.slot;
  g.cx = (i) => g.x0 + (i + 0.5) * g.slot;
  const scale = (max) => (v) => g.y1 - (Math.min(v, max) / max) * (g.y1 - g.y0);
  g.yl = scale(o.left.max);
  g.yr = o.right ? scale(o.right.max) : null;

  // Axes: the baseline, a dashed line at the top, the end labels.
  parts.push(s('line', { x1: g.x0, y1: g.y0, x2: g.x1, y2: g.y0, class: 'chart-grid' }));
  const label = (x, y, anchor, text, cls) => s('text', {
    x, y, 'text-anchor': anchor, 'dominant-baseline': 'middle', class: cls || null, text,
  });
  parts.push(label(g.x0 - 5, g.y0, 'end', o.left.fmt(o.left.max)));
  parts.push(label(g.x0 - 5, g.y1, 'end', o.left.fmt(0)));
  if (o.right) {
    parts.push(label(g.x1 + 5, g.y0, 'start', o.right.fmt(o.right.max), 'chart-right'));
    parts.push(label(g.x1 + 5, g.y1, 'start', o.right.fmt(0), 'chart-right'));
  }
  const ms = o.minutes;
  if (ms.length) {
    parts.push(s('text', { x: g.x0, y: g.y1 + 13, 'text-anchor': 'start', text: hm(ms[0].start) }));
    parts.push(s('text', { x: g.x1, y: g.y1 + 13, 'text-anchor': 'end', text: hm(ms[ms.length - 1].start) }));
  }

  g.plot = s('g', { class: 'chart-plot' });
  parts.push(g.plot);
  parts.push(s('line', { x1: g.x0, y1: g.y1, x2: g.x1, y2: g.y1, class: 'chart-axis' }));
  if (o.empty) {
    parts.push(s('text', {
      x: (g.x0 + g.x1) / 2, y: (g.y0 + g.y1) / 2, 'text-anchor': 'middle', 'dominant-baseline': 'middle',
      class: 'chart-empty', text: o.empty,
    }));
  }
  // A band per minute, on top, for its tooltip.
  const hits = s('g', { class: 'chart-hits' });
  (o.tips || []).forEach((tip, i) => {
    hits.appendChild(s('rect', {
      x: r1(g.x(i)), y: r1(g.y0), width: r1(g.slot), height: r1(g.y1 - g.y0), fill: 'transparent', class: 'chart-hit',
    }, s('title', { text: tip })));
  });
  parts.push(hits);
  svg.replaceChildren(...parts);
  return g;
}

// line draws a series (a number or null per minute) as a line through
// the minutes' middles, broken where null, with a dot on each value.
function line(g, vals, y, color) {
  let d = '';
  let pen = false;
  const dots = s('g', { fill: color });
  vals.forEach((v, i) => {
    if (v == null) { pen = false; return; }
    const px = r1(g.cx(i));
    const py = r1(y(v));
    d += (pen ? 'L' : 'M') + px + ' ' + py;
    pen = true;
    dots.appendChild(s('circle', { cx: px, cy: py, r: 1.8 }));
  });
  if (d) g.plot.appendChild(s('path', { d, fill: 'none', stroke: color, 'stroke-width': 1.5, 'stroke-linejoin': 'round' }));
  g.plot.appendChild(dots);
}

// bars draws a bar per minute from 0 to the value (none for 0), from the
// bottom of each stack ("from", per minute) when given.
function bars(g, vals, y, color, from) {
  const grp = s('g', { fill: color });
  const w = Math.max(g.slot * 0.7, 1);
  vals.forEach((v, i) => {
    if (!(v > 0)) return;
    const base = from ? from[i] : 0;
    const top = y(base + v);
    grp.appendChild(s('rect', { x: r1(g.cx(i) - w / 2), y: r1(top), width: r1(w), height: r1(y(base) - top) }));
  });
  g.plot.appendChild(grp);
}

// ===================================================================
// (a) Sandboxes by state
// ===================================================================

const STATE_ORDER = ['running', 'creating', 'paused', 'hibernating', 'hibernated', 'stopping', 'stopped', 'error', 'destroying'];
const STATE_COLORS = {
  running: '#2da44e', creating: '#4493f8', paused: '#d4a72c', hibernating: '#e3b341', hibernated: '#9a6700',
  stopping: '#afb8c1', stopped: '#8c959f', error: '#cf222e', destroying: '#57606a',
};
const OTHER_COLORS = ['#8250df', '#bf3989', '#1b7c83', '#953800', '#0550ae'];

// statesByMinute is each minute's counts by state: its sample, or the
// last one before it carried forward (carried: the sample's minute), or
// null before the first sample. The last minute falls back on "now".
function statesByMinute(stats) {
  const ms = stats.minutes || [];
  let last = null;
  return ms.map((m, i) => {
    const counts = m.states || (i === ms.length - 1 ? stats.states : null);
    if (counts) {
      last = { counts, at: m.start };
      return { counts, carried: null };
    }
    return last ? { counts: last.counts, carried: last.at } : null;
  });
}

function drawStates(svg, stats) {
  const ms = stats.minutes || [];
  const series = statesByMinute(stats);
  const seen = new Set();
  for (const p of series) {
    if (!p) continue;
    for (const [k, v] of Object.entries(p.counts)) if (v > 0) seen.add(k);
  }
  const states = STATE_ORDER.filter((x) => seen.has(x))
    .concat([...seen].filter((x) => !STATE_ORDER.includes(x)).sort());
  const color = (st, k) => STATE_COLORS[st] || OTHER_COLORS[k % OTHER_COLORS.length];
  const total = (p) => (p ? states.reduce((sum, st) => sum + (p.counts[st] || 0), 0) : 0);
  const max = Math.max(0, ...series.map(total));
  const now = stats.states || {};
  const tips = series.map((p, i) => {
    const at = hm(ms[i].start);
    if (!p) return `${at}: no sample`;
    const parts = states.filter((st) => p.counts[st] > 0).map((st) => `${st} ${p.counts[st]}`);
    return `${at}: ${parts.length ? parts.join(', ') : 'no sandboxes'}` +
      (p.carried ? ` (as sampled at ${hm(p.carried)})` : '');
  });
  const g = frame(svg, {
    title: 'Sandboxes by state',
    legend: states.map((st, k) => ({ label: `${st} ${now[st] || 0}`, color: color(st, k) })),
    minutes: ms,
    left: { max: niceMax(max, true), fmt: String },
    tips,
    empty: max ? '' : (series.some(Boolean) ? 'No sandboxes in the last hour' : 'No sample yet'),
  });
  // A stacked step area per state, a polygon per run of sampled minutes.
  const below = series.map(() => 0);
  states.forEach((st, k) => {
    let d = '';
    for (let i = 0; i < series.length;) {
      if (!series[i]) { i++; continue; }
      let j = i;
      while (j + 1 < series.length && series[j + 1]) j++;
      let top = '';
      let bottom = '';
      for (let t = i; t <= j; t++) {
        const lo = below[t];
        const hi = lo + (series[t].counts[st] || 0);
        const xa = r1(g.x(t));
        const xb = r1(g.x(t + 1));
        top += (t === i ? 'M' : 'L') + xa + ' ' + r1(g.yl(hi)) + 'L' + xb + ' ' + r1(g.yl(hi));
        bottom = 'L' + xb + ' ' + r1(g.yl(lo)) + 'L' + xa + ' ' + r1(g.yl(lo)) + bottom;
      }
      d += top + bottom + 'Z';
      i = j + 1;
    }
    series.forEach((p, t) => { if (p) below[t] += p.counts[st] || 0; });
    if (d) g.plot.appendChild(s('path', { d, fill: color(st, k), 'fill-opacity': 0.85 }));
  });
}

// ===================================================================
// (b) Create latency, and creates per minute
// ===================================================================

function drawLatency(svg, stats) {
  const ms = stats.minutes || [];
  // p50 is 0 in a minute with no successful create: a gap.
  const p50 = ms.map((m) => (m.create_p50_ms > 0 ? m.create_p50_ms : null));
  const p95 = ms.map((m) => (m.create_p50_ms > 0 ? m.create_p95_ms : null));
  const failed = ms.map((m) => m.create_errors || 0);
  const ok = ms.map((m, i) => Math.max((m.creates || 0) - failed[i], 0));
  const maxMs = Math.max(0, ...p95.map((v) => v || 0), ...p50.map((v) => v || 0));
  const maxCreates = Math.max(0, ...ms.map((m) => m.creates || 0));
  const anyFailed = failed.some((v) => v > 0);
  const legend = [
    { label: 'p50', color: '#0969da', line: true },
    { label: 'p95', color: '#e16f24', line: true },
    { label: 'creates/min', color: '#d0d7e2' },
  ];
  if (anyFailed) legend.push({ label: 'failed', color: '#f4a9a3' });
  const tips = ms.map((m, i) => {
    const at = hm(m.start);
    if (!m.creates) return `${at}: no creates`;
    let t = `${at}: ${plural(m.creates, 'create', 'creates')}`;
    if (failed[i]) t += ` (${failed[i]} failed)`;
    if (p50[i] != null) t += `, p50 ≤ ${fmtMs(p50[i])}, p95 ≤ ${fmtMs(p95[i])}`;
    return t;
  });
  const g = frame(svg, {
    title: 'Create latency',
    legend,
    minutes: ms,
    left: { max: niceMax(maxMs, false), fmt: (v) => (v ? fmtMs(v) : '0') },
    right: { max: niceMax(maxCreates, true), fmt: (v) => String(v) + (v ? '/min' : '') },
    tips,
    empty: maxCreates ? '' : 'No creates in the last hour',
  });
  bars(g, ok, g.yr, '#d0d7e2');
  if (anyFailed) bars(g, failed, g.yr, '#f4a9a3', ok);
  line(g, p50, g.yl, '#0969da');
  line(g, p95, g.yl, '#e16f24');
}

// ===================================================================
// (c) Warm pool hit rate
// ===================================================================

function drawPool(svg, stats) {
  const ms = stats.minutes || [];
  const asked = ms.map((m) => (m.pool_served || 0) + (m.pool_cold || 0));
  const rate = ms.map((m, i) => (asked[i] ? (m.pool_served || 0) / asked[i] : null));
  const maxAsked = Math.max(0, ...asked);
  const tips = ms.map((m, i) => {
    const at = hm(m.start);
    if (!asked[i]) return `${at}: no pool creates`;
    return `${at}: ${m.pool_served || 0} of ${plural(asked[i], 'pool create', 'pool creates')} served ready ` +
      `(${Math.round(rate[i] * 100)}%), ${m.pool_cold || 0} cold`;
  });
  const g = frame(svg, {
    title: 'Warm pool hit rate',
    legend: [
      { label: 'served ready', color: '#2da44e', line: true },
      { label: 'pool creates/min', color: '#d0d7e2' },
    ],
    minutes: ms,
    left: { max: 1, fmt: (v) => Math.round(v * 100) + '%' },
    right: { max: niceMax(maxAsked, true), fmt: (v) => String(v) + (v ? '/min' : '') },
    tips,
    empty: maxAsked ? '' : 'No pool creates in the last hour',
  });
  bars(g, asked, g.yr, '#d0d7e2');
  line(g, rate, g.yl, '#2da44e');
}

// renderCharts draws the three charts from a HostStats.
export function renderCharts(stats) {
  stats = stats || {};
  drawStates(document.getElementById('chart-states'), stats);
  drawLatency(document.getElementById('chart-latency'), stats);
  drawPool(document.getElementById('chart-pool'), stats);
}
