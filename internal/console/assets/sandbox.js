// One sandbox (#/sandbox/ID): its header, its tabs and the overview tab.
// The other tabs are terminal.js, files.js, processes.js and ledger.js.

import { ApiError, api, sbPath } from './api.js';
import {
  $, el, errText, fmtMap, fmtResourcesLong, fmtTime, on, renderKV, renderTable, setText, show,
  showError, tableMessage,
} from './ui.js';
import { currentState, detail, store, upsertFromApi } from './state.js';
import { actionButtons, onActionClick } from './list.js';
import { closeTerminal, openTerminalTab } from './terminal.js';
import { loadFiles, resetFiles, revokeImage } from './files.js';
import { loadProcesses, resetProcesses, stopLogFollow } from './processes.js';
import { loadLedger, loadNetwork, resetLedger } from './ledger.js';

const TABS = ['overview', 'terminal', 'files', 'processes', 'network', 'ledger'];

export function enterSandbox(ref) {
  detail.gen++;
  detail.ref = ref;
  const known = store.map.get(ref) || [...store.map.values()].find((s) => s.name === ref);
  detail.id = known ? known.id : ref;
  detail.sb = known || null;
  detail.destroyed = false;
  detail.missing = false;
  detail.filesLoaded = false;
  detail.actionsKey = null;
  resetPanels();
  renderDetailHead();
  selectTab('overview');
  if (!known) fetchDetail(detail.gen);
}

async function fetchDetail(gen) {
  try {
    const sb = await api.get(sbPath(detail.ref));
    if (gen !== detail.gen) return;
    detail.id = sb.id;
    detail.sb = sb;
    upsertFromApi(sb);
    renderDetailHead();
  } catch (e) {
    if (gen !== detail.gen) return;
    if (e instanceof ApiError && e.status === 404) {
      detail.missing = true;
      renderDetailHead();
    } else {
      showError(e);
    }
  }
}

export function leaveSandbox() {
  detail.gen++;
  closeTerminal();
  stopLogFollow();
  clearTimeout(detail.historyTimer);
  revokeImage();
  detail.id = '';
  detail.ref = '';
  detail.sb = null;
}

function resetPanels() {
  for (const t of ['#sandbox-details', '#history', '#previews', '#files-list', '#process-list', '#procs', '#network', '#egress-refusals', '#ledger']) {
    $(t).replaceChildren();
  }
  show($('#preview-created'), false);
  resetFiles();
  resetProcesses();
  resetLedger();
}

export function renderDetailHead() {
  if (store.map.has(detail.id)) detail.sb = store.map.get(detail.id);
  const sb = detail.sb;
  const state = currentState();
  setText($('#sandbox-name'), sb ? sb.name || '(unnamed)' : detail.ref);
  setText($('#sandbox-id'), sb ? sb.id : '');
  const st = $('#sandbox-state');
  setText(st, state || 'loading…');
  st.className = 'state s-' + (state === 'not found' ? 'missing' : state);
  const reason = sb && sb.error_reason && state === 'error' ? sb.error_reason : '';
  setText($('#sandbox-reason'), reason);
  show($('#sandbox-reason'), !!reason);
  const actionsKey = sb && state !== 'destroyed' && state !== 'not found' ? state : '';
  if (actionsKey !== detail.actionsKey) {
    detail.actionsKey = actionsKey;
    $('#sandbox-actions').replaceChildren(...(actionsKey ? actionButtons(actionsKey) : []));
  }
  document.title = (sb && (sb.name || sb.id)) ? `${sb.name || sb.id} · Paddock` : 'Paddock console';
  if (detail.tab === 'overview') renderDetails();
}

// stateChangedHere: the open sandbox changed state; its history follows.
export function stateChangedHere() {
  if (detail.tab !== 'overview') return;
  clearTimeout(detail.historyTimer);
  const gen = detail.gen;
  detail.historyTimer = setTimeout(() => { if (gen === detail.gen) loadHistory().catch(showError); }, 400);
}

function selectTab(tab) {
  detail.tab = tab;
  for (const t of TABS) {
    const b = $('#tab-' + t);
    b.classList.toggle('active', t === tab);
    b.setAttribute('aria-selected', String(t === tab));
    show($('#panel-' + t), t === tab);
  }
  const run = (p) => p.catch(showError);
  switch (tab) {
    case 'overview': renderDetails(); run(loadOverview()); break;
    case 'terminal': run(openTerminalTab()); break;
    case 'files': if (!detail.filesLoaded) run(loadFiles($('#files-path').value)); break;
    case 'processes': run(loadProcesses()); break;
    case 'network': run(loadNetwork()); break;
    case 'ledger': run(loadLedger()); break;
  }
}

// ===================================================================
// Tab: overview
// ===================================================================

function renderDetails() {
  const sb = detail.sb;
  const table = $('#sandbox-details');
  if (!sb) { tableMessage(table, detail.missing ? 'No such sandbox (or not yours).' : 'Loading…'); return; }
  const net = sb.network || { mode: 'none' };
  renderKV(table, [
    ['ID', sb.id],
    ['Name', sb.name],
    ['State', currentState()],
    ['Error', sb.error_reason],
    ['Image', sb.image],
    ['Image digest', sb.image_digest],
    ['Runtime', sb.runtime],
    ['Resources', fmtResourcesLong(sb.resources)],
    ['Labels', fmtMap(sb.labels)],
    ['Environment', sb.env ? Object.keys(sb.env).sort().join(', ') : ''],
    ['Network', net.mode + (net.allow_hosts && net.allow_hosts.length ? ': ' + net.allow_hosts.join(', ') : '')],
    ['Idle policy', sb.keep_alive ? 'keep alive' : (sb.sleep_after ? `${sb.on_idle || 'stop'} after ${sb.sleep_after}` : '')],
    ['Timeout', sb.timeout],
    ['From snapshot', sb.from_snapshot],
    ['Owner', sb.created_by],
    ['Created', fmtTime(sb.created_at)],
    ['Updated', fmtTime(sb.updated_at)],
    ['Last activity', fmtTime(sb.last_activity_at)],
    ['Expires', sb.expires_at ? fmtTime(sb.expires_at) : ''],
  ]);
}

async function loadOverview() {
  await Promise.all([loadHistory().catch(showError), loadPreviews().catch(showError)]);
}

async function loadHistory() {
  const gen = detail.gen;
  const h = await api.get(sbPath(detail.id, '/history'));
  if (gen !== detail.gen) return;
  const changes = ((h && h.changes) || []).slice().reverse();
  renderTable($('#history'), [
    { h: 'At', v: (c) => fmtTime(c.at) },
    { h: 'From', v: (c) => c.from || '—' },
    { h: 'To', v: (c) => el('span', { class: 'state s-' + c.to }, c.to) },
    { h: 'Reason', v: (c) => c.reason || '' },
  ], changes, { empty: 'No state changes recorded.' });
}

async function loadPreviews() {
  const gen = detail.gen;
  const table = $('#previews');
  try {
    const p = await api.get(sbPath(detail.id, '/previews'));
    if (gen !== detail.gen) return;
    renderTable(table, [
      { h: 'Port', v: (x) => String(x.port), cls: 'num' },
      { h: 'Exposed', v: (x) => fmtTime(x.created_at) },
      { h: '', v: (x) => el('button', { type: 'button', class: 'small danger', 'data-port': x.port }, 'Revoke') },
    ], (p && p.previews) || [], { empty: 'No ports exposed.' });
  } catch (e) {
    if (gen === detail.gen) tableMessage(table, errText(e));
  }
}

async function exposePort(ev) {
  ev.preventDefault();
  const input = ev.target.elements.namedItem('port');
  const port = parseInt(input.value, 10);
  if (!(port >= 1 && port <= 65535)) throw new Error('port: want 1 to 65535');
  const p = await api.post(sbPath(detail.id, '/previews'), { port });
  input.value = '';
  const out = $('#preview-created');
  out.textContent = `Port ${p.port} exposed. The token is shown only now:\n` +
    (p.url ? `URL:      ${p.url}\n` : '') +
    (p.path_url ? `Path URL: ${p.path_url}\n` : '') +
    (p.token ? `Token:    ${p.token}\n` : '');
  show(out, true);
  await loadPreviews();
}

async function revokePreview(ev) {
  const btn = ev.target.closest('[data-port]');
  if (!btn) return;
  const port = btn.getAttribute('data-port');
  if (!confirm(`Revoke the preview of port ${port}?`)) return;
  await api.del(sbPath(detail.id, '/previews/' + encodeURIComponent(port)));
  await loadPreviews();
}

export function wireSandbox() {
  on($('#sandbox-actions'), 'click', (ev) => onActionClick(ev, () => (detail.sb && detail.sb.id) || detail.id));
  for (const t of TABS) on($('#tab-' + t), 'click', () => selectTab(t));
  on($('#history-refresh'), 'click', loadHistory);
  on($('#preview-form'), 'submit', exposePort);
  on($('#previews'), 'click', revokePreview);
}
