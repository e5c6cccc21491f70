// Paddock web console: one page over the daemon's /v1 API.
//
// Plain modern JavaScript, no framework, no build step. The page is served
// under a strict Content-Security-Policy: no inline script, no eval, no
// other origin. Everything the API returns is untrusted (sandbox names,
// labels, file names and contents may hold HTML), so the DOM is built with
// createElement and textContent only, never innerHTML.
//
// The API key lives in sessionStorage ("paddock.key") and nowhere else. The
// sandbox list comes from GET /v1/events (a sync, then changes), never from
// polling.
'use strict';

(() => {
  // ===================================================================
  // Utilities
  // ===================================================================

  const $ = (sel, root = document) => root.querySelector(sel);

  // el builds an element: attrs "class" and "text" are special, every
  // other key is set as an attribute (null/false skip it, true sets "").
  function el(tag, attrs, ...children) {
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

  function append(n, children) {
    for (const c of children) {
      if (c == null || c === false) continue;
      if (Array.isArray(c)) append(n, c);
      else if (c instanceof Node) n.appendChild(c);
      else n.appendChild(document.createTextNode(String(c)));
    }
    return n;
  }

  function show(node, on) { if (node) node.hidden = !on; }

  function setText(node, s) {
    s = s == null ? '' : String(s);
    if (node && node.textContent !== s) node.textContent = s;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const isAbort = (e) => !!e && e.name === 'AbortError';

  // qs makes a query string; empty values are left out, arrays repeat.
  function qs(params) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v == null || v === '') continue;
      if (Array.isArray(v)) v.forEach((x) => p.append(k, String(x)));
      else p.set(k, String(v));
    }
    const s = p.toString();
    return s ? '?' + s : '';
  }

  function validTime(t) {
    if (!t) return null;
    const d = new Date(t);
    if (isNaN(d.getTime()) || d.getUTCFullYear() < 1971) return null; // Go's zero time
    return d;
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  function fmtTime(t) {
    const d = validTime(t);
    if (!d) return '—';
    return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
      `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function fmtDuration(ms) {
    let s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h' + (m % 60 ? ' ' + (m % 60) + 'm' : '');
    return Math.floor(h / 24) + 'd';
  }

  function fmtAgo(t, now) {
    const d = validTime(t);
    return d ? fmtDuration(now - d.getTime()) : '—';
  }

  function fmtBytes(n) {
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

  function fmtResources(r) {
    if (!r) return '';
    const parts = [];
    if (r.cpu) parts.push(r.cpu + ' CPU');
    if (r.memory_mb) parts.push(fmtMiB(r.memory_mb));
    return parts.join(' · ');
  }

  function fmtResourcesLong(r) {
    if (!r) return '';
    const parts = [];
    if (r.cpu) parts.push(r.cpu + ' vCPU');
    if (r.memory_mb) parts.push(fmtMiB(r.memory_mb) + ' memory');
    if (r.disk_mb) parts.push(fmtMiB(r.disk_mb) + ' disk');
    if (r.pids) parts.push(r.pids + ' pids');
    return parts.join(', ') || '—';
  }

  function shortDigest(d) {
    if (!d) return '';
    const i = d.indexOf(':');
    return d.slice(0, i + 1 + 12);
  }

  function fmtMap(m) {
    if (!m) return '';
    return Object.keys(m).sort().map((k) => k + '=' + m[k]).join(', ');
  }

  function fmtList(a) { return a && a.length ? a.join(', ') : '—'; }

  function fmtCmd(cmd) {
    if (!cmd || !cmd.length) return '';
    return cmd.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : JSON.stringify(w))).join(' ');
  }

  // parseKV reads "k=v, k=v" into an object.
  function parseKV(s) {
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

  const splitList = (s) => s.split(/[\s,]+/).filter(Boolean);

  function b64bytes(s) {
    if (!s) return new Uint8Array(0);
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // downloadBlob saves a blob through a temporary <a download>.
  function downloadBlob(blob, name) {
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: name || 'download' });
    a.hidden = true;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // renderTable replaces a table's content: cols are {h, v(item), cls};
  // v may return a string or a Node.
  function renderTable(table, cols, items, opts = {}) {
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
  function renderKV(table, pairs) {
    const body = el('tbody');
    for (const [k, v] of pairs) {
      body.appendChild(el('tr', null, el('th', null, k), el('td', { class: 'wrap' }, v == null || v === '' ? '—' : v)));
    }
    table.replaceChildren(body);
  }

  // tableMessage shows one line (an error, "loading…") in place of a table's rows.
  function tableMessage(table, msg) {
    table.replaceChildren(el('tbody', null, el('tr', { class: 'empty' }, el('td', null, msg))));
  }

  function errText(e) {
    if (!e) return '';
    if (e instanceof ApiError) return e.message + (e.code && e.code !== 'network' ? ` (${e.code})` : '');
    return e.message || String(e);
  }

  // ===================================================================
  // API key and requests
  // ===================================================================

  const KEY_ITEM = 'paddock.key';
  const session = { key: '', info: null };

  function loadKey() {
    try { return sessionStorage.getItem(KEY_ITEM) || ''; } catch (e) { return ''; }
  }

  function saveKey(k) {
    session.key = k || '';
    try {
      if (k) sessionStorage.setItem(KEY_ITEM, k);
      else sessionStorage.removeItem(KEY_ITEM);
    } catch (e) { /* storage refused: the key lives in memory for this page */ }
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message || code || 'HTTP ' + status);
      this.name = 'ApiError';
      this.status = status;
      this.code = code || '';
    }
  }

  async function errorFrom(res) {
    let code = '';
    let message = '';
    try {
      const text = await res.text();
      try {
        const j = JSON.parse(text);
        code = j.code || '';
        message = j.message || '';
      } catch (e) {
        message = text.trim().slice(0, 500);
      }
    } catch (e) { /* no body */ }
    return new ApiError(res.status, code, message || `${res.status} ${res.statusText}`);
  }

  // request calls the API with the session's key (or opts.key, for the
  // sign-in check, which handles its own 401). opts: json (a body to send
  // as JSON), body (raw), signal, raw (return the Response).
  async function request(method, path, opts = {}) {
    const key = opts.key != null ? opts.key : session.key;
    const headers = { Authorization: 'Bearer ' + key };
    let body;
    if (opts.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/octet-stream';
      body = opts.body;
    }
    let res;
    try {
      res = await fetch(path, { method, headers, body, signal: opts.signal, cache: 'no-store' });
    } catch (e) {
      if (isAbort(e)) throw e;
      throw new ApiError(0, 'network', 'cannot reach the daemon: ' + (e.message || e));
    }
    if (!res.ok) {
      const err = await errorFrom(res);
      if (res.status === 401 && opts.key == null) unauthorized(err);
      throw err;
    }
    if (opts.raw) return res;
    if (res.status === 204) return null;
    const ct = res.headers.get('Content-Type') || '';
    return ct.startsWith('application/json') ? res.json() : res.text();
  }

  const api = {
    get: (path, opts) => request('GET', path, opts),
    post: (path, json, opts = {}) => request('POST', path, Object.assign({}, opts, { json })),
    put: (path, json, opts = {}) => request('PUT', path, Object.assign({}, opts, { json })),
    del: (path, opts) => request('DELETE', path, opts),
  };

  const sbPath = (id, rest = '') => '/v1/sandboxes/' + encodeURIComponent(id) + rest;
  const sandboxHref = (id) => '#/sandbox/' + encodeURIComponent(id);

  // readLines reads a streamed body line by line (NDJSON).
  async function readLines(res, onLine, onChunk) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (onChunk) onChunk();
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i).trim();
          buf = buf.slice(i + 1);
          if (line) onLine(line);
        }
      }
      buf += dec.decode();
      if (buf.trim()) onLine(buf.trim());
    } finally {
      try { reader.releaseLock(); } catch (e) { /* already released */ }
    }
  }

  function readNDJSON(res, onObject, onChunk) {
    return readLines(res, (line) => {
      let obj;
      try { obj = JSON.parse(line); } catch (e) { return; }
      onObject(obj);
    }, onChunk);
  }

  // ===================================================================
  // Feedback: the error banner and notices
  // ===================================================================

  let errorTimer = 0;
  let noticeTimer = 0;

  function showError(e) {
    if (!e || isAbort(e)) return;
    if (e instanceof ApiError && e.status === 401) return; // back at sign-in already
    setText($('#error-text'), errText(e));
    show($('#error-banner'), true);
    clearTimeout(errorTimer);
    errorTimer = setTimeout(() => show($('#error-banner'), false), 15000);
  }

  function showNotice(msg) {
    setText($('#notice-text'), msg);
    show($('#notice'), true);
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => show($('#notice'), false), 10000);
  }

  // guard wraps an event handler: a thrown error or a rejected promise
  // goes to the banner, never to the console.
  function guard(fn) {
    return function (...args) {
      try {
        const r = fn.apply(this, args);
        if (r && typeof r.catch === 'function') r.catch(showError);
      } catch (e) {
        showError(e);
      }
    };
  }

  const on = (node, type, fn) => node.addEventListener(type, guard(fn));

  // ===================================================================
  // Sandboxes store, fed by the event stream
  // ===================================================================

  const store = {
    map: new Map(), // id -> api.Sandbox
    gone: new Set(), // ids removed since the last sync (late events are ignored)
    synced: false,
  };

  const dirty = { all: false, ids: new Set() };
  let renderPending = false;

  function changed(id) { dirty.ids.add(id); scheduleRender(); }
  function changedAll() { dirty.all = true; scheduleRender(); }

  // scheduleRender renders at most once per animation frame (and still
  // renders, later, in a background tab, where frames stop).
  function scheduleRender() {
    if (renderPending) return;
    renderPending = true;
    requestAnimationFrame(flushRender);
    setTimeout(flushRender, 250);
  }

  function flushRender() {
    if (!renderPending) return;
    renderPending = false;
    const all = dirty.all;
    const ids = dirty.ids;
    dirty.all = false;
    dirty.ids = new Set();
    if (route.view === 'sandboxes') renderList();
    if (route.view === 'sandbox' && (all || ids.has(detail.id))) renderDetailHead();
  }

  function upsertFromApi(sb) {
    if (!sb || !sb.id || store.gone.has(sb.id)) return;
    if (sb.state === 'destroyed') { removeSandbox(sb.id); return; }
    const cur = store.map.get(sb.id);
    if (cur && validTime(cur.updated_at) && validTime(sb.updated_at) &&
        new Date(cur.updated_at) > new Date(sb.updated_at)) return; // the stream knows newer
    store.map.set(sb.id, sb);
    changed(sb.id);
  }

  function removeSandbox(id) {
    store.gone.add(id);
    store.map.delete(id);
    if (detail.id === id) detail.destroyed = true;
    changed(id);
  }

  function onStreamEvent(ev) {
    switch (ev.type) {
      case 'sync': {
        store.map = new Map((ev.sandboxes || []).map((s) => [s.id, s]));
        store.gone.clear();
        store.synced = true;
        if (detail.id && detail.sb && !store.map.has(detail.id)) detail.destroyed = true;
        changedAll();
        break;
      }
      case 'sandbox': {
        const sb = ev.sandbox;
        if (!sb || !sb.id) break;
        if (sb.state === 'destroyed' || ev.to === 'destroyed') {
          removeSandbox(sb.id);
        } else if (!store.gone.has(sb.id)) {
          store.map.set(sb.id, sb);
          changed(sb.id);
        }
        if (ev.to && sb.id === detail.id) stateChangedHere();
        break;
      }
      default: // "ping"; "lagged" ends the stream and we reconnect
        break;
    }
  }

  // The event stream: GET /v1/events, reconnected with a backoff of 1 s
  // doubling to 10 s; each new sync replaces the whole list.
  const stream = { gen: 0, ctrl: null };

  function startStream() {
    stopStream();
    runStream(++stream.gen);
  }

  function stopStream() {
    stream.gen++;
    if (stream.ctrl) stream.ctrl.abort();
    stream.ctrl = null;
    setStreamStatus('');
  }

  function setStreamStatus(s) {
    const n = $('#stream-status');
    setText(n, s);
  }

  async function runStream(gen) {
    let delay = 1000;
    while (gen === stream.gen) {
      const ctrl = new AbortController();
      stream.ctrl = ctrl;
      let watchdog = 0;
      // Pings come every 15 s: a silent minute means a dead connection.
      const kick = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => ctrl.abort(), 45000);
      };
      try {
        setStreamStatus(store.synced ? 'reconnecting…' : 'connecting…');
        kick();
        const res = await request('GET', '/v1/events', { raw: true, signal: ctrl.signal });
        await readNDJSON(res, (ev) => {
          if (gen !== stream.gen) return;
          onStreamEvent(ev);
          if (ev.type === 'sync') {
            delay = 1000;
            setStreamStatus('live');
          }
        }, kick);
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return; // unauthorized() took over
      } finally {
        clearTimeout(watchdog);
      }
      if (gen !== stream.gen) return;
      setStreamStatus('reconnecting…');
      await sleep(delay + Math.random() * 500);
      delay = Math.min(delay * 2, 10000);
    }
  }

  // ===================================================================
  // Routing and session
  // ===================================================================

  const route = { view: '', id: '' };
  const VIEWS = ['signin', 'sandboxes', 'sandbox', 'host'];

  function parseHash() {
    const h = location.hash.replace(/^#/, '');
    if (h === '/signin') return { view: 'signin' };
    if (h === '/host') return { view: 'host' };
    const m = h.match(/^\/sandbox\/([^/]+)/);
    if (m) {
      let id = m[1];
      try { id = decodeURIComponent(id); } catch (e) { /* keep it raw */ }
      return { view: 'sandbox', id };
    }
    return { view: 'sandboxes' };
  }

  function navigate(hash) {
    if (location.hash === hash) onRoute();
    else location.hash = hash;
  }

  function replaceHash(hash) {
    history.replaceState(null, '', location.pathname + location.search + hash);
  }

  function onRoute() {
    let r = parseHash();
    if (!session.key && r.view !== 'signin') {
      replaceHash('#/signin');
      r = { view: 'signin' };
    } else if (session.key && r.view === 'signin') {
      replaceHash('#/');
      r = { view: 'sandboxes' };
    }
    const prev = { view: route.view, id: route.id };
    if (prev.view === 'sandbox' && (r.view !== 'sandbox' || r.id !== prev.id)) leaveSandbox();
    if (prev.view && prev.view !== r.view) show($('#error-banner'), false); // about the page left
    route.view = r.view;
    route.id = r.id || '';
    for (const v of VIEWS) show($('#view-' + v), v === r.view);
    show($('#topbar'), r.view !== 'signin');
    $('#nav-sandboxes').classList.toggle('active', r.view === 'sandboxes' || r.view === 'sandbox');
    $('#nav-host').classList.toggle('active', r.view === 'host');
    switch (r.view) {
      case 'signin':
        $('#signin-key').focus();
        break;
      case 'sandboxes':
        renderList();
        break;
      case 'sandbox':
        if (prev.view !== 'sandbox' || prev.id !== r.id) enterSandbox(r.id);
        break;
      case 'host':
        loadHost();
        break;
    }
  }

  function startSession(info) {
    session.info = info || null;
    if (info) applyInfo(info);
    else {
      api.get('/v1/info').then((i) => { session.info = i; applyInfo(i); }, showError);
    }
    startStream();
  }

  function endSession() {
    stopStream();
    leaveSandbox();
    route.view = '';
    store.map = new Map();
    store.gone.clear();
    store.synced = false;
    for (const row of list.rows.values()) row.tr.remove();
    list.rows.clear();
    session.info = null;
    show($('#create-form'), false);
    show($('#error-banner'), false);
    show($('#notice'), false);
  }

  function applyInfo(info) {
    setText($('#daemon-version'), info && info.version ? 'paddock ' + info.version : '');
    const d = (info && info.defaults) || {};
    $('#create-form').elements.namedItem('image').placeholder = d.image ? `default (${d.image})` : 'default';
    fillRuntimeAndSizes();
  }

  // unauthorized: the key was refused mid-session (revoked, or the daemon
  // restarted with another console token): back to sign-in.
  function unauthorized(err) {
    if (!session.key) return;
    endSession();
    saveKey('');
    navigate('#/signin');
    signinError('The daemon refused the key: ' + err.message + '. Sign in again.');
  }

  // ===================================================================
  // Sign-in
  // ===================================================================

  function signinError(msg) {
    const n = $('#signin-error');
    setText(n, msg);
    show(n, !!msg);
  }

  async function submitSignin(ev) {
    ev.preventDefault();
    const input = $('#signin-key');
    const key = input.value.trim();
    if (!key) { signinError('Enter an API key.'); return; }
    const btn = $('#signin-submit');
    btn.disabled = true;
    signinError('');
    try {
      const info = await request('GET', '/v1/info', { key });
      saveKey(key);
      input.value = '';
      startSession(info);
      navigate('#/');
    } catch (e) {
      signinError(e instanceof ApiError && e.status === 401
        ? 'The key was refused: ' + e.message
        : 'Sign-in failed: ' + errText(e));
    } finally {
      btn.disabled = false;
    }
  }

  function signOut() {
    endSession();
    saveKey('');
    signinError('');
    navigate('#/signin');
  }

  // ===================================================================
  // Sandbox list (#/)
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

  function actionButtons(state) {
    const actions = ACTIONS_BY_STATE[state] || ['rm'];
    return actions.map((a) => el('button', {
      type: 'button', 'data-action': a, class: a === 'rm' ? 'danger' : null, title: ACTION_TITLES[a],
    }, ACTION_LABELS[a]));
  }

  const list = { rows: new Map(), statesKey: '' };
  const LIST_COLS = ['name', 'id', 'state', 'image', 'runtime', 'size', 'owner', 'age', 'idle', 'labels'];

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
  function renderList() {
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

  function onActionClick(ev, idOf) {
    const btn = ev.target.closest('[data-action]');
    if (!btn) return undefined;
    const id = idOf(btn);
    if (!id) return undefined;
    return runAction(id, btn.getAttribute('data-action'), btn);
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

  // ===================================================================
  // One sandbox (#/sandbox/ID): header and tabs
  // ===================================================================

  const TABS = ['overview', 'terminal', 'files', 'processes', 'network', 'ledger'];
  const detail = {
    gen: 0, // bumped on every enter/leave: late answers for another page are dropped
    ref: '', // what the address named (an id or a name)
    id: '',
    sb: null, // last known state, also after it is destroyed
    destroyed: false,
    missing: false,
    tab: 'overview',
    filesLoaded: false,
    actionsKey: null,
    historyTimer: 0,
  };

  function enterSandbox(ref) {
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

  function leaveSandbox() {
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
    $('#files-path').value = '/';
    files.path = '/';
    closeViewer();
    $('#process-log').textContent = '';
    setText($('#process-log-name'), '');
    $('#ledger-filter').value = '';
    ledger.entries = [];
    ledger.shown = [];
    setText($('#ledger-count'), '');
  }

  function currentState() {
    if (store.map.has(detail.id)) return store.map.get(detail.id).state;
    if (detail.destroyed) return 'destroyed';
    if (detail.missing) return 'not found';
    return detail.sb ? detail.sb.state : '';
  }

  function renderDetailHead() {
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

  function stateChangedHere() {
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

  // ===================================================================
  // Tab: terminal (xterm.js over the PTY WebSocket)
  // ===================================================================

  const term = { xterm: null, fit: null, conn: null, termId: '', opening: false };
  const terminalIds = new Map(); // sandbox id -> its last terminal, to reattach on return
  const encoder = new TextEncoder();
  let xtermLoading = null;

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = el('script', { src });
      s.addEventListener('load', resolve);
      s.addEventListener('error', () => reject(new Error('cannot load ' + src)));
      document.head.appendChild(s);
    });
  }

  // loadXterm loads the bundled xterm.js once; false when this build has
  // none (a HEAD request first, so a missing file is never run as script).
  function loadXterm() {
    if (!xtermLoading) {
      xtermLoading = (async () => {
        if (typeof window.Terminal === 'function') return true;
        let res = null;
        try { res = await fetch('/console/vendor/xterm.js', { method: 'HEAD', cache: 'no-store' }); } catch (e) { res = null; }
        if (!res || !res.ok) return false;
        document.head.appendChild(el('link', { rel: 'stylesheet', href: '/console/vendor/xterm.css' }));
        try {
          await loadScript('/console/vendor/xterm.js');
          await loadScript('/console/vendor/addon-fit.js').catch(() => {});
        } catch (e) {
          return false;
        }
        return typeof window.Terminal === 'function';
      })();
    }
    return xtermLoading;
  }

  function setTermStatus(status, detailText) {
    setText($('#terminal-status'), status);
    if (detailText !== undefined) setText($('#terminal-detail'), detailText);
  }

  async function openTerminalTab() {
    if (term.xterm) {
      fitTerminal();
      if (!term.conn) await reattachTerminal();
      if (term.xterm) term.xterm.focus();
      return;
    }
    if (term.opening) return;
    term.opening = true;
    const gen = detail.gen;
    try {
      setTermStatus('loading…', '');
      const ok = await loadXterm();
      if (gen !== detail.gen) return;
      if (!ok) {
        $('#terminal').replaceChildren(el('div', { class: 'terminal-missing' }, 'terminal not bundled in this build'));
        setTermStatus('unavailable', 'this build of paddock carries no xterm.js');
        for (const b of ['#terminal-reattach', '#terminal-new', '#terminal-interrupt']) $(b).disabled = true;
        return;
      }
      const x = new window.Terminal({
        cursorBlink: true,
        fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
        fontSize: 13,
        scrollback: 5000,
        theme: { background: '#11151c' },
      });
      let fit = null;
      if (window.FitAddon && typeof window.FitAddon.FitAddon === 'function') {
        fit = new window.FitAddon.FitAddon();
        x.loadAddon(fit);
      }
      const host = $('#terminal');
      host.replaceChildren();
      x.open(host);
      term.xterm = x;
      term.fit = fit;
      // A keypress after a keydown that xterm handled (and cancelled) is
      // one a browser would not fire: drop it. Synthetic key events
      // (automation, some IMEs) deliver it anyway, and xterm would then
      // send the key twice.
      let lastKeydown = null;
      x.attachCustomKeyEventHandler((e) => {
        if (e.type === 'keydown') lastKeydown = e;
        else if (e.type === 'keyup') lastKeydown = null;
        else if (e.type === 'keypress' && lastKeydown && lastKeydown.defaultPrevented) return false;
        return true;
      });
      x.onData((d) => sendTerm(encoder.encode(d)));
      x.onBinary((d) => {
        const b = new Uint8Array(d.length);
        for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 255;
        sendTerm(b);
      });
      x.onResize(({ cols, rows }) => sendControl({ type: 'resize', cols, rows }));
      fitTerminal();
      await reattachTerminal();
    } finally {
      term.opening = false;
    }
  }

  // liveTerminal returns tid when the sandbox still has that terminal
  // running, else "" (then a new one is opened).
  async function liveTerminal(tid) {
    try {
      const l = await api.get(sbPath(detail.id, '/terminals'));
      const t = ((l && l.terminals) || []).find((x) => x.id === tid);
      return t && !t.exited ? tid : '';
    } catch (e) {
      return '';
    }
  }

  function fitTerminal() {
    if (!term.fit || !term.xterm || detail.tab !== 'terminal') return;
    try { term.fit.fit(); } catch (e) { /* not laid out yet */ }
  }

  function connectTerminal(reattachId) {
    closeConn();
    const x = term.xterm;
    if (!x) return;
    const state = currentState();
    if (state && !TERMINAL_STATES.has(state)) {
      setTermStatus('disconnected', `the sandbox is ${state}` + (state === 'stopped' || state === 'error' ? ': start it, then open a terminal' : ''));
      return;
    }
    const params = reattachId ? { terminal: reattachId } : { cols: x.cols, rows: x.rows };
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host +
      sbPath(detail.id, '/pty') + qs(params);
    let ws;
    try {
      ws = new WebSocket(url, ['paddock', 'paddock.bearer.' + session.key]);
    } catch (e) {
      setTermStatus('disconnected', e.message);
      return;
    }
    ws.binaryType = 'arraybuffer';
    const conn = { ws, ready: false, ended: false, sandbox: detail.id };
    term.conn = conn;
    setTermStatus('connecting…', reattachId ? 'reattaching to ' + reattachId : '');
    ws.addEventListener('message', (ev) => {
      if (term.conn !== conn) return;
      if (typeof ev.data === 'string') onTermControl(conn, ev.data);
      else x.write(new Uint8Array(ev.data));
    });
    ws.addEventListener('close', (ev) => {
      if (term.conn !== conn) return;
      term.conn = null;
      if (!conn.ended) {
        setTermStatus('disconnected', ev.reason || (conn.ready ? '' : 'could not open a terminal (is the sandbox running?)'));
      }
    });
  }

  const stripControls = (s) => String(s).replace(/[\x00-\x1f\x7f]/g, ' ');

  function onTermControl(conn, text) {
    let m;
    try { m = JSON.parse(text); } catch (e) { return; }
    const x = term.xterm;
    switch (m.type) {
      case 'ready': {
        conn.ready = true;
        x.reset(); // the replay of a reattached terminal follows
        if (m.terminal && m.terminal.id) {
          term.termId = m.terminal.id;
          terminalIds.set(conn.sandbox, m.terminal.id);
        }
        setTermStatus('connected', term.termId ? 'terminal ' + term.termId : '');
        fitTerminal();
        sendControl({ type: 'resize', cols: x.cols, rows: x.rows });
        x.focus();
        break;
      }
      case 'exit': {
        conn.ended = true;
        const code = m.exit_code == null ? '?' : m.exit_code;
        setTermStatus(`ended (exit ${code})`, m.signal ? 'signal ' + m.signal : '');
        terminalIds.delete(conn.sandbox);
        term.termId = '';
        break;
      }
      case 'error': {
        const msg = stripControls(m.error && m.error.message ? m.error.message : 'terminal error');
        x.write('\r\n\x1b[31m[' + msg + ']\x1b[0m\r\n');
        setText($('#terminal-detail'), msg);
        break;
      }
      default:
        break;
    }
  }

  function sendTerm(bytes) {
    const c = term.conn;
    if (c && c.ready && !c.ended && c.ws.readyState === WebSocket.OPEN) c.ws.send(bytes);
  }

  function sendControl(msg) {
    const c = term.conn;
    if (c && c.ready && !c.ended && c.ws.readyState === WebSocket.OPEN) c.ws.send(JSON.stringify(msg));
  }

  function closeConn() {
    const c = term.conn;
    term.conn = null;
    if (c) {
      try { c.ws.close(1000, 'closed by the console'); } catch (e) { /* already closed */ }
    }
  }

  function closeTerminal() {
    closeConn();
    if (term.xterm) {
      try { term.xterm.dispose(); } catch (e) { /* gone */ }
    }
    term.xterm = null;
    term.fit = null;
    term.termId = '';
    $('#terminal').replaceChildren();
    setTermStatus('not connected', '');
  }

  // reattachTerminal reconnects to this sandbox's terminal when it still
  // runs, else opens a new one.
  async function reattachTerminal() {
    if (!term.xterm) return openTerminalTab();
    const gen = detail.gen;
    const tid = term.termId || terminalIds.get(detail.id) || '';
    const live = tid ? await liveTerminal(tid) : '';
    if (gen !== detail.gen || !term.xterm) return undefined;
    return connectTerminal(live);
  }

  // Terminals open only in a sandbox that runs (a hibernated or paused one
  // is woken by the request); anything else would fail the upgrade.
  const TERMINAL_STATES = new Set(['running', 'paused', 'hibernated', 'hibernating']);

  // ===================================================================
  // Tab: files
  // ===================================================================

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

  async function loadFiles(path) {
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

  function revokeImage() {
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

  // ===================================================================
  // Tab: processes
  // ===================================================================

  const plog = { ctrl: null, pending: '', scheduled: false };
  const LOG_CAP = 2 << 20;

  function procOutcome(p) {
    if (!p) return '';
    if (p.error) return p.error;
    if (p.signal) return 'signal ' + p.signal;
    if (p.exit_code != null) return 'exit ' + p.exit_code;
    return '';
  }

  async function loadProcesses() {
    const gen = detail.gen;
    const id = detail.id;
    const [pl, all] = await Promise.allSettled([api.get(sbPath(id, '/processes')), api.get(sbPath(id, '/procs'))]);
    if (gen !== detail.gen) return;
    if (pl.status === 'fulfilled') {
      const procs = (pl.value && pl.value.processes) || [];
      renderTable($('#process-list'), [
        { h: 'ID', v: (p) => p.id, cls: 'mono' },
        { h: 'PID', v: (p) => String(p.pid || ''), cls: 'num' },
        { h: 'Command', v: (p) => fmtCmd(p.cmd), cls: 'wrap mono' },
        { h: 'Status', v: (p) => p.status },
        { h: 'Outcome', v: (p) => procOutcome(p) },
        { h: 'Started', v: (p) => fmtTime(p.started_at) },
        { h: 'Output', v: (p) => fmtBytes((p.stdout ? p.stdout.end : 0) + (p.stderr ? p.stderr.end : 0)), cls: 'num' },
        {
          h: '',
          cls: 'actions',
          v: (p) => [
            el('button', { type: 'button', class: 'small', 'data-proc-action': 'logs' }, 'Logs'),
            p.status === 'running' || p.status === 'starting'
              ? el('button', { type: 'button', class: 'small danger', 'data-proc-action': 'kill' }, 'Kill') : null,
          ],
        },
      ], procs, { row: (tr, p) => tr.setAttribute('data-process', p.id), empty: 'No background processes (POST …/processes starts one).' });
    } else {
      tableMessage($('#process-list'), errText(pl.reason));
    }
    if (all.status === 'fulfilled') {
      const procs = (all.value && all.value.procs) || [];
      renderTable($('#procs'), [
        { h: 'PID', v: (p) => String(p.pid), cls: 'num' },
        { h: 'PPID', v: (p) => String(p.ppid), cls: 'num' },
        { h: 'User', v: (p) => p.user || String(p.uid) },
        { h: 'State', v: (p) => p.state },
        { h: 'Command', v: (p) => (p.cmd && p.cmd.length ? fmtCmd(p.cmd) : '[' + p.comm + ']') + (p.agent ? '  (agent)' : ''), cls: 'wrap mono' },
        { h: 'RSS', v: (p) => fmtBytes(p.rss_bytes), cls: 'num' },
        { h: 'Threads', v: (p) => String(p.threads), cls: 'num' },
        { h: 'Started', v: (p) => fmtTime(p.started_at) },
      ], procs, { empty: 'No processes.' });
      if (all.value && all.value.truncated) {
        $('#procs tbody').appendChild(el('tr', { class: 'empty' }, el('td', { colspan: 8 }, 'The list was cut: the sandbox has more processes.')));
      }
    } else {
      tableMessage($('#procs'), errText(all.reason));
    }
  }

  async function onProcessClick(ev) {
    const btn = ev.target.closest('[data-proc-action]');
    if (!btn) return;
    const tr = btn.closest('tr[data-process]');
    if (!tr) return;
    const pid = tr.getAttribute('data-process');
    if (btn.getAttribute('data-proc-action') === 'kill') {
      if (!confirm(`Kill process ${pid}?`)) return;
      await api.post(sbPath(detail.id, '/processes/' + encodeURIComponent(pid) + '/kill'), {});
      await loadProcesses();
      return;
    }
    await followLog(pid);
  }

  function appendLog(s) {
    if (!s) return;
    plog.pending += s;
    if (plog.scheduled) return;
    plog.scheduled = true;
    const flush = () => {
      if (!plog.scheduled) return;
      plog.scheduled = false;
      const pre = $('#process-log');
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.appendChild(document.createTextNode(plog.pending));
      plog.pending = '';
      if (pre.textContent.length > LOG_CAP) pre.textContent = '…' + pre.textContent.slice(-LOG_CAP / 2);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    };
    requestAnimationFrame(flush);
    setTimeout(flush, 250);
  }

  function stopLogFollow() {
    if (plog.ctrl) plog.ctrl.abort();
    plog.ctrl = null;
    plog.pending = '';
    show($('#process-log-stop'), false);
  }

  async function followLog(pid) {
    stopLogFollow();
    const ctrl = new AbortController();
    plog.ctrl = ctrl;
    $('#process-log').textContent = '';
    setText($('#process-log-name'), pid);
    show($('#process-log-stop'), true);
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    try {
      const res = await request('GET', sbPath(detail.id, '/processes/' + encodeURIComponent(pid) + '/logs') + qs({ follow: 'true' }),
        { raw: true, signal: ctrl.signal });
      await readNDJSON(res, (ev) => {
        if (plog.ctrl !== ctrl) return;
        switch (ev.type) {
          case 'stdout':
          case 'stderr':
            appendLog(decoders[ev.type].decode(b64bytes(ev.data), { stream: true }));
            break;
          case 'gap':
            appendLog(`\n[${ev.dropped} bytes of ${ev.stream || 'output'} no longer kept]\n`);
            break;
          case 'end':
            appendLog(`\n[process ended: ${procOutcome(ev.process) || (ev.process && ev.process.status) || ''}]\n`);
            break;
          default:
            break;
        }
      });
      if (plog.ctrl === ctrl) appendLog('\n[end of log]\n');
    } catch (e) {
      if (!isAbort(e)) throw e;
    } finally {
      if (plog.ctrl === ctrl) {
        plog.ctrl = null;
        show($('#process-log-stop'), false);
      }
    }
  }

  // ===================================================================
  // Ledger (tab) and network (tab, which shows the ledger's refusals)
  // ===================================================================

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

  async function loadLedger() {
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

  async function loadNetwork() {
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

  // ===================================================================
  // Host (#/host)
  // ===================================================================

  const host = { gen: 0 };

  function loadHost() {
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
  }

  // ===================================================================
  // Wiring and start
  // ===================================================================

  function wire() {
    on($('#signin-form'), 'submit', submitSignin);
    on($('#signout'), 'click', signOut);
    on($('#error-close'), 'click', () => show($('#error-banner'), false));
    on($('#notice-close'), 'click', () => show($('#notice'), false));

    // List.
    for (const id of ['#filter-label', '#filter-owner']) on($(id), 'input', changedAll);
    on($('#filter-state'), 'change', changedAll);
    on($('#sandbox-list'), 'click', (ev) => onActionClick(ev, (btn) => {
      const tr = btn.closest('tr[data-sandbox-id]');
      return tr && tr.getAttribute('data-sandbox-id');
    }));
    on($('#create-open'), 'click', openCreate);
    on($('#create-cancel'), 'click', closeCreate);
    on($('#create-form'), 'submit', submitCreate);

    // One sandbox.
    on($('#sandbox-actions'), 'click', (ev) => onActionClick(ev, () => (detail.sb && detail.sb.id) || detail.id));
    for (const t of TABS) on($('#tab-' + t), 'click', () => selectTab(t));
    on($('#history-refresh'), 'click', loadHistory);
    on($('#preview-form'), 'submit', exposePort);
    on($('#previews'), 'click', revokePreview);

    on($('#terminal-reattach'), 'click', reattachTerminal);
    on($('#terminal-new'), 'click', () => (term.xterm ? connectTerminal('') : openTerminalTab()));
    on($('#terminal-interrupt'), 'click', () => { sendControl({ type: 'signal', signal: 'SIGINT' }); if (term.xterm) term.xterm.focus(); });

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

    on($('#processes-refresh'), 'click', loadProcesses);
    on($('#process-list'), 'click', onProcessClick);
    on($('#process-log-stop'), 'click', stopLogFollow);

    on($('#network-refresh'), 'click', loadNetwork);

    on($('#ledger-filter'), 'input', () => {
      clearTimeout(ledger.timer);
      ledger.timer = setTimeout(renderLedger, 120);
    });
    on($('#ledger-refresh'), 'click', loadLedger);
    on($('#ledger-export'), 'click', exportLedger);

    on($('#host-refresh'), 'click', loadHost);

    let resizeTimer = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(fitTerminal, 120);
    });
    window.addEventListener('hashchange', guard(onRoute));

    // Ages and idle times move: refresh the list's text now and then
    // (from the store; nothing is fetched).
    setInterval(() => { if (route.view === 'sandboxes') changedAll(); }, 20000);
  }

  function boot() {
    wire();
    // `paddock console` opens the page as /#key=TOKEN: keep the token in
    // this tab's session storage and take it out of the address bar.
    if (location.hash.startsWith('#key=')) {
      let k = location.hash.slice(5);
      try { k = decodeURIComponent(k); } catch (e) { /* keep it raw */ }
      saveKey(k.trim());
      replaceHash('#/');
    } else {
      session.key = loadKey();
    }
    if (session.key) startSession(null);
    onRoute();
  }

  try {
    boot();
  } catch (e) {
    showError(e);
  }
})();
