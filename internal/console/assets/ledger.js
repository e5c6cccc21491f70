// The sandbox page's ledger tab (every recorded action, filtered by kind,
// exported as JSON) and network tab (its policy, and the ledger's
// refusals of egress).

import { api, qs, sbPath } from './api.js';
import {
  $, downloadBlob, errText, fmtCmd, fmtDuration, fmtList, fmtMap, fmtTime, on, renderKV, renderTable,
  setText, tableMessage,
} from './ui.js';
import { detail } from './state.js';

const ledger = { entries: [], shown: [], timer: 0 };
const LEDGER_ROWS = 2000;
const LEDGER_PAGE = 5000;
const LEDGER_MAX = 200000;

async function fetchLedger(id) {
  const all = [];
  let after = 0;
  while (all.length < LEDGER_MAX) {
    const page = await api.get(sbPath(id, '/ledger') + qs({ after: after || '', limit: LEDGER_PAGE }));
    const entries = (page && page.entries) || [];
    for (const e of entries) all.push(e);
    if (!page || !page.next || !entries.length) break;
    after = page.next;
  }
  return all;
}

export async function loadLedger() {
  const gen = detail.gen;
  setText($('#ledger-count'), 'loading…');
  try {
    const entries = await fetchLedger(detail.id);
    if (gen !== detail.gen) return;
    ledger.entries = entries;
    renderLedger();
  } catch (e) {
    if (gen === detail.gen) setText($('#ledger-count'), '');
    throw e;
  }
}

function ledgerWhat(e) {
  const parts = [];
  if (e.command && e.command.length) parts.push(fmtCmd(e.command));
  if (e.path) parts.push(e.path);
  if (e.note) parts.push(e.note);
  return parts.join(' · ');
}

function renderLedger() {
  const f = $('#ledger-filter').value.trim().toLowerCase();
  const shown = f ? ledger.entries.filter((e) => (e.kind || '').toLowerCase().includes(f)) : ledger.entries;
  ledger.shown = shown;
  const rows = shown.slice(-LEDGER_ROWS).reverse();
  renderTable($('#ledger'), [
    { h: 'Seq', v: (e) => String(e.seq), cls: 'num' },
    { h: 'At', v: (e) => fmtTime(e.at) },
    { h: 'Kind', v: (e) => e.kind },
    { h: 'Source', v: (e) => e.source || '' },
    { h: 'What', v: (e) => ledgerWhat(e), cls: 'wrap' },
    { h: 'Exit', v: (e) => (e.exit_code == null ? '' : String(e.exit_code)), cls: 'num' },
    { h: 'Took', v: (e) => (e.duration_ms ? (e.duration_ms < 1000 ? e.duration_ms + ' ms' : fmtDuration(e.duration_ms)) : ''), cls: 'num' },
    { h: 'Data', v: (e) => fmtMap(e.data), cls: 'wrap' },
  ], rows, { empty: f ? 'No entry of a matching kind.' : 'The ledger is empty.' });
  let count = `${shown.length} entr${shown.length === 1 ? 'y' : 'ies'}`;
  if (f) count += ` of ${ledger.entries.length}`;
  if (shown.length > LEDGER_ROWS) count += `; the newest ${LEDGER_ROWS} shown`;
  setText($('#ledger-count'), count);
}

function exportLedger() {
  const id = (detail.sb && detail.sb.id) || detail.id;
  const blob = new Blob([JSON.stringify(ledger.shown, null, 2) + '\n'], { type: 'application/json' });
  downloadBlob(blob, `ledger-${id}.json`);
}

export async function loadNetwork() {
  const gen = detail.gen;
  const id = detail.id;
  const [pol, led] = await Promise.allSettled([api.get(sbPath(id, '/network')), fetchLedger(id)]);
  if (gen !== detail.gen) return;
  if (pol.status === 'fulfilled') {
    const p = pol.value || {};
    renderKV($('#network'), [
      ['Mode', p.mode || 'none'],
      ['Allowed hosts', fmtList(p.allow_hosts)],
      ['Denied hosts', fmtList(p.deny_hosts)],
      ['Allowed CIDRs', fmtList(p.allow_cidrs)],
      ['Denied CIDRs', fmtList(p.deny_cidrs)],
      ['Ports', p.ports && p.ports.length ? p.ports.join(', ') : (p.mode === 'egress' ? '80, 443 (default)' : '—')],
      ['Injections', p.inject && p.inject.length
        ? p.inject.map((i) => `${i.host}: ${i.header}: ${i.value}`).join('\n') : '—'],
    ]);
  } else {
    tableMessage($('#network'), errText(pol.reason));
  }
  if (led.status === 'fulfilled') {
    const refusals = led.value.filter((e) => e.kind === 'egress_refused').reverse();
    const d = (e, k) => (e.data && e.data[k]) || '';
    renderTable($('#egress-refusals'), [
      { h: 'At', v: (e) => fmtTime(e.at) },
      { h: 'Host', v: (e) => d(e, 'host') },
      { h: 'Port', v: (e) => d(e, 'port'), cls: 'num' },
      { h: 'Rule', v: (e) => d(e, 'rule') },
      { h: 'Via', v: (e) => d(e, 'via') },
      { h: 'Note', v: (e) => e.note || '' },
    ], refusals, { empty: 'No connection refused.' });
  } else {
    tableMessage($('#egress-refusals'), errText(led.reason));
  }
}

// resetLedger empties the tab for another sandbox.
export function resetLedger() {
  $('#ledger-filter').value = '';
  ledger.entries = [];
  ledger.shown = [];
  setText($('#ledger-count'), '');
}

export function wireLedger() {
  on($('#network-refresh'), 'click', loadNetwork);
  on($('#ledger-filter'), 'input', () => {
    clearTimeout(ledger.timer);
    ledger.timer = setTimeout(renderLedger, 120);
  });
  on($('#ledger-refresh'), 'click', loadLedger);
  on($('#ledger-export'), 'click', exportLedger);
}
