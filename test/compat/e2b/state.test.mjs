// The unmodified `e2b` SDK's snapshot, fork, network and secret calls
// against a real Paddock daemon. compat_test.go starts the daemon with an
// upstream in a network namespace of the test's own, and names it:
// E2B_COMPAT_ALLOWED, _OTHER and _DENIED answer plain HTTP on port 80,
// E2B_COMPAT_API answers HTTPS with a digest of the Authorization header it
// got, and E2B_COMPAT_LOOPBACK resolves to 127.0.0.1 (forbidden whatever
// the rules say). No other address is ever contacted.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { Sandbox, Secret, ALL_TRAFFIC } from 'e2b'

const env = process.env
const ALLOWED = env.E2B_COMPAT_ALLOWED
const OTHER = env.E2B_COMPAT_OTHER
const DENIED = env.E2B_COMPAT_DENIED
const API = env.E2B_COMPAT_API
const LOOPBACK = env.E2B_COMPAT_LOOPBACK
const ADDR = env.E2B_COMPAT_ADDR
const ADDR_OTHER = env.E2B_COMPAT_ADDR_OTHER
const sandboxURL = new URL(env.E2B_SANDBOX_URL)
const runID = `st${process.pid}${Date.now() % 100000}`
const sha256 = (s) => createHash('sha256').update(s).digest('hex')

// sh runs a command and returns its output and exit status, whatever the
// status: the network checks look at failures as much as at successes.
async function sh(s, cmd) {
  const r = await s.commands.run(`${cmd} 2>&1; echo "exit=$?"`, { timeoutMs: 60_000 })
  return r.stdout.trim()
}

// fetchIn fetches a URL from inside the sandbox with curl, which honours
// the proxy variables Paddock sets, and prints the body and the status.
const fetchIn = (s, url, args = '') => sh(s, `curl -sS --max-time 20 -w ' status=%{http_code}' ${args} ${url}`)

// detail is E2B's raw GET /sandboxes/{id}, which carries the tokens.
async function detail(id) {
  const r = await fetch(new URL(`/sandboxes/${id}`, env.E2B_API_URL), { headers: { 'X-API-Key': env.E2B_API_KEY } })
  assert.equal(r.status, 200)
  return r.json()
}

// health is the status of envd's /health through the data plane with a token.
async function health(id, token) {
  const r = await fetch(new URL('/health', sandboxURL), { headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': token } })
  await r.arrayBuffer()
  return r.status
}

async function withSandbox(template, opts, fn) {
  const s = await Sandbox.create(template, { timeoutMs: 300_000, ...opts })
  try {
    return await fn(s)
  } finally {
    await s.kill()
  }
}

test('createSnapshot, then create from it: files kept, processes not', async () => {
  await withSandbox('base', { metadata: { suite: runID } }, async (src) => {
    await src.files.write('/home/user/state.json', '{"step": 1}')
    await src.commands.run('sleep 600', { background: true })
    // Whether a process whose program is sleep runs (this check's own
    // command line names it only inside its arguments).
    const sleeping = `python3 -c "import os; print(any(open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')[0].endswith(b'sleep') for p in os.listdir('/proc') if p.isdigit()))"`
    // A background command starts as a shell that then runs sleep: wait
    // for the sleep (a loaded machine may take a moment).
    let running = ''
    for (let i = 0; i < 50 && running !== 'True\nexit=0'; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100))
      running = await sh(src, sleeping)
    }
    assert.equal(running, 'True\nexit=0', 'the check sees the source\'s sleep')
    const name = `snap-${runID}`
    const snap = await src.createSnapshot({ name })
    assert.match(snap.snapshotId, /^[a-z0-9]+$/)
    assert.deepEqual(snap.names, [name])
    assert.equal((await src.getInfo()).state, 'running', 'the source runs on after the snapshot')

    await withSandbox(snap.snapshotId, {}, async (copy) => {
      assert.equal(await copy.files.read('/home/user/state.json'), '{"step": 1}')
      assert.equal((await copy.getInfo()).templateId, snap.snapshotId)
      // Memory and processes are not part of a snapshot: the copy starts
      // fresh processes on the files.
      assert.equal(await sh(copy, sleeping), 'False\nexit=0')
      // Its files are its own.
      await copy.files.write('/home/user/state.json', '{"step": 2}')
      assert.equal(await src.files.read('/home/user/state.json'), '{"step": 1}')
    })
    // By name too.
    await withSandbox(name, {}, async (byName) => {
      assert.equal(await byName.files.read('/home/user/state.json'), '{"step": 1}')
    })

    // Listing: the sandbox's own, everyone's with paging, by name.
    const own = await src.listSnapshots().nextItems()
    assert.deepEqual(own.map((s) => s.snapshotId), [snap.snapshotId])
    const second = await src.createSnapshot()
    assert.deepEqual(second.names, [])
    const pager = Sandbox.listSnapshots({ limit: 1 })
    const seen = []
    while (pager.hasNext) seen.push(...(await pager.nextItems()))
    for (const id of [snap.snapshotId, second.snapshotId]) {
      assert.ok(seen.some((s) => s.snapshotId === id), `${id} listed`)
    }
    const named = await Sandbox.listSnapshots({ name }).nextItems()
    assert.deepEqual(named.map((s) => s.snapshotId), [snap.snapshotId])
    await assert.rejects(src.createSnapshot({ name }), /409: you already have a snapshot named "[^"]+"/)

    assert.equal(await Sandbox.deleteSnapshot(second.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(second.snapshotId), false)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.deepEqual(await src.listSnapshots().nextItems(), [])
  })
})

test('fork: independent copies with tokens of their own', async () => {
  await withSandbox('base', { metadata: { suite: runID, role: 'source' } }, async (src) => {
    await src.files.write('/home/user/f.txt', 'before the fork')
    const forks = await src.fork({ count: 2, timeoutMs: 120_000 })
    assert.equal(forks.length, 2)
    try {
      for (const f of forks) assert.ok(f instanceof Sandbox, `fork failed: ${f}`)
      const [a, b] = forks
      assert.equal(new Set([src.sandboxId, a.sandboxId, b.sandboxId]).size, 3)
      const infos = await Promise.all([src, a, b].map((s) => Sandbox.getInfo(s.sandboxId)))
      assert.deepEqual(infos[1].metadata, { suite: runID, role: 'source' })
      assert.ok(infos[1].endAt.getTime() < Date.now() + 130_000, 'the fork has the timeout it was given')
      for (const f of [a, b]) assert.equal(await f.files.read('/home/user/f.txt'), 'before the fork')
      await a.files.write('/home/user/f.txt', 'changed in a')
      assert.equal(await b.files.read('/home/user/f.txt'), 'before the fork')
      assert.equal(await src.files.read('/home/user/f.txt'), 'before the fork')
      // Each copy has its own envd token: the source's opens none of them.
      const [srcToken, aToken, bToken] = await Promise.all([src, a, b].map(async (s) => (await detail(s.sandboxId)).envdAccessToken))
      assert.equal(new Set([srcToken, aToken, bToken]).size, 3)
      assert.equal(await health(a.sandboxId, srcToken), 401, 'the source token opened a fork')
      assert.ok((await health(a.sandboxId, aToken)) < 300, "the fork's own token opens it")
    } finally {
      for (const f of forks) if (f instanceof Sandbox) await f.kill()
    }
  })
  await assert.rejects(Sandbox.fork('nosuchsandbox', { count: 1 }), /not found/i)
})

test('network: allowOut reaches a host, denyOut and everything else refused', async () => {
  await withSandbox('base', { network: { allowOut: [ALLOWED], denyOut: [DENIED] } }, async (s) => {
    assert.match(await fetchIn(s, `http://${ALLOWED}/`), new RegExp(`upstream says hello to ${ALLOWED} status=200`))
    assert.match(await fetchIn(s, `http://${DENIED}/`), new RegExp(`refused by rule deny:${DENIED}.*status=403`, 's'))
    assert.match(await fetchIn(s, `http://${OTHER}/`), /refused by rule default-deny.*status=403/s)
    const info = await s.getInfo()
    assert.equal(info.allowInternetAccess, false)
    assert.deepEqual(info.network.allowOut, [ALLOWED])
    assert.deepEqual(info.network.denyOut, [ALL_TRAFFIC, DENIED])
    assert.equal(info.network.allowPublicTraffic, true)

    // At run time: the rules change at once.
    await s.updateNetwork({ allowOut: [OTHER], denyOut: [ALL_TRAFFIC] })
    assert.match(await fetchIn(s, `http://${OTHER}/`), /status=200/)
    assert.match(await fetchIn(s, `http://${ALLOWED}/`), /default-deny.*status=403/s)
    const after = await s.getInfo()
    assert.deepEqual(after.network.allowOut, [OTHER])
    assert.deepEqual(after.network.denyOut, [ALL_TRAFFIC])
    // A fork keeps the network as it is now.
    const [f] = await s.fork({ timeoutMs: 120_000 })
    try {
      assert.ok(f instanceof Sandbox, `fork failed: ${f}`)
      assert.deepEqual((await f.getInfo()).network.allowOut, [OTHER])
      assert.match(await fetchIn(f, `http://${OTHER}/`), /status=200/)
      assert.match(await fetchIn(f, `http://${ALLOWED}/`), /default-deny.*status=403/s)
    } finally {
      if (f instanceof Sandbox) await f.kill()
    }
    // allow_internet_access: false on a sandbox with a network: nothing allowed.
    await s.updateNetwork({ allowInternetAccess: false })
    assert.match(await fetchIn(s, `http://${OTHER}/`), /default-deny.*status=403/s)
  })
})

test('network: denyOut ALL_TRAFFIC and allowOut an address reach exactly that address', async () => {
  await withSandbox('base', { network: { denyOut: [ALL_TRAFFIC], allowOut: [ADDR] } }, async (s) => {
    // Directly (any port, past the proxy) and through the proxy alike.
    assert.match(await fetchIn(s, `http://${ADDR}:8080/`, "--noproxy '*'"), new RegExp(`direct to ${ADDR} status=200`))
    assert.match(await fetchIn(s, `http://${ADDR}:8080/`), new RegExp(`direct to ${ADDR} status=200`))
    assert.match(await fetchIn(s, `http://${ADDR_OTHER}:8080/`, "--noproxy '*' --max-time 5"), /status=000.*exit=28/s)
    assert.match(await fetchIn(s, `http://${ADDR_OTHER}:8080/`), /refused by rule direct-ip.*status=403/s)
    assert.match(await fetchIn(s, `http://${ALLOWED}/`), /default-deny.*status=403/s)
    const info = await s.getInfo()
    assert.equal(info.allowInternetAccess, false)
    assert.deepEqual(info.network.allowOut, [ADDR])
    assert.deepEqual(info.network.denyOut, [ALL_TRAFFIC])

    // At run time, a CIDR block for the other host, a deny for the first.
    await s.updateNetwork({ allowOut: [`${ADDR_OTHER}/30`], denyOut: [ALL_TRAFFIC, ADDR] })
    assert.match(await fetchIn(s, `http://${ADDR_OTHER}:8080/`, "--noproxy '*'"), /status=200/)
    assert.match(await fetchIn(s, `http://${ADDR}:8080/`, "--noproxy '*' --max-time 5"), /status=000.*exit=28/s)
    const after = await s.getInfo()
    assert.deepEqual(after.network.denyOut, [ALL_TRAFFIC, ADDR])

    // Where an allowOut block and a denyOut block overlap, allowOut wins, as
    // on E2B: the block holding both hosts is allowed, the denied host in it too.
    await s.updateNetwork({ allowOut: [`${ADDR}/29`], denyOut: [ALL_TRAFFIC, ADDR_OTHER] })
    for (const a of [ADDR, ADDR_OTHER]) {
      assert.match(await fetchIn(s, `http://${a}:8080/`, "--noproxy '*'"), new RegExp(`direct to ${a} status=200`))
    }
    // A denied block holding an allowed address: that address alone.
    await s.updateNetwork({ allowOut: [ADDR], denyOut: [ALL_TRAFFIC, `${ADDR}/29`] })
    assert.match(await fetchIn(s, `http://${ADDR}:8080/`, "--noproxy '*'"), new RegExp(`direct to ${ADDR} status=200`))
    assert.match(await fetchIn(s, `http://${ADDR_OTHER}:8080/`, "--noproxy '*' --max-time 5"), /status=000.*exit=28/s)
  })
})

test('network: allowInternetAccess reaches any name, never a forbidden address', async () => {
  await withSandbox('base', { allowInternetAccess: true, network: { denyOut: [DENIED] } }, async (s) => {
    for (const h of [ALLOWED, OTHER]) assert.match(await fetchIn(s, `http://${h}/`), /status=200/)
    assert.match(await fetchIn(s, `http://${DENIED}/`), /deny:.*status=403/s)
    assert.match(await fetchIn(s, `http://${LOOPBACK}/`), /forbidden-address.*status=403/s)
    const info = await s.getInfo()
    assert.equal(info.allowInternetAccess, true)
    assert.deepEqual(info.network.allowOut, [ALL_TRAFFIC])
    assert.deepEqual(info.network.denyOut, [DENIED])
  })
})

test('network: allowInternetAccess false, or nothing said, is no network', async () => {
  for (const opts of [{ allowInternetAccess: false }, {}]) {
    await withSandbox('base', opts, async (s) => {
      const out = await fetchIn(s, `http://${ALLOWED}/`)
      assert.doesNotMatch(out, /exit=0/, `reached the upstream: ${out}`)
      assert.match(out, /Could not resolve host/)
      assert.equal(await sh(s, 'ls /sys/class/net'), 'lo\nexit=0')
      const info = await s.getInfo()
      assert.equal(info.allowInternetAccess, false)
      assert.deepEqual(info.network.allowOut, [])
      assert.deepEqual(info.network.denyOut, [ALL_TRAFFIC])
      await assert.rejects(s.updateNetwork({ allowOut: [ALLOWED] }), /409: .*has no network/)
      await s.updateNetwork({ allowInternetAccess: false }) // asks for what it has
    })
  }
})

test('network: what cannot be honoured is refused, naming the field', async () => {
  const cases = [
    [{ network: { allowOut: ['2001:db8::1'] } }, /400: network.allowOut: .*IPv6 is not supported/],
    [{ network: { denyOut: ['1.2.3.4/33'] } }, /400: network.denyOut: .*not an IPv4 address or CIDR block/],
    [{ network: { allowOut: ['169.254.169.254'] } }, /400: .*never reachable/],
    [{ network: { egressProxy: { address: 'proxy.example:1080' } } }, /400: network.egressProxy is not supported/],
    [{ network: { allowOut: [ALLOWED], denyOut: [ALLOWED] } }, /400: .*in both allowOut and denyOut/],
    [{ network: { rules: { '*': [{ transform: { headers: { A: 'b' } } }] } } }, /400: network.rules/],
    [{ network: { httpsPorts: [49983] } }, /400: network.httpsPorts/],
  ]
  for (const [opts, want] of cases) {
    await assert.rejects(Sandbox.create('base', { timeoutMs: 60_000, ...opts }), want)
  }
})

test('secrets and transform rules: the header is injected, the sandbox never sees the value', async () => {
  const name = `tok-${runID}`.toLowerCase()
  const value = `pdk-${randomBytes(16).toString('hex')}`
  const info = await Secret.create(name, value)
  assert.equal(info.name, name)
  assert.equal(info.secretId, `sec_${name}`)
  assert.deepEqual(info.metadata, {})
  assert.equal(JSON.stringify(info).includes(value), false)
  assert.equal((await Secret.getInfo(name)).secretId, info.secretId)
  assert.equal((await Secret.getInfo(info.secretId)).name, name)
  assert.equal(await Secret.exists(name), true)
  const listed = []
  for (const pager = Secret.list({ limit: 1 }); pager.hasNext;) listed.push(...(await pager.nextItems()))
  assert.ok(listed.some((s) => s.name === name), 'listed')
  assert.equal(JSON.stringify(listed).includes(value), false)
  await assert.rejects(Secret.create(name, 'again'), /409/)

  const rules = { [API]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }] }
  try {
    await withSandbox('base', { network: { allowOut: [API], rules } }, async (s) => {
      const got = await fetchIn(s, `https://${API}/`)
      assert.match(got, new RegExp(`auth-sha256=${sha256(`Bearer ${value}`)} status=200`))
      assert.equal(got.includes(value), false)
      assert.equal((await sh(s, 'env; cat /proc/1/environ')).includes(value), false)
      const sinfo = await s.getInfo()
      assert.equal(sinfo.network.rules[API][0].transform.headers.Authorization, `Bearer \${e2b.secrets.${name}}`)
      assert.equal(JSON.stringify(sinfo).includes(value), false)

      // A new value is used from the next request on.
      const next = `pdk-${randomBytes(16).toString('hex')}`
      await Secret.update(name, next)
      assert.match(await fetchIn(s, `https://${API}/`), new RegExp(`auth-sha256=${sha256(`Bearer ${next}`)}`))
      // A secret a sandbox's rules name is kept.
      await assert.rejects(Secret.destroy(name), /409: .*used by injection rules/)

      // Dropping the rules (left out of the update) stops the injection,
      // and the interception: the sandbox now sees the upstream's own
      // certificate, so it needs the upstream's CA.
      await s.updateNetwork({ allowOut: [API] })
      await s.files.write('/tmp/upstream-ca.pem', env.E2B_COMPAT_UPSTREAM_CA)
      assert.match(await fetchIn(s, `https://${API}/`, '--cacert /tmp/upstream-ca.pem'), /auth=none status=200/)
      assert.equal((await s.getInfo()).network.rules, undefined)
    })
  } finally {
    assert.equal(await Secret.destroy(name), true)
  }
  assert.equal(await Secret.exists(name), false)
  assert.equal(await Secret.destroy(name), false)
  await assert.rejects(Secret.update(name, 'x'), /not found/)
})

test('maskRequestHost and httpsPorts: how the data plane reaches a port', async () => {
  await withSandbox('base', { network: { maskRequestHost: 'localhost:${PORT}', httpsPorts: [8443] } }, async (s) => {
    await s.files.write('/tmp/tls/cert.pem', env.E2B_COMPAT_TLS_CERT)
    await s.files.write('/tmp/tls/key.pem', env.E2B_COMPAT_TLS_KEY)
    const server = `
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("host=%s tls=%s" % (self.headers["Host"], sys.argv[2])).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
if sys.argv[2] == "yes":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain("/tmp/tls/cert.pem", "/tmp/tls/key.pem")
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
`
    await s.files.write('/tmp/srv.py', server)
    await s.commands.run('python3 /tmp/srv.py 8443 yes', { background: true })
    await s.commands.run('python3 /tmp/srv.py 8080 no', { background: true })
    const get = async (port) => {
      const deadline = Date.now() + 20_000
      for (;;) {
        const r = await fetch(new URL('/', sandboxURL), { headers: { 'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': String(port) } })
        if (r.ok || Date.now() > deadline) return `${r.status} ${await r.text()}`
        await new Promise((res) => setTimeout(res, 200))
      }
    }
    assert.equal(await get(8443), '200 host=localhost:8443 tls=yes')
    assert.equal(await get(8080), '200 host=localhost:8080 tls=no')
    const info = await s.getInfo()
    assert.equal(info.network.maskRequestHost, 'localhost:${PORT}')
    assert.deepEqual(info.network.httpsPorts, [8443])
  })
})
