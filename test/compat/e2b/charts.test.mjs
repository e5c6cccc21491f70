// Charts and data frames through the unmodified `@e2b/code-interpreter`
// SDK, run once per release named by E2B_CI_SDK (an npm alias in
// package.json: `@e2b/code-interpreter` is the newest pinned release,
// `code-interpreter-2-7`, 2.7.0, the oldest that works: earlier releases
// send runCode to https://49999-<id>.<domain> whatever E2B_SANDBOX_URL says,
// and the 1.x releases need an `e2b` 1.x, which reads neither variable). The sandbox is the SDK's
// default template, code-interpreter-v1, which is Paddock's
// code-interpreter image (numpy, pandas and matplotlib from Debian).
// compat_test.go starts the daemon and sets E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'

const sdkName = process.env.E2B_CI_SDK || '@e2b/code-interpreter'
const { Sandbox } = await import(sdkName)

const pngMagic = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
let sbx

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 300_000 })
})

after(async () => {
  await sbx?.kill()
})

function assertPNG(b64, what) {
  assert.equal(typeof b64, 'string', `${what}: no png field`)
  const raw = Buffer.from(b64, 'base64')
  assert.ok(raw.length > 1000, `${what}: a PNG of ${raw.length} bytes`)
  assert.deepEqual(raw.subarray(0, 8), pngMagic, `${what}: not a PNG`)
}

test(`${sdkName}: the default template is the code-interpreter image, with its packages`, async () => {
  assert.equal((await sbx.getInfo()).templateId, 'code-interpreter-v1')
  const r = await sbx.runCode('import numpy, pandas, matplotlib\nnumpy.arange(4).sum()')
  assert.equal(r.error, undefined, r.error?.traceback)
  assert.equal(r.text, '6')
})

test(`${sdkName}: plt.show() of a plot comes back as a PNG result`, async () => {
  const stderr = []
  const r = await sbx.runCode(
    [
      'import matplotlib.pyplot as plt',
      'import numpy as np',
      'x = np.linspace(0, 6.3, 50)',
      'plt.plot(x, np.sin(x))',
      'plt.title("sine")',
      'plt.show()',
    ].join('\n'),
    { onStderr: (m) => stderr.push(m.line ?? String(m)) },
  )
  assert.equal(r.error, undefined, r.error?.traceback)
  const charts = r.results.filter((x) => x.png)
  assert.equal(charts.length, 1, `results: ${JSON.stringify(r.results.map((x) => x.formats()))}`)
  assertPNG(charts[0].png, 'plt.show()')
  assert.match(charts[0].text, /^<Figure size \d+x\d+ with 1 Axes>$/)
  assert.ok(!charts[0].isMainResult, 'a shown figure is not the value of the code')
  assert.deepEqual(stderr, [], 'plt.show() warned')
  // Shown figures are closed, as in a notebook: the next run has none.
  assert.deepEqual((await sbx.runCode('1 + 1')).results.map((x) => x.text), ['2'])
})

test(`${sdkName}: a figure as the last expression is the main result, once`, async () => {
  const r = await sbx.runCode(
    ['import matplotlib.pyplot as plt', 'fig, ax = plt.subplots()', 'ax.bar(["a", "b"], [3, 5])', 'fig'].join('\n'),
  )
  assert.equal(r.error, undefined, r.error?.traceback)
  assert.equal(r.results.length, 1, `results: ${JSON.stringify(r.results.map((x) => x.formats()))}`)
  assert.ok(r.results[0].isMainResult)
  assertPNG(r.results[0].png, 'last-expression figure')
})

test(`${sdkName}: a pandas DataFrame comes back as text and HTML`, async () => {
  const r = await sbx.runCode(
    ['import pandas as pd', 'pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [4, 19]})'].join('\n'),
  )
  assert.equal(r.error, undefined, r.error?.traceback)
  assert.equal(r.results.length, 1)
  const df = r.results[0]
  assert.ok(df.isMainResult)
  assert.match(df.text, /city\s+temp/)
  assert.match(df.text, /Lima\s+19/)
  assert.match(df.html, /<table[^>]*class="dataframe/)
  assert.match(df.html, /<td>Oslo<\/td>/)
})
