// Paddock code-context driver for JavaScript (Node). Requests arrive as
// JSON lines on fd 3 and replies leave as JSON lines on fd 4, so nothing
// the user's code prints can be taken for a control message.
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');

const MAX_REPR = 1 << 20;
const sandbox = {
  console, require, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, fetch: globalThis.fetch,
};
sandbox.globalThis = sandbox;
const ctx = vm.createContext(sandbox);

function send(msg) {
  const b = Buffer.from(JSON.stringify(msg) + '\n');
  let off = 0;
  while (off < b.length) {
    try {
      off += fs.writeSync(4, b, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

function bundle(value) {
  const data = {};
  if (value !== null && typeof value === 'object' || ['number', 'boolean', 'string'].includes(typeof value)) {
    try {
      const j = JSON.stringify(value);
      if (j !== undefined) data['application/json'] = j;
    } catch (_) { /* cycles, BigInt: text only */ }
  }
  data['text/plain'] = util.inspect(value, { depth: 4 });
  // Each reply is one line the agent bounds; a huge value is cut, not
  // allowed to break the channel.
  for (const k of Object.keys(data)) {
    if (data[k].length > MAX_REPR) {
      if (k === 'text/plain') data[k] = data[k].slice(0, MAX_REPR) + '... [truncated]';
      else delete data[k];
    }
  }
  return data;
}

async function run(code, n) {
  let value = vm.runInContext(code, ctx, { filename: `<cell ${n}>`, breakOnSigint: true, displayErrors: false });
  if (value && typeof value.then === 'function') value = await value;
  if (value !== undefined) {
    sandbox._ = value;
    send({ type: 'result', data: bundle(value), main: true });
  }
}

function errorOf(e) {
  if (e instanceof Error || (e && typeof e.stack === 'string')) {
    return { name: e.name || 'Error', value: e.message || '', traceback: String(e.stack || '') };
  }
  return { name: 'Error', value: util.inspect(e), traceback: '' };
}

function readLine(state) {
  for (;;) {
    const i = state.buf.indexOf(10);
    if (i >= 0) {
      const line = state.buf.subarray(0, i).toString();
      state.buf = state.buf.subarray(i + 1);
      return line;
    }
    const chunk = Buffer.alloc(1 << 16);
    let n;
    try {
      n = fs.readSync(3, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code === 'EAGAIN') { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5); continue; }
      if (e.code === 'EOF') return null;
      throw e;
    }
    if (n === 0) return null;
    state.buf = Buffer.concat([state.buf, chunk.subarray(0, n)]);
  }
}

// A run's own variables: set for the run, given their earlier values back
// after it, so the context's environment stays its own.
function setEnv(env) {
  const saved = new Map();
  for (const [k, v] of Object.entries(env || {})) {
    saved.set(k, Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined);
    process.env[k] = v;
  }
  return saved;
}

function restoreEnv(saved) {
  for (const [k, v] of saved) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}

// SIGINT outside a run must not end the interpreter.
process.on('SIGINT', () => {});

async function main() {
  const state = { buf: Buffer.alloc(0) };
  send({ type: 'ready', version: process.version });
  for (;;) {
    const line = readLine(state);
    if (line === null) process.exit(0);
    const req = JSON.parse(line);
    let status = 'ok';
    const saved = setEnv(req.env);
    try {
      await run(req.code, req.n || 0);
    } catch (e) {
      status = 'error';
      send(Object.assign({ type: 'error' }, errorOf(e)));
    } finally {
      restoreEnv(saved);
    }
    send({ type: 'done', status });
  }
}

main();
