// The sandbox page's files tab: browse, view (text and images), upload,
// download (a directory as a tar), make folders, delete.

import { api, qs, request, sbPath } from './api.js';
import { $, downloadBlob, el, fmtBytes, fmtTime, on, renderTable, setText, show, showNotice } from './ui.js';
import { detail } from './state.js';

const files = { path: '/', seq: 0, entries: new Map(), imageUrl: '' };
const IMAGE_TYPES = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp',
  bmp: 'image/bmp', ico: 'image/x-icon', avif: 'image/avif', svg: 'image/svg+xml',
};
const VIEW_LIMIT = 1 << 20;
const IMAGE_LIMIT = 32 << 20;

function joinPath(dir, name) {
  if (!dir || dir === '.') return name;
  return dir.endsWith('/') ? dir + name : dir + '/' + name;
}

function parentPath(p) {
  const t = (p || '/').replace(/\/+$/, '');
  if (!t) return '/';
  const i = t.lastIndexOf('/');
  if (i < 0) return '.';
  return i === 0 ? '/' : t.slice(0, i);
}

const isDirEntry = (e) => e.type === 'dir';

export async function loadFiles(path) {
  path = (path || '').trim() || '/';
  const seq = ++files.seq;
  const gen = detail.gen;
  const input = $('#files-path');
  const typed = input.value;
  detail.filesLoaded = true;
  const res = await api.get(sbPath(detail.id, '/files/list') + qs({ path }));
  if (seq !== files.seq || gen !== detail.gen) return;
  files.path = path;
  if (input.value === typed) input.value = path; // never over what is being typed
  const entries = ((res && res.entries) || []).slice()
    .sort((a, b) => (isDirEntry(b) - isDirEntry(a)) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  files.entries = new Map(entries.map((e) => [e.name, e]));
  const btn = (action, text, cls) => el('button', { type: 'button', class: 'small' + (cls ? ' ' + cls : ''), 'data-file-action': action }, text);
  renderTable($('#files-list'), [
    {
      h: 'Name',
      v: (e) => (e.type === 'dir' || e.type === 'symlink'
        ? el('button', { type: 'button', class: 'link', 'data-file-action': 'open', title: e.symlink_target || null }, e.name + (e.type === 'dir' ? '/' : ''))
        : e.name),
    },
    { h: 'Type', v: (e) => e.type + (e.symlink_target ? ' → ' + e.symlink_target : '') },
    { h: 'Size', v: (e) => (e.type === 'dir' ? '' : fmtBytes(e.size)), cls: 'num', title: (e) => String(e.size) },
    { h: 'Mode', v: (e) => (e.mode || 0).toString(8).padStart(4, '0'), cls: 'mono' },
    { h: 'Owner', v: (e) => [e.owner, e.group].filter(Boolean).join(':') },
    { h: 'Modified', v: (e) => fmtTime(e.modified_at) },
    {
      h: '',
      cls: 'actions',
      v: (e) => (e.type === 'dir'
        ? [btn('download', 'Download .tar'), btn('delete', 'Delete', 'danger')]
        : [btn('view', 'View'), btn('download', 'Download'), btn('delete', 'Delete', 'danger')]),
    },
  ], entries, { row: (tr, e) => tr.setAttribute('data-name', e.name), empty: 'Empty directory.' });
}

async function onFilesClick(ev) {
  const btn = ev.target.closest('[data-file-action]');
  if (!btn) return;
  const tr = btn.closest('tr[data-name]');
  if (!tr) return;
  const entry = files.entries.get(tr.getAttribute('data-name'));
  if (!entry) return;
  const path = joinPath(files.path, entry.name);
  switch (btn.getAttribute('data-file-action')) {
    case 'open': return loadFiles(path);
    case 'view': return viewFile(entry, path);
    case 'download': return downloadFile(entry, path, btn);
    case 'delete': {
      if (!confirm(`Delete ${path}?`)) return undefined;
      await api.del(sbPath(detail.id, '/files') + qs({ path }));
      return loadFiles(files.path);
    }
    default: return undefined;
  }
}

// readUpTo reads at most max bytes of a response body.
async function readUpTo(res, max) {
  const reader = res.body.getReader();
  const chunks = [];
  let n = 0;
  let truncated = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    chunks.push(value);
    n += value.length;
    if (n > max) {
      truncated = true;
      reader.cancel().catch(() => {});
      break;
    }
  }
  const out = new Uint8Array(Math.min(n, max));
  let off = 0;
  for (const c of chunks) {
    const take = Math.min(c.length, out.length - off);
    out.set(c.subarray(0, take), off);
    off += take;
    if (off >= out.length) break;
  }
  return { bytes: out, truncated };
}

export function revokeImage() {
  if (files.imageUrl) URL.revokeObjectURL(files.imageUrl);
  files.imageUrl = '';
}

function closeViewer() {
  revokeImage();
  const img = $('#file-image');
  img.removeAttribute('src');
  show(img, false);
  $('#file-view').textContent = '';
  show($('#file-view'), false);
  show($('#file-viewer'), false);
}

async function viewFile(entry, path) {
  const gen = detail.gen;
  const ext = (entry.name.match(/\.([A-Za-z0-9]+)$/) || [])[1];
  const imgType = ext ? IMAGE_TYPES[ext.toLowerCase()] : undefined;
  if (imgType && entry.size > IMAGE_LIMIT) throw new Error(`${entry.name} is ${fmtBytes(entry.size)}: too large to show; download it`);
  const res = await api.get(sbPath(detail.id, '/files') + qs({ path }), { raw: true });
  if (gen !== detail.gen) { res.body.cancel().catch(() => {}); return; }
  closeViewer();
  setText($('#file-view-name'), path);
  show($('#file-viewer'), true);
  if (imgType) {
    const blob = await res.blob();
    if (gen !== detail.gen) return;
    files.imageUrl = URL.createObjectURL(new Blob([blob], { type: imgType }));
    const img = $('#file-image');
    img.src = files.imageUrl;
    img.alt = entry.name;
    show(img, true);
    return;
  }
  const { bytes, truncated } = await readUpTo(res, VIEW_LIMIT);
  if (gen !== detail.gen) return;
  const pre = $('#file-view');
  if (bytes.subarray(0, 8192).includes(0)) {
    pre.textContent = `(binary file, ${fmtBytes(entry.size)}: download it to see it)`;
  } else {
    pre.textContent = new TextDecoder().decode(bytes) +
      (truncated ? `\n… (the first ${fmtBytes(VIEW_LIMIT)} of ${fmtBytes(entry.size)})` : '');
  }
  show(pre, true);
}

async function downloadFile(entry, path, btn) {
  const dir = entry.type === 'dir';
  btn.disabled = true;
  try {
    const res = await api.get(sbPath(detail.id, dir ? '/tar' : '/files') + qs({ path }), { raw: true });
    const blob = await res.blob();
    downloadBlob(blob, dir ? entry.name + '.tar' : entry.name);
  } finally {
    btn.disabled = false;
  }
}

async function uploadFiles(ev) {
  const input = ev.target;
  const picked = Array.from(input.files || []);
  input.value = '';
  if (!picked.length) return;
  const dir = files.path;
  const id = detail.id;
  for (const f of picked) {
    await request('PUT', sbPath(id, '/files') + qs({ path: joinPath(dir, f.name) }), { body: f });
  }
  showNotice(`Uploaded ${picked.length === 1 ? picked[0].name : picked.length + ' files'} to ${dir}.`);
  if (detail.id === id && files.path === dir) await loadFiles(dir);
}

async function makeDir() {
  const name = prompt(`New folder in ${files.path}:`, '');
  if (!name || !name.trim()) return;
  await api.post(sbPath(detail.id, '/files/mkdir'), { path: joinPath(files.path, name.trim()) });
  await loadFiles(files.path);
}

// resetFiles empties the tab for another sandbox.
export function resetFiles() {
  $('#files-path').value = '/';
  files.path = '/';
  closeViewer();
}

export function wireFiles() {
  on($('#files-path'), 'keydown', (ev) => {
    if (ev.key !== 'Enter') return undefined;
    ev.preventDefault();
    return loadFiles($('#files-path').value);
  });
  on($('#files-go'), 'click', () => loadFiles($('#files-path').value));
  on($('#files-up'), 'click', () => loadFiles(parentPath(files.path)));
  on($('#files-refresh'), 'click', () => loadFiles(files.path));
  on($('#files-mkdir'), 'click', makeDir);
  on($('#files-upload'), 'change', uploadFiles);
  on($('#files-list'), 'click', onFilesClick);
  on($('#file-view-close'), 'click', closeViewer);
}
