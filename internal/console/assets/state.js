// The page's shared state: the sandboxes (fed by the event stream, never
// by polling), the route, and the open sandbox page; renders are batched
// to one per frame.
//
// The views register what to call (setHooks) so that this module imports
// none of them.

import { validTime } from './ui.js';

export const store = {
  map: new Map(), // id -> api.Sandbox
  gone: new Set(), // ids removed since the last sync (late events are ignored)
  synced: false,
  usage: new Map(), // id -> api.SandboxUsage, from the stream's last usage sample
};

export const route = { view: '', id: '' };

// detail is the sandbox page's (#/sandbox/ID) state.
export const detail = {
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

const hooks = {
  renderList: () => {},
  renderDetailHead: () => {},
  stateChangedHere: () => {},
  onRoute: () => {},
};

// setHooks names the views' functions this module calls: renderList,
// renderDetailHead, stateChangedHere (the open sandbox changed state) and
// onRoute.
export function setHooks(h) { Object.assign(hooks, h); }

// ===================================================================
// Rendering, batched
// ===================================================================

const dirty = { all: false, ids: new Set() };
let renderPending = false;

export function changed(id) { dirty.ids.add(id); scheduleRender(); }
export function changedAll() { dirty.all = true; scheduleRender(); }

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
  if (route.view === 'sandboxes') hooks.renderList();
  if (route.view === 'sandbox' && (all || ids.has(detail.id))) hooks.renderDetailHead();
}

// ===================================================================
// The store
// ===================================================================

export function upsertFromApi(sb) {
  if (!sb || !sb.id || store.gone.has(sb.id)) return;
  if (sb.state === 'destroyed') { removeSandbox(sb.id); return; }
  const cur = store.map.get(sb.id);
  if (cur && validTime(cur.updated_at) && validTime(sb.updated_at) &&
      new Date(cur.updated_at) > new Date(sb.updated_at)) return; // the stream knows newer
  store.map.set(sb.id, sb);
  changed(sb.id);
}

export function removeSandbox(id) {
  store.gone.add(id);
  store.map.delete(id);
  if (detail.id === id) detail.destroyed = true;
  changed(id);
}

export function clearStore() {
  store.map = new Map();
  store.usage = new Map();
  store.gone.clear();
  store.synced = false;
}

export function onStreamEvent(ev) {
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
      if (ev.to && sb.id === detail.id) hooks.stateChangedHere();
      break;
    }
    case 'usage': {
      store.usage = new Map((ev.usage || []).map((u) => [u.id, u]));
      changedAll();
      break;
    }
    default: // "ping"; "lagged" ends the stream and we reconnect
      break;
  }
}

// currentState is the open sandbox's state as the page knows it.
export function currentState() {
  if (store.map.has(detail.id)) return store.map.get(detail.id).state;
  if (detail.destroyed) return 'destroyed';
  if (detail.missing) return 'not found';
  return detail.sb ? detail.sb.state : '';
}

// ===================================================================
// Addresses
// ===================================================================

export function navigate(hash) {
  if (location.hash === hash) hooks.onRoute();
  else location.hash = hash;
}

export function replaceHash(hash) {
  history.replaceState(null, '', location.pathname + location.search + hash);
}
