// The daemon's /v1 API: the API key, requests, streamed (NDJSON) answers
// and the event stream. No DOM here.
//
// The API key lives in sessionStorage ("paddock.key") and nowhere else.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const isAbort = (e) => !!e && e.name === 'AbortError';

// qs makes a query string; empty values are left out, arrays repeat.
export function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v == null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => p.append(k, String(x)));
    else p.set(k, String(v));
  }
  const s = p.toString();
  return s ? '?' + s : '';
}

// ===================================================================
// API key and requests
// ===================================================================

const KEY_ITEM = 'paddock.key';
export const session = { key: '', info: null };

export function loadKey() {
  try { return sessionStorage.getItem(KEY_ITEM) || ''; } catch (e) { return ''; }
}

export function saveKey(k) {
  session.key = k || '';
  try {
    if (k) sessionStorage.setItem(KEY_ITEM, k);
    else sessionStorage.removeItem(KEY_ITEM);
  } catch (e) { /* storage refused: the key lives in memory for this page */ }
}

export class ApiError extends Error {
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

// onUnauthorized is told when the daemon refuses the session's key
// (app.js sends the page back to sign-in).
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// request calls the API with the session's key (or opts.key, for the
// sign-in check, which handles its own 401). opts: json (a body to send
// as JSON), body (raw), signal, raw (return the Response).
export async function request(method, path, opts = {}) {
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
    if (res.status === 401 && opts.key == null) onUnauthorized(err);
    throw err;
  }
  if (opts.raw) return res;
  if (res.status === 204) return null;
  const ct = res.headers.get('Content-Type') || '';
  return ct.startsWith('application/json') ? res.json() : res.text();
}

export const api = {
  get: (path, opts) => request('GET', path, opts),
  post: (path, json, opts = {}) => request('POST', path, Object.assign({}, opts, { json })),
  put: (path, json, opts = {}) => request('PUT', path, Object.assign({}, opts, { json })),
  del: (path, opts) => request('DELETE', path, opts),
};

export const sbPath = (id, rest = '') => '/v1/sandboxes/' + encodeURIComponent(id) + rest;

// readLines reads a streamed body line by line (NDJSON).
export async function readLines(res, onLine, onChunk) {
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

export function readNDJSON(res, onObject, onChunk) {
  return readLines(res, (line) => {
    let obj;
    try { obj = JSON.parse(line); } catch (e) { return; }
    onObject(obj);
  }, onChunk);
}

// ===================================================================
// The event stream: GET /v1/events, reconnected with a backoff of 1 s
// doubling to 10 s; each new sync replaces the whole list.
// ===================================================================

const stream = { gen: 0, ctrl: null, onEvent: () => {}, onStatus: () => {} };

// startStream (re)starts the stream: onEvent gets every event, onStatus
// a word on the connection ('connecting…', 'live', …; '' once stopped).
export function startStream(onEvent, onStatus) {
  stopStream();
  stream.onEvent = onEvent;
  stream.onStatus = onStatus;
  runStream(++stream.gen);
}

export function stopStream() {
  stream.gen++;
  if (stream.ctrl) stream.ctrl.abort();
  stream.ctrl = null;
  stream.onStatus('');
}

async function runStream(gen) {
  let delay = 1000;
  let synced = false;
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
      stream.onStatus(synced ? 'reconnecting…' : 'connecting…');
      kick();
      // With usage: each running sandbox's CPU and memory every 10 s,
      // from one sampler in the daemon whoever asks.
      const res = await request('GET', '/v1/events?usage=true', { raw: true, signal: ctrl.signal });
      await readNDJSON(res, (ev) => {
        if (gen !== stream.gen) return;
        stream.onEvent(ev);
        if (ev.type === 'sync') {
          synced = true;
          delay = 1000;
          stream.onStatus('live');
        }
      }, kick);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return; // the unauthorized handler took over
    } finally {
      clearTimeout(watchdog);
    }
    if (gen !== stream.gen) return;
    stream.onStatus('reconnecting…');
    await sleep(delay + Math.random() * 500);
    delay = Math.min(delay * 2, 10000);
  }
}
