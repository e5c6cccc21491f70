// The sandbox page's processes tab: its background processes (their logs
// followed live, a kill), and every process in it.

import { api, isAbort, qs, readNDJSON, request, sbPath } from './api.js';
import {
  $, b64bytes, el, errText, fmtBytes, fmtCmd, fmtTime, on, renderTable, setText, show, tableMessage,
} from './ui.js';
import { detail } from './state.js';

const plog = { ctrl: null, pending: '', scheduled: false };
const LOG_CAP = 2 << 20;

function procOutcome(p) {
  if (!p) return '';
  if (p.error) return p.error;
  if (p.signal) return 'signal ' + p.signal;
  if (p.exit_code != null) return 'exit ' + p.exit_code;
  return '';
}

export async function loadProcesses() {
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

export function stopLogFollow() {
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

// resetProcesses empties the log for another sandbox.
export function resetProcesses() {
  $('#process-log').textContent = '';
  setText($('#process-log-name'), '');
}

export function wireProcesses() {
  on($('#processes-refresh'), 'click', loadProcesses);
  on($('#process-list'), 'click', onProcessClick);
  on($('#process-log-stop'), 'click', stopLogFollow);
}
