// The unmodified `@e2b/code-interpreter` SDK against a real Paddock
// daemon. compat_test.go starts the daemon and sets E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY. runCode and the context calls go to port
// 49999 of the sandbox, which the daemon serves from Paddock's code
// contexts; the sandbox is the SDK's default template, code-interpreter-v1.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, NotFoundError, SandboxError, TimeoutError } from '@e2b/code-interpreter'

const runID = `ci${process.pid}${Date.now() % 100000}`
let sbx

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 300_000 })
})

after(async () => {
  await sbx?.kill()
})

// runCode starts a timer of requestTimeoutMs (60 s by default) that it
// clears only when the answer is a success, so every refused run would keep
// Node alive for a minute after the suite: runs expected to fail pass a
// short one.
const refused = { requestTimeoutMs: 3000 }

// A 1x1 PNG, as bytes a _repr_png_ returns.
const pngB64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

test('the default template is code-interpreter-v1', async () => {
  const info = await sbx.getInfo()
  assert.equal(info.templateId, 'code-interpreter-v1')
  assert.equal(info.state, 'running')
})

test('runCode keeps state in the default python context', async () => {
  const first = await sbx.runCode('x = 41')
  assert.equal(first.error, undefined)
  assert.deepEqual(first.results, [])
  const second = await sbx.runCode('x + 1')
  assert.equal(second.text, '42')
  assert.equal(second.results.length, 1)
  assert.equal(second.results[0].isMainResult, true)
  assert.equal(second.results[0].json, 42)
  assert.ok(second.executionCount > first.executionCount, `execution counts ${first.executionCount}, ${second.executionCount}`)
  // language: 'python' is the same default context.
  assert.equal((await sbx.runCode('x', { language: 'python' })).text, '41')
})

test('stdout and stderr: callbacks as the output comes, and logs', async () => {
  const out = []
  const err = []
  const exec = await sbx.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)\n"done"', {
    onStdout: (m) => out.push(m.line),
    onStderr: (m) => err.push(m.line),
  })
  assert.equal(out.join(''), 'out\n')
  assert.equal(err.join(''), 'err\n')
  assert.equal(exec.logs.stdout.join(''), 'out\n')
  assert.equal(exec.logs.stderr.join(''), 'err\n')
  assert.equal(exec.text, "'done'")

  // Output arrives while the run is still going: the code waits for a
  // file that the callback writes only once it has seen the first line.
  const flag = `/tmp/go-${runID}`
  let seen = false
  const streamed = await sbx.runCode(
    `import os, time\nprint("first", flush=True)\nwhile not os.path.exists(${JSON.stringify(flag)}): time.sleep(0.05)\n"released"`,
    {
      timeoutMs: 60_000,
      onStdout: async (m) => {
        if (!seen && m.line.includes('first')) {
          seen = true
          await sbx.files.write(flag, 'go')
        }
      },
    },
  )
  assert.equal(seen, true)
  assert.equal(streamed.text, "'released'")
})

test('an exception is execution.error, and the context keeps its state', async () => {
  let reported
  const exec = await sbx.runCode('def f():\n    raise ValueError("boom")\nprint("before")\nf()', {
    onError: (e) => { reported = e },
  })
  assert.ok(exec.error, 'no error')
  assert.equal(exec.error.name, 'ValueError')
  assert.equal(exec.error.value, 'boom')
  assert.match(exec.error.traceback, /in f/)
  assert.match(exec.error.traceback, /ValueError: boom/)
  assert.equal(reported?.name, 'ValueError')
  assert.equal(exec.logs.stdout.join(''), 'before\n')
  assert.equal((await sbx.runCode('x')).text, '41')
})

test('contexts: create, run in, list, restart, remove', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.match(ctx.id, /^[0-9a-f]{32}$/)
  assert.equal(ctx.language, 'python')
  assert.equal(ctx.cwd, '/tmp')

  assert.equal((await sbx.runCode('import os\ny = 5\nos.getcwd()', { context: ctx })).text, "'/tmp'")
  assert.equal((await sbx.runCode('y', { context: ctx })).text, '5')
  // Its own namespace: the default context's x is not there.
  assert.equal((await sbx.runCode('x', { context: ctx })).error?.name, 'NameError')

  const listed = await sbx.listCodeContexts()
  const mine = listed.find((c) => c.id === ctx.id)
  assert.deepEqual(mine, { id: ctx.id, language: 'python', cwd: '/tmp' })
  assert.ok(listed.some((c) => c.id === 'e2b-default-python'), `default context listed: ${JSON.stringify(listed)}`)

  await sbx.restartCodeContext(ctx)
  const after = await sbx.runCode('y', { context: ctx })
  assert.equal(after.error?.name, 'NameError', 'state survived the restart')
  assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, "'/tmp'", 'the restarted context kept its directory')

  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id), 'removed context still listed')
  await assert.rejects(sbx.runCode('1', { context: ctx, ...refused }), NotFoundError)
  await assert.rejects(sbx.removeCodeContext(ctx.id), NotFoundError)
  await assert.rejects(sbx.restartCodeContext(ctx.id), NotFoundError)
})

test('javascript needs node, which the base image lacks: a clear refusal', async () => {
  await assert.rejects(sbx.runCode('1 + 1', { language: 'javascript', ...refused }), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e}`)
    assert.match(e.message, /^400 .*node not found in this image/)
    return true
  })
  await assert.rejects(sbx.createCodeContext({ language: 'js' }), /node not found in this image/)
  await assert.rejects(sbx.runCode('1', { language: 'r', ...refused }), /400 language "r" is not supported/)
  await assert.rejects(sbx.createCodeContext({ language: 'typescript' }), /language "typescript" is not supported/)
})

test('timeoutMs: the SDK gives up, the run is interrupted, the context works on', async () => {
  const ctx = await sbx.createCodeContext()
  const started = Date.now()
  await assert.rejects(
    sbx.runCode('import time\nz = 1\ntime.sleep(10)\nz = 2', { context: ctx, timeoutMs: 1000 }),
    (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e}`)
      return true
    },
  )
  assert.ok(Date.now() - started < 5000, 'the timeout did not end the call')
  // The next run waits for the interrupted one, which stopped at the
  // interrupt rather than after its 10 s sleep.
  const next = await sbx.runCode('z', { context: ctx })
  assert.equal(next.text, '1')
  assert.ok(Date.now() - started < 8000, `the interrupted run went on: ${Date.now() - started} ms`)
  await sbx.removeCodeContext(ctx)
})

test('rich results: _repr_html_ and _repr_png_', async () => {
  const code = [
    'import base64',
    'class Pic:',
    `    def _repr_png_(self): return base64.b64decode(${JSON.stringify(pngB64)})`,
    '    def _repr_html_(self): return "<b>pic</b>"',
    '    def __repr__(self): return "Pic()"',
    'Pic()',
  ].join('\n')
  let seen
  const exec = await sbx.runCode(code, { onResult: (r) => { seen = r } })
  assert.equal(exec.error, undefined)
  const r = exec.results[0]
  assert.equal(r.isMainResult, true)
  assert.equal(r.text, 'Pic()')
  assert.equal(r.html, '<b>pic</b>')
  assert.equal(r.png, pngB64)
  assert.deepEqual(r.formats().sort(), ['html', 'png'])
  assert.equal(seen?.html, '<b>pic</b>')
})

test('envs apply to one run only', async () => {
  const exec = await sbx.runCode(
    'import os, subprocess\nprint(subprocess.run(["sh", "-c", "echo $RUN_VAR"], capture_output=True, text=True).stdout, end="")\nos.environ["RUN_VAR"]',
    { envs: { RUN_VAR: 'v1' } },
  )
  assert.equal(exec.text, "'v1'")
  assert.equal(exec.logs.stdout.join(''), 'v1\n')
  assert.equal((await sbx.runCode('"RUN_VAR" in os.environ')).text, 'False')
  await assert.rejects(sbx.runCode('1', { envs: { 'A=B': 'x' }, ...refused }), /environment variable name/)
})

test('runs on one context take turns', async () => {
  const started = Date.now()
  const [a, b] = await Promise.all([
    sbx.runCode('import time\ntime.sleep(1)\norder = ["a"]\n"a"'),
    new Promise((r) => setTimeout(r, 200)).then(() => sbx.runCode('order.append("b")\norder')),
  ])
  assert.equal(a.text, "'a'")
  assert.equal(b.text, "['a', 'b']")
  assert.ok(Date.now() - started >= 1000)
})

test('runCode needs the access token; context calls follow the port rules', async () => {
  const url = new URL('/execute', process.env.E2B_SANDBOX_URL)
  const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', 'Content-Type': 'application/json' }
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ code: 'x' }) })
  assert.equal(res.status, 401)
  assert.match(res.statusText, /envdAccessToken/)
  const bad = await fetch(url, { method: 'POST', headers: { ...headers, 'X-Access-Token': 'wrong' }, body: JSON.stringify({ code: 'x' }) })
  assert.equal(bad.status, 401)
  // The SDK sends no access token with its context calls.
  const list = await fetch(new URL('/contexts', process.env.E2B_SANDBOX_URL), { headers })
  assert.equal(list.status, 200)
  assert.ok(Array.isArray(await list.json()))
})
