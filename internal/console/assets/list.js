// The sandbox list (#/): its rows from the store, filters, the actions
// on a sandbox (also the sandbox page's), and the create form.

import { api, isAbort, sbPath, session } from './api.js';
import {
  $, el, errText, fmtAgo, fmtBytes, fmtMap, fmtResources, fmtTime, on, parseKV, sandboxHref,
  setText, shortDigest, show, showNotice, splitList,
} from './ui.js';
import { changedAll, detail, navigate, removeSandbox, route, store, upsertFromApi } from './state.js';

// ===================================================================
// Actions
// ===================================================================

const ACTIONS_BY_STATE = {
  creating: ['rm'],
  running: ['stop', 'pause', 'snapshot', 'fork', 'rm'],
  paused: ['resume', 'stop', 'snapshot', 'fork', 'rm'],
  hibernating: ['rm'],
  hibernated: ['resume', 'stop', 'snapshot', 'fork', 'rm'],
  stopping: ['rm'],
  stopped: ['start', 'snapshot', 'fork', 'rm'],
  error: ['start', 'rm'],
  destroying: [],
  destroyed: [],
};
const ACTION_LABELS = {
  stop: 'Stop', start: 'Start', pause: 'Pause', resume: 'Resume',
  snapshot: 'Snapshot', fork: 'Fork', rm: 'Remove',
};
const ACTION_TITLES = {
  stop: 'Stop the compute; files are kept',
  start: 'Start it again',
  pause: 'Freeze it; memory and processes are kept',
  resume: 'Resume where it was',
  snapshot: 'Take a snapshot of its files',
  fork: 'Make copies of it',
  rm: 'Remove it and its files',
};

export function actionButtons(state) {
  const actions = ACTIONS_BY_STATE[state] || ['rm'];
  return actions.map((a) => el('button', {
    type: 'button', 'data-action': a, class: a === 'rm' ? 'danger' : null, title: ACTION_TITLES[a],
  }, ACTION_LABELS[a]));
}

async function runAction(id, action, btn) {
  const sb = store.map.get(id) || (detail.sb && detail.sb.id === id ? detail.sb : null);
  const label = sb && sb.name ? `${sb.name} (${id})` : id;
  const p = sbPath(id);
  if (btn) btn.disabled = true;
  try {
    switch (action) {
      case 'stop':
      case 'start':
      case 'pause':
      case 'resume':
        upsertFromApi(await api.post(p + '/' + action));
        break;
      case 'snapshot': {
        const name = prompt(`Snapshot of ${label}: a name (optional)`, '');
        if (name === null) return;
        const snap = await api.post(p + '/snapshots', name.trim() ? { name: name.trim() } : undefined);
        showNotice(`Snapshot ${snap.name || snap.id} taken of ${label} (${fmtBytes(snap.size)}).`);
        break;
      }
      case 'fork': {
        const n = prompt(`Fork ${label}: how many copies?`, '1');
        if (n === null) return;
        const count = n.trim() === '' ? 1 : Number(n.trim());
        if (!Number.isInteger(count) || count < 1 || count > 64) throw new Error('fork: want 1 to 64 copies');
        const res = await api.post(p + '/fork', { count });
        const made = (res && res.sandboxes) || [];
        made.forEach(upsertFromApi);
        showNotice(`Forked ${label} into ${made.map((s) => s.name || s.id).join(', ') || 'nothing'}.`);
        break;
      }
      case 'rm': {
        if (!confirm(`Remove sandbox ${label}? Its files are deleted.`)) return;
        await api.del(p);
        removeSandbox(id);
        if (route.view === 'sandbox' && detail.id === id) navigate('#/');
        break;
      }
      default:
        throw new Error('unknown action ' + action);
    }
  } finally {
    if (btn && btn.isConnected) btn.disabled = false;
  }
}

// onActionClick runs the action of a clicked [data-action] button on the
// sandbox idOf(button) names.
export function onActionClick(ev, idOf) {
  const btn = ev.target.closest('[data-action]');
  if (!btn) return undefined;
  const id = idOf(btn);
  if (!id) return undefined;
  return runAction(id, btn.getAttribute('data-action'), btn);
}

// ===================================================================
// The list
// ===================================================================

const list = { rows: new Map(), statesKey: '' };
const LIST_COLS = ['name', 'id', 'state', 'image', 'runtime', 'size', 'cpu', 'memory', 'owner', 'age', 'idle', 'labels'];

function makeRow(id) {
  const tr = el('tr', { 'data-sandbox-id': id });
  const cells = {};
  for (const c of LIST_COLS) {
    cells[c] = el('td', { class: c });
    tr.appendChild(cells[c]);
  }
  cells.name.appendChild(el('a', { href: sandboxHref(id) }));
  cells.id.appendChild(el('a', { href: sandboxHref(id) }, id));
  cells.actions = el('td', { class: 'actions' });
  tr.appendChild(cells.actions);
  return { tr, cells, vals: {} };
}

function setCell(row, key, text, title) {
  if (row.vals[key] === text) return;
  row.vals[key] = text;
  const target = key === 'name' ? row.cells.name.firstChild : row.cells[key];
  target.textContent = text;
  if (title !== undefined) row.cells[key].title = title;
}

function updateRow(row, sb, now) {
  setCell(row, 'name', sb.name || '—');
  if (row.vals.state !== sb.state) {
    setCell(row, 'state', sb.state);
    row.cells.state.className = 'state s-' + sb.state;
    row.cells.state.title = sb.error_reason || '';
  }
  setCell(row, 'image', sb.image || shortDigest(sb.image_digest), sb.image_digest || '');
  setCell(row, 'runtime', sb.runtime || '');
  setCell(row, 'size', fmtResources(sb.resources));
  // CPU and memory now: the stream's usage samples (running and paused
  // sandboxes only; a sandbox's first sample has no CPU figure yet).
  const u = (sb.state === 'running' || sb.state === 'paused') ? store.usage.get(sb.id) : null;
  setCell(row, 'cpu', u && u.cpu_percent !== undefined ? u.cpu_percent.toFixed(1) + '%' : '—');
  setCell(row, 'memory', u ? fmtBytes(u.memory_bytes) : '—',
    u && u.memory_limit_bytes ? 'of ' + fmtBytes(u.memory_limit_bytes) : '');
  setCell(row, 'owner', sb.created_by || '');
  setCell(row, 'age', fmtAgo(sb.created_at, now), fmtTime(sb.created_at));
  setCell(row, 'idle', fmtAgo(sb.last_activity_at, now), fmtTime(sb.last_activity_at));
  const labels = fmtMap(sb.labels);
  setCell(row, 'labels', labels, labels);
  if (row.vals.actions !== sb.state) {
    row.vals.actions = sb.state;
    row.cells.actions.replaceChildren(...actionButtons(sb.state));
  }
}

function readFilters() {
  const labels = [];
  for (const part of $('#filter-label').value.split(',')) {
    const t = part.trim();
    if (!t) continue;
    const i = t.indexOf('=');
    labels.push(i < 0 ? [t, null] : [t.slice(0, i).trim(), t.slice(i + 1).trim()]);
  }
  return {
    labels,
    state: $('#filter-state').value,
    owner: $('#filter-owner').value.trim().toLowerCase(),
  };
}

function matches(sb, f) {
  if (f.state && sb.state !== f.state) return false;
  if (f.owner && !(sb.created_by || '').toLowerCase().includes(f.owner)) return false;
  for (const [k, v] of f.labels) {
    const has = sb.labels && Object.prototype.hasOwnProperty.call(sb.labels, k);
    if (!has) return false;
    if (v !== null && sb.labels[k] !== v) return false;
  }
  return true;
}

const byNewest = (a, b) => {
  const ta = a.created_at || '';
  const tb = b.created_at || '';
  if (ta !== tb) return ta < tb ? 1 : -1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
};

function updateStateOptions() {
  const states = new Set();
  for (const sb of store.map.values()) states.add(sb.state);
  const sel = $('#filter-state');
  if (sel.value) states.add(sel.value);
  const sorted = [...states].sort();
  const key = sorted.join(',');
  if (key === list.statesKey) return;
  list.statesKey = key;
  const cur = sel.value;
  sel.replaceChildren(el('option', { value: '' }, 'all states'), ...sorted.map((s) => el('option', { value: s }, s)));
  sel.value = cur;
}

// renderList brings the table in line with the store: rows are kept per
// id and only changed cells are written; rows move only when out of place.
export function renderList() {
  const tbody = $('#sandbox-list tbody');
  const f = readFilters();
  const now = Date.now();
  updateStateOptions();
  for (const [id, row] of list.rows) {
    if (!store.map.has(id)) {
      row.tr.remove();
      list.rows.delete(id);
    }
  }
  const visible = [];
  for (const sb of store.map.values()) if (matches(sb, f)) visible.push(sb);
  visible.sort(byNewest);
  let cursor = tbody.firstChild;
  for (const sb of visible) {
    let row = list.rows.get(sb.id);
    if (!row) {
      row = makeRow(sb.id);
      list.rows.set(sb.id, row);
    }
    updateRow(row, sb, now);
    if (row.tr === cursor) cursor = cursor.nextSibling;
    else tbody.insertBefore(row.tr, cursor);
  }
  while (cursor) { // filtered out: detached, kept for later
    const next = cursor.nextSibling;
    cursor.remove();
    cursor = next;
  }
  setText($('#sandbox-count'), visible.length);
  const total = store.map.size;
  setText($('#sandbox-total'), visible.length !== total ? ` of ${total}` : '');
  const empty = $('#sandbox-empty');
  if (!store.synced) setText(empty, 'Loading…');
  else if (!total) setText(empty, 'No sandboxes yet: create one with New sandbox.');
  else setText(empty, 'No sandbox matches the filters.');
  show(empty, visible.length === 0);
}

// clearList drops every row (the session ended).
export function clearList() {
  for (const row of list.rows.values()) row.tr.remove();
  list.rows.clear();
}

// ===================================================================
// Create form
// ===================================================================

async function openCreate() {
  const form = $('#create-form');
  show(form, true);
  form.elements.namedItem('image').focus();
  fillRuntimeAndSizes();
  // Suggestions for the sources; a failure only leaves a list empty.
  const fill = (sel, path, listKey, label) => api.get(path).then((r) => {
    $(sel).replaceChildren(...((r && r[listKey]) || []).map((x) => el('option', { value: label(x) })));
  }, () => {});
  fill('#dl-images', '/v1/images', 'images', (x) => x.name || x.digest);
  fill('#dl-templates', '/v1/templates', 'templates', (x) => x.name);
  fill('#dl-pools', '/v1/pools', 'pools', (x) => x.name);
  fill('#dl-snapshots', '/v1/snapshots', 'snapshots', (x) => x.name || x.id);
}

function fillRuntimeAndSizes() {
  const form = $('#create-form');
  const info = session.info || {};
  const rt = form.elements.namedItem('runtime');
  const cur = rt.value;
  let runtimes = (info.runtimes || []).filter((r) => r.available !== false);
  if (!info.runtimes) runtimes = [{ name: 'runc' }, { name: 'gvisor' }];
  rt.replaceChildren(el('option', { value: '' }, 'default'),
    ...runtimes.map((r) => el('option', { value: r.name }, r.name + (r.default ? ' (default)' : ''))));
  rt.value = cur;
  const size = form.elements.namedItem('size');
  const curSize = size.value;
  size.replaceChildren(el('option', { value: '' }, 'default'),
    ...(info.sizes || []).map((s) => el('option', {
      value: s.name, disabled: s.fits === false, title: s.reason || null,
    }, `${s.name} (${fmtResources(s.resources)})`)));
  size.value = curSize;
}

// applyInfo shows what GET /v1/info said: the version in the top bar,
// the defaults, runtimes and sizes in the create form.
export function applyInfo(info) {
  setText($('#daemon-version'), info && info.version ? 'paddock ' + info.version : '');
  const d = (info && info.defaults) || {};
  $('#create-form').elements.namedItem('image').placeholder = d.image ? `default (${d.image})` : 'default';
  fillRuntimeAndSizes();
}

function closeCreate() {
  const form = $('#create-form');
  form.reset();
  show(form, false);
  setText($('#create-status'), '');
}

async function submitCreate(ev) {
  ev.preventDefault();
  const form = $('#create-form');
  if ($('#create-submit').disabled) return; // a create is under way
  setText($('#create-status'), '');
  const val = (n) => (form.elements.namedItem(n).value || '').trim();
  const req = {};
  const sources = ['image', 'template', 'pool', 'snapshot'].filter((n) => val(n));
  if (sources.length > 1) throw new Error('Choose one source: an image, a template, a pool or a snapshot (not ' + sources.join(' and ') + ').');
  if (val('image')) req.image = val('image');
  if (val('template')) req.template = val('template');
  if (val('pool')) req.pool = val('pool');
  if (val('snapshot')) req.from_snapshot = val('snapshot');
  if (val('name')) req.name = val('name');
  if (val('runtime')) req.runtime = val('runtime');
  if (val('size')) req.size = val('size');
  const resources = {};
  if (val('cpus')) {
    const cpu = Number(val('cpus'));
    if (!(cpu > 0)) throw new Error('CPUs: want a number above 0');
    resources.cpu = cpu;
  }
  if (val('memory_mb')) {
    const mem = Number(val('memory_mb'));
    if (!(mem > 0) || !Number.isInteger(mem)) throw new Error('Memory: want a whole number of MiB');
    resources.memory_mb = mem;
  }
  if (Object.keys(resources).length) req.resources = resources;
  const mode = val('network');
  const hosts = splitList(val('allow_hosts'));
  if (hosts.length && mode !== 'egress') throw new Error('Allowed hosts need network mode egress.');
  if (mode) {
    req.network = { mode };
    if (hosts.length) req.network.allow_hosts = hosts;
  }
  if (val('labels')) req.labels = parseKV(val('labels'));
  if (val('sleep_after')) req.sleep_after = val('sleep_after');
  if (val('timeout')) req.timeout = val('timeout');

  const btn = $('#create-submit');
  btn.disabled = true;
  setText($('#create-status'), 'Creating…');
  try {
    const sb = await api.post('/v1/sandboxes', req);
    upsertFromApi(sb);
    closeCreate();
    navigate(sandboxHref(sb.id));
  } catch (e) {
    setText($('#create-status'), isAbort(e) ? '' : errText(e));
    throw e;
  } finally {
    btn.disabled = false;
  }
}

export function wireList() {
  for (const id of ['#filter-label', '#filter-owner']) on($(id), 'input', changedAll);
  on($('#filter-state'), 'change', changedAll);
  on($('#sandbox-list'), 'click', (ev) => onActionClick(ev, (btn) => {
    const tr = btn.closest('tr[data-sandbox-id]');
    return tr && tr.getAttribute('data-sandbox-id');
  }));
  on($('#create-open'), 'click', openCreate);
  on($('#create-cancel'), 'click', closeCreate);
  on($('#create-form'), 'submit', submitCreate);
}
