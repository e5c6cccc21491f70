// The host page (#/host): the daemon, images, templates, warm pools,
// snapshots, keys, and the charts of the last hour (charts.js), which
// refresh once a minute while the page is shown.

import { ApiError, api, isAbort, session } from './api.js';
import {
  $, el, errText, fmtBytes, fmtResources, fmtResourcesLong, fmtTime, on, renderKV, renderTable,
  sandboxHref, setText, shortDigest, show, tableMessage,
} from './ui.js';
import { route } from './state.js';
import { applyInfo } from './list.js';
import { renderCharts } from './charts.js';

const host = { gen: 0 };

export function loadHost() {
  const gen = ++host.gen;
  const section = (sel, path, render) => {
    const table = $(sel);
    if (!table.firstChild) tableMessage(table, 'Loading…');
    return api.get(path).then((r) => { if (gen === host.gen) render(table, r); }, (e) => {
      if (gen !== host.gen) return;
      if (sel === '#keys' && e instanceof ApiError && e.status === 403) { show($('#keys-section'), false); return; }
      tableMessage(table, errText(e));
    });
  };
  section('#info', '/v1/info', (t, i) => {
    session.info = i;
    applyInfo(i);
    const d = i.defaults || {};
    renderKV(t, [
      ['Version', i.version],
      ['Runtimes', (i.runtimes || []).map((r) => `${r.name}${r.default ? ' (default)' : ''}: ` +
        (r.available ? `${r.version || 'available'}${r.note ? ' — ' + r.note : ''}` : `unavailable${r.reason ? ' — ' + r.reason : ''}`)).join('\n')],
      ['Sizes', (i.sizes || []).map((s) => `${s.name}: ${fmtResourcesLong(s.resources)}${s.fits === false ? ' (does not fit: ' + (s.reason || '') + ')' : ''}`).join('\n')],
      ['Limits per sandbox', fmtResourcesLong(i.limits)],
      ['Defaults', `image ${d.image || '—'}, runtime ${d.runtime || '—'}, ${fmtResourcesLong(d.resources)}, sleep after ${d.sleep_after || '—'}`],
      ['cgroup layout', i.cgroup_layout],
      ['Egress firewall', i.firewall || 'none (no sandbox networking)'],
      ['Admission policy', i.policy_active ? 'active' : 'none'],
      ['Snapshot store', i.snapshot_store ? fmtBytes(i.snapshot_store.used_bytes) + (i.snapshot_store.limit_bytes ? ' of ' + fmtBytes(i.snapshot_store.limit_bytes) : '') : ''],
      ['Backups to S3', i.backup_s3 ? `${i.backup_s3.endpoint} / ${i.backup_s3.bucket}${i.backup_s3.prefix ? '/' + i.backup_s3.prefix : ''}` : 'not configured'],
    ]);
  });
  // The admission policy: what a create may ask for, and the quotas.
  section('#policy', '/v1/policy', (t, p) => {
    const list = (v) => (v && v.length ? v.join(', ') : 'any');
    const count = (n) => (n ? String(n) : 'no bound');
    renderKV(t, [
      ['Images', list(p.allowed_images)],
      ['Templates', list(p.allowed_templates)],
      ['Runtimes', list(p.allowed_runtimes)],
      ['Largest size', [p.max_size, p.max_resources ? fmtResourcesLong(p.max_resources) : ''].filter(Boolean).join('; ') || 'host limits'],
      ['Longest lifetime', p.max_lifetime || 'no bound'],
      ['Sandboxes per API key', count(p.max_sandboxes_per_key)],
      ['Sandboxes of the unix socket', count(p.max_sandboxes_local)],
      ['Network', p.allow_network ? 'may be asked for' : 'refused'],
    ]);
  });
  section('#images', '/v1/images', (t, r) => renderTable(t, [
    { h: 'Name', v: (x) => x.name || '—' },
    { h: 'Digest', v: (x) => shortDigest(x.digest), cls: 'mono', title: (x) => x.digest },
    { h: 'Size', v: (x) => fmtBytes(x.size_bytes), cls: 'num' },
    { h: 'Layers', v: (x) => (x.layer_count ? String(x.layer_count) : ''), cls: 'num' },
    { h: 'Source', v: (x) => x.source || 'built-in' },
    { h: 'Created', v: (x) => fmtTime(x.created_at) },
  ], (r && r.images) || [], { empty: 'No images.' }));
  section('#templates', '/v1/templates', (t, r) => renderTable(t, [
    { h: 'Name', v: (x) => x.name },
    { h: 'Base', v: (x) => (x.spec && (x.spec.template ? 'template ' + x.spec.template : x.spec.image)) || x.image || '' },
    { h: 'Runtime', v: (x) => (x.spec && x.spec.runtime) || '' },
    { h: 'Steps', v: (x) => String((x.spec && x.spec.steps ? x.spec.steps.length : 0)), cls: 'num' },
    { h: 'Build', v: (x) => (x.build_id || '').slice(0, 12), cls: 'mono' },
    { h: 'Updated', v: (x) => fmtTime(x.updated_at) },
  ], (r && r.templates) || [], { empty: 'No templates.' }));
  section('#pools', '/v1/pools', (t, r) => renderTable(t, [
    { h: 'Name', v: (x) => x.name },
    { h: 'Template', v: (x) => x.template },
    { h: 'Ready', v: (x) => String(x.ready), cls: 'num' },
    { h: 'Starting', v: (x) => String(x.starting), cls: 'num' },
    { h: 'Target', v: (x) => String(x.target) + (x.max_ready ? ` (${x.min_ready}–${x.max_ready})` : ''), cls: 'num' },
    { h: 'Served', v: (x) => String(x.served), cls: 'num' },
    { h: 'Cold', v: (x) => String(x.cold), cls: 'num' },
    { h: 'Size', v: (x) => fmtResources(x.resources) },
    { h: 'Error', v: (x) => x.error || '', cls: 'wrap' },
  ], (r && r.pools) || [], { empty: 'No warm pools.' }));
  section('#snapshots', '/v1/snapshots', (t, r) => renderTable(t, [
    { h: 'ID', v: (x) => x.id, cls: 'mono' },
    { h: 'Name', v: (x) => x.name || '' },
    { h: 'Size', v: (x) => fmtBytes(x.size), cls: 'num' },
    { h: 'Total', v: (x) => fmtBytes(x.size_total), cls: 'num' },
    { h: 'Added', v: (x) => fmtBytes(x.size_added), cls: 'num' },
    { h: 'Memory', v: (x) => (x.memory ? fmtBytes(x.memory_size) : ''), cls: 'num' },
    { h: 'Image', v: (x) => x.image || shortDigest(x.image_digest) },
    { h: 'Sandbox', v: (x) => (x.sandbox ? el('a', { href: sandboxHref(x.sandbox) }, x.sandbox) : 'imported') },
    { h: 'Owner', v: (x) => x.created_by || '' },
    { h: 'Created', v: (x) => fmtTime(x.created_at) },
    { h: 'Expires', v: (x) => (x.expires_at ? fmtTime(x.expires_at) : 'never') },
  ], (r && r.snapshots) || [], { empty: 'No snapshots.' }));
  show($('#keys-section'), true);
  section('#keys', '/v1/keys', (t, r) => renderTable(t, [
    { h: 'ID', v: (x) => x.id, cls: 'mono' },
    { h: 'Name', v: (x) => x.name },
    { h: 'Prefix', v: (x) => x.prefix + '…', cls: 'mono' },
    { h: 'Scope', v: (x) => x.scope },
    { h: 'Created by', v: (x) => x.created_by || '' },
    { h: 'Created', v: (x) => fmtTime(x.created_at) },
  ], (r && r.keys) || [], { empty: 'No keys you may manage.' }));
  loadCharts();
}

// ===================================================================
// Charts: GET /v1/stats when the page opens, on Refresh, and once a
// minute while it is shown (never from a hidden tab: a tab shown again
// after a minute or more catches up at once).
// ===================================================================

const CHARTS_EVERY = 60000;
const charts = { seq: 0, timer: 0, last: 0 };

async function loadCharts() {
  const seq = ++charts.seq;
  charts.last = Date.now();
  clearTimeout(charts.timer);
  charts.timer = setTimeout(chartsTick, CHARTS_EVERY);
  const section = $('#charts');
  try {
    const stats = await api.get('/v1/stats');
    if (seq !== charts.seq) return;
    renderCharts(stats);
    setText($('#charts-status'), 'as of ' + fmtTime(new Date()).slice(11));
    show(section, true);
  } catch (e) {
    if (seq !== charts.seq || isAbort(e)) return;
    if (e instanceof ApiError && (e.status === 403 || e.status === 401)) {
      // Scope own: the host's figures are not this key's to see.
      show(section, false);
      return;
    }
    setText($('#charts-status'), errText(e));
    show(section, true);
  }
}

function chartsTick() {
  charts.timer = 0;
  if (route.view === 'host' && !document.hidden) loadCharts();
}

// leaveHost stops the charts' refresh (another page, or signed out).
export function leaveHost() {
  charts.seq++;
  clearTimeout(charts.timer);
  charts.timer = 0;
}

export function wireHost() {
  on($('#host-refresh'), 'click', loadHost);
  document.addEventListener('visibilitychange', () => {
    if (route.view === 'host' && !document.hidden && Date.now() - charts.last >= CHARTS_EVERY) loadCharts();
  });
}
