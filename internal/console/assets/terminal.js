// The sandbox page's terminal tab: xterm.js (bundled, loaded on first
// use) over the PTY WebSocket, which carries the API key as a subprotocol.

import { api, qs, sbPath, session } from './api.js';
import { $, el, on, setText } from './ui.js';
import { currentState, detail } from './state.js';

// Terminals open only in a sandbox that runs (a hibernated or paused one
// is woken by the request); anything else would fail the upgrade.
const TERMINAL_STATES = new Set(['running', 'paused', 'hibernated', 'hibernating']);

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

export async function openTerminalTab() {
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

export function closeTerminal() {
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

export function wireTerminal() {
  on($('#terminal-reattach'), 'click', reattachTerminal);
  on($('#terminal-new'), 'click', () => (term.xterm ? connectTerminal('') : openTerminalTab()));
  on($('#terminal-interrupt'), 'click', () => { sendControl({ type: 'signal', signal: 'SIGINT' }); if (term.xterm) term.xterm.focus(); });
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(fitTerminal, 120);
  });
}
