// Signed file URLs of a secure sandbox (uploadUrl, downloadUrl), run once
// per `e2b` release named by E2B_SDK, as conformance.test.mjs is. The URL
// the SDK returns is fetched with nothing but the sandbox's address: under
// E2B_SANDBOX_URL the SDK's URL does not name the sandbox (the SDK sends
// E2b-Sandbox-Id and E2b-Sandbox-Port with its own requests), so those two
// routing headers are added, or the sandbox is named by a
// {port}-{id}.{domain} Host, which is what E2B's URL carries in its host
// name. No access token is ever sent: the signature is the credential.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'

const sdkName = process.env.E2B_SDK || 'e2b'
const { Sandbox } = await import(sdkName)

const sandboxURL = new URL(process.env.E2B_SANDBOX_URL)
const made = []

async function create(opts = {}) {
  const s = await Sandbox.create('busybox', { timeoutMs: 120_000, ...opts })
  made.push(s.sandboxId)
  return s
}

after(async () => {
  for (const id of made) {
    await Sandbox.kill(id).catch(() => {})
  }
})

// fetchSigned fetches a URL the SDK made, addressed to the sandbox by the
// routing headers only.
function fetchSigned(s, url, init = {}) {
  const u = new URL(url)
  assert.equal(u.origin, sandboxURL.origin, 'the SDK builds file URLs on E2B_SANDBOX_URL')
  return fetch(u, { ...init, headers: { ...init.headers, 'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': '49983' } })
}

async function errorBody(res) {
  return { status: res.status, body: JSON.parse(await res.text()) }
}

test(`${sdkName}: downloadUrl of a secure sandbox is signed and opens the file alone`, async () => {
  const s = await create({ secure: true })
  await s.files.write('hello.txt', 'hello world')
  const url = await s.downloadUrl('hello.txt', { useSignatureExpiration: 10_000 })
  const q = new URL(url).searchParams
  assert.match(q.get('signature'), /^v1_[A-Za-z0-9+/]{43}$/)
  assert.ok(Number(q.get('signature_expiration')) > Date.now() / 1000)
  const res = await fetchSigned(s, url)
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'hello world')

  // Without an expiration the URL is signed all the same.
  const forever = await s.downloadUrl('hello.txt')
  assert.equal(new URL(forever).searchParams.has('signature_expiration'), false)
  assert.equal(await (await fetchSigned(s, forever)).text(), 'hello world')

  // By host name, as getHost addresses a port: no header but Host.
  const viaHost = await new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.get({ host: sandboxURL.hostname, port: sandboxURL.port, path: u.pathname + u.search, headers: { Host: s.getHost(49983) } }, (res) => {
      let b = ''
      res.on('data', (d) => { b += d })
      res.on('end', () => resolve({ status: res.statusCode, body: b }))
    })
    req.on('error', reject)
  })
  assert.deepEqual(viaHost, { status: 200, body: 'hello world' })

  // The signature names the path, the operation and the user.
  const other = new URL(url)
  other.searchParams.set('path', '/etc/passwd')
  assert.deepEqual(await errorBody(await fetchSigned(s, other)), { status: 401, body: { code: 401, message: 'invalid signature' } })
  const asRoot = new URL(url)
  asRoot.searchParams.set('username', 'root')
  assert.equal((await fetchSigned(s, asRoot)).status, 401)
  assert.equal((await fetchSigned(s, url, { method: 'POST', body: new FormData() })).status, 401, 'a read URL does not write')
})

test(`${sdkName}: uploadUrl of a secure sandbox writes with a multipart form`, async () => {
  const s = await create({ secure: true })
  const url = await s.uploadUrl('up.txt', { useSignatureExpiration: 10_000 })
  const form = new FormData()
  form.append('file', 'file content')
  // An Authorization header would choose a user the URL was not signed
  // for: the file is still the default user's.
  const res = await fetchSigned(s, url, { method: 'POST', body: form, headers: { Authorization: 'Basic ' + btoa('root:') } })
  assert.equal(res.status, 200)
  const [entry, ...rest] = JSON.parse(await res.text())
  assert.deepEqual(rest, [])
  assert.equal(entry.name, 'up.txt')
  assert.equal(entry.type, 'file')
  assert.notEqual(entry.path, '/root/up.txt')
  assert.equal(await s.files.read(entry.path), 'file content')

  const root = await s.uploadUrl('up.txt', { user: 'root', useSignatureExpiration: 10_000 })
  const form2 = new FormData()
  form2.append('file', 'as root')
  const res2 = await fetchSigned(s, root, { method: 'POST', body: form2 })
  assert.equal(res2.status, 200)
  assert.equal(JSON.parse(await res2.text())[0].path, '/root/up.txt')
  assert.equal(await s.files.read('/root/up.txt', { user: 'root' }), 'as root')
})

test(`${sdkName}: a tampered or expired signature is refused as envd refuses it`, async () => {
  const s = await create({ secure: true })
  await s.files.write('hello.txt', 'hello world')
  const url = new URL(await s.downloadUrl('hello.txt', { useSignatureExpiration: 10_000 }))
  const sig = url.searchParams.get('signature')
  url.searchParams.set('signature', sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A'))
  assert.deepEqual(await errorBody(await fetchSigned(s, url)), { status: 401, body: { code: 401, message: 'invalid signature' } })

  const expired = await s.downloadUrl('hello.txt', { useSignatureExpiration: -10_000 })
  assert.deepEqual(await errorBody(await fetchSigned(s, expired)), { status: 401, body: { code: 401, message: 'signature is already expired' } })
  const expiredUpload = await s.uploadUrl('hello.txt', { useSignatureExpiration: -100_000 })
  const form = new FormData()
  form.append('file', 'overwritten')
  assert.deepEqual(await errorBody(await fetchSigned(s, expiredUpload, { method: 'POST', body: form })), { status: 401, body: { code: 401, message: 'signature is already expired' } })
  assert.equal(await s.files.read('hello.txt'), 'hello world')

  const bare = new URL(url)
  bare.searchParams.delete('signature')
  bare.searchParams.delete('signature_expiration')
  assert.deepEqual(await errorBody(await fetchSigned(s, bare)), { status: 401, body: { code: 401, message: 'missing signature query parameter' } })

  // A signature of one sandbox opens nothing in another.
  const other = await create({ secure: true })
  await other.files.write('hello.txt', 'other')
  assert.equal((await fetchSigned(other, await s.downloadUrl('hello.txt'))).status, 401)
})

test(`${sdkName}: a sandbox that is not secure serves unsigned file URLs`, async () => {
  // From 2.51 on the SDK has no secure option (every sandbox it creates is
  // secure); E2B's API still takes secure: false, and connect then hands
  // the SDK no token.
  const r = await fetch(new URL('/sandboxes', process.env.E2B_API_URL), {
    method: 'POST',
    headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'busybox', timeout: 120, secure: false }),
  })
  assert.equal(r.status, 201)
  const { sandboxID, envdAccessToken } = await r.json()
  made.push(sandboxID)
  assert.equal(envdAccessToken ?? '', '')
  const s = await Sandbox.connect(sandboxID)
  await s.files.write('hello.txt', 'open')
  const url = await s.downloadUrl('hello.txt')
  assert.equal(new URL(url).searchParams.has('signature'), false)
  const res = await fetchSigned(s, url)
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'open')
  const form = new FormData()
  form.append('file', 'written')
  const up = await fetchSigned(s, await s.uploadUrl('w.txt'), { method: 'POST', body: form })
  assert.equal(up.status, 200)
  assert.equal(await s.files.read('w.txt'), 'written')
})
