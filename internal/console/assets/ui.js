// DOM helpers, formatting, tables, and feedback (the error banner and
// notices).
//
// Everything the API returns is untrusted (sandbox names, labels, file
// names and contents may hold HTML), so the DOM is built with
// createElement and textContent only, never innerHTML.

import { ApiError, isAbort } from './api.js';

export const $ = (sel, root = document) => root.querySelector(sel);

// el builds an element: attrs "class" and "text" are special, every
// other key is set as an attribute (null/false skip it, true sets "").
export function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') n.className = v;
      else if (k === 'text') n.textContent = v;
      else n.setAttribute(k, v === true ? '' : String(v));
    }
  }
  return append(n, children);
}

export function append(n, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(n, c);
    else if (c instanceof Node) n.appendChild(c);
    else n.appendChild(document.createTextNode(String(c)));
  }
  return n;
}

export function show(node, on) { if (node) node.hidden = !on; }

export function setText(node, s) {
  s = s == null ? '' : String(s);
  if (node && node.textContent !== s) node.textContent = s;
}

export const sandboxHref = (id) => '#/sandbox/' + encodeURIComponent(id);

// ===================================================================
// Formatting
// ===================================================================

export function validTime(t) {
  if (!t) return null;
  const d = new Date(t);
  if (isNaN(d.getTime()) || d.getUTCFullYear() < 1971) return null; // Go's zero time
  return d;
}

export const pad2 = (n) => String(n).padStart(2, '0');

export function fmtTime(t) {
  const d = validTime(t);
  if (!d) return '—';
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
    `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

export function fmtDuration(ms) {
  let s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm';
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h' + (m % 60 ? ' ' + (m % 60) + 'm' : '');
  return Math.floor(h / 24) + 'd';
}

export function fmtAgo(t, now) {
  const d = validTime(t);
  return d ? fmtDuration(now - d.getTime()) : '—';
}

export function fmtBytes(n) {
  if (n == null || isNaN(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + ' ' + units[i];
}

function fmtMiB(mb) {
  if (!mb) return '';
  if (mb >= 1024) return (mb % 1024 === 0 ? mb / 1024 : (mb / 1024).toFixed(1)) + ' GiB';
  return mb + ' MiB';
}

export function fmtResources(r) {
  if (!r) return '';
  const parts = [];
  if (r.cpu) parts.push(r.cpu + ' CPU');
  if (r.memory_mb) parts.push(fmtMiB(r.memory_mb));
  return parts.join(' · ');
}

export function fmtResourcesLong(r) {
  if (!r) return '';
  const parts = [];
  if (r.cpu) parts.push(r.cpu + ' vCPU');
  if (r.memory_mb) parts.push(fmtMiB(r.memory_mb) + ' memory');
  if (r.disk_mb) parts.push(fmtMiB(r.disk_mb) + ' disk');
  if (r.pids) parts.push(r.pids + ' pids');
  return parts.join(', ') || '—';
}

export function shortDigest(d) {
  if (!d) return '';
  const i = d.indexOf(':');
  return d.slice(0, i + 1 + 12);
}

export function fmtMap(m) {
  if (!m) return '';
  return Object.keys(m).sort().map((k) => k + '=' + m[k]).join(', ');
}

export function fmtList(a) { return a && a.length ? a.join(', ') : '—'; }

export function fmtCmd(cmd) {
  if (!cmd || !cmd.length) return '';
  return cmd.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : JSON.stringify(w))).join(' ');
}

// parseKV reads "k=v, k=v" into an object.
export function parseKV(s) {
  const out = {};
  for (const part of s.split(',')) {
    const t = part.trim();
    if (!t) continue;
    const i = t.indexOf('=');
    if (i <= 0) throw new Error(`label "${t}": want key=value`);
    out[t.slice(0, i).trim()] = t.slice(i + 1).trim();
  }
  return out;
}

export const splitList = (s) => s.split(/[\s,]+/).filter(Boolean);

export function b64bytes(s) {
  if (!s) return new Uint8Array(0);
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// downloadBlob saves a blob through a temporary <a download>.
export function downloadBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = el('a', { href: url, download: name || 'download' });
  a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// ===================================================================
// Tables
// ===================================================================

// renderTable replaces a table's content: cols are {h, v(item), cls};
// v may return a string or a Node.
export function renderTable(table, cols, items, opts = {}) {
  const head = el('thead', null, el('tr', null, cols.map((c) => el('th', { class: c.cls || null }, c.h))));
  const body = el('tbody');
  for (const it of items) {
    const tr = el('tr');
    if (opts.row) opts.row(tr, it);
    for (const c of cols) {
      const v = c.v(it);
      tr.appendChild(el('td', { class: c.cls || null, title: c.title ? c.title(it) : null }, v));
    }
    body.appendChild(tr);
  }
  if (!items.length) {
    body.appendChild(el('tr', { class: 'empty' }, el('td', { colspan: cols.length }, opts.empty || 'Nothing here.')));
  }
  table.replaceChildren(head, body);
}

// renderKV fills a two-column table of [label, value] pairs.
export function renderKV(table, pairs) {
  const body = el('tbody');
  for (const [k, v] of pairs) {
    body.appendChild(el('tr', null, el('th', null, k), el('td', { class: 'wrap' }, v == null || v === '' ? '—' : v)));
  }
  table.replaceChildren(body);
}

// tableMessage shows one line (an error, "loading…") in place of a table's rows.
export function tableMessage(table, msg) {
  table.replaceChildren(el('tbody', null, el('tr', { class: 'empty' }, el('td', null, msg))));
}

// ===================================================================
// Feedback: the error banner and notices
// ===================================================================

export function errText(e) {
  if (!e) return '';
  if (e instanceof ApiError) return e.message + (e.code && e.code !== 'network' ? ` (${e.code})` : '');
  return e.message || String(e);
}

let errorTimer = 0;
let noticeTimer = 0;

export function showError(e) {
  if (!e || isAbort(e)) return;
  if (e instanceof ApiError && e.status === 401) return; // back at sign-in already
  setText($('#error-text'), errText(e));
  show($('#error-banner'), true);
  clearTimeout(errorTimer);
  errorTimer = setTimeout(() => show($('#error-banner'), false), 15000);
}

export function showNotice(msg) {
  setText($('#notice-text'), msg);
  show($('#notice'), true);
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => show($('#notice'), false), 10000);
}

// guard wraps an event handler: a thrown error or a rejected promise
// goes to the banner, never to the console.
export function guard(fn) {
  return function (...args) {
    try {
      const r = fn.apply(this, args);
      if (r && typeof r.catch === 'function') r.catch(showError);
    } catch (e) {
      showError(e);
    }
  };
}

export const on = (node, type, fn) => node.addEventListener(type, guard(fn));
