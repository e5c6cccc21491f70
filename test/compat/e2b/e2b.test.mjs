// The unmodified `e2b` SDK against a real Paddock daemon. compat_test.go
// starts the daemon and sets E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY;
// nothing here knows it is not talking to E2B, except the routing check
// that sends a raw request with a {port}-{id}.{domain} Host header.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'
import { gunzipSync } from 'node:zlib'
import { Sandbox, CommandExitError, NotFoundError, InvalidArgumentError } from 'e2b'

const runID = `run${process.pid}${Date.now() % 100000}`
const sandboxURL = new URL(process.env.E2B_SANDBOX_URL)
let sbx

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')

async function eventually(what, fn, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  let last
  while (Date.now() < deadline) {
    try {
      const v = await fn()
      if (v) return v
    } catch (e) {
      last = e
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ''}`)
}

before(async () => {
  sbx = await Sandbox.create('base', { timeoutMs: 300_000, metadata: { suite: runID }, envs: { SANDBOX_WIDE: 'yes' } })
})

after(async () => {
  await sbx?.kill()
})

test('create returns a usable sandbox with a dash-free id', async () => {
  assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
  assert.equal(await sbx.isRunning(), true)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { suite: runID })
})

test('commands.run: stdout, stderr, exit code', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2')
  assert.equal(r.stdout, 'out\n')
  assert.equal(r.stderr, 'err\n')
  assert.equal(r.exitCode, 0)
  await assert.rejects(sbx.commands.run('echo bad >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stderr, 'bad\n')
    return true
  })
})

test('commands.run: env, cwd, user', async () => {
  assert.equal((await sbx.commands.run('echo $FOO-$SANDBOX_WIDE', { envs: { FOO: 'bar' } })).stdout, 'bar-yes\n')
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
  assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n')
  assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n')
})

test('commands.run: timeout ends a long command', async () => {
  const started = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }))
  assert.ok(Date.now() - started < 25_000, 'the command was not cut short')
})

test('background commands: list, kill, wait', async () => {
  const done = await sbx.commands.run('sleep 0.2; echo finished', { background: true })
  assert.equal((await done.wait()).stdout, 'finished\n')

  const h = await sbx.commands.run('sleep 60', { background: true })
  assert.ok(h.pid > 0)
  const procs = await sbx.commands.list()
  assert.ok(procs.some((p) => p.pid === h.pid), 'the background command is listed')
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait(), CommandExitError)
  assert.equal(await sbx.commands.kill(h.pid), false)
})

test('stdin: send, then close', async () => {
  let out = ''
  const h = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => { out += d } })
  await sbx.commands.sendStdin(h.pid, 'hello ')
  await h.sendStdin('world\n')
  await h.closeStdin()
  const r = await h.wait()
  assert.equal(r.stdout, 'hello world\n')
  assert.equal(out, 'hello world\n')
})

test('files: text and binary, list, exists, makeDir, rename, remove', async () => {
  const dir = `/home/user/f-${runID}`
  assert.equal(await sbx.files.makeDir(dir), true)
  assert.equal(await sbx.files.makeDir(dir), false)
  await sbx.files.write(`${dir}/a.txt`, 'hi there\n')
  assert.equal(await sbx.files.read(`${dir}/a.txt`), 'hi there\n')
  const bin = Uint8Array.from([0, 1, 2, 255, 254, 10, 13, 0])
  await sbx.files.write(`${dir}/b.bin`, bin.buffer)
  assert.deepEqual(await sbx.files.read(`${dir}/b.bin`, { format: 'bytes' }), bin)
  const names = (await sbx.files.list(dir)).map((e) => e.name).sort()
  assert.deepEqual(names, ['a.txt', 'b.bin'])
  assert.equal(await sbx.files.exists(`${dir}/a.txt`), true)
  await sbx.files.rename(`${dir}/a.txt`, `${dir}/c.txt`)
  assert.equal(await sbx.files.exists(`${dir}/a.txt`), false)
  assert.equal(await sbx.files.read(`${dir}/c.txt`), 'hi there\n')
  await sbx.files.remove(`${dir}/c.txt`)
  assert.equal(await sbx.files.exists(`${dir}/c.txt`), false)
  await assert.rejects(sbx.files.read(`${dir}/missing`), NotFoundError)
})

test('files: 1 MB and 100 MB round trips', async () => {
  for (const size of [1 << 20, 100 << 20]) {
    const data = randomBytes(size)
    const path = `/home/user/big-${size}`
    await sbx.files.write(path, data.buffer.slice(data.byteOffset, data.byteOffset + size))
    const sum = (await sbx.commands.run(`sha256sum ${path}`)).stdout.split(' ')[0]
    assert.equal(sum, sha256(data), `sandbox sees the ${size}-byte file intact`)
    const back = await sbx.files.read(path, { format: 'bytes' })
    assert.equal(back.length, size)
    assert.equal(sha256(back), sha256(data), `the ${size}-byte file reads back intact`)
    await sbx.files.remove(path)
  }
})

test('watchDir: recursive events', async () => {
  const dir = `/home/user/w-${runID}`
  await sbx.files.makeDir(`${dir}/sub`)
  const events = []
  const w = await sbx.files.watchDir(dir, (e) => events.push(e), { recursive: true })
  try {
    await sbx.files.write(`${dir}/sub/x.txt`, 'x')
    await eventually('a watch event for sub/x.txt', () => events.some((e) => e.name.endsWith('x.txt')))
  } finally {
    await w.stop()
  }
})

test('files: metadata on write comes back from the write, getInfo and list', async () => {
  const dir = `/home/user/md-${runID}`
  const written = await sbx.files.write(`${dir}/a.txt`, 'a', { metadata: { Author: 'mish', purpose: 'compat test' } })
  const want = { author: 'mish', purpose: 'compat test' }
  assert.deepEqual(written.metadata, want)
  assert.deepEqual((await sbx.files.getInfo(`${dir}/a.txt`)).metadata, want)
  // Several files in one (multipart) upload all get it.
  const many = await sbx.files.write([{ path: `${dir}/b.txt`, data: 'b' }, { path: `${dir}/c.txt`, data: 'c' }], { metadata: { batch: '1' } })
  assert.equal(many.length, 2)
  const listed = Object.fromEntries((await sbx.files.list(dir)).map((e) => [e.name, e.metadata]))
  assert.deepEqual(listed, { 'a.txt': want, 'b.txt': { batch: '1' }, 'c.txt': { batch: '1' } })
  // It is stored as user.e2b.* xattrs, visible (and settable) in the sandbox.
  await sbx.commands.run(`python3 -c "import os; os.setxattr('${dir}/b.txt', 'user.e2b.inside', b'yes')"`)
  assert.equal((await sbx.files.getInfo(`${dir}/b.txt`)).metadata.inside, 'yes')
  // A rewrite without metadata clears it; one with metadata replaces it.
  await sbx.files.write(`${dir}/a.txt`, 'a2')
  assert.equal((await sbx.files.getInfo(`${dir}/a.txt`)).metadata, undefined)
  await sbx.files.write(`${dir}/c.txt`, 'c2', { metadata: { only: 'this' } })
  assert.deepEqual((await sbx.files.getInfo(`${dir}/c.txt`)).metadata, { only: 'this' })
  // Over the size budget: the sandbox refuses it with a 400 that says why.
  const big = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`k${i}`, 'v'.repeat(1000)]))
  await assert.rejects(sbx.files.write(`${dir}/big.txt`, 'x', { metadata: big }), (e) => {
    assert.ok(e instanceof InvalidArgumentError, `got ${e}`)
    assert.match(e.message, /larger than 4096 bytes/)
    return true
  })
  assert.equal(await sbx.files.exists(`${dir}/big.txt`), false)
})

test('files: gzip upload and download of a few MB', async () => {
  // Half random, half repetitive: both gzip paths do real work.
  const size = 4 << 20
  const data = Buffer.concat([randomBytes(size / 2), Buffer.alloc(size / 2, 'paddock ')])
  const path = `/home/user/gz-${runID}.bin`
  for (const useOctetStream of [true, false]) {
    await sbx.files.write(path, data.buffer.slice(data.byteOffset, data.byteOffset + size), { gzip: true, useOctetStream })
    const sum = (await sbx.commands.run(`sha256sum ${path}`)).stdout.split(' ')[0]
    assert.equal(sum, sha256(data), `gzip upload (octet-stream ${useOctetStream}) lands intact`)
    await sbx.commands.run(`rm ${path}`)
  }
  await sbx.files.write(path, data.buffer.slice(data.byteOffset, data.byteOffset + size), { gzip: true })
  const back = await sbx.files.read(path, { format: 'bytes', gzip: true })
  assert.equal(back.length, size)
  assert.equal(sha256(back), sha256(data), 'gzip download reads back intact')
  const chunks = []
  const reader = (await sbx.files.read(path, { format: 'stream', gzip: true })).getReader()
  for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value)
  const streamed = Buffer.concat(chunks)
  assert.equal(sha256(streamed), sha256(data), 'streamed gzip download reads back intact')
  // On the wire: gzip when asked for it in particular (the SDK's exact
  // header), identity for a generic "gzip, deflate".
  const raw = async (acceptEncoding) => new Promise((resolve, reject) => {
    const req = http.get({
      host: sandboxURL.hostname, port: sandboxURL.port, path: `/files?path=${encodeURIComponent(path)}`,
      headers: { 'Accept-Encoding': acceptEncoding, 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': sbx.envdAccessToken ?? '' },
    }, (res) => {
      const parts = []
      res.on('data', (d) => parts.push(d))
      res.on('end', () => resolve({ status: res.statusCode, encoding: res.headers['content-encoding'], body: Buffer.concat(parts) }))
    })
    req.on('error', reject)
  })
  const gz = await raw('gzip')
  assert.equal(gz.status, 200)
  assert.equal(gz.encoding, 'gzip')
  assert.ok(gz.body.length < size * 0.75, `compressed to ${gz.body.length} bytes`)
  assert.equal(sha256(gunzipSync(gz.body)), sha256(data))
  const plain = await raw('gzip, deflate')
  assert.equal(plain.encoding, undefined)
  assert.equal(sha256(plain.body), sha256(data))
  await sbx.files.remove(path)
})

test('watchDir: includeEntry puts the entry in events', async () => {
  const dir = `/home/user/we-${runID}`
  await sbx.files.makeDir(dir)
  const events = []
  const w = await sbx.files.watchDir(dir, (e) => events.push(e), { includeEntry: true })
  try {
    await sbx.files.write(`${dir}/e.txt`, 'hello', { metadata: { tag: 'watched' } })
    const ev = await eventually('a write event with the entry', () =>
      events.find((e) => e.name === 'e.txt' && e.type === 'write' && e.entry?.size === 5))
    assert.equal(ev.entry.name, 'e.txt')
    assert.equal(ev.entry.path, `${dir}/e.txt`)
    assert.equal(ev.entry.type, 'file')
    assert.equal(ev.entry.owner, 'user')
    assert.equal(ev.entry.permissions, '-rw-r--r--')
    assert.ok(ev.entry.modifiedTime instanceof Date)
    assert.deepEqual(ev.entry.metadata, { tag: 'watched' })
    await sbx.files.remove(`${dir}/e.txt`)
    const gone = await eventually('a remove event', () => events.find((e) => e.name === 'e.txt' && e.type === 'remove'))
    assert.equal(gone.entry, undefined, 'a removed file has no entry')
  } finally {
    await w.stop()
  }
  // Without the option, events carry no entry, as before.
  const plain = []
  const w2 = await sbx.files.watchDir(dir, (e) => plain.push(e))
  try {
    await sbx.files.write(`${dir}/p.txt`, 'p')
    await eventually('an event for p.txt', () => plain.some((e) => e.name === 'p.txt'))
    assert.ok(plain.every((e) => e.entry === undefined))
  } finally {
    await w2.stop()
  }
})

test('watchDir: allowNetworkMounts is accepted', async () => {
  const dir = `/home/user/wn-${runID}`
  await sbx.files.makeDir(dir)
  const events = []
  const w = await sbx.files.watchDir(dir, (e) => events.push(e), { allowNetworkMounts: true, recursive: true, includeEntry: true })
  try {
    await sbx.files.write(`${dir}/n.txt`, 'n')
    await eventually('an event for n.txt', () => events.some((e) => e.name === 'n.txt' && e.entry?.type === 'file'))
  } finally {
    await w.stop()
  }
})

test('pty: create, sendInput, resize, kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const enc = new TextEncoder()
  const p = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.sendInput(p.pid, enc.encode('echo pty-$((40+2))\n'))
  await eventually('pty output', () => out.includes('pty-42'))
  await sbx.pty.resize(p.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(p.pid, enc.encode('stty size\n'))
  await eventually('the new size', () => out.includes('30 100'))
  assert.equal(await sbx.pty.kill(p.pid), true)
})

test('setTimeout moves the end of life', async () => {
  await sbx.setTimeout(600_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt.getTime() > Date.now() + 500_000, `endAt ${info.endAt.toISOString()}`)
})

test('list filters by metadata and pages with x-next-token', async () => {
  const mine = await Sandbox.list({ query: { metadata: { suite: runID } } }).nextItems()
  assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
  assert.equal(mine[0].state, 'running')
  const none = await Sandbox.list({ query: { metadata: { suite: 'nobody' } } }).nextItems()
  assert.deepEqual(none, [])

  const other = await Sandbox.create('base', { metadata: { suite: runID }, timeoutMs: 120_000 })
  try {
    const pager = Sandbox.list({ query: { metadata: { suite: runID } }, limit: 1 })
    const seen = []
    while (pager.hasNext) seen.push(...(await pager.nextItems()))
    assert.deepEqual(seen.map((s) => s.sandboxId).sort(), [sbx.sandboxId, other.sandboxId].sort())
  } finally {
    await other.kill()
  }
})

test('getHost: an HTTP server in the sandbox is reachable', async () => {
  await sbx.files.write('/home/user/www/index.html', 'hello from the sandbox\n')
  await sbx.commands.run('cd /home/user/www && python3 -m http.server 8000', { background: true })
  // E2B_SANDBOX_URL mode: the daemon routes by E2B's headers.
  const body = await eventually('the server to answer', async () => {
    const r = await fetch(new URL('/index.html', sandboxURL), {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' },
    })
    return r.ok ? r.text() : undefined
  })
  assert.equal(body, 'hello from the sandbox\n')
  // Host-name mode: {port}-{id}.{domain}, exactly what getHost returns.
  const host = sbx.getHost(8000)
  assert.ok(host.startsWith(`8000-${sbx.sandboxId}.`), host)
  const viaHost = await new Promise((resolve, reject) => {
    const req = http.get({ host: sandboxURL.hostname, port: sandboxURL.port, path: '/index.html', headers: { Host: host } }, (res) => {
      let s = ''
      res.on('data', (d) => { s += d })
      res.on('end', () => resolve({ status: res.statusCode, body: s }))
    })
    req.on('error', reject)
  })
  assert.deepEqual(viaHost, { status: 200, body: 'hello from the sandbox\n' })
})

test('metrics come from the sandbox cgroup', async () => {
  const m = await sbx.getMetrics()
  assert.ok(m.length >= 1)
  assert.ok(m[0].memUsed > 0 && m[0].memTotal >= m[0].memUsed, JSON.stringify(m[0]))
  assert.ok(m[0].diskTotal > 0, JSON.stringify(m[0]))
})

test('pause, then connect: files kept', async () => {
  const s = await Sandbox.create('base', { timeoutMs: 120_000 })
  try {
    await s.files.write('/home/user/keep.txt', 'kept\n')
    assert.equal(await s.pause(), true)
    assert.equal(await s.pause(), false, 'pausing a paused sandbox reports false')
    const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
    assert.ok(listed.some((x) => x.sandboxId === s.sandboxId), 'listed as paused')
    const again = await Sandbox.connect(s.sandboxId)
    assert.equal(await again.files.read('/home/user/keep.txt'), 'kept\n')
    assert.equal((await again.getInfo()).state, 'running')
  } finally {
    await s.kill()
  }
})

test('kill, then the sandbox is gone', async () => {
  const s = await Sandbox.create('base', { timeoutMs: 60_000 })
  assert.equal(await s.kill(), true)
  assert.equal(await Sandbox.kill(s.sandboxId), false)
  await assert.rejects(Sandbox.getInfo(s.sandboxId), NotFoundError)
})
