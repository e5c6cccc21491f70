// Paddock web console: one page over the daemon's /v1 API. This module
// routes (#/, #/sandbox/ID, #/host, #/signin), signs in and out, wires
// the page and starts it; the others:
//
//   api.js        requests, the API key, the event stream
//   ui.js         DOM helpers, formatting, tables, the error banner
//   state.js      the sandboxes (from the event stream), route, batched renders
//   list.js       the sandbox list, actions, the create form
//   sandbox.js    one sandbox: header, tabs, overview
//   terminal.js, files.js, processes.js, ledger.js   its other tabs
//   host.js       the host page; charts.js its charts
//
// Plain modern JavaScript modules, no framework, no build step. The page
// is served under a strict Content-Security-Policy: no inline script, no
// eval, no other origin. Everything the API returns is untrusted, so the
// DOM is built with createElement and textContent only, never innerHTML.
//
// The API key lives in sessionStorage ("paddock.key") and nowhere else.
// The sandbox list comes from GET /v1/events (a sync, then changes), never
// from polling.

import {
  ApiError, api, loadKey, request, saveKey, session, setUnauthorizedHandler, startStream, stopStream,
} from './api.js';
import { $, errText, guard, on, setText, show, showError } from './ui.js';
import { changedAll, clearStore, navigate, onStreamEvent, replaceHash, route, setHooks } from './state.js';
import { applyInfo, clearList, renderList, wireList } from './list.js';
import { enterSandbox, leaveSandbox, renderDetailHead, stateChangedHere, wireSandbox } from './sandbox.js';
import { wireTerminal } from './terminal.js';
import { wireFiles } from './files.js';
import { wireProcesses } from './processes.js';
import { wireLedger } from './ledger.js';
import { leaveHost, loadHost, wireHost } from './host.js';

// ===================================================================
// Routing
// ===================================================================

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
  if (prev.view === 'host' && r.view !== 'host') leaveHost();
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

// ===================================================================
// Session
// ===================================================================

function startSession(info) {
  session.info = info || null;
  if (info) applyInfo(info);
  else {
    api.get('/v1/info').then((i) => { session.info = i; applyInfo(i); }, showError);
  }
  startStream(onStreamEvent, (s) => setText($('#stream-status'), s));
}

function endSession() {
  stopStream();
  leaveSandbox();
  leaveHost();
  route.view = '';
  clearStore();
  clearList();
  session.info = null;
  show($('#create-form'), false);
  show($('#error-banner'), false);
  show($('#notice'), false);
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
// Wiring and start
// ===================================================================

function wire() {
  on($('#signin-form'), 'submit', submitSignin);
  on($('#signout'), 'click', signOut);
  on($('#error-close'), 'click', () => show($('#error-banner'), false));
  on($('#notice-close'), 'click', () => show($('#notice'), false));
  wireList();
  wireSandbox();
  wireTerminal();
  wireFiles();
  wireProcesses();
  wireLedger();
  wireHost();
  window.addEventListener('hashchange', guard(onRoute));

  // Ages and idle times move: refresh the list's text now and then
  // (from the store; nothing is fetched).
  setInterval(() => { if (route.view === 'sandboxes') changedAll(); }, 20000);

  // A page being left closes its stream at once: a browser keeps at most
  // six connections to one host over HTTP/1.1, and a page kept in the
  // back-forward cache with its stream open would hold one of them. A
  // page brought back from that cache opens a new one (its sync is the
  // whole truth).
  window.addEventListener('pagehide', () => stopStream());
  window.addEventListener('pageshow', (ev) => {
    if (ev.persisted && session.key) startStream(onStreamEvent, (s) => setText($('#stream-status'), s));
  });
}

function boot() {
  setUnauthorizedHandler(unauthorized);
  setHooks({ renderList, renderDetailHead, stateChangedHere, onRoute });
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
